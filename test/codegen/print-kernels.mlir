// RUN: mlc-opt %s --mlc-cuda-vectorize --mlc-print-kernels=target=cpu -o /dev/null | FileCheck %s --check-prefix=CPU
// RUN: mlc-opt %s --mlc-cuda-vectorize --mlc-cuda-launch --mlc-print-kernels=target=cuda -o /dev/null | FileCheck %s --check-prefix=CUDA
// RUN: not mlc-opt %s --mlc-cuda-launch -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNDECIDED
// RUN: not mlc-opt %s --mlc-cuda-vectorize --mlc-print-kernels=target=cuda -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED

// Kernels are IR until they are printed: the same plan.kernel ops as
// C++ with OpenMP and as CUDA C. A pointwise body (a bias added to rows of
// 64, the token count dynamic: up to 8 tokens of 2 rows each) and a
// softmax template over as many rows.
module attributes {mlc.token_capacity = 8 : i64} {
  plan.kernel @k0 pointwise args(3) params {dims = array<i64: 16, 64>, dynamic} {
    %x = plan.load arg 1 offset 0 strides [64, 1] : tensor<f32>
    %b = plan.load arg 2 offset 0 strides [0, 1] : tensor<f32>
    %y = mlc.add %x, %b : tensor<f32>, tensor<f32>
    plan.store %y, arg 0 offset 0 strides [64, 1] : tensor<f32>
  }
  plan.kernel @k1 rows #plan.softmax<element = f32, rows = 16, rows_per_token = 2, columns = 64> args(2)
  plan.kernel @k2 rows #plan.layer_norm<element = f32, rows = 4, columns = 64, eps = 1.000000e-05, unit = true> args(2)
  plan.kernel @k3 rows #plan.layer_norm_grad<element = f32, rows = 4, capacity = 4, columns = 64, eps = 1.000000e-05, residual = true, unit = true> args(6)
}

// CPU: extern "C" const int64_t k0_args = 3;
// CPU: extern "C" void k0(char **b, MlcKernelCtx *ctx) {
// CPU-NEXT: (void)ctx;
// CPU-NEXT: float *p0 = (float *)b[0];
// CPU-NEXT: const float *p1 = (const float *)b[1];
// CPU-NEXT: const float *p2 = (const float *)b[2];
// CPU-NEXT: for (int64_t i0 = 0; i0 < (ctx->rows * 2); ++i0)
// CPU-NEXT: for (int64_t i1 = 0; i1 < 64; ++i1)
// CPU-NEXT: {
// CPU-NEXT: const int64_t o0 = 0 + i0 * 64 + i1 * 1;
// CPU-NEXT: const int64_t o1 = 0 + i0 * 64 + i1 * 1;
// CPU-NEXT: const int64_t o2 = 0 + i1 * 1;
// CPU-NEXT: const int64_t flat = o0;
// CPU-NEXT: const float x1 = p1[o1];
// CPU-NEXT: const float x2 = p2[o2];
// CPU-NEXT: const float t0 = (x1 + x2);
// CPU-NEXT: p0[o0] = t0;
// CPU-NEXT: }
// CPU-NEXT: }
// CPU: extern "C" const char k1_kind[] = "rows";
// CPU: mlc_softmax<float, 64, 0>(p0, p1, (ctx->rows * 2));

// A LayerNorm without weight or bias (unit): the normalized row alone, and
// a gradient whose weight is 1 (the residual stream's gradient, p5, right
// after the input). Each is one call of a template of the prelude
// (prelude/rows.h), the absent weight and bias 0; the algorithm is not
// printed.
// CPU: extern "C" const int64_t k2_args = 2;
// CPU-NOT: rstd
// CPU: mlc_layer_norm<float, 64, MLC_ROW_UNIT>(p0, p1, 0, 0, 4, 1.0000000000000001e-05);
// CPU-NEXT: }
// CPU: extern "C" const int64_t k3_args = 6;
// CPU: const float *p5 = (const float *)b[5];
// CPU-NEXT: mlc_layer_norm_grad<float, float, float, 64, MLC_ROW_UNIT | MLC_ROW_RESIDUAL>(p0, p1, p2, p3, p4, 0, p5, 0, 4, 4, 1.0000000000000001e-05);
// CPU-NEXT: }

// The CUDA kernel moves the contiguous accesses as four-lane vectors
// (mlc-cuda-vectorize's decision), the element loop the fallback for
// unaligned pointers.
// CUDA: // mlc.kernel k0 pointwise args=3 scratch=0 launch=1x256
// CUDA-NEXT: extern "C" __global__ void __launch_bounds__(256) k0(char *const *b, const MlcKernelCtx *ctx, int phase) {
// CUDA: const int64_t n0 = (ctx->rows * 2);
// CUDA: if (mlc_aligned(p0, 16) && mlc_aligned(p1, 16) && mlc_aligned(p2, 16)) {
// CUDA: mlc_vload<4>(v1, p1 + q1);
// CUDA: mlc_vload<4>(v2, p2 + q2);
// CUDA: const float x1 = v1[u];
// CUDA: v0[u] = t0;
// CUDA: mlc_vstore<4>(p0 + q0, v0);
// CUDA: } else {
// CUDA: p0[o0] = t0;
// CUDA: // mlc.kernel k1 rows args=2 scratch=0 launch=16x64
// CUDA: mlc_softmax<float, 64, 0>(p0, p1, (ctx->rows * 2));
// CUDA: // mlc.kernel k2 rows args=2
// CUDA-NOT: rstd
// CUDA: mlc_layer_norm<float, 64, MLC_ROW_UNIT>(p0, p1, 0, 0, 4, 1.0000000000000001e-05);
// CUDA-NEXT: }
// The gradient's three phases (prelude/rows.cuh) with the column sums'
// chunks, column blocks and block that mlc-cuda-launch chose.
// CUDA: // mlc.kernel k3 rows args=6 scratch=1088 launch=4x64,1x256,1x256
// CUDA: // phase 2: dw, db, the partials in chunk order
// CUDA-NEXT: mlc_layer_norm_grad<float, float, float, 64, MLC_ROW_UNIT | MLC_ROW_RESIDUAL, 1, 1, 256>(p0, p1, p2, p3, p4, 0, p5, 0, 4, 4, 1.0000000000000001e-05, (double *)ctx->scratch, phase);
// CUDA-NEXT: }

// The CUDA printer decides nothing: without the pass's decision it stops.
// UNDECIDED: kernel @k0: no vector decision (run mlc-cuda-vectorize first)
// UNSCHEDULED: kernel @k0: no CUDA schedule (run mlc-cuda-launch)
