// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-vectorize | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-assign-buffers --mlc-lower-to-plan --mlc-cuda-vectorize | mlc-opt -split-input-file | FileCheck %s

// mlc-cuda-vectorize decides on the kernel's IR which accesses the CUDA
// target moves as vectors. Contiguous f32 accesses along a row of 64: four
// lanes (16 bytes), every load and the store a vector.
// CHECK-LABEL: plan.param "b" : f32 [4, 64]
// CHECK: plan.kernel @k0 pointwise args(3) params {dims = array<i64: 256>, vector_lanes = 4 : i64} {
// CHECK-NEXT: plan.load arg 1 offset 0 strides [1] vector : tensor<f32>
// CHECK-NEXT: plan.load arg 2 offset 0 strides [1] vector : tensor<f32>
// CHECK-NEXT: mlc.add
// CHECK-NEXT: plan.store %{{.*}}, arg 0 offset 0 strides [1] vector : tensor<f32>
func.func @forward(%a: tensor<4x64xf32> {mlc.input = "a"}, %b: tensor<4x64xf32> {mlc.param = "b"}) -> (tensor<4x64xf32> {mlc.output = "y"}) {
  %y = mlc.add %a, %b : tensor<4x64xf32>, tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// A transposed (strided) operand stays scalar: its innermost stride is 64,
// not 1. The contiguous ones are still vectors.
// CHECK-LABEL: plan.param "b" : f32 [4, 64]
// CHECK: plan.kernel @k0 pointwise args(3) params {dims = array<i64: 4, 64>, vector_lanes = 4 : i64} {
// CHECK-NEXT: plan.load arg 1 offset 0 strides [1, 4] : tensor<f32>
// CHECK-NEXT: plan.load arg 2 offset 0 strides [64, 1] vector : tensor<f32>
// CHECK-NEXT: mlc.add
// CHECK-NEXT: plan.store %{{.*}}, arg 0 offset 0 strides [64, 1] vector : tensor<f32>
func.func @forward(%a: tensor<64x4xf32> {mlc.input = "a"}, %b: tensor<4x64xf32> {mlc.param = "b"}) -> (tensor<4x64xf32> {mlc.output = "y"}) {
  %t = mlc.transpose %a, [1, 0] : tensor<64x4xf32>
  %y = mlc.add %t, %b : tensor<4x64xf32>, tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// A column broadcast along the row (stride 0 innermost) stays scalar; a
// row broadcast (stride 0 outermost, 1 innermost) is a vector.
// CHECK-LABEL: plan.param "r" : f32 [64]
// CHECK: plan.kernel @k0 pointwise args(3) params {dims = array<i64: 4, 64>, vector_lanes = 4 : i64} {
// CHECK-NEXT: plan.load arg 1 offset 0 strides [1, 0] : tensor<f32>
// CHECK-NEXT: plan.load arg 2 offset 0 strides [0, 1] vector : tensor<f32>
func.func @forward(%c: tensor<4x1xf32> {mlc.input = "c"}, %r: tensor<64xf32> {mlc.param = "r"}) -> (tensor<4x64xf32> {mlc.output = "y"}) {
  %y = mlc.mul %c, %r : tensor<4x1xf32>, tensor<64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// f64 elements: 16 bytes are two lanes.
// CHECK-LABEL: plan.param "b" : f64 [4, 8]
// CHECK: plan.kernel @k0 pointwise args(2) params {dims = array<i64: 32>, vector_lanes = 2 : i64} {
// CHECK-NEXT: plan.load arg 1 offset 0 strides [1] vector : tensor<f64>
func.func @forward(%b: tensor<4x8xf64> {mlc.param = "b"}) -> (tensor<4x8xf64> {mlc.output = "y"}) {
  %e = mlc.exp %b : tensor<4x8xf64>
  return %e : tensor<4x8xf64>
}

// -----

// Rows of 6 f32 behind a strided operand (the nest stays 3 x 6): a vector
// of four would start the second row misaligned (6 is no multiple of 4),
// so nothing is a vector.
// CHECK-LABEL: plan.param "b" : f32 [3, 6]
// CHECK: plan.kernel @k0 pointwise args(3) params {dims = array<i64: 3, 6>, vector_lanes = 1 : i64} {
// CHECK-NEXT: plan.load arg 1 offset 0 strides [1, 3] : tensor<f32>
// CHECK-NEXT: plan.load arg 2 offset 0 strides [6, 1] : tensor<f32>
// CHECK-NEXT: mlc.sub
// CHECK-NEXT: plan.store %{{.*}}, arg 0 offset 0 strides [6, 1] : tensor<f32>
func.func @forward(%a: tensor<6x3xf32> {mlc.input = "a"}, %b: tensor<3x6xf32> {mlc.param = "b"}) -> (tensor<3x6xf32> {mlc.output = "y"}) {
  %t = mlc.transpose %a, [1, 0] : tensor<6x3xf32>
  %y = mlc.sub %t, %b : tensor<3x6xf32>, tensor<3x6xf32>
  return %y : tensor<3x6xf32>
}
