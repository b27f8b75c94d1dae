// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s

// A column sum returned as two gradients (GPT-NeoX's two output biases,
// both summing the residual stream's gradient) is computed once per result,
// so each sum writes its own gradient and neither is copied.
// CHECK-LABEL: func.func @sum_returned_twice
// CHECK:      %[[A:.*]] = mlc.reduce_sum %arg0 axes = [0, 1]
// CHECK-NEXT: %[[B:.*]] = mlc.reduce_sum %arg0 axes = [0, 1]
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @sum_returned_twice(%g: tensor<2x4x8xf32>) -> (tensor<8xf32> {mlc.grad = "a.bias"}, tensor<8xf32> {mlc.grad = "b.bias"}) {
  %s = mlc.reduce_sum %g axes = [0, 1] : tensor<2x4x8xf32>
  return %s, %s : tensor<8xf32>, tensor<8xf32>
}

// -----

// Returned once, a sum is not duplicated; nor is a sum over the rows (not
// a column sum) returned twice.
// CHECK-LABEL: func.func @not_split
// CHECK:      %[[A:.*]] = mlc.reduce_sum %arg0 axes = [0, 1]
// CHECK-NEXT: %[[R:.*]] = mlc.reduce_sum %arg0 axes = [2]
// CHECK-NOT:  mlc.reduce_sum
// CHECK:      return %[[A]], %[[R]], %[[R]]
func.func @not_split(%g: tensor<2x4x8xf32>) -> (tensor<8xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %s = mlc.reduce_sum %g axes = [0, 1] : tensor<2x4x8xf32>
  %r = mlc.reduce_sum %g axes = [2] : tensor<2x4x8xf32>
  return %s, %r, %r : tensor<8xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
