// RUN: mlc-opt %s -split-input-file -verify-diagnostics --mlc-cuda-launch

// A phase is [grid, block].
// expected-error @+1 {{'plan.kernel' op @k0: cuda.launch phase 0 is not array<i64: grid, block>}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.launch = [array<i64: 1>]}

// -----

// CUDA runs at most 1024 threads a block.
// expected-error @+1 {{'plan.kernel' op @k0: cuda.launch phase 1 launches 1 blocks of 2048 threads (grid >= 1, block a multiple of 32 up to 1024)}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.launch = [array<i64: 1, 256>, array<i64: 1, 2048>]}

// -----

// expected-error @+1 {{'plan.kernel' op @k0: cuda.launch must be a non-empty array of [grid, block] phases}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.launch = []}

// -----

// expected-error @+1 {{'plan.kernel' op @k0: cuda.scratch must be a non-negative i64 (bytes)}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.launch = [array<i64: 1, 256>], cuda.scratch = -8 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op @k0: has a CUDA scratch or tile but no cuda.launch}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.scratch = 8 : i64}


// -----

// A block is whole warps: the runtime launches no other.
// expected-error @+1 {{'plan.kernel' op @k0: cuda.launch phase 0 launches 1 blocks of 48 threads (grid >= 1, block a multiple of 32 up to 1024)}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.launch = [array<i64: 1, 48>]}

// -----

// Less than a warp (an f64 attention backward once scheduled 16 threads).
// expected-error @+1 {{'plan.kernel' op @k0: cuda.launch phase 0 launches 1 blocks of 16 threads (grid >= 1, block a multiple of 32 up to 1024)}}
plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1) attributes {cuda.launch = [array<i64: 1, 16>]}

// -----

// A schedule written by hand (or by an earlier run) keeps its form above
// (the verifier's) and the phase count mlc-cuda-launch decides for the
// kernel (its template's scheduleCuda, or its body's): the phase structure
// exists once, in the schedule.
// Attention's backward runs three phases (row statistics, dK/dV, dQ).
// expected-error @+1 {{'plan.kernel' op @k23: cuda.launch has 1 phases where template 'attention' (backward) runs 3}}
plan.kernel @k23 attention #plan.attention<element = f32, backward = true, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 1.000000e-01, seed = 5, arg_types = [f32, f32, f32, f32, f32, f32, f32, i32], arg_written = [true, true, true, false, false, false, false, false], query = 4, mask_strides = [0, 0, 0, 0], cu_slot = 7, tensors = [0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384, 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(8) attributes {cuda.launch = [array<i64: 8, 64>], cuda.scratch = 12288 : i64, cuda.tile = 32 : i64}

// -----

// Its forward pass runs one.
// expected-error @+1 {{'plan.kernel' op @k14: cuda.launch has 3 phases where template 'attention' runs 1}}
plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5) attributes {cuda.launch = [array<i64: 8, 64>, array<i64: 8, 64>, array<i64: 8, 64>], cuda.scratch = 12288 : i64, cuda.tile = 32 : i64}

// -----

// Cross-entropy: a block per row, then one block sums the loss terms.
// expected-error @+1 {{'plan.kernel' op @k9: cuda.launch has 1 phases where template 'cross_entropy' runs 2}}
plan.kernel @k9 rows #plan.cross_entropy<element = f32, labels = i64, rows = 16, columns = 256, ignore = -100> args(3) attributes {cuda.launch = [array<i64: 16, 128>]}

// -----

// A copy kernel runs a phase per nest (after zeroing, where it zeroes).
// expected-error @+1 {{'plan.kernel' op @k5: cuda.launch has 1 phases where template 'copies' runs 2}}
plan.kernel @k5 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [8], dst_offset = 0, dst_strides = [1], src_arg = 1, src_offset = 0, src_strides = [1], vector_lanes = 1>], zero_bytes = 64> args(2) attributes {cuda.launch = [array<i64: 1, 256>]}

// -----

// A column reduction body: row chunks' partial sums, then their sums.
// expected-error @+1 {{'plan.kernel' op @k18: cuda.launch has 1 phases where its column_reduction body runs 2}}
plan.kernel @k18 column_reduction args(2) params {columns = 512 : i64, dims = array<i64: 16, 512>, lead = 1 : i64, rows = 16 : i64} attributes {cuda.launch = [array<i64: 2, 256>]} {
  %0 = plan.load arg 1 offset 0 strides [512, 1] : tensor<f32>
  plan.accumulate %0, arg 0 : tensor<f32>
}

// -----

// Scheduled by hand, and valid: three phases of whole warps for attention's
// backward, two for cross-entropy.
plan.kernel @k23 attention #plan.attention<element = f32, backward = true, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 1.000000e-01, seed = 5, arg_types = [f32, f32, f32, f32, f32, f32, f32, i32], arg_written = [true, true, true, false, false, false, false, false], query = 4, mask_strides = [0, 0, 0, 0], cu_slot = 7, tensors = [0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384, 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(8) attributes {cuda.launch = [array<i64: 8, 96>, array<i64: 8, 96>, array<i64: 8, 96>], cuda.scratch = 12288 : i64, cuda.tile = 32 : i64}
plan.kernel @k9 rows #plan.cross_entropy<element = f32, labels = i64, rows = 16, columns = 256, ignore = -100> args(3) attributes {cuda.launch = [array<i64: 16, 96>, array<i64: 1, 256>]}
