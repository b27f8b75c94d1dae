// RUN: mlc-opt %s -split-input-file --mlc-plan-memory | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-plan-memory -verify-diagnostics -o /dev/null

// %a dies at step 1 (its last reader), %c is first written at step 2: they
// may share bytes and do (both at 128). %b is live across both, so it gets
// its own slice; the largest is placed first (at 0), sizes round up to 64.
// CHECK-LABEL: plan.func "forward" arena 192 {
// CHECK: plan.arena 128 : memref<16xf32>
// CHECK-NEXT: plan.arena 0 : memref<32xf32>
// CHECK-NEXT: plan.arena 128 : memref<16xf32>
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "forward" arena 0 {
  %a = plan.arena -1 : memref<16xf32>
  %b = plan.arena -1 : memref<32xf32>
  %c = plan.arena -1 : memref<16xf32>
  plan.launch @k0(%a, %a) : memref<16xf32>, memref<16xf32>
  plan.launch @k0(%b, %a) : memref<32xf32>, memref<16xf32>
  plan.launch @k0(%c, %b) : memref<16xf32>, memref<32xf32>
  plan.output "y" %c [16] : memref<16xf32>
}

// -----

// A view keeps its whole arena slice live: %a is read through %v at step 2,
// so %a and %c, both live at step 2, must not share bytes.
// CHECK-LABEL: plan.func "forward" arena 128 {
// CHECK: plan.arena 0 : memref<16xf32>
// CHECK-NEXT: plan.view
// CHECK-NEXT: plan.arena 64 : memref<16xf32>
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "forward" arena 0 {
  %a = plan.arena -1 : memref<16xf32>
  %v = plan.view %a [32] : memref<16xf32> to memref<8xf32>
  %c = plan.arena -1 : memref<16xf32>
  plan.launch @k0(%a, %a) : memref<16xf32>, memref<16xf32>
  plan.launch @k0(%c, %c) : memref<16xf32>, memref<16xf32>
  plan.launch @k0(%c, %v) : memref<16xf32>, memref<8xf32>
  plan.output "y" %c [16] : memref<16xf32>
}

// -----

// Buffers bound to parameters, gradients and inputs take no arena space.
// CHECK-LABEL: plan.func "forward" arena 64 {
plan.param "w" : f32 [16] init "zeros"
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "forward" arena 0 {
  %w = plan.bind param "w" : memref<16xf32>
  %y = plan.arena -1 : memref<16xf32>
  plan.launch @k0(%y, %w) : memref<16xf32>, memref<16xf32>
  plan.output "y" %y [16] : memref<16xf32>
}

// -----

// An accumulating GEMM reads its output: %s is live from the GEMM that
// first writes it (step 0) to the one that adds to it (step 2), so %t,
// written and read in between, gets bytes of its own.
// CHECK-LABEL: plan.func "forward" arena 256 {
// CHECK: plan.arena 0 : memref<24xf32>
// CHECK-NEXT: plan.arena 128 : memref<24xf32>
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.param "w" : f32 [4, 12] init "zeros"
plan.input "x" : f32 [2, 4]
plan.func "forward" arena 0 {
  %w = plan.bind param "w" : memref<48xf32>
  %x = plan.bind input "x" : memref<8xf32>
  %s = plan.arena -1 : memref<24xf32>
  %t = plan.arena -1 : memref<24xf32>
  plan.gemm %s, %x, %w m 2 n 12 k 4 : memref<24xf32>, memref<8xf32>, memref<48xf32>
  plan.launch @k0(%t, %x) : memref<24xf32>, memref<8xf32>
  plan.gemm %s, %x, %w accumulate m 2 n 12 k 4 : memref<24xf32>, memref<8xf32>, memref<48xf32>
  plan.output "y" %s [2, 12] : memref<24xf32>
}
