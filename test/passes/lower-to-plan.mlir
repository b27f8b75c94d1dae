// RUN: mlc-opt %s -split-input-file --mlc-fold --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fold --mlc-assign-buffers --mlc-lower-to-plan | mlc-opt -split-input-file | FileCheck %s

// A transpose read by a pointwise op is a strided view: the add reads x
// through transposed strides (1 along the first dimension, 4 along the
// second) and no copy kernel runs. The kernel is IR: its iteration space,
// a load per input, the add on scalars, a store. The graph function is gone; the parameter is bound from the
// flat buffer, the result is an unplaced arena slice.
// CHECK-LABEL: plan.param "w" : f32 [4, 3] decay init "normal:0.02"
// CHECK: plan.input "x" : f32 [3, 4]
// CHECK-NOT: copy
// CHECK: plan.kernel @k0 pointwise args(3) params {dims = array<i64: 4, 3>} {
// CHECK-NEXT: %[[A:.*]] = plan.load arg 1 offset 0 strides [1, 4] : tensor<f32>
// CHECK-NEXT: %[[B:.*]] = plan.load arg 2 offset 0 strides [3, 1] : tensor<f32>
// CHECK-NEXT: %[[S:.*]] = mlc.add %[[A]], %[[B]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: plan.store %[[S]], arg 0 offset 0 strides [3, 1] : tensor<f32>
// CHECK-NEXT: }
// CHECK-NOT: plan.kernel
// CHECK: plan.func "forward" arena 0 {
// CHECK-NEXT: %[[W:.*]] = plan.bind param "w" : memref<12xf32>
// CHECK-NEXT: %[[X:.*]] = plan.bind input "x" : memref<12xf32>
// CHECK-NEXT: %[[Y:.*]] = plan.arena -1 : memref<12xf32>
// CHECK-NEXT: plan.launch @k0(%[[Y]], %[[X]], %[[W]])
// CHECK-NEXT: plan.output "y" %[[Y]] [4, 3]
// CHECK-NOT: func.func
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}) -> (tensor<4x3xf32> {mlc.output = "y"}) {
  %t = mlc.transpose %x, [1, 0] : tensor<3x4xf32>
  %y = mlc.add %t, %w : tensor<4x3xf32>, tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A GEMM needs its operands contiguous: the transposed value is copied once
// (a copy kernel), and the reshapes after it are one view of the copy
// (mlc-fold made them one reshape).
// CHECK-LABEL: plan.param "w"
// CHECK: plan.kernel @k0 pointwise args(2) params {dims = array<i64: 12>} {
// CHECK: mlc.exp
// CHECK: plan.kernel @k1 copy args(2) params {dims = array<i64: 4, 3>} {
// CHECK-NEXT: %[[X:.*]] = plan.load arg 1 offset 0 strides [1, 4] : tensor<f32>
// CHECK-NEXT: plan.store %[[X]], arg 0 offset 0 strides [3, 1] : tensor<f32>
// CHECK: plan.func "forward"
// CHECK: %[[E:.*]] = plan.arena -1 : memref<12xf32>
// CHECK: %[[C:.*]] = plan.arena -1 : memref<12xf32>
// CHECK: %[[V:.*]] = plan.view %[[C]][0] : memref<12xf32> to memref<12xf32>
// CHECK: plan.launch @k0(%[[E]], %{{.*}})
// CHECK-NEXT: plan.launch @k1(%[[C]], %[[E]])
// CHECK-NEXT: plan.gemm %{{.*}}, %[[V]], %{{.*}} transpose_rhs m 2 n 4 k 6
func.func @forward(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}) -> (tensor<2x4xf32> {mlc.output = "y"}) {
  %e = mlc.exp %x : tensor<3x4xf32>
  %t = mlc.transpose %e, [1, 0] : tensor<3x4xf32>
  %r = mlc.reshape %t : tensor<4x3xf32> -> tensor<12xf32>
  %q = mlc.reshape %r : tensor<12xf32> -> tensor<2x6xf32>
  %y = mlc.matmul %q, %w transpose_rhs : tensor<2x6xf32>, tensor<4x6xf32>
  return %y : tensor<2x4xf32>
}

// -----

// A gradient that an op produces is written straight into the flat gradient
// buffer (no copy), and parameters are laid out in the order backward
// finishes their gradients: b's gradient is complete before w's.
// CHECK-LABEL: plan.param "b" : f32 [3] init "zeros"
// CHECK-NEXT: plan.param "w" : f32 [4, 3] decay
// CHECK: plan.func "train_step"
// CHECK: %[[GW:.*]] = plan.bind grad "w" : memref<12xf32>
// CHECK: plan.gemm %[[GW]],
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %z = mlc.add %y, %b : tensor<2x3xf32>, tensor<3xf32>
  %l = mlc.reduce_sum %z axes = [0, 1] : tensor<2x3xf32>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3xf32> {mlc.grad = "b"}, tensor<4x3xf32> {mlc.grad = "w"}) {
  %y = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
  %z = mlc.add %y, %b : tensor<2x3xf32>, tensor<3xf32>
  %l = mlc.reduce_sum %z axes = [0, 1] : tensor<2x3xf32>
  %one = mlc.constant dense<1.0> : tensor<2x3xf32>
  %gb = mlc.reduce_sum %one axes = [0] : tensor<2x3xf32>
  %gw = mlc.matmul %x, %one transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32>
  return %l, %gb, %gw : tensor<f32>, tensor<3xf32>, tensor<4x3xf32>
}


// -----

// The loss's gradient marked mlc.in_place (mlc-in-place: nothing else reads
// the logits) overwrites them: the fused cross-entropy kernel (the gradient
// marked mlc.with_loss by mlc-fuse-cross-entropy) writes its gradient into
// a view of the logits' arena slice (reached through the reshape), not a
// slice of its own. Its parameters are the template's (typed): the loss's
// rows, labels and ignore index, the gradient's type and constant scale.
// CHECK-LABEL: plan.param "w" : f32 [4, 6]
// CHECK: plan.kernel @k{{[0-9]+}} rows #plan.cross_entropy_with_grad<element = f32, labels = i64, grad = f32, rows = 3, columns = 6, ignore = -100, scale = 1.000000e+00 : f32> args(4){{$}}
// CHECK: plan.func "train_step"
// CHECK: %[[Y:.*]] = plan.arena -1 : memref<18xf32>
// CHECK: %[[L:.*]] = plan.view %[[Y]][0] : memref<18xf32> to memref<18xf32>
// CHECK: %[[G:.*]] = plan.view %[[L]][0] : memref<18xf32> to memref<18xf32>
// CHECK: plan.launch @k{{[0-9]+}}(%{{.*}}, %[[G]], %[[L]], %{{.*}})
func.func @forward(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<4x6xf32> {mlc.grad = "w"}) {
  %x3 = mlc.reshape %x : tensor<3x4xf32> -> tensor<1x3x4xf32>
  %y = mlc.matmul %x3, %w : tensor<1x3x4xf32>, tensor<4x6xf32>
  %logits = mlc.reshape %y : tensor<1x3x6xf32> -> tensor<3x6xf32>
  %l = mlc.cross_entropy %logits, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %logits, %t ignore_index = -100 {mlc.in_place, mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %gw = mlc.matmul %x, %g transpose_lhs : tensor<3x4xf32>, tensor<3x6xf32>
  return %l, %gw : tensor<f32>, tensor<4x6xf32>
}

// -----

// A gradient not marked mlc.in_place (the logits are also an output) gets
// its own arena slice.
// CHECK-LABEL: plan.param "w" : f32 [4, 6]
// CHECK: plan.func "train_step"
// CHECK: %[[Y:.*]] = plan.arena -1 : memref<18xf32>
// CHECK: %[[G:.*]] = plan.arena -1 : memref<18xf32>
// CHECK: plan.launch @k{{[0-9]+}}(%{{.*}}, %[[G]], %[[Y]], %{{.*}})
// CHECK: plan.output "logits" %[[Y]]
func.func @forward(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3x6xf32> {mlc.output = "logits"}, tensor<4x6xf32> {mlc.grad = "w"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %gw = mlc.matmul %x, %g transpose_lhs : tensor<3x4xf32>, tensor<3x6xf32>
  return %l, %y, %gw : tensor<f32>, tensor<3x6xf32>, tensor<4x6xf32>
}

// -----

// A product with a bias: the bias is the GEMM's fourth operand (its
// epilogue), no kernel adds it. Activations [2, 3, 4] against a shared
// weight are one product over 6 stacked rows, not a batch of 2.
// CHECK-LABEL: plan.param "w" : f32 [4, 5]
// CHECK-NOT: plan.kernel
// CHECK: plan.func "forward"
// CHECK-DAG: %[[W:.*]] = plan.bind param "w" : memref<20xf32>
// CHECK-DAG: %[[B:.*]] = plan.bind param "b" : memref<5xf32>
// CHECK-DAG: %[[X:.*]] = plan.bind input "x" : memref<24xf32>
// CHECK: plan.gemm %{{.*}}, %[[X]], %[[W]] m 6 n 5 k 4 bias(%[[B]] : memref<5xf32>) : memref<30xf32>, memref<24xf32>, memref<20xf32>
// CHECK-NOT: plan.launch
func.func @forward(%w: tensor<4x5xf32> {mlc.param = "w"}, %b: tensor<5xf32> {mlc.param = "b"}, %x: tensor<2x3x4xf32> {mlc.input = "x"}) -> (tensor<2x3x5xf32> {mlc.output = "y"}) {
  %y = mlc.matmul %x, %w bias(%b : tensor<5xf32>) : tensor<2x3x4xf32>, tensor<4x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Stacks that are not one product stay batched: a transposed left operand
// (its matrices are not rows one after another) and a batched right one.
// CHECK-LABEL: plan.param "w" : f32 [3, 5]
// CHECK: plan.gemm {{.*}} transpose_lhs m 4 n 5 k 3 {batch = array<i64: 2>, lhs_strides = array<i64: 12>, rhs_strides = array<i64: 0>}
// CHECK: plan.gemm {{.*}} m 3 n 3 k 4 {batch = array<i64: 2>, lhs_strides = array<i64: 12>, rhs_strides = array<i64: 12>}
func.func @forward(%w: tensor<3x5xf32> {mlc.param = "w"}, %x: tensor<2x3x4xf32> {mlc.input = "x"}) -> (tensor<2x4x5xf32> {mlc.output = "y"}, tensor<2x3x3xf32> {mlc.output = "s"}) {
  %y = mlc.matmul %x, %w transpose_lhs : tensor<2x3x4xf32>, tensor<3x5xf32>
  %s = mlc.matmul %x, %x transpose_rhs : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  return %y, %s : tensor<2x4x5xf32>, tensor<2x3x3xf32>
}

// -----

// A tanh GELU of an f32 product marked mlc.gemm_epilogue (mlc-gemm-epilogues)
// is the GEMM's epilogue: the product (with its bias) goes to the
// pre-activation, which GELU's other reader (here an output) reads, and the
// GELU to its own buffer; no kernel runs. An unmarked GELU (BERT's erf
// GELU) stays a kernel.
// CHECK-LABEL: plan.param "w" : f32 [4, 8]
// CHECK: plan.kernel @k0 pointwise
// CHECK: mlc.gelu %{{[0-9]+}} : tensor<f32>{{$}}
// CHECK: plan.func "forward"
// CHECK: plan.gemm %[[G:.*]], %{{.*}}, %{{.*}} m 6 n 8 k 4 bias(%{{.*}} : memref<8xf32>) gelu(%[[P:.*]] : memref<48xf32>) : memref<48xf32>
// CHECK: plan.gemm %[[Q:.*]], %{{.*}}, %{{.*}} m 6 n 8 k 4 : memref<48xf32>
// CHECK-NEXT: plan.launch @k0(%[[E:.*]], %[[Q]])
// CHECK: plan.output "g" %[[G]]
// CHECK: plan.output "pre" %[[P]]
// CHECK: plan.output "e" %[[E]]
func.func @forward(%w: tensor<4x8xf32> {mlc.param = "w"}, %b: tensor<8xf32> {mlc.param = "b"}, %x: tensor<2x3x4xf32> {mlc.input = "x"})
    -> (tensor<2x3x8xf32> {mlc.output = "g"}, tensor<2x3x8xf32> {mlc.output = "pre"}, tensor<2x3x8xf32> {mlc.output = "e"}) {
  %y = mlc.matmul %x, %w bias(%b : tensor<8xf32>) : tensor<2x3x4xf32>, tensor<4x8xf32>
  %g = mlc.gelu %y approximate = tanh {mlc.gemm_epilogue} : tensor<2x3x8xf32>
  %q = mlc.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x8xf32>
  %e = mlc.gelu %q : tensor<2x3x8xf32>
  return %g, %y, %e : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// A product with an accumulator that nothing else reads adds itself to the
// accumulator's own buffer: two GEMMs into one arena slice, the second
// `accumulate`, and no kernel.
// CHECK: plan.func "forward"
// CHECK: %[[S:.*]] = plan.arena -1 : memref<24xf32>
// CHECK-NOT: plan.launch
// CHECK: plan.gemm %[[S]], %{{.*}}, %{{.*}} m 2 n 12 k 4 :
// CHECK-NEXT: plan.gemm %[[S]], %{{.*}}, %{{.*}} accumulate m 2 n 12 k 4 :
// CHECK-NEXT: plan.output "y" %[[S]]
func.func @forward(%w: tensor<4x12xf32> {mlc.param = "w"}, %u: tensor<4x12xf32> {mlc.param = "u"},
                   %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<2x12xf32> {mlc.output = "y"}) {
  %a = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x12xf32>
  %s = mlc.matmul %x, %u acc(%a : tensor<2x12xf32>) : tensor<2x4xf32>, tensor<4x12xf32>
  return %s : tensor<2x12xf32>
}

// -----

// An accumulator read elsewhere too (here an output of its own) keeps its
// buffer: it is copied into the sum's first, and the sum accumulates there.
// CHECK: plan.func "forward"
// CHECK: plan.gemm %[[A:.*]], %{{.*}}, %{{.*}} m 2 n 12 k 4 :
// CHECK-NEXT: plan.launch @{{.*}}(%[[S:.*]], %[[A]])
// CHECK-NEXT: plan.gemm %[[S]], %{{.*}}, %{{.*}} accumulate m 2 n 12 k 4 :
// CHECK-NEXT: plan.output "y" %[[S]]
// CHECK-NEXT: plan.output "a" %[[A]]
func.func @forward(%w: tensor<4x12xf32> {mlc.param = "w"}, %u: tensor<4x12xf32> {mlc.param = "u"},
                   %x: tensor<2x4xf32> {mlc.input = "x"})
    -> (tensor<2x12xf32> {mlc.output = "y"}, tensor<2x12xf32> {mlc.output = "a"}) {
  %a = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x12xf32>
  %s = mlc.matmul %x, %u acc(%a : tensor<2x12xf32>) : tensor<2x4xf32>, tensor<4x12xf32>
  return %s, %a : tensor<2x12xf32>, tensor<2x12xf32>
}

// -----

// A gradient that is a chain of three accumulating products (a weight read
// by three products) is written in place: the chain's first GEMM writes the
// flat gradient buffer, the other two add to it; no copy.
// CHECK: plan.func "train_step"
// CHECK: %[[G:.*]] = plan.bind grad "w" : memref<48xf32>
// CHECK-NOT: plan.launch
// CHECK: plan.gemm %[[G]], %{{.*}}, %{{.*}} transpose_lhs m 4 n 12 k 2 :
// CHECK-NEXT: plan.gemm %[[G]], %{{.*}}, %{{.*}} transpose_lhs accumulate m 4 n 12 k 2 :
// CHECK-NEXT: plan.gemm %[[G]], %{{.*}}, %{{.*}} transpose_lhs accumulate m 4 n 12 k 2 :
// CHECK-NOT: plan.launch
// CHECK: }
func.func @forward(%w: tensor<4x12xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"},
                   %g1: tensor<2x12xf32> {mlc.input = "g1"}, %g2: tensor<2x12xf32> {mlc.input = "g2"},
                   %g3: tensor<2x12xf32> {mlc.input = "g3"})
    -> (tensor<2x12xf32> {mlc.output = "y"}) {
  %y = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x12xf32>
  return %y : tensor<2x12xf32>
}
func.func @train_step(%w: tensor<4x12xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"},
                      %g1: tensor<2x12xf32> {mlc.input = "g1"}, %g2: tensor<2x12xf32> {mlc.input = "g2"},
                      %g3: tensor<2x12xf32> {mlc.input = "g3"})
    -> (tensor<4x12xf32> {mlc.grad = "w"}) {
  %a = mlc.matmul %x, %g1 transpose_lhs : tensor<2x4xf32>, tensor<2x12xf32>
  %b = mlc.matmul %x, %g2 transpose_lhs acc(%a : tensor<4x12xf32>) : tensor<2x4xf32>, tensor<2x12xf32>
  %c = mlc.matmul %x, %g3 transpose_lhs acc(%b : tensor<4x12xf32>) : tensor<2x4xf32>, tensor<2x12xf32>
  return %c : tensor<4x12xf32>
}

// -----

// A loss's gradient that mlc-fuse-cross-entropy did not mark keeps its own
// kernel: the loss and the gradient each read the logits (the constant
// incoming gradient a `scale`, not a fourth argument).
// CHECK-LABEL: plan.param "w" : f32 [4, 6]
// CHECK-DAG: plan.kernel @[[LOSS:k[0-9]+]] rows #plan.cross_entropy<element = f32, labels = i64, rows = 3, columns = 6, ignore = -100> args(3){{$}}
// CHECK-DAG: plan.kernel @[[GRAD:k[0-9]+]] rows #plan.cross_entropy_grad<element = f32, labels = i64, rows = 3, columns = 6, ignore = -100, scale = 1.000000e+00 : f32> args(3){{$}}
// CHECK-NOT: cross_entropy_with_grad
// CHECK: plan.func "train_step"
// CHECK: plan.launch @[[LOSS]](
// CHECK: plan.launch @[[GRAD]](
func.func @forward(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x6xf32> {mlc.param = "w"}, %x: tensor<3x4xf32> {mlc.input = "x"}, %t: tensor<3xi64> {mlc.input = "t"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<4x6xf32> {mlc.grad = "w"}) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %gw = mlc.matmul %x, %g transpose_lhs : tensor<3x4xf32>, tensor<3x6xf32>
  return %l, %gw : tensor<f32>, tensor<4x6xf32>
}

// -----

// A loss's incoming gradient that is no constant is the gradient kernel's
// fourth argument (no `scale`); an embedding and its gradient carry the
// table's shape, the ids' type and the padding row.
// CHECK-LABEL: plan.param "w" : f32 [10, 6]
// CHECK: plan.kernel @[[EMB:k[0-9]+]] gather #plan.embedding<element = f32, ids = i32, rows = 3, vocab = 10, columns = 6> args(3){{$}}
// CHECK: plan.kernel @{{k[0-9]+}} rows #plan.cross_entropy<element = f32, labels = i64, rows = 3, columns = 6, ignore = 7> args(3){{$}}
// CHECK: plan.kernel @[[GRAD:k[0-9]+]] rows #plan.cross_entropy_grad<element = f32, labels = i64, rows = 3, columns = 6, ignore = 7> args(4){{$}}
// CHECK: plan.kernel @[[SCATTER:k[0-9]+]] scatter #plan.embedding_grad<element = f32, ids = i32, rows = 3, vocab = 10, columns = 6, padding = 2> args(3){{$}}
// CHECK: plan.func "train_step"
// CHECK: %[[S:.*]] = plan.bind input "s" : memref<1xf32>
// CHECK: plan.launch @[[EMB]](
// CHECK: plan.launch @[[GRAD]](%{{.*}}, %{{.*}}, %{{.*}}, %[[S]])
// CHECK: plan.launch @[[SCATTER]](
func.func @forward(%w: tensor<10x6xf32> {mlc.param = "w"}, %ids: tensor<3xi32> {mlc.input = "ids"}, %t: tensor<3xi64> {mlc.input = "t"}, %s: tensor<f32> {mlc.input = "s"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %y = mlc.embedding %w, %ids {padding_idx = 2 : i64} : tensor<10x6xf32>, tensor<3xi32>
  %l = mlc.cross_entropy %y, %t ignore_index = 7 : tensor<3x6xf32>, tensor<3xi64>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<10x6xf32> {mlc.param = "w"}, %ids: tensor<3xi32> {mlc.input = "ids"}, %t: tensor<3xi64> {mlc.input = "t"}, %s: tensor<f32> {mlc.input = "s"}) -> (tensor<10x6xf32> {mlc.grad = "w"}) {
  %y = mlc.embedding %w, %ids {padding_idx = 2 : i64} : tensor<10x6xf32>, tensor<3xi32>
  %g = mlc.cross_entropy_grad %s, %y, %t ignore_index = 7 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %gw = mlc.embedding_grad %g, %ids {padding_idx = 2 : i64} : tensor<3x6xf32>, tensor<3xi32> -> tensor<10x6xf32>
  return %gw : tensor<10x6xf32>
}

// -----

// A running sum (mlc.cumsum) is a #plan.scan kernel over its input's
// buffer: [rows, length, inner] around the summed axis, its flags kept.
// CHECK-LABEL: plan.input "mask" : i64 [2, 8]
// CHECK: plan.kernel @k0 pointwise #plan.scan<element = i64, rows = 2, length = 8, inner = 1> args(2)
// CHECK: plan.kernel @k1 pointwise #plan.scan<element = f32, rows = 2, length = 3, inner = 4, exclusive = true, reverse = true> args(2)
// CHECK: plan.func "forward"
// CHECK: %[[M:.*]] = plan.bind input "mask" : memref<16xi64>
// CHECK: %[[X:.*]] = plan.bind input "x" : memref<24xf32>
// CHECK: %[[P:.*]] = plan.arena -1 : memref<16xi64>
// CHECK: %[[R:.*]] = plan.arena -1 : memref<24xf32>
// CHECK: plan.launch @k0(%[[P]], %[[M]])
// CHECK-NEXT: plan.launch @k1(%[[R]], %[[X]])
func.func @forward(%mask: tensor<2x8xi64> {mlc.input = "mask"}, %x: tensor<2x3x4xf32> {mlc.input = "x"}) -> (tensor<2x8xi64> {mlc.output = "positions"}, tensor<2x3x4xf32> {mlc.output = "y"}) {
  %p = mlc.cumsum %mask axis = 1 : tensor<2x8xi64>
  %r = mlc.cumsum %x axis = -2 exclusive reverse : tensor<2x3x4xf32>
  return %p, %r : tensor<2x8xi64>, tensor<2x3x4xf32>
}
