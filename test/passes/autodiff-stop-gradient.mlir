// RUN: mlc-opt %s -split-input-file --mlc-autodiff | FileCheck %s

// A log-sum-exp whose shift (the row maxima) is marked mlc.stop_gradient,
// as the vocabulary-parallel loss marks its max: lse = m + log sum exp(w - m)
// for any m, so the gradient is softmax(w) with m held constant. Autodiff
// treats the max's result as a constant: no rule of the max (a compare of w
// with its maxima, which would keep w for backward), and the gradient is
// exp(w - m) / s alone, no sum of the adjoints that reach m. @forward keeps
// the mark; the train step, differentiated, drops it.
// CHECK-LABEL: func.func @forward
// CHECK: mlc.reduce_max %arg0 axes = [1] keepdims {mlc.stop_gradient} : tensor<2x4xf32>
// CHECK-LABEL: func.func @train_step
// CHECK: %[[M:.*]] = mlc.reduce_max %arg0 axes = [1] keepdims : tensor<2x4xf32>
// CHECK-NEXT: %[[SH:.*]] = mlc.sub %arg0, %[[M]]
// CHECK-NEXT: %[[E:.*]] = mlc.exp %[[SH]]
// CHECK-NOT: mlc.compare
// CHECK-NOT: mlc.neg
// CHECK: %[[G:.*]] = mlc.mul %{{.*}}, %[[E]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NOT: mlc.compare
// CHECK-NOT: mlc.add
// CHECK: return %{{.*}}, %[[G]] : tensor<f32>, tensor<2x4xf32>
func.func @forward(%w: tensor<2x4xf32> {mlc.param = "w"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %m = mlc.reduce_max %w axes = [1] keepdims {mlc.stop_gradient} : tensor<2x4xf32>
  %sh = mlc.sub %w, %m : tensor<2x4xf32>, tensor<2x1xf32>
  %e = mlc.exp %sh : tensor<2x4xf32>
  %s = mlc.reduce_sum %e axes = [1] keepdims : tensor<2x4xf32>
  %ls = mlc.log %s : tensor<2x1xf32>
  %lse = mlc.add %ls, %m : tensor<2x1xf32>, tensor<2x1xf32>
  %l = mlc.reduce_sum %lse axes = [0, 1] : tensor<2x1xf32>
  return %l : tensor<f32>
}

// -----

// The same without the mark: the max is differentiated, its rule compares w
// with the maxima, and the adjoints of m (from the sub and the add) are
// summed and routed to the maximum.
// CHECK-LABEL: func.func @train_step
// CHECK: mlc.reduce_max %arg0 axes = [1] keepdims : tensor<2x4xf32>
// CHECK: mlc.compare eq %arg0, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK: return
func.func @forward(%w: tensor<2x4xf32> {mlc.param = "w"}) -> (tensor<f32> {mlc.output = "loss"}) {
  %m = mlc.reduce_max %w axes = [1] keepdims : tensor<2x4xf32>
  %sh = mlc.sub %w, %m : tensor<2x4xf32>, tensor<2x1xf32>
  %e = mlc.exp %sh : tensor<2x4xf32>
  %s = mlc.reduce_sum %e axes = [1] keepdims : tensor<2x4xf32>
  %ls = mlc.log %s : tensor<2x1xf32>
  %lse = mlc.add %ls, %m : tensor<2x1xf32>, tensor<2x1xf32>
  %l = mlc.reduce_sum %lse axes = [0, 1] : tensor<2x1xf32>
  return %l : tensor<f32>
}
