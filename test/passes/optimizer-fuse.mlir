// RUN: mlc-opt %s -split-input-file --mlc-optimizer=fuse=true | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-optimizer=fuse=true | mlc-opt -split-input-file | FileCheck %s

// With fuse, the update is built as one multi-tensor fusion: the
// scalars, then 2 parameters, 2 gradients, 2 first and 2 second moments in;
// 6 results out. The region is one element's update; the decay factor is
// its fifth argument, 1 for b (a vector) and the scalar for w (a matrix),
// as mlc.decay records. The gradient norm is one norm fusion.
// CHECK-LABEL: func.func @grad_norm
// CHECK-NEXT: %[[N:.*]] = mlc.fusion norm ins(%arg0, %arg1 : tensor<3xf32>, tensor<4x3xf32>) {
// CHECK-NEXT: ^bb0(%[[E:.*]]: tensor<f32>):
// CHECK-NEXT: %[[W:.*]] = mlc.cast %[[E]] : tensor<f32> -> tensor<f64>
// CHECK-NEXT: %[[SQ:.*]] = mlc.mul %[[W]], %[[W]] : tensor<f64>, tensor<f64>
// CHECK-NEXT: mlc.yield %[[SQ]] : tensor<f64>
// CHECK-NEXT: } : tensor<f64>
// CHECK-NEXT: return %[[N]] : tensor<f64>
// CHECK-LABEL: func.func @optimizer
// CHECK-NOT: mlc.slice
// CHECK: %[[U:.*]]:6 = mlc.fusion optimizer ins(%arg8, %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7 :
// CHECK-NEXT: ^bb0(%[[P:[a-z0-9]+]]: tensor<f32>, %{{[a-z0-9]+}}: tensor<f32>, %{{[a-z0-9]+}}: tensor<f32>, %{{[a-z0-9]+}}: tensor<f32>, %[[D:[a-z0-9]+]]: tensor<f32>,
// CHECK: %[[PD:.*]] = mlc.mul %[[P]], %[[D]] : tensor<f32>, tensor<f32>
// CHECK: %[[NP:.*]] = mlc.sub %[[PD]], %{{.*}} : tensor<f32>, tensor<f32>
// CHECK-NEXT: mlc.yield %[[NP]], %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>, tensor<f32>
// CHECK-NEXT: } {mlc.decay = array<i1: false, true>} : tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>
// CHECK-NEXT: return %[[U]]#0, %[[U]]#1, %[[U]]#2, %[[U]]#3, %[[U]]#4, %[[U]]#5
func.func @train_step(%w: tensor<4x3xf32> {mlc.param = "w"}, %b: tensor<3xf32> {mlc.param = "b"}, %x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3xf32> {mlc.grad = "b"}, tensor<4x3xf32> {mlc.grad = "w"}) {
  %l = mlc.constant dense<1.0> : tensor<f32>
  %gb = mlc.constant dense<1.0> : tensor<3xf32>
  %gw = mlc.constant dense<1.0> : tensor<4x3xf32>
  return %l, %gb, %gw : tensor<f32>, tensor<3xf32>, tensor<4x3xf32>
}

// -----

// Only vectors (nothing decays): the region has no decay multiply and
// every flag is false.
// CHECK-LABEL: func.func @optimizer
// CHECK: mlc.fusion optimizer
// CHECK: ^bb0(%[[P:[a-z0-9]+]]: tensor<f32>, %{{[a-z0-9]+}}: tensor<f32>, %{{[a-z0-9]+}}: tensor<f32>, %{{[a-z0-9]+}}: tensor<f32>, %[[D:[a-z0-9]+]]: tensor<f32>,
// CHECK-NOT: %[[D]]
// CHECK: mlc.sub %[[P]], %{{.*}} : tensor<f32>, tensor<f32>
// CHECK-NOT: %[[D]]
// CHECK: {mlc.decay = array<i1: false, false>}
func.func @train_step(%a: tensor<3xf32> {mlc.param = "a"}, %b: tensor<3xf32> {mlc.param = "b"}) -> (tensor<f32> {mlc.output = "loss"}, tensor<3xf32> {mlc.grad = "a"}, tensor<3xf32> {mlc.grad = "b"}) {
  %l = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.constant dense<1.0> : tensor<3xf32>
  return %l, %g, %g : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A module that already has an @optimizer is left alone: mlc-optimizer adds
// nothing and fuses nothing.
// CHECK-LABEL: func.func @optimizer
// CHECK-NOT: mlc.fusion
// CHECK: mlc.sub
// CHECK-NOT: mlc.fusion
func.func @train_step(%x: tensor<2x4xf32> {mlc.input = "x"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %l = mlc.constant dense<1.0> : tensor<f32>
  return %l : tensor<f32>
}
func.func @optimizer(%p: tensor<3xf32>, %g: tensor<3xf32>) -> tensor<3xf32> {
  %0 = mlc.sub %p, %g : tensor<3xf32>, tensor<3xf32>
  return %0 : tensor<3xf32>
}
