// RUN: mlc-opt %s --mlc-print-kernels=target=cpu -o /dev/null | FileCheck %s --check-prefix=CPU
// RUN: mlc-opt %s --mlc-cuda-launch --mlc-print-kernels=target=cuda -o /dev/null | FileCheck %s --check-prefix=CUDA

// A running sum (#plan.scan, mlc.cumsum's template) is printed through the
// targets' pointwise nest: one iteration (one CUDA thread) per line, which
// walks the line in order. @k0: position ids' sum of an i64 mask [2, 1024]
// along its last dimension; @k1: an exclusive sum from the end along the
// middle of [2, 4, 6] (lines of 4, 6 apart); @k2: a dynamic row count.
module attributes {mlc.token_capacity = 8 : i64} {
  plan.kernel @k0 pointwise #plan.scan<element = i64, rows = 2, length = 1024, inner = 1> args(2)
  plan.kernel @k1 pointwise #plan.scan<element = f32, rows = 2, length = 4, inner = 6, exclusive = true, reverse = true> args(2)
  plan.kernel @k2 pointwise #plan.scan<element = f64, rows = 8, rows_per_token = 1, length = 3, inner = 1> args(2)
}

// CPU-LABEL: extern "C" void k0(char **b, MlcKernelCtx *ctx) {
// CPU:      int64_t *p0 = (int64_t *)b[0];
// CPU-NEXT: const int64_t *p1 = (const int64_t *)b[1];
// CPU-NEXT: for (int64_t i0 = 0; i0 < 2; ++i0)
// CPU-NEXT: {
// CPU-NEXT: const int64_t o0 = 0 + i0 * 1024;
// CPU-NEXT: const int64_t o1 = 0 + i0 * 1024;
// CPU-NEXT: int64_t s = 0;
// CPU-NEXT: for (int64_t j = 0; j < 1024; ++j) {
// CPU-NEXT: const int64_t k = j * 1;
// CPU-NEXT: const int64_t x = p1[o1 + k];
// CPU-NEXT: s += x;
// CPU-NEXT: p0[o0 + k] = s;
// CPU-NEXT: }
// CPU-NEXT: }
// CPU-LABEL: extern "C" void k1(char **b, MlcKernelCtx *ctx) {
// CPU:      for (int64_t i0 = 0; i0 < 2; ++i0)
// CPU-NEXT: for (int64_t i1 = 0; i1 < 6; ++i1)
// CPU-NEXT: {
// CPU-NEXT: const int64_t o0 = 0 + i0 * 24 + i1 * 1;
// CPU-NEXT: const int64_t o1 = 0 + i0 * 24 + i1 * 1;
// CPU-NEXT: float s = 0;
// CPU-NEXT: for (int64_t j = 0; j < 4; ++j) {
// CPU-NEXT: const int64_t k = (3 - j) * 6;
// CPU-NEXT: const float x = p1[o1 + k];
// CPU-NEXT: p0[o0 + k] = s;
// CPU-NEXT: s += x;
// CPU-LABEL: extern "C" void k2(char **b, MlcKernelCtx *ctx) {
// CPU:      for (int64_t i0 = 0; i0 < ctx->rows; ++i0)

// CUDA-LABEL: // mlc.kernel k0 pointwise args=2 scratch=0 launch=1x256
// CUDA:      if (phase == 0) {
// CUDA-NEXT: const int64_t n0 = 2;
// CUDA-NEXT: for (int64_t i = MLC_TID; i < 1 * n0; i += MLC_STRIDE) {
// CUDA:      int64_t s = 0;
// CUDA-NEXT: for (int64_t j = 0; j < 1024; ++j) {
// CUDA-LABEL: // mlc.kernel k1 pointwise
// CUDA:      const int64_t n1 = 6;
// CUDA:      float s = 0;
// CUDA-LABEL: // mlc.kernel k2 pointwise
// CUDA:      const int64_t n0 = ctx->rows;
