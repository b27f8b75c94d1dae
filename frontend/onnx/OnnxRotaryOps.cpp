//===- OnnxRotaryOps.cpp - ONNX RotaryEmbedding ---------------------------===//
//
// Opset 23's RotaryEmbedding, which the dynamo exporter writes for the Llama
// family's apply_rotary_pos_emb. With constant cos/sin caches (the exporter
// computes them from the inv_freq buffer and positions, which fold once the
// shapes are fixed) it imports as one mlc.rotary, the op frontend/Llama.cpp
// builds; caches computed from the model's inputs import into elementwise
// ops (slices, products, a concat).
//
// At opsets below 23 the exporter writes the rotation out (Slice, Neg,
// Concat, Mul, Add); the ordinary handlers import it and mlc-recognize
// (passes/Recognize.cpp) makes it mlc.rotary.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxNode.h"

using namespace mlir;

namespace mlc::onnximport {
namespace {

/// x[..., lo:hi:step] along the last axis.
Value lastAxisSlice(Node &nd, Value x, int64_t lo, int64_t hi, int64_t step = 1) {
  Shape s = shapeOf(x);
  SmallVector<int64_t> l(s.size(), 0), h(s.begin(), s.end()), st(s.size(), 1);
  l.back() = lo;
  h.back() = hi;
  st.back() = step;
  return nd.b.create<SliceOp>(nd.loc, x, nd.b.getDenseI64ArrayAttr(l),
                              nd.b.getDenseI64ArrayAttr(h), nd.b.getDenseI64ArrayAttr(st));
}

Value concatLast(Node &nd, Value a, Value b) {
  return nd.b.create<ConcatOp>(nd.loc, ValueRange{a, b},
                               nd.b.getI64IntegerAttr(int64_t(shapeOf(a).size()) - 1));
}

/// The rotation of the first `rd` features of x ([B, H, S, D] or
/// [B, S, H, D]) by angles whose cos and sin are `cos`, `sin` (broadcast to
/// [..., rd/2]). Pairs are (x_i, x_{i + rd/2}) (HF's rotate_half) or, when
/// interleaved, (x_{2i}, x_{2i+1}):
///   y1 = x1 cos - x2 sin,  y2 = x2 cos + x1 sin.
/// Reads x once and writes y once per element (one pointwise fusion).
Value rotate(Node &nd, Value x, Value cos, Value sin, int64_t rd, bool interleaved) {
  Shape s = shapeOf(x);
  int64_t d = s.back();
  Value rot = rd == d ? x : lastAxisSlice(nd, x, 0, rd);
  Value x1 = interleaved ? lastAxisSlice(nd, rot, 0, rd, 2) : lastAxisSlice(nd, rot, 0, rd / 2);
  Value x2 = interleaved ? lastAxisSlice(nd, rot, 1, rd, 2) : lastAxisSlice(nd, rot, rd / 2, rd);
  auto mul = [&](Value a, Value b) { return nd.b.create<MulOp>(nd.loc, a, b); };
  Value y1 = nd.b.create<SubOp>(nd.loc, mul(x1, cos), mul(x2, sin));
  Value y2 = nd.b.create<AddOp>(nd.loc, mul(x2, cos), mul(x1, sin));
  Value y;
  if (interleaved) {
    // Back to (y1_0, y2_0, y1_1, ...): [..., rd/2, 2] flattened.
    Shape pair = shapeOf(y1);
    pair.push_back(1);
    Value p = concatLast(nd, nd.im.reshape(y1, pair), nd.im.reshape(y2, pair));
    Shape flat = shapeOf(y1);
    flat.back() = rd;
    y = nd.im.reshape(p, flat);
  } else {
    y = concatLast(nd, y1, y2);
  }
  return rd == d ? y : concatLast(nd, y, lastAxisSlice(nd, x, rd, d));
}

/// mlc.rotary's table of shape `shape` ([cb, 1, S, rd] or [cb, S, 1, rd])
/// from a constant cache [cb, S, rd/2] (one angle per pair): the pair's two
/// elements (i and i + rd/2, or 2i and 2i + 1 when interleaved) both take
/// the angle's value; in the sine table the first takes it negated, the sign
/// of its partner's term (y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin).
Value rotaryTable(Node &nd, const Const &cache, const Shape &shape, bool interleaved,
                  bool sine) {
  const int64_t rd = shape.back(), half = rd / 2, rows = cache.numel() / half;
  Const t;
  t.shape = shape;
  t.resize(rows * rd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      double v = cache.at(r * half + i);
      int64_t first = interleaved ? 2 * i : i, second = interleaved ? 2 * i + 1 : i + half;
      t.f[r * rd + first] = sine ? -v : v;
      t.f[r * rd + second] = v;
    }
  return nd.im.materialize(t);
}

/// RotaryEmbedding(X, cos_cache, sin_cache[, position_ids]) {interleaved,
/// num_heads, rotary_embedding_dim}: X [B, H, S, D], or [B, S, H*D] with
/// num_heads; caches [B, S, rd/2] (no position_ids).
llvm::Error rotaryEmbedding(Node &nd) {
  if (auto err = nd.need(3))
    return err;
  if (auto err = nd.floatOperands(3))
    return err;
  if (nd.has(3))
    return nd.error("position_ids is not supported (export without a KV cache: the caches are "
                    "then [batch, sequence, rotary_dim/2])");
  Shape x = nd.shape(0), c = nd.shape(1);
  int64_t heads = nd.intAttr("num_heads", 0);
  if (x.size() == 3 && (heads < 1 || x[2] % heads))
    return nd.error("a rank-3 input " + shapeText(x) +
                    " needs num_heads that divides its hidden size");
  if (x.size() != 3 && x.size() != 4)
    return nd.error("takes X of rank 3 or 4; got " + shapeText(x));
  int64_t d = x.size() == 4 ? x[3] : x[2] / heads;
  int64_t seq = x.size() == 4 ? x[2] : x[1];
  int64_t rd = nd.intAttr("rotary_embedding_dim", 0);
  rd = rd == 0 ? d : rd;
  if (rd < 2 || rd % 2 || rd > d)
    return nd.error("rotary_embedding_dim " + std::to_string(rd) +
                    " must be even and at most the head size " + std::to_string(d));
  // The dynamo exporter writes caches of batch 1 (positions shared by the
  // batch), which broadcast; the schema says [B, S, rd/2] (onnxruntime 1.32
  // refuses batch 1; torch's results are those of the broadcast).
  Shape want = {x[0], seq, rd / 2};
  int64_t cb = c.empty() ? 0 : c[0];
  if (c.size() != 3 || (cb != 1 && cb != x[0]) || c[1] != seq || c[2] != rd / 2 ||
      nd.shape(2) != c)
    return nd.error("cos_cache and sin_cache must be " + shapeText(want) + " (or of batch 1); "
                    "got " + shapeText(c) + " and " + shapeText(nd.shape(2)));
  // Caches against [B, H, S, rd/2] ([B, S, H, rd/2] for rank 3).
  const bool bhsd = x.size() == 4;
  Shape cs = bhsd ? Shape{cb, 1, seq, rd / 2} : Shape{cb, seq, 1, rd / 2};
  bool interleaved = nd.intAttr("interleaved", 0) != 0;
  Value x4 = bhsd ? nd.v(0) : nd.im.reshape(nd.v(0), {x[0], x[1], heads, d});
  Value y;
  if (nd.isConst(1) && nd.isConst(2)) {
    // One mlc.rotary: the first rd features rotate, the others pass through.
    Shape ts = cs;
    ts.back() = rd;
    Value cos = rotaryTable(nd, nd.c(1), ts, interleaved, /*sine=*/false);
    Value sin = rotaryTable(nd, nd.c(2), ts, interleaved, /*sine=*/true);
    y = nd.b.create<RotaryOp>(nd.loc, x4, cos, sin, interleaved, /*transpose=*/false);
  } else {
    Value cos = nd.im.reshape(nd.v(1), cs), sin = nd.im.reshape(nd.v(2), cs);
    y = rotate(nd, x4, cos, sin, rd, interleaved);
  }
  return nd.result(bhsd ? y : nd.im.reshape(y, x));
}

constexpr int kAll = kMaxOpset;

const OpSchema kSchemas[] = {
    {"RotaryEmbedding", 23, kAll, rotaryEmbedding},
};

} // namespace

llvm::ArrayRef<OpSchema> rotaryOpSchemas() { return kSchemas; }

} // namespace mlc::onnximport
