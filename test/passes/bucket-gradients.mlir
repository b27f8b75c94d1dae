// RUN: mlc-opt %s -split-input-file --mlc-bucket-gradients="ranks=2 cap-mb=0.0002 first-bucket-mb=0.0001" | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-bucket-gradients | FileCheck %s --check-prefix=ONE
// RUN: mlc-opt %s -split-input-file --mlc-bucket-gradients="clip=bucket" | FileCheck %s --check-prefix=CLIP

// Four parameters of 64, 32, 128 and 96 bytes, laid out in the order
// backward finishes their gradients. The first bucket holds at most 100
// bytes (w0 + w1 = 96), the others 200 (w2 + w3 = 224 would pass it, so
// they are a bucket each). Each start follows the last step that touches
// its bucket's gradients; the waits close @train_step before its outputs.
// CHECK-LABEL: plan.func "train_step"
// CHECK-NEXT: %[[G:.*]] = plan.bind grad "*" : memref<80xf32>
// CHECK: plan.launch @k({{.*}}) {w = "w1"}
// CHECK-NEXT: plan.all_reduce_start %[[G]][0, 24] tag 0 :
// CHECK-NEXT: plan.launch @k({{.*}}) {w = "w2"}
// CHECK-NEXT: plan.all_reduce_start %[[G]][24, 32] tag 1
// CHECK-NEXT: plan.launch @k({{.*}}) {w = "w3"}
// CHECK-NEXT: plan.all_reduce_start %[[G]][56, 24] tag 2
// CHECK-NEXT: plan.all_reduce_wait tag 0
// CHECK-NEXT: plan.all_reduce_wait tag 1
// CHECK-NEXT: plan.all_reduce_wait tag 2
// CHECK-NEXT: plan.output "loss"
// With one rank (the default) nothing is inserted.
// ONE-LABEL: plan.func "train_step"
// ONE-NOT: all_reduce
// ONE: plan.output "loss"
plan.param "w0" : f32 [16] init "zeros"
plan.param "w1" : f32 [8] init "zeros"
plan.param "w2" : f32 [32] init "zeros"
plan.param "w3" : f32 [24] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 64 {
  %x = plan.arena 0 : memref<16xf32>
  %g0 = plan.bind grad "w0" : memref<16xf32>
  %g1 = plan.bind grad "w1" : memref<8xf32>
  %g2 = plan.bind grad "w2" : memref<32xf32>
  %g3 = plan.bind grad "w3" : memref<24xf32>
  plan.launch @k(%g0, %x) {w = "w0"} : memref<16xf32>, memref<16xf32>
  plan.launch @k(%g1, %x) {w = "w1"} : memref<8xf32>, memref<16xf32>
  plan.launch @k(%g2, %x) {w = "w2"} : memref<32xf32>, memref<16xf32>
  plan.launch @k(%g3, %x) {w = "w3"} : memref<24xf32>, memref<16xf32>
  plan.output "loss" %x [16] : memref<16xf32>
}

// -----

// A tied weight: w0's gradient is accumulated again by the last step
// (through a view of its slice), so its bucket starts only after that step,
// after w1's bucket, which was complete earlier.
// CHECK-LABEL: plan.func "train_step"
// CHECK: plan.launch @k({{.*}}) {w = "w1"}
// CHECK-NEXT: plan.all_reduce_start %{{.*}}[32, 32] tag 1
// CHECK-NEXT: plan.launch @k({{.*}}) {w = "w0 again"}
// CHECK-NEXT: plan.all_reduce_start %{{.*}}[0, 32] tag 0
// CHECK-NEXT: plan.all_reduce_wait tag 0
// CHECK-NEXT: plan.all_reduce_wait tag 1
plan.param "w0" : f32 [32] init "zeros"
plan.param "w1" : f32 [32] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 64 {
  %x = plan.arena 0 : memref<16xf32>
  %g0 = plan.bind grad "w0" : memref<32xf32>
  %g1 = plan.bind grad "w1" : memref<32xf32>
  %v = plan.view %g0 [64] : memref<32xf32> to memref<16xf32>
  plan.launch @k(%g0, %x) {w = "w0"} : memref<32xf32>, memref<16xf32>
  plan.launch @k(%g1, %x) {w = "w1"} : memref<32xf32>, memref<16xf32>
  plan.launch @k(%v, %x) {w = "w0 again"} : memref<16xf32>, memref<16xf32>
  plan.output "loss" %x [16] : memref<16xf32>
}

// -----

// An inference package (no @train_step) has no gradients to sum.
// CHECK-LABEL: plan.func "forward"
// CHECK-NOT: all_reduce
// CHECK: plan.output
plan.param "w0" : f32 [32] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "forward" arena 64 {
  %x = plan.arena 0 : memref<16xf32>
  %w = plan.bind param "w0" : memref<32xf32>
  plan.launch @k(%x, %w) : memref<16xf32>, memref<32xf32>
  plan.output "y" %x [16] : memref<16xf32>
}

// -----

// Bucket-wise clipping on one rank still buckets: every start is marked clip
// (the runtime clips the slice by its own norm before the sum starts).
// CLIP-LABEL: plan.func "train_step"
// CLIP: plan.all_reduce_start %{{.*}}[0, 64] tag 0 clip :
// CLIP: plan.all_reduce_wait tag 0
plan.param "w0" : f32 [32] init "zeros"
plan.param "w1" : f32 [32] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 64 {
  %x = plan.arena 0 : memref<16xf32>
  %g0 = plan.bind grad "w0" : memref<32xf32>
  %g1 = plan.bind grad "w1" : memref<32xf32>
  plan.launch @k(%g0, %x) : memref<32xf32>, memref<16xf32>
  plan.launch @k(%g1, %x) : memref<32xf32>, memref<16xf32>
  plan.output "loss" %x [16] : memref<16xf32>
}
