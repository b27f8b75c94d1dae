// RUN: mlc-opt %s -split-input-file -verify-diagnostics
// An attention kernel's typed template (#plan.attention<...>) and what its
// model checks that the types cannot say (compiler/codegen/templates/
// Attention.cpp): the rotary tables (verifyRotary: rotary_dim,
// rotary_strides and rotary_slot come together and fit the kernel), the
// soft cap and window, the shape and the argument slots
// (verifyShape). One case per rule, then kernels that pass.
// The forward of a varlen attention: O, Q, K, V, cu_seqlens, cos, sin.

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim needs rotary_strides of 2 entries (the tables' batch and row strides), got 1}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 32, rotary_strides = [32], rotary_slot = 5> args(7)

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim needs rotary_strides of 2 entries (the tables' batch and row strides), got 0}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 32, rotary_slot = 5> args(7)

// -----

// sin (rotary_slot + 1) past the last argument.
// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_slot 6 puts cos and sin outside its 7 arguments}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 32, rotary_strides = [0, 32], rotary_slot = 6> args(7)

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_slot -2 puts cos and sin outside its 7 arguments}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 32, rotary_strides = [0, 32], rotary_slot = -2> args(7)

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim needs rotary_slot (the argument of the cos table)}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 32, rotary_strides = [0, 32]> args(7)

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim 15 must be even, positive and at most head_dim (32)}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 15, rotary_strides = [0, 32], rotary_slot = 5> args(7)

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim -2 must be even, positive and at most head_dim (32)}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = -2, rotary_strides = [0, 32], rotary_slot = 5> args(7)

// -----

// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): rotary_dim 34 must be even, positive and at most head_dim (32)}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 34, rotary_strides = [0, 32], rotary_slot = 5> args(7)

// -----

// The tables' other parameters without rotary_dim.
// expected-error @+1 {{'plan.kernel' op @k14 (template 'attention'): parameter 'rotary_slot' without 'rotary_dim'}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_slot = 5> args(7)

// -----

// A soft-capping cap must be positive and finite.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): softcap -1.000000e+00 must be positive and finite}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, softcap = -1.0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// A sliding window is at least 1 key long, and narrows causal attention only.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): window -3 must be at least 1}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, window = -3, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): a sliding window needs causal attention}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, window = 8, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// The heads and head dimensions are positive, kv_heads dividing heads.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): parameter 'head_dim' must be > 0, got 0}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 0, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): kv_heads 3 must divide heads 4}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 3, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// arg_types and arg_written list the kernel's arguments, and q, k, v,
// cu_seqlens (varlen) are among them.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): parameters 'arg_types' and 'arg_written' must list its 5 arguments, got 4 and 5}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): query 3 puts q, k and v outside its 5 arguments}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 3, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): cu_slot -1 must name one of its 5 arguments exactly when varlen}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// Four entries a tensor; a dropout probability below 1.
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): parameter 'tensors' must hold 4 entries a tensor (offset, batch, head and row strides), got 15}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32]> args(5)

// -----

// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): dropout 1.000000e+00 must be in [0, 1)}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 1.0, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----

// A typed template: a params dictionary beside its parameters is refused...
// expected-error @+1 {{'plan.kernel' op @k15 (template 'attention'): takes its parameters in #plan.attention<...>, not in params}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5) params {causal}

// -----

// ... and one it lacks, or one it does not know, fails to parse.
// expected-error @+1 {{struct is missing required parameter: seed}}
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)

// -----
// Valid: a partial rotation (R = 16 of 32, interleaved pairs), the tables
// in arguments 5 and 6; the same kernel without rotary tables; and with a
// soft-capping cap; and a sliding window of 8 keys.
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32, f32, f32], arg_written = [true, false, false, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384], rotary_dim = 16, interleaved = true, rotary_strides = [0, 16], rotary_slot = 5> args(7)
plan.kernel @k15 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)
plan.kernel @k16 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, softcap = 5.000000e+01, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)
plan.kernel @k17 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, window = 8, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)
