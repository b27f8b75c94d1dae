// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise --mlc-in-place --mlc-assign-buffers --mlc-lower-to-plan | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-fuse-elementwise --mlc-in-place --mlc-assign-buffers --mlc-lower-to-plan | mlc-opt -split-input-file | FileCheck %s

// Kernels are IR after the lowering. A bias gradient fused into its
// producer is a column_reduction whose body says each argument's role: the
// inputs loaded, the element's value stored (arg 0) and accumulated into
// its column's sum (arg 1).
// CHECK-LABEL: plan.param "x" : f32 [4, 8]
// CHECK: plan.kernel @k0 column_reduction args(4) params {columns = 8 : i64, dims = array<i64: 4, 8>, lead = 1 : i64, rows = 4 : i64} {
// CHECK-NEXT: %[[G:.*]] = plan.load arg 2 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[X:.*]] = plan.load arg 3 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[D:.*]] = mlc.gelu_grad %[[G]], %[[X]] approximate = tanh : tensor<f32>
// CHECK-NEXT: plan.accumulate %[[D]], arg 1 : tensor<f32>
// CHECK-NEXT: plan.store %[[D]], arg 0 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: }
// CHECK-NOT: source
// CHECK: plan.func "forward"
func.func @forward(%g: tensor<4x8xf32> {mlc.input = "g"}, %x: tensor<4x8xf32> {mlc.param = "x"}) -> (tensor<4x8xf32> {mlc.output = "d"}, tensor<8xf32> {mlc.output = "db"}) {
  %d = mlc.gelu_grad %g, %x approximate = tanh : tensor<4x8xf32>
  %db = mlc.reduce_sum %d axes = [0] : tensor<4x8xf32>
  return %d, %db : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// A sum along the rows is no column reduction: the pointwise op is a body
// kernel, the sum a reduction template with its parameters.
// CHECK-LABEL: plan.param "x" : f32 [4, 8]
// CHECK: plan.kernel @k0 pointwise args(2) params {dims = array<i64: 32>} {
// CHECK: plan.kernel @k1 reduction #plan.reduction<reduce = sum, layout = rows, element = f32, rows = 4, outputs = 4, length = 8> args(2){{$}}
// CHECK-NOT: plan.accumulate
func.func @forward(%x: tensor<4x8xf32> {mlc.param = "x"}) -> (tensor<4xf32> {mlc.output = "s"}) {
  %e = mlc.exp %x : tensor<4x8xf32>
  %s = mlc.reduce_sum %e axes = [1] : tensor<4x8xf32>
  return %s : tensor<4xf32>
}

// -----

// A residual add fused into the LayerNorm after it (a rows kernel): the
// sum is stored (it is also returned) and normalized per row by
// plan.normalize into the LayerNorm's result.
// CHECK-LABEL: plan.param "w" : f32 [8]
// CHECK: plan.kernel @k0 rows args(6) params {dims = array<i64: 4, 8>, eps = 1.000000e-05 : f64, rows = 4 : i64} {
// CHECK-NEXT: %[[X:.*]] = plan.load arg 2 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[A:.*]] = plan.load arg 3 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = plan.load arg 4 offset 0 strides [0, 1] : tensor<f32>
// CHECK-NEXT: %[[B:.*]] = plan.load arg 5 offset 0 strides [0, 1] : tensor<f32>
// CHECK-NEXT: %[[S:.*]] = mlc.add %[[X]], %[[A]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: plan.store %[[S]], arg 0 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: plan.normalize %[[S]], %[[W]], %[[B]], arg 1 offset 0 strides [8, 1] : tensor<f32>, tensor<f32>, tensor<f32> into f32
// CHECK-NEXT: }
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"}, %a: tensor<4x8xf32> {mlc.input = "a"}, %w: tensor<8xf32> {mlc.param = "w"}, %b: tensor<8xf32> {mlc.param = "b"}) -> (tensor<4x8xf32> {mlc.output = "s"}, tensor<4x8xf32> {mlc.output = "n"}) {
  %s = mlc.add %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mlc.layer_norm %s, %w, %b epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// RMSNorm's rows kernel: the residual sum stored and normalized by
// plan.normalize in its rms form (no bias operand).
// CHECK-LABEL: plan.param "w" : f32 [8]
// CHECK: plan.kernel @k0 rows args(5) params {dims = array<i64: 4, 8>, eps = 1.000000e-05 : f64, rows = 4 : i64} {
// CHECK-NEXT: %[[X:.*]] = plan.load arg 2 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[A:.*]] = plan.load arg 3 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = plan.load arg 4 offset 0 strides [0, 1] : tensor<f32>
// CHECK-NEXT: %[[S:.*]] = mlc.add %[[X]], %[[A]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: plan.store %[[S]], arg 0 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: plan.normalize rms %[[S]], %[[W]], arg 1 offset 0 strides [8, 1] : tensor<f32>, tensor<f32> into f32
// CHECK-NEXT: }
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"}, %a: tensor<4x8xf32> {mlc.input = "a"}, %w: tensor<8xf32> {mlc.param = "w"}) -> (tensor<4x8xf32> {mlc.output = "s"}, tensor<4x8xf32> {mlc.output = "n"}) {
  %s = mlc.add %x, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mlc.rms_norm %s, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>
  return %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Without a residual add the RMSNorm is the row template, flagged rms.
// CHECK-LABEL: plan.param "w" : f32 [8]
// CHECK: plan.kernel @k0 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = 1.000000e-05, rms = true> args(3){{$}}
// CHECK-NOT: plan.normalize
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"}, %w: tensor<8xf32> {mlc.param = "w"}) -> (tensor<4x8xf32> {mlc.output = "n"}) {
  %n = mlc.rms_norm %x, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>
  return %n : tensor<4x8xf32>
}

// -----

// A LayerNorm without an affine transform (OLMo's, torch's
// elementwise_affine=False: its weight the constant 1, its bias 0) and its
// gradient read no weight or bias: the templates flagged unit take the
// input (and the gradient) alone, and no constant is filled each step.
// CHECK-LABEL: plan.input "g" : f32 [4, 8]
// CHECK-NOT: "fill"
// CHECK: plan.kernel @k0 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = 1.000000e-05, unit = true> args(2){{$}}
// CHECK-NEXT: plan.kernel @k1 rows #plan.layer_norm_grad<element = f32, rows = 4, capacity = 4, columns = 8, eps = 1.000000e-05, unit = true> args(5){{$}}
// CHECK-NOT: "fill"
// CHECK: plan.launch @k0(%{{.*}}, %{{.*}}) : memref<32xf32>, memref<32xf32>{{$}}
// CHECK-NEXT: plan.launch @k1({{.*}}) : memref<32xf32>, memref<8xf32>, memref<8xf32>, memref<32xf32>, memref<32xf32>{{$}}
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"}, %g: tensor<4x8xf32> {mlc.input = "g"}) -> (tensor<4x8xf32> {mlc.output = "n"}, tensor<4x8xf32> {mlc.output = "dx"}) {
  %w = mlc.constant dense<1.0> : tensor<8xf32>
  %b = mlc.constant dense<0.0> : tensor<8xf32>
  %n = mlc.layer_norm %x, %w, %b epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  return %n, %dx : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A constant weight other than 1 (or a bias other than 0) is read from
// its buffer, filled by the step: the templates take it as an argument.
// CHECK-LABEL: plan.input "g" : f32 [4, 8]
// CHECK: plan.kernel @k0 fill #plan.fill<element = f32, count = 8, value = 2.000000e+00 : f64> args(1){{$}}
// CHECK-NEXT: plan.kernel @k1 fill #plan.fill<element = f32, count = 8, value = 0.000000e+00 : f64> args(1){{$}}
// CHECK-NEXT: plan.kernel @k2 rows #plan.layer_norm<element = f32, rows = 4, columns = 8, eps = 1.000000e-05> args(4){{$}}
// CHECK-NEXT: plan.kernel @k3 fill #plan.fill<element = f32, count = 8, value = 1.000000e+00 : f64> args(1){{$}}
// CHECK-NEXT: plan.kernel @k4 fill #plan.fill<element = f32, count = 8, value = 5.000000e-01 : f64> args(1){{$}}
// CHECK-NEXT: plan.kernel @k5 rows #plan.layer_norm_grad<element = f32, rows = 4, capacity = 4, columns = 8, eps = 1.000000e-05> args(6){{$}}
// CHECK: plan.launch @k2({{.*}}) : memref<32xf32>, memref<32xf32>, memref<8xf32>, memref<8xf32>{{$}}
// CHECK: plan.launch @k2({{.*}}) : memref<32xf32>, memref<32xf32>, memref<8xf32>, memref<8xf32>{{$}}
func.func @forward(%x: tensor<4x8xf32> {mlc.input = "x"}, %g: tensor<4x8xf32> {mlc.input = "g"}) -> (tensor<4x8xf32> {mlc.output = "n"}, tensor<4x8xf32> {mlc.output = "n1"}, tensor<4x8xf32> {mlc.output = "dx"}) {
  %w = mlc.constant dense<2.0> : tensor<8xf32>
  %b = mlc.constant dense<0.0> : tensor<8xf32>
  %n = mlc.layer_norm %x, %w, %b epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %ones = mlc.constant dense<1.0> : tensor<8xf32>
  %half = mlc.constant dense<0.5> : tensor<8xf32>
  %n1 = mlc.layer_norm %x, %ones, %half epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  return %n, %n1, %dx : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The results of a pointwise fusion read only by a concatenation (the
// gradient of a split: Phi3's fused gate/up) are stored straight into their
// slices of it: no copy kernel gathers them.
// CHECK-LABEL: plan.param "w" : f32 [16, 3]
// CHECK-NOT: "copies"
// CHECK: plan.store %{{.*}}, arg 0 offset 0 strides [16, 1] : tensor<f32>
// CHECK-NEXT: plan.store %{{.*}}, arg 1 offset 8 strides [16, 1] : tensor<f32>
// CHECK-NOT: "copies"
// CHECK: plan.launch @k0(%[[C:[0-9]+]], %[[C]], %{{[0-9]+}}, %{{[0-9]+}})
// CHECK-NEXT: plan.gemm %{{[0-9]+}}, %[[C]], %{{[0-9]+}} m 4 n 3 k 16
func.func @forward(%a: tensor<4x8xf32> {mlc.input = "a"}, %b: tensor<4x8xf32> {mlc.input = "b"}, %w: tensor<16x3xf32> {mlc.param = "w"}) -> (tensor<4x3xf32> {mlc.output = "y"}) {
  %x = mlc.mul %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %z = mlc.add %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %c = mlc.concat(%x, %z) axis = 1 : tensor<4x8xf32>, tensor<4x8xf32>
  %y = mlc.matmul %c, %w : tensor<4x16xf32>, tensor<16x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A result read elsewhere too keeps its own buffer and is copied into the
// concatenation; the other is still stored in place.
// CHECK-LABEL: plan.param "w" : f32 [16, 3]
// CHECK: plan.store %{{.*}}, arg 0 offset 0 strides [8, 1] : tensor<f32>
// CHECK-NEXT: plan.store %{{.*}}, arg 1 offset 8 strides [16, 1] : tensor<f32>
// CHECK: plan.kernel @k1 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [16, 1], src_arg = 1, src_offset = 0, src_strides = [8, 1]>]> args(2){{$}}
func.func @forward(%a: tensor<4x8xf32> {mlc.input = "a"}, %b: tensor<4x8xf32> {mlc.input = "b"}, %w: tensor<16x3xf32> {mlc.param = "w"}) -> (tensor<4x3xf32> {mlc.output = "y"}, tensor<4x8xf32> {mlc.output = "x"}) {
  %x = mlc.mul %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %z = mlc.add %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %c = mlc.concat(%x, %z) axis = 1 : tensor<4x8xf32>, tensor<4x8xf32>
  %y = mlc.matmul %c, %w : tensor<4x16xf32>, tensor<16x3xf32>
  return %y, %x : tensor<4x3xf32>, tensor<4x8xf32>
}

// -----

// A concatenation read only through a transpose that keeps the innermost
// dimension (GPT-NeoX's per-head [q k v] gradient, back to [tokens, heads,
// 3 x head] for the fused QKV projection's GEMMs) lives in the transpose's
// layout: its producers store into it with the transposed strides, and the
// reshape that follows needs no copy.
// CHECK-LABEL: plan.param "w" : f32 [12, 5]
// CHECK-NOT: "copies"
// CHECK: plan.store %{{.*}}, arg 0 offset 0 strides [48, 4, 12, 1] : tensor<f32>
// CHECK-NEXT: plan.store %{{.*}}, arg 1 offset 2 strides [48, 4, 12, 1] : tensor<f32>
// CHECK-NOT: "copies"
// CHECK: plan.launch @k0(%[[C:[0-9]+]], %[[C]], %{{[0-9]+}}, %{{[0-9]+}})
// CHECK-NEXT: plan.gemm %{{[0-9]+}}, %[[C]], %{{[0-9]+}} m 8 n 5 k 12
func.func @forward(%a: tensor<2x3x4x2xf32> {mlc.input = "a"}, %b: tensor<2x3x4x2xf32> {mlc.input = "b"}, %w: tensor<12x5xf32> {mlc.param = "w"}) -> (tensor<2x4x5xf32> {mlc.output = "y"}) {
  %x = mlc.mul %a, %b : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>
  %z = mlc.add %a, %b : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>
  %c = mlc.concat(%x, %z) axis = 3 : tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>
  %t = mlc.transpose %c, [0, 2, 1, 3] : tensor<2x3x4x4xf32>
  %r = mlc.reshape %t : tensor<2x4x3x4xf32> -> tensor<2x4x12xf32>
  %y = mlc.matmul %r, %w : tensor<2x4x12xf32>, tensor<12x5xf32>
  return %y : tensor<2x4x5xf32>
}

// -----

// Softmax's rows are typed templates: a log_softmax flagged log, a softmax
// (log elided), softmax's gradient of (dy, y); each kernel without params.
// CHECK-LABEL: plan.input "g" : f32 [2, 4, 8]
// CHECK: plan.kernel @k0 rows #plan.softmax<element = f32, rows = 8, columns = 8, log = true> args(2){{$}}
// CHECK-NEXT: plan.kernel @k1 rows #plan.softmax<element = f32, rows = 8, columns = 8> args(2){{$}}
// CHECK-NEXT: plan.kernel @k2 rows #plan.softmax_grad<element = f32, rows = 8, columns = 8> args(3){{$}}
func.func @forward(%x: tensor<2x4x8xf32> {mlc.input = "x"}, %g: tensor<2x4x8xf32> {mlc.input = "g"}) -> (tensor<2x4x8xf32> {mlc.output = "l"}, tensor<2x4x8xf32> {mlc.output = "dx"}) {
  %l = mlc.log_softmax %x axis = -1 : tensor<2x4x8xf32>
  %y = mlc.softmax %x axis = 2 : tensor<2x4x8xf32>
  %dx = mlc.softmax_grad %g, %y axis = -1 : tensor<2x4x8xf32>
  return %l, %dx : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
