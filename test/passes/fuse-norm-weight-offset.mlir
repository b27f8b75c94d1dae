// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s

// Gemma's RMSNorm scales by 1 + w. The norm's rows fusion computes 1 + w
// from w itself (a copy of the add in its region), and the gradient reads
// the add marked mlc.consumer_load, which its row kernel folds into the
// load of w: no kernel writes 1 + w.
// CHECK-LABEL: func.func @gemma_norm
// CHECK:      %[[ONE:.*]] = mlc.constant dense<1.000000e+00>
// CHECK:      %[[W1:.*]] = mlc.add %arg1, %[[ONE]] {mlc.consumer_load}
// CHECK:      %[[N:.*]]:2 = mlc.fusion rows ins(%arg0, %arg2, %arg1 :
// CHECK:        %[[S:.*]] = mlc.add %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
// CHECK:        %[[A:.*]] = mlc.add %{{.*}}, %{{.*}} : tensor<8xf32>, tensor<f32>
// CHECK:        mlc.rms_norm %[[S]], %[[A]]
// CHECK:      mlc.rms_norm_grad %arg3, %[[N]]#0, %[[W1]]
func.func @gemma_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %r: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) {
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %w1 = mlc.add %w, %one : tensor<8xf32>, tensor<f32>
  %s = mlc.add %x, %r : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %y = mlc.rms_norm %s, %w1 epsilon = 1.0e-06 : tensor<2x4x8xf32>, tensor<8xf32>
  %dx, %dw = mlc.rms_norm_grad %g, %s, %w1 epsilon = 1.0e-06 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>
  return %y, %dx, %dw : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>
}

// -----

// A norm without a prologue still computes its 1 + w in a rows fusion of
// its own; with no gradient reading it, the add outside is gone.
// CHECK-LABEL: func.func @forward_only
// CHECK-NOT:  mlc.consumer_load
// CHECK:      mlc.fusion rows ins(%arg1, %arg0 :
// CHECK:        mlc.add
// CHECK:        mlc.rms_norm
// CHECK-NOT:  mlc.add
func.func @forward_only(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %w1 = mlc.add %w, %one : tensor<8xf32>, tensor<f32>
  %y = mlc.rms_norm %x, %w1 epsilon = 1.0e-06 : tensor<2x4x8xf32>, tensor<8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Not folded: a weight plus 2 (not 1), and a 1 + w that something other
// than a norm also reads (here the function's result): both are computed
// by a kernel before the norms read them.
// CHECK-LABEL: func.func @not_folded
// CHECK-NOT:  mlc.consumer_load
// CHECK:      %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg1 :
// CHECK:      mlc.rms_norm %arg0, %[[F]]#0
// CHECK:      mlc.rms_norm %arg0, %[[F]]#1
// CHECK:      return {{.*}}, %[[F]]#1
func.func @not_folded(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) {
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %two = mlc.constant dense<2.000000e+00> : tensor<f32>
  %w2 = mlc.add %w, %two : tensor<8xf32>, tensor<f32>
  %w1 = mlc.add %w, %one : tensor<8xf32>, tensor<f32>
  %y2 = mlc.rms_norm %x, %w2 epsilon = 1.0e-06 : tensor<2x4x8xf32>, tensor<8xf32>
  %y1 = mlc.rms_norm %x, %w1 epsilon = 1.0e-06 : tensor<2x4x8xf32>, tensor<8xf32>
  return %y2, %y1, %w1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>
}
