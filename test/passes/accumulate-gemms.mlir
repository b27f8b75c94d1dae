// RUN: mlc-opt %s -split-input-file --mlc-accumulate-gemms | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-accumulate-gemms | mlc-opt -split-input-file | FileCheck %s

// Two products summed (an MLP's input gradient): the later accumulates into
// the earlier; the add is gone.
// CHECK-LABEL: func.func @two_way
// CHECK-NEXT: %[[A:.*]] = mlc.matmul %arg0, %arg2 : tensor<8x16xf32>, tensor<16x4xf32>
// CHECK-NEXT: %[[S:.*]] = mlc.matmul %arg1, %arg3 acc(%[[A]] : tensor<8x4xf32>) : tensor<8x16xf32>, tensor<16x4xf32>
// CHECK-NEXT: return %[[S]]
func.func @two_way(%dg: tensor<8x16xf32>, %du: tensor<8x16xf32>, %wg: tensor<16x4xf32>,
                   %wu: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %a = mlc.matmul %dg, %wg : tensor<8x16xf32>, tensor<16x4xf32>
  %b = mlc.matmul %du, %wu : tensor<8x16xf32>, tensor<16x4xf32>
  %s = mlc.add %a, %b : tensor<8x4xf32>, tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// Three products (Q, K, V): a chain, each accumulating into the one before;
// transposes and batch dimensions carry over.
// CHECK-LABEL: func.func @three_way
// CHECK-NEXT: %[[Q:.*]] = mlc.matmul %arg0, %arg3 transpose_rhs : tensor<2x8x16xf32>, tensor<4x16xf32>
// CHECK-NEXT: %[[K:.*]] = mlc.matmul %arg1, %arg4 acc(%[[Q]] : tensor<2x8x4xf32>) : tensor<2x8x8xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[V:.*]] = mlc.matmul %arg2, %arg4 acc(%[[K]] : tensor<2x8x4xf32>) : tensor<2x8x8xf32>, tensor<8x4xf32>
// CHECK-NEXT: return %[[V]]
// CHECK-NOT: mlc.add
func.func @three_way(%dq: tensor<2x8x16xf32>, %dk: tensor<2x8x8xf32>, %dv: tensor<2x8x8xf32>,
                     %wq: tensor<4x16xf32>, %wk: tensor<8x4xf32>) -> tensor<2x8x4xf32> {
  %q = mlc.matmul %dq, %wq transpose_rhs : tensor<2x8x16xf32>, tensor<4x16xf32>
  %k = mlc.matmul %dk, %wk : tensor<2x8x8xf32>, tensor<8x4xf32>
  %v = mlc.matmul %dv, %wk : tensor<2x8x8xf32>, tensor<8x4xf32>
  %0 = mlc.add %q, %k : tensor<2x8x4xf32>, tensor<2x8x4xf32>
  %1 = mlc.add %0, %v : tensor<2x8x4xf32>, tensor<2x8x4xf32>
  return %1 : tensor<2x8x4xf32>
}

// -----

// bf16 products widened for an f32 sum (autocast): f32_result products
// accumulating in f32, no rounding to bf16 and no casts left.
// CHECK-LABEL: func.func @widened
// CHECK-NEXT: %[[A:.*]] = mlc.matmul %arg0, %arg2 f32_result : tensor<8x16xbf16>, tensor<16x4xbf16>
// CHECK-NEXT: %[[S:.*]] = mlc.matmul %arg1, %arg2 f32_result acc(%[[A]] : tensor<8x4xf32>) : tensor<8x16xbf16>, tensor<16x4xbf16>
// CHECK-NEXT: return %[[S]]
func.func @widened(%x: tensor<8x16xbf16>, %y: tensor<8x16xbf16>, %w: tensor<16x4xbf16>)
    -> tensor<8x4xf32> {
  %a = mlc.matmul %x, %w : tensor<8x16xbf16>, tensor<16x4xbf16>
  %b = mlc.matmul %y, %w : tensor<8x16xbf16>, tensor<16x4xbf16>
  %ca = mlc.cast %a : tensor<8x4xbf16> -> tensor<8x4xf32>
  %cb = mlc.cast %b : tensor<8x4xbf16> -> tensor<8x4xf32>
  %s = mlc.add %ca, %cb : tensor<8x4xf32>, tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// A product read elsewhere too stays a product of its own, and so does the
// add.
// CHECK-LABEL: func.func @product_used_twice
// CHECK: %[[A:.*]] = mlc.matmul %arg0, %arg2 :
// CHECK: %[[B:.*]] = mlc.matmul %arg1, %arg2 :
// CHECK: mlc.add %[[A]], %[[B]]
// CHECK-NOT: acc(
func.func @product_used_twice(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %w: tensor<16x4xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %a = mlc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %b = mlc.matmul %y, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %s = mlc.add %a, %b : tensor<8x4xf32>, tensor<8x4xf32>
  return %s, %a : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Products of another type than the sum's (f32 products narrowed to a bf16
// sum): nothing is narrowed, the add stays.
// CHECK-LABEL: func.func @types_differ
// CHECK: mlc.cast
// CHECK: mlc.cast
// CHECK: mlc.add
// CHECK-NOT: acc(
func.func @types_differ(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %w: tensor<16x4xf32>)
    -> tensor<8x4xbf16> {
  %a = mlc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %b = mlc.matmul %y, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %ca = mlc.cast %a : tensor<8x4xf32> -> tensor<8x4xbf16>
  %cb = mlc.cast %b : tensor<8x4xf32> -> tensor<8x4xbf16>
  %s = mlc.add %ca, %cb : tensor<8x4xbf16>, tensor<8x4xbf16>
  return %s : tensor<8x4xbf16>
}

// -----

// An operand that is no product (the residual stream's gradient): left to
// the pointwise fusion, which reads it anyway.
// CHECK-LABEL: func.func @non_gemm_operand
// CHECK: %[[A:.*]] = mlc.matmul %arg0, %arg2 :
// CHECK: mlc.add %[[A]], %arg1
// CHECK-NOT: acc(
func.func @non_gemm_operand(%x: tensor<8x16xf32>, %r: tensor<8x4xf32>, %w: tensor<16x4xf32>)
    -> tensor<8x4xf32> {
  %a = mlc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %s = mlc.add %a, %r : tensor<8x4xf32>, tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// A broadcasting add (a product of one row): the sum is not the products'
// shape, the add stays.
// CHECK-LABEL: func.func @broadcast
// CHECK: mlc.add
// CHECK-NOT: acc(
func.func @broadcast(%x: tensor<8x16xf32>, %y: tensor<1x16xf32>, %w: tensor<16x4xf32>)
    -> tensor<8x4xf32> {
  %a = mlc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %b = mlc.matmul %y, %w : tensor<1x16xf32>, tensor<16x4xf32>
  %s = mlc.add %a, %b : tensor<8x4xf32>, tensor<1x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// A tied LM head: the table's gradient is the head's weight product plus
// the embedding's scatter (either order); the scatter adds its rows into
// the product (its padding row still skipped) and the add is gone.
// CHECK-LABEL: func.func @tied_head
// CHECK: %[[H:.*]] = mlc.matmul %arg0, %arg1 transpose_lhs :
// CHECK-NEXT: %[[T:.*]] = mlc.embedding_grad %arg2, %arg3 acc(%[[H]] : tensor<16x4xf32>) {padding_idx = 1 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<16x4xf32>
// CHECK-NEXT: return %[[T]]
// CHECK-LABEL: func.func @tied_head_swapped
// CHECK: %[[H:.*]] = mlc.matmul
// CHECK-NEXT: %[[T:.*]] = mlc.embedding_grad %arg2, %arg3 acc(%[[H]] : tensor<16x4xf32>) :
// CHECK-NEXT: return %[[T]]
func.func @tied_head(%dlogits: tensor<6x16xf32>, %h: tensor<6x4xf32>, %g: tensor<2x3x4xf32>,
                     %ids: tensor<2x3xi64>) -> tensor<16x4xf32> {
  %head = mlc.matmul %dlogits, %h transpose_lhs : tensor<6x16xf32>, tensor<6x4xf32>
  %emb = mlc.embedding_grad %g, %ids {padding_idx = 1 : i64} : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<16x4xf32>
  %s = mlc.add %head, %emb : tensor<16x4xf32>, tensor<16x4xf32>
  return %s : tensor<16x4xf32>
}
func.func @tied_head_swapped(%dlogits: tensor<6x16xf32>, %h: tensor<6x4xf32>, %g: tensor<2x3x4xf32>,
                             %ids: tensor<2x3xi64>) -> tensor<16x4xf32> {
  %head = mlc.matmul %dlogits, %h transpose_lhs : tensor<6x16xf32>, tensor<6x4xf32>
  %emb = mlc.embedding_grad %g, %ids : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<16x4xf32>
  %s = mlc.add %emb, %head : tensor<16x4xf32>, tensor<16x4xf32>
  return %s : tensor<16x4xf32>
}

// -----

// A scatter read elsewhere too, or summed with something that is no
// product: the add stays.
// CHECK-LABEL: func.func @scatter_read_twice
// CHECK: mlc.add
// CHECK-NOT: acc(
// CHECK-LABEL: func.func @scatter_plus_non_product
// CHECK: mlc.add
// CHECK-NOT: acc(
func.func @scatter_read_twice(%dlogits: tensor<6x16xf32>, %h: tensor<6x4xf32>, %g: tensor<2x3x4xf32>,
                              %ids: tensor<2x3xi64>) -> (tensor<16x4xf32>, tensor<16x4xf32>) {
  %head = mlc.matmul %dlogits, %h transpose_lhs : tensor<6x16xf32>, tensor<6x4xf32>
  %emb = mlc.embedding_grad %g, %ids : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<16x4xf32>
  %s = mlc.add %head, %emb : tensor<16x4xf32>, tensor<16x4xf32>
  return %s, %emb : tensor<16x4xf32>, tensor<16x4xf32>
}
func.func @scatter_plus_non_product(%w: tensor<16x4xf32>, %g: tensor<2x3x4xf32>,
                                    %ids: tensor<2x3xi64>) -> tensor<16x4xf32> {
  %emb = mlc.embedding_grad %g, %ids : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<16x4xf32>
  %s = mlc.add %w, %emb : tensor<16x4xf32>, tensor<16x4xf32>
  return %s : tensor<16x4xf32>
}

// -----

// OLMo2's stream gradient: the post-norm's gradient dx (read by the norm's
// own gradient first) plus the input gradients of the next projections.
// The products accumulate onto dx (the first) and onto each other; then
// that sum, read by a second norm gradient first, takes the next products.
// CHECK-LABEL: func.func @onto_norm_gradient
// CHECK: %[[DX:.*]], %{{.*}} = mlc.rms_norm_grad %arg0
// CHECK: mlc.rms_norm_grad %[[DX]]
// CHECK: %[[G:.*]] = mlc.matmul %arg3, %arg5 acc(%[[DX]] : tensor<4x8xf32>)
// CHECK-NEXT: %[[U:.*]] = mlc.matmul %arg4, %arg5 acc(%[[G]] : tensor<4x8xf32>)
// CHECK: mlc.rms_norm_grad %[[U]]
// CHECK: %[[Q:.*]] = mlc.matmul %arg3, %arg5 acc(%[[U]] : tensor<4x8xf32>)
// CHECK-NOT: mlc.add
func.func @onto_norm_gradient(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                              %a: tensor<4x16xf32>, %b: tensor<4x16xf32>, %p: tensor<16x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %dy, %dw2 = mlc.rms_norm_grad %dx, %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %m1 = mlc.matmul %a, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %m2 = mlc.matmul %b, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %0 = mlc.add %dx, %m1 : tensor<4x8xf32>, tensor<4x8xf32>
  %1 = mlc.add %0, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
  %dz, %dw3 = mlc.rms_norm_grad %1, %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %m3 = mlc.matmul %a, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %2 = mlc.add %1, %m3 : tensor<4x8xf32>, tensor<4x8xf32>
  return %2, %dy, %dz : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// dx read after the sum, or a value that is neither a norm's gradient nor a
// product (an argument, a pointwise result): the add stays, nothing
// accumulates onto it.
// CHECK-LABEL: func.func @not_onto_value
// CHECK-NOT: acc(
// CHECK: mlc.add %[[DX:.*]], %
// CHECK: mlc.add %arg1,
// CHECK: mlc.add %[[E:.*]], %
// CHECK-NOT: acc(
func.func @not_onto_value(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                          %a: tensor<4x16xf32>, %p: tensor<16x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %m1 = mlc.matmul %a, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %0 = mlc.add %dx, %m1 : tensor<4x8xf32>, tensor<4x8xf32>
  %e = mlc.exp %dx : tensor<4x8xf32>
  %m2 = mlc.matmul %a, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %1 = mlc.add %x, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
  %m3 = mlc.matmul %a, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %2 = mlc.add %e, %m3 : tensor<4x8xf32>, tensor<4x8xf32>
  %t = mlc.tanh %e : tensor<4x8xf32>
  return %0, %1, %2, %t, %dx : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A LayerNorm gradient's dx (BERT's post-LN stream plus the Q/K/V input
// gradients) keeps its pointwise sum: the builtin models' plans stay as
// they are.
// CHECK-LABEL: func.func @layer_norm_dx_stays
// CHECK: mlc.layer_norm_grad
// CHECK: %[[M:.*]] = mlc.matmul %arg3, %arg4 :
// CHECK-NEXT: mlc.add %{{.*}}, %[[M]]
// CHECK-NOT: acc(
func.func @layer_norm_dx_stays(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                               %a: tensor<4x16xf32>, %p: tensor<16x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %dy, %dw2, %db2 = mlc.layer_norm_grad %dx, %x, %w epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %m = mlc.matmul %a, %p : tensor<4x16xf32>, tensor<16x8xf32>
  %s = mlc.add %dx, %m : tensor<4x8xf32>, tensor<4x8xf32>
  return %s, %dy, %db2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A product that reads dx itself (v + Linear(v) before a post-norm's
// gradient), directly or through a view: the GEMM would write the buffer it
// reads, so the add stays.
// CHECK-LABEL: func.func @product_reads_dx
// CHECK-NOT: acc(
// CHECK: mlc.add %[[DX:.*]], %
// CHECK-NOT: acc(
func.func @product_reads_dx(%g: tensor<8x8xf32>, %x: tensor<8x8xf32>, %w: tensor<8xf32>,
                            %p: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %dy, %dw2 = mlc.rms_norm_grad %dx, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %m = mlc.matmul %dx, %p : tensor<8x8xf32>, tensor<8x8xf32>
  %0 = mlc.add %dx, %m : tensor<8x8xf32>, tensor<8x8xf32>
  return %0, %dy : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// CHECK-LABEL: func.func @product_reads_dx_view
// CHECK-NOT: acc(
// CHECK: mlc.add %[[DX:.*]], %
// CHECK-NOT: acc(
func.func @product_reads_dx_view(%g: tensor<8x8xf32>, %x: tensor<8x8xf32>, %w: tensor<8xf32>,
                                 %p: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %dy, %dw2 = mlc.rms_norm_grad %dx, %x, %w epsilon = 1.0e-6 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %t = mlc.transpose %dx, [1, 0] : tensor<8x8xf32>
  %n = mlc.matmul %p, %t : tensor<8x8xf32>, tensor<8x8xf32>
  %0 = mlc.add %dx, %n : tensor<8x8xf32>, tensor<8x8xf32>
  return %0, %dy : tensor<8x8xf32>, tensor<8x8xf32>
}
