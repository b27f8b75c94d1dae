// Attention for the CPU: the templates CpuTarget::attention instantiates.
//
// This file follows prelude/cpu.h in every kernels.cpp (it uses its
// MlcKernelCtx, mlc_expf, mlc_pack and mlc_gemm, and mlc_shared.h's
// MlcAttention, MlcAttentionArgs and dropout generator) and is embedded at
// build time like it; a test compiles the two alone, with instantiations.
// A plan kernel's attention is one call: the sizes as an MlcAttention
// literal, the buffers, and at compile time only the element type and the
// variant flags (MLC_ATTN_*: code they select) and the head dimensions.
//
// Per (batch, head) or (sequence, head), shared out among threads, in
// tiles of 64 query rows: S = scale Q_t K^T over the keys the tile sees
// (causal tiles stop at their last row's diagonal), a softmax per row in
// place, then O_t = P V. The products are mlc_gemm's register-blocked
// tiles, so attention runs at matrix-multiply speed rather than as dot
// products; S is one tile (64 x keys) per thread, never the whole S x S.
// A head packs K and V once for all its tiles, and causal products skip
// the blocks above the diagonal (mlc_gemm's band). The backward pass
// recomputes P tile by tile:
//   dP = dO V^T (then the dropout mask), rowsum_i = sum_j dP_ij P_ij,
//   dS = scale P * (dP - rowsum), dQ_t = dS K, dK += dS^T Q_t,
//   dV += (P * mask)^T dO_t.
// Grouped-query attention (MLC_ATTN_GROUPED): query head h reads kv head
// h / (heads / kvHeads); the backward pass takes a kv head per task and
// adds its query heads' dK, dV in order, so K and V are never repeated.
// Rotary embedding (MLC_ATTN_ROTARY, mlc_shared.h's mlc_rotary_*): a
// query tile's rows are rotated into a thread's buffer as the tile is
// formed, a head's K rows as K is packed; the backward pass writes dQ's
// tile through the transposed rotation and un-rotates a kv head's dK rows
// in place once its group's sum is complete. The rotated Q and K never
// reach memory.
// Soft-capping (MLC_ATTN_SOFTCAP): each scaled score becomes c tanh(s / c)
// as the tile's scores are formed, before the mask; the backward pass
// keeps the tile's tanh values and multiplies dS by 1 - tanh^2.
// Sliding window (MLC_ATTN_WINDOW): a row's softmax starts at its first
// key in the window, the probabilities before it 0 (so are their dS).
// Memory: Q, K, V and O (and their gradients) once per head; the products
// are compute-bound (4 S^2 D flops forward, 10 backward, halved when
// causal).

enum { MLC_ATTN_CPU_TILE = 64 };

static inline float mlc_attention_exp(float x) { return mlc_expf(x); }
static inline double mlc_attention_exp(double x) { return std::exp(x); }

// One query head's place: (batch or sequence bb, query head h, kv head
// kvh), bh = bb * heads + h, the sequence's first token a (varlen), the
// lengths SQ, SK of its queries and keys.
struct MlcAttentionHead {
  int64_t bh, bb, h, kvh, a, SQ, SK;
};

// Query head h of batch (or sequence) bb; false for an empty sequence
// (varlen).
template <int F, typename T, typename I, typename O>
static inline bool mlc_attention_head_of(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                         int64_t bb, int64_t h, MlcAttentionHead &k) {
  k.bb = bb;
  k.h = h;
  k.bh = bb * s.heads + h;
  k.kvh = h / mlc_attention_group<F>(s);
  mlc_attention_lengths<F>(s, x, k);
  return k.SQ > 0;
}

// The rotation's arithmetic type: double for f64, else float.
template <typename T> struct MlcRotaryAcc {
  typedef float type;
};
template <> struct MlcRotaryAcc<double> {
  typedef double type;
};

// Rows [i0, i0 + n) of a Q or K head h (rows `row` apart) as the products
// read them: rotated into buf (rows D apart) with MLC_ATTN_ROTARY, else h's
// own rows. Sets pitch to the rows' distance.
template <typename T, int F, int D, typename I, typename O>
static inline const T *mlc_attention_rows(const MlcAttention<T> &s,
                                          const MlcAttentionArgs<T, I, O> &x,
                                          const MlcAttentionHead &k, const T *h, int64_t row,
                                          int64_t i0, int64_t n, std::vector<T> &buf,
                                          int64_t &pitch) {
  pitch = row;
  if (!(F & MLC_ATTN_ROTARY))
    return h + i0 * row;
  if (buf.size() < size_t(n * D))
    buf.resize(size_t(n * D));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = mlc_rotary_row<F>(s, k, i0 + r);
    const T *xr = h + (i0 + r) * row;
    for (int64_t d = 0; d < D; ++d)
      buf[r * D + d] = (T)mlc_rotary_element<F, false, typename MlcRotaryAcc<T>::type>(
          xr, x.cos + t, x.sin + t, d, s.rot.dim);
  }
  pitch = D;
  return buf.data();
}

// Rows [i0, i0 + n) of g (rows gp apart) through the transposed rotation
// into rows i0.. of out (rows `row` apart): the gradients of the unrotated
// Q or K. g may be out itself (in place, row by row through tmp).
template <typename T, int F, int D, typename I, typename O>
static inline void mlc_attention_unrotate(const MlcAttention<T> &s,
                                          const MlcAttentionArgs<T, I, O> &x,
                                          const MlcAttentionHead &k, const T *g, int64_t gp,
                                          int64_t i0, int64_t n, T *out, int64_t row) {
  T tmp[D];
  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = mlc_rotary_row<F>(s, k, i0 + r);
    for (int64_t d = 0; d < D; ++d)
      tmp[d] = g[r * gp + d];
    T *o = out + (i0 + r) * row;
    for (int64_t d = 0; d < D; ++d)
      o[d] = (T)mlc_rotary_element<F, true, typename MlcRotaryAcc<T>::type>(
          tmp, x.cos + t, x.sin + t, d, s.rot.dim);
  }
}

// The band of a causal product (mlc_gemm's), offset by the tile's row i0.
template <int F> static inline int mlc_attention_band(int kind) {
  return (F & MLC_ATTN_CAUSAL) ? kind : 0;
}

// Row t of the tile from query i0 (query i = i0 + t), its scores si[0, nk)
// on entry: the probabilities in si[j0, jn), zeros in [0, j0) (the keys
// before a sliding window) and [jn, nk). Returns jn.
template <int F, typename T, typename I, typename O>
static inline int64_t mlc_attention_softmax_row(const MlcAttention<T> &s,
                                                const MlcAttentionArgs<T, I, O> &x,
                                                const MlcAttentionHead &k, int64_t i, T *si,
                                                int64_t nk) {
  const int64_t jn = mlc_attention_keys_seen<F>(i, k.SK);
  const int64_t j0 = mlc_attention_first_key<F>(s, i);
  if (F & MLC_ATTN_MASK)
    for (int64_t j = j0; j < jn; ++j)
      si[j] += mlc_attention_mask(s, x.mask, k, i, j);
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = j0; j < jn; ++j)
    m = si[j] > m ? si[j] : m;
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = j0; j < jn; ++j) {
    si[j] = mlc_attention_exp(si[j] - m);
    sum += si[j];
  }
  const T inv = (T)(1.0 / sum);
  for (int64_t j = 0; j < j0; ++j)
    si[j] = 0;
  for (int64_t j = j0; j < jn; ++j)
    si[j] *= inv;
  for (int64_t j = jn; j < nk; ++j)
    si[j] = 0;
  return jn;
}

// The query tile from i0 of a head with SQ queries and SK keys: its rows
// mi, the keys nk it sees, and the band offset of its causal products.
struct MlcAttentionTile {
  int64_t mi, nk, off;
};
template <int F> static inline MlcAttentionTile mlc_attention_tile(int64_t i0, int64_t SQ,
                                                                  int64_t SK) {
  const int64_t tile = MLC_ATTN_CPU_TILE;
  MlcAttentionTile t;
  t.mi = SQ - i0 < tile ? SQ - i0 : tile;
  t.nk = (F & MLC_ATTN_CAUSAL) ? (i0 + t.mi < SK ? i0 + t.mi : SK) : SK;
  t.off = (F & MLC_ATTN_CAUSAL) ? i0 : 0;
  return t;
}

// The tile's probabilities in sb (mi x nk, row pitch nk): S = scale Q_t
// K^T of the tile's query rows qt (rq apart) against the packed K (kp),
// soft-capped (MLC_ATTN_SOFTCAP: th, when given, gets each seen score's
// tanh(s / c) at the same place), then each row's softmax.
template <typename T, int F, int D, typename I, typename O>
static inline void mlc_attention_probabilities(const MlcAttention<T> &s,
                                               const MlcAttentionArgs<T, I, O> &x,
                                               const MlcAttentionHead &k, const T *qt,
                                               int64_t rq, int64_t i0, const MlcAttentionTile &t,
                                               const T *kp, T *sb, T *th = nullptr) {
  mlc_gemm<T>(t.mi, t.nk, D, s.scale, qt, rq, 1, kp, D, sb, t.nk, false,
              mlc_attention_band<F>(1), t.off);
  if (F & MLC_ATTN_SOFTCAP) {
    const T cap = (T)s.softcap, inv = (T)(1.0 / s.softcap);
    for (int64_t r = 0; r < t.mi; ++r) {
      const int64_t jn = mlc_attention_keys_seen<F>(i0 + r, k.SK);
      T *si = sb + r * t.nk;
      for (int64_t j = 0; j < jn; ++j) {
        const T h = mlc_tanh(si[j] * inv);
        if (th)
          th[r * t.nk + j] = h;
        si[j] = cap * h;
      }
    }
  }
  for (int64_t r = 0; r < t.mi; ++r)
    mlc_attention_softmax_row<F>(s, x, k, i0 + r, sb + r * t.nk, t.nk);
}

// O = softmax(scale Q K^T + mask) V (dropout's keep on P), D and DV the
// head dimensions of Q, K and of V: compile-time, so that the products'
// inner loops over D (the scores) and the packing have constant trip counts
// (run-time head sizes cost CPU attention 8%). A task per query head, K
// and V read from its kv head (grouped-query attention).
template <typename T, int F, int D, int DV, typename I>
static void mlc_attention_forward(const MlcAttention<T> &s, const MlcAttentionArgs<T, I> &x,
                                  const MlcKernelCtx *ctx) {
  const int64_t tile = MLC_ATTN_CPU_TILE;
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const int64_t ro = s.t[MLC_ATT_O].row;
  // Each thread keeps its tiles and packed panels across the heads it takes.
#pragma omp parallel
  {
    std::vector<T> sb, kp, vp, qr, kr;
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
      MlcAttentionHead k;
      if (!mlc_attention_head_of<F>(s, x, bh / s.heads, bh % s.heads, k))
        continue;
      const int64_t SQ = k.SQ, SK = k.SK;
      const T *qh = mlc_attention_head<F>(s, k, MLC_ATT_Q, x.q);
      const T *kh = mlc_attention_head<F>(s, k, MLC_ATT_K, x.k);
      const T *vh = mlc_attention_head<F>(s, k, MLC_ATT_V, x.v);
      T *oh = mlc_attention_head<F>(s, k, MLC_ATT_O, x.o);
      sb.resize(tile * SK);
      int64_t rk, rq;
      const T *kt = mlc_attention_rows<T, F, D>(s, x, k, kh, s.t[MLC_ATT_K].row, 0, SK, kr, rk);
      mlc_pack<T>(D, SK, kt, rk, true, kp);
      mlc_pack<T>(SK, DV, vh, s.t[MLC_ATT_V].row, false, vp);
      for (int64_t i0 = 0; i0 < SQ; i0 += tile) {
        const MlcAttentionTile t = mlc_attention_tile<F>(i0, SQ, SK);
        const T *qt =
            mlc_attention_rows<T, F, D>(s, x, k, qh, s.t[MLC_ATT_Q].row, i0, t.mi, qr, rq);
        mlc_attention_probabilities<T, F, D>(s, x, k, qt, rq, i0, t, kp.data(), sb.data());
        if (F & MLC_ATTN_DROPOUT)
          for (int64_t r = 0; r < t.mi; ++r) {
            const int64_t i = i0 + r, jn = mlc_attention_keys_seen<F>(i, SK);
            const uint64_t row = mlc_attention_dropout_row<F>(s, k, i);
            for (int64_t j = 0; j < jn; ++j)
              sb[r * t.nk + j] *= mlc_attention_keep<F>(s, key, row, j);
          }
        mlc_gemm<T>(t.mi, DV, t.nk, (T)1, sb.data(), t.nk, 1, vp.data(), SK, oh + i0 * ro, ro,
                    false, mlc_attention_band<F>(2), t.off);
      }
    }
  }
}

// A thread's working memory in the backward pass: the tile's P and dP,
// K and V packed (K both ways), and a packed dO or Q tile; with rotary
// embedding the rotated Q tile and K rows and dQ's tile before its
// transposed rotation; with soft-capping the tile's tanh values.
template <typename T> struct MlcAttentionScratch {
  std::vector<T> sb, dp, kp, vp, kn, tp, qr, kr, dq, th;
};

// One query head's share of the backward pass (K, V already packed in w):
// per query tile, P again, dP = dO V^T, dS, then dQ_t = dS K and dV, dK
// accumulated (dV += (P keep)^T dO_t, dK += dS^T Q_t).
template <typename T, int F, int D, int DV, typename I>
static void mlc_attention_backward_head(const MlcAttention<T> &s, const MlcAttentionArgs<T, I> &x,
                                        uint64_t key, const MlcAttentionHead &k,
                                        MlcAttentionScratch<T> &w, T *dk, T *dv) {
  const int64_t tile = MLC_ATTN_CPU_TILE, SQ = k.SQ, SK = k.SK;
  const int64_t rq = s.t[MLC_ATT_Q].row, rg = s.t[MLC_ATT_GO].row;
  const int64_t rdq = s.t[MLC_ATT_O].row, rdk = s.t[MLC_ATT_DK].row, rdv = s.t[MLC_ATT_DV].row;
  const T *qh = mlc_attention_head<F>(s, k, MLC_ATT_Q, x.q);
  const T *gh = mlc_attention_head<F>(s, k, MLC_ATT_GO, x.go);
  T *dq = mlc_attention_head<F>(s, k, MLC_ATT_O, x.o);
  for (int64_t i0 = 0; i0 < SQ; i0 += tile) {
    const MlcAttentionTile t = mlc_attention_tile<F>(i0, SQ, SK);
    const int64_t nk = t.nk;
    int64_t pq;
    const T *qt = mlc_attention_rows<T, F, D>(s, x, k, qh, rq, i0, t.mi, w.qr, pq);
    mlc_attention_probabilities<T, F, D>(s, x, k, qt, pq, i0, t, w.kp.data(), w.sb.data(),
                                         (F & MLC_ATTN_SOFTCAP) ? w.th.data() : nullptr);
    mlc_gemm<T>(t.mi, nk, DV, (T)1, gh + i0 * rg, rg, 1, w.vp.data(), DV, w.dp.data(), nk, false,
                mlc_attention_band<F>(1), t.off);
    for (int64_t r = 0; r < t.mi; ++r) {
      const int64_t i = i0 + r, jn = mlc_attention_keys_seen<F>(i, SK);
      T *si = w.sb.data() + r * nk, *di = w.dp.data() + r * nk;
      const uint64_t row = mlc_attention_dropout_row<F>(s, k, i);
      double rowsum = 0;
#pragma omp simd reduction(+ : rowsum)
      for (int64_t j = 0; j < jn; ++j) {
        di[j] *= mlc_attention_keep<F>(s, key, row, j);
        rowsum += (double)di[j] * si[j];
      }
#pragma omp simd
      for (int64_t j = 0; j < jn; ++j) {
        di[j] = si[j] * (di[j] - (T)rowsum) * s.scale;
        si[j] *= mlc_attention_keep<F>(s, key, row, j);
      }
      if (F & MLC_ATTN_SOFTCAP) { // d(c tanh(s / c)) / ds = 1 - tanh^2
        const T *hi = w.th.data() + r * nk;
#pragma omp simd
        for (int64_t j = 0; j < jn; ++j)
          di[j] *= (T)1 - hi[j] * hi[j];
      }
      for (int64_t j = jn; j < nk; ++j)
        di[j] = 0;
    }
    mlc_pack<T>(t.mi, DV, gh + i0 * rg, rg, false, w.tp);
    mlc_gemm<T>(nk, DV, t.mi, (T)1, w.sb.data(), 1, nk, w.tp.data(), t.mi, dv, rdv, true,
                mlc_attention_band<F>(3), t.off);
    // dQ_t = dS K (rotated K: through the transposed rotation on its way out).
    const bool rot = F & MLC_ATTN_ROTARY;
    if (rot && w.dq.size() < size_t(t.mi * D))
      w.dq.resize(size_t(t.mi * D));
    mlc_gemm<T>(t.mi, D, nk, (T)1, w.dp.data(), nk, 1, w.kn.data(), SK,
                rot ? w.dq.data() : dq + i0 * rdq, rot ? D : rdq, false,
                mlc_attention_band<F>(2), t.off);
    if (rot)
      mlc_attention_unrotate<T, F, D>(s, x, k, w.dq.data(), D, i0, t.mi, dq, rdq);
    mlc_pack<T>(t.mi, D, qt, pq, false, w.tp);
    mlc_gemm<T>(nk, D, t.mi, (T)1, w.dp.data(), 1, nk, w.tp.data(), t.mi, dk, rdk, true,
                mlc_attention_band<F>(3), t.off);
  }
}

// dQ, dK, dV from dO; D, DV as forward. A task per kv head: its K and V
// packed once, dK and dV zeroed, then its query heads' shares added in
// order (grouped-query attention's sum over the group, deterministic and
// without atomics; K and V are never repeated in memory). Memory: K, V,
// dK, dV once per kv head; Q, dO, dQ once per query head.
template <typename T, int F, int D, int DV, typename I>
static void mlc_attention_backward(const MlcAttention<T> &s, const MlcAttentionArgs<T, I> &x,
                                   const MlcKernelCtx *ctx) {
  const int64_t tile = MLC_ATTN_CPU_TILE, group = mlc_attention_group<F>(s);
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const int64_t rk = s.t[MLC_ATT_K].row, rdk = s.t[MLC_ATT_DK].row, rdv = s.t[MLC_ATT_DV].row;
#pragma omp parallel
  {
    MlcAttentionScratch<T> w;
#pragma omp for schedule(dynamic)
    for (int64_t bg = 0; bg < s.batch * s.kvHeads; ++bg) {
      MlcAttentionHead k;
      if (!mlc_attention_head_of<F>(s, x, bg / s.kvHeads, bg % s.kvHeads * group, k))
        continue;
      const int64_t SK = k.SK;
      const T *kh = mlc_attention_head<F>(s, k, MLC_ATT_K, x.k);
      const T *vh = mlc_attention_head<F>(s, k, MLC_ATT_V, x.v);
      T *dk = mlc_attention_head<F>(s, k, MLC_ATT_DK, x.dk);
      T *dv = mlc_attention_head<F>(s, k, MLC_ATT_DV, x.dv);
      w.sb.resize(tile * SK);
      w.dp.resize(tile * SK);
      if (F & MLC_ATTN_SOFTCAP)
        w.th.resize(tile * SK);
      int64_t pk;
      const T *kt = mlc_attention_rows<T, F, D>(s, x, k, kh, rk, 0, SK, w.kr, pk);
      mlc_pack<T>(D, SK, kt, pk, true, w.kp);
      mlc_pack<T>(DV, SK, vh, s.t[MLC_ATT_V].row, true, w.vp);
      mlc_pack<T>(SK, D, kt, pk, false, w.kn);
      for (int64_t j = 0; j < SK; ++j) {
        for (int64_t c = 0; c < D; ++c)
          dk[j * rdk + c] = 0;
        for (int64_t c = 0; c < DV; ++c)
          dv[j * rdv + c] = 0;
      }
      for (int64_t g = 0; g < group; ++g) {
        MlcAttentionHead q = k;
        q.h = k.h + g;
        q.bh = k.bh + g;
        mlc_attention_backward_head<T, F, D, DV>(s, x, key, q, w, dk, dv);
      }
      // dK of the unrotated K: the group's sum through the transposed rotation.
      if (F & MLC_ATTN_ROTARY)
        mlc_attention_unrotate<T, F, D>(s, x, k, dk, rdk, 0, SK, dk, rdk);
    }
  }
}

// Outputs stored in bf16 (the plan's `bf16_result`, --dtype bf16): the
// kernel above runs into T staging buffers laid out as the outputs (same
// offsets and strides), then each element the kernel writes is converted
// into its bf16 output, the rounding a cast after the kernel would do.
// (The CPU is the reference target; the staging costs it a pass over the
// outputs. CUDA's kernels convert at their stores.)
template <typename T> struct MlcAttentionStage {
  std::vector<T> buf;
  const MlcAttentionTensor *t = nullptr;
  int64_t heads = 0, rows = 0, width = 0;
};

// Tensor `role`'s staging buffer: (heads, rows of width) per batch (varlen:
// per token of the capacity, one row each), zeros.
template <int F, typename T>
static MlcAttentionStage<T> mlc_attention_stage(const MlcAttention<T> &s, int role, int64_t heads,
                                                int64_t rows, int64_t width) {
  MlcAttentionStage<T> g;
  g.t = &s.t[role];
  g.heads = heads, g.width = width;
  g.rows = (F & MLC_ATTN_VARLEN) ? 1 : rows;
  const int64_t outer = (F & MLC_ATTN_VARLEN) ? s.tokenCapacity : s.batch;
  int64_t last = g.t->offset;
  if (outer > 0 && heads > 0 && g.rows > 0 && width > 0)
    last += (outer - 1) * g.t->batch + (heads - 1) * g.t->head + (g.rows - 1) * g.t->row + width;
  g.buf.assign(size_t(last), T(0));
  return g;
}

// The staged elements converted into out (the same layout).
template <int F, typename T>
static void mlc_attention_unstage(const MlcAttention<T> &s, const MlcAttentionStage<T> &g,
                                  mlc_bf16 *out) {
  const int64_t outer = (F & MLC_ATTN_VARLEN) ? s.tokenCapacity : s.batch;
  const MlcAttentionTensor &t = *g.t;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t h = 0; h < g.heads; ++h)
      for (int64_t i = 0; i < g.rows; ++i) {
        const int64_t base = t.offset + b * t.batch + h * t.head + i * t.row;
        for (int64_t c = 0; c < g.width; ++c)
          out[base + c] = mlc_bf16((float)g.buf[base + c]);
      }
}

template <typename T, int F, int D, int DV, typename I>
static void mlc_attention_forward(const MlcAttention<T> &s,
                                  const MlcAttentionArgs<T, I, mlc_bf16> &x,
                                  const MlcKernelCtx *ctx) {
  MlcAttentionStage<T> o = mlc_attention_stage<F>(s, MLC_ATT_O, s.heads, s.seqQ, DV);
  const MlcAttentionArgs<T, I> y = {o.buf.data(), 0,   0,     x.go,  x.q,  x.k,
                                    x.v,          x.mask, x.cu, x.cos, x.sin};
  mlc_attention_forward<T, F, D, DV>(s, y, ctx);
  mlc_attention_unstage<F>(s, o, x.o);
}

template <typename T, int F, int D, int DV, typename I>
static void mlc_attention_backward(const MlcAttention<T> &s,
                                   const MlcAttentionArgs<T, I, mlc_bf16> &x,
                                   const MlcKernelCtx *ctx) {
  MlcAttentionStage<T> dq = mlc_attention_stage<F>(s, MLC_ATT_O, s.heads, s.seqQ, D);
  MlcAttentionStage<T> dk = mlc_attention_stage<F>(s, MLC_ATT_DK, s.kvHeads, s.seqK, D);
  MlcAttentionStage<T> dv = mlc_attention_stage<F>(s, MLC_ATT_DV, s.kvHeads, s.seqK, DV);
  const MlcAttentionArgs<T, I> y = {dq.buf.data(), dk.buf.data(), dv.buf.data(), x.go, x.q, x.k,
                                    x.v,           x.mask,        x.cu,          x.cos, x.sin};
  mlc_attention_backward<T, F, D, DV>(s, y, ctx);
  mlc_attention_unstage<F>(s, dq, x.o);
  mlc_attention_unstage<F>(s, dk, x.dk);
  mlc_attention_unstage<F>(s, dv, x.dv);
}
