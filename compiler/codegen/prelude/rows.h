// The row and column kernels of kernels.cpp: one short template per idea,
// pasted after prelude/cpu.h. A plan kernel of these families is one call:
// the element types, the row length and the variant flags (MLC_ROW_*,
// mlc_shared.h) are template arguments (the row length a constant, so the
// host compiler vectorizes each row loop for it), the row count
// (ctx->rows where the tokens are dynamic), eps and the buffers are the
// call's. Rows are shared out among OpenMP threads; each row's sums run in
// `omp simd` lanes in a fixed order.

#include <type_traits>

// The mean and rstd = 1 / sqrt(var + eps) of row x (E elements), in double,
// two passes (the variance around the mean): LayerNorm and its gradient,
// fused or not. RMSNorm (MLC_ROW_RMS): one pass, mean = 0 and rstd =
// 1 / sqrt(mean(x^2) + eps).
template <int64_t E, int F, typename Xe>
static inline void mlc_row_mean_rstd(const Xe *x, double eps, double &mean_, double &rstd) {
  if (F & MLC_ROW_RMS) {
    double var = 0;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < E; ++c) { double d = x[c]; var += d * d; }
    mean_ = 0;
    rstd = 1.0 / std::sqrt(var / E + eps);
    return;
  }
  double mean = 0, var = 0;
#pragma omp simd reduction(+ : mean)
  for (int64_t c = 0; c < E; ++c) mean += x[c];
  mean /= E;
#pragma omp simd reduction(+ : var)
  for (int64_t c = 0; c < E; ++c) { double d = x[c] - mean; var += d * d; }
  mean_ = mean;
  rstd = 1.0 / std::sqrt(var / E + eps);
}

// LayerNorm: y = (x - mean) * rstd * w + b per row (statistics in double);
// RMSNorm: y = (x * rstd) * w, x * rstd rounded to T first; MLC_ROW_UNIT:
// no w, no b. Memory: x read, y written (w and b stay in cache): 8 bytes
// per f32 element.
template <typename T, int64_t E, int F>
static void mlc_layer_norm(T *y0, const T *x0, const T *w, const T *b, int64_t R, double eps) {
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    const T *x = x0 + r * E;
    T *y = y0 + r * E;
    double mean, rstd;
    mlc_row_mean_rstd<E, F>(x, eps, mean, rstd);
    const T rs = (T)rstd, mu = (T)mean;
    for (int64_t c = 0; c < E; ++c) {
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
// for the weight, bias and residual it reads there. Each row's u goes
// once into a row buffer on the thread's stack, its statistics
// (mlc_row_mean_rstd) and y from there. Memory: the prologue's inputs read
// once, its stored values and y written once; u never reaches memory.
template <typename T, int64_t E, int F, typename U, typename Out>
static void mlc_layer_norm_fused(int64_t R, double eps, U u, Out out) {
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    T row[E];
    for (int64_t c = 0; c < E; ++c) row[c] = u(r, c);
    double mean, rstd;
    mlc_row_mean_rstd<E, F>(row, eps, mean, rstd);
    const T rs = (T)rstd, mu = (T)mean;
    for (int64_t c = 0; c < E; ++c) out(r, c, MlcRowNorm<T, F>{row[c], mu, rs});
  }
}

// A norm gradient's weight w[c]; MLC_ROW_PLUS_ONE: 1 + w[c], in T.
template <int F, typename T>
static inline T mlc_row_weight(const T *w, int64_t c) {
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
// The rows in parallel, keeping (mean, rstd) per row; then dw and db, each
// thread a block of 64 columns walking the rows (the inner loop contiguous
// and vectorized, every column still summed in row order). Memory: g and
// x read twice (rows, then column blocks), dx written: 20 bytes per f32
// element.
template <typename T, typename TG, typename TC, int64_t E, int F>
static void mlc_layer_norm_grad(T *dx0, T *dw_, T *db_, const TG *g0, const T *x0, const T *w,
                                const T *res, TC *copy, int64_t R, int64_t capacity,
                                double eps) {
  std::vector<double> stats(2 * capacity);
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    const TG *g = g0 + r * E;
    const T *x = x0 + r * E;
    T *dx = dx0 + r * E;
    double mean, rstd;
    mlc_row_mean_rstd<E, F>(x, eps, mean, rstd);
    stats[2 * r] = mean; stats[2 * r + 1] = rstd;
    double m1 = 0, m2 = 0;
#pragma omp simd reduction(+ : m1, m2)
    for (int64_t c = 0; c < E; ++c) {
      double xh = (x[c] - mean) * rstd,
             dxh = (F & MLC_ROW_UNIT) ? (double)g[c] : (double)g[c] * mlc_row_weight<F>(w, c);
      m1 += dxh; m2 += dxh * xh;
    }
    if (F & MLC_ROW_RMS) { m1 = 0; m2 /= E; } else { m1 /= E; m2 /= E; }
    for (int64_t c = 0; c < E; ++c) {
      double xh = (x[c] - mean) * rstd,
             dxh = (F & MLC_ROW_UNIT) ? (double)g[c] : (double)g[c] * mlc_row_weight<F>(w, c);
      dx[c] = (F & MLC_ROW_RESIDUAL) ? (T)((double)res[r * E + c] + rstd * (dxh - m1 - xh * m2))
                                     : (T)(rstd * (dxh - m1 - xh * m2));
      if (F & MLC_ROW_COPY) copy[r * E + c] = dx[c];
    }
  }
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < E; c0 += 64) {
    const int64_t c1 = c0 + 64 < E ? c0 + 64 : E;
    double dw[64] = {0}, db[64] = {0};
    for (int64_t r = 0; r < R; ++r) {
      const TG *g = g0 + r * E;
      const T *x = x0 + r * E;
      const double mean = stats[2 * r], rstd = stats[2 * r + 1];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        const double gc = g[c];
        dw[c - c0] += gc * (x[c] - mean) * rstd; db[c - c0] += gc;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dw_[c] = (T)dw[c - c0];
      if (!(F & MLC_ROW_RMS)) db_[c] = (T)db[c - c0];
    }
  }
}

// exp in the element type: the prelude's call-free, vectorizable one for
// f32, libm's for f64 (whose results the gradient checks compare).
static inline float mlc_row_exp(float x) { return mlc_expf(x); }
static inline double mlc_row_exp(double x) { return std::exp(x); }

// The max m of row x (C elements) and s = sum exp(x - m): the stable
// log-sum-exp m + log s of softmax, log-softmax, cross-entropy and its
// gradient. s runs in blocks of 256 terms added in T (16 per vector lane),
// then in double: one widening per block, not per term. With `store`,
// exp(x - m) is also written to store[c], so a gradient scales it in place
// instead of computing it again.
template <int64_t C, typename T>
static inline void mlc_row_lse(const T *x, T *store, T &m_, double &s_) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t c = 1; c < C; ++c) m = x[c] > m ? x[c] : m;
  double s = 0;
  for (int64_t c0 = 0; c0 < C; c0 += 256) {
    const int64_t c1 = c0 + 256 < C ? c0 + 256 : C;
    T part = 0;
    if (store) {
#pragma omp simd reduction(+ : part)
      for (int64_t c = c0; c < c1; ++c) { store[c] = mlc_row_exp(x[c] - m); part += store[c]; }
    } else {
#pragma omp simd reduction(+ : part)
      for (int64_t c = c0; c < c1; ++c) part += mlc_row_exp(x[c] - m);
    }
    s += part;
  }
  m_ = m;
  s_ = s;
}

// Softmax: y = exp(x - m) / s per row, the exps stored in y and scaled in
// place; log-softmax (MLC_ROW_LOG): y = x - (m + log s). Memory: x read
// once from memory (the later passes find the row in cache), y written
// once: 8 bytes per f32 element.
template <typename T, int64_t C, int F>
static void mlc_softmax(T *y0, const T *x0, int64_t R) {
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    const T *x = x0 + r * C;
    T *y = y0 + r * C;
    T m;
    double s;
    mlc_row_lse<C>(x, (F & MLC_ROW_LOG) ? (T *)0 : y, m, s);
    if (F & MLC_ROW_LOG) {
      T lse = m + (T)std::log(s);
      for (int64_t c = 0; c < C; ++c) y[c] = x[c] - lse;
    } else {
      T inv = (T)(1.0 / s);
      for (int64_t c = 0; c < C; ++c) y[c] *= inv;
    }
  }
}

// Softmax's gradient: dx = y * (g - sum_c g_c y_c) per row. Memory: g and
// y read, dx written: 12 bytes per f32 element.
template <typename T, int64_t C>
static void mlc_softmax_grad(T *d0, const T *g0, const T *y0, int64_t R) {
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    const T *g = g0 + r * C, *y = y0 + r * C;
    T *d = d0 + r * C;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c) dot += g[c] * y[c];
    for (int64_t c = 0; c < C; ++c) d[c] = y[c] * (g[c] - (T)dot);
  }
}

// Cross-entropy: loss = the mean over the labelled rows (label != IGNORE)
// of m + log s - x[label]; a label out of range is reported (mlc_report),
// not read. Memory: the logits read once (4 bytes per f32 logit).
template <typename T, typename L, int64_t C, int64_t IGNORE>
static void mlc_cross_entropy(T *out, const T *x0, const L *labels, int64_t R, MlcKernelCtx *ctx) {
  double total = 0;
  int64_t count = 0;
#pragma omp parallel for reduction(+ : total, count)
  for (int64_t r = 0; r < R; ++r) {
    int64_t label = labels[r];
    if (label == IGNORE) continue;
    if (label < 0 || label >= C) { mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, C); continue; }
    const T *x = x0 + r * C;
    T m;
    double s;
    mlc_row_lse<C>(x, (T *)0, m, s);
    total += m + std::log(s) - x[label];
    ++count;
  }
  out[0] = (T)(count ? total / count : 0.0);
}

// The number of labelled rows (label != IGNORE) of R.
template <typename L, int64_t IGNORE> static inline int64_t mlc_labelled(const L *labels, int64_t R) {
  int64_t count = 0;
  for (int64_t r = 0; r < R; ++r) count += labels[r] != IGNORE;
  return count;
}

// Cross-entropy and its gradient in one pass: the loss as
// mlc_cross_entropy's, d = scale / n * (softmax(x) - onehot(label)) over
// the n labelled rows, in its own type TG. exp(x - m) is computed once,
// into the gradient row, then scaled in place (the row stays in cache
// between the two passes); a gradient of another type (bf16) takes them
// from a row of the thread's own in T. Memory: the logits read once and
// the gradient written once (over the logits when they are dead: no
// second buffer's traffic), 8 bytes per f32 logit; the exps make it
// compute-bound at a vocabulary of 8192 on two cores.
template <typename T, typename TG, typename L, int64_t C, int64_t IGNORE>
static void mlc_cross_entropy_with_grad(T *out, TG *d0, const T *x0, const L *labels,
                                        double scale0, int64_t R, MlcKernelCtx *ctx) {
  const int64_t count = mlc_labelled<L, IGNORE>(labels, R);
  const double scale = count ? scale0 / count : 0.0;
  double total = 0;
#pragma omp parallel for reduction(+ : total)
  for (int64_t r = 0; r < R; ++r) {
    const T *x = x0 + r * C;
    TG *d = d0 + r * C;
    int64_t label = labels[r];
    if (label == IGNORE) { for (int64_t c = 0; c < C; ++c) d[c] = 0; continue; }
    if (label < 0 || label >= C) {
      mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, C);
      for (int64_t c = 0; c < C; ++c) d[c] = 0;
      continue;
    }
    const double xl = x[label];
    T m;
    double s;
    if constexpr (std::is_same<T, TG>::value) {
      mlc_row_lse<C>(x, d, m, s);
      total += m + std::log(s) - xl;
      const T k = (T)(scale / s);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) d[c] *= k;
      d[label] -= (T)scale;
    } else {
      static thread_local std::vector<T> exps;
      exps.resize(C);
      T *e = exps.data();
      mlc_row_lse<C>(x, e, m, s);
      total += m + std::log(s) - xl;
      const T k = (T)(scale / s);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) d[c] = e[c] * k;
      d[label] = e[label] * k - (T)scale;
    }
  }
  out[0] = (T)(count ? total / count : 0.0);
}

// Cross-entropy's gradient alone: d = scale / n * (softmax(x) -
// onehot(label)), the exps stored in d and scaled in place. Memory: the
// logits read once, the gradient written once: 8 bytes per f32 logit.
template <typename T, typename L, int64_t C, int64_t IGNORE>
static void mlc_cross_entropy_grad(T *d0, const T *x0, const L *labels, double scale0, int64_t R) {
  const int64_t count = mlc_labelled<L, IGNORE>(labels, R);
  const double scale = count ? scale0 / count : 0.0;
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    const T *x = x0 + r * C;
    T *d = d0 + r * C;
    int64_t label = labels[r];
    if (label == IGNORE || label < 0 || label >= C) { for (int64_t c = 0; c < C; ++c) d[c] = 0; continue; }
    T m;
    double s;
    mlc_row_lse<C>(x, d, m, s);
    const double inv = 1.0 / s;
    for (int64_t c = 0; c < C; ++c) d[c] = (T)(d[c] * inv * scale);
    d[label] -= (T)scale;
  }
}

// Embedding: y[r, :] = table[ids[r], :], a row copy per token (an id out of
// range is reported and row 0 read). Memory: the ids, the selected rows of
// the table and y: 8 bytes per f32 element.
template <typename T, typename I, int64_t V, int64_t E>
static void mlc_embedding(T *y, const T *table, const I *ids, int64_t R, MlcKernelCtx *ctx) {
#pragma omp parallel for
  for (int64_t r = 0; r < R; ++r) {
    int64_t t = ids[r];
    if (t < 0 || t >= V) { mlc_report(ctx, MLC_ERR_TOKEN_RANGE, r, t, V); t = 0; }
    std::memcpy(y + r * E, table + t * E, E * sizeof(*y));
  }
}

// Its gradient: dtable[ids[r], :] += dy[r, :] (ids out of range and the
// padding id PAD, if >= 0, skipped), the table zeroed first unless the
// kernel adds to it as it is (ACCUMULATE). Each thread owns a block of 64
// columns and adds the rows in token order: no two threads add to one
// element, and the sums are reproducible. Memory: the table written (and
// zeroed), dy read once, the ids once per column block.
template <typename T, typename I, int64_t V, int64_t E, int64_t PAD, bool ACCUMULATE>
static void mlc_embedding_grad(T *dtable, const T *dy, const I *ids, int64_t R) {
  if (!ACCUMULATE) std::memset(dtable, 0, V * E * sizeof(*dtable));
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < E; c0 += 64) {
    const int64_t c1 = c0 + 64 < E ? c0 + 64 : E;
    for (int64_t r = 0; r < R; ++r) {
      int64_t t = ids[r];
      if (t < 0 || t >= V) continue;
      if (PAD >= 0 && t == PAD) continue;
      for (int64_t c = c0; c < c1; ++c) dtable[t * E + c] += dy[r * E + c];
    }
  }
}

// Reductions over the last dimension: y[r] = sum (mean, max) of row r's L
// elements, accumulated in ACC (double; int64_t for integers), K one of
// MLC_REDUCE_*; rows shared out among threads where `parallel`. Memory:
// the input read once, the output written once.
template <typename T, typename ACC, int64_t L, int K, int64_t COUNT>
static void mlc_reduce_rows(T *y, const T *x0, int64_t R, bool parallel) {
#pragma omp parallel for if (parallel)
  for (int64_t r = 0; r < R; ++r) {
    // max's identity: -inf, or the least int64_t.
    ACC a = K != MLC_REDUCE_MAX ? 0
            : std::numeric_limits<ACC>::has_infinity ? -std::numeric_limits<ACC>::infinity()
                                                     : std::numeric_limits<ACC>::min();
    const T *x = x0 + r * L;
    if (K == MLC_REDUCE_MAX) {
#pragma omp simd reduction(max : a)
      for (int64_t j = 0; j < L; ++j) { ACC v = x[j]; a = a > v ? a : v; }
    } else {
#pragma omp simd reduction(+ : a)
      for (int64_t j = 0; j < L; ++j) { ACC v = x[j]; a += v; }
    }
    y[r] = (T)(K == MLC_REDUCE_MEAN ? a / COUNT : a);
  }
}

// Column sums (means): y[c] = sum_r x[r, c]. Each thread owns a block of
// 256 columns and walks the rows, so the inner loop is contiguous and no
// two threads share an output. Memory: the input read once, the output
// written once.
template <typename T, typename ACC, int64_t C, int K, int64_t COUNT>
static void mlc_reduce_columns(T *y, const T *x0, int64_t R) {
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < C; c0 += 256) {
    const int64_t c1 = c0 + 256 < C ? c0 + 256 : C;
    ACC a[256] = {0};
    for (int64_t r = 0; r < R; ++r) {
      const T *x = x0 + r * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) a[c - c0] += x[c];
    }
    for (int64_t c = c0; c < c1; ++c) { ACC s = a[c - c0]; y[c] = (T)(K == MLC_REDUCE_MEAN ? s / COUNT : s); }
  }
}
