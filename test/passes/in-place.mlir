// RUN: mlc-opt %s -split-input-file --mlc-in-place | FileCheck %s

// The fused loss and gradient (mlc.with_loss) of logits that only they read
// and that own their bytes (a product, through a reshape that is its only
// reader): the gradient overwrites the logits.
// CHECK-LABEL: func.func @acts
// CHECK: mlc.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index = -100 {mlc.in_place, mlc.with_loss}
func.func @acts(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %logits = mlc.reshape %y : tensor<3x6xf32> -> tensor<3x6xf32>
  %l = mlc.cross_entropy %logits, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %logits, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g : tensor<f32>, tensor<3x6xf32>
}

// -----

// Not logits that something else reads too (an output, another op, the
// product under the reshape): they keep their bytes.
// CHECK-LABEL: func.func @output
// CHECK-NOT: mlc.in_place
// CHECK-LABEL: func.func @other_reader
// CHECK-NOT: mlc.in_place
// CHECK-LABEL: func.func @product_read
// CHECK-NOT: mlc.in_place
func.func @output(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g, %y : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>
}
func.func @other_reader(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %s = mlc.softmax %y axis = 1 : tensor<3x6xf32>
  return %l, %g, %s : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>
}
func.func @product_read(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %logits = mlc.reshape %y : tensor<3x6xf32> -> tensor<3x6xf32>
  %l = mlc.cross_entropy %logits, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %logits, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g, %y : tensor<f32>, tensor<3x6xf32>, tensor<3x6xf32>
}

// -----

// Not logits that are not a kernel's own bytes (an input, a transpose's
// view), nor a gradient with its own kernel (not mlc.with_loss).
// CHECK-LABEL: func.func @input
// CHECK-NOT: mlc.in_place
// CHECK-LABEL: func.func @view
// CHECK-NOT: mlc.in_place
// CHECK-LABEL: func.func @unfused
// CHECK-NOT: mlc.in_place
func.func @input(%y: tensor<3x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>) {
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g : tensor<f32>, tensor<3x6xf32>
}
func.func @view(%x: tensor<6x4xf32>, %w: tensor<4x3xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>) {
  %y = mlc.matmul %x, %w : tensor<6x4xf32>, tensor<4x3xf32>
  %logits = mlc.transpose %y, [1, 0] : tensor<6x3xf32>
  %l = mlc.cross_entropy %logits, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %logits, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g : tensor<f32>, tensor<3x6xf32>
}
func.func @unfused(%x: tensor<3x4xf32>, %w: tensor<4x6xf32>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<3x6xf32>) {
  %y = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x6xf32>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  return %l, %g : tensor<f32>, tensor<3x6xf32>
}

// -----

// --dtype bf16: not a gradient read only as its bf16 copy (through a
// reshape): the kernel writes that copy instead.
// CHECK-LABEL: func.func @bf16_copy
// CHECK-NOT: mlc.in_place
func.func @bf16_copy(%x: tensor<3x4xbf16>, %w: tensor<4x6xbf16>, %t: tensor<3xi64>) -> (tensor<f32>, tensor<18xbf16>) {
  %y = mlc.matmul %x, %w f32_result : tensor<3x4xbf16>, tensor<4x6xbf16>
  %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
  %r = mlc.reshape %g : tensor<3x6xf32> -> tensor<18xf32>
  %c = mlc.cast %r : tensor<18xf32> -> tensor<18xbf16>
  return %l, %c : tensor<f32>, tensor<18xbf16>
}

// -----

// Results written in their one reader's layout (mlc.in_reader_layout, the
// result numbers): attention's output through the transpose and reshape
// back to [batch, seq, heads x head] (the reshape needs no copy of that
// layout); a pointwise result into its slice of a concatenation; a
// concatenation in its transposing reader's layout.
// CHECK-LABEL: func.func @reader_layouts
// CHECK: mlc.attention {{.*}} causal {mlc.in_reader_layout = array<i64: 0>}
// CHECK: mlc.fusion pointwise
// CHECK: } {mlc.in_reader_layout = array<i64: 0>} : tensor<2x16x4x8xf32>
// CHECK: mlc.concat({{.*}}) axis = 3 {mlc.in_reader_layout = array<i64: 0>}
func.func @reader_layouts(%q: tensor<2x4x16x8xf32>, %x: tensor<2x16x4x8xf32>) -> (tensor<2x16x32xf32>, tensor<2x4x16x16xf32>) {
  %a = mlc.attention %q, %q, %q causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  %t = mlc.transpose %a, [0, 2, 1, 3] : tensor<2x4x16x8xf32>
  %r = mlc.reshape %t : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  %e = mlc.fusion pointwise ins(%x : tensor<2x16x4x8xf32>) {
  ^bb0(%b: tensor<2x16x4x8xf32>):
    %0 = mlc.exp %b : tensor<2x16x4x8xf32>
    mlc.yield %0 : tensor<2x16x4x8xf32>
  } : tensor<2x16x4x8xf32>
  %c = mlc.concat(%e, %x) axis = 3 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>
  %ct = mlc.transpose %c, [0, 2, 1, 3] : tensor<2x16x4x16xf32>
  return %r, %ct : tensor<2x16x32xf32>, tensor<2x4x16x16xf32>
}

// -----

// Not a result that something else reads too, nor a transpose that moves
// the innermost dimension (the kernels write it contiguous).
// CHECK-LABEL: func.func @own_layouts
// CHECK-NOT: mlc.in_reader_layout
func.func @own_layouts(%q: tensor<2x4x16x8xf32>, %x: tensor<2x16x4x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x8xf32>) {
  %a = mlc.attention %q, %q, %q causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  %t = mlc.transpose %a, [0, 1, 3, 2] : tensor<2x4x16x8xf32>
  %e = mlc.fusion pointwise ins(%x : tensor<2x16x4x8xf32>) {
  ^bb0(%b: tensor<2x16x4x8xf32>):
    %0 = mlc.exp %b : tensor<2x16x4x8xf32>
    mlc.yield %0 : tensor<2x16x4x8xf32>
  } : tensor<2x16x4x8xf32>
  %c = mlc.concat(%e, %x) axis = 3 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>
  return %t, %c, %e : tensor<2x4x8x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x8xf32>
}
