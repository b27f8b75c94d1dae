// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise | mlc-opt -split-input-file | FileCheck %s

// Bias add + GELU: one fusion; the bias broadcasts into it.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: %[[F:.*]] = mlc.fusion pointwise ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT:   %[[S:.*]] = mlc.add %[[X]], %[[B]]
// CHECK-NEXT:   %[[G:.*]] = mlc.gelu %[[S]] approximate = tanh
// CHECK-NEXT:   mlc.yield %[[G]] : tensor<4x8xf32>
// CHECK: return %[[F]]
func.func @bias_gelu(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = mlc.add %x, %b : tensor<4x8xf32>, tensor<8xf32>
  %1 = mlc.gelu %0 approximate = tanh : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Bias add + dropout + residual add, with the sum still needed afterwards
// (multi-output): the fusion writes both.
// CHECK-LABEL: func.func @residual
// CHECK: %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg0, %arg1, %arg2 : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>)
// CHECK:   mlc.add
// CHECK:   mlc.dropout
// CHECK:   %[[R:.*]] = mlc.add
// CHECK:   %[[T:.*]] = mlc.tanh %[[R]]
// CHECK:   mlc.yield %[[R]], %[[T]]
// CHECK: %[[M:.*]] = mlc.matmul %[[F]]#0
// CHECK: return %[[F]]#1, %[[M]]
func.func @residual(%h: tensor<4x8xf32>, %b: tensor<8xf32>, %x: tensor<4x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = mlc.add %h, %b : tensor<4x8xf32>, tensor<8xf32>
  %1 = mlc.dropout %0 ratio = 0.1 seed = 3 : tensor<4x8xf32>
  %2 = mlc.add %x, %1 : tensor<4x8xf32>, tensor<4x8xf32>
  %3 = mlc.tanh %2 : tensor<4x8xf32>
  %4 = mlc.matmul %2, %w : tensor<4x8xf32>, tensor<8x8xf32>
  return %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Splat constants are copied into the region instead of becoming inputs.
// CHECK-LABEL: func.func @constants
// CHECK: mlc.fusion pointwise ins(%arg0 : tensor<4xf32>) {
// CHECK:   mlc.constant dense<2.000000e+00> : tensor<f32>
// CHECK:   mlc.mul
// CHECK:   mlc.exp
func.func @constants(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = mlc.constant dense<2.0> : tensor<f32>
  %0 = mlc.mul %x, %c : tensor<4xf32>, tensor<f32>
  %1 = mlc.exp %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Never across a GEMM: the matmul stays between two separate kernels.
// CHECK-LABEL: func.func @no_fuse_across_matmul
// CHECK-NOT: mlc.fusion
// CHECK: mlc.tanh
// CHECK: mlc.matmul
// CHECK: mlc.exp
func.func @no_fuse_across_matmul(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = mlc.tanh %x : tensor<4x8xf32>
  %1 = mlc.matmul %0, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %2 = mlc.exp %1 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// A producer with users in two different groups is computed once, in its
// own kernel, never duplicated.
// CHECK-LABEL: func.func @no_duplication
// CHECK-NOT: mlc.tanh
// CHECK: mlc.tanh
// CHECK-NOT: mlc.tanh
// CHECK: return
func.func @no_duplication(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %0 = mlc.tanh %x : tensor<4x8xf32>
  %1 = mlc.reduce_sum %0 axes = [1] : tensor<4x8xf32>
  %2 = mlc.exp %0 : tensor<4x8xf32>
  return %1, %2 : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// A value of another shape (the [8] bias computed pointwise) is not pulled
// into the [4, 8] group: it is produced once and broadcast in.
// CHECK-LABEL: func.func @no_fuse_other_shape
// CHECK: %[[N:.*]] = mlc.neg %arg1 : tensor<8xf32>
// CHECK: mlc.fusion pointwise ins(%arg0, %[[N]] : tensor<4x8xf32>, tensor<8xf32>)
func.func @no_fuse_other_shape(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %n = mlc.neg %b : tensor<8xf32>
  %0 = mlc.add %x, %n : tensor<4x8xf32>, tensor<8xf32>
  %1 = mlc.exp %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// A producer whose outside user comes before the group's root cannot join
// (the fusion would be used before it is computed).
// CHECK-LABEL: func.func @no_fuse_early_user
// CHECK: %[[A:.*]] = mlc.tanh %arg0
// CHECK: %[[S:.*]] = mlc.reduce_sum %[[A]]
// CHECK: mlc.fusion pointwise ins(%[[A]], %{{.*}} : tensor<4x8xf32>, tensor<4x1xf32>)
func.func @no_fuse_early_user(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = mlc.tanh %x : tensor<4x8xf32>
  %s = mlc.reduce_sum %a axes = [1] keepdims : tensor<4x8xf32>
  %0 = mlc.sub %a, %s : tensor<4x8xf32>, tensor<4x1xf32>
  %1 = mlc.exp %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// A single pointwise op stays as it is.
// CHECK-LABEL: func.func @single
// CHECK-NOT: mlc.fusion
// CHECK: mlc.exp
func.func @single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mlc.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A bias gradient (sum over the leading dimensions) closes the group of the
// pointwise ops that produce its input: one kernel writes the gradient and
// accumulates its column sums.
// CHECK-LABEL: func.func @bias_grad
// CHECK: %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg0, %arg1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK:   %[[D:.*]] = mlc.gelu_grad
// CHECK:   %[[S:.*]] = mlc.reduce_sum %[[D]] axes = [0, 1]
// CHECK:   mlc.yield %[[D]], %[[S]] : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK: mlc.matmul %[[F]]#0
func.func @bias_grad(%g: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<3x8xf32>)
    -> (tensor<8xf32>, tensor<2x4x3xf32>) {
  %d = mlc.gelu_grad %g, %x approximate = tanh : tensor<2x4x8xf32>
  %s = mlc.reduce_sum %d axes = [0, 1] : tensor<2x4x8xf32>
  %m = mlc.matmul %d, %w transpose_rhs : tensor<2x4x8xf32>, tensor<3x8xf32>
  return %s, %m : tensor<8xf32>, tensor<2x4x3xf32>
}

// -----

// A sum over the trailing dimension (a row reduction) does not join.
// CHECK-LABEL: func.func @no_fuse_row_sum
// CHECK-NOT: mlc.fusion
// CHECK: mlc.exp
// CHECK: mlc.reduce_sum
func.func @no_fuse_row_sum(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = mlc.exp %x : tensor<4x8xf32>
  %s = mlc.reduce_sum %e axes = [1] : tensor<4x8xf32>
  return %s : tensor<4xf32>
}

// -----

// Residual add + LayerNorm: one row kernel that also writes the sum.
// CHECK-LABEL: func.func @residual_layer_norm
// CHECK: %[[F:.*]]:2 = mlc.fusion rows ins(%arg0, %arg1, %arg2, %arg3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK:   %[[S:.*]] = mlc.add
// CHECK:   %[[N:.*]] = mlc.layer_norm %[[S]]
// CHECK:   mlc.yield %[[S]], %[[N]]
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @residual_layer_norm(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8xf32>,
                               %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = mlc.add %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mlc.layer_norm %s, %w, %b epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A pointwise op computing the LayerNorm's weight is not part of the row
// kernel's prologue: only the normalized input is.
// CHECK-LABEL: func.func @no_fuse_layer_norm_weight
// CHECK: %[[W:.*]] = mlc.exp %arg1 : tensor<8xf32>
// CHECK: mlc.layer_norm %arg0, %[[W]]
// CHECK-NOT: mlc.fusion
func.func @no_fuse_layer_norm_weight(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>)
    -> tensor<4x8xf32> {
  %e = mlc.exp %w : tensor<8xf32>
  %n = mlc.layer_norm %x, %e, %b epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// A cast that is a fusion result's only reader joins the fusion as its last
// op (the kernel stores bf16): here the LayerNorm's output, read by the
// next product, while the residual sum stays f32.
// CHECK-LABEL: func.func @layer_norm_output_cast
// CHECK: %[[F:.*]]:2 = mlc.fusion rows ins(%arg0, %arg1, %arg2, %arg3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK:   %[[S:.*]] = mlc.add
// CHECK:   %[[N:.*]] = mlc.layer_norm %[[S]]
// CHECK:   %[[C:.*]] = mlc.cast %[[N]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:   mlc.yield %[[S]], %[[C]]
// CHECK: } : tensor<4x8xf32>, tensor<4x8xbf16>
// CHECK-NOT: mlc.cast
// CHECK: mlc.matmul %[[F]]#1, %arg4
func.func @layer_norm_output_cast(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8xf32>,
                                  %b: tensor<8xf32>, %m: tensor<8x8xbf16>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %s = mlc.add %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mlc.layer_norm %s, %w, %b epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %c = mlc.cast %n : tensor<4x8xf32> -> tensor<4x8xbf16>
  %y = mlc.matmul %c, %m : tensor<4x8xbf16>, tensor<8x8xbf16>
  return %s, %y : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// A gradient's bf16 copy joins its column-sum fusion; the column sum (the
// bias gradient) keeps its f32 result.
// CHECK-LABEL: func.func @gradient_cast
// CHECK: %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg0 : tensor<4x8xf32>)
// CHECK:   %[[D:.*]] = mlc.dropout
// CHECK:   %[[R:.*]] = mlc.reduce_sum %[[D]]
// CHECK:   %[[C:.*]] = mlc.cast %[[D]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:   mlc.yield %[[C]], %[[R]]
// CHECK: } : tensor<4x8xbf16>, tensor<8xf32>
// CHECK-NOT: mlc.cast
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @gradient_cast(%g: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>) {
  %d = mlc.dropout %g ratio = 0.1 seed = 3 : tensor<4x8xf32>
  %r = mlc.reduce_sum %d axes = [0] : tensor<4x8xf32>
  %c = mlc.cast %d : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %c, %r : tensor<4x8xbf16>, tensor<8xf32>
}

// -----

// A cast is not absorbed when the fusion result has another reader (the f32
// value is stored anyway), nor when it converts a column sum.
// CHECK-LABEL: func.func @no_absorb_cast
// CHECK: %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg0 : tensor<4x8xf32>)
// CHECK: mlc.yield
// CHECK: } : tensor<4x8xf32>, tensor<8xf32>
// CHECK: %[[C:.*]] = mlc.cast %[[F]]#0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[B:.*]] = mlc.cast %[[F]]#1 : tensor<8xf32> -> tensor<8xbf16>
// CHECK: return %[[C]], %[[F]]#0, %[[B]]
func.func @no_absorb_cast(%g: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xbf16>) {
  %d = mlc.dropout %g ratio = 0.1 seed = 3 : tensor<4x8xf32>
  %r = mlc.reduce_sum %d axes = [0] : tensor<4x8xf32>
  %c = mlc.cast %d : tensor<4x8xf32> -> tensor<4x8xbf16>
  %b = mlc.cast %r : tensor<8xf32> -> tensor<8xbf16>
  return %c, %d, %b : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xbf16>
}

// -----

// A column sum and a cast of the same value (no pointwise op to seed a
// group: the QKV bias gradient and its bf16 copy) become one kernel that
// reads the value once.
// CHECK-LABEL: func.func @sum_and_cast
// CHECK: %[[F:.*]]:2 = mlc.fusion pointwise ins(%arg0 : tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:   %[[R:.*]] = mlc.reduce_sum %[[X]] axes = [0]
// CHECK-NEXT:   %[[C:.*]] = mlc.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:   mlc.yield %[[R]], %[[C]]
// CHECK: mlc.matmul %[[F]]#1
// CHECK: return %[[F]]#0
func.func @sum_and_cast(%g: tensor<4x8xf32>, %w: tensor<8x8xbf16>) -> (tensor<8xf32>, tensor<4x8xbf16>) {
  %r = mlc.reduce_sum %g axes = [0] : tensor<4x8xf32>
  %c = mlc.cast %g : tensor<4x8xf32> -> tensor<4x8xbf16>
  %y = mlc.matmul %c, %w : tensor<4x8xbf16>, tensor<8x8xbf16>
  return %r, %y : tensor<8xf32>, tensor<4x8xbf16>
}

// -----

// Not when the earlier one is read before the later one runs (the fused
// kernel would come too late for that reader).
// CHECK-LABEL: func.func @sum_read_before_cast
// CHECK-NOT: mlc.fusion
// CHECK: mlc.reduce_sum
// CHECK: mlc.tanh
// CHECK: mlc.cast
func.func @sum_read_before_cast(%g: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xbf16>) {
  %r = mlc.reduce_sum %g axes = [0] : tensor<4x8xf32>
  %t = mlc.tanh %r : tensor<8xf32>
  %c = mlc.cast %g : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %t, %c : tensor<8xf32>, tensor<4x8xbf16>
}

// -----

// Residual add + RMSNorm (Llama's layer): one row kernel, as LayerNorm's.
// CHECK-LABEL: func.func @residual_rms_norm
// CHECK: %[[F:.*]]:2 = mlc.fusion rows ins(%arg0, %arg1, %arg2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>)
// CHECK:   %[[S:.*]] = mlc.add
// CHECK:   %[[N:.*]] = mlc.rms_norm %[[S]]
// CHECK:   mlc.yield %[[S]], %[[N]]
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @residual_rms_norm(%x: tensor<4x8xf32>, %a: tensor<4x8xf32>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = mlc.add %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mlc.rms_norm %s, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  return %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Only the normalized input is the row kernel's prologue: a pointwise op
// computing the RMSNorm's weight is not.
// CHECK-LABEL: func.func @no_fuse_rms_norm_weight
// CHECK: %[[W:.*]] = mlc.exp %arg1 : tensor<8xf32>
// CHECK: mlc.rms_norm %arg0, %[[W]]
// CHECK-NOT: mlc.fusion
func.func @no_fuse_rms_norm_weight(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = mlc.exp %w : tensor<8xf32>
  %n = mlc.rms_norm %x, %e epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// A product's result is not a prologue: the RMSNorm of a matmul stays alone.
// CHECK-LABEL: func.func @no_fuse_rms_norm_of_matmul
// CHECK: %[[M:.*]] = mlc.matmul
// CHECK-NEXT: mlc.rms_norm %[[M]], %arg2
// CHECK-NOT: mlc.fusion
func.func @no_fuse_rms_norm_of_matmul(%x: tensor<4x8xf32>, %m: tensor<8x8xf32>, %w: tensor<8xf32>)
    -> tensor<4x8xf32> {
  %p = mlc.matmul %x, %m : tensor<4x8xf32>, tensor<8x8xf32>
  %n = mlc.rms_norm %p, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Backward through the residual stream: the adjoint sum of the RMSNorm's
// input gradient and the stream's gradient joins the norm gradient's row
// kernel.
// CHECK-LABEL: func.func @rms_norm_grad_residual
// CHECK: %[[DX:.*]], %[[DW:.*]] = mlc.rms_norm_grad %arg0, %arg1, %arg2 plus %arg3 epsilon = 9.9999999999999995E-7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
// CHECK-NOT: mlc.add
// CHECK: return %[[DX]], %[[DW]]
func.func @rms_norm_grad_residual(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                                  %r: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %r, %dx : tensor<4x8xf32>, tensor<4x8xf32>
  return %s, %dw : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// dx read elsewhere too, or a residual gradient computed after the norm's
// gradient, or a broadcast add: the sum stays its own op.
// CHECK-LABEL: func.func @no_absorb_rms_norm_grad
// CHECK-NOT: plus
// CHECK: %[[DX:.*]], %{{.*}} = mlc.rms_norm_grad %arg0, %arg1, %arg2 epsilon
// CHECK-NEXT: mlc.add %arg3, %[[DX]]
// CHECK: %[[DX2:.*]], %{{.*}} = mlc.rms_norm_grad %arg0, %arg3, %arg2 epsilon
// CHECK: mlc.fusion pointwise ins(%arg1, %[[DX2]]
// CHECK: %[[DX3:.*]], %{{.*}} = mlc.rms_norm_grad %arg0, %arg0, %arg2 epsilon
// CHECK-NEXT: mlc.add %[[DX3]], %arg4
// CHECK-NOT: plus
func.func @no_absorb_rms_norm_grad(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                                   %r: tensor<4x8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %r, %dx : tensor<4x8xf32>, tensor<4x8xf32>
  %dx2, %dw2 = mlc.rms_norm_grad %g, %r, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %late = mlc.exp %x : tensor<4x8xf32>
  %s2 = mlc.add %dx2, %late : tensor<4x8xf32>, tensor<4x8xf32>
  %dx3, %dw3 = mlc.rms_norm_grad %g, %g, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %s3 = mlc.add %dx3, %b : tensor<4x8xf32>, tensor<8xf32>
  return %s, %dx, %s2, %s3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The same for a LayerNorm's gradient (StableLM, OLMo, GPT-NeoX): the
// adjoint sum joins the row kernel, the weight and bias gradients unchanged.
// CHECK-LABEL: func.func @layer_norm_grad_residual
// CHECK: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = mlc.layer_norm_grad %arg0, %arg1, %arg2 plus %arg3 epsilon = 1.000000e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
// CHECK-NOT: mlc.add
// CHECK: return %[[DX]], %[[DW]], %[[DB]]
func.func @layer_norm_grad_residual(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                                    %r: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %dx, %r : tensor<4x8xf32>, tensor<4x8xf32>
  return %s, %dw, %db : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A LayerNorm's dx read elsewhere too, or a broadcast add: the sum stays its
// own op.
// CHECK-LABEL: func.func @no_absorb_layer_norm_grad
// CHECK-NOT: plus
// CHECK: %[[DX:.*]], %{{.*}}, %{{.*}} = mlc.layer_norm_grad %arg0, %arg1, %arg2 epsilon
// CHECK-NEXT: mlc.add %arg3, %[[DX]]
// CHECK: %[[DX2:.*]], %{{.*}}, %{{.*}} = mlc.layer_norm_grad %arg0, %arg0, %arg2 epsilon
// CHECK-NEXT: mlc.add %[[DX2]], %arg4
// CHECK-NOT: plus
func.func @no_absorb_layer_norm_grad(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>,
                                     %r: tensor<4x8xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %s = mlc.add %r, %dx : tensor<4x8xf32>, tensor<4x8xf32>
  %dx2, %dw2, %db2 = mlc.layer_norm_grad %g, %g, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  %s2 = mlc.add %dx2, %b : tensor<4x8xf32>, tensor<8xf32>
  return %s, %dx, %s2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A norm with no prologue read only as a bf16 copy (a model's first norm
// under --dtype bf16) is a row kernel that stores the copy; a norm whose f32
// result is read too, and one read by no cast, stay ops of their own.
// CHECK-LABEL: func.func @norm_read_as_copy
// CHECK: %[[F:.*]] = mlc.fusion rows ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>) {
// CHECK:   %[[N:.*]] = mlc.rms_norm
// CHECK:   %[[C:.*]] = mlc.cast %[[N]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:   mlc.yield %[[C]] : tensor<4x8xbf16>
// CHECK: } : tensor<4x8xbf16>
// CHECK-NOT: mlc.fusion
// CHECK: %[[M:.*]] = mlc.rms_norm %arg2, %arg1
// CHECK-NEXT: mlc.cast %[[M]]
// CHECK-NEXT: mlc.rms_norm %arg3, %arg1
// CHECK-NOT: mlc.fusion
// CHECK: return
func.func @norm_read_as_copy(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %y: tensor<4x8xf32>,
                             %z: tensor<4x8xf32>)
    -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %n = mlc.rms_norm %x, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  %c = mlc.cast %n : tensor<4x8xf32> -> tensor<4x8xbf16>
  %m = mlc.rms_norm %y, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  %d = mlc.cast %m : tensor<4x8xf32> -> tensor<4x8xbf16>
  %o = mlc.rms_norm %z, %w epsilon = 1.0e-6 : tensor<4x8xf32>, tensor<8xf32>
  return %c, %d, %m, %o : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>
}
