// RUN: mlc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(mlc-recognize))' | FileCheck %s

// The Llama family as the dynamo exporter writes it at opset 20 and mlc's
// ONNX import reads it: rotate-half RoPE, SwiGLU, grouped-query K/V.

// HF's apply_rotary_pos_emb, x * cos + rotate_half(x) * sin, with constant
// [S, D] tables: one mlc.rotary whose sin table carries rotate_half's sign
// (the first half negated: 0.1, 0.2 -> -0.1, -0.2).
// CHECK-LABEL: func.func @rotate_half
// CHECK-DAG: %[[C:.*]] = mlc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]]> : tensor<1x4xf32>
// CHECK-DAG: %[[S:.*]] = mlc.constant dense<{{\[\[}}-1.000000e-01, -2.000000e-01, 3.000000e-01, 4.000000e-01]]> : tensor<1x4xf32>
// CHECK: %[[R:.*]] = mlc.rotary %arg0, %[[C]], %[[S]] : tensor<2x3x1x4xf32>, tensor<1x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @rotate_half(%x: tensor<2x3x1x4xf32>) -> tensor<2x3x1x4xf32> {
  %cos = mlc.constant dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %sin = mlc.constant dense<[[0.1, 0.2, 0.3, 0.4]]> : tensor<1x4xf32>
  %xc = mlc.mul %x, %cos : tensor<2x3x1x4xf32>, tensor<1x4xf32>
  %x1 = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 1, 2] steps = [1, 1, 1, 1] : tensor<2x3x1x4xf32>
  %x2 = mlc.slice %x starts = [0, 0, 0, 2] ends = [2, 3, 1, 4] steps = [1, 1, 1, 1] : tensor<2x3x1x4xf32>
  %n = mlc.neg %x2 : tensor<2x3x1x2xf32>
  %h = mlc.concat(%n, %x1) axis = 3 : tensor<2x3x1x2xf32>, tensor<2x3x1x2xf32>
  %hs = mlc.mul %sin, %h : tensor<1x4xf32>, tensor<2x3x1x4xf32>
  %y = mlc.add %hs, %xc : tensor<2x3x1x4xf32>, tensor<2x3x1x4xf32>
  return %y : tensor<2x3x1x4xf32>
}

// -----

// On the head split of a projection's rows [B, S, H, D] the rotation is
// done on the rows (tables [S, 1, D]) and transposed after, as the builtin
// Llama builds it.
// CHECK-LABEL: func.func @rotate_half_rows
// CHECK: %[[R:.*]] = mlc.rotary %arg0, %{{.*}}, %{{.*}} : tensor<2x3x4x4xf32>, tensor<3x1x4xf32>
// CHECK-NEXT: %[[T:.*]] = mlc.transpose %[[R]], [0, 2, 1, 3] : tensor<2x3x4x4xf32>
// CHECK-NEXT: return %[[T]]
func.func @rotate_half_rows(%p: tensor<2x3x4x4xf32>) -> tensor<2x4x3x4xf32> {
  %x = mlc.transpose %p, [0, 2, 1, 3] : tensor<2x3x4x4xf32>
  %cos = mlc.constant dense<0.5> : tensor<1x1x3x4xf32>
  %sin = mlc.constant dense<0.25> : tensor<1x1x3x4xf32>
  %xc = mlc.mul %x, %cos : tensor<2x4x3x4xf32>, tensor<1x1x3x4xf32>
  %x1 = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 4, 3, 2] steps = [1, 1, 1, 1] : tensor<2x4x3x4xf32>
  %x2 = mlc.slice %x starts = [0, 0, 0, 2] ends = [2, 4, 3, 4] steps = [1, 1, 1, 1] : tensor<2x4x3x4xf32>
  %n = mlc.neg %x2 : tensor<2x4x3x2xf32>
  %h = mlc.concat(%n, %x1) axis = 3 : tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>
  %hs = mlc.mul %h, %sin : tensor<2x4x3x4xf32>, tensor<1x1x3x4xf32>
  %y = mlc.add %xc, %hs : tensor<2x4x3x4xf32>, tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}

// -----

// A chain of transposes that composes to the head split (Falcon's K: the
// heads moved first, one taken, moved back) is the head split of the rows.
// CHECK-LABEL: func.func @rotate_half_rows_through_transposes
// CHECK: %[[R:.*]] = mlc.rotary %arg0, %{{.*}}, %{{.*}} : tensor<2x3x1x4xf32>, tensor<3x1x4xf32>
// CHECK-NEXT: %[[T:.*]] = mlc.transpose %[[R]], [0, 2, 1, 3] : tensor<2x3x1x4xf32>
// CHECK-NEXT: return %[[T]]
func.func @rotate_half_rows_through_transposes(%p: tensor<2x3x1x4xf32>) -> tensor<2x1x3x4xf32> {
  %a = mlc.transpose %p, [2, 0, 1, 3] : tensor<2x3x1x4xf32>
  %x = mlc.transpose %a, [1, 0, 2, 3] : tensor<1x2x3x4xf32>
  %cos = mlc.constant dense<0.5> : tensor<1x1x3x4xf32>
  %sin = mlc.constant dense<0.25> : tensor<1x1x3x4xf32>
  %xc = mlc.mul %x, %cos : tensor<2x1x3x4xf32>, tensor<1x1x3x4xf32>
  %x1 = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 1, 3, 2] steps = [1, 1, 1, 1] : tensor<2x1x3x4xf32>
  %x2 = mlc.slice %x starts = [0, 0, 0, 2] ends = [2, 1, 3, 4] steps = [1, 1, 1, 1] : tensor<2x1x3x4xf32>
  %n = mlc.neg %x2 : tensor<2x1x3x2xf32>
  %h = mlc.concat(%n, %x1) axis = 3 : tensor<2x1x3x2xf32>, tensor<2x1x3x2xf32>
  %hs = mlc.mul %h, %sin : tensor<2x1x3x4xf32>, tensor<1x1x3x4xf32>
  %y = mlc.add %xc, %hs : tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>
  return %y : tensor<2x1x3x4xf32>
}

// -----

// Partial rotary (partial_rotary_factor 1/2): the rotation of x[..., :4]
// concatenated with x[..., 4:] is one mlc.rotary of x with 4-wide tables.
// CHECK-LABEL: func.func @partial_rotary
// CHECK: %[[R:.*]] = mlc.rotary %arg0, %{{.*}}, %{{.*}} : tensor<2x3x5x8xf32>, tensor<5x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @partial_rotary(%q: tensor<2x3x5x8xf32>) -> tensor<2x3x5x8xf32> {
  %x = mlc.slice %q starts = [0, 0, 0, 0] ends = [2, 3, 5, 4] steps = [1, 1, 1, 1] : tensor<2x3x5x8xf32>
  %pass = mlc.slice %q starts = [0, 0, 0, 4] ends = [2, 3, 5, 8] steps = [1, 1, 1, 1] : tensor<2x3x5x8xf32>
  %cos = mlc.constant dense<0.5> : tensor<5x4xf32>
  %sin = mlc.constant dense<0.25> : tensor<5x4xf32>
  %xc = mlc.mul %x, %cos : tensor<2x3x5x4xf32>, tensor<5x4xf32>
  %x1 = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 5, 2] steps = [1, 1, 1, 1] : tensor<2x3x5x4xf32>
  %x2 = mlc.slice %x starts = [0, 0, 0, 2] ends = [2, 3, 5, 4] steps = [1, 1, 1, 1] : tensor<2x3x5x4xf32>
  %n = mlc.neg %x2 : tensor<2x3x5x2xf32>
  %h = mlc.concat(%n, %x1) axis = 3 : tensor<2x3x5x2xf32>, tensor<2x3x5x2xf32>
  %hs = mlc.mul %h, %sin : tensor<2x3x5x4xf32>, tensor<5x4xf32>
  %r = mlc.add %xc, %hs : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>
  %y = mlc.concat(%r, %pass) axis = 3 : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>
  return %y : tensor<2x3x5x8xf32>
}

// -----

// Not a rotation: the negated half is the first one (concat(-x1, x2) is no
// rotate_half), and tables computed from the inputs are no constants.
// CHECK-LABEL: func.func @not_rotate_half
// CHECK-NOT: mlc.rotary
// CHECK: mlc.concat
// CHECK-LABEL: func.func @not_rotate_half_runtime_tables
// CHECK-NOT: mlc.rotary
// CHECK: mlc.concat
func.func @not_rotate_half(%x: tensor<2x3x1x4xf32>) -> tensor<2x3x1x4xf32> {
  %cos = mlc.constant dense<0.5> : tensor<1x4xf32>
  %sin = mlc.constant dense<0.25> : tensor<1x4xf32>
  %xc = mlc.mul %x, %cos : tensor<2x3x1x4xf32>, tensor<1x4xf32>
  %x1 = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 1, 2] steps = [1, 1, 1, 1] : tensor<2x3x1x4xf32>
  %x2 = mlc.slice %x starts = [0, 0, 0, 2] ends = [2, 3, 1, 4] steps = [1, 1, 1, 1] : tensor<2x3x1x4xf32>
  %n = mlc.neg %x1 : tensor<2x3x1x2xf32>
  %h = mlc.concat(%n, %x2) axis = 3 : tensor<2x3x1x2xf32>, tensor<2x3x1x2xf32>
  %hs = mlc.mul %h, %sin : tensor<2x3x1x4xf32>, tensor<1x4xf32>
  %y = mlc.add %xc, %hs : tensor<2x3x1x4xf32>, tensor<2x3x1x4xf32>
  return %y : tensor<2x3x1x4xf32>
}
func.func @not_rotate_half_runtime_tables(%x: tensor<2x3x1x4xf32>, %cos: tensor<1x4xf32>) -> tensor<2x3x1x4xf32> {
  %sin = mlc.constant dense<0.25> : tensor<1x4xf32>
  %xc = mlc.mul %x, %cos : tensor<2x3x1x4xf32>, tensor<1x4xf32>
  %x1 = mlc.slice %x starts = [0, 0, 0, 0] ends = [2, 3, 1, 2] steps = [1, 1, 1, 1] : tensor<2x3x1x4xf32>
  %x2 = mlc.slice %x starts = [0, 0, 0, 2] ends = [2, 3, 1, 4] steps = [1, 1, 1, 1] : tensor<2x3x1x4xf32>
  %n = mlc.neg %x2 : tensor<2x3x1x2xf32>
  %h = mlc.concat(%n, %x1) axis = 3 : tensor<2x3x1x2xf32>, tensor<2x3x1x2xf32>
  %hs = mlc.mul %h, %sin : tensor<2x3x1x4xf32>, tensor<1x4xf32>
  %y = mlc.add %xc, %hs : tensor<2x3x1x4xf32>, tensor<2x3x1x4xf32>
  return %y : tensor<2x3x1x4xf32>
}

// -----

// The ONNX import's SiLU, gate * (1 + tanh(gate / 2)) / 2, times up: one
// mlc.swiglu (either operand order), and mlc.silu(gate) * up as well.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT: %[[G:.*]] = mlc.swiglu %arg0, %arg1 : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @swiglu(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = mlc.constant dense<5.000000e-01> : tensor<f32>
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %a = mlc.mul %gate, %half : tensor<2x8xf32>, tensor<f32>
  %t = mlc.tanh %a : tensor<2x8xf32>
  %p = mlc.add %t, %one : tensor<2x8xf32>, tensor<f32>
  %s = mlc.mul %p, %half : tensor<2x8xf32>, tensor<f32>
  %silu = mlc.mul %gate, %s : tensor<2x8xf32>, tensor<2x8xf32>
  %y = mlc.mul %up, %silu : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @swiglu_of_silu
// CHECK-NEXT: %[[G:.*]] = mlc.swiglu %arg0, %arg1 : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @swiglu_of_silu(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %silu = mlc.silu %gate : tensor<2x8xf32>
  %y = mlc.mul %silu, %up : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not a SwiGLU: tanh(gate) (no sigmoid), an up that broadcasts, a SiLU that
// is also returned (it would be computed twice).
// CHECK-LABEL: func.func @not_swiglu
// CHECK-NOT: mlc.swiglu
// CHECK: return
// CHECK-LABEL: func.func @not_swiglu_broadcast
// CHECK-NOT: mlc.swiglu
// CHECK: return
// CHECK-LABEL: func.func @not_swiglu_shared
// CHECK-NOT: mlc.swiglu
// CHECK: return
func.func @not_swiglu(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = mlc.constant dense<5.000000e-01> : tensor<f32>
  %one = mlc.constant dense<1.000000e+00> : tensor<f32>
  %t = mlc.tanh %gate : tensor<2x8xf32>
  %p = mlc.add %t, %one : tensor<2x8xf32>, tensor<f32>
  %s = mlc.mul %p, %half : tensor<2x8xf32>, tensor<f32>
  %silu = mlc.mul %gate, %s : tensor<2x8xf32>, tensor<2x8xf32>
  %y = mlc.mul %silu, %up : tensor<2x8xf32>, tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
func.func @not_swiglu_broadcast(%gate: tensor<2x8xf32>, %up: tensor<8xf32>) -> tensor<2x8xf32> {
  %silu = mlc.silu %gate : tensor<2x8xf32>
  %y = mlc.mul %silu, %up : tensor<2x8xf32>, tensor<8xf32>
  return %y : tensor<2x8xf32>
}
func.func @not_swiglu_shared(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %silu = mlc.silu %gate : tensor<2x8xf32>
  %y = mlc.mul %silu, %up : tensor<2x8xf32>, tensor<2x8xf32>
  return %y, %silu : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// repeat_kv (K/V [B, 2, S, D] unsqueezed, expanded to 2 copies, merged to
// the 4 query heads) before the attention: the attention reads the 2 kv
// heads themselves.
// CHECK-LABEL: func.func @grouped_kv
// CHECK-NOT: mlc.broadcast
// CHECK: %[[A:.*]] = mlc.attention %arg0, %arg1, %arg2 causal : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
// CHECK-NEXT: return %[[A]]
func.func @grouped_kv(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %k1 = mlc.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %k2 = mlc.broadcast %k1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %k3 = mlc.reshape %k2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %v1 = mlc.reshape %v : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %v2 = mlc.broadcast %v1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %v3 = mlc.reshape %v2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %a = mlc.attention %q, %k3, %v3 causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %a : tensor<2x4x8x16xf32>
}

// -----

// Not grouped: the expanded K is also returned (it is needed anyway), and
// heads repeated the other way round ([B, n, Hkv, S, D]: query head h would
// read kv head h % Hkv, not h / n).
// CHECK-LABEL: func.func @not_grouped_kv_used
// CHECK: mlc.attention {{.*}} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
// CHECK-LABEL: func.func @not_grouped_kv_tiled
// CHECK: mlc.attention {{.*}} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
func.func @not_grouped_kv_used(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %k1 = mlc.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %k2 = mlc.broadcast %k1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %k3 = mlc.reshape %k2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %v1 = mlc.reshape %v : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %v2 = mlc.broadcast %v1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %v3 = mlc.reshape %v2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %a = mlc.attention %q, %k3, %v3 causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %a, %k3 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}
func.func @not_grouped_kv_tiled(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %k1 = mlc.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x1x2x8x16xf32>
  %k2 = mlc.broadcast %k1 : tensor<2x1x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %k3 = mlc.reshape %k2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %v1 = mlc.reshape %v : tensor<2x2x8x16xf32> -> tensor<2x1x2x8x16xf32>
  %v2 = mlc.broadcast %v1 : tensor<2x1x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %v3 = mlc.reshape %v2 : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %a = mlc.attention %q, %k3, %v3 causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %a : tensor<2x4x8x16xf32>
}
