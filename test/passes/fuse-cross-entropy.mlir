// RUN: mlc-opt %s -split-input-file --mlc-fuse-cross-entropy | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fuse-cross-entropy | mlc-opt -split-input-file | FileCheck %s

// The training step's loss and its gradient over the same logits and labels,
// the gradient scaled by a constant: the gradient is marked, the lowering
// computes it in the loss's kernel.
// CHECK-LABEL: func.func @marked
// CHECK: mlc.cross_entropy %arg0, %arg1 ignore_index = -100 :
// CHECK: mlc.cross_entropy_grad %{{.*}}, %arg0, %arg1 ignore_index = -100 {mlc.with_loss} :
func.func @marked(%y: tensor<3x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>) {
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %s = mlc.constant dense<0.5> : tensor<f32>
  %g = mlc.cross_entropy_grad %s, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g : tensor<f32>, tensor<3x6xf32>
}

// -----

// What keeps its own kernel: a gradient of other labels, with another
// ignore index, with a scale read at run time, before its loss, of other
// logits, or with no loss at all.
// CHECK-LABEL: func.func @unmarked
// CHECK-NOT: mlc.with_loss
func.func @unmarked(%y: tensor<3x6xf32>, %z: tensor<3x6xf32>, %t: tensor<3xi64>, %u: tensor<3xi64>,
                    %r: tensor<f32>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) {
  %one = mlc.constant dense<1.0> : tensor<f32>
  %before = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %labels = mlc.cross_entropy_grad %one, %y, %u ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %ignore = mlc.cross_entropy_grad %one, %y, %t ignore_index = 0 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %runtime = mlc.cross_entropy_grad %r, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %other = mlc.cross_entropy_grad %one, %z, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %before, %labels, %ignore, %runtime, %other : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>
}

// -----

// One loss, two gradients that qualify: the first after the loss is marked,
// the other keeps its own kernel.
// CHECK-LABEL: func.func @first
// CHECK: %[[A:.*]] = mlc.cross_entropy_grad {{.*}} {mlc.with_loss}
// CHECK-NOT: mlc.with_loss
// CHECK: return %{{.*}}, %[[A]]
func.func @first(%y: tensor<3x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>) {
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %a = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %b = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %a, %b : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>
}
