// RUN: mlc-opt %s -split-input-file -allow-unregistered-dialect --mlc-recompute=mode=full | FileCheck %s --check-prefix=FULL
// RUN: mlc-opt %s -split-input-file -allow-unregistered-dialect --mlc-recompute=mode=selective | FileCheck %s --check-prefix=SEL

// An op with side effects (here one mlc-opt does not know, so it may have
// any) is never cloned: its value stays saved, and what full recomputes
// starts from it.
// FULL-LABEL: func.func @train_step
// FULL:       %[[E:.*]] = "test.effect"
// FULL:       mlc.reduce_sum
// FULL-NOT:   "test.effect"
// FULL:       %[[TB:.*]] = mlc.tanh %[[E]]
// FULL-NEXT:  mlc.mul %[[TB]], %[[TB]]
// FULL-NOT:   "test.effect"
// FULL:       return
// SEL-LABEL:  func.func @train_step
// (selective: the tanh would need the effect's value, which backward does
// not read: it stays saved.)
// SEL:        %[[E:.*]] = "test.effect"
// SEL-NEXT:   %[[T:.*]] = mlc.tanh %[[E]]
// SEL-NEXT:   mlc.reduce_sum
// SEL-NOT:    "test.effect"
// SEL-NOT:    mlc.tanh
// SEL:        mlc.mul %[[T]], %[[T]]
func.func @train_step(%x: tensor<4x8xf32> {mlc.input = "x"},
                      %w: tensor<8x8xf32> {mlc.param = "h.0.fc.weight"})
    -> (tensor<f32> {mlc.output = "loss"}, tensor<8x8xf32> {mlc.grad = "h.0.fc.weight"}) {
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %m = mlc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %e = "test.effect"(%m) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = mlc.tanh %e : tensor<4x8xf32>
  %l = mlc.reduce_sum %t axes = [0, 1] : tensor<4x8xf32>
  %tt = mlc.mul %t, %t : tensor<4x8xf32>, tensor<4x8xf32>
  %g = mlc.sub %one, %tt : tensor<f32>, tensor<4x8xf32>
  %dw = mlc.matmul %x, %g transpose_lhs : tensor<4x8xf32>, tensor<4x8xf32>
  return %l, %dw : tensor<f32>, tensor<8x8xf32>
}
