// RUN: mlc-opt %s -split-input-file -canonicalize | FileCheck %s
// The trivial folds of the graph ops: each case that must fold has a neighbour
// that must not.

// CHECK-LABEL: func.func @add_zero
// CHECK-NOT: mlc.add
// CHECK: return %arg0
func.func @add_zero(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %z = mlc.constant dense<0.0> : tensor<3xf32>
  %0 = mlc.add %x, %z : tensor<2x3xf32>, tensor<3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Adding a zero that broadcasts %x to a bigger shape is not the identity.
// CHECK-LABEL: func.func @add_zero_broadcasts
// CHECK: mlc.add
func.func @add_zero_broadcasts(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  %z = mlc.constant dense<0.0> : tensor<2x3xf32>
  %0 = mlc.add %x, %z : tensor<3xf32>, tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @mul_one_div_one_sub_zero
// CHECK-NOT: mlc.mul
// CHECK-NOT: mlc.div
// CHECK-NOT: mlc.sub
// CHECK: return %arg0
func.func @mul_one_div_one_sub_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = mlc.constant dense<1.0> : tensor<f32>
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %0 = mlc.mul %one, %x : tensor<f32>, tensor<4xf32>
  %1 = mlc.div %0, %one : tensor<4xf32>, tensor<f32>
  %2 = mlc.sub %1, %zero : tensor<4xf32>, tensor<f32>
  return %2 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @mul_two
// CHECK: mlc.mul
// CHECK: mlc.sub
func.func @mul_two(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = mlc.constant dense<2.0> : tensor<f32>
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %0 = mlc.mul %x, %two : tensor<4xf32>, tensor<f32>
  // 0 - x is a negation, not x.
  %1 = mlc.sub %zero, %0 : tensor<f32>, tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @neg_neg
// CHECK-NOT: mlc.neg
// CHECK: return %arg0
func.func @neg_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mlc.neg %x : tensor<4xf32>
  %1 = mlc.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @single_neg
// CHECK: mlc.neg
func.func @single_neg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mlc.neg %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @identity_shapes
// CHECK-NOT: mlc.transpose
// CHECK-NOT: mlc.broadcast
// CHECK-NOT: mlc.cast
// CHECK-NOT: mlc.slice
// CHECK-NOT: mlc.concat
// CHECK-NOT: mlc.dropout
// CHECK: return %arg0
func.func @identity_shapes(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mlc.transpose %x, [0, 1] : tensor<2x3xf32>
  %1 = mlc.broadcast %0 : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = mlc.cast %1 : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = mlc.slice %2 starts = [0, 0] ends = [2, 3] steps = [1, 1] : tensor<2x3xf32>
  %4 = mlc.concat(%3) axis = 0 : tensor<2x3xf32>
  %5 = mlc.dropout %4 ratio = 0.0 seed = 1 : tensor<2x3xf32>
  return %5 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @real_shapes
// CHECK: mlc.transpose
// CHECK: mlc.slice
// CHECK: mlc.dropout
func.func @real_shapes(%x: tensor<2x3xf32>) -> tensor<3x1xf32> {
  %0 = mlc.transpose %x, [1, 0] : tensor<2x3xf32>
  %1 = mlc.slice %0 starts = [0, 1] ends = [3, 2] steps = [1, 1] : tensor<3x2xf32>
  %2 = mlc.dropout %1 ratio = 0.5 seed = 1 : tensor<3x1xf32>
  return %2 : tensor<3x1xf32>
}

// -----

// Chains of reshapes collapse into one.
// CHECK-LABEL: func.func @reshape_chain
// CHECK: %[[R:.*]] = mlc.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = mlc.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %1 = mlc.reshape %0 : tensor<24xf32> -> tensor<6x4xf32>
  return %1 : tensor<6x4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_roundtrip
// CHECK-NOT: mlc.reshape
// CHECK: return %arg0
func.func @reshape_roundtrip(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = mlc.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %1 = mlc.reshape %0 : tensor<24xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// A bf16 product widened for a consumer that is not pointwise (here the
// function's result: a weight gradient) is stored in f32 by the GEMM itself.
// CHECK-LABEL: func.func @widen_product
// CHECK-NEXT: %[[P:.*]] = mlc.matmul %arg0, %arg1 transpose_lhs f32_result : tensor<6x4xbf16>, tensor<6x5xbf16>
// CHECK-NEXT: return %[[P]] : tensor<4x5xf32>
func.func @widen_product(%a: tensor<6x4xbf16>, %g: tensor<6x5xbf16>) -> tensor<4x5xf32> {
  %p = mlc.matmul %a, %g transpose_lhs : tensor<6x4xbf16>, tensor<6x5xbf16>
  %w = mlc.cast %p : tensor<4x5xbf16> -> tensor<4x5xf32>
  return %w : tensor<4x5xf32>
}

// -----

// A widening read by a pointwise op fuses into that op's kernel: the
// product stays bf16 (half the bytes); so does a product read elsewhere.
// CHECK-LABEL: func.func @keep_bf16_product
// CHECK-NOT: f32_result
// CHECK: mlc.cast
// CHECK: mlc.cast
// CHECK-NOT: f32_result
func.func @keep_bf16_product(%a: tensor<4x6xbf16>, %b: tensor<6x5xbf16>) -> (tensor<4x5xf32>, tensor<5x4xf32>, tensor<5x4xbf16>) {
  %p = mlc.matmul %a, %b : tensor<4x6xbf16>, tensor<6x5xbf16>
  %w = mlc.cast %p : tensor<4x5xbf16> -> tensor<4x5xf32>
  %t = mlc.tanh %w : tensor<4x5xf32>
  %q = mlc.matmul %b, %a transpose_lhs transpose_rhs : tensor<6x5xbf16>, tensor<4x6xbf16>
  %v = mlc.cast %q : tensor<5x4xbf16> -> tensor<5x4xf32>
  return %t, %v, %q : tensor<4x5xf32>, tensor<5x4xf32>, tensor<5x4xbf16>
}

// -----

// A bias added to a product becomes the GEMM's epilogue: add(matmul, b)
// with b one row of the product's columns, either operand order, batched
// against a shared weight.
// CHECK-LABEL: func.func @bias_into_product
// CHECK-NEXT: %[[Y:.*]] = mlc.matmul %arg0, %arg1 bias(%arg2 : tensor<5xf32>) : tensor<2x3x4xf32>, tensor<4x5xf32>
// CHECK-NEXT: %[[Z:.*]] = mlc.matmul %arg0, %arg3 transpose_rhs bias(%arg4 : tensor<6xf32>) : tensor<2x3x4xf32>, tensor<6x4xf32>
// CHECK-NEXT: return %[[Y]], %[[Z]]
func.func @bias_into_product(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>,
                             %u: tensor<6x4xf32>, %c: tensor<6xf32>)
    -> (tensor<2x3x5xf32>, tensor<2x3x6xf32>) {
  %0 = mlc.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32>
  %1 = mlc.add %0, %b : tensor<2x3x5xf32>, tensor<5xf32>
  %2 = mlc.matmul %x, %u transpose_rhs : tensor<2x3x4xf32>, tensor<6x4xf32>
  %3 = mlc.add %c, %2 : tensor<6xf32>, tensor<2x3x6xf32>
  return %1, %3 : tensor<2x3x5xf32>, tensor<2x3x6xf32>
}

// -----

// A bf16 product widened for an f32 bias: one product with an f32 result
// and the f32 bias.
// CHECK-LABEL: func.func @bias_into_widened_product
// CHECK-NEXT: %[[Y:.*]] = mlc.matmul %arg0, %arg1 f32_result bias(%arg2 : tensor<5xf32>) : tensor<3x4xbf16>, tensor<4x5xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @bias_into_widened_product(%x: tensor<3x4xbf16>, %w: tensor<4x5xbf16>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
  %0 = mlc.matmul %x, %w : tensor<3x4xbf16>, tensor<4x5xbf16>
  %1 = mlc.cast %0 : tensor<3x5xbf16> -> tensor<3x5xf32>
  %2 = mlc.add %1, %b : tensor<3x5xf32>, tensor<5xf32>
  return %2 : tensor<3x5xf32>
}

// -----

// No fold: the product is read elsewhere too (the bias would reach that
// reader), or the addend is not one row of it (a column, a full matrix, a
// row that broadcasts the result to more dimensions).
// CHECK-LABEL: func.func @bias_stays
// CHECK-COUNT-4: mlc.add
// CHECK-NOT: bias(
func.func @bias_stays(%x: tensor<3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>, %col: tensor<3x1xf32>,
                      %m: tensor<3x5xf32>, %v: tensor<4x3x4xf32>)
    -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<4x3x5xf32>) {
  %0 = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x5xf32>
  %1 = mlc.add %0, %b : tensor<3x5xf32>, tensor<5xf32>
  %2 = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x5xf32>
  %3 = mlc.add %2, %col : tensor<3x5xf32>, tensor<3x1xf32>
  %4 = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x5xf32>
  %5 = mlc.add %4, %m : tensor<3x5xf32>, tensor<3x5xf32>
  %6 = mlc.matmul %x, %w : tensor<3x4xf32>, tensor<4x5xf32>
  %7 = mlc.constant dense<1.0> : tensor<4x1x5xf32>
  %8 = mlc.add %6, %7 : tensor<3x5xf32>, tensor<4x1x5xf32>
  return %1, %3, %5, %0, %8 : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<4x3x5xf32>
}

// -----

// A product that has its bias keeps it; a second bias stays an add.
// CHECK-LABEL: func.func @second_bias_stays
// CHECK: mlc.matmul %arg0, %arg1 bias(%arg2 : tensor<5xf32>)
// CHECK-NEXT: mlc.add
func.func @second_bias_stays(%x: tensor<3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
  %0 = mlc.matmul %x, %w bias(%b : tensor<5xf32>) : tensor<3x4xf32>, tensor<4x5xf32>
  %1 = mlc.add %0, %b : tensor<3x5xf32>, tensor<5xf32>
  return %1 : tensor<3x5xf32>
}
