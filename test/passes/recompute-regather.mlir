// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute=regather=true | FileCheck %s --check-prefix=REGATHER
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute | FileCheck %s --check-prefix=NONE
// RUN: mlc-opt %s -split-input-file --mlc-autodiff --canonicalize --cse --mlc-recompute="mode=selective regather=true" | FileCheck %s --check-prefix=SEL

// A sequence-parallel region's entry: each rank's 4 token rows, normed,
// gathered into all 8 and viewed as [2, 4, 8] for the column-parallel
// product. Its weight gradient reads the gathered tokens.
//
// regather: backward gathers the saved shard %[[N]] again, right before the
// weight gradient that reads it (no reshape: the gradient reads the flat
// rows), and nothing in backward reads the forward's gathered %[[G]] or its
// view: only the shard lives from forward to backward. The tanh's value,
// not gathered, stays saved.
// REGATHER-LABEL: func.func @train_step
// REGATHER:       %[[N:.*]] = mlc.layer_norm %arg0
// REGATHER-NEXT:  %[[G:.*]] = mlc.tp_all_gather %[[N]] axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// REGATHER-NEXT:  %[[R:.*]] = mlc.reshape %[[G]]
// REGATHER-NEXT:  %[[M:.*]] = mlc.matmul %[[R]], %arg3
// REGATHER-NEXT:  %[[T:.*]] = mlc.tanh %[[M]]
// REGATHER-NEXT:  mlc.reduce_sum %[[T]]
// REGATHER-NOT:   %[[G]]{{[^0-9_]}}
// REGATHER-NOT:   %[[R]]{{[^0-9_]}}
// REGATHER:       mlc.mul %[[T]], %[[T]]
// REGATHER:       %[[DY:.*]] = mlc.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// REGATHER-NEXT:  %[[G2:.*]] = mlc.tp_all_gather %[[N]] axis = 0 {mlc.recomputed} : tensor<4x8xf32> -> tensor<8x8xf32>
// REGATHER-NEXT:  mlc.matmul %[[G2]], %[[DY]] transpose_lhs
// REGATHER-NOT:   %[[G]]{{[^0-9_]}}
// REGATHER-NOT:   %[[R]]{{[^0-9_]}}
// REGATHER:       mlc.tp_reduce_scatter
// REGATHER-NOT:   mlc.tp_all_gather
// REGATHER:       return
//
// Without regather backward reads the forward's gathered tokens: one
// all-gather in all, its 8 rows saved.
// NONE-LABEL: func.func @train_step
// NONE:       %[[G:.*]] = mlc.tp_all_gather
// NONE-NOT:   mlc.tp_all_gather
// NONE:       mlc.matmul %[[G]], %{{.*}} transpose_lhs
// NONE-NOT:   mlc.tp_all_gather
// NONE:       return
//
// With a mode too: selective recomputes the norm as well, so backward
// gathers the norm's clone (the forward's input %arg0 is what is kept).
// SEL-LABEL: func.func @train_step
// SEL:       mlc.reduce_sum
// SEL:       %[[N2:.*]] = mlc.layer_norm %arg0, %arg1, %arg2 {{.*}}mlc.recomputed
// SEL-NEXT:  %[[G2:.*]] = mlc.tp_all_gather %[[N2]] axis = 0 {mlc.recomputed}
// SEL-NEXT:  mlc.matmul %[[G2]], %{{.*}} transpose_lhs
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"},
                   %g0: tensor<8xf32> {mlc.param = "h.0.ln.weight"},
                   %b0: tensor<8xf32> {mlc.param = "h.0.ln.bias"},
                   %w0: tensor<8x8xf32> {mlc.param = "h.0.fc.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %n = mlc.layer_norm %x, %g0, %b0 epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %g = mlc.tp_all_gather %n axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %r = mlc.reshape %g : tensor<8x8xf32> -> tensor<2x4x8xf32>
  %m = mlc.matmul %r, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32>
  %t = mlc.tanh %m : tensor<2x4x8xf32>
  %l = mlc.reduce_sum %t axes = [0, 1, 2] : tensor<2x4x8xf32>
  return %l : tensor<f32>
}

// -----

// A gathered value only forward reads (here the product's operand whose
// gradient backward computes from the weight alone: the weight is an input,
// not a parameter) is not gathered again: backward needs no tokens.
// REGATHER-LABEL: func.func @train_step
// REGATHER:       mlc.tp_all_gather
// REGATHER:       mlc.reduce_sum
// REGATHER-NOT:   mlc.tp_all_gather
// REGATHER:       return
// NONE-LABEL: func.func @train_step
// SEL-LABEL: func.func @train_step
func.func @forward(%x: tensor<4x8xf32> {mlc.param = "h.0.x"},
                   %w0: tensor<8x8xf32> {mlc.input = "w"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %g = mlc.tp_all_gather %x axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %m = mlc.matmul %g, %w0 : tensor<8x8xf32>, tensor<8x8xf32>
  %l = mlc.reduce_sum %m axes = [0, 1] : tensor<8x8xf32>
  return %l : tensor<f32>
}

// -----

// Tensor parallelism without sequence parallelism: a region's entry is a
// tp_copy (a view forward, an all-reduce of the adjoint backward), and the
// norm reads its replicated weight and bias through tp_copys. Selective
// recomputation clones the norm and the entry's view in backward (the
// tp_copy views of the arguments hold no bytes: they are at hand), so the
// norm's output is not saved; regather has nothing to gather again.
// SEL-LABEL: func.func @train_step
// SEL:       %[[CG:.*]] = mlc.tp_copy %arg1
// SEL:       %[[CB:.*]] = mlc.tp_copy %arg2
// SEL:       %[[N:.*]] = mlc.layer_norm %arg0, %[[CG]], %[[CB]]
// SEL:       mlc.reduce_sum
// SEL:       %[[N2:.*]] = mlc.layer_norm %arg0, %[[CG]], %[[CB]] {{.*}}mlc.recomputed
// SEL-NEXT:  %[[E2:.*]] = mlc.tp_copy %[[N2]] {mlc.recomputed}
// SEL-NEXT:  mlc.matmul %[[E2]], %{{.*}} transpose_lhs
// SEL-NOT:   %[[N]]{{[^0-9_]}}
// SEL:       return
// REGATHER-LABEL: func.func @train_step
// REGATHER-NOT:   mlc.tp_all_gather
// REGATHER-NOT:   mlc.recomputed
// REGATHER:       return
// NONE-LABEL: func.func @train_step
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"},
                   %g0: tensor<8xf32> {mlc.param = "h.0.ln.weight"},
                   %b0: tensor<8xf32> {mlc.param = "h.0.ln.bias"},
                   %w0: tensor<8x8xf32> {mlc.param = "h.0.fc.weight"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %cg = mlc.tp_copy %g0 : tensor<8xf32>
  %cb = mlc.tp_copy %b0 : tensor<8xf32>
  %n = mlc.layer_norm %x, %cg, %cb epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %e = mlc.tp_copy %n : tensor<4x8xf32>
  %m = mlc.matmul %e, %w0 : tensor<4x8xf32>, tensor<8x8xf32>
  %t = mlc.tanh %m : tensor<4x8xf32>
  %l = mlc.reduce_sum %t axes = [0, 1] : tensor<4x8xf32>
  return %l : tensor<f32>
}
