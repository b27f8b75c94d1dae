// RUN: mlc-opt %s -split-input-file --mlc-fold-casts | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fold-casts | mlc-opt -split-input-file | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fold-casts --mlc-fuse-elementwise | FileCheck %s --check-prefix=FUSED

// A bf16 product widened for two pointwise readers (SwiGLU's forward and
// its gradient): each reader widens it at its own load, so the GEMM stores
// bf16 and no widening is a kernel of its own; the readers still fuse into
// one kernel as they do in f32.
// CHECK-LABEL: func.func @shared_widening
// CHECK: %[[P:.*]] = mlc.matmul %arg0, %arg1 : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK-NEXT: %[[A:.*]] = mlc.cast %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: %[[B:.*]] = mlc.cast %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: mlc.mul %[[B]], %arg2
// CHECK-NEXT: mlc.mul %[[A]], %arg3
// FUSED-LABEL: func.func @shared_widening
// FUSED: %[[P:.*]] = mlc.matmul %arg0, %arg1 : tensor<4x8xbf16>, tensor<8x16xbf16>
// FUSED-NEXT: mlc.fusion pointwise ins(%[[P]], %arg2, %arg3 : tensor<4x16xbf16>,
// FUSED-NOT: mlc.fusion
// FUSED: return
func.func @shared_widening(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %x: tensor<4x16xf32>,
                           %y: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = mlc.matmul %a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.cast %p : tensor<4x16xbf16> -> tensor<4x16xf32>
  %u = mlc.mul %g, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %w = mlc.mul %g, %y : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.add %w, %x : tensor<4x16xf32>, tensor<4x16xf32>
  return %u, %v : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A reader that is not pointwise (a softmax's row kernel) cannot widen at
// its load: the product is stored once in f32 (f32_result) for all of them.
// CHECK-LABEL: func.func @shared_widening_rows
// CHECK-NOT: mlc.cast
// CHECK: %[[P:.*]] = mlc.matmul %arg0, %arg1 f32_result : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK-NOT: mlc.cast
// CHECK: mlc.mul %[[P]], %arg2
// CHECK: mlc.softmax %[[P]]
func.func @shared_widening_rows(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %x: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = mlc.matmul %a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.cast %p : tensor<4x16xbf16> -> tensor<4x16xf32>
  %u = mlc.mul %g, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %s = mlc.softmax %g axis = -1 : tensor<4x16xf32>
  return %u, %s : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// The MLP's first product, read by its GELU and the GELU's gradient, is
// stored in bf16 with a bf16 copy of its bias (bf16 autocast's linear);
// each reader widens the bf16 pre-activation at its load. The bias's copy
// joins the weights' params fusion.
// CHECK-LABEL: func.func @gelu_product
// CHECK-NEXT: %[[C:.*]]:2 = mlc.fusion params ins(%arg0, %arg1 : tensor<8x16xf32>, tensor<16xf32>)
// CHECK: } : tensor<8x16xbf16>, tensor<16xbf16>
// CHECK-NEXT: %[[P:.*]] = mlc.matmul %arg2, %[[C]]#0 bias(%[[C]]#1 : tensor<16xbf16>) : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK-NEXT: %[[W:.*]] = mlc.cast %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: mlc.gelu %[[W]] approximate = tanh
// CHECK: %[[V:.*]] = mlc.cast %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: mlc.gelu_grad %arg3, %[[V]]
// FUSED-LABEL: func.func @gelu_product
// FUSED: %[[P:.*]] = mlc.matmul %arg2, %{{.*}}#0 bias(
// FUSED-NEXT: mlc.fusion pointwise ins(%[[P]], %arg3 : tensor<4x16xbf16>, tensor<4x16xf32>)
// FUSED-NOT: mlc.fusion
// FUSED: return
func.func @gelu_product(%w: tensor<8x16xf32> {mlc.param = "w"}, %c: tensor<16xf32> {mlc.param = "c"},
                        %x: tensor<4x8xbf16> {mlc.input = "x"}, %d: tensor<4x16xf32> {mlc.input = "d"})
    -> (tensor<4x16xbf16>, tensor<4x16xf32>) {
  %w16 = mlc.cast %w : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = mlc.matmul %x, %w16 f32_result bias(%c : tensor<16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %g16 = mlc.cast %g : tensor<4x16xf32> -> tensor<4x16xbf16>
  %dh = mlc.gelu_grad %d, %h approximate = tanh : tensor<4x16xf32>
  return %g16, %dh : tensor<4x16xbf16>, tensor<4x16xf32>
}

// -----

// Not when something other than pointwise ops reads the product (its f32
// value is a softmax's input too): it stays f32_result with its f32 bias.
// A biased product no GELU reads but pointwise ops alone do (attention's
// output projection, read by the residual add) is narrowed as the GELU's:
// bf16 with a bf16 copy of its bias, the add widening it at its load.
// CHECK-LABEL: func.func @no_gelu_product
// CHECK: mlc.matmul %arg2, %arg0 f32_result bias(%arg1 : tensor<16xf32>)
// CHECK: %[[B:.*]] = mlc.cast %arg1 : tensor<16xf32> -> tensor<16xbf16>
// CHECK-NEXT: %[[O:.*]] = mlc.matmul %arg2, %arg0 bias(%[[B]] : tensor<16xbf16>) : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK-NEXT: %[[W:.*]] = mlc.cast %[[O]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: mlc.add %[[W]], %arg3
func.func @no_gelu_product(%w: tensor<8x16xbf16>, %c: tensor<16xf32>, %x: tensor<4x8xbf16>,
                           %r: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %h = mlc.matmul %x, %w f32_result bias(%c : tensor<16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.gelu %h approximate = tanh : tensor<4x16xf32>
  %s = mlc.softmax %h axis = -1 : tensor<4x16xf32>
  %o = mlc.matmul %x, %w f32_result bias(%c : tensor<16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %a = mlc.add %o, %r : tensor<4x16xf32>, tensor<4x16xf32>
  return %g, %s, %a : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A widening with one reader stays: fusion folds it into that reader's
// kernel, which reads the bf16 product (half the bytes). So does the
// widening of a product something else reads too.
// CHECK-LABEL: func.func @no_widening
// CHECK: %[[P:.*]] = mlc.matmul %arg0, %arg1 : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK: mlc.cast %[[P]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: %[[Q:.*]] = mlc.matmul %arg0, %arg3 transpose_lhs
// CHECK: mlc.cast %[[Q]]
// CHECK: return
func.func @no_widening(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %x: tensor<4x16xf32>,
                       %c: tensor<4x16xbf16>)
    -> (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>) {
  %p = mlc.matmul %a, %b : tensor<4x8xbf16>, tensor<8x16xbf16>
  %g = mlc.cast %p : tensor<4x16xbf16> -> tensor<4x16xf32>
  %u = mlc.mul %g, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %q = mlc.matmul %a, %c transpose_lhs : tensor<4x8xbf16>, tensor<4x16xbf16>
  %h = mlc.cast %q : tensor<8x16xbf16> -> tensor<8x16xf32>
  %e = mlc.exp %h : tensor<8x16xf32>
  %t = mlc.tanh %h : tensor<8x16xf32>
  return %u, %e, %t, %q : tensor<4x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>
}

// -----

// The bf16 copies of the weights: one params fusion at the top of the
// function, each copy one of its results (one kernel over the flat
// parameter buffer, where each was a cast kernel of its own); the first
// product, read by a pointwise op (a cast), is narrowed with its bias, whose
// copy is one of them.
// CHECK-LABEL: func.func @weights
// CHECK-NEXT: %[[C:.*]]:3 = mlc.fusion params ins(%arg0, %arg1, %arg2 : tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<f32>):
// CHECK-NEXT: %[[Y:.*]] = mlc.cast %[[X]] : tensor<f32> -> tensor<bf16>
// CHECK-NEXT: mlc.yield %[[Y]] : tensor<bf16>
// CHECK-NEXT: } : tensor<8x16xbf16>, tensor<16xbf16>, tensor<16x8xbf16>
// CHECK-NEXT: %[[H:.*]] = mlc.cast %arg3
// CHECK-NEXT: mlc.matmul %[[H]], %[[C]]#0 bias(%[[C]]#1
// CHECK: mlc.matmul %{{.*}}, %[[C]]#2 f32_result
func.func @weights(%w1: tensor<8x16xf32> {mlc.param = "w1"}, %b1: tensor<16xf32> {mlc.param = "b1"},
                   %w2: tensor<16x8xf32> {mlc.param = "w2"}, %x: tensor<4x8xf32> {mlc.input = "x"})
    -> tensor<4x8xf32> {
  %x16 = mlc.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %w116 = mlc.cast %w1 : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = mlc.matmul %x16, %w116 f32_result bias(%b1 : tensor<16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %h16 = mlc.cast %h : tensor<4x16xf32> -> tensor<4x16xbf16>
  %w216 = mlc.cast %w2 : tensor<16x8xf32> -> tensor<16x8xbf16>
  %y = mlc.matmul %h16, %w216 f32_result : tensor<4x16xbf16>, tensor<16x8xbf16>
  return %y : tensor<4x8xf32>
}

// -----

// Casts of parameters that hold less than half of the parameters'
// elements stay (the kernel would map them all), as do casts of inputs
// and f32 functions' parameters (no casts at all).
// CHECK-LABEL: func.func @few_weights
// CHECK-NOT: mlc.fusion
// CHECK: mlc.cast %arg0 : tensor<2x2xf32> -> tensor<2x2xbf16>
// CHECK-NOT: mlc.fusion
func.func @few_weights(%w: tensor<2x2xf32> {mlc.param = "w"}, %e: tensor<64x2xf32> {mlc.param = "e"},
                       %x: tensor<4x2xbf16> {mlc.input = "x"}) -> (tensor<4x2xf32>, tensor<64x2xf32>) {
  %w16 = mlc.cast %w : tensor<2x2xf32> -> tensor<2x2xbf16>
  %y = mlc.matmul %x, %w16 f32_result : tensor<4x2xbf16>, tensor<2x2xbf16>
  %t = mlc.tanh %e : tensor<64x2xf32>
  return %y, %t : tensor<4x2xf32>, tensor<64x2xf32>
}

// CHECK-LABEL: func.func @f32_weights
// CHECK-NOT: mlc.fusion
// CHECK-NOT: mlc.cast
func.func @f32_weights(%w: tensor<8x8xf32> {mlc.param = "w"}, %x: tensor<4x8xf32> {mlc.input = "x"})
    -> tensor<4x8xf32> {
  %y = mlc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// An attention whose output reaches, through its views, a cast to bf16 for
// the output projection stores bf16 itself (bf16_result): the cast is gone
// and the views carry bf16.
// CHECK-LABEL: func.func @attention_store
// CHECK-NOT: mlc.cast
// CHECK: %[[O:.*]] = mlc.attention %arg0, %arg1, %arg2 causal bf16_result : tensor<2x2x4x8xf32>
// CHECK: %[[T:.*]] = mlc.transpose %[[O]], [0, 2, 1, 3] : tensor<2x2x4x8xbf16>
// CHECK: %[[R:.*]] = mlc.reshape %[[T]] : tensor<2x4x2x8xbf16> -> tensor<2x4x16xbf16>
// CHECK-NOT: mlc.cast
// CHECK: mlc.matmul %[[R]], %arg3 : tensor<2x4x16xbf16>, tensor<16x16xbf16>
func.func @attention_store(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>,
                           %w: tensor<16x16xbf16>) -> tensor<2x4x16xbf16> {
  %o = mlc.attention %q, %k, %v causal : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %t = mlc.transpose %o, [0, 2, 1, 3] : tensor<2x2x4x8xf32>
  %r = mlc.reshape %t : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %c = mlc.cast %r : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %p = mlc.matmul %c, %w : tensor<2x4x16xbf16>, tensor<16x16xbf16>
  return %p : tensor<2x4x16xbf16>
}

// -----

// Not where the output has another reader than the cast (here an f32 sum
// of the output too): the kernel keeps its f32 store and the cast stays.
// CHECK-LABEL: func.func @attention_read_twice
// CHECK-NOT: bf16_result
// CHECK: mlc.cast %{{.*}} : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
func.func @attention_read_twice(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>,
                                %v: tensor<2x2x4x8xf32>)
    -> (tensor<2x4x16xbf16>, tensor<2x4x16xf32>) {
  %o = mlc.attention %q, %k, %v causal : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %t = mlc.transpose %o, [0, 2, 1, 3] : tensor<2x2x4x8xf32>
  %r = mlc.reshape %t : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %c = mlc.cast %r : tensor<2x4x16xf32> -> tensor<2x4x16xbf16>
  %s = mlc.add %r, %r : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  return %c, %s : tensor<2x4x16xbf16>, tensor<2x4x16xf32>
}

// -----

// Attention's gradients dQ, dK, dV each read only as bf16 copies (Llama's
// projections, no bias): the gradient kernel stores all three in bf16.
// CHECK-LABEL: func.func @attention_grad_store
// CHECK-NOT: mlc.cast
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = mlc.attention_grad %arg0, %arg1, %arg2, %arg3 causal bf16_result :
// CHECK-NOT: mlc.cast
// CHECK: return %[[DQ]], %[[DK]], %[[DV]] : tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>
func.func @attention_grad_store(%g: tensor<2x2x4x8xf32>, %q: tensor<2x2x4x8xf32>,
                                %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>)
    -> (tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>) {
  %dq, %dk, %dv = mlc.attention_grad %g, %q, %k, %v causal : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %a = mlc.cast %dq : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  %b = mlc.cast %dk : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  %c = mlc.cast %dv : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  return %a, %b, %c : tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>
}

// -----

// GPT-2's fused QKV projection: dQ, dK, dV concatenated, the concatenation
// read by the bias gradient (a column sum) and as the products' bf16 copy.
// The gradients are stored in bf16 into the concatenation, which the sum
// widens at its load (one fusion reading bf16).
// CHECK-LABEL: func.func @attention_grad_concat
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = mlc.attention_grad %arg0, %arg1, %arg2, %arg3 causal bf16_result :
// CHECK: %[[C:.*]] = mlc.concat(%[[DQ]], %[[DK]], %[[DV]]) axis = 3 : tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>
// CHECK-NEXT: %[[W:.*]] = mlc.cast %[[C]] : tensor<2x2x4x24xbf16> -> tensor<2x2x4x24xf32>
// CHECK-NEXT: mlc.reduce_sum %[[W]] axes = [0, 1, 2]
// CHECK-NOT: mlc.cast
// CHECK: return %[[C]], %{{.*}} : tensor<2x2x4x24xbf16>, tensor<24xf32>
// FUSED-LABEL: func.func @attention_grad_concat
// FUSED: mlc.fusion pointwise ins(%{{.*}} : tensor<2x2x4x24xbf16>)
func.func @attention_grad_concat(%g: tensor<2x2x4x8xf32>, %q: tensor<2x2x4x8xf32>,
                                 %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>)
    -> (tensor<2x2x4x24xbf16>, tensor<24xf32>) {
  %dq, %dk, %dv = mlc.attention_grad %g, %q, %k, %v causal : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %c = mlc.concat(%dq, %dk, %dv) axis = 3 : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %s = mlc.reduce_sum %c axes = [0, 1, 2] : tensor<2x2x4x24xf32>
  %b = mlc.cast %c : tensor<2x2x4x24xf32> -> tensor<2x2x4x24xbf16>
  return %b, %s : tensor<2x2x4x24xbf16>, tensor<24xf32>
}

// -----

// Not where one gradient has a reader that is neither its bf16 copy nor a
// sum (here a product in f32): every result keeps f32, every cast stays.
// CHECK-LABEL: func.func @attention_grad_f32_reader
// CHECK-NOT: bf16_result
// CHECK-COUNT-3: mlc.cast
func.func @attention_grad_f32_reader(%g: tensor<2x2x4x8xf32>, %q: tensor<2x2x4x8xf32>,
                                     %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>)
    -> (tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xf32>) {
  %dq, %dk, %dv = mlc.attention_grad %g, %q, %k, %v causal : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  %a = mlc.cast %dq : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  %b = mlc.cast %dk : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  %c = mlc.cast %dv : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
  %m = mlc.mul %dv, %dv : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>
  return %a, %b, %c, %m : tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xf32>
}

// -----

// An RMSNorm gradient's dx goes on in f32 (the residual stream's gradient)
// and as a bf16 copy to the next products: mlc-fuse-elementwise marks the
// cast for the gradient's kernel to store, and no fusion takes it (the mul
// reading dx stays a kernel of its own rather than take the cast along).
// CHECK-LABEL: func.func @norm_grad_copy
// CHECK-NOT: mlc.producer_copy
// CHECK: return
// FUSED-LABEL: func.func @norm_grad_copy
// FUSED: %[[DX:.*]], %{{.*}} = mlc.rms_norm_grad
// FUSED-NEXT: mlc.cast %[[DX]] {mlc.producer_copy} : tensor<4x16xf32> -> tensor<4x16xbf16>
// FUSED-NOT: mlc.fusion
// FUSED: return
func.func @norm_grad_copy(%g: tensor<4x16xf32>, %x: tensor<4x16xf32>, %w: tensor<16xf32>,
                          %y: tensor<4x16xf32>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>, tensor<16xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-06 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
  %c = mlc.cast %dx : tensor<4x16xf32> -> tensor<4x16xbf16>
  %s = mlc.mul %dx, %y : tensor<4x16xf32>, tensor<4x16xf32>
  return %c, %s, %dw : tensor<4x16xbf16>, tensor<4x16xf32>, tensor<16xf32>
}

// -----

// Not a cast of dx to another type than bf16, nor a cast of the weight
// gradient.
// FUSED-LABEL: func.func @norm_grad_no_copy
// FUSED-NOT: mlc.producer_copy
// FUSED: return
func.func @norm_grad_no_copy(%g: tensor<4x16xf32>, %x: tensor<4x16xf32>, %w: tensor<16xf32>)
    -> (tensor<4x16xf64>, tensor<16xbf16>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-06 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
  %c = mlc.cast %dx : tensor<4x16xf32> -> tensor<4x16xf64>
  %d = mlc.cast %dw : tensor<16xf32> -> tensor<16xbf16>
  return %c, %d : tensor<4x16xf64>, tensor<16xbf16>
}

// -----

// A LayerNorm gradient's incoming gradient, an f32_result product it alone
// reads: the product is stored in bf16 and widened by a cast marked
// mlc.consumer_load (the gradient's kernel converts at its loads), which no
// fusion takes.
// CHECK-LABEL: func.func @norm_grad_input
// CHECK: %[[P:.*]] = mlc.matmul %arg0, %arg1 : tensor<4x8xbf16>, tensor<8x16xbf16>
// CHECK-NEXT: %[[W:.*]] = mlc.cast %[[P]] {mlc.consumer_load} : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: mlc.layer_norm_grad %[[W]], %arg2, %arg3
// FUSED-LABEL: func.func @norm_grad_input
// FUSED-NOT: mlc.fusion
// FUSED: return
func.func @norm_grad_input(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %x: tensor<4x16xf32>,
                           %w: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %g = mlc.matmul %a, %b f32_result : tensor<4x8xbf16>, tensor<8x16xbf16>
  %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-05 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
  return %dx, %dw, %db : tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Not where the product is read elsewhere too, nor where it accumulates
// (Llama's summed input gradients keep their f32 sums).
// CHECK-LABEL: func.func @norm_grad_input_kept
// CHECK-NOT: mlc.consumer_load
// CHECK: mlc.matmul %arg0, %arg1 f32_result :
// CHECK: mlc.matmul %arg0, %arg1 f32_result acc(
// CHECK-NOT: mlc.consumer_load
// CHECK: return
func.func @norm_grad_input_kept(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>, %x: tensor<4x16xf32>,
                                %w: tensor<16xf32>, %s: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) {
  %g = mlc.matmul %a, %b f32_result : tensor<4x8xbf16>, tensor<8x16xbf16>
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-06 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
  %e = mlc.add %g, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %h = mlc.matmul %a, %b f32_result acc(%s : tensor<4x16xf32>) : tensor<4x8xbf16>, tensor<8x16xbf16>
  %dx2, %dw2 = mlc.rms_norm_grad %h, %x, %w epsilon = 1.0e-06 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
  return %dx, %dw, %e, %dx2, %dw2 : tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>
}
