// RUN: mlc-opt %s -split-input-file -verify-diagnostics

// A phase is [grid, block].
// expected-error @+1 {{'plan.kernel' op cuda.launch phase 0 is not array<i64: grid, block>}}
plan.kernel @k0 fill "fill" args(1) params {count = 4 : i64, element = f32, value = 0.0 : f32} attributes {cuda.launch = [array<i64: 1>]}

// -----

// CUDA runs at most 1024 threads a block.
// expected-error @+1 {{'plan.kernel' op cuda.launch phase 1 launches 1 blocks of 2048 threads (grid >= 1, 1 <= block <= 1024)}}
plan.kernel @k0 fill "fill" args(1) params {count = 4 : i64, element = f32, value = 0.0 : f32} attributes {cuda.launch = [array<i64: 1, 256>, array<i64: 1, 2048>]}

// -----

// expected-error @+1 {{'plan.kernel' op cuda.launch must be a non-empty array of [grid, block] phases}}
plan.kernel @k0 fill "fill" args(1) params {count = 4 : i64, element = f32, value = 0.0 : f32} attributes {cuda.launch = []}

// -----

// expected-error @+1 {{'plan.kernel' op cuda.scratch must be a non-negative i64 (bytes)}}
plan.kernel @k0 fill "fill" args(1) params {count = 4 : i64, element = f32, value = 0.0 : f32} attributes {cuda.launch = [array<i64: 1, 256>], cuda.scratch = -8 : i64}

// -----

// expected-error @+1 {{'plan.kernel' op has a CUDA scratch or tile but no cuda.launch}}
plan.kernel @k0 fill "fill" args(1) params {count = 4 : i64, element = f32, value = 0.0 : f32} attributes {cuda.scratch = 8 : i64}

