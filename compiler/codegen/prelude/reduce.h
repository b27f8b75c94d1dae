// The reductions of kernels.cpp that prelude/rows.h's row and column
// templates do not cover, pasted after it: column sums of a fused body (a
// bias gradient computed by its producer's element code) and a reduction
// over any set of axes. A plan kernel of either is one call.

// Column sums of a body: y[c] = sum_r term(r, c), term the plan kernel's
// element code as a lambda (r, c, flat = r * C + c, sum), which adds the
// element's value at (r, c) to `sum` (in double). Rows are shared out
// among threads; each thread sums its rows into its own C partials, and
// the partials are added in thread order, so results do not depend on
// timing. Memory: the body's inputs read once, nthreads x C doubles of
// partials, the C sums written.
template <typename T, int64_t C, typename F>
static void mlc_column_sums(T *y, int64_t R, F term) {
  const int nt = omp_get_max_threads();
  std::vector<double> part((size_t)nt * C, 0.0);
#pragma omp parallel
  {
    double *acc = part.data() + (size_t)omp_get_thread_num() * C;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        term(r, c, r * C + c, acc[c]);
  }
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int t = 0; t < nt; ++t)
      s += part[(size_t)t * C + c];
    y[c] = (T)s;
  }
}

// A reduction over any axes: y[r] = sum (mean, max; K one of MLC_REDUCE_*)
// of x[base(r) + off(j)] over the N reduced elements j, accumulated in ACC
// (double; int64_t for integers) in order. axes holds {size, stride} of the
// KEPT kept axes, then of the reduced ones, the last fastest: base(r) and
// off(j) are r's and j's digits in those sizes times the strides. Outputs
// are shared out among threads where there are 4 or more. Memory: the
// input read once (strided), the output written once.
template <typename T, typename ACC, int K, int64_t COUNT, int64_t OUTPUTS, int64_t N, int KEPT,
          int REDUCED>
static void mlc_reduce_axes(T *y, const T *x, const int64_t (*axes)[2]) {
#pragma omp parallel for if (OUTPUTS >= 4)
  for (int64_t r = 0; r < OUTPUTS; ++r) {
    int64_t base = 0, rem = r;
    for (int d = KEPT - 1; d >= 0; --d) {
      base += (rem % axes[d][0]) * axes[d][1];
      rem /= axes[d][0];
    }
    // max's identity: -inf, or the least int64_t.
    ACC a = K != MLC_REDUCE_MAX ? 0
            : std::numeric_limits<ACC>::has_infinity ? -std::numeric_limits<ACC>::infinity()
                                                     : std::numeric_limits<ACC>::min();
    for (int64_t j = 0; j < N; ++j) {
      int64_t off = 0, rj = j;
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
