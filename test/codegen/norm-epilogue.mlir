// RUN: mlc-opt %s --mlc-fuse-elementwise --mlc-in-place --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s
// RUN: mlc-opt %s --mlc-fuse-elementwise --mlc-in-place --mlc-assign-buffers --mlc-lower-to-plan | mlc-opt | FileCheck %s
// RUN: mlc-opt %s --mlc-fuse-elementwise --mlc-in-place --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-launch --mlc-print-kernels=target=cpu -o /dev/null | FileCheck %s --check-prefix=CPU
// RUN: mlc-opt %s --mlc-fuse-elementwise --mlc-in-place --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-launch --mlc-print-kernels=target=cuda -o /dev/null | FileCheck %s --check-prefix=CUDA

// A post-norm's residual add h + norm(y) (OLMo2's): one rows kernel whose
// plan.normalize adds h (`plus`, an element of the loads) to the
// normalized row as it stores it; norm(y) is never stored.
// CHECK: plan.kernel @k0 rows args(4) params {dims = array<i64: 4, 8>, eps = 1.000000e-05 : f64, rows = 4 : i64} {
// CHECK-NEXT: %[[Y:.*]] = plan.load arg 1 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = plan.load arg 2 offset 0 strides [0, 1] : tensor<f32>
// CHECK-NEXT: %[[H:.*]] = plan.load arg 3 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: plan.normalize rms %[[Y]], %[[W]], plus %[[H]], arg 0 offset 0 strides [8, 1] : tensor<f32>, tensor<f32> plus tensor<f32> into f32
// CHECK-NEXT: }
// The residual h is the third operand of the fused norm's value
// (prelude MlcRowNorm: (T)(y * rstd) * w + h).
// CPU: mlc_layer_norm_fused<float, 8, MLC_ROW_RMS | MLC_ROW_RESIDUAL>(4,
// CPU: const float y = norm(p2[o2], 0, p3[o3]);
// CPU-NEXT: p0[o0] = y;
// CUDA: mlc_layer_norm_fused<float, 8, MLC_ROW_RMS | MLC_ROW_RESIDUAL>(4,
// CUDA: const float y = norm(p2[o2], 0, p3[o3]);
// CUDA-NEXT: p0[o0] = y;
func.func @forward(%h: tensor<4x8xf32> {mlc.input = "h"}, %y: tensor<4x8xf32> {mlc.input = "y"}, %w: tensor<8xf32> {mlc.param = "w"}) -> (tensor<4x8xf32> {mlc.output = "s"}) {
  %n = mlc.rms_norm %y, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %h, %n : tensor<4x8xf32>, tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
