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
