// RUN: mlc-opt %s -split-input-file | mlc-opt -split-input-file | FileCheck %s --check-prefix=PRINT
// RUN: mlc-opt %s -split-input-file --mlc-autodiff | FileCheck %s --check-prefix=GRAD
// The sequence-parallel collectives: they print and parse back, and each is
// the other's gradient (Megatron's all-gather / reduce-scatter pair).

// PRINT-LABEL: func.func @forward
// PRINT: %[[G:.*]] = mlc.tp_all_gather %arg0 axis = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
// PRINT: mlc.tp_reduce_scatter %{{.*}} axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
// An all-gather of the tokens' slices into a region, a reduce-scatter out
// of it: backward, the reduce-scatter's dual gathers the adjoint's slices,
// and the all-gather's dual sums every rank's adjoint of the whole and
// keeps this rank's slice.
// GRAD-LABEL: func.func @train_step
// GRAD: %[[G:.*]] = mlc.tp_all_gather %arg0 axis = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
// GRAD: %[[S:.*]] = mlc.tp_reduce_scatter %{{.*}} axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
// GRAD: %[[B:.*]] = mlc.tp_all_gather %{{.*}} axis = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
// GRAD-NEXT: %[[P:.*]] = mlc.mul %[[B]], %arg1
// GRAD-NEXT: %[[DW:.*]] = mlc.tp_reduce_scatter %[[P]] axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
// GRAD-NOT: mlc.tp_
// GRAD: return %{{.*}}, %[[DW]]
module attributes {mlc.tensor_parallel = 2 : i64} {
func.func @forward(%w: tensor<2x4x8xf32> {mlc.param = "w"}, %x: tensor<2x8x8xf32> {mlc.input = "x"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %g = mlc.tp_all_gather %w axis = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %y = mlc.mul %g, %x : tensor<2x8x8xf32>, tensor<2x8x8xf32>
  %s = mlc.tp_reduce_scatter %y axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %l = mlc.reduce_sum %s axes = [0, 1, 2] : tensor<2x4x8xf32>
  return %l : tensor<f32>
}
}

// -----

// A reduce-scatter after a partial product: its gradient gathers the
// slices' adjoints. A dynamic token dim (unpadded batches) stays dynamic.
// GRAD-LABEL: func.func @train_step
// GRAD: %[[S:.*]] = mlc.tp_reduce_scatter %arg0 axis = 0 : tensor<?x8xf32> -> tensor<?x8xf32>
// GRAD: %[[DW:.*]] = mlc.tp_all_gather %{{.*}} axis = 0 : tensor<?x8xf32> -> tensor<?x8xf32>
// GRAD-NOT: mlc.tp_
// GRAD: return %{{.*}}, %[[DW]]
func.func @forward(%w: tensor<?x8xf32> {mlc.param = "w"})
    -> (tensor<f32> {mlc.output = "loss"}) {
  %s = mlc.tp_reduce_scatter %w axis = 0 : tensor<?x8xf32> -> tensor<?x8xf32>
  %y = mlc.mul %s, %s : tensor<?x8xf32>, tensor<?x8xf32>
  %l = mlc.reduce_sum %y axes = [0, 1] : tensor<?x8xf32>
  return %l : tensor<f32>
}
