// The kernels of kernels.cpp over the flat parameter, gradient and moment
// buffers: the AdamW update and the gradient's L2 norm, pasted after
// prelude/cpu.h. A plan kernel of either is one call: the element type and
// the number of segments are template arguments; the segment table
// (`seg`, {offset, count[, decay]} rows, one per run of parameters that
// are contiguous in the flat buffers) and the element code, the plan
// kernel's scalar body as a lambda, are the call's.

// Segment `seg` ({offset, count, ...}) clipped to window w of this launch
// (mlc_window: the whole flat buffers, or one of this rank's shards under
// the distributed optimizer): elements [lo, hi) of the flat buffers, their
// moments from element `moment` of this rank's moment buffers on. False
// where the two do not meet.
static inline bool mlc_segment_window(const MlcKernelCtx *ctx, const int64_t *seg, int64_t w,
                                      int64_t &lo, int64_t &hi, int64_t &moment) {
  int64_t w0, wn, wm;
  mlc_window(ctx, w, w0, wn, wm);
  lo = seg[0] > w0 ? seg[0] : w0;
  hi = seg[0] + seg[1] < w0 + wn ? seg[0] + seg[1] : w0 + wn;
  moment = wm + (lo - w0);
  return lo < hi;
}

// AdamW (contract/OptimizerScalars.h): per element, update(p, m, v, g,
// decay) runs the plan's update in place, with g' = g scale:
//   m = beta1 m + (1 - beta1) g',  v = beta2 v + ((1 - beta2) g') g',
//   p = p decay - step_size m / (sqrt(v) inv_sqrt_bc2 + eps),
// decay the segment's (decay_on where seg[s][2], else 1) and the step's
// scalars the lambda's. One parallel region for
// every segment: the segments are work-shared `omp for simd` loops without
// barriers between them, so the update is a single pass over memory.
// Memory: p, m, v and g read, p, m and v written: 28 bytes per f32
// parameter, the kernel's whole cost.
template <typename T, int S, typename F>
static void mlc_adamw(T *P, T *M, T *V, const T *G, const int64_t (*seg)[3], T decay_on,
                      MlcKernelCtx *ctx, F update) {
  const int64_t nw = ctx->nwin ? ctx->nwin : 1;
#pragma omp parallel
  for (int s = 0; s < S; ++s)
    for (int64_t w = 0; w < nw; ++w) {
      int64_t lo, hi, moment;
      if (!mlc_segment_window(ctx, seg[s], w, lo, hi, moment))
        continue;
      const int64_t n = hi - lo;
      const T decay = seg[s][2] ? decay_on : (T)1;
      T *__restrict p = P + lo;
      T *__restrict m = M + moment;
      T *__restrict v = V + moment;
      const T *__restrict g = G + lo;
#pragma omp for simd schedule(static) nowait
      for (int64_t i = 0; i < n; ++i)
        update(p[i], m[i], v[i], g[i], decay);
    }
}

// The global gradient norm, out[0] = sqrt(sum_i value(g_i)), value the
// plan's element code (g_i^2 in double). Chunks of 4096 elements shared
// out among threads, each summed by an `omp simd` reduction (a scalar
// chain of double adds would be latency-bound, not memory-bound), the
// chunks' sums added per thread, the threads' by OpenMP. Memory: every
// gradient read once (4 bytes per f32).
template <typename T, int S, typename F>
static void mlc_grad_norm(double *out, const T *G, const int64_t (*seg)[2], MlcKernelCtx *ctx,
                          F value) {
  double sum = 0;
  const int64_t nw = ctx->nwin ? ctx->nwin : 1;
#pragma omp parallel reduction(+ : sum)
  for (int s = 0; s < S; ++s)
    for (int64_t w = 0; w < nw; ++w) {
      int64_t lo, hi, moment;
      if (!mlc_segment_window(ctx, seg[s], w, lo, hi, moment))
        continue;
      const T *__restrict g = G + lo;
      const int64_t n = hi - lo, chunks = (n + 4095) / 4096;
#pragma omp for schedule(static) nowait
      for (int64_t q = 0; q < chunks; ++q) {
        const int64_t i1 = (q + 1) * 4096 < n ? (q + 1) * 4096 : n;
        double part = 0;
#pragma omp simd reduction(+ : part)
        for (int64_t i = q * 4096; i < i1; ++i)
          part += value(g[i]);
        sum += part;
      }
    }
  out[0] = std::sqrt(sum);
}
