// RUN: mlc-opt %s -split-input-file --mlc-cuda-launch | FileCheck %s
// RUN: mlc-opt %s -split-input-file --mlc-cuda-launch --mlc-print-kernels=target=cuda -o /dev/null | FileCheck %s --check-prefix=PRINT
// RUN: mlc-opt %s -split-input-file --mlc-cuda-launch --mlc-print-kernels=target=cpu -o /dev/null | FileCheck %s --check-prefix=CPU

// mlc-cuda-launch decides each kernel's phases (grid, block) and scratch on
// its IR; the CUDA printer writes them as the kernel's `// mlc.kernel` line
// and its phases (an `if (phase == K)` each, or a prelude template's call
// that takes `phase`, under a `// phase K` comment); the CPU printer ignores them.

// PRINT: // mlc.kernel k4 attention args=4 scratch=0 launch=8x64{{$}}
// PRINT: // mlc.kernel k20 attention args=7 scratch=1536 launch=8x64,8x64,8x64{{$}}
// PRINT: // phase 0: the row statistics
// PRINT-NEXT: // phase 1: dK, dV
// PRINT-NEXT: // phase 2: dQ
// PRINT: // mlc.kernel k14 attention args=5 scratch=0 launch=8x64{{$}}
// PRINT: const MlcAttention<float> s = {128, 4, 4, 0, 0, 128, 2,
// PRINT: // mlc.kernel k23 attention args=8 scratch=12288 launch=8x64,8x64,8x64{{$}}
// PRINT: const MlcAttention<float> s = {128, 4, 4, 0, 0, 128, 2,
// PRINT: // mlc.kernel k25 scatter args=3 scratch=0 launch=12x256,64x256{{$}}
// PRINT: mlc_embedding_grad<float, int64_t, 300, 40, 3, false, 5, 1, 256>(p0, p1, p2, ctx->rows, phase);
// PRINT: // mlc.kernel k18 column_reduction args=4 scratch=4096 launch=2x256,2x256{{$}}
// PRINT: // phase 0: partials, row chunk x column block
// PRINT-NEXT: // phase 1: the partials in chunk order
// PRINT-NEXT: mlc_column_sums<float, 512, 1, 2, 256>(p1, 16, (double *)ctx->scratch, phase,
// PRINT-NOT: // phase 2
// PRINT: // mlc.kernel k24 pointwise args=3 scratch=0 launch=32x256{{$}}
// PRINT: // mlc.kernel kept pointwise args=2 scratch=64 launch=7x32{{$}}
// PRINT: __launch_bounds__(32) kept(
// CPU-NOT: mlc.kernel
// CPU-NOT: phase ==

// Attention forward, f32 (no tensor cores): a block of 64 query rows, a
// thread each, per (batch, head): 2 x 4 heads x ceil(8 / 64) tiles; key
// tiles of 32 rows (32 x (32 + 32) floats = 8 KB of shared memory).
// CHECK-LABEL: plan.kernel @k4 attention #plan.attention
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 8, 64>], cuda.scratch = 0 : i64, cuda.tile = 32 : i64}
module {
  plan.kernel @k4 attention #plan.attention<element = f32, causal = true, batch = 2, heads = 4, kv_heads = 4, seq_q = 8, seq_k = 8, head_dim = 32, value_dim = 32, token_capacity = 0, scale = 0.17677669529663687, dropout = 1.000000e-01, seed = 2, arg_types = [f32, f32, f32, f32], arg_written = [true, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], tensors = [0, 1024, 32, 128, 0, 3072, 32, 384, 128, 3072, 32, 384, 256, 3072, 32, 384]> args(4)
}

// -----

// Attention backward: three phases (row statistics, dK/dV, dQ) of the
// same grid, and (m, l, D) per query row in f64: 2 x 4 x 8 rows x 24 bytes.
// CHECK-LABEL: plan.kernel @k20 attention #plan.attention
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 8, 64>, array<i64: 8, 64>, array<i64: 8, 64>], cuda.scratch = 1536 : i64, cuda.tile = 32 : i64}
module {
  plan.kernel @k20 attention #plan.attention<element = f32, backward = true, causal = true, batch = 2, heads = 4, kv_heads = 4, seq_q = 8, seq_k = 8, head_dim = 32, value_dim = 32, token_capacity = 0, scale = 0.17677669529663687, dropout = 1.000000e-01, seed = 2, arg_types = [f32, f32, f32, f32, f32, f32, f32], arg_written = [true, true, true, false, false, false, false], query = 4, mask_strides = [0, 0, 0, 0], tensors = [0, 3072, 32, 384, 128, 3072, 32, 384, 256, 3072, 32, 384, 0, 1024, 32, 128, 0, 3072, 32, 384, 128, 3072, 32, 384, 256, 3072, 32, 384]> args(7)
}

// -----

// Packed documents (varlen): a block per (head, 64-token tile of the packed
// stream) whatever the documents, 4 heads x ceil(128 / 64) = 8 blocks for
// 128 sequence slots (not 128 x 4 x 2); the sizes' literal says 2 blocks per
// head.
// CHECK-LABEL: plan.kernel @k14 attention #plan.attention
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 8, 64>], cuda.scratch = 0 : i64, cuda.tile = 32 : i64}
module {
  plan.kernel @k14 attention #plan.attention<element = f32, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 0.000000e+00, seed = 0, arg_types = [f32, f32, f32, f32, i32], arg_written = [true, false, false, false, false], query = 1, mask_strides = [0, 0, 0, 0], cu_slot = 4, tensors = [0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(5)
}

// -----

// Its backward: the same grid in its three phases, the statistics per
// (head, token of the capacity): 4 x 128 rows x 24 bytes.
// CHECK-LABEL: plan.kernel @k23 attention #plan.attention
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 8, 64>, array<i64: 8, 64>, array<i64: 8, 64>], cuda.scratch = 12288 : i64, cuda.tile = 32 : i64}
module {
  plan.kernel @k23 attention #plan.attention<element = f32, backward = true, varlen = true, causal = true, batch = 128, heads = 4, kv_heads = 4, seq_q = 0, seq_k = 0, head_dim = 32, value_dim = 32, token_capacity = 128, scale = 0.17677669529663687, dropout = 1.000000e-01, seed = 5, arg_types = [f32, f32, f32, f32, f32, f32, f32, i32], arg_written = [true, true, true, false, false, false, false, false], query = 4, mask_strides = [0, 0, 0, 0], cu_slot = 7, tensors = [0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384, 0, 128, 32, 128, 0, 384, 32, 384, 128, 384, 32, 384, 256, 384, 32, 384]> args(8)
}

// -----

// A LayerNorm with its prologue (a rows body): a block per row, 128
// threads for rows of 128.
// CHECK-LABEL: plan.kernel @k3 rows
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 16, 128>], cuda.scratch = 0 : i64} {
module {
  plan.kernel @k3 rows args(6) params {dims = array<i64: 2, 8, 128>, eps = 1.000000e-05 : f64, rows = 16 : i64} {
    %0 = plan.load arg 2 offset 0 strides [1024, 128, 1] : tensor<f32>
    %1 = plan.load arg 3 offset 0 strides [0, 128, 1] : tensor<f32>
    %2 = plan.load arg 4 offset 0 strides [0, 0, 1] : tensor<f32>
    %3 = plan.load arg 5 offset 0 strides [0, 0, 1] : tensor<f32>
    %4 = mlc.add %0, %1 : tensor<f32>, tensor<f32>
    %5 = mlc.dropout %4 ratio = 1.000000e-01 seed = 1 : tensor<f32>
    plan.store %5, arg 0 offset 0 strides [1024, 128, 1] : tensor<f32>
    plan.normalize %5, %2, %3, arg 1 offset 0 strides [1024, 128, 1] : tensor<f32>, tensor<f32>, tensor<f32> into f32
  }
}

// -----

// Cross-entropy: a block per row (rows of 256: 128 threads), then one block
// sums the 16 loss terms; loss and used per row in scratch (2 x 16 x 8).
// CHECK-LABEL: plan.kernel @k9 rows #plan.cross_entropy
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 16, 128>, array<i64: 1, 256>], cuda.scratch = 256 : i64}
module {
  plan.kernel @k9 rows #plan.cross_entropy<element = f32, labels = i64, rows = 16, columns = 256, ignore = -100> args(3)
}

// -----

// An embedding's gradient (a table of 300 x 40, rows at the token count):
// the table zeroed, 4 elements a thread (12 blocks), then 64 vocabulary
// chunks x 1 column block; its padding row and flag reach the print.
// CHECK-LABEL: plan.kernel @k25 scatter #plan.embedding_grad
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 12, 256>, array<i64: 64, 256>], cuda.scratch = 0 : i64}
module {
  plan.kernel @k25 scatter #plan.embedding_grad<element = f32, ids = i64, rows = 16, rows_per_token = 1, vocab = 300, columns = 40, padding = 3> args(3)
}

// -----

// A column reduction (a bias gradient over 16 rows of 512 columns): phase
// 0 one row chunk x 2 column blocks, phase 1 the 2 column blocks adding the
// chunk's partials (1 x 512 doubles).
// CHECK-LABEL: plan.kernel @k18 column_reduction
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 2, 256>, array<i64: 2, 256>], cuda.scratch = 4096 : i64} {
module {
  plan.kernel @k18 column_reduction args(4) params {columns = 512 : i64, dims = array<i64: 2, 8, 512>, lead = 2 : i64, rows = 16 : i64} {
    %0 = plan.load arg 2 offset 0 strides [4096, 512, 1] : tensor<f32>
    %1 = plan.load arg 3 offset 0 strides [4096, 512, 1] : tensor<f32>
    %2 = mlc.gelu_grad %0, %1 approximate = tanh : tensor<f32>
    plan.accumulate %2, arg 1 : tensor<f32>
    plan.store %2, arg 0 offset 0 strides [4096, 512, 1] : tensor<f32>
  }
}

// -----

// A pointwise nest of 32768 elements in vectors of 4: 8192 threads.
// CHECK-LABEL: plan.kernel @k24 pointwise
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 32, 256>], cuda.scratch = 0 : i64} {
module {
  plan.kernel @k24 pointwise args(3) params {dims = array<i64: 32768>, vector_lanes = 4 : i64} {
    %0 = plan.load arg 1 offset 0 strides [1] vector : tensor<f32>
    %1 = plan.load arg 2 offset 0 strides [1] vector : tensor<f32>
    %2 = mlc.add %0, %1 : tensor<f32>, tensor<f32>
    plan.store %2, arg 0 offset 0 strides [1] vector : tensor<f32>
  }
}

// -----

// The gradient norm: ceil(264064 / (256 x 8)) blocks of partial sums, then
// one block adds them (129 doubles of scratch).
// CHECK-LABEL: plan.kernel @k26 reduction
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 129, 256>, array<i64: 1, 256>], cuda.scratch = 1032 : i64} {
module {
  plan.kernel @k26 reduction args(2) params {dims = array<i64: 264064>, segments = array<i64: 0, 264064>} {
    %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
    %1 = mlc.cast %0 : tensor<f32> -> tensor<f64>
    %2 = mlc.mul %1, %1 : tensor<f64>, tensor<f64>
    plan.accumulate %2, arg 0 : tensor<f64>
  }
}

// -----

// The optimizer over two segments (65920 parameters), four a thread.
// CHECK-LABEL: plan.kernel @k27 optimizer
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 65, 256>], cuda.scratch = 0 : i64} {
module {
  plan.kernel @k27 optimizer args(5) params {dims = array<i64: 65920>, segments = array<i64: 0, 384, 0, 384, 65536, 1>} {
    %0 = plan.load arg 0 offset 0 strides [1] : tensor<f32>
    %1 = plan.load arg 3 offset 0 strides [1] : tensor<f32>
    %2 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
    %3 = plan.load arg 2 offset 0 strides [1] : tensor<f32>
    %4 = plan.decay_factor arg 4 index 8 : tensor<f32>
    %5 = plan.scalar arg 4 index 0 : tensor<f32>
    %6 = plan.scalar arg 4 index 1 : tensor<f32>
    %7 = plan.scalar arg 4 index 2 : tensor<f32>
    %8 = plan.scalar arg 4 index 3 : tensor<f32>
    %9 = plan.scalar arg 4 index 4 : tensor<f32>
    %10 = plan.scalar arg 4 index 5 : tensor<f32>
    %11 = plan.scalar arg 4 index 6 : tensor<f32>
    %12 = plan.scalar arg 4 index 7 : tensor<f32>
    %13 = mlc.mul %1, %5 : tensor<f32>, tensor<f32>
    %14 = mlc.mul %9, %13 : tensor<f32>, tensor<f32>
    %15 = mlc.mul %8, %2 : tensor<f32>, tensor<f32>
    %16 = mlc.add %15, %14 : tensor<f32>, tensor<f32>
    %17 = mlc.mul %11, %13 : tensor<f32>, tensor<f32>
    %18 = mlc.mul %17, %13 : tensor<f32>, tensor<f32>
    %19 = mlc.mul %10, %3 : tensor<f32>, tensor<f32>
    %20 = mlc.add %19, %18 : tensor<f32>, tensor<f32>
    %21 = mlc.mul %0, %4 : tensor<f32>, tensor<f32>
    %22 = mlc.sqrt %20 : tensor<f32>
    %23 = mlc.mul %22, %7 : tensor<f32>, tensor<f32>
    %24 = mlc.add %23, %12 : tensor<f32>, tensor<f32>
    %25 = mlc.mul %6, %16 : tensor<f32>, tensor<f32>
    %26 = mlc.div %25, %24 : tensor<f32>, tensor<f32>
    %27 = mlc.sub %21, %26 : tensor<f32>, tensor<f32>
    plan.store %27, arg 0 offset 0 strides [1] : tensor<f32>
    plan.store %16, arg 1 offset 0 strides [1] : tensor<f32>
    plan.store %20, arg 2 offset 0 strides [1] : tensor<f32>
  }
}

// -----

// A kernel that carries a schedule keeps it (the pass decides only what is
// undecided).
// CHECK-LABEL: plan.kernel @kept pointwise
// CHECK-SAME:    attributes {cuda.launch = [array<i64: 7, 32>], cuda.scratch = 64 : i64} {
module {
  plan.kernel @kept pointwise args(2) params {dims = array<i64: 64>, vector_lanes = 1 : i64} attributes {cuda.launch = [array<i64: 7, 32>], cuda.scratch = 64 : i64} {
    %0 = plan.load arg 1 offset 0 strides [1] : tensor<f32>
    plan.store %0, arg 0 offset 0 strides [1] : tensor<f32>
  }
}

// -----

// A schedule already there (by hand, or an earlier run) with the phases its
// kernel runs is kept as it is, not decided again.
// CHECK-LABEL: plan.kernel @hand rows #plan.softmax
// CHECK-SAME: cuda.launch = [array<i64: 7, 96>], cuda.scratch = 0 : i64
plan.kernel @hand rows #plan.softmax<element = f32, rows = 16, columns = 64> args(2) attributes {cuda.launch = [array<i64: 7, 96>], cuda.scratch = 0 : i64}
