// The reductions of kernels.cu that prelude/rows.cuh's row and column
// templates do not cover, pasted after it: column sums of a fused body (a
// bias gradient computed by its producer's element code) and a reduction
// over any set of axes. A plan kernel of either is one call.

// Column sums of a body: y[c] = sum_r term(r, c), term the plan kernel's
// element code as a lambda (r, c, flat = r * C + c, sum), which adds the
// element's value at (r, c) to `sum` (in double). Phase 0: blocks of (row
// chunk, column block), COLS column blocks of BLOCK threads, a thread per
// column summing its chunk's rows into partial[chunk][c] in scratch; phase
// 1: a thread per column adds the CHUNKS partials in chunk order
// (deterministic). Memory: the body's inputs read once (coalesced along c),
// CHUNKS x C doubles of partials written and read back, the C sums written.
template <typename T, int64_t C, int64_t CHUNKS, int64_t COLS, int64_t BLOCK, typename F>
__device__ void mlc_column_sums(T *y, int64_t R, double *part, int phase, F term) {
  if (phase == 0) {
    const int64_t chunk = blockIdx.x / COLS, c = (blockIdx.x % COLS) * BLOCK + threadIdx.x;
    const int64_t per = (R + CHUNKS - 1) / CHUNKS;
    if (c < C) {
      double sum = 0;
      const int64_t r1 = (chunk + 1) * per < R ? (chunk + 1) * per : R;
      for (int64_t r = chunk * per; r < r1; ++r)
        term(r, c, r * C + c, sum);
      part[chunk * C + c] = sum;
    }
  }
  if (phase == 1) {
    const int64_t c = MLC_TID;
    if (c < C) {
      double s = 0;
      for (int64_t q = 0; q < CHUNKS; ++q)
        s += part[q * C + c];
      y[c] = (T)s;
    }
  }
}

// A reduction over any axes: y[r] = sum (mean, max; K one of MLC_REDUCE_*)
// of x[base(r) + off(j)] over the N reduced elements j, accumulated in ACC
// (double; int64_t for integers) in order. axes holds {size, stride} of the
// KEPT kept axes, then of the reduced ones, the last fastest: base(r) and
// off(j) are r's and j's digits in those sizes times the strides. A thread
// per output, grid-stride. Memory: the input read once (strided), the
// output written once.
template <typename T, typename ACC, int K, int64_t COUNT, int64_t OUTPUTS, int64_t N, int KEPT,
          int REDUCED>
__device__ void mlc_reduce_axes(T *y, const T *x, const int64_t (*axes)[2]) {
  for (int64_t r = MLC_TID; r < OUTPUTS; r += MLC_STRIDE) {
    int64_t base = 0, rem = r;
#pragma unroll
    for (int d = KEPT - 1; d >= 0; --d) {
      base += (rem % axes[d][0]) * axes[d][1];
      rem /= axes[d][0];
    }
    ACC a = K == MLC_REDUCE_MAX ? mlc_lowest<ACC>() : (ACC)0;
    for (int64_t j = 0; j < N; ++j) {
      int64_t off = 0, rj = j;
#pragma unroll
      for (int d = KEPT + REDUCED - 1; d >= KEPT; --d) {
        off += (rj % axes[d][0]) * axes[d][1];
        rj /= axes[d][0];
      }
      const ACC v = x[base + off];
      if (K == MLC_REDUCE_MAX)
        a = a > v ? a : v;
      else
        a += v;
    }
    y[r] = (T)(K == MLC_REDUCE_MEAN ? a / COUNT : a);
  }
}
