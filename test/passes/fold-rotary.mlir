// RUN: mlc-opt %s -split-input-file --mlc-fold-rotary | FileCheck %s

// The builtin Llama's layout: Q and K rotate as the projection's rows
// [B, S, heads, D] with [S, 1, D] tables, attention reads the head split's
// transposes (grouped: 4 query heads, 2 kv heads). The forward attention
// and its gradient read Q and K unrotated with the tables in their index
// space; the gradient's dQ and dK reach the rows without the transposed
// rotaries. No rotary is left.
// CHECK-LABEL: func.func @llama_rows
// CHECK-DAG:  %[[C:.*]] = mlc.reshape %arg3 : tensor<8x1x16xf32> -> tensor<1x1x8x16xf32>
// CHECK-DAG:  %[[S:.*]] = mlc.reshape %arg4 : tensor<8x1x16xf32> -> tensor<1x1x8x16xf32>
// CHECK-DAG:  %[[Q:.*]] = mlc.transpose %arg0, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
// CHECK-DAG:  %[[K:.*]] = mlc.transpose %arg1, [0, 2, 1, 3] : tensor<2x8x2x16xf32>
// CHECK:      %[[O:.*]] = mlc.attention %[[Q]], %[[K]], %{{.*}} rotary %[[C]], %[[S]] causal
// CHECK:      %[[GQ:[^,]*]], %[[GK:[^,]*]], %{{.*}} = mlc.attention_grad %[[O]], %[[Q]], %[[K]], %{{.*}} rotary %[[C]], %[[S]] causal
// CHECK-DAG:  %[[DQ:.*]] = mlc.transpose %[[GQ]], [0, 2, 1, 3] : tensor<2x4x8x16xf32>
// CHECK-DAG:  %[[DK:.*]] = mlc.transpose %[[GK]], [0, 2, 1, 3] : tensor<2x2x8x16xf32>
// CHECK-NOT:  mlc.rotary
// CHECK:      return %[[O]], %[[DQ]], %[[DK]]
func.func @llama_rows(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x2x8x16xf32>,
                      %cos: tensor<8x1x16xf32>, %sin: tensor<8x1x16xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>) {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x1x16xf32>
  %qh = mlc.transpose %qr, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x8x2x16xf32>, tensor<8x1x16xf32>
  %kh = mlc.transpose %kr, [0, 2, 1, 3] : tensor<2x8x2x16xf32>
  %o = mlc.attention %qh, %kh, %v causal : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
  %g:3 = mlc.attention_grad %o, %qh, %kh, %v causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
  %dqt = mlc.transpose %g#0, [0, 2, 1, 3] : tensor<2x4x8x16xf32>
  %dq = mlc.rotary %dqt, %cos, %sin transpose : tensor<2x8x4x16xf32>, tensor<8x1x16xf32>
  %dkt = mlc.transpose %g#1, [0, 2, 1, 3] : tensor<2x2x8x16xf32>
  %dk = mlc.rotary %dkt, %cos, %sin transpose : tensor<2x8x2x16xf32>, tensor<8x1x16xf32>
  return %o, %dq, %dk : tensor<2x4x8x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>
}

// -----

// ONNX's layout [B, H, S, D] with per-sequence [B, 1, S, R] tables,
// interleaved and partial (R = 8 of D = 16): the tables are already in the
// attention's index space.
// CHECK-LABEL: func.func @heads_partial_interleaved
// CHECK-NOT:  mlc.rotary
// CHECK:      mlc.attention %arg0, %arg1, %arg2 rotary %arg3, %arg4 interleaved : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>
func.func @heads_partial_interleaved(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
                                     %cos: tensor<2x1x8x8xf32>, %sin: tensor<2x1x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %qr = mlc.rotary %q, %cos, %sin interleaved : tensor<2x4x8x16xf32>, tensor<2x1x8x8xf32>
  %kr = mlc.rotary %k, %cos, %sin interleaved : tensor<2x4x8x16xf32>, tensor<2x1x8x8xf32>
  %o = mlc.attention %qr, %kr, %v : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// [B, H, S, D] with one [S, D] table row per position (an ONNX Llama's
// constant caches): the tables become [1, 1, S, D], a view.
// CHECK-LABEL: func.func @heads_per_position
// CHECK-DAG:  %[[C:.*]] = mlc.reshape %arg3 : tensor<8x16xf32> -> tensor<1x1x8x16xf32>
// CHECK-DAG:  %[[S:.*]] = mlc.reshape %arg4 : tensor<8x16xf32> -> tensor<1x1x8x16xf32>
// CHECK:      mlc.attention %arg0, %arg1, %arg2 rotary %[[C]], %[[S]] causal
// CHECK-NOT:  mlc.rotary
func.func @heads_per_position(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>,
                              %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<2x4x8x16xf32> {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x2x8x16xf32>, tensor<8x16xf32>
  %o = mlc.attention %qr, %kr, %v causal : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Packed documents: per-token [B, S, 1, D] tables, the head split a reshape
// to [B * S, heads, D] for variable-length attention: the tables become
// [T, 1, D], a view.
// CHECK-LABEL: func.func @packed
// CHECK:      %[[C:.*]] = mlc.reshape %arg2 : tensor<2x8x1x16xf32> -> tensor<16x1x16xf32>
// CHECK:      %[[S:.*]] = mlc.reshape %arg3 : tensor<2x8x1x16xf32> -> tensor<16x1x16xf32>
// CHECK:      %[[Q:.*]] = mlc.reshape %arg0 : tensor<2x8x4x16xf32> -> tensor<16x4x16xf32>
// CHECK:      mlc.attention %[[Q]], %{{.*}}, %{{.*}} cu_seqlens %arg4 rotary %[[C]], %[[S]] causal
// CHECK-NOT:  mlc.rotary
func.func @packed(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %cos: tensor<2x8x1x16xf32>,
                  %sin: tensor<2x8x1x16xf32>, %cu: tensor<5xi32>, %v: tensor<16x4x16xf32>) -> tensor<16x4x16xf32> {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x8x4x16xf32>, tensor<2x8x1x16xf32>
  %qh = mlc.reshape %qr : tensor<2x8x4x16xf32> -> tensor<16x4x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x8x4x16xf32>, tensor<2x8x1x16xf32>
  %kh = mlc.reshape %kr : tensor<2x8x4x16xf32> -> tensor<16x4x16xf32>
  %o = mlc.attention %qh, %kh, %v cu_seqlens %cu causal : tensor<16x4x16xf32>, tensor<16x4x16xf32>, tensor<16x4x16xf32>, tensor<5xi32>
  return %o : tensor<16x4x16xf32>
}

// -----

// Not folded: the rotated Q has another reader (it is stored anyway).
// CHECK-LABEL: func.func @other_use
// CHECK-COUNT-2: mlc.rotary
// CHECK:      mlc.attention %{{.*}}, %{{.*}}, %arg2 :
func.func @other_use(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
                     %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %o = mlc.attention %qr, %kr, %v : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %o, %qr : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}

// -----

// Not folded: Q and K rotate by different tables.
// CHECK-LABEL: func.func @different_tables
// CHECK-COUNT-2: mlc.rotary
// CHECK:      mlc.attention %{{.*}}, %{{.*}}, %arg2 :
func.func @different_tables(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
                            %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>, %sin2: tensor<8x16xf32>) -> tensor<2x4x8x16xf32> {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %kr = mlc.rotary %k, %cos, %sin2 : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %o = mlc.attention %qr, %kr, %v : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Not folded: a rotary on V (Q and K plain); and one on Q alone.
// CHECK-LABEL: func.func @rotary_on_v
// CHECK-COUNT-2: mlc.rotary
// CHECK-NOT:  rotary %
func.func @rotary_on_v(%q: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
                       %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %vr = mlc.rotary %v, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %o = mlc.attention %q, %q, %vr : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x4x8x16xf32>, tensor<8x16xf32>
  %p = mlc.attention %qr, %v, %v : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %o, %p : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}

// -----

// Not folded: tables that vary per head ([S, H, D] over [B, S, H, D], and
// [H, S, D] over [B, H, S, D]).
// CHECK-LABEL: func.func @per_head_tables
// CHECK-COUNT-4: mlc.rotary
// CHECK-NOT:  rotary %
func.func @per_head_tables(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x4x8x16xf32>,
                           %cos: tensor<8x4x16xf32>, %sin: tensor<8x4x16xf32>,
                           %hcos: tensor<4x8x16xf32>, %hsin: tensor<4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x4x16xf32>
  %qh = mlc.transpose %qr, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x4x16xf32>
  %kh = mlc.transpose %kr, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %o = mlc.attention %qh, %kh, %v : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %q2 = mlc.rotary %v, %hcos, %hsin : tensor<2x4x8x16xf32>, tensor<4x8x16xf32>
  %k2 = mlc.rotary %o, %hcos, %hsin : tensor<2x4x8x16xf32>, tensor<4x8x16xf32>
  %p = mlc.attention %q2, %k2, %v : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  return %o, %p : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}

// -----

// Not folded: [S, 1, D] tables broadcast over the batch, then the packed
// reshape merges batch and sequence: no strided form over the tokens.
// CHECK-LABEL: func.func @tables_without_strides
// CHECK-COUNT-2: mlc.rotary
func.func @tables_without_strides(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<16x4x16xf32>,
                                  %cos: tensor<8x1x16xf32>, %sin: tensor<8x1x16xf32>,
                                  %cu: tensor<5xi32>) -> tensor<16x4x16xf32> {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x1x16xf32>
  %qh = mlc.reshape %qr : tensor<2x8x4x16xf32> -> tensor<16x4x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x1x16xf32>
  %kh = mlc.reshape %kr : tensor<2x8x4x16xf32> -> tensor<16x4x16xf32>
  %o = mlc.attention %qh, %kh, %v cu_seqlens %cu causal : tensor<16x4x16xf32>, tensor<16x4x16xf32>, tensor<16x4x16xf32>, tensor<5xi32>
  return %o : tensor<16x4x16xf32>
}

// -----

// Not folded: two attention ops read the same rotated Q and K through
// different views of [B, S, H, D] (B = H = 2, per-token [B, S, 1, D]
// tables): [B, H, S, D] maps the tables to [B, 1, S, D], [H, B, S, D] to
// [1, B, S, D]. One pair of tables cannot serve both (the second would
// rotate head h by batch h's positions).
// CHECK-LABEL: func.func @readers_map_tables_differently
// CHECK-COUNT-2: mlc.rotary
// CHECK-NOT:  rotary %
func.func @readers_map_tables_differently(%q: tensor<2x8x2x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x2x8x16xf32>,
                                          %cos: tensor<2x8x1x16xf32>, %sin: tensor<2x8x1x16xf32>) -> (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) {
  %qr = mlc.rotary %q, %cos, %sin : tensor<2x8x2x16xf32>, tensor<2x8x1x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<2x8x2x16xf32>, tensor<2x8x1x16xf32>
  %qh = mlc.transpose %qr, [0, 2, 1, 3] : tensor<2x8x2x16xf32>
  %kh = mlc.transpose %kr, [0, 2, 1, 3] : tensor<2x8x2x16xf32>
  %o = mlc.attention %qh, %kh, %v causal : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
  %qb = mlc.transpose %qr, [2, 0, 1, 3] : tensor<2x8x2x16xf32>
  %kb = mlc.transpose %kr, [2, 0, 1, 3] : tensor<2x8x2x16xf32>
  %p = mlc.attention %qb, %kb, %v causal : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
  return %o, %p : tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
}

// -----

// Not folded: unpadded variable-length attention, its token dimension
// dynamic (the tables' rows are not known to match Q's and K's).
// CHECK-LABEL: func.func @unpadded_tokens
// CHECK-COUNT-2: mlc.rotary
// CHECK-NOT:  rotary %
func.func @unpadded_tokens(%q: tensor<?x4x16xf32>, %k: tensor<?x4x16xf32>, %v: tensor<?x4x16xf32>,
                           %cos: tensor<?x1x16xf32>, %sin: tensor<?x1x16xf32>, %cu: tensor<5xi32>) -> tensor<?x4x16xf32> {
  %qr = mlc.rotary %q, %cos, %sin : tensor<?x4x16xf32>, tensor<?x1x16xf32>
  %kr = mlc.rotary %k, %cos, %sin : tensor<?x4x16xf32>, tensor<?x1x16xf32>
  %o = mlc.attention %qr, %kr, %v cu_seqlens %cu causal : tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<5xi32>
  return %o : tensor<?x4x16xf32>
}
