// Attention for CUDA: the templates CudaTarget::attention instantiates.
//
// This file follows prelude/cuda.cuh in every kernels.cu (it uses its
// MlcKernelCtx, mlc_exp, mlc_inf, mlc_uniform, mlc_pack_bf16 and
// mlc_mma_bf16) and is embedded at build time like it; a test compiles the
// two alone, with instantiations, through NVRTC and ptxas.
//
// A plan kernel's attention is one call: the run-time sizes (MlcAttention,
// a literal in the call) and the buffers, with compile time only what must
// be: the element type, the head dimensions (register arrays), the tile
// sizes (shared arrays) and the variant flags (MLC_ATTN_*), which select
// code: an instantiation holds its variant's code only, so its registers
// stay those of the kernel the compiler once spliced together as text.
// Neither kind writes the S x S scores:
//
//   mlc_attention_forward / _backward              a thread per query (or
//       key) row, the other side streamed through shared memory in tiles;
//       any element type (f32, f64; bf16 storage).
//   mlc_attention_tc_forward / _tc_backward        bf16 tensor cores, a warp
//       per 16 rows (packages whose products are bf16; f32 storage).
//
// The backward passes run as three phases of one kernel (the launch line's
// phases 0, 1, 2, in stream order), over scratch holding (m, l, D_i) per
// query row in f64:
//   0. the forward pass again, for the row statistics: m_i and l_i of the
//      online softmax and D_i = sum_j P_ij dP_ij = dO_i . O_i;
//   1. dK_j = sum_i dS_ij q_i and dV_j = sum_i P_ij keep_ij dO_i, a thread
//      (warp) per key row, over the query tiles that see key j;
//   2. dQ_i = sum_j dS_ij k_j, a thread (warp) per query row;
// with P_ij = exp(s_ij - m_i) / l_i, s_ij = scale q_i . k_j (+ mask_ij;
// -inf where causal hides j > i) and dS_ij = scale P_ij (keep_ij dP_ij -
// D_i), dP_ij = dO_i . v_j. keep_ij is dropout's factor for probability
// (i, j): 1 / (1 - p) or 0 from mlc_uniform, bit for bit the CPU's mask.
// Soft-capping (MLC_ATTN_SOFTCAP, mlc_attention_cap): s_ij is c tanh(scale
// q_i . k_j / c) before the mask, and dS_ij takes the factor 1 - tanh^2.
// Sliding window (MLC_ATTN_WINDOW, with CAUSAL): query i sees keys
// i - window + 1 .. i only; the spans below start there, so the keys before
// the window are never loaded by a row (nor by a block all of whose rows
// are past them).
//
// Layouts. Padded: tensors [B, H, S, D], a block per (batch, head, query
// block). Variable-length (MLC_ATTN_VARLEN): packed tokens [T, H, D],
// sequence n being tokens cu[n] .. cu[n + 1] (L of them), a block per
// (head, block of the packed stream's tokens), whatever the sequences: a
// row finds its sequence by binary search in cu, the block streams the
// union of its rows' keys (phase 1: queries) and each row skips those
// outside its own sequence; blocks past the token count cu[B] return.
// Every tensor is strided (MlcAttentionTensor), its rows contiguous.

// The variant flags (MLC_ATTN_*), the sizes (MlcAttention) and the buffers
// (MlcAttentionArgs) are prelude/mlc_shared.h's: the CPU's attention takes
// the same.

// A block's place: head bh = (bb, h) (h the query head, kvh its kv head)
// and its rows first .. first + rows; SQ, SK: the lengths of this head's
// queries and keys. Varlen blocks tile the packed stream: bb = 0, the
// first token a = 0 and SQ = SK = the token count cu[batch], so that row
// and key indices are the stream's tokens (dropout's counters and the
// statistics' rows are the CPU's, whose sequence-relative indices add a).
struct MlcAttentionBlock {
  int64_t bh, bb, h, kvh, first, rows, a, SQ, SK;
};

template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionBlock mlc_attention_block(const MlcAttention<T> &s,
                                             const MlcAttentionArgs<T, I, O> &x, int64_t rows) {
  MlcAttentionBlock k;
  k.bh = blockIdx.x / s.queryBlocks;
  k.first = (blockIdx.x % s.queryBlocks) * rows;
  k.rows = rows;
  k.bb = k.bh / s.heads;
  k.h = k.bh % s.heads;
  k.kvh = (F & MLC_ATTN_GROUPED) ? k.h / mlc_attention_group<F>(s) : 0; // read when grouped
  if (F & MLC_ATTN_VARLEN) {
    k.a = 0;
    k.SQ = k.SK = x.cu[s.batch];
  } else {
    mlc_attention_lengths<F>(s, x, k);
  }
  return k;
}

// A range [lo, hi) of rows or keys.
struct MlcAttentionSpan {
  int64_t lo, hi;
};

// The sequence holding stream token r (varlen, r below the token count):
// tokens cu[n] .. cu[n + 1], n the last sequence with cu[n] <= r, found by
// binary search (an empty sequence, cu[n] = cu[n + 1], holds none; cu's
// trailing entries may all equal the token count). Padded: [0, len).
template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionSpan mlc_attention_sequence(const MlcAttention<T> &s,
                                               const MlcAttentionArgs<T, I, O> &x, int64_t r,
                                               int64_t len) {
  if (!(F & MLC_ATTN_VARLEN))
    return {0, len};
  int64_t lo = 0, hi = s.batch - 1; // cu[lo] <= r
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (x.cu[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return {x.cu[lo], x.cu[lo + 1]};
}

// The keys query i of block k sees: its sequence's (padded: all SK), up to
// i when causal, from i - window + 1 with a sliding window.
template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionSpan mlc_attention_row_keys(const MlcAttention<T> &s,
                                               const MlcAttentionArgs<T, I, O> &x,
                                               const MlcAttentionBlock &k, int64_t i) {
  MlcAttentionSpan r = mlc_attention_sequence<F>(s, x, i, k.SK);
  if ((F & MLC_ATTN_CAUSAL) && i + 1 < r.hi)
    r.hi = i + 1;
  if ((F & MLC_ATTN_WINDOW) && mlc_attention_first_key<F>(s, i) > r.lo)
    r.lo = mlc_attention_first_key<F>(s, i);
  return r;
}

// The queries that see key j of block k: its sequence's (padded: all SQ),
// from j when causal, up to j + window - 1 with a sliding window.
template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionSpan mlc_attention_row_queries(const MlcAttention<T> &s,
                                                  const MlcAttentionArgs<T, I, O> &x,
                                                  const MlcAttentionBlock &k, int64_t j) {
  MlcAttentionSpan r = mlc_attention_sequence<F>(s, x, j, k.SQ);
  if ((F & MLC_ATTN_CAUSAL) && j > r.lo)
    r.lo = j;
  if ((F & MLC_ATTN_WINDOW) && j + s.window < r.hi)
    r.hi = j + s.window;
  return r;
}

// The keys block k's query rows see, the union of theirs: from the first
// row's sequence start (padded: 0) to, causal, the last row, else the last
// row's sequence end (padded: SK).
template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionSpan mlc_attention_block_keys(const MlcAttention<T> &s,
                                                 const MlcAttentionArgs<T, I, O> &x,
                                                 const MlcAttentionBlock &k) {
  const int64_t end = k.first + k.rows;
  MlcAttentionSpan r = {0, (F & MLC_ATTN_CAUSAL) && end < k.SK ? end : k.SK};
  if (F & MLC_ATTN_VARLEN) {
    r.lo = mlc_attention_sequence<F>(s, x, k.first, k.SK).lo;
    if (!(F & MLC_ATTN_CAUSAL))
      r.hi = mlc_attention_sequence<F>(s, x, (end < k.SQ ? end : k.SQ) - 1, k.SK).hi;
  }
  // Sliding window: from the first row's first key (the later rows' start
  // later).
  if ((F & MLC_ATTN_WINDOW) && mlc_attention_first_key<F>(s, k.first) > r.lo)
    r.lo = mlc_attention_first_key<F>(s, k.first);
  return r;
}

// The queries that see block k's key rows (phase 1), the union of theirs:
// from, causal, the first row, else the first row's sequence start
// (padded: 0), to the last row's sequence end (padded: SQ).
template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionSpan mlc_attention_block_queries(const MlcAttention<T> &s,
                                                    const MlcAttentionArgs<T, I, O> &x,
                                                    const MlcAttentionBlock &k) {
  const int64_t end = k.first + k.rows;
  MlcAttentionSpan r = {(F & MLC_ATTN_CAUSAL) ? k.first : 0, k.SQ};
  if (F & MLC_ATTN_VARLEN) {
    if (!(F & MLC_ATTN_CAUSAL))
      r.lo = mlc_attention_sequence<F>(s, x, k.first, k.SQ).lo;
    r.hi = mlc_attention_sequence<F>(s, x, (end < k.SK ? end : k.SK) - 1, k.SQ).hi;
  }
  // Sliding window: up to the last key row's last query.
  if ((F & MLC_ATTN_WINDOW) && end - 1 + s.window < r.hi)
    r.hi = end - 1 + s.window;
  return r;
}

// Block k's heads of the tensors, in role order (MLC_ATT_O .. MLC_ATT_V):
// O (or dQ), dK, dV, dO, Q, K, V; what a kernel does not use is not
// computed.
template <typename T, typename O> struct MlcAttentionHeads {
  O *o, *dk, *dv;
  const T *go, *q, *k, *v;
};
template <int F, typename T, typename I, typename O>
MLC_FN MlcAttentionHeads<T, O> mlc_attention_heads(const MlcAttention<T> &s,
                                                const MlcAttentionBlock &k,
                                                const MlcAttentionArgs<T, I, O> &x) {
  return {mlc_attention_head<F>(s, k, MLC_ATT_O, x.o),
          mlc_attention_head<F>(s, k, MLC_ATT_DK, x.dk),
          mlc_attention_head<F>(s, k, MLC_ATT_DV, x.dv),
          mlc_attention_head<F>(s, k, MLC_ATT_GO, x.go),
          mlc_attention_head<F>(s, k, MLC_ATT_Q, x.q),
          mlc_attention_head<F>(s, k, MLC_ATT_K, x.k),
          mlc_attention_head<F>(s, k, MLC_ATT_V, x.v)};
}

// Phase 1 runs a block per (batch, kv head, key block; varlen: kv head,
// block of the packed stream's keys): of the grid's
// heads the first kvHeads stand for the kv heads (the others return, false
// here), and each sums dK, dV over its group of heads / kvHeads query
// heads in order (grouped-query attention: no atomics, K and V never
// repeated in memory). Without grouping every block is its own group.
template <int F, typename T>
MLC_FN bool mlc_attention_is_kv_block(const MlcAttention<T> &s, const MlcAttentionBlock &b) {
  return !(F & MLC_ATTN_GROUPED) || b.h < s.kvHeads;
}

// Block b as kv head b.h's (itself without grouping).
template <int F> MLC_FN MlcAttentionBlock mlc_attention_kv_block(const MlcAttentionBlock &b) {
  MlcAttentionBlock k = b;
  if (F & MLC_ATTN_GROUPED)
    k.kvh = b.h;
  return k;
}

// The block of kv head kv.kvh's g-th query head.
template <int F, typename T>
MLC_FN MlcAttentionBlock mlc_attention_group_head(const MlcAttention<T> &s,
                                                  const MlcAttentionBlock &kv, int64_t g) {
  if (!(F & MLC_ATTN_GROUPED))
    return kv;
  MlcAttentionBlock k = kv;
  k.h = kv.kvh * mlc_attention_group<F>(s) + g;
  k.bh = kv.bb * s.heads + k.h;
  return k;
}

// Row (head, query i) of the statistics in scratch.
template <int F, typename T>
MLC_FN int64_t mlc_attention_stat_row(const MlcAttention<T> &s, const MlcAttentionBlock &k,
                                      int64_t i) {
  return (F & MLC_ATTN_VARLEN) ? (k.h * s.tokenCapacity + k.a + (i)) : (k.bh * s.seqQ + (i));
}

// Dropout's factor for probability (i, j), bit for bit the CPU's; 1
// without dropout.
template <int F, typename T>
MLC_FN T mlc_attention_keep(const MlcAttention<T> &s, uint64_t key, const MlcAttentionBlock &k,
                            int64_t i, int64_t j) {
  return mlc_attention_keep<F>(s, key, mlc_attention_dropout_row<F>(s, k, i), j);
}

// Rotary embedding (MLC_ATTN_ROTARY). Q and K are rotated where a row or
// tile of them is staged (registers or shared memory), once per load; the
// backward pass works with the rotated Q and K throughout and, where it
// stores dQ and dK, applies the transposed rotation (the gradients of the
// unrotated inputs; grouped-query: dK after the sum over the group). The
// transpose reads each element's pair partner, at a distance known at run
// time only, so the gradients pass through shared memory first (registers
// cannot be indexed so). V, dO and O are never rotated.

// The arithmetic type of a rotation: float for f32 (and bf16 storage),
// double for f64.
template <typename T> using MlcAttentionAcc = decltype(T() * T());

// Soft-capping (MLC_ATTN_SOFTCAP) of a scaled score sc: c tanh(sc / c),
// the tanh in th (the backward's factor 1 - th^2); sc itself without.
template <int F, typename A, typename T>
MLC_FN A mlc_attention_cap(const MlcAttention<T> &s, A sc, A &th) {
  if (!(F & MLC_ATTN_SOFTCAP))
    return sc;
  th = mlc_tanh(sc * (A)(1.0 / s.softcap));
  return (A)s.softcap * th;
}

// Element c of row r of a Q or K head of block k (rows `stride` apart from
// base) as attention reads it: rotated by the tables' row of r under RF's
// MLC_ATTN_ROTARY, else as stored. RF is the kernel's flags for Q and K,
// 0 for V and dO (never rotated).
template <int RF, typename A, typename T, typename I, typename O>
MLC_FN A mlc_attention_qk(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                          const MlcAttentionBlock &k, const T *base, int64_t stride, int64_t r,
                          int64_t c) {
  if (!(RF & MLC_ATTN_ROTARY))
    return (A)base[r * stride + c];
  const int64_t t = mlc_rotary_row<RF>(s, k, r);
  return mlc_rotary_element<RF, false, A>(base + r * stride, x.cos + t, x.sin + t, c, s.rot.dim);
}

// Element c of the gradient of row r's unrotated Q or K from the gradient
// g of the rotated row (shared memory): the transposed rotation.
template <int F, typename A, typename T, typename I, typename O>
MLC_FN A mlc_attention_qk_grad(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                               const MlcAttentionBlock &k, const T *g, int64_t r, int64_t c) {
  const int64_t t = mlc_rotary_row<F>(s, k, r);
  return mlc_rotary_element<F, true, A>(g, x.cos + t, x.sin + t, c, s.rot.dim);
}

//===----------------------------------------------------------------------===//
// A thread per row (any element type)
//===----------------------------------------------------------------------===//

// Rows [r0, r0 + N) of a tensor of block k's head (width W, rows `stride`
// apart, `limit` rows) into shared tile dst, zeros past the end; rotated
// under RF's MLC_ATTN_ROTARY (mlc_attention_qk).
template <int N, int W, int RF, typename T, int C, typename I, typename O>
MLC_FN void mlc_attention_load_tile(T (*dst)[C], const MlcAttention<T> &s,
                                    const MlcAttentionArgs<T, I, O> &x, const MlcAttentionBlock &k,
                                    const T *base, int64_t stride, int64_t r0, int64_t limit) {
  for (int64_t e = threadIdx.x; e < N * W; e += blockDim.x) {
    const int64_t t = e / W, c = e % W, r = r0 + t;
    dst[t][c] = r < limit ? (T)mlc_attention_qk<RF, MlcAttentionAcc<T>>(s, x, k, base, stride, r, c)
                          : (T)0;
  }
}

// Row r of a tensor of block k's head (width W, rows `stride` apart) into
// the calling thread's shared row of self, zeros where the thread has no
// row; rotated under RF's MLC_ATTN_ROTARY.
template <int W, int RF, typename T, int C, typename I, typename O>
MLC_FN void mlc_attention_own_row(T (*self)[C], const MlcAttention<T> &s,
                                  const MlcAttentionArgs<T, I, O> &x, const MlcAttentionBlock &k,
                                  const T *base, int64_t stride, int64_t r, bool active) {
  for (int c = 0; c < W; ++c)
    self[threadIdx.x][c] =
        active ? (T)mlc_attention_qk<RF, MlcAttentionAcc<T>>(s, x, k, base, stride, r, c)
               : (T)0;
}

// The calling thread's gradient g (D registers) of Q or K row r to that
// row of base (rows `stride` apart): under MLC_ATTN_ROTARY the gradient of
// the unrotated row (the transposed rotation), g first stored in the
// thread's shared row own.
template <int D, int F, typename T, typename I, typename O>
MLC_FN void mlc_attention_store_qk_grad(O *base, int64_t stride, const MlcAttention<T> &s,
                                        const MlcAttentionArgs<T, I, O> &x,
                                        const MlcAttentionBlock &k, const T *g, T *own, int64_t r) {
  if (!(F & MLC_ATTN_ROTARY)) {
    for (int c = 0; c < D; ++c)
      base[r * stride + c] = g[c];
    return;
  }
  for (int c = 0; c < D; ++c)
    own[c] = g[c];
  for (int c = 0; c < D; ++c)
    base[r * stride + c] = (T)mlc_attention_qk_grad<F, MlcAttentionAcc<T>>(s, x, k, own, r, c);
}

// The online softmax's step to a larger running max mn: l and acc, sums
// relative to exp(m), rescaled by exp(m - mn).
template <int DV, typename T> MLC_FN void mlc_attention_rescale(T *acc, T &m, double &l, T mn) {
  const T f = mlc_exp(m - mn);
  l *= f;
  for (int c = 0; c < DV; ++c)
    acc[c] *= f;
  m = mn;
}

// Score sc of key j (value row v) into the online softmax of query i:
// e = exp(sc - m) into l, e keep_ij v into acc.
template <int DV, int F, typename T>
MLC_FN void mlc_attention_accumulate(const MlcAttention<T> &s, uint64_t key,
                                     const MlcAttentionBlock &k, int64_t i, int64_t j, T sc, T m,
                                     double &l, T *acc, const T *v) {
  const T e = mlc_exp(sc - m);
  l += e;
  const T w = e * mlc_attention_keep<F>(s, key, k, i, j);
  for (int c = 0; c < DV; ++c)
    acc[c] += w * v[c];
}

// The forward pass (backward: phase 0), a thread per query row i: q_i
// (pre-scaled) and the output accumulator in registers, the running max m
// and sum l of the online softmax; per key tile of TILE rows (staged in ks,
// vs), the scores, their max, one rescale, then the weighted values (the
// backward's phase 0 folds key by key, as the CPU's statistics expect).
// Writes O_i = acc / l, or (backward) the statistics m_i, l_i, D_i.
// Math: 4 S^2 D flops per head (halved when causal). Memory: Q, O once;
// K, V once per query block of ROWS rows (from L2); mask once per score.
template <typename T, int D, int DV, int ROWS, int TILE, int F, typename I, typename O>
__device__ void mlc_attention_rows_forward(const MlcAttention<T> &s,
                                           const MlcAttentionArgs<T, I, O> &x,
                                           const MlcKernelCtx *ctx, T (*ks)[D], T (*vs)[DV],
                                           bool statistics) {
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const MlcAttentionBlock k = mlc_attention_block<F>(s, x, ROWS);
  const int64_t i0 = k.first, SQ = k.SQ, SK = k.SK;
  if (i0 >= SQ)
    return;
  const auto [oh, dk, dv, gh, qh, kh, vh] = mlc_attention_heads<F>(s, k, x);
  (void)dk, (void)dv;
  const int64_t i = i0 + threadIdx.x;
  const bool active = i < SQ;
  T q[D], acc[DV];
  for (int c = 0; c < D; ++c)
    q[c] = active ? (T)mlc_attention_qk<F, MlcAttentionAcc<T>>(s, x, k, qh, s.t[MLC_ATT_Q].row, i,
                                                               c) *
                        s.scale
                  : (T)0;
  for (int c = 0; c < DV; ++c)
    acc[c] = 0;
  T m = -mlc_inf<T>();
  double l = 0;
  const MlcAttentionSpan keys = mlc_attention_block_keys<F>(s, x, k);
  const MlcAttentionSpan seen =
      active ? mlc_attention_row_keys<F>(s, x, k, i) : MlcAttentionSpan{0, 0};
  for (int64_t j0 = keys.lo; j0 < keys.hi; j0 += TILE) {
    __syncthreads();
    mlc_attention_load_tile<TILE, D, F>(ks, s, x, k, kh, s.t[MLC_ATT_K].row, j0, SK);
    mlc_attention_load_tile<TILE, DV, 0>(vs, s, x, k, vh, s.t[MLC_ATT_V].row, j0, SK);
    __syncthreads();
    if (statistics) {
      for (int t = 0; t < TILE; ++t) {
        const int64_t j = j0 + t;
        if (j < seen.lo || j >= seen.hi)
          continue;
        T sc = 0, th = 0;
        for (int c = 0; c < D; ++c)
          sc += q[c] * ks[t][c];
        sc = mlc_attention_cap<F>(s, sc, th);
        if (F & MLC_ATTN_MASK)
          sc += mlc_attention_mask(s, x.mask, k, i, j);
        if (sc == -mlc_inf<T>())
          continue;
        if (sc > m)
          mlc_attention_rescale<DV>(acc, m, l, sc);
        mlc_attention_accumulate<DV, F>(s, key, k, i, j, sc, m, l, acc, vs[t]);
      }
      continue;
    }
    T sv[TILE];
    T tm = -mlc_inf<T>();
    for (int t = 0; t < TILE; ++t) {
      const int64_t j = j0 + t;
      T sc = -mlc_inf<T>();
      if (j >= seen.lo && j < seen.hi) {
        sc = 0;
        for (int c = 0; c < D; ++c)
          sc += q[c] * ks[t][c];
        T th = 0;
        sc = mlc_attention_cap<F>(s, sc, th);
        if (F & MLC_ATTN_MASK)
          sc += mlc_attention_mask(s, x.mask, k, i, j);
      }
      sv[t] = sc;
      tm = sc > tm ? sc : tm;
    }
    if (tm == -mlc_inf<T>())
      continue;
    if (tm > m)
      mlc_attention_rescale<DV>(acc, m, l, tm);
    for (int t = 0; t < TILE; ++t) {
      const int64_t j = j0 + t;
      if (j < seen.lo || j >= seen.hi)
        continue;
      mlc_attention_accumulate<DV, F>(s, key, k, i, j, sv[t], m, l, acc, vs[t]);
    }
  }
  if (!active)
    return;
  if (!statistics) {
    const T inv = (T)(1.0 / l);
    for (int c = 0; c < DV; ++c)
      oh[i * s.t[MLC_ATT_O].row + c] = acc[c] * inv;
    return;
  }
  double *stat = (double *)ctx->scratch;
  const int64_t r = mlc_attention_stat_row<F>(s, k, i);
  double di = 0;
  for (int c = 0; c < DV; ++c)
    di += (double)gh[i * s.t[MLC_ATT_GO].row + c] * acc[c];
  stat[3 * r] = m;
  stat[3 * r + 1] = l;
  stat[3 * r + 2] = di / l;
}

// P_ij, keep_ij and dS_ij of query i, key j from the rows q_i, k_j, dO_i,
// v_j (shared memory) and query i's statistics: s_ij = scale q_i . k_j
// (+ mask_ij), dP_ij = dO_i . v_j.
template <int F, int D, int DV, typename T, typename I, typename O>
MLC_FN void mlc_attention_rows_grads(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                     const MlcKernelCtx *ctx, uint64_t key,
                                     const MlcAttentionBlock &k, int64_t i, int64_t j, const T *qi,
                                     const T *kj, const T *gi, const T *vj, T &pr, T &kp, T &ds) {
  T sc = 0, dp = 0, th = 0;
  for (int c = 0; c < D; ++c)
    sc += qi[c] * kj[c];
  sc = mlc_attention_cap<F>(s, sc * s.scale, th);
  for (int c = 0; c < DV; ++c)
    dp += gi[c] * vj[c];
  if (F & MLC_ATTN_MASK)
    sc += mlc_attention_mask(s, x.mask, k, i, j);
  const double *st = (const double *)ctx->scratch + 3 * mlc_attention_stat_row<F>(s, k, i);
  pr = (T)(mlc_exp(sc - (T)st[0]) / st[1]);
  kp = mlc_attention_keep<F>(s, key, k, i, j);
  ds = pr * (dp * kp - (T)st[2]) * s.scale;
  if (F & MLC_ATTN_SOFTCAP)
    ds *= (T)1 - th * th;
}

// A compiler barrier where ON (no instruction): shared memory read after
// it is read again rather than kept in registers. Phase 1 reads q_i and
// dO_i from its tiles twice, for the score and dP, then for dK_j and dV_j;
// at D + DV = 128 (f32) keeping those D + DV values live across the
// statistics and the dropout draw, on top of the D + DV accumulators,
// spilled 288 bytes, while reading them again costs D + DV shared loads
// per score and spills nothing. Small heads keep them (fewer registers).
template <bool ON> MLC_FN void mlc_attention_reload_shared() {
  if (ON)
    asm volatile("" ::: "memory");
}

// Phase 1's sweep for one query head k: over the query tiles that see key
// row j (Q and dO of head k streamed through qs, gs), dK_j += sum_i dS_ij
// q_i and dV_j += sum_i P_ij keep_ij dO_i into the registers dkj, dvj.
template <typename T, int D, int DV, int TILE, int F, typename I, typename O>
MLC_FN void mlc_attention_rows_dkdv_head(const MlcAttention<T> &s,
                                         const MlcAttentionArgs<T, I, O> &x,
                                         const MlcKernelCtx *ctx, uint64_t key,
                                         const MlcAttentionBlock &k, const T *qh, const T *gh,
                                         int64_t j0, T (*qs)[D], T (*gs)[DV],
                                         T (*kself)[D + 1], T (*vself)[DV + 1], T *dkj,
                                         T *dvj) {
  const int64_t SQ = k.SQ, SK = k.SK, j = j0 + threadIdx.x;
  const bool active = j < SK;
  const MlcAttentionSpan queries = mlc_attention_block_queries<F>(s, x, k);
  const MlcAttentionSpan seen =
      active ? mlc_attention_row_queries<F>(s, x, k, j) : MlcAttentionSpan{0, 0};
  for (int64_t i0 = queries.lo; i0 < queries.hi; i0 += TILE) {
    __syncthreads();
    mlc_attention_load_tile<TILE, D, F>(qs, s, x, k, qh, s.t[MLC_ATT_Q].row, i0, SQ);
    mlc_attention_load_tile<TILE, DV, 0>(gs, s, x, k, gh, s.t[MLC_ATT_GO].row, i0, SQ);
    __syncthreads();
    if (!active)
      continue;
    for (int t = 0; t < TILE; ++t) {
      const int64_t i = i0 + t;
      if (i < seen.lo || i >= seen.hi)
        continue;
      T pr, kp, ds;
      mlc_attention_rows_grads<F, D, DV>(s, x, ctx, key, k, i, j, qs[t], kself[threadIdx.x], gs[t],
                                         vself[threadIdx.x], pr, kp, ds);
      mlc_attention_reload_shared<(D + DV >= 128)>();
      for (int c = 0; c < DV; ++c)
        dvj[c] += pr * kp * gs[t][c];
      for (int c = 0; c < D; ++c)
        dkj[c] += ds * qs[t][c];
    }
  }
}

// Phase 1, a thread per key row j (k_j, v_j kept in shared rows, padded
// against bank conflicts), the query tiles that see j streamed through qs
// (Q) and gs (dO): dK_j = sum_i dS_ij q_i, dV_j = sum_i P_ij keep_ij dO_i,
// summed over the kv head's query heads (grouped-query attention).
// Math: 6 S^2 D flops per query head. Memory: K, V, dK, dV once; Q, dO
// once per key block (from L2); the statistics once per score.
template <typename T, int D, int DV, int ROWS, int TILE, int F, typename I, typename O>
__device__ void mlc_attention_rows_dkdv(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                        const MlcKernelCtx *ctx, T (*qs)[D], T (*gs)[DV],
                                        T (*kself)[D + 1], T (*vself)[DV + 1]) {
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const MlcAttentionBlock b = mlc_attention_block<F>(s, x, ROWS);
  const int64_t j0 = b.first, SK = b.SK;
  if (j0 >= SK || !mlc_attention_is_kv_block<F>(s, b))
    return;
  const MlcAttentionBlock kv = mlc_attention_kv_block<F>(b);
  const MlcAttentionBlock k = mlc_attention_group_head<F>(s, kv, 0);
  // k's K, V, dK, dV are its kv head's, kv's.
  const auto [dq, dk, dv, gh, qh, kh, vh] = mlc_attention_heads<F>(s, k, x);
  (void)dq;
  const int64_t j = j0 + threadIdx.x;
  const bool active = j < SK;
  mlc_attention_own_row<D, F>(kself, s, x, k, kh, s.t[MLC_ATT_K].row, j, active);
  mlc_attention_own_row<DV, 0>(vself, s, x, k, vh, s.t[MLC_ATT_V].row, j, active);
  T dkj[D], dvj[DV];
  for (int c = 0; c < D; ++c)
    dkj[c] = 0;
  for (int c = 0; c < DV; ++c)
    dvj[c] = 0;
  // The group's query heads in order; without grouping the block's own
  // head only (the loop after the first sweep is then dead code).
  mlc_attention_rows_dkdv_head<T, D, DV, TILE, F>(s, x, ctx, key, k, qh, gh, j0, qs, gs, kself,
                                                  vself, dkj, dvj);
  for (int64_t g = 1; g < mlc_attention_group<F>(s); ++g) {
    const MlcAttentionBlock kg = mlc_attention_group_head<F>(s, kv, g);
    mlc_attention_rows_dkdv_head<T, D, DV, TILE, F>(
        s, x, ctx, key, kg, mlc_attention_head<F>(s, kg, MLC_ATT_Q, x.q),
        mlc_attention_head<F>(s, kg, MLC_ATT_GO, x.go), j0, qs, gs, kself, vself, dkj, dvj);
  }
  if (!active)
    return;
  // dK of the unrotated K (its own shared row free: the sweeps are over).
  mlc_attention_store_qk_grad<D, F>(dk, s.t[MLC_ATT_DK].row, s, x, k, dkj, kself[threadIdx.x],
                                    j);
  for (int c = 0; c < DV; ++c)
    dv[j * s.t[MLC_ATT_DV].row + c] = dvj[c];
}

// Phase 2, a thread per query row i (q_i, dO_i in shared rows), the key
// tiles it sees streamed through ks, vs: dQ_i = sum_j dS_ij k_j.
// Math: 6 S^2 D flops per head. Memory: Q, dO, dQ once; K, V once per
// query block (from L2); the statistics once per row.
template <typename T, int D, int DV, int ROWS, int TILE, int F, typename I, typename O>
__device__ void mlc_attention_rows_dq(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                      const MlcKernelCtx *ctx, T (*ks)[D], T (*vs)[DV],
                                      T (*qself)[D + 1], T (*gself)[DV + 1]) {
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const MlcAttentionBlock k = mlc_attention_block<F>(s, x, ROWS);
  const int64_t i0 = k.first, SQ = k.SQ, SK = k.SK;
  if (i0 >= SQ)
    return;
  const auto [dq, dk, dv, gh, qh, kh, vh] = mlc_attention_heads<F>(s, k, x);
  (void)dk, (void)dv;
  const int64_t i = i0 + threadIdx.x;
  const bool active = i < SQ;
  mlc_attention_own_row<D, F>(qself, s, x, k, qh, s.t[MLC_ATT_Q].row, i, active);
  mlc_attention_own_row<DV, 0>(gself, s, x, k, gh, s.t[MLC_ATT_GO].row, i, active);
  T dqi[D];
  for (int c = 0; c < D; ++c)
    dqi[c] = 0;
  const MlcAttentionSpan keys = mlc_attention_block_keys<F>(s, x, k);
  const MlcAttentionSpan seen =
      active ? mlc_attention_row_keys<F>(s, x, k, i) : MlcAttentionSpan{0, 0};
  for (int64_t j0 = keys.lo; j0 < keys.hi; j0 += TILE) {
    __syncthreads();
    mlc_attention_load_tile<TILE, D, F>(ks, s, x, k, kh, s.t[MLC_ATT_K].row, j0, SK);
    mlc_attention_load_tile<TILE, DV, 0>(vs, s, x, k, vh, s.t[MLC_ATT_V].row, j0, SK);
    __syncthreads();
    for (int t = 0; t < TILE; ++t) {
      const int64_t j = j0 + t;
      if (j < seen.lo || j >= seen.hi)
        continue;
      T pr, kp, ds;
      mlc_attention_rows_grads<F, D, DV>(s, x, ctx, key, k, i, j, qself[threadIdx.x], ks[t],
                                         gself[threadIdx.x], vs[t], pr, kp, ds);
      for (int c = 0; c < D; ++c)
        dqi[c] += ds * ks[t][c];
    }
  }
  if (active)
    mlc_attention_store_qk_grad<D, F>(dq, s.t[MLC_ATT_O].row, s, x, k, dqi, qself[threadIdx.x],
                                      i);
}

// O = softmax(scale Q K^T + mask) V (with dropout's keep on P), a block of
// ROWS threads per ROWS query rows, key tiles of TILE rows in shared memory.
template <typename T, int D, int DV, int ROWS, int TILE, int F, typename I, typename O>
__device__ void mlc_attention_forward(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                      const MlcKernelCtx *ctx) {
  __shared__ T ks[TILE][D], vs[TILE][DV];
  mlc_attention_rows_forward<T, D, DV, ROWS, TILE, F>(s, x, ctx, ks, vs, false);
}

// dQ, dK, dV from dO (the three phases above). Shared memory is allocated
// for every __shared__ declaration of the kernel at once, so the phases
// share two tiles of the streamed side (K and V, or Q and dO) and two
// blocks of the rows the threads own.
template <typename T, int D, int DV, int ROWS, int TILE, int F, typename I, typename O>
__device__ void mlc_attention_backward(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                       const MlcKernelCtx *ctx, int phase) {
  __shared__ T tileA[TILE][D], tileB[TILE][DV];
  __shared__ T selfA[ROWS][D + 1], selfB[ROWS][DV + 1];
  if (phase == 0)
    mlc_attention_rows_forward<T, D, DV, ROWS, TILE, F>(s, x, ctx, tileA, tileB, true);
  else if (phase == 1)
    mlc_attention_rows_dkdv<T, D, DV, ROWS, TILE, F>(s, x, ctx, tileA, tileB, selfA, selfB);
  else
    mlc_attention_rows_dq<T, D, DV, ROWS, TILE, F>(s, x, ctx, tileA, tileB, selfA, selfB);
}

//===----------------------------------------------------------------------===//
// Tensor cores (bf16 products, f32 storage)
//===----------------------------------------------------------------------===//
//
// Every product is a 16 x 8 x 16 bf16 mma with f32 accumulators; Q, K, V, P
// and dS are rounded to bf16 for them, as bf16 autocast's attention does,
// while the scale, mask, softmax, dropout and outputs stay f32. A block is
// four warps (128 threads), a warp 16 rows (lane group g = lane / 4 holds
// rows g and g + 8, t4 = lane % 4 their column pairs), so 64 rows a block;
// the other side streams in tiles of 32 rows through shared memory. A tile
// is staged as bf16 pairs along its rows (B operands read along the head
// dimension) and, where needed, transposed: pairs along the tile (B
// operands read along it). Rows are padded by 4 words against bank
// conflicts.

enum { MLC_ATTN_TC_ROWS = 64, MLC_ATTN_TC_TILE = 32, MLC_ATTN_TC_THREADS = 128 };

// A lane's place in its warp's 16 rows from `first` (the block's first row).
struct MlcAttentionLane {
  int g, t4;
  int64_t r0, r1;
};
MLC_FN MlcAttentionLane mlc_attention_lane(int64_t first) {
  MlcAttentionLane l;
  const int lane = threadIdx.x & 31;
  l.g = lane >> 2;
  l.t4 = lane & 3;
  l.r0 = first + (threadIdx.x >> 5) * 16 + l.g;
  l.r1 = l.r0 + 8;
  return l;
}

// The A fragments of the warp's 16 rows of `base` (width W, rows `stride`
// apart, zeros at rows >= limit; rotated under RF's MLC_ATTN_ROTARY, see
// mlc_attention_qk), one per 16 columns.
template <int W, int RF, typename I, typename O>
MLC_FN void mlc_attention_a_frags(uint32_t (*frag)[4], const MlcAttention<float> &s,
                                  const MlcAttentionArgs<float, I, O> &x, const MlcAttentionBlock &k,
                                  const float *base, int64_t stride, const MlcAttentionLane &ln,
                                  int64_t limit) {
  for (int ks = 0; ks < W / 16; ++ks)
    for (int f = 0; f < 4; ++f) {
      const int64_t r = f & 1 ? ln.r1 : ln.r0, c = ks * 16 + (f >> 1) * 8 + 2 * ln.t4;
      frag[ks][f] = r < limit
                        ? mlc_pack_bf16(mlc_attention_qk<RF, float>(s, x, k, base, stride, r, c),
                                        mlc_attention_qk<RF, float>(s, x, k, base, stride, r, c + 1))
                        : 0u;
    }
}

// Tile rows [r, r + 32) of `base` (width W; rotated under RF) into dst as
// bf16 pairs along the row.
template <int W, int RF, int C, typename I, typename O>
MLC_FN void mlc_attention_stage_rows(uint32_t (*dst)[C], const MlcAttention<float> &s,
                                     const MlcAttentionArgs<float, I, O> &x,
                                     const MlcAttentionBlock &k, const float *base,
                                     int64_t stride, int64_t r, int64_t limit) {
  for (int e = threadIdx.x; e < MLC_ATTN_TC_TILE * W / 2; e += blockDim.x) {
    const int tr = e / (W / 2), cp = e % (W / 2);
    const int64_t y = r + tr;
    dst[tr][cp] =
        y < limit ? mlc_pack_bf16(mlc_attention_qk<RF, float>(s, x, k, base, stride, y, 2 * cp),
                                  mlc_attention_qk<RF, float>(s, x, k, base, stride, y, 2 * cp + 1))
                  : 0u;
  }
}

// The same rows transposed into dst: column c's pairs along the tile.
template <int W, int RF, int C, typename I, typename O>
MLC_FN void mlc_attention_stage_cols(uint32_t (*dst)[C], const MlcAttention<float> &s,
                                     const MlcAttentionArgs<float, I, O> &x,
                                     const MlcAttentionBlock &k, const float *base,
                                     int64_t stride, int64_t r, int64_t limit) {
  for (int e = threadIdx.x; e < MLC_ATTN_TC_TILE / 2 * W; e += blockDim.x) {
    const int kp = e / W, col = e % W;
    const int64_t y = r + 2 * kp;
    dst[col][kp] = mlc_pack_bf16(
        y < limit ? mlc_attention_qk<RF, float>(s, x, k, base, stride, y, col) : 0.0f,
        y + 1 < limit ? mlc_attention_qk<RF, float>(s, x, k, base, stride, y + 1, col) : 0.0f);
  }
}

// acc[n] += A B over STEPS k-steps for n-tiles [0, N): A the fragments a,
// B from rows of src (pairs along the row: src[n * 8 + g][ks * 8 + t4]).
template <int N, int STEPS, int C>
MLC_FN void mlc_attention_product(float (*acc)[4], const uint32_t (*a)[4], const uint32_t (*src)[C],
                                  const MlcAttentionLane &ln) {
  for (int n = 0; n < N; ++n)
    for (int ks = 0; ks < STEPS; ++ks) {
      const uint32_t bf[2] = {src[n * 8 + ln.g][ks * 8 + ln.t4], src[n * 8 + ln.g][ks * 8 + 4 + ln.t4]};
      mlc_mma_bf16(acc[n], a[ks], bf);
    }
}

// acc[n] += X B where X (16 x 32) is the f32 tile x held as accumulators
// (4 n-tiles), rounded to A fragments two n-tiles at a time.
template <int N, int C>
MLC_FN void mlc_attention_product_of_tile(float (*acc)[4], const float (*x)[4],
                                          const uint32_t (*src)[C], const MlcAttentionLane &ln) {
  for (int kk = 0; kk < 2; ++kk) {
    const uint32_t xa[4] = {mlc_pack_bf16(x[2 * kk][0], x[2 * kk][1]),
                            mlc_pack_bf16(x[2 * kk][2], x[2 * kk][3]),
                            mlc_pack_bf16(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                            mlc_pack_bf16(x[2 * kk + 1][2], x[2 * kk + 1][3])};
    for (int n = 0; n < N; ++n) {
      const uint32_t bf[2] = {src[n * 8 + ln.g][kk * 8 + ln.t4], src[n * 8 + ln.g][kk * 8 + 4 + ln.t4]};
      mlc_mma_bf16(acc[n], xa, bf);
    }
  }
}

template <int N> MLC_FN void mlc_attention_zero(float (*acc)[4]) {
  for (int n = 0; n < N; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0;
}

// The score of query i, key j from the product v: scaled, soft-capped (th:
// the tanh), masked, -inf where hidden (varlen: also where i or j is
// outside `seq`, the sequence of the lane's row, mlc_attention_sequence).
template <int F, typename I, typename O>
MLC_FN float mlc_attention_tc_score(const MlcAttention<float> &s, const MlcAttentionArgs<float, I, O> &x,
                                    const MlcAttentionBlock &k, int64_t i, int64_t j, float v,
                                    const MlcAttentionSpan &seq, float &th) {
  float sc = mlc_attention_cap<F>(s, v * s.scale, th);
  bool ok = i < k.SQ && j < k.SK && (!(F & MLC_ATTN_CAUSAL) || j <= i) &&
            (!(F & MLC_ATTN_WINDOW) || j >= mlc_attention_first_key<F>(s, i));
  if (F & MLC_ATTN_VARLEN)
    ok = ok && i >= seq.lo && i < seq.hi && j >= seq.lo && j < seq.hi;
  if ((F & MLC_ATTN_MASK) && ok)
    sc += mlc_attention_mask(s, x.mask, k, i, j);
  if (!ok)
    sc = -mlc_inf<float>();
  return sc;
}

// The sequences of the lane's rows r0, r1 (varlen; unused padded).
template <int F, typename I, typename O>
MLC_FN void mlc_attention_tc_sequences(const MlcAttention<float> &s,
                                       const MlcAttentionArgs<float, I, O> &x,
                                       const MlcAttentionLane &ln, MlcAttentionSpan *seq) {
  seq[0] = mlc_attention_sequence<F>(s, x, ln.r0, 0);
  seq[1] = mlc_attention_sequence<F>(s, x, ln.r1, 0);
}

// A streamed tile in shared memory: its rows as bf16 pairs along the row
// (rows) and transposed, pairs along the tile (cols).
template <int D, int DV> struct MlcAttentionTcTile {
  static const int W = D > DV ? D : DV;
  uint32_t rows[MLC_ATTN_TC_TILE][W / 2 + 4];
  uint32_t cols[W][MLC_ATTN_TC_TILE / 2 + 4];
};

// The backward pass's shared memory (one allocation, shared by its
// phases): two tiles and a query tile's statistics m, l, D.
template <int D, int DV> struct MlcAttentionTcShared {
  MlcAttentionTcTile<D, DV> a, b;
  float sm[MLC_ATTN_TC_TILE], sl[MLC_ATTN_TC_TILE], sd[MLC_ATTN_TC_TILE];
};

// The same memory as phases 1 and 2 end (MLC_ATTN_ROTARY): their block's
// 64 rows of dK or dQ, before the transposed rotation; no larger than the
// tiles (D at most their width), so the allocation does not grow.
template <int D, int DV> union MlcAttentionTcBackwardShared {
  MlcAttentionTcShared<D, DV> phase;
  float out[MLC_ATTN_TC_ROWS][D + 1];
};

// The backward's two products of a tile, S = A_s B^T (rows of sh.a) and
// dP = A_p C^T (rows of sh.b), from zero: phase 1's S^T, dP^T (A_s, A_p =
// K, V; B, C = Q, dO), phase 2's S, dP (A_s, A_p = Q, dO; B, C = K, V).
template <int D, int DV>
MLC_FN void mlc_attention_tc_scores(float (*sv)[4], float (*dp)[4], const uint32_t (*as)[4],
                                    const uint32_t (*ap)[4], const MlcAttentionTcShared<D, DV> &sh,
                                    const MlcAttentionLane &ln) {
  mlc_attention_zero<4>(sv);
  mlc_attention_zero<4>(dp);
  mlc_attention_product<4, D / 16>(sv, as, sh.a.rows, ln);
  mlc_attention_product<4, DV / 16>(dp, ap, sh.b.rows, ln);
}

// A row's sum and max over the four lanes of its lane group (t4 = 0..3).
MLC_FN float mlc_attention_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
MLC_FN float mlc_attention_quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// The warp's accumulators acc (N n-tiles of 8 columns) into rows r0, r1 of
// dst (rows `stride` apart; those >= limit skipped), divided by div[0]
// (row r0) and div[1] (r1).
template <int N, typename O>
MLC_FN void mlc_attention_tc_store(O *dst, int64_t stride, const MlcAttentionLane &ln,
                                   int64_t limit, const float (*acc)[4], const float *div) {
  for (int f = 0; f < 4; ++f) {
    const int64_t r = f < 2 ? ln.r0 : ln.r1;
    if (r >= limit)
      continue;
    for (int n = 0; n < N; ++n)
      dst[r * stride + n * 8 + 2 * ln.t4 + (f & 1)] = acc[n][f] / div[f >> 1];
  }
}

// The warp's gradient acc (D / 8 n-tiles) of Q or K rows r0, r1 to dst
// (rows `stride` apart, those >= limit skipped). Under MLC_ATTN_ROTARY
// that of the unrotated rows: the block's 64 rows from `first` staged in
// out (shared memory, free once every warp is past the phase's tiles),
// then written by the transposed rotation.
template <int D, int F, typename I, typename O>
MLC_FN void mlc_attention_tc_store_qk_grad(O *dst, int64_t stride,
                                           const MlcAttention<float> &s,
                                           const MlcAttentionArgs<float, I, O> &x,
                                           const MlcAttentionBlock &k, const MlcAttentionLane &ln,
                                           int64_t first, int64_t limit, const float (*acc)[4],
                                           float (*out)[D + 1]) {
  if (!(F & MLC_ATTN_ROTARY)) {
    const float one[2] = {1, 1};
    mlc_attention_tc_store<D / 8>(dst, stride, ln, limit, acc, one);
    return;
  }
  __syncthreads();
  for (int f = 0; f < 4; ++f)
    for (int n = 0; n < D / 8; ++n)
      out[(f < 2 ? ln.r0 : ln.r1) - first][n * 8 + 2 * ln.t4 + (f & 1)] = acc[n][f];
  __syncthreads();
  for (int e = threadIdx.x; e < MLC_ATTN_TC_ROWS * D; e += blockDim.x) {
    const int64_t rr = e / D, c = e % D, r = first + rr;
    if (r < limit)
      dst[r * stride + c] = mlc_attention_qk_grad<F, float>(s, x, k, out[rr], r, c);
  }
}

// Query i's statistics m, l, D (scratch, f64) as f32: 0, 1, 0 past its end.
template <int F>
MLC_FN void mlc_attention_tc_stats(const MlcAttention<float> &s, const double *stat,
                                   const MlcAttentionBlock &k, int64_t i, float &m, float &l,
                                   float &d) {
  const double *st = stat + 3 * mlc_attention_stat_row<F>(s, k, i);
  m = i < k.SQ ? (float)st[0] : 0.0f;
  l = i < k.SQ ? (float)st[1] : 1.0f;
  d = i < k.SQ ? (float)st[2] : 0.0f;
}

// P (times keep, for dV) and dS of one score from its query's statistics
// m, l, d: pw = P keep, ds = scale P (dp keep - d) (soft-capped: times
// 1 - th^2, th the score's tanh).
template <int F, typename T>
MLC_FN void mlc_attention_tc_grads(const MlcAttention<T> &s, float sc, float th, float m, float l,
                                   float d, float dp, float kp, float &pw, float &ds) {
  const float pr = sc == -mlc_inf<float>() ? 0.0f : mlc_exp(sc - m) / l;
  pw = pr * kp;
  ds = pr * (dp * kp - d) * s.scale;
  if (F & MLC_ATTN_SOFTCAP)
    ds *= 1.0f - th * th;
}

// The forward pass (backward: phase 0, the statistics), a warp per 16
// query rows: S = Q K^T per key tile of 32 (K as rows, V transposed in
// shared memory), the online softmax on the accumulators (a row's values
// are spread over the four lanes of its group: its max and sum are two
// shuffles), O += P V. Writes O = acc / l, or (statistics) m, l and D_i =
// dO_i . O_i to scratch.
// Math: 4 S^2 D flops per head on tensor cores (halved when causal).
// Memory: Q, O once; K, V once per query block of 64 (from L2).
template <int D, int DV, int F, typename I, typename O>
__device__ void mlc_attention_tc_rows_forward(const MlcAttention<float> &s,
                                              const MlcAttentionArgs<float, I, O> &x,
                                              const MlcKernelCtx *ctx,
                                              MlcAttentionTcTile<D, DV> &tile, bool statistics) {
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const MlcAttentionBlock k = mlc_attention_block<F>(s, x, MLC_ATTN_TC_ROWS);
  const int64_t i0 = k.first, SQ = k.SQ, SK = k.SK;
  if (i0 >= SQ)
    return;
  const auto [oh, dk, dv, gh, qh, kh, vh] = mlc_attention_heads<F>(s, k, x);
  (void)dk, (void)dv;
  const MlcAttentionLane ln = mlc_attention_lane(i0);
  uint32_t qa[D / 16][4];
  mlc_attention_a_frags<D, F>(qa, s, x, k, qh, s.t[MLC_ATT_Q].row, ln, SQ);
  float o[DV / 8][4];
  mlc_attention_zero<DV / 8>(o);
  float m[2] = {-mlc_inf<float>(), -mlc_inf<float>()}, l[2] = {0, 0};
  MlcAttentionSpan seq[2];
  mlc_attention_tc_sequences<F>(s, x, ln, seq);
  const MlcAttentionSpan keys = mlc_attention_block_keys<F>(s, x, k);
  for (int64_t j0 = keys.lo; j0 < keys.hi; j0 += MLC_ATTN_TC_TILE) {
    __syncthreads();
    mlc_attention_stage_rows<D, F>(tile.rows, s, x, k, kh, s.t[MLC_ATT_K].row, j0, SK);
    mlc_attention_stage_cols<DV, 0>(tile.cols, s, x, k, vh, s.t[MLC_ATT_V].row, j0, SK);
    __syncthreads();
    float sv[4][4];
    mlc_attention_zero<4>(sv);
    mlc_attention_product<4, D / 16>(sv, qa, tile.rows, ln);
    float tm[2] = {-mlc_inf<float>(), -mlc_inf<float>()};
    for (int n = 0; n < 4; ++n)
      for (int f = 0; f < 4; ++f) {
        const int64_t i = f < 2 ? ln.r0 : ln.r1, j = j0 + n * 8 + 2 * ln.t4 + (f & 1);
        float th = 0;
        const float sc = mlc_attention_tc_score<F>(s, x, k, i, j, sv[n][f], seq[f >> 1], th);
        sv[n][f] = sc;
        tm[f >> 1] = sc > tm[f >> 1] ? sc : tm[f >> 1];
      }
    float f2[2];
    for (int r = 0; r < 2; ++r) {
      tm[r] = mlc_attention_quad_max(tm[r]);
      const float mn = tm[r] > m[r] ? tm[r] : m[r];
      f2[r] = mn == -mlc_inf<float>() ? 1.0f : mlc_exp(m[r] - mn);
      l[r] *= f2[r];
      m[r] = mn;
    }
    for (int n = 0; n < DV / 8; ++n) {
      o[n][0] *= f2[0];
      o[n][1] *= f2[0];
      o[n][2] *= f2[1];
      o[n][3] *= f2[1];
    }
    float w[4][4];
    for (int n = 0; n < 4; ++n)
      for (int f = 0; f < 4; ++f) {
        const int64_t i = f < 2 ? ln.r0 : ln.r1, j = j0 + n * 8 + 2 * ln.t4 + (f & 1);
        const float e = sv[n][f] == -mlc_inf<float>() ? 0.0f : mlc_exp(sv[n][f] - m[f >> 1]);
        l[f >> 1] += e;
        w[n][f] = e * mlc_attention_keep<F>(s, key, k, i, j);
      }
    mlc_attention_product_of_tile<DV / 8>(o, w, tile.cols, ln);
  }
  for (int r = 0; r < 2; ++r) {
    l[r] = mlc_attention_quad_sum(l[r]);
  }
  if (!statistics) {
    mlc_attention_tc_store<DV / 8>(oh, s.t[MLC_ATT_O].row, ln, SQ, o, l);
    return;
  }
  double *stat = (double *)ctx->scratch;
  float di[2] = {0, 0};
  for (int n = 0; n < DV / 8; ++n)
    for (int f = 0; f < 4; ++f) {
      const int64_t i = f < 2 ? ln.r0 : ln.r1;
      if (i < SQ)
        di[f >> 1] += gh[i * s.t[MLC_ATT_GO].row + n * 8 + 2 * ln.t4 + (f & 1)] * o[n][f];
    }
  for (int r = 0; r < 2; ++r) {
    di[r] = mlc_attention_quad_sum(di[r]);
    const int64_t i = r ? ln.r1 : ln.r0;
    if (ln.t4 == 0 && i < SQ) {
      const int64_t row = mlc_attention_stat_row<F>(s, k, i);
      stat[3 * row] = m[r];
      stat[3 * row + 1] = l[r];
      stat[3 * row + 2] = di[r] / l[r];
    }
  }
}

// Phase 1, a warp per 16 key rows (K, V as A fragments): over the query
// tiles that see them (Q and dO as rows and transposed, their statistics),
// S^T = K Q^T and dP^T = V dO^T, then dV += (P keep)^T dO, dK += dS^T Q.
// Math: 8 S^2 D flops per head on tensor cores. Memory: K, V, dK, dV once;
// Q, dO once per key block of 64 (from L2); the statistics once per tile.
template <int D, int DV, int F, typename I, typename O>
__device__ void mlc_attention_tc_dkdv(const MlcAttention<float> &s,
                                      const MlcAttentionArgs<float, I, O> &x, const MlcKernelCtx *ctx,
                                      MlcAttentionTcShared<D, DV> &sh, float (*out)[D + 1]) {
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const MlcAttentionBlock b = mlc_attention_block<F>(s, x, MLC_ATTN_TC_ROWS);
  const int64_t j0 = b.first, SQ = b.SQ, SK = b.SK;
  if (j0 >= SK || !mlc_attention_is_kv_block<F>(s, b))
    return;
  const MlcAttentionBlock kv = mlc_attention_kv_block<F>(b);
  const float *kh = mlc_attention_head<F>(s, kv, MLC_ATT_K, x.k);
  const float *vh = mlc_attention_head<F>(s, kv, MLC_ATT_V, x.v);
  O *dk = mlc_attention_head<F>(s, kv, MLC_ATT_DK, x.dk);
  O *dv = mlc_attention_head<F>(s, kv, MLC_ATT_DV, x.dv);
  const MlcAttentionLane ln = mlc_attention_lane(j0);
  const double *stat = (const double *)ctx->scratch;
  uint32_t ka[D / 16][4], va[DV / 16][4];
  mlc_attention_a_frags<D, F>(ka, s, x, kv, kh, s.t[MLC_ATT_K].row, ln, SK);
  mlc_attention_a_frags<DV, 0>(va, s, x, kv, vh, s.t[MLC_ATT_V].row, ln, SK);
  float gk[D / 8][4], gv[DV / 8][4];
  mlc_attention_zero<D / 8>(gk);
  mlc_attention_zero<DV / 8>(gv);
  const int64_t rq = s.t[MLC_ATT_Q].row, rg = s.t[MLC_ATT_GO].row;
  MlcAttentionSpan seq[2];
  mlc_attention_tc_sequences<F>(s, x, ln, seq);
  const MlcAttentionSpan queries = mlc_attention_block_queries<F>(s, x, b);
  for (int64_t g = 0; g < mlc_attention_group<F>(s); ++g) {
  const MlcAttentionBlock k = mlc_attention_group_head<F>(s, kv, g);
  const float *qh = mlc_attention_head<F>(s, k, MLC_ATT_Q, x.q);
  const float *gh = mlc_attention_head<F>(s, k, MLC_ATT_GO, x.go);
  for (int64_t i0 = queries.lo; i0 < queries.hi; i0 += MLC_ATTN_TC_TILE) {
    __syncthreads();
    mlc_attention_stage_rows<D, F>(sh.a.rows, s, x, k, qh, rq, i0, SQ);
    mlc_attention_stage_cols<D, F>(sh.a.cols, s, x, k, qh, rq, i0, SQ);
    mlc_attention_stage_rows<DV, 0>(sh.b.rows, s, x, k, gh, rg, i0, SQ);
    mlc_attention_stage_cols<DV, 0>(sh.b.cols, s, x, k, gh, rg, i0, SQ);
    for (int e = threadIdx.x; e < MLC_ATTN_TC_TILE; e += blockDim.x) {
      mlc_attention_tc_stats<F>(s, stat, k, i0 + e, sh.sm[e], sh.sl[e], sh.sd[e]);
    }
    __syncthreads();
    float sv[4][4], dp[4][4], pw[4][4], ds[4][4];
    mlc_attention_tc_scores<D, DV>(sv, dp, ka, va, sh, ln);
    for (int n = 0; n < 4; ++n)
      for (int f = 0; f < 4; ++f) {
        const int q = n * 8 + 2 * ln.t4 + (f & 1);
        const int64_t j = f < 2 ? ln.r0 : ln.r1, i = i0 + q;
        float th = 0;
        const float sc = mlc_attention_tc_score<F>(s, x, k, i, j, sv[n][f], seq[f >> 1], th);
        mlc_attention_tc_grads<F>(s, sc, th, sh.sm[q], sh.sl[q], sh.sd[q], dp[n][f],
                                  mlc_attention_keep<F>(s, key, k, i, j), pw[n][f], ds[n][f]);
      }
    mlc_attention_product_of_tile<DV / 8>(gv, pw, sh.b.cols, ln);
    mlc_attention_product_of_tile<D / 8>(gk, ds, sh.a.cols, ln);
  }
  }
  if (!(F & MLC_ATTN_ROTARY)) { // dK and dV in one loop (fewer registers)
    for (int f = 0; f < 4; ++f) {
      const int64_t j = f < 2 ? ln.r0 : ln.r1;
      if (j >= SK)
        continue;
      for (int n = 0; n < D / 8; ++n)
        dk[j * s.t[MLC_ATT_DK].row + n * 8 + 2 * ln.t4 + (f & 1)] = gk[n][f];
      for (int n = 0; n < DV / 8; ++n)
        dv[j * s.t[MLC_ATT_DV].row + n * 8 + 2 * ln.t4 + (f & 1)] = gv[n][f];
    }
    return;
  }
  // dV as is, dK of the unrotated K.
  const float one[2] = {1, 1};
  mlc_attention_tc_store<DV / 8>(dv, s.t[MLC_ATT_DV].row, ln, SK, gv, one);
  mlc_attention_tc_store_qk_grad<D, F>(dk, s.t[MLC_ATT_DK].row, s, x, kv, ln, j0, SK, gk, out);
}

// Phase 2, a warp per 16 query rows (Q, dO as A fragments, the rows'
// statistics in registers): over the key tiles they see, S = Q K^T and
// dP = dO V^T, then dQ += dS K.
// Math: 6 S^2 D flops per head on tensor cores (halved when causal).
// Memory: Q, dO, dQ once; K, V once per query block of 64 (from L2).
template <int D, int DV, int F, typename I, typename O>
__device__ void mlc_attention_tc_dq(const MlcAttention<float> &s, const MlcAttentionArgs<float, I, O> &x,
                                    const MlcKernelCtx *ctx, MlcAttentionTcShared<D, DV> &sh,
                                    float (*out)[D + 1]) {
  const uint64_t key = mlc_attention_key<F>(s, ctx);
  const MlcAttentionBlock k = mlc_attention_block<F>(s, x, MLC_ATTN_TC_ROWS);
  const int64_t i0 = k.first, SQ = k.SQ, SK = k.SK;
  if (i0 >= SQ)
    return;
  const auto [dq, dk, dv, gh, qh, kh, vh] = mlc_attention_heads<F>(s, k, x);
  (void)dk, (void)dv;
  const MlcAttentionLane ln = mlc_attention_lane(i0);
  const double *stat = (const double *)ctx->scratch;
  uint32_t qa[D / 16][4], ga[DV / 16][4];
  mlc_attention_a_frags<D, F>(qa, s, x, k, qh, s.t[MLC_ATT_Q].row, ln, SQ);
  mlc_attention_a_frags<DV, 0>(ga, s, x, k, gh, s.t[MLC_ATT_GO].row, ln, SQ);
  float gq[D / 8][4];
  mlc_attention_zero<D / 8>(gq);
  float rm[2], rl[2], rd[2];
  for (int r = 0; r < 2; ++r) {
    mlc_attention_tc_stats<F>(s, stat, k, r ? ln.r1 : ln.r0, rm[r], rl[r], rd[r]);
  }
  MlcAttentionSpan seq[2];
  mlc_attention_tc_sequences<F>(s, x, ln, seq);
  const MlcAttentionSpan keys = mlc_attention_block_keys<F>(s, x, k);
  for (int64_t j0 = keys.lo; j0 < keys.hi; j0 += MLC_ATTN_TC_TILE) {
    __syncthreads();
    mlc_attention_stage_rows<D, F>(sh.a.rows, s, x, k, kh, s.t[MLC_ATT_K].row, j0, SK);
    mlc_attention_stage_cols<D, F>(sh.a.cols, s, x, k, kh, s.t[MLC_ATT_K].row, j0, SK);
    mlc_attention_stage_rows<DV, 0>(sh.b.rows, s, x, k, vh, s.t[MLC_ATT_V].row, j0, SK);
    __syncthreads();
    float sv[4][4], dp[4][4], pw[4][4], ds[4][4];
    mlc_attention_tc_scores<D, DV>(sv, dp, qa, ga, sh, ln);
    for (int n = 0; n < 4; ++n)
      for (int f = 0; f < 4; ++f) {
        const int64_t i = f < 2 ? ln.r0 : ln.r1, j = j0 + n * 8 + 2 * ln.t4 + (f & 1);
        float th = 0;
        const float sc = mlc_attention_tc_score<F>(s, x, k, i, j, sv[n][f], seq[f >> 1], th);
        mlc_attention_tc_grads<F>(s, sc, th, rm[f >> 1], rl[f >> 1], rd[f >> 1], dp[n][f],
                                  mlc_attention_keep<F>(s, key, k, i, j), pw[n][f], ds[n][f]);
      }
    (void)pw;
    mlc_attention_product_of_tile<D / 8>(gq, ds, sh.a.cols, ln);
  }
  mlc_attention_tc_store_qk_grad<D, F>(dq, s.t[MLC_ATT_O].row, s, x, k, ln, i0, SQ, gq, out);
}

// O = softmax(scale Q K^T + mask) V on tensor cores, 128 threads per 64
// query rows. D a multiple of 16 (products over it), DV of 8.
template <int D, int DV, int F, typename I, typename O>
__device__ void mlc_attention_tc_forward(const MlcAttention<float> &s,
                                         const MlcAttentionArgs<float, I, O> &x,
                                         const MlcKernelCtx *ctx) {
  static_assert(D % 16 == 0 && DV % 8 == 0, "tensor-core attention: D % 16, DV % 8");
  __shared__ MlcAttentionTcTile<D, DV> tile;
  mlc_attention_tc_rows_forward<D, DV, F>(s, x, ctx, tile, false);
}

// dQ, dK, dV on tensor cores (the three phases); D and DV multiples of 16.
template <int D, int DV, int F, typename I, typename O>
__device__ void mlc_attention_tc_backward(const MlcAttention<float> &s,
                                          const MlcAttentionArgs<float, I, O> &x,
                                          const MlcKernelCtx *ctx, int phase) {
  static_assert(D % 16 == 0 && DV % 16 == 0, "tensor-core attention: D % 16, DV % 16");
  static_assert(sizeof(MlcAttentionTcBackwardShared<D, DV>) == sizeof(MlcAttentionTcShared<D, DV>),
                "tensor-core attention: the staged gradients fit in the tiles");
  __shared__ MlcAttentionTcBackwardShared<D, DV> sh;
  if (phase == 0)
    mlc_attention_tc_rows_forward<D, DV, F>(s, x, ctx, sh.phase.a, true);
  else if (phase == 1)
    mlc_attention_tc_dkdv<D, DV, F>(s, x, ctx, sh.phase, sh.out);
  else
    mlc_attention_tc_dq<D, DV, F>(s, x, ctx, sh.phase, sh.out);
}
