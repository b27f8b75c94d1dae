// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s

// A rotary op and the pointwise consumer of its result (a scale, a cast for
// the attention's products) are one fusion; its input, read at the element
// and at its partner, comes in through the head split's view.
// CHECK-LABEL: func.func @rotary_with_consumer
// CHECK: %[[T:.*]] = mlc.transpose %arg0, [0, 2, 1, 3]
// CHECK: %[[F:.*]] = mlc.fusion pointwise ins(%[[T]], %arg1, %arg2 : tensor<2x4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x4x8x16xf32>, %[[C:.*]]: tensor<8x16xf32>, %[[S:.*]]: tensor<8x16xf32>):
// CHECK-NEXT:   %[[R:.*]] = mlc.rotary %[[X]], %[[C]], %[[S]]
// CHECK-NEXT:   mlc.constant
// CHECK-NEXT:   %[[Y:.*]] = mlc.mul %[[R]],
// CHECK-NEXT:   mlc.yield %[[Y]] : tensor<2x4x8x16xf32>
// CHECK-NOT: mlc.rotary
// CHECK: return %[[F]]
func.func @rotary_with_consumer(%q: tensor<2x8x4x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = mlc.transpose %q, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %1 = mlc.rotary %0, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %c = mlc.constant dense<2.500000e-01> : tensor<f32>
  %2 = mlc.mul %1, %c : tensor<2x4x8x16xf32>, tensor<f32>
  return %2 : tensor<2x4x8x16xf32>
}

// -----

// The producer of a rotary input never joins it: the input is read at two
// places, so it must be in memory. The bias add stays a kernel of its own;
// the rotary and its consumer are the second.
// CHECK-LABEL: func.func @producer_stays_out
// CHECK:      %[[N:.*]] = mlc.add %arg0, %arg3
// CHECK-NEXT: mlc.fusion pointwise ins(%[[N]], %arg1, %arg2
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   mlc.rotary
// CHECK-NEXT:   mlc.neg
// CHECK-NEXT:   mlc.yield
func.func @producer_stays_out(%x: tensor<2x4x8x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = mlc.add %x, %b : tensor<2x4x8x16xf32>, tensor<16xf32>
  %1 = mlc.rotary %0, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %2 = mlc.neg %1 : tensor<2x4x8x16xf32>
  return %2 : tensor<2x4x8x16xf32>
}

// -----

// Not even when it has a second reader in the group: the sum of the input
// and its rotation reads the input from memory too.
// CHECK-LABEL: func.func @producer_with_second_reader
// CHECK:      %[[E:.*]] = mlc.exp %arg0
// CHECK:      mlc.fusion pointwise ins(%[[E]], %arg1, %arg2
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x4x8x16xf32>,
// CHECK-NEXT:   %[[R:.*]] = mlc.rotary %[[X]]
// CHECK-NEXT:   mlc.add %[[R]], %[[X]]
func.func @producer_with_second_reader(%x: tensor<2x4x8x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = mlc.exp %x : tensor<2x4x8x16xf32>
  %1 = mlc.rotary %0, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %2 = mlc.add %1, %0 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %2 : tensor<2x4x8x16xf32>
}

// -----

// Two rotations cannot share a nest (each splits it): the sum of the
// rotated q and the rotated k takes one of them, the other is its own kernel.
// CHECK-LABEL: func.func @one_rotary_per_fusion
// CHECK:      %[[A:.*]] = mlc.rotary %arg0
// CHECK:      mlc.fusion pointwise ins(%arg1, %arg2, %arg3, %[[A]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   mlc.rotary
// CHECK-NEXT:   mlc.add
// CHECK-NEXT:   mlc.yield
func.func @one_rotary_per_fusion(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = mlc.rotary %q, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %1 = mlc.rotary %k, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %2 = mlc.add %0, %1 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %2 : tensor<2x4x8x16xf32>
}
