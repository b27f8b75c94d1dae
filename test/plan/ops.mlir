// RUN: mlc-opt %s | FileCheck %s
// RUN: mlc-opt %s | mlc-opt | FileCheck %s
// Every plan op prints and parses back.

// CHECK: plan.param "w" : f32 [4, 3] decay init "normal:0.02"
// CHECK: plan.param "b" : f32 [3] init "zeros"
// CHECK: plan.input "x" : f32 [2, 4]
// CHECK: plan.input "tokens" : i64 [-1]
// CHECK: plan.scalars "adamw" : f64 [9]
// CHECK: plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
// CHECK-NEXT: plan.load arg 1 offset 0 strides [1] : tensor<f32>
// CHECK-NEXT: plan.store %{{.*}}, arg 0 offset 0 strides [1] : tensor<f32>
// CHECK-NEXT: }
// CHECK: plan.kernel @k1 rows #plan.softmax<element = f32, rows = 16, rows_per_token = 2, columns = 64, log = true> args(2){{$}}
// CHECK: plan.kernel @k2 pointwise args(2) params {dims = array<i64: 4, 64>, vector_lanes = 4 : i64} {
// CHECK-NEXT: %[[L:.*]] = plan.load arg 1 offset 0 strides [0, 1] vector : tensor<f32>
// CHECK-NEXT: %[[E:.*]] = mlc.exp %[[L]] : tensor<f32>
// CHECK-NEXT: plan.store %[[E]], arg 0 offset 0 strides [64, 1] vector : tensor<f32>
// CHECK-NEXT: }
// CHECK: plan.func "forward" arena 128 {
// CHECK-NEXT: %[[W:.*]] = plan.bind param "w" : memref<12xf32>
// CHECK-NEXT: %[[X:.*]] = plan.bind input "x" : memref<8xf32>
// CHECK-NEXT: %[[G:.*]] = plan.bind grad "b" : memref<3xf32>
// CHECK-NEXT: %[[Y:.*]] = plan.arena 0 : memref<6xf32>
// CHECK-NEXT: %[[V:.*]] = plan.view %[[Y]][12] : memref<6xf32> to memref<3xf32>
// CHECK-NEXT: plan.gemm %[[Y]], %[[X]], %[[W]] m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
// CHECK-NEXT: plan.gemm %[[Y]], %[[X]], %[[W]] transpose_rhs m -1 n 3 k 4 {batch = array<i64: 1>, lhs_strides = array<i64: 0>, rhs_strides = array<i64: 0>}
// CHECK-NEXT: plan.gemm %[[Y]], %[[X]], %[[W]] accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
// CHECK-NEXT: plan.launch @k0(%[[G]], %[[V]]) : memref<3xf32>, memref<3xf32>
// CHECK-NEXT: plan.tp_all_reduce %[[Y]] : memref<6xf32>
// CHECK-NEXT: plan.tp_all_reduce %[[V]] max : memref<3xf32>
// CHECK-NEXT: plan.output "y" %[[Y]] [2, 3] : memref<6xf32>
// CHECK: plan.func "optimizer" arena 0 {
// CHECK-NEXT: plan.bind param "*" : memref<15xf32>
// CHECK-NEXT: plan.bind moment1 "*" : memref<15xf32>
// CHECK-NEXT: plan.bind moment2 "w" : memref<12xf32>
// CHECK-NEXT: plan.bind scalars "adamw" : memref<9xf64>
plan.param "w" : f32 [4, 3] decay init "normal:0.02"
plan.param "b" : f32 [3] init "zeros"
plan.input "x" : f32 [2, 4]
plan.input "tokens" : i64 [-1]
plan.scalars "adamw" : f64 [9]
plan.kernel @k0 pointwise args(2) params {dims = array<i64: 1>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.kernel @k1 rows #plan.softmax<element = f32, rows = 16, rows_per_token = 2, columns = 64, log = true> args(2)
plan.kernel @k2 pointwise args(2) params {dims = array<i64: 4, 64>, vector_lanes = 4 : i64} {
  %x = plan.load arg 1 offset 0 strides [0, 1] vector : tensor<f32>
  %e = mlc.exp %x : tensor<f32>
  plan.store %e, arg 0 offset 0 strides [64, 1] vector : tensor<f32>
}
plan.func "forward" arena 128 {
  %w = plan.bind param "w" : memref<12xf32>
  %x = plan.bind input "x" : memref<8xf32>
  %g = plan.bind grad "b" : memref<3xf32>
  %y = plan.arena 0 : memref<6xf32>
  %v = plan.view %y [12] : memref<6xf32> to memref<3xf32>
  plan.gemm %y, %x, %w m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
  plan.gemm %y, %x, %w transpose_rhs m -1 n 3 k 4 {batch = array<i64: 1>, lhs_strides = array<i64: 0>, rhs_strides = array<i64: 0>} : memref<6xf32>, memref<8xf32>, memref<12xf32>
  plan.gemm %y, %x, %w accumulate m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
  plan.launch @k0(%g, %v) : memref<3xf32>, memref<3xf32>
  plan.tp_all_reduce %y : memref<6xf32>
  plan.tp_all_reduce %v max : memref<3xf32>
  plan.output "y" %y [2, 3] : memref<6xf32>
}
plan.func "optimizer" arena 0 {
  %p = plan.bind param "*" : memref<15xf32>
  %m = plan.bind moment1 "*" : memref<15xf32>
  %v = plan.bind moment2 "w" : memref<12xf32>
  %h = plan.bind scalars "adamw" : memref<9xf64>
}
