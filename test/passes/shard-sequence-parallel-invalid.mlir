// RUN: mlc-opt %s -split-input-file -verify-diagnostics --mlc-shard-tensor-parallel="size=2 sequence-parallel=true"

// The stream (the MLP's output plus its residual) read by a reduction over
// every token: no rank holds them all.
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %g: tensor<8xf32> {mlc.param = "h.0.ln_2.weight"},
                   %b: tensor<8xf32> {mlc.param = "h.0.ln_2.bias"},
                   %w1: tensor<8x32xf32> {mlc.param = "h.0.mlp.c_fc.weight"},
                   %w2: tensor<32x8xf32> {mlc.param = "h.0.mlp.c_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %n = mlc.layer_norm %x, %g, %b epsilon = 1.0e-05 : tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %h = mlc.matmul %n, %w1 : tensor<1x4x8xf32>, tensor<8x32xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x4x32xf32>
  %y = mlc.matmul %a, %w2 : tensor<1x4x32xf32>, tensor<32x8xf32>
  %r = mlc.add %x, %y : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  // expected-error @+1 {{'mlc.reduce_sum' op mlc-shard-tensor-parallel: sequence-parallel splits the residual stream over the tokens, and this op reads it but is neither token-local (elementwise, a norm over the hidden dim, dropout) nor a tensor-parallel region's entry: mlc cannot gather the stream for it}}
  %l = mlc.reduce_sum %r axes = [0, 1, 2] : tensor<1x4x8xf32>
  return %l : tensor<f32>
}

// -----

// A stream value returned whole (a hidden state).
func.func @forward(%x: tensor<1x4x8xf32> {mlc.input = "x"},
                   %w1: tensor<8x32xf32> {mlc.param = "h.0.mlp.c_fc.weight"},
                   %w2: tensor<32x8xf32> {mlc.param = "h.0.mlp.c_proj.weight"})
    -> (tensor<1x4x8xf32> {mlc.output = "hidden"}) {
  %h = mlc.matmul %x, %w1 : tensor<1x4x8xf32>, tensor<8x32xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x4x32xf32>
  %y = mlc.matmul %a, %w2 : tensor<1x4x32xf32>, tensor<32x8xf32>
  %r = mlc.add %x, %y : tensor<1x4x8xf32>, tensor<1x4x8xf32>
  // expected-error @+1 {{'func.return' op mlc-shard-tensor-parallel: sequence-parallel splits the residual stream over the tokens}}
  return %r : tensor<1x4x8xf32>
}

// -----

// Three tokens over two ranks.
func.func @forward(%x: tensor<1x3x8xf32> {mlc.input = "x"},
                   %w1: tensor<8x32xf32> {mlc.param = "h.0.mlp.c_fc.weight"},
                   %w2: tensor<32x8xf32> {mlc.param = "h.0.mlp.c_proj.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %h = mlc.matmul %x, %w1 : tensor<1x3x8xf32>, tensor<8x32xf32>
  %a = mlc.gelu %h approximate = tanh : tensor<1x3x32xf32>
  // expected-error @+1 {{'mlc.tp_reduce' op mlc-shard-tensor-parallel: sequence-parallel splits the residual stream's 3 tokens (1 x 3) over the tensor-parallel size 2, which does not divide them}}
  %y = mlc.matmul %a, %w2 : tensor<1x3x32xf32>, tensor<32x8xf32>
  %r = mlc.add %x, %y : tensor<1x3x8xf32>, tensor<1x3x8xf32>
  %s = mlc.mul %r, %r : tensor<1x3x8xf32>, tensor<1x3x8xf32>
  %l = mlc.reduce_sum %s axes = [0, 1, 2] : tensor<1x3x8xf32>
  return %l : tensor<f32>
}
