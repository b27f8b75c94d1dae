
// splitmix64's finalizer: a bijection on 64-bit words.
MLC_FN uint64_t mlc_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Dropout's key for (seed, step); element i draws mlc_uniform(key, i).
MLC_FN uint64_t mlc_key(uint64_t seed, uint64_t step) {
  return mlc_mix(step + 0x9E3779B97F4A7C15ull * (mlc_mix(seed) | 1));
}

// Uniform in [0, 1) from 53 bits of mix(i + key).
MLC_FN double mlc_uniform(uint64_t key, uint64_t i) {
  return (double)(mlc_mix(i + key) >> 11) * 0x1.0p-53;
}

// The index in a whole tensor of element i of block r of `blocks` equal
// blocks along one dim (dropout's counter for a block: mlc.dropout's and
// attention's `block`): `span` is the block's extent along that dim times
// its extents after it, so i is (outer, rest) with rest < span and the
// whole tensor's index is (outer * blocks + r) * span + rest.
MLC_FN uint64_t mlc_block_index(uint64_t i, uint64_t span, uint64_t blocks, uint64_t r) {
  return (i / span * blocks + r) * span + i % span;
}

// The tanh GELU, 0.5 x (1 + tanh(c (x + k x^3))) with c = sqrt(2 / pi) and
// k = 0.044715, and its derivative 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k
// x^2) at t = tanh(c (x + k x^3)): the one copy of the formula in mlc's
// kernels (mlc.gelu and mlc.gelu_grad of approximate = tanh, the CPU GEMM's
// gelu epilogue), with the target's mlc_tanh (cpu.h, cuda.cuh).
template <typename T> MLC_FN T mlc_gelu_tanh(T x) {
  return (T)0.5 * x * ((T)1 + mlc_tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));
}
template <typename T> MLC_FN T mlc_gelu_tanh_grad(T x) {
  const T t = mlc_tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x));
  return (T)0.5 * ((T)1 + t) +
         (T)0.5 * x * ((T)1 - t * t) * (T)0.7978845608028654 * ((T)1 + (T)(3 * 0.044715) * x * x);
}

// bf16 storage (--dtype bf16: the matrix products' operands and results):
// the upper half of an f32; from f32 by rounding to nearest even (a NaN
// stays a NaN), to f32 exactly.
struct mlc_bf16 {
  uint16_t bits;
  mlc_bf16() = default;
  MLC_MEMBER mlc_bf16(float f) {
    const uint32_t u = mlc_float_bits(f);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                           : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  MLC_MEMBER operator float() const { return mlc_bits_float((uint32_t)bits << 16); }
};

// The row kernels' variant flags (prelude/rows.h, prelude/rows.cuh), a
// template argument of each:
enum {
  MLC_ROW_RMS = 1,       // RMSNorm: no mean, no bias (LayerNorm's kernels)
  MLC_ROW_UNIT = 2,      // no weight and no bias (a weight of 1)
  MLC_ROW_RESIDUAL = 4,  // a gradient adds the residual stream's; a fused norm h
  MLC_ROW_COPY = 8,      // a gradient also stored as a copy of another type (bf16)
  MLC_ROW_LOG = 16,      // log-softmax, not softmax
  MLC_ROW_LOSS = 32,     // cross-entropy's gradient also writes the loss
  MLC_ROW_PLUS_ONE = 64, // a norm's gradient: the weight is 1 + w (Gemma's RMSNorm)
};
// A fused norm's value at element x of its row (mlc_layer_norm_fused):
// norm(w, b, h) is LayerNorm's (x - mu) * rs * w + b, RMSNorm's
// (T)(x * rs) * w (b unused), then with MLC_ROW_RESIDUAL a post-norm's h
// added (h unused without); evaluated in the expression's own type (f32
// arithmetic for bf16 operands), rounded to T where the caller stores it.
template <typename T, int F> struct MlcRowNorm {
  T x, mu, rs;
  template <typename W, typename B, typename H>
  MLC_MEMBER auto operator()(W w, B b, H h) const {
    if constexpr ((F & MLC_ROW_RESIDUAL) != 0)
      return MlcRowNorm<T, F & ~MLC_ROW_RESIDUAL>{x, mu, rs}(w, b, 0) + h;
    else if constexpr ((F & MLC_ROW_RMS) != 0)
      return (T)(x * rs) * w;
    else
      return (x - mu) * rs * w + b;
  }
};
// A reduction's kind (mlc_reduce_rows, mlc_reduce_columns).
enum { MLC_REDUCE_SUM = 0, MLC_REDUCE_MEAN = 1, MLC_REDUCE_MAX = 2 };

// Attention's arguments, alike on both targets (the kernels that take them:
// prelude/attention.cuh, prelude/attention.h). The variant flags, a
// template argument of every entry point:
enum {
  MLC_ATTN_CAUSAL = 1,  // key j > query i hidden
  MLC_ATTN_MASK = 2,    // an additive mask broadcast to [B, H, Sq, Sk]
  MLC_ATTN_VARLEN = 4,  // packed sequences (cu_seqlens)
  MLC_ATTN_DROPOUT = 8, // dropout on the probabilities
  MLC_ATTN_GROUPED = 16, // grouped-query: fewer kv heads than query heads
  MLC_ATTN_ROTARY = 32,  // Q and K rotated where they are read (rotary embedding)
  MLC_ATTN_INTERLEAVED = 64, // with ROTARY: pairs (2i, 2i + 1), not rotate-half's
  MLC_ATTN_SOFTCAP = 128,    // scores soft-capped: softcap * tanh(s / softcap), before the mask
  MLC_ATTN_WINDOW = 256,     // with CAUSAL: query i sees keys i - window + 1 .. i only
  MLC_ATTN_BLOCK = 512,      // with DROPOUT: the probabilities are a block of one process's (s.block)
};

// Where head (b, h) of a tensor starts, in elements: offset + b * batch +
// h * head, b being the batch (varlen: the sequence's first token), h the
// query head for O, dO, Q (and dQ) and the kv head for K, V, dK, dV; its
// rows are `row` elements apart.
struct MlcAttentionTensor {
  int64_t offset, batch, head, row;
};

// The tensor arguments' roles: the output O (backward: dQ), dK, dV, the
// output gradient dO, then Q, K, V. The forward pass uses O, Q, K, V.
enum { MLC_ATT_O = 0, MLC_ATT_DK, MLC_ATT_DV, MLC_ATT_GO, MLC_ATT_Q, MLC_ATT_K, MLC_ATT_V };

// Whether tensor `role` is indexed by the kv head (K, V, dK, dV).
MLC_FN bool mlc_attention_kv_role(int role) {
  return role == MLC_ATT_K || role == MLC_ATT_V || role == MLC_ATT_DK || role == MLC_ATT_DV;
}

// One attention kernel's run-time sizes. heads counts the query heads,
// kvHeads the key/value heads (grouped-query attention: kvHeads divides
// heads, query head h reading kv head h / (heads / kvHeads); equal without
// grouping). seqQ and seqK are the padded
// lengths (varlen: unused, each sequence's L); tokenCapacity the most
// tokens of a varlen batch (dropout's counters and the statistics' rows);
// queryBlocks (CUDA) the blocks per head, the grid being batch * heads *
// queryBlocks (varlen: heads * queryBlocks, tiles of the packed stream's
// tokenCapacity);
// mask the mask's element strides along [B, H, Sq, Sk] (0 where
// broadcast); dropout the probability p, keepScale 1 / (1 - p).
// The rotary embedding's tables (MLC_ATTN_ROTARY): dim R, the first R
// elements of a Q or K row rotating (even, at most the head dim; the rest
// pass through), and the element d of the tables' row for token i of
// batch b at b * batch + i * row + d (varlen: token i of the packed stream
// at i * row + d, batch unused). softcap: the cap c of MLC_ATTN_SOFTCAP
// (each scaled score s becomes c tanh(s / c) before the mask; 0 without).
// window: MLC_ATTN_WINDOW's W (query i sees keys i - W + 1 .. i, indices
// within its sequence; 0 without).
struct MlcAttentionRotary {
  int64_t dim, batch, row;
};

// Dropout on a block of one process's probabilities (the op's `block`):
// block `rank` of `blocks` along a dim of the counter space whose span
// (that dim's extent and those after it) is `span` (MLC_ATTN_BLOCK; zeros
// without it).
struct MlcDropoutBlock {
  uint64_t span, blocks, rank;
};

template <typename T> struct MlcAttention {
  int64_t batch, heads, kvHeads, seqQ, seqK, tokenCapacity, queryBlocks;
  MlcAttentionTensor t[7];
  int64_t mask[4];
  T scale;
  double dropout;
  T keepScale;
  uint64_t seed;
  MlcAttentionRotary rot;
  double softcap;
  int64_t window;
  MlcDropoutBlock block;
};

// The query heads per kv head: 1 unless MLC_ATTN_GROUPED (so that the
// ungrouped instantiations hold no group loop or division).
template <int F, typename T> MLC_FN int64_t mlc_attention_group(const MlcAttention<T> &s) {
  return (F & MLC_ATTN_GROUPED) ? s.heads / s.kvHeads : 1;
}

// The buffers: O (backward: dQ), dK, dV, dO, Q, K, V, the mask,
// cu_seqlens and the rotary tables cos, sin (null where absent).
// The outputs (O, or dQ, dK, dV) are O's: T's, or bf16 where the plan
// stores them so (an attention's `bf16_result`, --dtype bf16).
template <typename T, typename I, typename O = T> struct MlcAttentionArgs {
  O *o, *dk, *dv;
  const T *go, *q, *k, *v, *mask;
  const I *cu;
  const T *cos, *sin;
};

// The pieces of attention's indexing both targets share. K is a target's
// head record (prelude/attention.cuh's MlcAttentionBlock, attention.h's
// MlcAttentionHead): bb the batch (varlen: the sequence), h the query
// head, kvh its kv head, bh = bb * heads + h, a the sequence's first
// token, SQ, SK the lengths of its queries and keys. (CUDA's varlen blocks
// span the packed stream instead: bb = a = 0, SQ = SK = the token count,
// indices the stream's tokens, so that the expressions below still hold.)

// k's lengths: the padded ones, or (varlen) sequence bb's tokens cu[bb] ..
// cu[bb + 1] from a.
template <int F, typename T, typename I, typename K, typename O>
MLC_FN void mlc_attention_lengths(const MlcAttention<T> &s, const MlcAttentionArgs<T, I, O> &x,
                                  K &k) {
  k.a = 0;
  k.SQ = s.seqQ;
  k.SK = s.seqK;
  if (F & MLC_ATTN_VARLEN) {
    k.a = x.cu[k.bb];
    const int64_t L = x.cu[k.bb + 1] - k.a;
    k.SQ = k.SK = L;
  }
}

// Tensor `role`'s head of k's (batch or sequence, head): the query head's
// for O, dO, Q, the kv head's for K, V, dK, dV.
template <int F, typename T, typename K, typename P>
MLC_FN P *mlc_attention_head(const MlcAttention<T> &s, const K &k, int role, P *base) {
  const MlcAttentionTensor &w = s.t[role];
  return base + w.offset + ((F & MLC_ATTN_VARLEN) ? k.a : k.bb) * w.batch +
         ((F & MLC_ATTN_GROUPED) && mlc_attention_kv_role(role) ? k.kvh : k.h) * w.head;
}

// Rotary embedding (MLC_ATTN_ROTARY), mlc.rotary's semantics on the rows
// of Q and K: y[d] = x[d] cos[d] + x[p(d)] sin[d] for d < R (sin carrying
// rotate-half's sign), y[d] = x[d] past R. The backward pass writes dQ and
// dK of the unrotated inputs by the transpose, dx[d] = dy[d] cos[d] +
// dy[p(d)] sin[p(d)]. p(d) is d's pair partner: d ^ 1 when interleaved,
// else d + R/2 in the first half and d - R/2 in the second.
template <int F> MLC_FN int64_t mlc_rotary_partner(int64_t d, int64_t R) {
  return (F & MLC_ATTN_INTERLEAVED) ? (d ^ 1) : (d < R / 2 ? d + R / 2 : d - R / 2);
}

// Where the tables' row of query or key i of k's head starts.
template <int F, typename T, typename K>
MLC_FN int64_t mlc_rotary_row(const MlcAttention<T> &s, const K &k, int64_t i) {
  return (F & MLC_ATTN_VARLEN) ? (k.a + i) * s.rot.row : k.bb * s.rot.batch + i * s.rot.row;
}

// Element d of row x rotated by the tables' row c, sn (TRANSPOSE: by the
// transpose, for gradients), computed in A (float for f32 and bf16
// storage, double for f64).
template <int F, bool TRANSPOSE, typename A, typename E, typename T>
MLC_FN A mlc_rotary_element(const E *x, const T *c, const T *sn, int64_t d, int64_t R) {
  if (d >= R)
    return (A)x[d];
  const int64_t p = mlc_rotary_partner<F>(d, R);
  return (A)x[d] * (A)c[d] + (A)x[p] * (A)(TRANSPOSE ? sn[p] : sn[d]);
}

// The additive mask's element for query i, key j.
template <typename T, typename K>
MLC_FN T mlc_attention_mask(const MlcAttention<T> &s, const T *mask, const K &k, int64_t i,
                            int64_t j) {
  return mask[k.bb * s.mask[0] + k.h * s.mask[1] + i * s.mask[2] + j * s.mask[3]];
}

// The keys query i sees: [0, keys) (causal: up to the diagonal).
template <int F> MLC_FN int64_t mlc_attention_keys_seen(int64_t i, int64_t SK) {
  return (F & MLC_ATTN_CAUSAL) ? (i + 1 < SK ? i + 1 : SK) : SK;
}

// The first key query i sees: i - window + 1 under MLC_ATTN_WINDOW (the
// sliding window's), else 0 (i, and the result, relative to any origin
// keys and queries share: a sequence's first token, or the packed stream's).
template <int F, typename T>
MLC_FN int64_t mlc_attention_first_key(const MlcAttention<T> &s, int64_t i) {
  return (F & MLC_ATTN_WINDOW) && i + 1 > s.window ? i + 1 - s.window : 0;
}

// The dropout key of this step (unused without dropout).
template <int F, typename T, typename C>
MLC_FN uint64_t mlc_attention_key(const MlcAttention<T> &s, const C *ctx) {
  return (F & MLC_ATTN_DROPOUT) ? mlc_key(s.seed, (uint64_t)ctx->step) : 0;
}

// Dropout's first counter of query i's row: (head, i, 0) in the padded
// [B, H, Sq, Sk] (varlen: [H, capacity, capacity]) order, so that both
// targets draw the same mask; for a block of one process's probabilities
// (s.block), that row's counter in the whole (keys are never split, so a
// row's counters stay consecutive).
template <int F, typename T, typename K>
MLC_FN uint64_t mlc_attention_dropout_row(const MlcAttention<T> &s, const K &k, int64_t i) {
  if (!(F & MLC_ATTN_DROPOUT))
    return 0;
  const uint64_t row = (F & MLC_ATTN_VARLEN)
                           ? ((uint64_t)k.h * s.tokenCapacity + k.a + i) * s.tokenCapacity + k.a
                           : (uint64_t)(k.bh * s.seqQ + i) * s.seqK;
  return (F & MLC_ATTN_BLOCK) ? mlc_block_index(row, s.block.span, s.block.blocks, s.block.rank)
                              : row;
}

// Dropout's factor for probability (i, j) of the row whose first counter
// is `row`: 1 / (1 - p) or 0; 1 without dropout.
template <int F, typename T>
MLC_FN T mlc_attention_keep(const MlcAttention<T> &s, uint64_t key, uint64_t row, int64_t j) {
  if (!(F & MLC_ATTN_DROPOUT))
    return (T)1;
  return mlc_uniform(key, row + j) >= s.dropout ? s.keepScale : (T)0;
}
