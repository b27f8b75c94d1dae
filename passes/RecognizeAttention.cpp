//===- RecognizeAttention.cpp - attention, its masks, grouped K/V -----------===//
//
// mlc-recognize's patterns for attention: softmax([softcap](q k^T * scale)
// [+ mask | causal]) [dropout] v as one mlc.attention, a mask it reads
// recognized as causal, windowed or padding, and K/V repeated to the query
// heads read at their own heads (Recognize.cpp has the pass).
//
//===----------------------------------------------------------------------===//

#include "passes/RecognizePatterns.h"

#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlc;
using namespace mlc::recognize;

namespace {

//===----------------------------------------------------------------------===//
// Attention: softmax([softcap](q k^T * scale) [+ mask | causal]) [dropout] v
//===----------------------------------------------------------------------===//

/// True for a boolean constant [1.., S, S] that is lower-triangular (j <= i).
bool isCausalMask(Value v, int64_t s) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !dense.getElementType().isInteger(1))
    return false;
  auto shape = dense.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 1] != s || shape[shape.size() - 2] != s)
    return false;
  for (size_t d = 0; d + 2 < shape.size(); ++d)
    if (shape[d] != 1)
      return false;
  if (dense.isSplat())
    return false;
  int64_t k = 0;
  for (bool bit : dense.getValues<bool>()) {
    int64_t i = k / s, j = k % s;
    if (bit != (j <= i))
      return false;
    ++k;
  }
  return true;
}

/// The sliding window of a constant [..., S, S] whose every [S, S] block is
/// causal: for a boolean, true exactly where key j is seen by query i; for
/// a float (an additive mask), 0 there and at most -1e30 elsewhere (the
/// lowest float or -inf). 0 when query i sees keys 0 .. i (causal), W when
/// it sees exactly i - W + 1 .. i (Mistral's sliding window, W < S);
/// nullopt for anything else.
std::optional<int64_t> causalWindow(Value v, int64_t s) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || dense.isSplat() || s < 2)
    return std::nullopt;
  auto shape = dense.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 1] != s || shape[shape.size() - 2] != s)
    return std::nullopt;
  // Which keys each element shows; any value that is neither kept nor
  // masked is no causal mask.
  SmallVector<bool> seen;
  seen.reserve(dense.getNumElements());
  if (dense.getElementType().isInteger(1)) {
    for (bool bit : dense.getValues<bool>())
      seen.push_back(bit);
  } else if (isa<FloatType>(dense.getElementType())) {
    for (const APFloat &f : dense.getValues<APFloat>()) {
      double x = f.convertToDouble();
      if (x != 0.0 && !(x <= -1e30))
        return std::nullopt;
      seen.push_back(x == 0.0);
    }
  } else {
    return std::nullopt;
  }
  // The last query sees the window's W keys (all S: causal).
  int64_t w = 0;
  for (int64_t j = 0; j < s; ++j)
    w += seen[(s - 1) * s + j];
  if (w < 1)
    return std::nullopt;
  for (size_t k = 0; k < seen.size(); ++k) {
    int64_t i = int64_t(k / s) % s, j = int64_t(k % s);
    if (seen[k] != (j <= i && j > i - w))
      return std::nullopt;
  }
  return w == s ? 0 : w;
}

/// True for a constant whose elements are all true.
bool isAllTrue(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!dense || !dense.getElementType().isInteger(1))
    return false;
  return llvm::all_of(dense.getValues<bool>(), [](bool b) { return b; });
}

/// `select(isnan(p), 0, p)` with isnan as `p != p` (the dynamo exporter's
/// guard after softmax, for rows with every key masked): p. mlc's masks use
/// the lowest float, so its softmax rows are never NaN.
Value throughNaNGuard(Value v) {
  auto sel = v.getDefiningOp<SelectOp>();
  if (!sel)
    return v;
  auto cmp = sel.getCondition().getDefiningOp<CompareOp>();
  Value p = sel.getFalseValue();
  if (!cmp || cmp.getPredicate() != ComparePredicate::ne || cmp.getLhs() != p ||
      cmp.getRhs() != p || !near(splat(sel.getTrueValue()), 0.0) ||
      shapeOf(p) != shapeOf(sel.getResult()))
    return v;
  return p;
}

/// What an additive mask `m` of scores [B, H, S, S] means: causal (and no
/// mask left) when it is a causal constant, or `select(cond, 0, lowest)`
/// with a causal condition; `select(all-true, g, false)` and
/// `select(causal, g, false)` conditions (the dynamo exporter's And of a
/// constant with a padding mask) leave `g` as the mask's condition, so the
/// mask keeps g's smaller shape (no [S, S] mask is built for BERT's
/// padding). `cond` is the condition to build the smaller mask from, or null.
struct MaskParts {
  bool causal = false;
  int64_t window = 0; // with causal: a sliding window (0: none)
  Value cond;        // a key-padding condition, or null
  Value keep;        // the additive mask kept as it is, or null
  Value zero, low;   // the mask's values for kept and masked keys (with cond)
};
MaskParts classifyMask(Value m, int64_t s) {
  MaskParts parts;
  if (auto w = causalWindow(m, s)) {
    parts.causal = true;
    parts.window = *w;
    return parts;
  }
  parts.keep = m;
  auto sel = m.getDefiningOp<SelectOp>();
  auto low = sel ? splat(sel.getFalseValue()) : std::nullopt;
  if (!sel || !near(splat(sel.getTrueValue()), 0.0) || !low || *low > -1e30)
    return parts;
  Value c = sel.getCondition();
  if (auto w = causalWindow(c, s)) {
    parts = MaskParts();
    parts.causal = true;
    parts.window = *w;
    return parts;
  }
  auto inner = c.getDefiningOp<SelectOp>();
  if (auto r = c.getDefiningOp<ReshapeOp>(); r && r.getInput().getDefiningOp<CastOp>()) {
    // A padding condition alone, to be rebuilt as one kernel.
    parts.keep = Value();
    parts.cond = c;
    parts.zero = sel.getTrueValue();
    parts.low = sel.getFalseValue();
    return parts;
  }
  auto f = inner ? inner.getFalseValue().getDefiningOp<ConstantOp>() : ConstantOp();
  auto fd = f ? dyn_cast<DenseElementsAttr>(f.getValue()) : DenseElementsAttr();
  if (!fd || !fd.isSplat() || !fd.getElementType().isInteger(1) || fd.getSplatValue<bool>())
    return parts;
  Value t = inner.getCondition(), g = inner.getTrueValue();
  std::optional<int64_t> window = causalWindow(t, s);
  bool causal = window.has_value();
  if (!causal && !isAllTrue(t))
    return parts;
  if (shapeOf(g).size() != 4)
    return parts;
  parts.keep = Value();
  parts.causal = causal;
  parts.window = window.value_or(0);
  parts.cond = g;
  parts.zero = sel.getTrueValue();
  parts.low = sel.getFalseValue();
  return parts;
}

/// The additive padding mask `select(cond, zero, low)`. A condition that is
/// a reshape of a cast (the dynamo exporter's Cast(attention_mask, bool)
/// gathered to [B, 1, 1, S]) gets the mask built at the cast's shape and
/// reshaped after: the cast and the select are then neighbours, one
/// pointwise kernel.
Value buildPaddingMask(PatternRewriter &rewriter, Location loc, const MaskParts &parts) {
  Value cond = parts.cond;
  auto r = cond.getDefiningOp<ReshapeOp>();
  if (!r || !r.getInput().getDefiningOp<CastOp>())
    return rewriter.create<SelectOp>(loc, cond, parts.zero, parts.low);
  Value flat = rewriter.create<SelectOp>(loc, r.getInput(), parts.zero, parts.low);
  auto shape = cast<RankedTensorType>(cond.getType()).getShape();
  auto el = cast<RankedTensorType>(flat.getType()).getElementType();
  return rewriter.create<ReshapeOp>(loc, RankedTensorType::get(shape, el), flat);
}

/// K from `kT` = K^T over its last two dims: a transpose [0, 1, 3, 2], or
/// the dynamo exporter's reshape([B*H, S, D]) -> transpose [0, 2, 1] ->
/// reshape([B, H, D, S]); null otherwise.
Value untransposedKey(Value kT) {
  if (auto t = kT.getDefiningOp<TransposeOp>())
    if (t.getPermutation() == ArrayRef<int64_t>{0, 1, 3, 2})
      return t.getInput();
  auto outer = kT.getDefiningOp<ReshapeOp>();
  auto t = outer ? outer.getInput().getDefiningOp<TransposeOp>() : TransposeOp();
  auto inner = t ? t.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inner || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1})
    return Value();
  Value k = inner.getInput();
  auto ks = shapeOf(k), ts = shapeOf(kT);
  if (ks.size() != 4 || ts.size() != 4 || ts[0] != ks[0] || ts[1] != ks[1] || ts[2] != ks[3] ||
      ts[3] != ks[2] || shapeOf(inner.getResult()) != ArrayRef<int64_t>{ks[0] * ks[1], ks[2], ks[3]})
    return Value();
  return k;
}

/// `c * tanh(x / c)` (or `tanh(x * (1/c)) * c`), the attention-logit
/// soft-capping of Gemma 2 as exporters write it: x and c (c > 0). The two
/// constants must agree, or the chain is something else.
std::optional<std::pair<Value, double>> softcapped(Value v) {
  auto outer = mulByConstant(v);
  if (!outer || !(outer->second > 0) || !std::isfinite(outer->second))
    return std::nullopt;
  auto t = outer->first.getDefiningOp<TanhOp>();
  auto in = t ? scaled(t.getInput()) : std::nullopt;
  if (!in || !near(in->second * outer->second, 1.0, 1e-6))
    return std::nullopt;
  return std::make_pair(in->first, outer->second);
}

struct RecognizeAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp root, PatternRewriter &rewriter) const override {
    if (root.getTransposeLhs() || root.getTransposeRhs() || rankOf(root.getResult()) != 4)
      return failure();
    Value probs = throughNaNGuard(root.getLhs()), v = root.getRhs();
    double dropout = 0;
    int64_t seed = 0;
    if (auto d = probs.getDefiningOp<DropoutOp>()) {
      dropout = d.getRatio().convertToDouble();
      seed = d.getSeed();
      probs = throughNaNGuard(d.getInput());
    }
    auto softmax = probs.getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getAxis() != 3)
      return failure();
    Value scores = softmax.getInput();
    bool causal = false;
    Value mask;
    MaskParts parts;
    if (auto sel = scores.getDefiningOp<SelectOp>()) {
      auto low = splat(sel.getFalseValue());
      if (!low || *low > -1e30)
        return failure();
      causal = true;
      scores = sel.getTrueValue();
      if (!isCausalMask(sel.getCondition(), shapeOf(scores).back()) ||
          shapeOf(scores)[2] != shapeOf(scores)[3])
        return failure();
    } else if (auto add = scores.getDefiningOp<AddOp>()) {
      // The additive mask is the operand that is not a product of q and k.
      for (auto [s, m] : {std::pair(add.getLhs(), add.getRhs()),
                          std::pair(add.getRhs(), add.getLhs())}) {
        Value inner = s;
        if (auto c = softcapped(inner))
          inner = c->first;
        if (auto sc = scaled(inner))
          inner = sc->first;
        if (inner.getDefiningOp<MatmulOp>()) {
          scores = s;
          mask = m;
          break;
        }
      }
      if (!mask || shapeOf(mask).size() != 4)
        return failure();
      parts = classifyMask(mask, shapeOf(scores).back());
      causal = parts.causal;
      mask = parts.keep;
      if (causal && shapeOf(scores)[2] != shapeOf(scores)[3])
        return failure();
    }
    // Soft-capping, c * tanh(s / c) of the scaled scores before the mask.
    FloatAttr softcapAttr;
    if (auto c = softcapped(scores)) {
      softcapAttr = rewriter.getF64FloatAttr(c->second);
      scores = c->first;
    }
    double scale = 1.0;
    if (auto sc = scaled(scores)) {
      scale = sc->second;
      scores = sc->first;
    }
    if (!(scale > 0) || !std::isfinite(scale))
      return failure();
    if (mask && cast<RankedTensorType>(mask.getType()).getElementType() !=
                    cast<RankedTensorType>(scores.getType()).getElementType())
      return failure();
    auto qk = scores.getDefiningOp<MatmulOp>();
    if (!qk || qk.getTransposeLhs() || rankOf(qk.getResult()) != 4)
      return failure();
    Value q = qk.getLhs(), kT = qk.getRhs();
    // The scale applied to q and to k^T separately (sqrt of it on each).
    for (Value *operand : {&q, &kT})
      if (auto sc = scaled(*operand); sc && shapeOf(sc->first) == shapeOf(*operand)) {
        *operand = sc->first;
        scale *= sc->second;
      }
    if (!(scale > 0) || !std::isfinite(scale))
      return failure();
    auto qs = shapeOf(q);
    if (qs.size() != 4 || shapeOf(v).size() != 4 || shapeOf(kT).size() != 4)
      return failure();
    // Every operand is a full [B, H, S, D] tensor (no broadcast batch dims),
    // except that K and V may both have one head that the products
    // broadcast to every query head (multi-query attention as Falcon's
    // export writes it): grouped-query attention with one kv head.
    auto rs = shapeOf(root.getResult()), vs = shapeOf(v);
    if (vs[0] != qs[0] || (vs[1] != qs[1] && vs[1] != 1) || rs[0] != qs[0] || rs[1] != qs[1])
      return failure();
    // K as [B, H, Sk, D]: kT read transposed, or transposed by an op made
    // only once the match is certain.
    SmallVector<int64_t> ks(shapeOf(kT));
    if (!qk.getTransposeRhs())
      std::swap(ks[2], ks[3]);
    if (ks[0] != qs[0] || ks[1] != vs[1] || ks[3] != qs[3] || ks[2] != vs[2])
      return failure();
    for (Value m : {mask, parts.cond}) {
      if (!m)
        continue;
      // The mask must broadcast to the scores [B, H, Sq, Sk].
      auto ms = shapeOf(m);
      auto ss = shapeOf(scores);
      for (int d = 0; d < 4; ++d)
        if (ms[d] != 1 && ms[d] != ss[d])
          return failure();
    }
    Value k = kT;
    if (!qk.getTransposeRhs()) {
      k = untransposedKey(kT);
      if (!k)
        k = rewriter.create<TransposeOp>(root.getLoc(), kT,
                                         rewriter.getDenseI64ArrayAttr({0, 1, 3, 2}));
    }
    if (parts.cond) // the padding mask at its own shape: 0 where a key is kept
      mask = buildPaddingMask(rewriter, root.getLoc(), parts);
    FloatAttr scaleAttr;
    if (!near(scale, 1.0 / std::sqrt(double(qs[3])), 1e-6))
      scaleAttr = rewriter.getF64FloatAttr(scale);
    rewriter.replaceOpWithNewOp<AttentionOp>(
        root, q, k, v, mask, /*cu_seqlens=*/Value(), causal ? rewriter.getUnitAttr() : UnitAttr(),
        scaleAttr, rewriter.getF64FloatAttr(dropout), rewriter.getI64IntegerAttr(seed),
        softcapAttr,
        parts.window ? rewriter.getI64IntegerAttr(parts.window) : IntegerAttr());
    return success();
  }
};

/// mlc.attention with a mask built by the exporter (opset 23's Attention
/// imports its boolean mask as select(mask, 0, lowest)): a causal constant
/// becomes the causal flag, a causal or all-true And with a padding
/// condition keeps only the padding mask at the condition's shape.
struct RecognizeAttentionMask : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    Value mask = op.getMask();
    if (!mask || op.getCuSeqlens())
      return failure();
    auto qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
    if (qs[2] != ks[2])
      return failure();
    MaskParts parts = classifyMask(mask, ks[2]);
    if (parts.keep == mask)
      return failure();
    Value newMask = parts.keep;
    if (parts.cond)
      newMask = buildPaddingMask(rewriter, op.getLoc(), parts);
    bool causal = op.getCausal() || parts.causal;
    // A window met twice (the op's and the mask's) is the narrower.
    int64_t window = op.getWindow().value_or(0);
    if (parts.window && (!window || parts.window < window))
      window = parts.window;
    rewriter.replaceOpWithNewOp<AttentionOp>(
        op, op.getQuery(), op.getKey(), op.getValue(), newMask, /*cu_seqlens=*/Value(),
        causal ? rewriter.getUnitAttr() : UnitAttr(), op.getScaleAttr(), op.getDropoutAttr(),
        op.getSeedAttr(), op.getSoftcapAttr(),
        window ? rewriter.getI64IntegerAttr(window) : IntegerAttr());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Grouped-query K/V: the kv heads read without their repeat
//===----------------------------------------------------------------------===//

/// The exporters' repeat_kv: kv [B, Hkv, S, D] -> reshape [B, Hkv, 1, S, D]
/// -> broadcast [B, Hkv, n, S, D] -> reshape [B, Hkv * n, S, D]: kv, when
/// the expansion has no other reader.
Value unexpandedHeads(Value v, int64_t &groups) {
  auto merge = v.getDefiningOp<ReshapeOp>();
  auto bc = merge && merge->hasOneUse() ? merge.getInput().getDefiningOp<BroadcastOp>()
                                        : BroadcastOp();
  auto split = bc && bc->hasOneUse() ? bc.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!split || !split->hasOneUse())
    return Value();
  Value kv = split.getInput();
  ArrayRef<int64_t> k = shapeOf(kv), e = shapeOf(bc.getResult()), out = shapeOf(v);
  if (k.size() != 4 || out.size() != 4 || e.size() != 5 ||
      shapeOf(split.getResult()) != ArrayRef<int64_t>{k[0], k[1], 1, k[2], k[3]} ||
      e != ArrayRef<int64_t>{k[0], k[1], e[2], k[2], k[3]} ||
      out != ArrayRef<int64_t>{k[0], k[1] * e[2], k[2], k[3]})
    return Value();
  groups = e[2];
  return kv;
}

/// Grouped-query attention over K/V repeated to the query heads: the
/// attention reads the kv heads themselves (query head h reads kv head
/// h / n), so the repeated K/V are neither written nor read, and their
/// gradients are summed over the group inside the attention's backward.
struct RecognizeGroupedKV : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rewriter) const override {
    if (op.getCuSeqlens() || op.getKey() == op.getValue())
      return failure();
    int64_t kg = 0, vg = 0;
    Value k = unexpandedHeads(op.getKey(), kg), v = unexpandedHeads(op.getValue(), vg);
    if (!k || !v || kg != vg || kg < 2)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.getKeyMutable().assign(k);
      op.getValueMutable().assign(v);
    });
    return success();
  }
};

} // namespace

void mlc::recognize::populateAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<RecognizeAttention, RecognizeAttentionMask>(patterns.getContext());
}

void mlc::recognize::populateGroupedKVPatterns(RewritePatternSet &patterns) {
  patterns.add<RecognizeGroupedKV>(patterns.getContext());
}
