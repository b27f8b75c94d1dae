// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s

// A rotary op and its consumer as one pointwise kernel over the head dim
// split into its pairs [2, 8]: the input read at the element (arg 1) and,
// bound to the same buffer, at its partner (arg 4: offset 8, stride -8
// along the split), both through the head split's transpose (strides 512,
// 16, 64): one read and one write of q, no copy of its own.
// CHECK-LABEL: plan.param "q" : f32 [2, 8, 4, 16]
// CHECK:      plan.kernel @k0 pointwise args(5) params {dims = array<i64: 2, 4, 8, 2, 8>} {
// CHECK-NEXT:   %[[X:.*]] = plan.load arg 1 offset 0 strides [512, 16, 64, 8, 1] : tensor<f32>
// CHECK-NEXT:   %[[C:.*]] = plan.load arg 2 offset 0 strides [0, 0, 16, 8, 1] : tensor<f32>
// CHECK-NEXT:   %[[S:.*]] = plan.load arg 3 offset 0 strides [0, 0, 16, 8, 1] : tensor<f32>
// CHECK-NEXT:   %[[P:.*]] = plan.load arg 4 offset 8 strides [512, 16, 64, -8, 1] : tensor<f32>
// CHECK-NEXT:   %[[XC:.*]] = mlc.mul %[[X]], %[[C]]
// CHECK-NEXT:   %[[PS:.*]] = mlc.mul %[[P]], %[[S]]
// CHECK-NEXT:   %[[R:.*]] = mlc.add %[[XC]], %[[PS]]
// CHECK:        plan.store {{.*}}, arg 0 offset 0 strides [512, 128, 16, 8, 1] : tensor<f32>
// CHECK-NEXT: }
// CHECK-NOT: plan.kernel
// CHECK: plan.launch @k0(%[[OUT:.*]], %[[Q:.*]], %[[CB:.*]], %[[SB:.*]], %[[Q]])
func.func @forward(%q: tensor<2x8x4x16xf32> {mlc.param = "q"}, %cos: tensor<8x16xf32> {mlc.input = "cos"}, %sin: tensor<8x16xf32> {mlc.input = "sin"}) -> (tensor<2x4x8x16xf32> {mlc.output = "y"}) {
  %0 = mlc.transpose %q, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %1 = mlc.rotary %0, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %c = mlc.constant dense<2.500000e-01> : tensor<f32>
  %2 = mlc.mul %1, %c : tensor<2x4x8x16xf32>, tensor<f32>
  return %2 : tensor<2x4x8x16xf32>
}

// -----

// Interleaved and transposed (the gradient): pairs (2i, 2i+1), the partner
// at offset 1 and stride -1, and sin read at the partner as well.
// CHECK-LABEL: plan.param "g" : f32 [2, 4, 8, 16]
// CHECK:      plan.kernel @k0 pointwise args(6) params {dims = array<i64: 8, 64, 2>} {
// CHECK-NEXT:   plan.load arg 1 offset 0 strides [128, 2, 1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 2 offset 0 strides [0, 2, 1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 3 offset 0 strides [0, 2, 1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 4 offset 1 strides [128, 2, -1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 5 offset 1 strides [0, 2, -1] : tensor<f32>
func.func @forward(%g: tensor<2x4x8x16xf32> {mlc.param = "g"}, %cos: tensor<8x16xf32> {mlc.input = "cos"}, %sin: tensor<8x16xf32> {mlc.input = "sin"}) -> (tensor<2x4x8x16xf32> {mlc.output = "y"}) {
  %0 = mlc.rotary %g, %cos, %sin interleaved transpose : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  return %0 : tensor<2x4x8x16xf32>
}


// -----

// A partial rotation (rotary dim 4 of a head dim 6): the rotated part over
// [.., 2, 2] and the pass-through copy of the last two elements, two nests
// that each read and write their part once; it fuses with nothing, so its
// consumer is a kernel of its own.
// CHECK-LABEL: plan.param "x" : f32 [2, 3, 4, 6]
// CHECK:      plan.kernel @k0 pointwise args(5) params {dims = array<i64: 6, 4, 2, 2>} {
// CHECK-NEXT:   plan.load arg 1 offset 0 strides [24, 6, 2, 1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 2 offset 0 strides [0, 4, 2, 1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 3 offset 0 strides [0, 4, 2, 1] : tensor<f32>
// CHECK-NEXT:   plan.load arg 4 offset 2 strides [24, 6, -2, 1] : tensor<f32>
// CHECK:      plan.kernel @k1 pointwise args(2) params {dims = array<i64: 24, 2>} {
// CHECK-NEXT:   %[[P:.*]] = plan.load arg 1 offset 4 strides [6, 1] : tensor<f32>
// CHECK-NEXT:   plan.store %[[P]], arg 0 offset 4 strides [6, 1] : tensor<f32>
// CHECK:      plan.kernel @k2 pointwise
// CHECK-NEXT:   plan.load
// CHECK-NEXT:   mlc.tanh
func.func @forward(%x: tensor<2x3x4x6xf32> {mlc.param = "x"}, %c: tensor<4x4xf32> {mlc.input = "c"}, %s: tensor<4x4xf32> {mlc.input = "s"}) -> (tensor<2x3x4x6xf32> {mlc.output = "y"}) {
  %0 = mlc.rotary %x, %c, %s : tensor<2x3x4x6xf32>, tensor<4x4xf32>
  %1 = mlc.tanh %0 : tensor<2x3x4x6xf32>
  return %1 : tensor<2x3x4x6xf32>
}
