// RUN: mlc-opt %s -split-input-file --mlc-optimizer | FileCheck %s

// Two parameters: w (a matrix, decays) and b (a vector, does not). The
// gradient norm sums every gradient's squares in f64; AdamW reads its
// scalars from one f64 input, in the order of OptimizerScalars.h, and writes
// back parameters and moments.
// CHECK-LABEL: func.func @grad_norm(%{{.*}}: tensor<3xf32> {mlc.grad = "b"}, %{{.*}}: tensor<4x3xf32> {mlc.grad = "w"}) -> (tensor<f64> {mlc.output = "grad_norm"}) attributes {mlc.optimizer = "adamw"}
// CHECK: mlc.cast %{{.*}} : tensor<3xf32> -> tensor<3xf64>
// CHECK: mlc.reduce_sum %{{.*}} axes = [0] : tensor<3xf64>
// CHECK: mlc.reduce_sum %{{.*}} axes = [0, 1] : tensor<4x3xf64>
// CHECK: %[[NORM:.*]] = mlc.sqrt
// CHECK: return %[[NORM]] : tensor<f64>
// CHECK-LABEL: func.func @optimizer(
// CHECK-SAME: %[[PB:[a-z0-9]+]]: tensor<3xf32> {mlc.param = "b"}, %[[PW:[a-z0-9]+]]: tensor<4x3xf32> {mlc.param = "w"},
// CHECK-SAME: {mlc.grad = "b"}, {{.*}} {mlc.grad = "w"}, {{.*}} {mlc.moment1 = "b"}, {{.*}} {mlc.moment1 = "w"}, {{.*}} {mlc.moment2 = "b"}, {{.*}} {mlc.moment2 = "w"},
// CHECK-SAME: %[[H:[a-z0-9]+]]: tensor<9xf64> {mlc.scalars = "adamw"})
// CHECK-SAME: -> (tensor<3xf32> {mlc.param_update = "b"}, tensor<4x3xf32> {mlc.param_update = "w"}, tensor<3xf32> {mlc.moment1_update = "b"}, tensor<4x3xf32> {mlc.moment1_update = "w"}, tensor<3xf32> {mlc.moment2_update = "b"}, tensor<4x3xf32> {mlc.moment2_update = "w"})
// CHECK: mlc.slice %[[H]] starts = [8] ends = [9]
// CHECK-NEXT: mlc.reshape
// CHECK-NEXT: %[[DECAY:.*]] = mlc.cast %{{.*}} : tensor<f64> -> tensor<f32>
// The vector's update never multiplies by the decay factor ...
// CHECK-NOT: %[[DECAY]]
// CHECK: %[[NB:.*]] = mlc.sub %[[PB]], %{{.*}} : tensor<3xf32>, tensor<3xf32>
// ... the matrix's does, before the Adam step.
// CHECK: %[[DW:.*]] = mlc.mul %[[PW]], %[[DECAY]] : tensor<4x3xf32>, tensor<f32>
// CHECK: %[[NW:.*]] = mlc.sub %[[DW]], %{{.*}} : tensor<4x3xf32>, tensor<4x3xf32>
// CHECK: return %[[NB]], %[[NW]],
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3xf32> {mlc.grad = "b"}, tensor<4x3xf32> {mlc.grad = "w"}) {
  %l = mlc.constant dense<1.0> : tensor<f32>
  %gb = mlc.constant dense<1.0> : tensor<3xf32>
  %gw = mlc.constant dense<1.0> : tensor<4x3xf32>
  return %l, %gb, %gw : tensor<f32>, tensor<3xf32>, tensor<4x3xf32>
}

// -----

// Nothing trains (no gradients): no optimizer is added.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: func.func
func.func @train_step(%x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.constant dense<1.0> : tensor<f32>
  return %l : tensor<f32>
}
