// The row and column kernels of kernels.cu: one short template per idea,
// pasted after prelude/cuda.cuh (whose block sums and running log-sum-exp
// they use). A plan kernel of these families is one call: the element
// types, the row length and the variant flags (MLC_ROW_*, mlc_shared.h) are
// template arguments, the row count (ctx->rows where the tokens are
// dynamic), eps and the buffers are the call's.
//
// Rows: a block per row (grid-stride over the rows), the block's threads
// striding the row; block-wide sums in double through warp shuffles, in a
// fixed order. Columns: phase k blocks of (row chunk, column block), a
// thread per column summing its chunk's rows into a partial in scratch,
// phase k + 1 a thread per column adding the partials in chunk order (the
// same bits every run; no atomics). The phases are the schedule's
// (mlc-cuda-launch): a kernel of several runs the one `phase` names.

// The mean and rstd = rsqrt(var + eps) of a row of E elements, element c
// x(c), in double, two passes (the variance around the mean); RMSNorm:
// mean = 0, rstd = rsqrt(mean(x^2) + eps), one pass. rsqrt, since a double
// division's slow path spills a register. Every thread gets them.
template <int64_t E, int F, typename X>
__device__ __forceinline__ void mlc_row_mean_rstd_of(X x, double eps, double *red, double &mean,
                                                     double &rstd) {
  double var = 0;
  if (F & MLC_ROW_RMS) {
    mean = 0;
  } else {
    mean = 0;
    for (int64_t c = threadIdx.x; c < E; c += blockDim.x)
      mean += (double)x(c);
    mean = mlc_block_sum(mean, red) / E;
  }
  for (int64_t c = threadIdx.x; c < E; c += blockDim.x) {
    double d = (double)x(c) - mean;
    var += d * d;
  }
  var = mlc_block_sum(var, red);
  rstd = rsqrt(var / E + eps);
}

// The same of a row in memory, x[c].
template <int64_t E, int F, typename Xe>
__device__ __forceinline__ void mlc_row_mean_rstd(const Xe *x, double eps, double *red,
                                                  double &mean, double &rstd) {
  mlc_row_mean_rstd_of<E, F>([&](int64_t c) { return x[c]; }, eps, red, mean, rstd);
}

// LayerNorm: y = (x - mean) * rstd * w + b per row; RMSNorm (MLC_ROW_RMS):
// y = (T)(x * rstd) * w; MLC_ROW_UNIT: no w, no b. Memory: x read (three
// passes over the row, two from L2), y written; w and b stay in cache:
// 8 bytes per f32 element.
template <typename T, int64_t E, int F>
__device__ void mlc_layer_norm(T *y0, const T *x0, const T *w, const T *b, int64_t R, double eps) {
  __shared__ double red[32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T *x = x0 + r * E;
    T *y = y0 + r * E;
    double mean, rstd;
    mlc_row_mean_rstd<E, F>(x, eps, red, mean, rstd);
    const T rs = (T)rstd, mu = (T)mean;
    for (int64_t c = threadIdx.x; c < E; c += blockDim.x) {
      if (F & MLC_ROW_RMS)
        y[c] = (F & MLC_ROW_UNIT) ? (T)(x[c] * rs) : (T)(x[c] * rs) * w[c];
      else
        y[c] = (F & MLC_ROW_UNIT) ? (x[c] - mu) * rs : (x[c] - mu) * rs * w[c] + b[c];
    }
  }
}

// LayerNorm (RMSNorm) of a pointwise prologue: per row, mlc_layer_norm's
// y = (u - mean) * rstd * w + b (RMSNorm's (T)(u * rstd) * w) of u, the
// prologue of the kernel's inputs (a residual add, a bias, dropout), plus
// a post-norm's h (MLC_ROW_RESIDUAL); one element's math is
// MlcRowNorm's (mlc_shared.h). u(r, c) computes the prologue at
// element c of row r, storing on the way the values the rest of the step
// reads; out(r, c, norm) stores the element, whose value norm(w, b, h) is
// for the weight, bias and residual it reads there. A block per row:
// u goes once into a shared-memory row, its statistics
// (mlc_row_mean_rstd) and y from there; a row longer than 24 KiB
// recomputes u in each pass instead (its stores again, the same values).
// Memory: the prologue's inputs read once (the long row: once per pass),
// its stored values and y written once; u never reaches DRAM.
template <typename T, int64_t E, int F, typename U, typename Out>
__device__ void mlc_layer_norm_fused(int64_t R, double eps, U u, Out out) {
  __shared__ double red[32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    double mean, rstd;
    if constexpr (E * sizeof(T) <= 24 * 1024) {
      __shared__ T row[E];
      for (int64_t c = threadIdx.x; c < E; c += blockDim.x)
        row[c] = u(r, c);
      mlc_row_mean_rstd<E, F>(row, eps, red, mean, rstd);
      const T rs = (T)rstd, mu = (T)mean;
      for (int64_t c = threadIdx.x; c < E; c += blockDim.x)
        out(r, c, MlcRowNorm<T, F>{row[c], mu, rs});
    } else {
      mlc_row_mean_rstd_of<E, F>([&](int64_t c) -> T { return u(r, c); }, eps, red, mean, rstd);
      const T rs = (T)rstd, mu = (T)mean;
      for (int64_t c = threadIdx.x; c < E; c += blockDim.x)
        out(r, c, MlcRowNorm<T, F>{u(r, c), mu, rs});
    }
  }
}

// A norm gradient's weight w[c]; MLC_ROW_PLUS_ONE: 1 + w[c], in T.
template <int F, typename T>
__device__ inline T mlc_row_weight(const T *w, int64_t c) {
  if constexpr ((F & MLC_ROW_PLUS_ONE) != 0)
    return (T)(w[c] + 1);
  else
    return w[c];
}

// LayerNorm's gradient: dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)),
// dxh = g * w, xh = (x - mean) * rstd; dw = sum_r g * xh, db = sum_r g.
// RMSNorm: mean = 0, no mean(dxh) term, no db. MLC_ROW_RESIDUAL: dx = res +
// ..., the residual stream's gradient added in double; MLC_ROW_COPY: dx
// also stored as `copy` (a bf16 copy); MLC_ROW_PLUS_ONE: the weight is
// 1 + w (Gemma's RMSNorm), added in T at the load. g is read in its own
// type TG.
// Phase 0: a block per row writes dx and keeps (mean, rstd) per row in
// scratch; phases 1 and 2: dw and db as the deterministic column sums
// (CHUNKS row chunks, COLS column blocks of BLOCK threads), their partials
// after the statistics. Memory: g and x read twice (rows, then column
// chunks), dx written: 20 bytes per f32 element, plus 16 bytes of
// statistics per row.
template <typename T, typename TG, typename TC, int64_t E, int F, int64_t CHUNKS, int64_t COLS,
          int64_t BLOCK>
__device__ void mlc_layer_norm_grad(T *dx0, T *dw, T *db, const TG *g0, const T *x0, const T *w,
                                    const T *res, TC *copy, int64_t R, int64_t capacity,
                                    double eps, double *scratch, int phase) {
  __shared__ double red[32];
  double *stats = scratch, *part = scratch + 2 * capacity;
  if (phase == 0) {
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
      const TG *g = g0 + r * E;
      const T *x = x0 + r * E;
      T *dx = dx0 + r * E;
      double mean, rstd;
      mlc_row_mean_rstd<E, F>(x, eps, red, mean, rstd);
      if (threadIdx.x == 0) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
      }
      double m1 = 0, m2 = 0;
      for (int64_t c = threadIdx.x; c < E; c += blockDim.x) {
        double xh = (x[c] - mean) * rstd,
               dxh = (F & MLC_ROW_UNIT) ? (double)g[c] : (double)g[c] * mlc_row_weight<F>(w, c);
        if (!(F & MLC_ROW_RMS))
          m1 += dxh;
        m2 += dxh * xh;
      }
      if (!(F & MLC_ROW_RMS))
        m1 = mlc_block_sum(m1, red) / E;
      m2 = mlc_block_sum(m2, red) / E;
      for (int64_t c = threadIdx.x; c < E; c += blockDim.x) {
        double xh = (x[c] - mean) * rstd,
               dxh = (F & MLC_ROW_UNIT) ? (double)g[c] : (double)g[c] * mlc_row_weight<F>(w, c);
        dx[c] = (F & MLC_ROW_RESIDUAL)
                    ? (T)((double)res[r * E + c] + rstd * (dxh - m1 - xh * m2))
                    : (T)(rstd * (dxh - m1 - xh * m2));
        if (F & MLC_ROW_COPY)
          copy[r * E + c] = dx[c];
      }
    }
  }
  if (phase == 1) {
    const int64_t chunk = blockIdx.x / COLS, c = (blockIdx.x % COLS) * BLOCK + threadIdx.x;
    const int64_t per = (R + CHUNKS - 1) / CHUNKS;
    if (c < E) {
      double sw = 0, sb = 0;
      const int64_t r1 = (chunk + 1) * per < R ? (chunk + 1) * per : R;
      for (int64_t r = chunk * per; r < r1; ++r) {
        const double gc = g0[r * E + c];
        sw += gc * (x0[r * E + c] - stats[2 * r]) * stats[2 * r + 1];
        if (!(F & MLC_ROW_RMS))
          sb += gc;
      }
      part[chunk * E + c] = sw;
      if (!(F & MLC_ROW_RMS))
        part[(CHUNKS + chunk) * E + c] = sb;
    }
  }
  if (phase == 2) {
    const int64_t c = MLC_TID;
    if (c < E) {
      double sw = 0, sb = 0;
      for (int64_t q = 0; q < CHUNKS; ++q) {
        sw += part[q * E + c];
        if (!(F & MLC_ROW_RMS))
          sb += part[(CHUNKS + q) * E + c];
      }
      dw[c] = (T)sw;
      if (!(F & MLC_ROW_RMS))
        db[c] = (T)sb;
    }
  }
}

// The max m of row x (C elements) and s = sum exp(x - m) in double, one
// pass (mlc_lse_add), merged across the block (mlc_block_lse): the stable
// log-sum-exp m + log s of softmax, log-softmax, cross-entropy and its
// gradient. Every thread gets them.
template <int64_t C, typename T>
__device__ __forceinline__ void mlc_row_lse(const T *x, T *redm, double *reds, T &m, double &s) {
  m = -mlc_inf<T>();
  s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    mlc_lse_add(m, s, x[c]);
  mlc_block_lse(m, s, redm, reds);
}

// Softmax: y = exp(x - m) / s per row; log-softmax (MLC_ROW_LOG): y = x -
// (m + log s). Memory: x read twice (the second pass mostly from L2), y
// written once: 8 bytes per f32 element from DRAM.
template <typename T, int64_t C, int F>
__device__ void mlc_softmax(T *y0, const T *x0, int64_t R) {
  __shared__ T redm[32];
  __shared__ double reds[32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T *x = x0 + r * C;
    T *y = y0 + r * C;
    T m;
    double s;
    mlc_row_lse<C>(x, redm, reds, m, s);
    if (F & MLC_ROW_LOG) {
      const T lse = m + (T)log(s);
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = x[c] - lse;
    } else {
      const double inv = 1.0 / s;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        y[c] = (T)(mlc_exp(x[c] - m) * inv);
    }
  }
}

// Softmax's gradient: dx = y * (g - sum_c g_c y_c) per row, the dot product
// a block sum in double. Memory: g and y read (twice, the second from L2),
// dx written: 12 bytes per f32 element.
template <typename T, int64_t C>
__device__ void mlc_softmax_grad(T *d0, const T *g0, const T *y0, int64_t R) {
  __shared__ double red[32];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T *g = g0 + r * C, *y = y0 + r * C;
    T *d = d0 + r * C;
    double dot = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      dot += (double)g[c] * y[c];
    dot = mlc_block_sum(dot, red);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      d[c] = y[c] * (g[c] - (T)dot);
  }
}

// Cross-entropy: loss = the mean over the labelled rows (label != IGNORE)
// of m + log s - x[label]. Phase 0: a block per row writes its term and
// whether it counts into scratch (loss[R], used[R]); phase 1: one block
// sums them in order. A label out of range is reported (mlc_report), not
// read. Memory: the logits read once (4 bytes per f32 logit).
template <typename T, typename L, int64_t C, int64_t IGNORE>
__device__ void mlc_cross_entropy(T *out, const T *x0, const L *labels, int64_t R,
                                  int64_t capacity, double *scratch, const MlcKernelCtx *ctx,
                                  int phase) {
  __shared__ T redm[32];
  __shared__ double reds[32];
  double *loss = scratch, *used = loss + capacity;
  if (phase == 0) {
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
      const int64_t label = labels[r];
      if (label == IGNORE || label < 0 || label >= C) {
        if (threadIdx.x == 0) {
          loss[r] = 0;
          used[r] = 0;
          if (label != IGNORE)
            mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, C);
        }
        continue;
      }
      const T *x = x0 + r * C;
      T m;
      double s;
      mlc_row_lse<C>(x, redm, reds, m, s);
      if (threadIdx.x == 0) {
        loss[r] = m + log(s) - x[label];
        used[r] = 1;
      }
    }
  }
  if (phase == 1) {
    double total = 0, count = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      total += loss[r];
      count += used[r];
    }
    total = mlc_block_sum(total, reds);
    count = mlc_block_sum(count, reds);
    if (threadIdx.x == 0)
      out[0] = (T)(count ? total / count : 0.0);
  }
}

// Cross-entropy's gradient d = scale / n * (softmax(x) - onehot(label))
// over the n labelled rows, in its own type TG (a bf16 copy), and with
// MLC_ROW_LOSS the loss as mlc_cross_entropy's. Phase 0 counts the
// labelled rows; phase 1 a block per row writes its gradient (and loss
// term), over the logits when they are dead; phase 2 (MLC_ROW_LOSS) sums
// the terms. Memory: the logits read twice (the second pass mostly from
// L2) and the gradient written once: 8 bytes per f32 logit (6 when the
// gradient is bf16).
template <typename T, typename TG, typename L, int64_t C, int64_t IGNORE, int F>
__device__ void mlc_cross_entropy_grad(T *out, TG *d0, const T *x0, const L *labels,
                                       double scale0, int64_t R, double *scratch,
                                       const MlcKernelCtx *ctx, int phase) {
  __shared__ T redm[32];
  __shared__ double reds[32];
  double *count = scratch, *loss = count + 1;
  if (phase == 0) {
    double n = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x)
      n += labels[r] != IGNORE;
    n = mlc_block_sum(n, reds);
    if (threadIdx.x == 0)
      count[0] = n;
  }
  if (phase == 1) {
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
      const T *x = x0 + r * C;
      TG *d = d0 + r * C;
      const double scale = count[0] ? scale0 / count[0] : 0.0;
      const int64_t label = labels[r];
      if (label == IGNORE || label < 0 || label >= C) {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
          d[c] = 0;
        if ((F & MLC_ROW_LOSS) && threadIdx.x == 0) {
          loss[r] = 0;
          if (label != IGNORE)
            mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, C);
        }
        continue;
      }
      T m;
      double s;
      mlc_row_lse<C>(x, redm, reds, m, s);
      const T xl = x[label];
      __syncthreads(); // every thread has read x[label] before d (maybe x) changes
      const double k = scale / s;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        d[c] = (TG)(mlc_exp(x[c] - m) * k - (c == label ? scale : 0.0));
      if ((F & MLC_ROW_LOSS) && threadIdx.x == 0)
        loss[r] = m + log(s) - xl;
    }
  }
  if ((F & MLC_ROW_LOSS) && phase == 2) {
    double total = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x)
      total += loss[r];
    total = mlc_block_sum(total, reds);
    if (threadIdx.x == 0)
      out[0] = (T)(count[0] ? total / count[0] : 0.0);
  }
}

// Embedding: y[r, c] = table[ids[r], c], a thread per output element (an
// id out of range is reported and row 0 read). Memory: the ids, the
// selected rows of the table and y: 8 bytes per f32 element.
template <typename T, typename I, int64_t V, int64_t E>
__device__ void mlc_embedding(T *y, const T *table, const I *ids, int64_t R,
                              const MlcKernelCtx *ctx) {
  const int64_t n = (int64_t)R * E;
  for (int64_t i = MLC_TID; i < n; i += MLC_STRIDE) {
    const int64_t r = i / E, c = i % E;
    int64_t t = ids[r];
    if (t < 0 || t >= V) {
      if (c == 0)
        mlc_report(ctx, MLC_ERR_TOKEN_RANGE, r, t, V);
      t = 0;
    }
    y[i] = table[t * E + c];
  }
}

// Its gradient: dtable[ids[r], c] += dy[r, c] (ids out of range and the
// padding id PAD, if >= 0, skipped). Phase 0 zeroes the table (none when
// the kernel adds to it as it is: ACCUMULATE); the scatter's phase: blocks
// of (vocabulary chunk of PER ids, column block of BLOCK columns, COLS of
// them), a thread per column adding, in token order, the rows of the
// tokens whose id falls in its chunk: no two threads add to one element
// and no atomics, so the sums are reproducible. Memory: the table written
// twice (zeros, then sums), every chunk reads all ids and dy's rows of its
// tokens.
template <typename T, typename I, int64_t V, int64_t E, int64_t PAD, bool ACCUMULATE, int64_t PER,
          int64_t COLS, int64_t BLOCK>
__device__ void mlc_embedding_grad(T *dtable, const T *dy, const I *ids, int64_t R, int phase) {
  if (!ACCUMULATE && phase == 0)
    for (int64_t i = MLC_TID; i < V * E; i += MLC_STRIDE)
      dtable[i] = 0;
  if (phase == (ACCUMULATE ? 0 : 1)) {
    const int64_t v0 = (blockIdx.x / COLS) * PER, c = (blockIdx.x % COLS) * BLOCK + threadIdx.x;
    if (c < E)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t t = ids[r];
        if (t >= v0 && t < v0 + PER && t < V && (PAD < 0 || t != PAD))
          dtable[t * E + c] += dy[r * E + c];
      }
  }
}

// The identity of max: -inf, or the least int64_t.
template <typename ACC> __device__ __forceinline__ ACC mlc_lowest() { return -mlc_inf<ACC>(); }
template <> __device__ __forceinline__ int64_t mlc_lowest<int64_t>() {
  return -9223372036854775807ll - 1;
}

// Reductions over the last dimension: y[r] = sum (mean, max) of row r's L
// elements, accumulated in ACC (double; int64_t for integers), K one of
// MLC_REDUCE_*; a block per row. Memory: the input read once, the output
// written once.
template <typename T, typename ACC, int64_t L, int K, int64_t COUNT>
__device__ void mlc_reduce_rows(T *y, const T *x0, int64_t R) {
  __shared__ ACC red[32];
  const ACC init = K == MLC_REDUCE_MAX ? mlc_lowest<ACC>() : (ACC)0;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    ACC a = init;
    const T *x = x0 + r * L;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
      ACC v = x[j];
      if (K == MLC_REDUCE_MAX)
        a = a > v ? a : v;
      else
        a += v;
    }
    a = K == MLC_REDUCE_MAX ? mlc_block_max(a, red) : mlc_block_sum(a, red);
    if (threadIdx.x == 0)
      y[r] = (T)(K == MLC_REDUCE_MEAN ? a / COUNT : a);
  }
}

// Column sums (means): y[c] = sum_r x[r, c]. Phase 0: blocks of (row
// chunk, column block), a thread per column summing its chunk's rows into
// partial[chunk][c] in scratch; phase 1: a thread per column adds the
// partials in chunk order. Memory: the input read once (coalesced along
// c), CHUNKS x C partials written and read back, the C results written.
template <typename T, typename ACC, int64_t C, int K, int64_t COUNT, int64_t CHUNKS, int64_t COLS,
          int64_t BLOCK>
__device__ void mlc_reduce_columns(T *y, const T *x0, int64_t R, ACC *part, int phase) {
  if (phase == 0) {
    const int64_t chunk = blockIdx.x / COLS, c = (blockIdx.x % COLS) * BLOCK + threadIdx.x;
    const int64_t per = (R + CHUNKS - 1) / CHUNKS;
    if (c < C) {
      ACC a = 0;
      const int64_t r1 = (chunk + 1) * per < R ? (chunk + 1) * per : R;
      for (int64_t r = chunk * per; r < r1; ++r)
        a += x0[r * C + c];
      part[chunk * C + c] = a;
    }
  }
  if (phase == 1) {
    const int64_t c = MLC_TID;
    if (c < C) {
      ACC a = 0;
      for (int64_t q = 0; q < CHUNKS; ++q)
        a += part[q * C + c];
      y[c] = (T)(K == MLC_REDUCE_MEAN ? a / COUNT : a);
    }
  }
}
