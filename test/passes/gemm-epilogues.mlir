// RUN: mlc-opt %s -split-input-file --mlc-gemm-epilogues | FileCheck %s

// GPT-2's MLP: the tanh GELU of the first product (with its bias) is that
// GEMM's epilogue; the GELU's gradient and the second product are not
// touched.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[H:.*]] = mlc.matmul %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<16xf32>) : tensor<4x8xf32>, tensor<8x16xf32>{{$}}
// CHECK-NEXT: %[[G:.*]] = mlc.gelu %[[H]] approximate = tanh {mlc.gemm_epilogue} : tensor<4x16xf32>
// CHECK-NEXT: mlc.matmul %[[G]], %{{.*}} : tensor<4x16xf32>, tensor<16x8xf32>{{$}}
// CHECK-NEXT: mlc.gelu_grad %{{.*}}, %[[H]] approximate = tanh : tensor<4x16xf32>{{$}}
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %v: tensor<16x8xf32>, %dg: tensor<4x16xf32>)
    -> (tensor<4x8xf32>, tensor<4x16xf32>) {
  %h = mlc.matmul %x, %w bias(%b : tensor<16xf32>) : tensor<4x8xf32>, tensor<8x16xf32>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %y = mlc.matmul %g, %v : tensor<4x16xf32>, tensor<16x8xf32>
  %dh = mlc.gelu_grad %dg, %h approximate = tanh : tensor<4x16xf32>
  return %y, %dh : tensor<4x8xf32>, tensor<4x16xf32>
}

// -----

// f64 too.
// CHECK-LABEL: func.func @f64
// CHECK: mlc.gelu %{{.*}} approximate = tanh {mlc.gemm_epilogue} : tensor<4x16xf64>
func.func @f64(%x: tensor<4x8xf64>, %w: tensor<8x16xf64>) -> tensor<4x16xf64> {
  %h = mlc.matmul %x, %w : tensor<4x8xf64>, tensor<8x16xf64>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf64>
  return %g : tensor<4x16xf64>
}

// -----

// Not where two GELUs read one product (the forward's and its
// recomputation in backward, mlc-recompute): a GPU's epilogue does not
// round as mlc's GELU kernel does, and the recomputed value must be the
// forward's, bit for bit.
// CHECK-LABEL: func.func @recomputed
// CHECK-NOT: mlc.gemm_epilogue
func.func @recomputed(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = mlc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %r = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  return %g, %r : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Not BERT's erf GELU: it is a kernel of its own.
// CHECK-LABEL: func.func @erf
// CHECK-NOT: mlc.gemm_epilogue
func.func @erf(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %h = mlc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %g = mlc.gelu %h : tensor<4x16xf32>
  return %g : tensor<4x16xf32>
}

// -----

// Not of a product with an accumulator: the epilogue would not see it.
// CHECK-LABEL: func.func @accumulated
// CHECK-NOT: mlc.gemm_epilogue
func.func @accumulated(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %a: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %h = mlc.matmul %x, %w acc(%a : tensor<4x16xf32>) : tensor<4x8xf32>, tensor<8x16xf32>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  return %g : tensor<4x16xf32>
}

// -----

// --dtype bf16: the bf16 product's one GELU fusion (widened at its load,
// rounded at its store) is the same epilogue with a bf16 pre-activation.
// CHECK-LABEL: func.func @bf16
// CHECK: %[[H:.*]] = mlc.matmul
// CHECK: mlc.fusion pointwise ins(%[[H]] : tensor<4x16xbf16>) {
// CHECK: } {mlc.gemm_epilogue} : tensor<4x16xbf16>
func.func @bf16(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %h = mlc.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.fusion pointwise ins(%h : tensor<4x16xbf16>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %0 = mlc.cast %a : tensor<4x16xbf16> -> tensor<4x16xf32>
    %1 = mlc.gelu %0 approximate = tanh : tensor<4x16xf32>
    %2 = mlc.cast %1 : tensor<4x16xf32> -> tensor<4x16xbf16>
    mlc.yield %2 : tensor<4x16xbf16>
  } : tensor<4x16xbf16>
  return %g : tensor<4x16xbf16>
}

// -----

// Not two such fusions of one bf16 product (recomputation), nor a fusion
// that does more than the GELU.
// CHECK-LABEL: func.func @bf16_not
// CHECK-NOT: mlc.gemm_epilogue
func.func @bf16_not(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %h = mlc.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.fusion pointwise ins(%h : tensor<4x16xbf16>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %0 = mlc.cast %a : tensor<4x16xbf16> -> tensor<4x16xf32>
    %1 = mlc.gelu %0 approximate = tanh : tensor<4x16xf32>
    %2 = mlc.cast %1 : tensor<4x16xf32> -> tensor<4x16xbf16>
    mlc.yield %2 : tensor<4x16xbf16>
  } : tensor<4x16xbf16>
  %r = mlc.fusion pointwise ins(%h : tensor<4x16xbf16>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %0 = mlc.cast %a : tensor<4x16xbf16> -> tensor<4x16xf32>
    %1 = mlc.gelu %0 approximate = tanh : tensor<4x16xf32>
    %2 = mlc.cast %1 : tensor<4x16xf32> -> tensor<4x16xbf16>
    mlc.yield %2 : tensor<4x16xbf16>
  } : tensor<4x16xbf16>
  %k = mlc.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>
  %s = mlc.fusion pointwise ins(%k : tensor<4x16xbf16>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %0 = mlc.cast %a : tensor<4x16xbf16> -> tensor<4x16xf32>
    %1 = mlc.gelu %0 approximate = tanh : tensor<4x16xf32>
    %3 = mlc.mul %1, %1 : tensor<4x16xf32>, tensor<4x16xf32>
    %2 = mlc.cast %3 : tensor<4x16xf32> -> tensor<4x16xbf16>
    mlc.yield %2 : tensor<4x16xbf16>
  } : tensor<4x16xbf16>
  return %g, %r, %s : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

// Not a bf16 product that an mlc.gelu reads (a GELU kernel of its own).
// CHECK-LABEL: func.func @bf16_gelu_op
// CHECK-NOT: mlc.gemm_epilogue
func.func @bf16_gelu_op(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %h = mlc.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xbf16>
  return %g : tensor<4x16xbf16>
}
