// RUN: mlc-opt %s --mlc-autocast | FileCheck %s
// RUN: not mlc-opt %s --mlc-autocast="dtype=f16" 2>&1 | FileCheck %s --check-prefix=BADTYPE

// The module is marked for the kernel targets.
// CHECK: module attributes {mlc.autocast = "bf16"}

// An f32 product reads its operands as bf16 and is read back as f32.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<32x64xf32>)
// CHECK-NEXT: %[[X16:.*]] = mlc.cast %[[X]] : tensor<8x64xf32> -> tensor<8x64xbf16>
// CHECK-NEXT: %[[W16:.*]] = mlc.cast %[[W]] : tensor<32x64xf32> -> tensor<32x64xbf16>
// CHECK-NEXT: %[[Y16:.*]] = mlc.matmul %[[X16]], %[[W16]] transpose_rhs : tensor<8x64xbf16>, tensor<32x64xbf16>
// CHECK-NEXT: %[[Y:.*]] = mlc.cast %[[Y16]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT: %[[R:.*]] = mlc.tanh %[[Y]]
// CHECK-NEXT: return %[[R]]
func.func @linear(%x: tensor<8x64xf32>, %w: tensor<32x64xf32>) -> tensor<8x32xf32> {
  %y = mlc.matmul %x, %w transpose_rhs : tensor<8x64xf32>, tensor<32x64xf32>
  %r = mlc.tanh %y : tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// A product with its bias: bf16 operands, the f32 sums and the f32 bias
// (add(cast(product), bias), in one GEMM).
// CHECK-LABEL: func.func @biased
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64x32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[X16:.*]] = mlc.cast %[[X]]
// CHECK-NEXT: %[[W16:.*]] = mlc.cast %[[W]]
// CHECK-NEXT: %[[Y:.*]] = mlc.matmul %[[X16]], %[[W16]] f32_result bias(%[[B]] : tensor<32xf32>) : tensor<8x64xbf16>, tensor<64x32xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @biased(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %y = mlc.matmul %x, %w bias(%b : tensor<32xf32>) : tensor<8x64xf32>, tensor<64x32xf32>
  return %y : tensor<8x32xf32>
}

// f64 products (the gradient checks' precision) and products already in
// bf16 are left as they are; so is everything but matmul.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: mlc.cast
// CHECK: mlc.matmul %{{.*}}, %{{.*}} : tensor<8x64xf64>, tensor<64x32xf64>
// CHECK-NOT: mlc.cast
// CHECK: mlc.matmul %{{.*}}, %{{.*}} : tensor<8x64xbf16>, tensor<64x32xbf16>
// CHECK-NOT: mlc.cast
// CHECK: return
func.func @untouched(%a: tensor<8x64xf64>, %b: tensor<64x32xf64>, %c: tensor<8x64xbf16>,
                     %d: tensor<64x32xbf16>, %e: tensor<8x32xf32>)
    -> (tensor<8x32xf64>, tensor<8x32xbf16>, tensor<8x32xf32>) {
  %y = mlc.matmul %a, %b : tensor<8x64xf64>, tensor<64x32xf64>
  %z = mlc.matmul %c, %d : tensor<8x64xbf16>, tensor<64x32xbf16>
  %t = mlc.tanh %e : tensor<8x32xf32>
  return %y, %z, %t : tensor<8x32xf64>, tensor<8x32xbf16>, tensor<8x32xf32>
}

// BADTYPE: mlc-autocast: dtype must be bf16, got 'f16'
