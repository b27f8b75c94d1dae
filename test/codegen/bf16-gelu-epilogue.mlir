// RUN: mlc-opt %s -split-input-file --mlc-fold-casts --mlc-fuse-elementwise --mlc-gemm-epilogues --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s

// --dtype bf16: the MLP's first product is stored in bf16 (mlc-fold-casts)
// and its GELU, widened at the load and rounded at the store, is the GEMM's
// epilogue with a bf16 pre-activation, as the f32 GELU is with an f32 one:
// no kernel of its own. The GELU's gradient reads the bf16 pre-activation.
// CHECK-NOT: mlc.gelu
// CHECK-LABEL: plan.func "forward"
// CHECK: plan.gemm %[[G:.*]], %{{.*}}, %{{.*}} m 4 n 16 k 8 bias(%{{.*}} : memref<16xbf16>) gelu(%[[P:.*]] : memref<64xbf16>) : memref<64xbf16>, memref<32xbf16>, memref<128xbf16>
// CHECK-NOT: mlc.gelu
// CHECK: plan.gemm %{{.*}}, %[[G]], %{{.*}} m 4 n 8 k 16
func.func @forward(%w: tensor<8x16xf32> {mlc.param = "w"}, %c: tensor<16xf32> {mlc.param = "c"},
                   %v: tensor<16x8xf32> {mlc.param = "v"}, %x: tensor<4x8xf32> {mlc.input = "x"})
    -> (tensor<4x8xf32> {mlc.output = "y"}) {
  %x16 = mlc.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %w16 = mlc.cast %w : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = mlc.matmul %x16, %w16 f32_result bias(%c : tensor<16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %g16 = mlc.cast %g : tensor<4x16xf32> -> tensor<4x16xbf16>
  %v16 = mlc.cast %v : tensor<16x8xf32> -> tensor<16x8xbf16>
  %y = mlc.matmul %g16, %v16 f32_result : tensor<4x16xbf16>, tensor<16x8xbf16>
  return %y : tensor<4x8xf32>
}

// -----

// Not where two GELUs read the product (the forward's and its recomputation
// in backward, mlc-recompute): they are kernels of their own, as in f32.
// CHECK: plan.kernel @[[$K:k[0-9]+]] pointwise args(3)
// CHECK: mlc.gelu
// CHECK: mlc.gelu
// CHECK-LABEL: plan.func "forward"
// CHECK: plan.gemm %[[P:.*]], %{{.*}}, %{{.*}} m 4 n 16 k 8 bias(%{{.*}} : memref<16xbf16>) : memref<64xbf16>
// CHECK-NEXT: plan.launch @[[$K]](%{{.*}}, %{{.*}}, %[[P]])
func.func @forward(%w: tensor<8x16xf32> {mlc.param = "w"}, %c: tensor<16xf32> {mlc.param = "c"},
                   %v: tensor<16x8xf32> {mlc.param = "v"}, %x: tensor<4x8xf32> {mlc.input = "x"})
    -> (tensor<4x8xf32> {mlc.output = "y"}, tensor<4x8xf32> {mlc.output = "z"}) {
  %x16 = mlc.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %w16 = mlc.cast %w : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = mlc.matmul %x16, %w16 f32_result bias(%c : tensor<16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %g16 = mlc.cast %g : tensor<4x16xf32> -> tensor<4x16xbf16>
  %e = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %e16 = mlc.cast %e : tensor<4x16xf32> -> tensor<4x16xbf16>
  %v16 = mlc.cast %v : tensor<16x8xf32> -> tensor<16x8xbf16>
  %y = mlc.matmul %g16, %v16 f32_result : tensor<4x16xbf16>, tensor<16x8xbf16>
  %z = mlc.matmul %e16, %v16 f32_result : tensor<4x16xbf16>, tensor<16x8xbf16>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}
