// RUN: mlc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mlc-recognize))' | FileCheck %s

// LayerNorm as PyTorch's exporter writes it at opset 14.
// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT: %[[LN:.*]] = mlc.layer_norm %arg0, %arg1, %arg2 epsilon = 1.000000e-05 :
// CHECK-NEXT: return %[[LN]]
func.func @layer_norm(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %m = mlc.reduce_mean %x axes = [2] keepdims : tensor<2x8x16xf32>
  %d = mlc.sub %x, %m : tensor<2x8x16xf32>, tensor<2x8x1xf32>
  %two = mlc.constant dense<2.0> : tensor<f32>
  %sq = mlc.pow %d, %two : tensor<2x8x16xf32>, tensor<f32>
  %v = mlc.reduce_mean %sq axes = [2] keepdims : tensor<2x8x16xf32>
  %eps = mlc.constant dense<1.0e-5> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<2x8x1xf32>, tensor<f32>
  %s = mlc.sqrt %ve : tensor<2x8x1xf32>
  %n = mlc.div %d, %s : tensor<2x8x16xf32>, tensor<2x8x1xf32>
  %nw = mlc.mul %w, %n : tensor<16xf32>, tensor<2x8x16xf32>
  %y = mlc.add %b, %nw : tensor<16xf32>, tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// The variance over another axis than the mean's is not a LayerNorm.
// CHECK-LABEL: func.func @not_layer_norm
// CHECK-NOT: mlc.layer_norm
// CHECK: mlc.sqrt
func.func @not_layer_norm(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %m = mlc.reduce_mean %x axes = [2] keepdims : tensor<2x8x16xf32>
  %d = mlc.sub %x, %m : tensor<2x8x16xf32>, tensor<2x8x1xf32>
  %two = mlc.constant dense<2.0> : tensor<f32>
  %sq = mlc.pow %d, %two : tensor<2x8x16xf32>, tensor<f32>
  %v = mlc.reduce_mean %sq axes = [1] keepdims : tensor<2x8x16xf32>
  %eps = mlc.constant dense<1.0e-5> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<2x1x16xf32>, tensor<f32>
  %s = mlc.sqrt %ve : tensor<2x1x16xf32>
  %n = mlc.div %d, %s : tensor<2x8x16xf32>, tensor<2x1x16xf32>
  %nw = mlc.mul %n, %w : tensor<2x8x16xf32>, tensor<16xf32>
  %y = mlc.add %nw, %b : tensor<2x8x16xf32>, tensor<16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// GPT-2's tanh GELU with pow(x, 3), and BERT's erf GELU with a division.
// CHECK-LABEL: func.func @gelus
// CHECK-NEXT: %[[T:.*]] = mlc.gelu %arg0 approximate = tanh
// CHECK-NEXT: %[[E:.*]] = mlc.gelu %arg1 :
// CHECK-NEXT: return %[[T]], %[[E]]
func.func @gelus(%x: tensor<4x32xf32>, %z: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %half = mlc.constant dense<0.5> : tensor<f32>
  %three = mlc.constant dense<3.0> : tensor<f32>
  %c = mlc.constant dense<0.044715> : tensor<f32>
  %k = mlc.constant dense<0.797884583> : tensor<f32>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %a = mlc.mul %x, %half : tensor<4x32xf32>, tensor<f32>
  %p = mlc.pow %x, %three : tensor<4x32xf32>, tensor<f32>
  %q = mlc.mul %p, %c : tensor<4x32xf32>, tensor<f32>
  %r = mlc.add %x, %q : tensor<4x32xf32>, tensor<4x32xf32>
  %t = mlc.mul %r, %k : tensor<4x32xf32>, tensor<f32>
  %u = mlc.tanh %t : tensor<4x32xf32>
  %w = mlc.add %u, %one : tensor<4x32xf32>, tensor<f32>
  %g = mlc.mul %a, %w : tensor<4x32xf32>, tensor<4x32xf32>
  %sqrt2 = mlc.constant dense<1.41421354> : tensor<f32>
  %zd = mlc.div %z, %sqrt2 : tensor<4x32xf32>, tensor<f32>
  %ze = mlc.erf %zd : tensor<4x32xf32>
  %zw = mlc.add %ze, %one : tensor<4x32xf32>, tensor<f32>
  %zm = mlc.mul %z, %zw : tensor<4x32xf32>, tensor<4x32xf32>
  %ge = mlc.mul %zm, %half : tensor<4x32xf32>, tensor<f32>
  return %g, %ge : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// A different constant (0.6 instead of 0.5) is another function: left alone.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: mlc.gelu
// CHECK: mlc.erf
func.func @not_gelu(%z: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %c = mlc.constant dense<0.6> : tensor<f32>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %sqrt2 = mlc.constant dense<1.41421354> : tensor<f32>
  %zd = mlc.div %z, %sqrt2 : tensor<4x32xf32>, tensor<f32>
  %ze = mlc.erf %zd : tensor<4x32xf32>
  %zw = mlc.add %ze, %one : tensor<4x32xf32>, tensor<f32>
  %zm = mlc.mul %z, %zw : tensor<4x32xf32>, tensor<4x32xf32>
  %ge = mlc.mul %zm, %c : tensor<4x32xf32>, tensor<f32>
  return %ge : tensor<4x32xf32>
}

// -----

// GPT-2's causal attention: a scale by division, select against the lowest
// float with a lower-triangular mask, then softmax and the value product.
// CHECK-LABEL: func.func @causal_attention
// CHECK: %[[K:.*]] = mlc.transpose %arg1, [0, 1, 3, 2]
// CHECK-NEXT: %[[A:.*]] = mlc.attention %arg0, %[[K]], %arg2 causal :
// CHECK-NEXT: return %[[A]]
func.func @causal_attention(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %c = mlc.constant dense<2.0> : tensor<f32>
  %d = mlc.div %s, %c : tensor<1x2x3x3xf32>, tensor<f32>
  %mask = mlc.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %low = mlc.constant dense<-3.40282347E+38> : tensor<f32>
  %m = mlc.select %mask, %d, %low : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32>
  %p = mlc.softmax %m axis = 3 : tensor<1x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// BERT's attention: an additive [B, 1, 1, S] mask and a scale that is not
// 1/sqrt(D) (kept as the attention's scale); dropout on the probabilities
// becomes the attention's dropout.
// CHECK-LABEL: func.func @masked_attention
// CHECK: mlc.attention %arg0, %{{.*}}, %arg2 mask %arg3 scale = 2.500000e-01 dropout = 1.000000e-01 seed = 7 :
func.func @masked_attention(%q: tensor<2x2x3x8xf32>, %kt: tensor<2x2x8x3xf32>, %v: tensor<2x2x3x8xf32>, %mask: tensor<2x1x1x3xf32>) -> tensor<2x2x3x8xf32> {
  %s = mlc.matmul %q, %kt : tensor<2x2x3x8xf32>, tensor<2x2x8x3xf32>
  %c = mlc.constant dense<0.25> : tensor<f32>
  %d = mlc.mul %s, %c : tensor<2x2x3x3xf32>, tensor<f32>
  %m = mlc.add %d, %mask : tensor<2x2x3x3xf32>, tensor<2x1x1x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<2x2x3x3xf32>
  %pd = mlc.dropout %p ratio = 0.1 seed = 7 : tensor<2x2x3x3xf32>
  %o = mlc.matmul %pd, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x8xf32>
  return %o : tensor<2x2x3x8xf32>
}

// -----

// A mask that is not causal (the upper triangle) leaves the chain alone.
// CHECK-LABEL: func.func @not_causal
// CHECK-NOT: mlc.attention
// CHECK: mlc.softmax
func.func @not_causal(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %mask = mlc.constant dense<[[[[true, true, true], [false, true, true], [false, false, true]]]]> : tensor<1x1x3x3xi1>
  %low = mlc.constant dense<-3.40282347E+38> : tensor<f32>
  %m = mlc.select %mask, %s, %low : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32>
  %p = mlc.softmax %m axis = 3 : tensor<1x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// Gemm on flattened rows becomes the same GEMM on the rows' own shape, and
// x @ transpose(w) reads w transposed.
// CHECK-LABEL: func.func @linear
// CHECK-NEXT: %[[M:.*]] = mlc.matmul %arg0, %arg1 : tensor<2x8x16xf32>, tensor<16x32xf32>
// CHECK-NEXT: %[[Y:.*]] = mlc.add %[[M]], %arg2
// CHECK-NEXT: %[[T:.*]] = mlc.matmul %[[Y]], %arg3 transpose_rhs : tensor<2x8x32xf32>, tensor<5x32xf32>
// CHECK-NEXT: return %[[T]]
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>, %e: tensor<5x32xf32>) -> tensor<2x8x5xf32> {
  %f = mlc.reshape %x : tensor<2x8x16xf32> -> tensor<16x16xf32>
  %m = mlc.matmul %f, %w : tensor<16x16xf32>, tensor<16x32xf32>
  %a = mlc.add %m, %b : tensor<16x32xf32>, tensor<32xf32>
  %y = mlc.reshape %a : tensor<16x32xf32> -> tensor<2x8x32xf32>
  %et = mlc.transpose %e, [1, 0] : tensor<5x32xf32>
  %l = mlc.matmul %y, %et : tensor<2x8x32xf32>, tensor<32x5xf32>
  return %l : tensor<2x8x5xf32>
}

// -----

// A reshape that regroups rows differently is not a linear layer's.
// CHECK-LABEL: func.func @not_linear
// CHECK: mlc.matmul %{{.*}}, %arg1 : tensor<16x16xf32>, tensor<16x32xf32>
func.func @not_linear(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>) -> tensor<4x4x32xf32> {
  %f = mlc.reshape %x : tensor<2x8x16xf32> -> tensor<16x16xf32>
  %m = mlc.matmul %f, %w : tensor<16x16xf32>, tensor<16x32xf32>
  %y = mlc.reshape %m : tensor<16x32xf32> -> tensor<4x4x32xf32>
  return %y : tensor<4x4x32xf32>
}

// -----

// The dynamo exporter's SDPA (torch >= 2.9): the scale's square root on q
// and on k^T separately, k^T as reshape -> transpose -> reshape, an
// additive constant causal mask of the batch's shape, and the NaN guard
// select(p != p, 0, p) after the softmax. The key is read as it was (no
// transpose is built), the scale is the product, no mask is kept.
// CHECK-LABEL: func.func @dynamo_causal_attention
// CHECK-NOT: mlc.transpose
// CHECK: %[[A:.*]] = mlc.attention %arg0, %arg1, %arg2 causal scale = 2.500000e-01 :
// CHECK-NEXT: return %[[A]]
func.func @dynamo_causal_attention(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %kf = mlc.reshape %k : tensor<2x2x3x4xf32> -> tensor<4x3x4xf32>
  %kft = mlc.transpose %kf, [0, 2, 1] : tensor<4x3x4xf32>
  %kt = mlc.reshape %kft : tensor<4x4x3xf32> -> tensor<2x2x4x3xf32>
  %half = mlc.constant dense<0.5> : tensor<f32>
  %qs = mlc.mul %q, %half : tensor<2x2x3x4xf32>, tensor<f32>
  %ks = mlc.mul %kt, %half : tensor<2x2x4x3xf32>, tensor<f32>
  %s = mlc.matmul %qs, %ks : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32>
  %mask = mlc.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<2x1x3x3xf32>
  %m = mlc.add %s, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<2x2x3x3xf32>
  %nan = mlc.compare ne %p, %p : tensor<2x2x3x3xf32>, tensor<2x2x3x3xf32>
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %g = mlc.select %nan, %zero, %p : tensor<2x2x3x3xi1>, tensor<f32>, tensor<2x2x3x3xf32>
  %o = mlc.matmul %g, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// BERT's padding mask as the dynamo exporter builds it: And (a select) of an
// all-true [1, 1, S, 1] constant with the [B, 1, 1, S] padding condition,
// then Where(cond, 0, lowest): the attention's mask is built from the
// condition at [B, 1, 1, S], not at [B, 1, S, S].
// CHECK-LABEL: func.func @dynamo_padding_mask
// CHECK: %[[M:.*]] = mlc.select %arg3, %{{.*}}, %{{.*}} : tensor<2x1x1x3xi1>, tensor<f32>, tensor<f32>
// CHECK-NEXT: mlc.attention %arg0, %{{.*}}, %arg2 mask %[[M]] : {{.*}}, tensor<2x1x1x3xf32>
func.func @dynamo_padding_mask(%q: tensor<2x2x3x4xf32>, %kt: tensor<2x2x4x3xf32>, %v: tensor<2x2x3x4xf32>, %pad: tensor<2x1x1x3xi1>) -> tensor<2x2x3x4xf32> {
  %ones = mlc.constant dense<true> : tensor<1x1x3x1xi1>
  %false = mlc.constant dense<false> : tensor<i1>
  %and = mlc.select %ones, %pad, %false : tensor<1x1x3x1xi1>, tensor<2x1x1x3xi1>, tensor<i1>
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %low = mlc.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = mlc.select %and, %zero, %low : tensor<2x1x3x3xi1>, tensor<f32>, tensor<f32>
  %s = mlc.matmul %q, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32>
  %c = mlc.constant dense<0.5> : tensor<f32>
  %d = mlc.mul %s, %c : tensor<2x2x3x3xf32>, tensor<f32>
  %m = mlc.add %d, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<2x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// The padding condition as imported from Cast(attention_mask, bool) and a
// positional GatherND (a reshape): the mask is selected at the cast's shape
// and reshaped after, so the cast and the select are neighbours (one
// pointwise kernel).
// CHECK-LABEL: func.func @dynamo_padding_from_ids
// CHECK: %[[C:.*]] = mlc.cast %arg3 : tensor<2x3xi64> -> tensor<2x3xi1>
// CHECK: %[[S:.*]] = mlc.select %[[C]], %{{.*}}, %{{.*}} : tensor<2x3xi1>, tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[M:.*]] = mlc.reshape %[[S]] : tensor<2x3xf32> -> tensor<2x1x1x3xf32>
// CHECK-NEXT: mlc.attention %arg0, %{{.*}}, %arg2 mask %[[M]] scale = 1.000000e+00 :
func.func @dynamo_padding_from_ids(%q: tensor<2x2x3x4xf32>, %kt: tensor<2x2x4x3xf32>, %v: tensor<2x2x3x4xf32>, %am: tensor<2x3xi64>) -> tensor<2x2x3x4xf32> {
  %b = mlc.cast %am : tensor<2x3xi64> -> tensor<2x3xi1>
  %pad = mlc.reshape %b : tensor<2x3xi1> -> tensor<2x1x1x3xi1>
  %ones = mlc.constant dense<true> : tensor<1x1x3x1xi1>
  %false = mlc.constant dense<false> : tensor<i1>
  %and = mlc.select %ones, %pad, %false : tensor<1x1x3x1xi1>, tensor<2x1x1x3xi1>, tensor<i1>
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %low = mlc.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = mlc.select %and, %zero, %low : tensor<2x1x3x3xi1>, tensor<f32>, tensor<f32>
  %s = mlc.matmul %q, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32>
  %m = mlc.add %s, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<2x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// An additive constant mask that is not causal (one entry of the upper
// triangle kept) stays the attention's mask: no causal flag.
// CHECK-LABEL: func.func @additive_not_causal
// CHECK: %[[C:.*]] = mlc.constant
// CHECK: mlc.attention %arg0, %{{.*}}, %arg2 mask %[[C]] scale = 1.000000e+00 :
// CHECK-NOT: causal
func.func @additive_not_causal(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %mask = mlc.constant dense<[[[[0.0, 0.0, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %m = mlc.add %s, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<1x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// Mistral's sliding window (transformers' mask for sliding_window 2 < S):
// query i sees keys i - 1 .. i, the window read from the constant; no mask
// is kept.
// CHECK-LABEL: func.func @sliding_window_attention
// CHECK: %[[A:.*]] = mlc.attention %arg0, %{{.*}}, %arg2 causal scale = 1.000000e+00 window = 2 :
// CHECK-SAME: tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>{{$}}
// CHECK-NEXT: return %[[A]]
func.func @sliding_window_attention(%q: tensor<1x2x4x4xf32>, %kt: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %s = mlc.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %mask = mlc.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [-3.40282347E+38, 0.0, 0.0, -3.40282347E+38], [-3.40282347E+38, -3.40282347E+38, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %m = mlc.add %s, %mask : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %p = mlc.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// A band whose rows see windows of different lengths (query 2 sees 3 keys,
// query 3 two) is no sliding window: the mask stays, no causal flag.
// CHECK-LABEL: func.func @uneven_window_not_causal
// CHECK: %[[C:.*]] = mlc.constant
// CHECK: mlc.attention %arg0, %{{.*}}, %arg2 mask %[[C]] scale = 1.000000e+00 :
// CHECK-NOT: causal
// CHECK-NOT: window
func.func @uneven_window_not_causal(%q: tensor<1x2x4x4xf32>, %kt: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %s = mlc.matmul %q, %kt : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %mask = mlc.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [-3.40282347E+38, -3.40282347E+38, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %m = mlc.add %s, %mask : tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>
  %p = mlc.softmax %m axis = 3 : tensor<1x2x4x4xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// A guard that does not put 0 for NaN is not the exporter's: left alone.
// CHECK-LABEL: func.func @not_nan_guard
// CHECK-NOT: mlc.attention
// CHECK: mlc.softmax
func.func @not_nan_guard(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %p = mlc.softmax %s axis = 3 : tensor<1x2x3x3xf32>
  %nan = mlc.compare ne %p, %p : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %g = mlc.select %nan, %one, %p : tensor<1x2x3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32>
  %o = mlc.matmul %g, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// Opset 23's Attention imports its boolean mask as select(mask, 0, lowest):
// a causal constant mask becomes the causal flag.
// CHECK-LABEL: func.func @attention_causal_mask
// CHECK: %[[A:.*]] = mlc.attention %arg0, %arg1, %arg2 causal scale = 2.500000e-01 :
// CHECK-SAME: tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>{{$}}
// CHECK-NEXT: return %[[A]]
func.func @attention_causal_mask(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %c = mlc.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]], [[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<2x1x3x3xi1>
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %low = mlc.constant dense<-3.40282347E+38> : tensor<f32>
  %m = mlc.select %c, %zero, %low : tensor<2x1x3x3xi1>, tensor<f32>, tensor<f32>
  %o = mlc.attention %q, %k, %v mask %m scale = 0.25 : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x1x3x3xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// A mask computed from an input is the attention's mask as it is.
// CHECK-LABEL: func.func @attention_runtime_mask
// CHECK: %[[M:.*]] = mlc.select %arg3
// CHECK-NEXT: mlc.attention %arg0, %arg1, %arg2 mask %[[M]] :
func.func @attention_runtime_mask(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>, %c: tensor<2x1x3x3xi1>) -> tensor<2x2x3x4xf32> {
  %zero = mlc.constant dense<0.0> : tensor<f32>
  %low = mlc.constant dense<-3.40282347E+38> : tensor<f32>
  %m = mlc.select %c, %zero, %low : tensor<2x1x3x3xi1>, tensor<f32>, tensor<f32>
  %o = mlc.attention %q, %k, %v mask %m : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x1x3x3xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// Attention's output flattened to rows straight from [B, S, H, D] (dynamo),
// with the bias carried by the matmul: the linear layer reads [B, S, H * D]
// and keeps its bias.
// CHECK-LABEL: func.func @linear_from_heads
// CHECK: %[[X:.*]] = mlc.reshape %arg0 : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[M:.*]] = mlc.matmul %[[X]], %arg1 : tensor<2x3x8xf32>, tensor<8x5xf32>
// CHECK-NEXT: %[[Y:.*]] = mlc.add %[[M]], %arg2
// CHECK-NEXT: return %[[Y]]
func.func @linear_from_heads(%x: tensor<2x3x2x4xf32>, %w: tensor<8x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %f = mlc.reshape %x : tensor<2x3x2x4xf32> -> tensor<6x8xf32>
  %m = mlc.matmul %f, %w bias(%b : tensor<5xf32>) : tensor<6x8xf32>, tensor<8x5xf32>
  %y = mlc.reshape %m : tensor<6x5xf32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// The next-token loss reads the logits in place: the labels are shifted and
// end each sequence with the ignore index instead.
// CHECK-LABEL: func.func @shifted_loss
// CHECK: %[[L:.*]] = mlc.slice %arg1 starts = [0, 1] ends = [2, 4] steps = [1, 1]
// CHECK: %[[I:.*]] = mlc.constant dense<-100> : tensor<2x1xi64>
// CHECK: %[[Y:.*]] = mlc.concat(%[[L]], %[[I]]) axis = 1
// CHECK-DAG: %[[X:.*]] = mlc.reshape %arg0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-DAG: %[[R:.*]] = mlc.reshape %[[Y]] : tensor<2x4xi64> -> tensor<8xi64>
// CHECK: mlc.cross_entropy %[[X]], %[[R]] ignore_index = -100 : tensor<8x8xf32>, tensor<8xi64>
// CHECK-NOT: mlc.slice %arg0
func.func @shifted_loss(%logits: tensor<2x4x8xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
  %x = mlc.slice %logits starts = [0, 0, 0] ends = [2, 3, 8] steps = [1, 1, 1] : tensor<2x4x8xf32>
  %y = mlc.slice %labels starts = [0, 1] ends = [2, 4] steps = [1, 1] : tensor<2x4xi64>
  %xr = mlc.reshape %x : tensor<2x3x8xf32> -> tensor<6x8xf32>
  %yr = mlc.reshape %y : tensor<2x3xi64> -> tensor<6xi64>
  %l = mlc.cross_entropy %xr, %yr ignore_index = -100 : tensor<6x8xf32>, tensor<6xi64>
  return %l : tensor<f32>
}

// -----

// Labels shifted by two are another loss: left alone.
// CHECK-LABEL: func.func @not_shifted_by_one
// CHECK: mlc.slice %arg0
// CHECK: mlc.cross_entropy {{.*}} : tensor<4x8xf32>, tensor<4xi64>
func.func @not_shifted_by_one(%logits: tensor<2x4x8xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
  %x = mlc.slice %logits starts = [0, 0, 0] ends = [2, 2, 8] steps = [1, 1, 1] : tensor<2x4x8xf32>
  %y = mlc.slice %labels starts = [0, 2] ends = [2, 4] steps = [1, 1] : tensor<2x4xi64>
  %xr = mlc.reshape %x : tensor<2x2x8xf32> -> tensor<4x8xf32>
  %yr = mlc.reshape %y : tensor<2x2xi64> -> tensor<4xi64>
  %l = mlc.cross_entropy %xr, %yr ignore_index = -100 : tensor<4x8xf32>, tensor<4xi64>
  return %l : tensor<f32>
}

// -----

// RMSNorm as the ONNX exporters write it: Pow(x, 2) -> ReduceMean -> Add eps
// -> Sqrt -> Reciprocal (imported as 1 / s) -> Mul x -> Mul w.
// CHECK-LABEL: func.func @rms_norm_reciprocal
// CHECK-NEXT: %[[N:.*]] = mlc.rms_norm %arg0, %arg1 epsilon = 9.9999999999999995E-7 : tensor<2x8x16xf32>, tensor<16xf32>
// CHECK-NEXT: return %[[N]]
func.func @rms_norm_reciprocal(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %two = mlc.constant dense<2.0> : tensor<f32>
  %sq = mlc.pow %x, %two : tensor<2x8x16xf32>, tensor<f32>
  %v = mlc.reduce_mean %sq axes = [2] keepdims : tensor<2x8x16xf32>
  %eps = mlc.constant dense<1.0e-6> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<2x8x1xf32>, tensor<f32>
  %s = mlc.sqrt %ve : tensor<2x8x1xf32>
  %one = mlc.constant dense<1.0> : tensor<f32>
  %r = mlc.div %one, %s : tensor<f32>, tensor<2x8x1xf32>
  %n = mlc.mul %x, %r : tensor<2x8x16xf32>, tensor<2x8x1xf32>
  %y = mlc.mul %n, %w : tensor<2x8x16xf32>, tensor<16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// transformers' LlamaRMSNorm in bf16: the input cast to f32, x * x, mean over
// axis -1, rsqrt, the normalized value cast back before the weight.
// CHECK-LABEL: func.func @rms_norm_rsqrt_casts
// CHECK-NEXT: %[[N:.*]] = mlc.rms_norm %arg0, %arg1 epsilon = 1.000000e-05 : tensor<4x16xbf16>, tensor<16xbf16>
// CHECK-NEXT: return %[[N]]
func.func @rms_norm_rsqrt_casts(%x: tensor<4x16xbf16>, %w: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %xf = mlc.cast %x : tensor<4x16xbf16> -> tensor<4x16xf32>
  %sq = mlc.mul %xf, %xf : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.reduce_mean %sq axes = [-1] keepdims : tensor<4x16xf32>
  %eps = mlc.constant dense<1.0e-5> : tensor<f32>
  %ve = mlc.add %eps, %v : tensor<f32>, tensor<4x1xf32>
  %r = mlc.rsqrt %ve : tensor<4x1xf32>
  %n = mlc.mul %r, %xf : tensor<4x1xf32>, tensor<4x16xf32>
  %nb = mlc.cast %n : tensor<4x16xf32> -> tensor<4x16xbf16>
  %y = mlc.mul %w, %nb : tensor<16xbf16>, tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// -----

// x / sqrt(mean(x^2) + eps) * w.
// CHECK-LABEL: func.func @rms_norm_div
// CHECK-NEXT: %[[N:.*]] = mlc.rms_norm %arg0, %arg1 epsilon = 9.9999999999999995E-7
// CHECK-NEXT: return %[[N]]
func.func @rms_norm_div(%x: tensor<4x16xf32>, %w: tensor<16xf32>) -> tensor<4x16xf32> {
  %sq = mlc.mul %x, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.reduce_mean %sq axes = [1] keepdims : tensor<4x16xf32>
  %eps = mlc.constant dense<1.0e-6> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<4x1xf32>, tensor<f32>
  %s = mlc.sqrt %ve : tensor<4x1xf32>
  %n = mlc.div %x, %s : tensor<4x16xf32>, tensor<4x1xf32>
  %y = mlc.mul %w, %n : tensor<16xf32>, tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A mean over another axis than the last is not an RMSNorm.
// CHECK-LABEL: func.func @not_rms_norm_axis
// CHECK-NOT: mlc.rms_norm
// CHECK: mlc.rsqrt
func.func @not_rms_norm_axis(%x: tensor<4x16xf32>, %w: tensor<16xf32>) -> tensor<4x16xf32> {
  %sq = mlc.mul %x, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.reduce_mean %sq axes = [0] keepdims : tensor<4x16xf32>
  %eps = mlc.constant dense<1.0e-6> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<1x16xf32>, tensor<f32>
  %r = mlc.rsqrt %ve : tensor<1x16xf32>
  %n = mlc.mul %x, %r : tensor<4x16xf32>, tensor<1x16xf32>
  %y = mlc.mul %n, %w : tensor<4x16xf32>, tensor<16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// An epsilon that is not a constant is not an RMSNorm's.
// CHECK-LABEL: func.func @not_rms_norm_eps
// CHECK-NOT: mlc.rms_norm
// CHECK: mlc.rsqrt
func.func @not_rms_norm_eps(%x: tensor<4x16xf32>, %w: tensor<16xf32>, %eps: tensor<f32>) -> tensor<4x16xf32> {
  %sq = mlc.mul %x, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.reduce_mean %sq axes = [1] keepdims : tensor<4x16xf32>
  %ve = mlc.add %v, %eps : tensor<4x1xf32>, tensor<f32>
  %r = mlc.rsqrt %ve : tensor<4x1xf32>
  %n = mlc.mul %x, %r : tensor<4x16xf32>, tensor<4x1xf32>
  %y = mlc.mul %n, %w : tensor<4x16xf32>, tensor<16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The mean square of one tensor scaling another is not an RMSNorm.
// CHECK-LABEL: func.func @not_rms_norm_other_input
// CHECK-NOT: mlc.rms_norm
// CHECK: mlc.rsqrt
func.func @not_rms_norm_other_input(%x: tensor<4x16xf32>, %z: tensor<4x16xf32>, %w: tensor<16xf32>) -> tensor<4x16xf32> {
  %sq = mlc.mul %z, %z : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.reduce_mean %sq axes = [1] keepdims : tensor<4x16xf32>
  %eps = mlc.constant dense<1.0e-6> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<4x1xf32>, tensor<f32>
  %r = mlc.rsqrt %ve : tensor<4x1xf32>
  %n = mlc.mul %x, %r : tensor<4x16xf32>, tensor<4x1xf32>
  %y = mlc.mul %n, %w : tensor<4x16xf32>, tensor<16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A weight that is not a vector of the hidden size leaves the chain alone.
// CHECK-LABEL: func.func @not_rms_norm_weight
// CHECK-NOT: mlc.rms_norm
// CHECK: mlc.rsqrt
func.func @not_rms_norm_weight(%x: tensor<4x16xf32>, %w: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %sq = mlc.mul %x, %x : tensor<4x16xf32>, tensor<4x16xf32>
  %v = mlc.reduce_mean %sq axes = [1] keepdims : tensor<4x16xf32>
  %eps = mlc.constant dense<1.0e-6> : tensor<f32>
  %ve = mlc.add %v, %eps : tensor<4x1xf32>, tensor<f32>
  %r = mlc.rsqrt %ve : tensor<4x1xf32>
  %n = mlc.mul %x, %r : tensor<4x16xf32>, tensor<4x1xf32>
  %y = mlc.mul %n, %w : tensor<4x16xf32>, tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Gemma 2's attention-logit soft-capping as the dynamo exporter writes it:
// scores * scale, / cap, tanh, * cap, then the causal mask: the cap is the
// attention's softcap (before the mask, as the kernels apply it), the
// scale query_pre_attn_scalar^-0.5.
// CHECK-LABEL: func.func @softcap_attention
// CHECK-NOT: mlc.tanh
// CHECK: %[[A:.*]] = mlc.attention %arg0, %arg1, %arg2 causal scale = 2.500000e-01 softcap = 5.000000e+01 :
// CHECK-NEXT: return %[[A]]
func.func @softcap_attention(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32> {
  %kt = mlc.transpose %k, [0, 1, 3, 2] : tensor<2x2x3x4xf32>
  %s = mlc.matmul %q, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32>
  %scale = mlc.constant dense<0.25> : tensor<f32>
  %ss = mlc.mul %s, %scale : tensor<2x2x3x3xf32>, tensor<f32>
  %cap = mlc.constant dense<50.0> : tensor<f32>
  %d = mlc.div %ss, %cap : tensor<2x2x3x3xf32>, tensor<f32>
  %t = mlc.tanh %d : tensor<2x2x3x3xf32>
  %c = mlc.mul %t, %cap : tensor<2x2x3x3xf32>, tensor<f32>
  %mask = mlc.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %m = mlc.add %c, %mask : tensor<2x2x3x3xf32>, tensor<1x1x3x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<2x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// Soft-capping without a mask, the cap as a product by its reciprocal and
// the outer constant on the left: still the attention's softcap.
// CHECK-LABEL: func.func @softcap_attention_unmasked
// CHECK-NOT: mlc.tanh
// CHECK: mlc.attention %arg0, %arg1, %arg2 softcap = 4.000000e+00 :
func.func @softcap_attention_unmasked(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %kt = mlc.transpose %k, [0, 1, 3, 2] : tensor<1x2x3x4xf32>
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %scale = mlc.constant dense<0.5> : tensor<f32>
  %ss = mlc.mul %s, %scale : tensor<1x2x3x3xf32>, tensor<f32>
  %inv = mlc.constant dense<0.25> : tensor<f32>
  %d = mlc.mul %ss, %inv : tensor<1x2x3x3xf32>, tensor<f32>
  %t = mlc.tanh %d : tensor<1x2x3x3xf32>
  %cap = mlc.constant dense<4.0> : tensor<f32>
  %c = mlc.mul %cap, %t : tensor<f32>, tensor<1x2x3x3xf32>
  %p = mlc.softmax %c axis = 3 : tensor<1x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// c1 * tanh(s / c2) with c1 != c2 is no soft-capping: the chain stays.
// CHECK-LABEL: func.func @softcap_caps_differ
// CHECK-NOT: mlc.attention
// CHECK: mlc.tanh
// CHECK: mlc.softmax
func.func @softcap_caps_differ(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %kt = mlc.transpose %k, [0, 1, 3, 2] : tensor<1x2x3x4xf32>
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %c2 = mlc.constant dense<50.0> : tensor<f32>
  %d = mlc.div %s, %c2 : tensor<1x2x3x3xf32>, tensor<f32>
  %t = mlc.tanh %d : tensor<1x2x3x3xf32>
  %c1 = mlc.constant dense<30.0> : tensor<f32>
  %c = mlc.mul %t, %c1 : tensor<1x2x3x3xf32>, tensor<f32>
  %p = mlc.softmax %c axis = 3 : tensor<1x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// Capping after the mask (c tanh((s + m) / c)) is not the attention's
// softcap, which caps the scores before the mask: the chain stays.
// CHECK-LABEL: func.func @softcap_after_mask
// CHECK-NOT: mlc.attention
// CHECK: mlc.tanh
func.func @softcap_after_mask(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>, %mask: tensor<1x1x1x3xf32>) -> tensor<1x2x3x4xf32> {
  %kt = mlc.transpose %k, [0, 1, 3, 2] : tensor<1x2x3x4xf32>
  %s = mlc.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>
  %a = mlc.add %s, %mask : tensor<1x2x3x3xf32>, tensor<1x1x1x3xf32>
  %cap = mlc.constant dense<50.0> : tensor<f32>
  %d = mlc.div %a, %cap : tensor<1x2x3x3xf32>, tensor<f32>
  %t = mlc.tanh %d : tensor<1x2x3x3xf32>
  %c = mlc.mul %t, %cap : tensor<1x2x3x3xf32>, tensor<f32>
  %p = mlc.softmax %c axis = 3 : tensor<1x2x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// Multi-query attention as Falcon's export writes it: one K/V head that the
// products broadcast to the 4 query heads is grouped-query attention with
// one kv head (the kernels index it, nothing is repeated).
// CHECK-LABEL: func.func @multi_query_attention
// CHECK: %[[A:.*]] = mlc.attention %arg0, %arg1, %arg2 causal : tensor<2x4x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @multi_query_attention(%q: tensor<2x4x3x4xf32>, %k: tensor<2x1x3x4xf32>, %v: tensor<2x1x3x4xf32>) -> tensor<2x4x3x4xf32> {
  %kt = mlc.transpose %k, [0, 1, 3, 2] : tensor<2x1x3x4xf32>
  %s = mlc.matmul %q, %kt : tensor<2x4x3x4xf32>, tensor<2x1x4x3xf32>
  %c = mlc.constant dense<0.5> : tensor<f32>
  %ss = mlc.mul %s, %c : tensor<2x4x3x3xf32>, tensor<f32>
  %mask = mlc.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %m = mlc.add %ss, %mask : tensor<2x4x3x3xf32>, tensor<1x1x3x3xf32>
  %p = mlc.softmax %m axis = 3 : tensor<2x4x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<2x4x3x3xf32>, tensor<2x1x3x4xf32>
  return %o : tensor<2x4x3x4xf32>
}

// -----

// One K head but 4 V heads is no attention mlc's op holds: the chain stays.
// CHECK-LABEL: func.func @multi_query_key_only
// CHECK-NOT: mlc.attention
// CHECK: mlc.softmax
func.func @multi_query_key_only(%q: tensor<2x4x3x4xf32>, %k: tensor<2x1x3x4xf32>, %v: tensor<2x4x3x4xf32>) -> tensor<2x4x3x4xf32> {
  %kt = mlc.transpose %k, [0, 1, 3, 2] : tensor<2x1x3x4xf32>
  %s = mlc.matmul %q, %kt : tensor<2x4x3x4xf32>, tensor<2x1x4x3xf32>
  %c = mlc.constant dense<0.5> : tensor<f32>
  %ss = mlc.mul %s, %c : tensor<2x4x3x3xf32>, tensor<f32>
  %p = mlc.softmax %ss axis = 3 : tensor<2x4x3x3xf32>
  %o = mlc.matmul %p, %v : tensor<2x4x3x3xf32>, tensor<2x4x3x4xf32>
  return %o : tensor<2x4x3x4xf32>
}

// -----

// Falcon's fused QKV heads cut by three slices along the heads: one split
// (its gradient one concat, not three padded copies and their sum).
// CHECK-LABEL: func.func @slices_tile_heads
// CHECK-NEXT: %[[S:.*]]:3 = mlc.split %arg0 axis = 2 sizes = [4, 1, 1] : tensor<2x3x6x8xf32>
// CHECK-NOT: mlc.slice
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @slices_tile_heads(%x: tensor<2x3x6x8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x3x1x8xf32>, tensor<2x3x1x8xf32>) {
  %q = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 4, 8] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  %k = mlc.slice %x starts = [0, 0, -2, 0] ends = [2, 3, 5, 8] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  %v = mlc.slice %x starts = [0, 0, 5, 0] ends = [2, 3, 6, 8] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  return %q, %k, %v : tensor<2x3x4x8xf32>, tensor<2x3x1x8xf32>, tensor<2x3x1x8xf32>
}

// -----

// Phi3's fused QKV projection cut by three slices of its columns (the
// product's last dim): one split.
// CHECK-LABEL: func.func @slices_tile_projection
// CHECK: %[[P:.*]] = mlc.matmul
// CHECK-NEXT: %[[S:.*]]:3 = mlc.split %[[P]] axis = 2 sizes = [8, 4, 4] : tensor<2x3x16xf32>
// CHECK-NOT: mlc.slice
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @slices_tile_projection(%x: tensor<2x3x8xf32>, %w: tensor<16x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %p = mlc.matmul %x, %w transpose_rhs : tensor<2x3x8xf32>, tensor<16x8xf32>
  %q = mlc.slice %p starts = [0, 0, 0] ends = [2, 3, 8] steps = [1, 1, 1] : tensor<2x3x16xf32>
  %k = mlc.slice %p starts = [0, 0, 8] ends = [2, 3, 12] steps = [1, 1, 1] : tensor<2x3x16xf32>
  %v = mlc.slice %p starts = [0, 0, 12] ends = [2, 3, 16] steps = [1, 1, 1] : tensor<2x3x16xf32>
  return %q, %k, %v : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Slices that leave a gap, or that cut the last dim of what is not a
// product (rotate-half's halves, which the rotary patterns read), stay
// slices.
// CHECK-LABEL: func.func @slices_not_a_split
// CHECK-NOT: mlc.split
// CHECK-COUNT-4: mlc.slice
// CHECK-NOT: mlc.split
func.func @slices_not_a_split(%x: tensor<2x3x6x8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x3x1x8xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>) {
  %a = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 4, 8] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  %b = mlc.slice %x starts = [0, 0, 5, 0] ends = [2, 3, 6, 8] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  %lo = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 6, 4] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  %hi = mlc.slice %x starts = [0, 0, 0, 4] ends = [2, 3, 6, 8] steps = [1, 1, 1, 1] : tensor<2x3x6x8xf32>
  return %a, %b, %lo, %hi : tensor<2x3x4x8xf32>, tensor<2x3x1x8xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32>
}
