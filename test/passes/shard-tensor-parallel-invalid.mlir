// RUN: mlc-opt %s -split-input-file -verify-diagnostics --mlc-shard-tensor-parallel=size=2

// Three heads cannot be split over two ranks.
func.func @forward(%x: tensor<1x4x12xf32> {mlc.input = "x"},
                   %w: tensor<12x36xf32> {mlc.param = "c_attn.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %0 = mlc.matmul %x, %w : tensor<1x4x12xf32>, tensor<12x36xf32>
  %1:3 = mlc.split %0 axis = 2 sizes = [12, 12, 12] : tensor<1x4x36xf32>
  %2 = mlc.reshape %1#0 : tensor<1x4x12xf32> -> tensor<1x3x4x4xf32>
  %3 = mlc.reshape %1#1 : tensor<1x4x12xf32> -> tensor<1x3x4x4xf32>
  %4 = mlc.reshape %1#2 : tensor<1x4x12xf32> -> tensor<1x3x4x4xf32>
  // expected-error @+1 {{num_attention_heads = 3 is not divisible by the tensor-parallel size 2}}
  %5 = mlc.attention %2, %3, %4 causal : tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>
  %l = mlc.reduce_sum %5 axes = [0, 1, 2, 3] : tensor<1x3x4x4xf32>
  return %l : tensor<f32>
}

// -----

// Multi-query attention: one KV head cannot be split over two ranks (and
// replicating it is not supported yet).
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %wq: tensor<8x8xf32> {mlc.param = "q_proj.weight"},
                   %wk: tensor<4x8xf32> {mlc.param = "k_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %0 = mlc.matmul %x, %wq transpose_rhs : tensor<1x4x8xf32>, tensor<8x8xf32>
  %1 = mlc.reshape %0 : tensor<1x4x8xf32> -> tensor<1x2x4x4xf32>
  %2 = mlc.matmul %x, %wk transpose_rhs : tensor<1x4x8xf32>, tensor<4x8xf32>
  %3 = mlc.reshape %2 : tensor<1x4x4xf32> -> tensor<1x1x4x4xf32>
  // expected-error @+1 {{num_key_value_heads = 1 is not divisible by the tensor-parallel size 2}}
  %4 = mlc.attention %1, %3, %3 causal : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  %l = mlc.reduce_sum %4 axes = [0, 1, 2, 3] : tensor<1x2x4x4xf32>
  return %l : tensor<f32>
}

// -----

// An MLP of 5 hidden units cannot be split over two ranks.
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %w1: tensor<8x5xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<5x8xf32> {mlc.param = "c_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  // expected-error @+1 {{intermediate_size = 5 is not divisible by the tensor-parallel size 2}}
  %h = mlc.matmul %x, %w1 : tensor<1x4x8xf32>, tensor<8x5xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x4x5xf32>
  %y = mlc.matmul %a, %w2 : tensor<1x4x5xf32>, tensor<5x8xf32>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// A split weight read whole elsewhere (tied) would be read as a shard.
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %h = mlc.matmul %x, %w1 : tensor<1x4x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x4x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<1x4x16xf32>, tensor<16x8xf32>
  // expected-error @+1 {{reads parameter 'c_fc.weight' whole, but a tensor-parallel projection splits it (dim 1)}}
  %z = mlc.matmul %y, %w1 : tensor<1x4x8xf32>, tensor<8x16xf32>
  %l = mlc.reduce_sum %z axes = [0, 1, 2] : tensor<1x4x16xf32>
  return %l : tensor<f32>
}

// -----

// The MLP's hidden units, which each rank holds only a part of, cannot be
// reduced as if whole.
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %h = mlc.matmul %x, %w1 : tensor<1x4x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x4x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<1x4x16xf32>, tensor<16x8xf32>
  // expected-error @+1 {{reads a value split over the tensor-parallel group, and mlc cannot split or gather it here}}
  %s = mlc.reduce_sum %h axes = [0, 1, 2] : tensor<1x4x16xf32>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<1x4x8xf32>
  %t = mlc.add %l, %s : tensor<f32>, tensor<f32>
  return %t : tensor<f32>
}

// -----

// A GELU that feeds no down projection (BERT's MLM transform, which ends in
// a norm) is no MLP: with nothing else in the graph, nothing is split.
// expected-error @+1 {{has no attention and no MLP to split}}
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %w: tensor<8x8xf32> {mlc.param = "transform.dense.weight"},
                   %g: tensor<8xf32> {mlc.param = "transform.LayerNorm.weight"},
                   %b: tensor<8xf32> {mlc.param = "transform.LayerNorm.bias"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %h = mlc.matmul %x, %w : tensor<1x4x8xf32>, tensor<8x8xf32>
  %a = mlc.gelu %h approximate = none : tensor<1x4x8xf32>
  %n = mlc.layer_norm %a, %g, %b epsilon = 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %l = mlc.reduce_sum %n axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// OLMo 2's QK norm runs over the whole projection, which no rank holds.
func.func @forward(%x: tensor<1x4x16xf32> {mlc.input = "x"},
                   %wq: tensor<16x16xf32> {mlc.param = "q_proj.weight"},
                   %gq: tensor<16xf32> {mlc.param = "q_norm.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %0 = mlc.matmul %x, %wq transpose_rhs : tensor<1x4x16xf32>, tensor<16x16xf32>
  // expected-error @+1 {{normalizes over the split dim (a QK norm over all heads)}}
  %1 = mlc.rms_norm %0, %gq epsilon = 1.0e-06 : tensor<1x4x16xf32>, tensor<16xf32>
  %2 = mlc.reshape %1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %3 = mlc.transpose %2, [0, 2, 1, 3] : tensor<1x4x4x4xf32>
  %4 = mlc.attention %3, %3, %3 causal : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
  %l = mlc.reduce_sum %4 axes = [0, 1, 2, 3] : tensor<1x4x4x4xf32>
  return %l : tensor<f32>
}

// -----

// A graph with no attention and no MLP has nothing to split.
// expected-error @+1 {{has no attention and no MLP to split}}
func.func @forward(%x: tensor<4xf32> {mlc.input = "x"}, %w: tensor<4xf32> {mlc.param = "w"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.mul %x, %w : tensor<4xf32>, tensor<4xf32>
  %l = mlc.reduce_sum %y axes = [0] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// A vocabulary of 15 rows cannot be split over two ranks: the error says
// what the padded vocabulary would be.
func.func @forward(%wte: tensor<15x8xf32> {mlc.param = "wte"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %ids: tensor<2x4xi64> {mlc.input = "input_ids"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  // expected-error @+1 {{vocab_size = 15 (the rows of 'wte') is not divisible by the tensor-parallel size 2: pad the vocabulary to 16 rows (Megatron's --make-vocab-size-divisible-by 128 pads it to 256), or pass vocab-parallel=false}}
  %x = mlc.embedding %wte, %ids : tensor<15x8xf32>, tensor<2x4xi64>
  %h = mlc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<2x4x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32>
  %l = mlc.reduce_sum %y axes = [0, 1, 2] : tensor<2x4x8xf32>
  return %l : tensor<f32>
}

// -----

// The logits of a vocabulary-parallel head read by anything but the loss
// (here a z-loss-like sum) would need every rank's columns.
func.func @forward(%wte: tensor<16x8xf32> {mlc.param = "wte"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %ids: tensor<8xi64> {mlc.input = "input_ids"},
                   %labels: tensor<8xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %x = mlc.embedding %wte, %ids : tensor<16x8xf32>, tensor<8xi64>
  %h = mlc.matmul %x, %w1 : tensor<8x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<8x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<8x16xf32>, tensor<16x8xf32>
  %z = mlc.matmul %y, %wte transpose_rhs : tensor<8x8xf32>, tensor<16x8xf32>
  %loss = mlc.cross_entropy %z, %labels ignore_index = -100 : tensor<8x16xf32>, tensor<8xi64>
  // expected-error @+1 {{reads a value split over the tensor-parallel group, and mlc cannot split or gather it here}}
  %s = mlc.reduce_sum %z axes = [0, 1] : tensor<8x16xf32>
  %t = mlc.add %loss, %s : tensor<f32>, tensor<f32>
  return %t : tensor<f32>
}

// -----

// A slice across the vocabulary (the first 8 classes) cannot be taken from
// each rank's columns.
func.func @forward(%wte: tensor<16x8xf32> {mlc.param = "wte"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %ids: tensor<8xi64> {mlc.input = "input_ids"},
                   %labels: tensor<8xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %x = mlc.embedding %wte, %ids : tensor<16x8xf32>, tensor<8xi64>
  %h = mlc.matmul %x, %w1 : tensor<8x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<8x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<8x16xf32>, tensor<16x8xf32>
  %z = mlc.matmul %y, %wte transpose_rhs : tensor<8x8xf32>, tensor<16x8xf32>
  %loss = mlc.cross_entropy %z, %labels ignore_index = -100 : tensor<8x16xf32>, tensor<8xi64>
  // expected-error @+1 {{slices the split dim}}
  %s = mlc.slice %z starts = [0, 0] ends = [8, 8] steps = [1, 1] : tensor<8x16xf32>
  return %loss : tensor<f32>
}

// -----

// A loss over the vocabulary whose logits come from no matmul by a
// parameter: there is no head to split.
func.func @forward(%wte: tensor<16x8xf32> {mlc.param = "wte"},
                   %w1: tensor<8x16xf32> {mlc.param = "c_fc.weight"},
                   %w2: tensor<16x8xf32> {mlc.param = "c_proj.weight"},
                   %ids: tensor<8xi64> {mlc.input = "input_ids"},
                   %labels: tensor<8xi64> {mlc.input = "labels"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %x = mlc.embedding %wte, %ids : tensor<16x8xf32>, tensor<8xi64>
  %h = mlc.matmul %x, %w1 : tensor<8x8xf32>, tensor<8x16xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<8x16xf32>
  %y = mlc.matmul %a, %w2 : tensor<8x16xf32>, tensor<16x8xf32>
  %z = mlc.softmax %h axis = 1 : tensor<8x16xf32>
  // expected-error @+1 {{cannot find the LM head (a matmul by a parameter) that computes its logits; pass vocab-parallel=false}}
  %loss = mlc.cross_entropy %z, %labels ignore_index = -100 : tensor<8x16xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}
