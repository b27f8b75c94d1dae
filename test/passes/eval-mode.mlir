// RUN: mlc-opt %s --mlc-eval-mode | FileCheck %s

// @evaluate is @forward without dropout; @forward keeps it.
// CHECK-LABEL: func.func @forward
// CHECK: mlc.dropout
// CHECK: mlc.attention {{.*}} causal dropout = 1.000000e-01 seed = 2
// CHECK-LABEL: func.func @evaluate
// CHECK-NOT: mlc.dropout
// CHECK: %[[A:.*]] = mlc.attention %arg0, %arg0, %arg0 causal :
// CHECK-NOT: mlc.dropout
// CHECK: return %[[A]]
func.func @forward(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %d = mlc.dropout %x ratio = 0.1 seed = 1 : tensor<1x2x4x8xf32>
  %a = mlc.attention %x, %x, %x causal dropout = 0.1 seed = 2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  %s = mlc.add %a, %d : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  %e = mlc.dropout %a ratio = 0.2 seed = 3 : tensor<1x2x4x8xf32>
  return %e : tensor<1x2x4x8xf32>
}
