// RUN: mlc-opt %s -split-input-file --mlc-lower-to-plan | FileCheck %s
// mlc-lower-to-plan obeys mlc.buffers (written here by hand) rather than
// deciding: the same gradient written straight into its flat buffer where
// it is assigned its slice, and into an arena slice and then copied where
// it is assigned `arena`.

// CHECK-LABEL: plan.func "train_step"
// CHECK: %[[G:.*]] = plan.bind grad "w"
// CHECK-NOT: plan.launch
// CHECK: plan.gemm %[[G]],
// CHECK-NOT: plan.launch
// CHECK: }
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}, %y: tensor<2x3xf32> {mlc.input = "y"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] {mlc.buffers = ["arena"]} : tensor<2x4xf32>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}, %y: tensor<2x3xf32> {mlc.input = "y"}) -> (tensor<4x3xf32> {mlc.grad = "w"}) {
  %gw = mlc.matmul %x, %y transpose_lhs {mlc.buffers = ["grad:w"]} : tensor<2x4xf32>, tensor<2x3xf32>
  return %gw : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: plan.func "train_step"
// CHECK-DAG: %[[A:.*]] = plan.arena -1 : memref<12xf32>
// CHECK-DAG: %[[G:.*]] = plan.bind grad "w"
// CHECK: plan.gemm %[[A]],
// CHECK-NEXT: plan.launch @k{{[0-9]+}}(%[[G]], %[[A]])
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}, %y: tensor<2x3xf32> {mlc.input = "y"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.reduce_sum %x axes = [0, 1] {mlc.buffers = ["arena"]} : tensor<2x4xf32>
  return %l : tensor<f32>
}
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}, %y: tensor<2x3xf32> {mlc.input = "y"}) -> (tensor<4x3xf32> {mlc.grad = "w"}) {
  %gw = mlc.matmul %x, %y transpose_lhs {mlc.buffers = ["arena"]} : tensor<2x4xf32>, tensor<2x3xf32>
  return %gw : tensor<4x3xf32>
}

// -----

// A tensor-parallel reduce assigned a slice of its own, though it could sum
// over its partial products: a copy first.
// CHECK-LABEL: plan.func "forward"
// CHECK: %[[P:.*]] = plan.arena -1
// CHECK: %[[Y:.*]] = plan.arena -1
// CHECK: plan.gemm %[[P]],
// CHECK-NEXT: plan.launch @k{{[0-9]+}}(%[[Y]], %[[P]])
// CHECK-NEXT: plan.tp_all_reduce %[[Y]]
func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<2x3xf32> {mlc.output = "y"}) {
  %p = mlc.matmul %x, %w {mlc.buffers = ["arena"]} : tensor<2x4xf32>, tensor<4x3xf32>
  %y = mlc.tp_reduce sum %p {mlc.buffers = ["arena"]} : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
