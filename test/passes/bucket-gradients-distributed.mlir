// RUN: mlc-opt %s -split-input-file --mlc-bucket-gradients="ranks=2 cap-mb=0.0002 first-bucket-mb=0.0001 distributed-optimizer=1" | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-bucket-gradients="ranks=1 distributed-optimizer=1" | FileCheck %s --check-prefix=ONE
// RUN: mlc-opt %s -split-input-file --mlc-bucket-gradients="ranks=2 cap-mb=0.0002 first-bucket-mb=0.0001 distributed-optimizer=1 clip=bucket" | FileCheck %s --check-prefix=CLIP

// The distributed optimizer: the buckets of bucket-gradients.mlir (w0 + w1,
// w2, w3), each reduce-scattered where its all-reduce would start; the
// norm kernel over this rank's shards then a scalar sum of squares; the
// fused update once per bucket over its shard, each followed by that
// bucket's all-gather, the waits at the end of @optimizer.
// CHECK-LABEL: plan.func "train_step"
// CHECK-NEXT: %[[G:.*]] = plan.bind grad "*" : memref<80xf32>
// CHECK-NOT: all_reduce_start
// CHECK: plan.launch @k({{.*}}) {w = "w1"}
// CHECK-NEXT: plan.reduce_scatter_start %[[G]][0, 24] tag 0 :
// CHECK-NEXT: plan.launch @k({{.*}}) {w = "w2"}
// CHECK-NEXT: plan.reduce_scatter_start %[[G]][24, 32] tag 1 :
// CHECK-NEXT: plan.launch @k({{.*}}) {w = "w3"}
// CHECK-NEXT: plan.reduce_scatter_start %[[G]][56, 24] tag 2 :
// CHECK-NEXT: plan.reduce_scatter_wait tag 0
// CHECK-NEXT: plan.reduce_scatter_wait tag 1
// CHECK-NEXT: plan.reduce_scatter_wait tag 2
// CHECK-NEXT: plan.output "loss"
// CHECK-LABEL: plan.func "grad_norm"
// CHECK: plan.launch @norm(%[[N:.*]], %{{.*}}) {shard = -1 : i64}
// CHECK-NEXT: plan.all_reduce_norm %[[N]] : memref<1xf64>
// CHECK-NEXT: plan.output "grad_norm" %[[N]]
// CHECK-LABEL: plan.func "optimizer"
// CHECK: %[[P:.*]] = plan.bind param "*"
// CHECK-NOT: plan.launch @update({{.*}}) :
// CHECK: plan.launch @update(%[[P]], {{.*}}) {shard = 0 : i64}
// CHECK-NEXT: plan.all_gather_start %[[P]][0, 24] tag 0 :
// CHECK-NEXT: plan.launch @update(%[[P]], {{.*}}) {shard = 1 : i64}
// CHECK-NEXT: plan.all_gather_start %[[P]][24, 32] tag 1 :
// CHECK-NEXT: plan.launch @update(%[[P]], {{.*}}) {shard = 2 : i64}
// CHECK-NEXT: plan.all_gather_start %[[P]][56, 24] tag 2 :
// CHECK-NEXT: plan.all_gather_wait tag 0
// CHECK-NEXT: plan.all_gather_wait tag 1
// CHECK-NEXT: plan.all_gather_wait tag 2
// CHECK-NEXT: }
// CHECK-NOT: plan.launch @update
// One rank: nothing to shard, even with the flag.
// ONE-LABEL: plan.func "train_step"
// ONE-NOT: reduce_scatter
// ONE: plan.output "loss"
// ONE-LABEL: plan.func "grad_norm"
// ONE-NOT: shard
// ONE-NOT: all_reduce_norm
// ONE-LABEL: plan.func "optimizer"
// ONE: plan.launch @update({{.*}}) : memref
// ONE-NOT: plan.launch @update
// ONE-NOT: all_gather
// Bucket-wise clipping marks the reduce-scatters as it marks the all-reduces.
// CLIP: plan.reduce_scatter_start %{{.*}}[0, 24] tag 0 clip :
// CLIP: plan.reduce_scatter_start %{{.*}}[24, 32] tag 1 clip :
// CLIP: plan.reduce_scatter_start %{{.*}}[56, 24] tag 2 clip :
plan.param "w0" : f32 [16] init "zeros"
plan.param "w1" : f32 [8] init "zeros"
plan.param "w2" : f32 [32] init "zeros"
plan.param "w3" : f32 [24] init "zeros"
plan.scalars "adamw" : f64 [9]
plan.kernel @k pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.kernel @norm reduction args(2) params {dims = array<i64: 80>, segments = array<i64: 0, 80>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  %1 = mlc.cast %0 : tensor<f32> -> tensor<f64>
  %2 = mlc.mul %1, %1 : tensor<f64>, tensor<f64>
  plan.accumulate %2, arg 0 : tensor<f64>
}
plan.kernel @update optimizer args(5) params {dims = array<i64: 80>, segments = array<i64: 0, 80, 1>} {
  %0 = plan.load arg 0 offset 0 strides [1] : tensor<f32>
  %1 = plan.load arg 3 offset 0 strides [1] : tensor<f32>
  %2 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  %3 = plan.load arg 2 offset 0 strides [1] : tensor<f32>
  %4 = plan.scalar arg 4 index 0 : tensor<f32>
  %5 = mlc.mul %1, %4 : tensor<f32>, tensor<f32>
  %6 = mlc.sub %0, %5 : tensor<f32>, tensor<f32>
  %7 = mlc.add %2, %1 : tensor<f32>, tensor<f32>
  %8 = mlc.add %3, %1 : tensor<f32>, tensor<f32>
  plan.store %6, arg 0 offset 0 strides [1] : tensor<f32>
  plan.store %7, arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %8, arg 2 offset 0 strides [1] : tensor<f32>
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
plan.func "grad_norm" arena 8 {
  %g = plan.bind grad "*" : memref<80xf32>
  %n = plan.arena 0 : memref<1xf64>
  plan.launch @norm(%n, %g) : memref<1xf64>, memref<80xf32>
  plan.output "grad_norm" %n [] : memref<1xf64>
}
plan.func "optimizer" arena 0 {
  %h = plan.bind scalars "adamw" : memref<9xf64>
  %p = plan.bind param "*" : memref<80xf32>
  %m = plan.bind moment1 "*" : memref<80xf32>
  %v = plan.bind moment2 "*" : memref<80xf32>
  %g = plan.bind grad "*" : memref<80xf32>
  plan.launch @update(%p, %m, %v, %g, %h) : memref<80xf32>, memref<80xf32>, memref<80xf32>, memref<80xf32>, memref<9xf64>
}

// -----

// An inference package (no @train_step): nothing to reduce or shard.
// CHECK-LABEL: plan.func "forward"
// CHECK-NOT: reduce_scatter
// CHECK-NOT: all_gather
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
