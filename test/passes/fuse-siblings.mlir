// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s

// SwiGLU's backward: d up reads g and gate, d gate reads g, gate and up.
// The smaller group's inputs are the larger's, so they are one kernel with
// two results that reads each input once.
// CHECK-LABEL: func.func @swiglu_backward
// CHECK:      %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg1, %arg0, %arg2 :
// CHECK:        mlc.silu
// CHECK:        mlc.yield
// CHECK-NOT:  mlc.fusion
// CHECK:      return %[[F]]#0, %[[F]]#1
func.func @swiglu_backward(%g: tensor<4x8xf32>, %gate: tensor<4x8xf32>, %up: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %n = mlc.neg %gate : tensor<4x8xf32>
  %e = mlc.exp %n : tensor<4x8xf32>
  %d = mlc.add %e, %one : tensor<4x8xf32>, tensor<f32>
  %s = mlc.div %one, %d : tensor<f32>, tensor<4x8xf32>
  %gu = mlc.mul %g, %up : tensor<4x8xf32>, tensor<4x8xf32>
  %dgate = mlc.mul %gu, %s : tensor<4x8xf32>, tensor<4x8xf32>
  %si = mlc.silu %gate : tensor<4x8xf32>
  %dup = mlc.mul %g, %si : tensor<4x8xf32>, tensor<4x8xf32>
  return %dgate, %dup : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Siblings that each read something the other does not stay apart: merging
// them would not save a read.
// CHECK-LABEL: func.func @disjoint_reads
// CHECK:      mlc.fusion pointwise ins(%arg0, %arg1 :
// CHECK:      mlc.fusion pointwise ins(%arg0, %arg2 :
func.func @disjoint_reads(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = mlc.mul %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %1 = mlc.exp %0 : tensor<4x8xf32>
  %2 = mlc.mul %x, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %3 = mlc.exp %2 : tensor<4x8xf32>
  return %1, %3 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The earlier sibling's result is read by a matmul before the later one:
// the merged kernel could not run early enough, so they stay apart.
// CHECK-LABEL: func.func @read_in_between
// CHECK:      %[[A:.*]] = mlc.fusion pointwise ins(%arg0, %arg1 :
// CHECK:      %[[M:.*]] = mlc.matmul %[[A]]
// CHECK:      mlc.fusion pointwise ins(%arg0, %arg1, %[[M]] :
func.func @read_in_between(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = mlc.mul %x, %y : tensor<4x4xf32>, tensor<4x4xf32>
  %1 = mlc.exp %0 : tensor<4x4xf32>
  %m = mlc.matmul %1, %1 : tensor<4x4xf32>, tensor<4x4xf32>
  %2 = mlc.sub %x, %y : tensor<4x4xf32>, tensor<4x4xf32>
  %3 = mlc.mul %2, %m : tensor<4x4xf32>, tensor<4x4xf32>
  return %3 : tensor<4x4xf32>
}

// -----

// A sibling read early (by a matmul in between) joins the later one at the
// earlier place, when the later one's inputs exist there.
// CHECK-LABEL: func.func @merged_early
// CHECK:      %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg0 :
// CHECK:      mlc.matmul %[[F]]#
// CHECK-NOT:  mlc.fusion
func.func @merged_early(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = mlc.gelu %x : tensor<4x4xf32>
  %m = mlc.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32>
  %b = mlc.gelu %x : tensor<4x4xf32>
  %n = mlc.matmul %b, %m : tensor<4x4xf32>, tensor<4x4xf32>
  return %m, %n : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// But not a value mlc-recompute computes again in backward: moved to its
// forward sibling it would be kept from forward to backward again.
// CHECK-LABEL: func.func @recomputed_stays
// CHECK-NOT:  mlc.fusion
// CHECK:      %[[A:.*]] = mlc.gelu %arg0 :
// CHECK-NEXT: %[[M:.*]] = mlc.matmul %[[A]], %arg1
// CHECK-NEXT: %[[B:.*]] = mlc.gelu %arg0 {mlc.recomputed}
// CHECK-NEXT: mlc.matmul %[[B]], %[[M]]
func.func @recomputed_stays(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = mlc.gelu %x : tensor<4x4xf32>
  %m = mlc.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32>
  %b = mlc.gelu %x {mlc.recomputed} : tensor<4x4xf32>
  %n = mlc.matmul %b, %m : tensor<4x4xf32>, tensor<4x4xf32>
  return %m, %n : tensor<4x4xf32>, tensor<4x4xf32>
}
