// The kernels of kernels.cu over the flat parameter, gradient and moment
// buffers: the AdamW update and the gradient's L2 norm, pasted after
// prelude/cuda.cuh. A plan kernel of either is one call: the element type,
// the number of segments (and the norm's block count) are template
// arguments; the segment table (`seg`, {offset, count[, decay]} rows, one
// per run of parameters that are contiguous in the flat buffers) and the
// element code, the plan kernel's scalar body as a lambda, are the call's.

// Segment `seg` ({offset, count, ...}) clipped to window w of this launch
// (mlc_window: the whole flat buffers, or one of this rank's shards under
// the distributed optimizer): elements [lo, hi) of the flat buffers, their
// moments from element `moment` of this rank's moment buffers on. False
// where the two do not meet.
__device__ __forceinline__ bool mlc_segment_window(const MlcKernelCtx *ctx, const int64_t *seg,
                                                   int64_t w, int64_t &lo, int64_t &hi,
                                                   int64_t &moment) {
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
// scalars the lambda's. One launch, a grid-stride loop per segment.
// Memory: p, m, v and g read, p, m and v written: 28 bytes per f32
// parameter, the kernel's whole cost (bandwidth-bound).
template <typename T, int S, typename F>
__device__ void mlc_adamw(T *P, T *M, T *V, const T *G, const int64_t (*seg)[3], T decay_on,
                          const MlcKernelCtx *ctx, F update) {
  const int64_t nw = ctx->nwin ? ctx->nwin : 1;
  for (int s = 0; s < S; ++s)
    for (int64_t w = 0; w < nw; ++w) {
      int64_t lo, hi, moment;
      if (!mlc_segment_window(ctx, seg[s], w, lo, hi, moment))
        continue;
      const int64_t n = hi - lo;
      const T decay = seg[s][2] ? decay_on : (T)1;
      T *p = P + lo, *m = M + moment, *v = V + moment;
      const T *g = G + lo;
      for (int64_t i = MLC_TID; i < n; i += MLC_STRIDE)
        update(p[i], m[i], v[i], g[i], decay);
    }
}

// The global gradient norm, out[0] = sqrt(sum_i value(g_i)), value the
// plan's element code (g_i^2 in double). Phase 0: a grid-stride sum per
// thread, a block sum per block into scratch (BLOCKS doubles); phase 1:
// one block adds them in block order, so a run gives the same bits every
// time. Memory: every gradient read once (4 bytes per f32).
template <typename T, int S, int64_t BLOCKS, typename F>
__device__ void mlc_grad_norm(double *out, const T *G, const int64_t (*seg)[2], double *part,
                              const MlcKernelCtx *ctx, int phase, F value) {
  __shared__ double red[32];
  if (phase == 0) {
    double sum = 0;
    const int64_t nw = ctx->nwin ? ctx->nwin : 1;
    for (int s = 0; s < S; ++s)
      for (int64_t w = 0; w < nw; ++w) {
        int64_t lo, hi, moment;
        if (!mlc_segment_window(ctx, seg[s], w, lo, hi, moment))
          continue;
        const T *g = G + lo;
        const int64_t n = hi - lo;
        for (int64_t i = MLC_TID; i < n; i += MLC_STRIDE)
          sum += value(g[i]);
      }
    sum = mlc_block_sum(sum, red);
    if (threadIdx.x == 0)
      part[blockIdx.x] = sum;
  }
  if (phase == 1) {
    double s = 0;
    for (int64_t q = threadIdx.x; q < BLOCKS; q += blockDim.x)
      s += part[q];
    s = mlc_block_sum(s, red);
    if (threadIdx.x == 0)
      out[0] = sqrt(s);
  }
}
