// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// An attention kernel's rotary tables (dialects/plan/PlanDialect.cpp,
// verifyAttentionRotary): rotary_dim, rotary_strides and rotary_slot come
// together and fit the kernel. One case per rule, then a kernel that passes.
// The forward of a varlen attention: O, Q, K, V, cu_seqlens, cos, sin.

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim needs rotary_strides of 2 entries (the tables' batch and row strides), got 1}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 32 : i64, rotary_slot = 5 : i64, rotary_strides = array<i64: 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim needs rotary_strides of 2 entries (the tables' batch and row strides), got none}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 32 : i64, rotary_slot = 5 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// sin (rotary_slot + 1) past the last argument.
// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_slot 6 puts cos and sin outside its 7 arguments}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 32 : i64, rotary_slot = 6 : i64, rotary_strides = array<i64: 0, 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_slot -1 puts cos and sin outside its 7 arguments}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 32 : i64, rotary_slot = -1 : i64, rotary_strides = array<i64: 0, 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim needs rotary_slot (the argument of the cos table)}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 32 : i64, rotary_strides = array<i64: 0, 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim 15 must be even, positive and at most head_dim (32)}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 15 : i64, rotary_slot = 5 : i64, rotary_strides = array<i64: 0, 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim 0 must be even, positive and at most head_dim (32)}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 0 : i64, rotary_slot = 5 : i64, rotary_strides = array<i64: 0, 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim 34 must be even, positive and at most head_dim (32)}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 34 : i64, rotary_slot = 5 : i64, rotary_strides = array<i64: 0, 32>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// The tables' other parameters without rotary_dim.
// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): parameter 'rotary_slot' without 'rotary_dim'}}
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_slot = 5 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// A soft-capping cap must be positive and finite.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): softcap 0.000000e+00 must be positive and finite}}
plan.kernel @k15 attention #plan.attention args(5) params {arg_types = [f32, f32, f32, f32, i32], arg_written = array<i1: true, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, softcap = 0.000000e+00 : f64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}

// -----

// A sliding window is at least 1 key long, and narrows causal attention only.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): window 0 must be at least 1}}
plan.kernel @k15 attention #plan.attention args(5) params {arg_types = [f32, f32, f32, f32, i32], arg_written = array<i1: true, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen, window = 0 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): a sliding window needs causal attention}}
plan.kernel @k15 attention #plan.attention args(5) params {arg_types = [f32, f32, f32, f32, i32], arg_written = array<i1: true, false, false, false, false>, batch = 128 : i64, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen, window = 8 : i64}

// -----

// Valid: a partial rotation (R = 16 of 32, interleaved pairs), the tables
// in arguments 5 and 6; the same kernel without rotary tables; and with a
// soft-capping cap; and a sliding window of 8 keys.
plan.kernel @k14 attention #plan.attention args(7) params {arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = array<i1: true, false, false, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, interleaved, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, rotary_dim = 16 : i64, rotary_slot = 5 : i64, rotary_strides = array<i64: 0, 16>, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}
plan.kernel @k15 attention #plan.attention args(5) params {arg_types = [f32, f32, f32, f32, i32], arg_written = array<i1: true, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}
plan.kernel @k16 attention #plan.attention args(5) params {arg_types = [f32, f32, f32, f32, i32], arg_written = array<i1: true, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, softcap = 5.000000e+01 : f64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen}
plan.kernel @k17 attention #plan.attention args(5) params {arg_types = [f32, f32, f32, f32, i32], arg_written = array<i1: true, false, false, false, false>, batch = 128 : i64, causal, cu_slot = 4 : i64, dropout = 0.000000e+00 : f64, element = f32, head_dim = 32 : i64, heads = 4 : i64, kv_heads = 4 : i64, mask_strides = array<i64: 0, 0, 0, 0>, query = 1 : i64, scale = 0.17677669529663687 : f64, seed = 0 : i64, seq_k = 0 : i64, seq_q = 0 : i64, tensors = array<i64: 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384>, token_capacity = 128 : i64, value_dim = 32 : i64, varlen, window = 8 : i64}
