// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// One case per verifier rule of the mlc dialect.

func.func @iota_dim(%x: tensor<4xf32>) {
  // expected-error @+1 {{'mlc.iota' op dim 1 out of range for rank 1}}
  %0 = mlc.iota dim = 1 : tensor<4xi64>
  return
}

// -----

func.func @rotary_table_head_dim() {
  // expected-error @+1 {{'mlc.rotary_table' op head_dim 6 must be twice the 2 inv_freq values}}
  %0 = mlc.rotary_table {inv_freq = array<f64: 1.0, 0.1>, sine = false} : tensor<8x1x6xf32>
  return
}

// -----

func.func @rotary_table_middle_dims() {
  // expected-error @+1 {{'mlc.rotary_table' op result's middle dims must be 1, got 'tensor<8x2x4xf32>'}}
  %0 = mlc.rotary_table {inv_freq = array<f64: 1.0, 0.1>, sine = true} : tensor<8x2x4xf32>
  return
}

// -----

func.func @rotary_table_rank() {
  // expected-error @+1 {{'mlc.rotary_table' op result must be a static [positions, 1..., head_dim] tensor, got 'tensor<4xf32>'}}
  %0 = mlc.rotary_table {inv_freq = array<f64: 1.0, 0.1>, sine = true} : tensor<4xf32>
  return
}

// -----

func.func @embedding_table_rank(%w: tensor<100xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{weight must be a [rows, dim] table, got [100]}}
  %0 = mlc.embedding %w, %i : tensor<100xf32>, tensor<4xi64>
  return
}

// -----

func.func @embedding_padding_row(%w: tensor<100x4xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{padding_idx 100 is not a row of the 100-row table}}
  %0 = mlc.embedding %w, %i {padding_idx = 100 : i64} : tensor<100x4xf32>, tensor<4xi64>
  return
}

// -----

func.func @embedding_negative_padding(%w: tensor<100x4xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{padding_idx -1 is not a row of the 100-row table}}
  %0 = mlc.embedding %w, %i {padding_idx = -1 : i64} : tensor<100x4xf32>, tensor<4xi64>
  return
}

// -----

func.func @embedding_grad_padding_row(%g: tensor<4x4xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{padding_idx 100 is not a row of the 100-row table}}
  %0 = mlc.embedding_grad %g, %i {padding_idx = 100 : i64} : tensor<4x4xf32>, tensor<4xi64> -> tensor<100x4xf32>
  return
}

// -----

func.func @embedding_float_indices(%w: tensor<100x4xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = "mlc.embedding"(%w, %i) : (tensor<100x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{operands must have rank >= 2, got [4] and [4, 5]}}
  %0 = mlc.matmul %a, %b : tensor<4xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_element_types(%a: tensor<3x4xf32>, %b: tensor<4x5xf16>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'f16'}}
  %0 = mlc.matmul %a, %b : tensor<3x4xf32>, tensor<4x5xf16>
  return
}

// -----

func.func @matmul_f32_result(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{f32_result takes bf16 operands, got 'f32'}}
  %0 = mlc.matmul %a, %b f32_result : tensor<3x4xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) {
  // expected-error @+1 {{contraction dimensions differ: 4 vs 5}}
  %0 = mlc.matmul %a, %b : tensor<3x4xf32>, tensor<5x6xf32>
  return
}

// -----

// The transpose flags decide which dimension contracts.
func.func @matmul_contraction_transposed(%a: tensor<3x4xf32>, %b: tensor<4x6xf32>) {
  // expected-error @+1 {{contraction dimensions differ: 4 vs 6}}
  %0 = mlc.matmul %a, %b transpose_rhs : tensor<3x4xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{batch dimensions of [2, 3, 4] and [3, 4, 5] do not broadcast}}
  %0 = mlc.matmul %a, %b : tensor<2x3x4xf32>, tensor<3x4x5xf32>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<3x4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{shapes [3, 4] and [5] do not broadcast}}
  %0 = mlc.add %a, %b : tensor<3x4xf32>, tensor<5xf32>
  return
}

// -----

func.func @binary_element_types(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'f64'}}
  %0 = mlc.mul %a, %b : tensor<4xf32>, tensor<4xf64>
  return
}

// -----

func.func @binary_result_type(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{'mlc.sub' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<5xf32>'}}
  // expected-error @+1 {{'mlc.sub' op failed to infer returned types}}
  %0 = "mlc.sub"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @pow_needs_floats(%a: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = "mlc.pow"(%a, %a) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @unary_needs_floats(%a: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = mlc.exp %a : tensor<4xi64>
  return
}

// -----

func.func @silu_needs_floats(%a: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = mlc.silu %a : tensor<4xi64>
  return
}

// -----

func.func @silu_same_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "mlc.silu"(%a) : (tensor<4xf32>) -> tensor<4xf64>
  return
}

// -----

func.func @rotary_odd_head_dim(%x: tensor<2x8x15xf32>, %t: tensor<8x15xf32>) {
  // expected-error @+1 {{head dim of [2, 8, 15] must be static and even (pairs rotate)}}
  %0 = mlc.rotary %x, %t, %t : tensor<2x8x15xf32>, tensor<8x15xf32>
  return
}

// -----

func.func @rotary_table_head_dim(%x: tensor<2x8x16xf32>, %t: tensor<8x18xf32>) {
  // expected-error @+1 {{tables [8, 18] must end in an even rotary dim of at most the head dim 16 of the input [2, 8, 16]}}
  %0 = mlc.rotary %x, %t, %t : tensor<2x8x16xf32>, tensor<8x18xf32>
  return
}

// -----

func.func @rotary_table_element(%x: tensor<2x8x16xbf16>, %t: tensor<8x16xf32>) {
  // expected-error @+1 {{tables of 'f32' rotate an input of 'bf16'}}
  %0 = mlc.rotary %x, %t, %t : tensor<2x8x16xbf16>, tensor<8x16xf32>
  return
}

// -----

func.func @rotary_table_positions(%x: tensor<2x8x16xf32>, %t: tensor<4x16xf32>) {
  // expected-error @+1 {{tables [4, 16] do not broadcast to the input [2, 8, 16]}}
  %0 = mlc.rotary %x, %t, %t : tensor<2x8x16xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @swiglu_same_type(%a: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "mlc.swiglu"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_broadcast(%a: tensor<3xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{shapes [3] and [4] do not broadcast}}
  %0 = mlc.compare eq %a, %b : tensor<3xi64>, tensor<4xi64>
  return
}

// -----

func.func @select_condition(%c: tensor<3xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{condition [3] does not broadcast with values [4]}}
  %0 = mlc.select %c, %a, %a : tensor<3xi1>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @select_values(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi64>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'i64'}}
  %0 = mlc.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xi64>
  return
}

// -----

func.func @cast_shape(%a: tensor<4xi64>) {
  // expected-error @+1 {{'mlc.cast' op changes the shape from [4] to [5]; cast only converts the element type}}
  %0 = mlc.cast %a : tensor<4xi64> -> tensor<5xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{'mlc.reshape' op changes the element count from 24 to 25}}
  %0 = mlc.reshape %a : tensor<4x6xf32> -> tensor<5x5xf32>
  return
}

// -----

func.func @reshape_element_type(%a: tensor<4x6xf32>) {
  // expected-error @+1 {{'mlc.reshape' op changes the element type; use mlc.cast}}
  %0 = mlc.reshape %a : tensor<4x6xf32> -> tensor<24xf64>
  return
}

// -----

func.func @reshape_two_unknowns(%a: tensor<?x6xf32>) {
  // expected-error @+1 {{'mlc.reshape' op result [2, ?, ?] has more than one dynamic dimension that the element count must determine}}
  %0 = mlc.reshape %a : tensor<?x6xf32> -> tensor<2x?x?xf32>
  return
}

// -----

func.func @reshape_dynamic_to_static(%a: tensor<4x?xf32>) {
  // expected-error @+1 {{'mlc.reshape' op maps a dynamic input dimension of [4, ?] to the static shape [4, 6]}}
  %0 = mlc.reshape %a : tensor<4x?xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @transpose_length(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation has 3 entries for a rank-2 tensor}}
  %0 = mlc.transpose %a, [0, 1, 2] : tensor<2x3xf32>
  return
}

// -----

func.func @transpose_not_permutation(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation is not a permutation of 0..1}}
  %0 = mlc.transpose %a, [1, 1] : tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_rank(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'mlc.broadcast' op cannot broadcast rank 2 to the lower rank 1}}
  %0 = mlc.broadcast %a : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @broadcast_dimension(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'mlc.broadcast' op dimension 0 of [2, 3] does not broadcast to [4, 4, 3]}}
  %0 = mlc.broadcast %a : tensor<2x3xf32> -> tensor<4x4x3xf32>
  return
}

// -----

func.func @broadcast_element_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{'mlc.broadcast' op changes the element type; use mlc.cast}}
  %0 = mlc.broadcast %a : tensor<3xf32> -> tensor<2x3xf64>
  return
}

// -----

func.func @slice_entries(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{starts, ends and steps need one entry per dimension of [2, 3]}}
  %0 = mlc.slice %a starts = [0] ends = [1] steps = [1] : tensor<2x3xf32>
  return
}

// -----

func.func @slice_step(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{step 0 in dimension 1 must be >= 1}}
  %0 = mlc.slice %a starts = [0, 0] ends = [2, 3] steps = [1, 0] : tensor<2x3xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{'mlc.concat' op failed to infer returned types}}
  %0 = "mlc.concat"() <{axis = 0 : i64}> : () -> tensor<1xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = mlc.concat(%a, %a) axis = 2 : tensor<2x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{inputs differ in rank: [2, 3] vs [3]}}
  %0 = mlc.concat(%a, %b) axis = 0 : tensor<2x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf64>) {
  // expected-error @+1 {{inputs differ in element type}}
  %0 = mlc.concat(%a, %b) axis = 0 : tensor<2x3xf32>, tensor<2x3xf64>
  return
}

// -----

func.func @concat_other_dimension(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{inputs differ in dimension 1 outside the concatenation axis}}
  %0 = mlc.concat(%a, %b) axis = 0 : tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @split_axis(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{axis -3 out of range for rank 2}}
  %0:2 = mlc.split %a axis = -3 sizes = [3, 3] : tensor<2x6xf32>
  return
}

// -----

func.func @split_positive(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{split sizes must be positive, got 0}}
  %0:2 = mlc.split %a axis = 1 sizes = [6, 0] : tensor<2x6xf32>
  return
}

// -----

func.func @split_sum(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{split sizes sum to 5 but dimension 1 has 6}}
  %0:2 = mlc.split %a axis = 1 sizes = [3, 2] : tensor<2x6xf32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = mlc.reduce_sum %a axes = [2] : tensor<2x6xf32>
  return
}

// -----

func.func @reduce_duplicate(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{axis -1 appears twice}}
  %0 = mlc.reduce_mean %a axes = [1, -1] : tensor<2x6xf32>
  return
}

// -----

func.func @reduce_max_axis(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{axis -3 out of range for rank 2}}
  %0 = mlc.reduce_max %a axes = [-3] : tensor<2x6xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{'mlc.softmax' op axis 2 out of range for rank 2}}
  %0 = mlc.softmax %a axis = 2 : tensor<2x6xf32>
  return
}

// -----

func.func @log_softmax_axis(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{'mlc.log_softmax' op axis -3 out of range for rank 2}}
  %0 = mlc.log_softmax %a axis = -3 : tensor<2x6xf32>
  return
}

// -----

func.func @layer_norm_rank(%a: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = mlc.layer_norm %a, %w, %w epsilon = 1.0e-5 : tensor<f32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

func.func @layer_norm_weight(%a: tensor<2x6xf32>, %w: tensor<5xf32>) {
  // expected-error @+1 {{weight and bias must be [6] like the normalized dimension, got [5]}}
  %0 = mlc.layer_norm %a, %w, %w epsilon = 1.0e-5 : tensor<2x6xf32>, tensor<5xf32>, tensor<5xf32>
  return
}

// -----

func.func @layer_norm_element_type(%a: tensor<2x6xf32>, %w: tensor<6xf64>) {
  // expected-error @+1 {{weight and bias must have the input's element type}}
  %0 = mlc.layer_norm %a, %w, %w epsilon = 1.0e-5 : tensor<2x6xf32>, tensor<6xf64>, tensor<6xf64>
  return
}

// -----

func.func @layer_norm_epsilon(%a: tensor<2x6xf32>, %w: tensor<6xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0 = mlc.layer_norm %a, %w, %w epsilon = 0.0 : tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>
  return
}

// -----

func.func @cross_entropy_logits(%a: tensor<2x3x6xf32>, %l: tensor<2xi64>) {
  // expected-error @+1 {{logits must be [rows, classes], got [2, 3, 6]}}
  %0 = mlc.cross_entropy %a, %l ignore_index = -100 : tensor<2x3x6xf32>, tensor<2xi64>
  return
}

// -----

func.func @cross_entropy_labels(%a: tensor<2x6xf32>, %l: tensor<2x1xi64>) {
  // expected-error @+1 {{labels must be [rows], got [2, 1]}}
  %0 = mlc.cross_entropy %a, %l ignore_index = -100 : tensor<2x6xf32>, tensor<2x1xi64>
  return
}

// -----

func.func @cross_entropy_rows(%a: tensor<2x6xf32>, %l: tensor<3xi64>) {
  // expected-error @+1 {{logits have 2 rows but labels have 3}}
  %0 = mlc.cross_entropy %a, %l ignore_index = -100 : tensor<2x6xf32>, tensor<3xi64>
  return
}

// -----

func.func @dropout_ratio(%a: tensor<2x6xf32>) {
  // expected-error @+1 {{'mlc.dropout' op ratio must be in [0, 1), got 1}}
  %0 = mlc.dropout %a ratio = 1.0 seed = 0 : tensor<2x6xf32>
  return
}

// -----

func.func @attention_element_types(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf64>) {
  // expected-error @+1 {{query, key and value must share an element type}}
  %0 = mlc.attention %q, %k, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf64>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x4x8xf32>) {
  // expected-error @+1 {{query, key and value must be [batch, heads, seq, head_dim], got [2, 4, 8], [2, 4, 8], [2, 4, 8]}}
  %0 = mlc.attention %q, %q, %q : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_head_size(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{query and key head sizes differ: 8 vs 16}}
  %0 = mlc.attention %q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
  return
}

// -----

func.func @attention_lengths(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x5x8xf32>) {
  // expected-error @+1 {{key and value lengths differ: 4 vs 5}}
  %0 = mlc.attention %q, %q, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x5x8xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<1x2x4x8xf32>, %k: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{the key/value heads (3) must divide the query heads (2)}}
  %0 = mlc.attention %q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32>
  return
}

// -----

// Grouped-query attention: 6 query heads over 4 kv heads do not group.
func.func @attention_gqa_heads(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{the key/value heads (4) must divide the query heads (6)}}
  %0 = mlc.attention %q, %k, %k causal : tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>
  return
}

// -----

func.func @attention_gqa_varlen_heads(%q: tensor<?x4x8xf32>, %k: tensor<?x3x8xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{the key/value heads (3) must divide the query heads (4)}}
  %0 = mlc.attention %q, %k, %k cu_seqlens %cu : tensor<?x4x8xf32>, tensor<?x3x8xf32>, tensor<?x3x8xf32>, tensor<3xi32>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{key and value head counts differ: 2 vs 1}}
  %0 = mlc.attention %q, %k, %v : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x1x5xf32>) {
  // expected-error @+1 {{mask [1, 1, 1, 5] does not broadcast to the scores [1, 2, 4, 4]}}
  %0 = mlc.attention %q, %q, %q mask %m : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x1x5xf32>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x1x4xf64>) {
  // expected-error @+1 {{mask must have the query's element type}}
  %0 = mlc.attention %q, %q, %q mask %m : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x1x4xf64>
  return
}

// -----

func.func @attention_varlen_mask(%t: tensor<?x2x8xf32>, %m: tensor<1xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{a mask cannot be combined with cu_seqlens: sequence boundaries already confine attention}}
  %0 = mlc.attention %t, %t, %t mask %m cu_seqlens %cu : tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<1xf32>, tensor<3xi32>
  return
}

// -----

func.func @attention_cu_seqlens(%t: tensor<?x2x8xf32>, %cu: tensor<3x1xi32>) {
  // expected-error @+1 {{cu_seqlens must be a vector of offsets}}
  %0 = mlc.attention %t, %t, %t cu_seqlens %cu : tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<3x1xi32>
  return
}

// -----

func.func @attention_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{scale must be positive}}
  %0 = mlc.attention %q, %q, %q scale = -1.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @pad_entries(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{low and high need one entry per dimension of [2, 3]}}
  %0 = mlc.pad %a low = [0] high = [0] : tensor<2x3xf32>
  return
}

// -----

func.func @pad_negative(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{padding must be non-negative}}
  %0 = mlc.pad %a low = [0, -1] high = [0, 0] : tensor<2x3xf32>
  return
}

// -----

func.func @softmax_grad_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'mlc.softmax_grad' op axis 2 out of range for rank 2}}
  %0 = mlc.softmax_grad %a, %a axis = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_grad_types(%g: tensor<2x3xf32>, %x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{grad and input types differ}}
  %0:3 = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-5 : tensor<2x3xf32>, tensor<2x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @layer_norm_grad_weight(%x: tensor<2x4xf32>, %w: tensor<3xf32>) {
  // expected-error @+1 {{weight must be [4] like the normalized dimension, got [3]}}
  %0:3 = mlc.layer_norm_grad %x, %x, %w epsilon = 1.0e-5 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @cross_entropy_grad_scalar(%g: tensor<2xf32>, %x: tensor<2x4xf32>, %l: tensor<2xi64>) {
  // expected-error @+1 {{grad of the loss must be 0-d}}
  %0 = mlc.cross_entropy_grad %g, %x, %l ignore_index = -100 : tensor<2xf32>, tensor<2x4xf32>, tensor<2xi64>
  return
}

// -----

func.func @cross_entropy_grad_rows(%g: tensor<f32>, %x: tensor<2x4xf32>, %l: tensor<3xi64>) {
  // expected-error @+1 {{logits have 2 rows but labels have 3}}
  %0 = mlc.cross_entropy_grad %g, %x, %l ignore_index = -100 : tensor<f32>, tensor<2x4xf32>, tensor<3xi64>
  return
}

// -----

func.func @embedding_grad_table(%g: tensor<2x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'mlc.embedding_grad' op result must be a [rows, dim] table, got [30]}}
  %0 = mlc.embedding_grad %g, %i : tensor<2x3xf32>, tensor<2xi64> -> tensor<30xf32>
  return
}

// -----

func.func @embedding_grad_shape(%g: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'mlc.embedding_grad' op grad [2, 3] must be the indices' shape followed by the row size: [4, 3]}}
  %0 = mlc.embedding_grad %g, %i : tensor<2x3xf32>, tensor<4xi64> -> tensor<10x3xf32>
  return
}

// -----

func.func @attention_grad_type(%g: tensor<1x2x4x4xf32>, %q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{grad must have the attention output's type 'tensor<1x2x4x8xf32>'}}
  %0:3 = mlc.attention_grad %g, %q, %q, %q : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_dropout(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{dropout must be in [0, 1), got 1}}
  %0 = mlc.attention %q, %q, %q dropout = 1.0 seed = 3 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_window(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{window must be at least 1, got 0}}
  %0 = mlc.attention %q, %q, %q causal window = 0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_window(%g: tensor<1x2x4x8xf32>, %q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{a sliding window (window = 2) needs causal attention}}
  %0:3 = mlc.attention_grad %g, %q, %q, %q window = 2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_softcap(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{softcap must be positive and finite, got 0}}
  %0 = mlc.attention %q, %q, %q causal softcap = 0.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_softcap(%g: tensor<1x2x4x8xf32>, %q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{softcap must be positive and finite, got -3}}
  %0:3 = mlc.attention_grad %g, %q, %q, %q softcap = -3.0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @fusion_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [pointwise, rows, optimizer, norm, params]}}
  %0 = mlc.fusion magic ins(%x : tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    mlc.yield %a : tensor<4xf32>
  } : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_yield_types(%x: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'mlc.fusion' op yields 1 values whose types differ from its results}}
  %0 = mlc.fusion pointwise ins(%x : tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    mlc.yield %a : tensor<4xf32>
  } : tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @fusion_arguments(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'mlc.fusion' op block argument types must match the input types}}
  %0 = mlc.fusion pointwise ins(%x : tensor<4xf32>) {
  ^bb0(%a: tensor<4xf64>):
    %c = mlc.cast %a : tensor<4xf64> -> tensor<4xf32>
    mlc.yield %c : tensor<4xf32>
  } : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'mlc.yield' op expects parent op 'mlc.fusion'}}
  mlc.yield %x : tensor<4xf32>
}

// -----

func.func @fusion_block_arity(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'mlc.fusion' op has 1 inputs but its block takes 2 arguments}}
  %0 = mlc.fusion pointwise ins(%x : tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    mlc.yield %a : tensor<4xf32>
  } : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @matmul_bias_size(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{bias must be a row of the result's 5 columns of 'f32', got 'tensor<4xf32>'}}
  %0 = mlc.matmul %a, %b bias(%c : tensor<4xf32>) : tensor<3x4xf32>, tensor<4x5xf32>
  return
}

// -----

func.func @matmul_bias_type(%a: tensor<3x4xbf16>, %b: tensor<4x5xbf16>, %c: tensor<5xbf16>) {
  // expected-error @+1 {{bias must be a row of the result's 5 columns of 'f32', got 'tensor<5xbf16>'}}
  %0 = mlc.matmul %a, %b f32_result bias(%c : tensor<5xbf16>) : tensor<3x4xbf16>, tensor<4x5xbf16>
  return
}

// -----

func.func @matmul_acc_type(%a: tensor<3x4xbf16>, %b: tensor<4x5xbf16>, %c: tensor<3x5xbf16>) {
  // expected-error @+1 {{acc must have the result's type 'tensor<3x5xf32>', got 'tensor<3x5xbf16>'}}
  %0 = mlc.matmul %a, %b f32_result acc(%c : tensor<3x5xbf16>) : tensor<3x4xbf16>, tensor<4x5xbf16>
  return
}

// -----

func.func @rms_norm_rank(%a: tensor<f32>, %w: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = mlc.rms_norm %a, %w epsilon = 1.0e-6 : tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @rms_norm_weight(%a: tensor<2x6xf32>, %w: tensor<5xf32>) {
  // expected-error @+1 {{weight must be [6] like the normalized dimension, got [5]}}
  %0 = mlc.rms_norm %a, %w epsilon = 1.0e-6 : tensor<2x6xf32>, tensor<5xf32>
  return
}

// -----

func.func @rms_norm_weight_rank(%a: tensor<2x6xf32>, %w: tensor<2x6xf32>) {
  // expected-error @+1 {{weight must be [6] like the normalized dimension, got [2, 6]}}
  %0 = mlc.rms_norm %a, %w epsilon = 1.0e-6 : tensor<2x6xf32>, tensor<2x6xf32>
  return
}

// -----

func.func @rms_norm_element_type(%a: tensor<2x6xf32>, %w: tensor<6xbf16>) {
  // expected-error @+1 {{weight must have the input's element type}}
  %0 = mlc.rms_norm %a, %w epsilon = 1.0e-6 : tensor<2x6xf32>, tensor<6xbf16>
  return
}

// -----

func.func @rms_norm_epsilon(%a: tensor<2x6xf32>, %w: tensor<6xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0 = mlc.rms_norm %a, %w epsilon = -1.0e-6 : tensor<2x6xf32>, tensor<6xf32>
  return
}

// -----

func.func @rms_norm_grad_types(%g: tensor<2x3xf32>, %x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{grad and input types differ}}
  %0:2 = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-6 : tensor<2x3xf32>, tensor<2x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @rms_norm_grad_weight(%x: tensor<2x4xf32>, %w: tensor<3xf32>) {
  // expected-error @+1 {{weight must be [4] like the normalized dimension, got [3]}}
  %0:2 = mlc.rms_norm_grad %x, %x, %w epsilon = 1.0e-6 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<3xf32>
  return
}

// -----

func.func @rms_norm_grad_residual(%x: tensor<2x4xf32>, %w: tensor<4xf32>, %r: tensor<2x4xf64>) {
  // expected-error @+1 {{the residual gradient (plus) and input types differ}}
  %0:2 = mlc.rms_norm_grad %x, %x, %w plus %r epsilon = 1.0e-6 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf64>
  return
}

// -----

func.func @layer_norm_grad_residual(%x: tensor<2x4xf32>, %w: tensor<4xf32>, %r: tensor<2x4xf64>) {
  // expected-error @+1 {{the residual gradient (plus) and input types differ}}
  %0:3 = mlc.layer_norm_grad %x, %x, %w plus %r epsilon = 1.0e-5 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf64>
  return
}

// -----

func.func @attention_rotary_one_table(%q: tensor<1x2x4x8xf32>, %t: tensor<1x1x4x8xf32>) {
  // expected-error @+2 {{rotary needs both tables, cos and sin}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "mlc.attention"(%q, %q, %q, %t) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 0>}> : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_rotary_types(%q: tensor<1x2x4x8xf32>, %c: tensor<1x1x4x8xf32>, %s: tensor<1x1x4x4xf32>) {
  // expected-error @+1 {{rotary sin table 'tensor<1x1x4x4xf32>' differs from the cos table 'tensor<1x1x4x8xf32>'}}
  %0 = mlc.attention %q, %q, %q rotary %c, %s : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>
  return
}

// -----

func.func @attention_rotary_dim(%q: tensor<1x2x4x8xf32>, %c: tensor<1x1x4x3xf32>) {
  // expected-error @+1 {{rotary tables [1, 1, 4, 3] must be [B | 1, 1, S | 1, R] with R even and at most the head dim 8}}
  %0 = mlc.attention %q, %q, %q rotary %c, %c : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x3xf32>, tensor<1x1x4x3xf32>
  return
}

// -----

func.func @attention_rotary_per_head(%q: tensor<1x2x4x8xf32>, %c: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{rotary tables [1, 2, 4, 8] must broadcast over the heads to the query's rows [1, 2, 4, 8]}}
  %0 = mlc.attention %q, %q, %q rotary %c, %c : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_rotary_lengths(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x5x8xf32>, %c: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{rotary attention needs as many queries as keys (the tables' rows are shared), got 4 and 5}}
  %0 = mlc.attention %q, %k, %k rotary %c, %c : tensor<1x2x4x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  return
}

// -----

func.func @attention_interleaved_alone(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{interleaved needs the rotary tables}}
  %0 = mlc.attention %q, %q, %q interleaved : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_grad_rotary_varlen(%g: tensor<6x2x8xf32>, %q: tensor<6x2x8xf32>, %cu: tensor<3xi32>, %c: tensor<6x2x8xf32>) {
  // expected-error @+1 {{rotary tables [6, 2, 8] must broadcast over the heads to the query's rows [6, 2, 8]}}
  %0:3 = mlc.attention_grad %g, %q, %q, %q cu_seqlens %cu rotary %c, %c : tensor<6x2x8xf32>, tensor<6x2x8xf32>, tensor<6x2x8xf32>, tensor<6x2x8xf32>, tensor<3xi32>, tensor<6x2x8xf32>, tensor<6x2x8xf32>
  return
}

// -----

func.func @tp_reduce_kind(%x: tensor<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [sum, max]}}
  %0 = mlc.tp_reduce min %x : tensor<4xf32>
  return
}

// -----

func.func @params_fusion_not_parameter(%w: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{a params fusion reads function arguments marked mlc.param}}
  %0 = mlc.fusion params ins(%w : tensor<4xf32>) {
  ^bb0(%x: tensor<f32>):
    %1 = mlc.cast %x : tensor<f32> -> tensor<bf16>
    mlc.yield %1 : tensor<bf16>
  } : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @tp_copy_integer(%x: tensor<4xi64>) {
  // expected-error @+1 {{'mlc.tp_copy' op operand #0 must be}}
  %0 = mlc.tp_copy %x : tensor<4xi64>
  return
}

// -----

func.func @params_fusion_shape(%w: tensor<4xf32> {mlc.param = "w"}) -> tensor<8xbf16> {
  // expected-error @+1 {{a params fusion's result has its input's shape}}
  %0 = mlc.fusion params ins(%w : tensor<4xf32>) {
  ^bb0(%x: tensor<f32>):
    %1 = mlc.cast %x : tensor<f32> -> tensor<bf16>
    mlc.yield %1 : tensor<bf16>
  } : tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

func.func @params_fusion_element(%w: tensor<4xf32> {mlc.param = "w"}) -> tensor<4xbf16> {
  // expected-error @+1 {{a params region takes one element (a rank-0 tensor)}}
  %0 = mlc.fusion params ins(%w : tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %1 = mlc.cast %x : tensor<4xf32> -> tensor<4xbf16>
    mlc.yield %1 : tensor<4xbf16>
  } : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}
