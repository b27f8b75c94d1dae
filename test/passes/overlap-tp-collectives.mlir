// RUN: mlc-opt %s -split-input-file --mlc-overlap-tp-collectives | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-overlap-tp-collectives --mlc-plan-memory | FileCheck %s --check-prefix=MEM

// A column-parallel layer's backward, twice: dX = dY W^T (a partial sum per
// rank) and dW = X^T dY, then dX's all-reduce (the dual of mlc.tp_copy) and
// a kernel reading the sum. The all-reduce starts right after dX's GEMM,
// dW's GEMM runs while it is in flight, and the wait comes before the
// reader. The second layer's start follows the first's wait (one
// tensor-parallel collective in flight at a time).
// CHECK-LABEL: plan.func "train_step"
// CHECK:      plan.gemm %[[DX:[^,]*]], %[[DY:[^,]*]], %{{[^ ]*}} transpose_rhs m 4 n 8 k 6
// CHECK-NEXT: plan.tp_all_reduce %[[DX]] tag 0 : memref<32xf32>
// CHECK-NEXT: plan.gemm %{{[^,]*}}, %{{[^,]*}}, %[[DY]] transpose_lhs m 8 n 6 k 4
// CHECK-NEXT: plan.tp_wait %[[DX]] tag 0 : memref<32xf32>
// CHECK-NEXT: plan.launch @k(%[[DX2:[^,]*]], %[[DX]])
// CHECK-NEXT: plan.gemm %[[DXB:[^,]*]], %[[DX2]], %{{[^ ]*}} transpose_rhs m 4 n 8 k 8
// CHECK-NEXT: plan.tp_all_reduce %[[DXB]] tag 1 : memref<32xf32>
// CHECK-NEXT: plan.gemm
// CHECK-NEXT: plan.tp_wait %[[DXB]] tag 1 : memref<32xf32>
// CHECK-NEXT: plan.output "dx"
// While dX's slice is in flight no other buffer shares its bytes: the
// wait keeps it live across dW's GEMM (the verifier checks the placement).
// MEM-LABEL: plan.func "train_step"
// MEM: plan.tp_all_reduce %{{.*}} tag 0
// MEM: plan.tp_wait %{{.*}} tag 0
module attributes {mlc.tensor_parallel = 2 : i64} {
plan.kernel @k pointwise args(2) params {dims = array<i64: 32>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 0 {
  %dy = plan.arena -1 : memref<24xf32>
  %w = plan.arena -1 : memref<48xf32>
  %x = plan.arena -1 : memref<32xf32>
  %dx = plan.arena -1 : memref<32xf32>
  %dw = plan.arena -1 : memref<48xf32>
  %dx2 = plan.arena -1 : memref<32xf32>
  %w2 = plan.arena -1 : memref<64xf32>
  %dxb = plan.arena -1 : memref<32xf32>
  %dw2 = plan.arena -1 : memref<64xf32>
  plan.gemm %dx, %dy, %w transpose_rhs m 4 n 8 k 6 : memref<32xf32>, memref<24xf32>, memref<48xf32>
  plan.gemm %dw, %x, %dy transpose_lhs m 8 n 6 k 4 : memref<48xf32>, memref<32xf32>, memref<24xf32>
  plan.tp_all_reduce %dx : memref<32xf32>
  plan.launch @k(%dx2, %dx) : memref<32xf32>, memref<32xf32>
  plan.gemm %dxb, %dx2, %w2 transpose_rhs m 4 n 8 k 8 : memref<32xf32>, memref<32xf32>, memref<64xf32>
  plan.gemm %dw2, %x, %dx2 transpose_lhs m 8 n 8 k 4 : memref<64xf32>, memref<32xf32>, memref<32xf32>
  plan.tp_all_reduce %dxb : memref<32xf32>
  plan.output "dx" %dxb [4, 8] : memref<32xf32>
  plan.output "dw" %dw [8, 6] : memref<48xf32>
  plan.output "dw2" %dw2 [8, 8] : memref<64xf32>
}
}

// -----

// Where it must not act: a reader right after the all-reduce (the dW GEMM
// comes after the reader); only a launch in between, no GEMM; a maximum; a
// slice of the flat gradient buffer. All stay blocking.
// CHECK-LABEL: plan.func "train_step"
// CHECK-NOT:  tag
// CHECK-NOT:  plan.tp_wait
// CHECK:      plan.gemm %[[DX:[^,]*]], {{.*}} transpose_rhs
// CHECK-NEXT: plan.tp_all_reduce %[[DX]] : memref<32xf32>
// CHECK-NEXT: plan.launch @k(%{{[^,]*}}, %[[DX]])
// CHECK-NEXT: plan.gemm {{.*}} transpose_lhs
// CHECK-NEXT: plan.gemm %[[DY:[^,]*]], {{.*}} transpose_rhs
// CHECK-NEXT: plan.launch @k
// CHECK-NEXT: plan.tp_all_reduce %[[DY]] : memref<32xf32>
// CHECK-NEXT: plan.launch @k(%{{[^,]*}}, %[[DY]])
// CHECK-NEXT: plan.gemm %[[M:[^,]*]], {{.*}} transpose_rhs
// CHECK-NEXT: plan.gemm
// CHECK-NEXT: plan.tp_all_reduce %[[M]] max : memref<32xf32>
// CHECK-NEXT: plan.gemm %[[G:[^,]*]], {{.*}} transpose_lhs
// CHECK-NEXT: plan.gemm
// CHECK-NEXT: plan.tp_all_reduce %[[G]] : memref<48xf32>
// CHECK-NOT:  plan.tp_wait
module attributes {mlc.tensor_parallel = 2 : i64} {
plan.param "w" : f32 [8, 6] init "zeros"
plan.kernel @k pointwise args(2) params {dims = array<i64: 32>} {
  %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
  plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
}
plan.func "train_step" arena 0 {
  %dy = plan.arena -1 : memref<24xf32>
  %w = plan.arena -1 : memref<48xf32>
  %x = plan.arena -1 : memref<32xf32>
  %dx = plan.arena -1 : memref<32xf32>
  %dw = plan.arena -1 : memref<48xf32>
  %r = plan.arena -1 : memref<32xf32>
  %d2 = plan.arena -1 : memref<32xf32>
  %o = plan.arena -1 : memref<32xf32>
  %r2 = plan.arena -1 : memref<32xf32>
  %m = plan.arena -1 : memref<32xf32>
  %dw3 = plan.arena -1 : memref<48xf32>
  %g = plan.bind grad "w" : memref<48xf32>
  %dw4 = plan.arena -1 : memref<48xf32>
  plan.gemm %dx, %dy, %w transpose_rhs m 4 n 8 k 6 : memref<32xf32>, memref<24xf32>, memref<48xf32>
  plan.tp_all_reduce %dx : memref<32xf32>
  plan.launch @k(%r, %dx) : memref<32xf32>, memref<32xf32>
  plan.gemm %dw, %x, %dy transpose_lhs m 8 n 6 k 4 : memref<48xf32>, memref<32xf32>, memref<24xf32>
  plan.gemm %d2, %dy, %w transpose_rhs m 4 n 8 k 6 : memref<32xf32>, memref<24xf32>, memref<48xf32>
  plan.launch @k(%o, %x) : memref<32xf32>, memref<32xf32>
  plan.tp_all_reduce %d2 : memref<32xf32>
  plan.launch @k(%r2, %d2) : memref<32xf32>, memref<32xf32>
  plan.gemm %m, %dy, %w transpose_rhs m 4 n 8 k 6 : memref<32xf32>, memref<24xf32>, memref<48xf32>
  plan.gemm %dw3, %x, %dy transpose_lhs m 8 n 6 k 4 : memref<48xf32>, memref<32xf32>, memref<24xf32>
  plan.tp_all_reduce %m max : memref<32xf32>
  plan.gemm %g, %x, %dy transpose_lhs m 8 n 6 k 4 : memref<48xf32>, memref<32xf32>, memref<24xf32>
  plan.gemm %dw4, %x, %dy transpose_lhs m 8 n 6 k 4 : memref<48xf32>, memref<32xf32>, memref<24xf32>
  plan.tp_all_reduce %g : memref<48xf32>
  plan.output "r" %r [4, 8] : memref<32xf32>
  plan.output "r2" %r2 [4, 8] : memref<32xf32>
  plan.output "o" %o [4, 8] : memref<32xf32>
  plan.output "m" %m [4, 8] : memref<32xf32>
  plan.output "dw" %dw [8, 6] : memref<48xf32>
  plan.output "dw3" %dw3 [8, 6] : memref<48xf32>
  plan.output "dw4" %dw4 [8, 6] : memref<48xf32>
}
}

// -----

// T = 1: no group, nothing changes (a plan for one rank has no
// plan.tp_all_reduce; this one is kept to show the pass looks at T).
// CHECK-LABEL: plan.func "train_step"
// CHECK:      plan.gemm
// CHECK-NEXT: plan.gemm
// CHECK-NEXT: plan.tp_all_reduce %{{[^ ]*}} : memref<32xf32>
// CHECK-NOT:  plan.tp_wait
module attributes {mlc.tensor_parallel = 1 : i64} {
plan.func "train_step" arena 0 {
  %dy = plan.arena -1 : memref<24xf32>
  %w = plan.arena -1 : memref<48xf32>
  %x = plan.arena -1 : memref<32xf32>
  %dx = plan.arena -1 : memref<32xf32>
  %dw = plan.arena -1 : memref<48xf32>
  plan.gemm %dx, %dy, %w transpose_rhs m 4 n 8 k 6 : memref<32xf32>, memref<24xf32>, memref<48xf32>
  plan.gemm %dw, %x, %dy transpose_lhs m 8 n 6 k 4 : memref<48xf32>, memref<32xf32>, memref<24xf32>
  plan.tp_all_reduce %dx : memref<32xf32>
  plan.output "dx" %dx [4, 8] : memref<32xf32>
  plan.output "dw" %dw [8, 6] : memref<48xf32>
}
}
