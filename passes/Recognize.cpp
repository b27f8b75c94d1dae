//===- Recognize.cpp - decomposed subgraphs as the graph ops mlc fuses ------===//
//
// An exported model spells LayerNorm, RMSNorm, GELU, rotary embeddings, SwiGLU
// and attention as chains of elementwise ops, reductions and matmuls. Each rewrite pattern below
// recognizes one spelling (operands of commutative ops in either order) and
// replaces the chain's root by the graph op, whose kernels and gradients mlc
// knows; the chain's other ops die unless something else reads them. A
// pattern creates nothing until its match is certain. A chain that
// differs in any constant or shape is left as it is: recognition never
// changes what the graph computes beyond rounding.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Rewrite/PatternApplicator.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace mlc {
#define GEN_PASS_DEF_MLCRECOGNIZE
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

/// The value of a constant whose elements are all equal.
/// f32 constants come back as the shortest decimal that rounds to them
/// (1e-5f as 1e-5), so recognized attributes read as the model wrote them.
std::optional<double> splat(Value v) {
  if (!v)
    return std::nullopt;
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !isa<FloatType>(dense.getElementType()) ||
      !(dense.isSplat() || dense.getNumElements() == 1))
    return std::nullopt;
  double x = (*dense.getValues<APFloat>().begin()).convertToDouble();
  if (dense.getElementType().isF32()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", x);
    x = std::strtod(buf, nullptr);
  }
  return x;
}

bool near(std::optional<double> v, double want, double tol = 1e-6) {
  return v && std::fabs(*v - want) <= tol * std::max(1.0, std::fabs(want));
}

/// For a commutative binary op: the operand that is not `a` (or null).
template <typename Op>
Value other(Op op, Value a) {
  if (op.getLhs() == a)
    return op.getRhs();
  if (op.getRhs() == a)
    return op.getLhs();
  return Value();
}

/// `v = op(x, c)` or `op(c, x)` for a commutative op and a splat constant c:
/// x and c.
template <typename Op>
std::optional<std::pair<Value, double>> withConstant(Value v) {
  if (!v)
    return std::nullopt;
  auto op = v.getDefiningOp<Op>();
  if (!op)
    return std::nullopt;
  if (auto c = splat(op.getRhs()))
    return std::make_pair(op.getLhs(), *c);
  if (auto c = splat(op.getLhs()))
    return std::make_pair(op.getRhs(), *c);
  return std::nullopt;
}
std::optional<std::pair<Value, double>> mulByConstant(Value v) { return withConstant<MulOp>(v); }
std::optional<std::pair<Value, double>> plusConstant(Value v) { return withConstant<AddOp>(v); }

/// `v = x * c` or `x / (1/c)`: x and c.
std::optional<std::pair<Value, double>> scaled(Value v) {
  if (!v)
    return std::nullopt;
  if (auto r = mulByConstant(v))
    return r;
  if (auto d = v.getDefiningOp<DivOp>())
    if (auto c = splat(d.getRhs()); c && *c != 0)
      return std::make_pair(d.getLhs(), 1.0 / *c);
  return std::nullopt;
}

int64_t product(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// `reduce_mean(x)` over the last axis with keepdims: x.
Value meanOverLastAxis(Value v) {
  if (!v)
    return Value();
  auto r = v.getDefiningOp<ReduceMeanOp>();
  if (!r || !r.getKeepdims() || r.getAxes().size() != 1 ||
      (r.getAxes()[0] != rankOf(r.getInput()) - 1 && r.getAxes()[0] != -1))
    return Value();
  return r.getInput();
}

/// `x^2` as pow(x, 2) or mul(x, x).
Value square(Value v) {
  if (!v)
    return Value();
  if (auto p = v.getDefiningOp<PowOp>(); p && near(splat(p.getRhs()), 2.0))
    return p.getLhs();
  if (auto m = v.getDefiningOp<MulOp>(); m && m.getLhs() == m.getRhs())
    return m.getLhs();
  return Value();
}
/// `x^3` as pow(x, 3) or x·x·x.
Value cube(Value v) {
  if (!v)
    return Value();
  if (auto p = v.getDefiningOp<PowOp>(); p && near(splat(p.getRhs()), 3.0))
    return p.getLhs();
  if (auto m = v.getDefiningOp<MulOp>()) {
    for (auto [a, b] : {std::pair(m.getLhs(), m.getRhs()), std::pair(m.getRhs(), m.getLhs())})
      if (Value x = square(a); x && x == b)
        return x;
  }
  return Value();
}

/// A vector of the hidden size (LayerNorm's weight and bias).
bool isRowVector(Value v, int64_t hidden) {
  auto s = shapeOf(v);
  return s.size() == 1 && s[0] == hidden;
}

//===----------------------------------------------------------------------===//
// LayerNorm: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * w + b
//===----------------------------------------------------------------------===//

struct RecognizeLayerNorm : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root, PatternRewriter &rewriter) const override {
    for (auto [mulV, bias] : {std::pair(root.getLhs(), root.getRhs()),
                              std::pair(root.getRhs(), root.getLhs())}) {
      auto mul = mulV.getDefiningOp<MulOp>();
      if (!mul)
        continue;
      for (auto [divV, weight] : {std::pair(mul.getLhs(), mul.getRhs()),
                                  std::pair(mul.getRhs(), mul.getLhs())}) {
        auto div = divV.getDefiningOp<DivOp>();
        if (!div)
          continue;
        auto centered = div.getLhs().getDefiningOp<SubOp>();
        auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
        if (!centered || !sqrt)
          continue;
        Value x = centered.getLhs();
        if (meanOverLastAxis(centered.getRhs()) != x)
          continue;
        auto varPlusEps = plusConstant(sqrt.getInput());
        if (!varPlusEps || !(varPlusEps->second > 0))
          continue;
        if (square(meanOverLastAxis(varPlusEps->first)) != centered.getResult())
          continue;
        int64_t hidden = shapeOf(x).back();
        if (shapeOf(root.getResult()) != shapeOf(x) || !isRowVector(weight, hidden) ||
            !isRowVector(bias, hidden))
          continue;
        rewriter.replaceOpWithNewOp<LayerNormOp>(root, x, weight, bias,
                                                 rewriter.getF64FloatAttr(varPlusEps->second));
        return success();
      }
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// RMSNorm: w * (x * rsqrt(mean(x^2) + eps)), or with 1 / sqrt, x / sqrt, and
// with transformers' f32 casts: w * cast(cast(x, f32) * rstd, type(w))
//===----------------------------------------------------------------------===//

/// `x * rsqrt(mean(x^2) + eps)` in the forms exporters write (rsqrt; 1 /
/// sqrt, ONNX's Reciprocal; x / sqrt): x and eps.
std::optional<std::pair<Value, double>> rmsNormalized(Value v) {
  if (!v)
    return std::nullopt;
  // mean(x^2) + eps under the square root: x and eps.
  auto meanSquare = [](Value s) -> std::optional<std::pair<Value, double>> {
    auto plus = plusConstant(s);
    if (!plus || !(plus->second > 0))
      return std::nullopt;
    Value x = square(meanOverLastAxis(plus->first));
    if (!x)
      return std::nullopt;
    return std::make_pair(x, plus->second);
  };
  // rsqrt(s) or 1 / sqrt(s): s.
  auto inverseRoot = [](Value r) -> Value {
    if (!r)
      return Value();
    if (auto rs = r.getDefiningOp<RsqrtOp>())
      return rs.getInput();
    if (auto d = r.getDefiningOp<DivOp>(); d && near(splat(d.getLhs()), 1.0))
      if (auto sq = d.getRhs().getDefiningOp<SqrtOp>())
        return sq.getInput();
    return Value();
  };
  if (auto d = v.getDefiningOp<DivOp>()) {
    if (auto sq = d.getRhs().getDefiningOp<SqrtOp>())
      if (auto m = meanSquare(sq.getInput()); m && m->first == d.getLhs())
        return m;
    return std::nullopt;
  }
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return std::nullopt;
  for (auto [x, inv] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())})
    if (auto m = meanSquare(inverseRoot(inv)); m && m->first == x)
      return m;
  return std::nullopt;
}

struct RecognizeRmsNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    for (auto [normV, weight] : {std::pair(root.getLhs(), root.getRhs()),
                                 std::pair(root.getRhs(), root.getLhs())}) {
      // transformers computes in f32 and casts back before the weight: the
      // norm's input is then the value cast to f32, in the weight's type.
      auto back = normV.getDefiningOp<CastOp>();
      auto found = rmsNormalized(back ? back.getInput() : normV);
      if (!found)
        continue;
      Value x = found->first;
      if (back) {
        auto up = x.getDefiningOp<CastOp>();
        if (!up || up.getInput().getType() != root.getType())
          continue;
        x = up.getInput();
      }
      int64_t hidden = shapeOf(x).back();
      if (x.getType() != root.getType() || !isRowVector(weight, hidden))
        continue;
      // A LayerNorm's centered input over its deviation, times the weight,
      // is an RMSNorm of it: the bias add after it makes it the LayerNorm
      // its pattern recognizes there.
      if (auto centered = x.getDefiningOp<SubOp>();
          centered && meanOverLastAxis(centered.getRhs()) == centered.getLhs() &&
          llvm::any_of(root->getUsers(), [](Operation *u) { return isa<AddOp>(u); }))
        continue;
      rewriter.replaceOpWithNewOp<RmsNormOp>(root, x, weight,
                                             rewriter.getF64FloatAttr(found->second));
      return success();
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// GELU: x * 0.5 * (1 + erf(x / sqrt(2)))  and
//       x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
//===----------------------------------------------------------------------===//

/// Leaves of a product tree of up to three factors.
void factors(Value v, SmallVectorImpl<Value> &out, int depth = 0) {
  auto m = v.getDefiningOp<MulOp>();
  if (m && depth < 2 && out.size() < 3) {
    factors(m.getLhs(), out, depth + 1);
    factors(m.getRhs(), out, depth + 1);
    return;
  }
  out.push_back(v);
}

/// The x of `1 + erf(x / sqrt 2)` or `1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))`.
std::optional<std::pair<Value, GeluApproximation>> geluGate(Value v) {
  auto onePlus = plusConstant(v);
  if (!onePlus || !near(onePlus->second, 1.0))
    return std::nullopt;
  Value inner = onePlus->first;
  if (auto erf = inner.getDefiningOp<ErfOp>()) {
    auto s = scaled(erf.getInput());
    if (s && near(s->second, 1.0 / std::sqrt(2.0), 1e-5))
      return std::make_pair(s->first, GeluApproximation::none);
  }
  if (auto tanh = inner.getDefiningOp<TanhOp>()) {
    auto s = scaled(tanh.getInput());
    if (!s || !near(s->second, std::sqrt(2.0 / 3.14159265358979323846), 1e-5))
      return std::nullopt;
    auto sum = s->first.getDefiningOp<AddOp>();
    if (!sum)
      return std::nullopt;
    for (auto [x, term] : {std::pair(sum.getLhs(), sum.getRhs()),
                           std::pair(sum.getRhs(), sum.getLhs())}) {
      auto c = mulByConstant(term);
      if (c && near(c->second, 0.044715, 1e-5) && cube(c->first) == x)
        return std::make_pair(x, GeluApproximation::tanh);
    }
  }
  return std::nullopt;
}

struct RecognizeGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    SmallVector<Value> f;
    factors(root.getResult(), f);
    if (f.size() != 3)
      return failure();
    for (int gate = 0; gate < 3; ++gate) {
      auto g = geluGate(f[gate]);
      if (!g)
        continue;
      Value x = g->first;
      // The other two factors are x and 0.5, in either order.
      Value a = f[(gate + 1) % 3], c = f[(gate + 2) % 3];
      if (!((a == x && near(splat(c), 0.5)) || (c == x && near(splat(a), 0.5))))
        continue;
      if (shapeOf(x) != shapeOf(root.getResult()))
        continue;
      rewriter.replaceOpWithNewOp<GeluOp>(root, x, g->second);
      return success();
    }
    return failure();
  }
};

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
// The Llama family: rotate-half RoPE, SwiGLU, grouped-query K/V
//===----------------------------------------------------------------------===//

/// The elements of a constant (null for anything else).
DenseElementsAttr constantOf(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  return c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
}

/// `x[..., lo:hi]` (unit steps, every other axis whole): x.
Value lastAxisSliceOf(Value v, int64_t lo, int64_t hi) {
  auto s = v ? v.getDefiningOp<SliceOp>() : SliceOp();
  if (!s)
    return Value();
  ArrayRef<int64_t> in = shapeOf(s.getInput());
  auto starts = s.getStarts(), ends = s.getEnds(), steps = s.getSteps();
  const size_t last = in.size() - 1;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t wantLo = i == last ? lo : 0, wantHi = i == last ? hi : in[i];
    if (steps[i] != 1 || starts[i] != wantLo || ends[i] != wantHi)
      return Value();
  }
  return s.getInput();
}

/// A float constant whose shape broadcasts to `shape` (rank at most its,
/// each dim 1 or equal) and whose last dim is `shape`'s.
DenseElementsAttr rotaryTable(Value v, ArrayRef<int64_t> shape) {
  DenseElementsAttr dense = constantOf(v);
  if (!dense || !isa<FloatType>(dense.getElementType()))
    return {};
  ArrayRef<int64_t> t = dense.getType().getShape();
  if (t.empty() || t.size() > shape.size() || t.back() != shape.back())
    return {};
  for (size_t i = 1; i <= t.size(); ++i)
    if (t[t.size() - i] != 1 && t[t.size() - i] != shape[shape.size() - i])
      return {};
  return dense;
}

/// p of the head split transpose(p, [0, 2, 1, 3]) (null for anything else).
Value headSplitRows(Value x) {
  // A chain of transposes counts as the one they compose to (Falcon's K and
  // V: a slice of the heads moved first, indexed, and moved back).
  // The nearest value the chain's composition makes a head split of.
  const int64_t headSplit[] = {0, 2, 1, 3};
  SmallVector<int64_t> perm;
  Value v = x;
  for (int depth = 0; depth < 4; ++depth) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return Value();
    if (perm.empty()) {
      perm.assign(t.getPermutation().begin(), t.getPermutation().end());
    } else { // transpose(transpose(y, inner), perm) = transpose(y, inner[perm[i]])
      for (int64_t &p : perm)
        p = t.getPermutation()[p];
    }
    v = t.getInput();
    if (perm == ArrayRef<int64_t>(headSplit))
      return v;
  }
  return Value();
}

/// The tables [..., S, R] of a rotation of [B, H, S, D] as [S, 1, R], the
/// tables of the same rotation of [B, S, H, D] (null unless the tables are
/// the same for every batch and head).
DenseElementsAttr rowLayoutTable(DenseElementsAttr t) {
  ArrayRef<int64_t> s = t.getType().getShape();
  for (size_t i = 0; i + 2 < s.size(); ++i)
    if (s[i] != 1)
      return {};
  int64_t seq = s.size() >= 2 ? s[s.size() - 2] : 1;
  return t.reshape(RankedTensorType::get({seq, 1, s.back()}, t.getElementType()));
}

/// mlc.rotary x, cos, sin. When x is the head split transpose(p, [0, 2, 1, 3])
/// of a projection's rows p [B, S, H, D], the rotation is done on p (tables
/// [S, 1, R]) and then transposed, as frontend/Llama.cpp builds it: it reads
/// the GEMM's rows and writes them contiguous, and in the backward the
/// attention's gradient is read through the transpose and the rows the
/// weight-gradient GEMM reads are written directly, so the split costs no
/// copy in either direction.
Value buildRotary(PatternRewriter &rewriter, Location loc, Value x, DenseElementsAttr cos,
                  DenseElementsAttr sin, bool interleaved) {
  Value rows = headSplitRows(x);
  DenseElementsAttr rowCos = rowLayoutTable(cos), rowSin = rowLayoutTable(sin);
  auto rotary = [&](Value in, DenseElementsAttr c, DenseElementsAttr s) -> Value {
    return rewriter.create<RotaryOp>(loc, in, rewriter.create<ConstantOp>(loc, c),
                                     rewriter.create<ConstantOp>(loc, s), interleaved,
                                     /*transpose=*/false);
  };
  if (!rows || !rowCos || !rowSin)
    return rotary(x, cos, sin);
  return rewriter.create<TransposeOp>(loc, rotary(rows, rowCos, rowSin),
                                      rewriter.getDenseI64ArrayAttr({0, 2, 1, 3}));
}

/// HF's apply_rotary_pos_emb as the exporters write it out:
///   x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin
/// with constant [..., D] tables, as mlc.rotary x, cos, sin' where sin'
/// carries rotate_half's sign (-sin on the first half, +sin on the second).
/// One pointwise op instead of two slices, a neg, a concat, two products and
/// a sum; its gradient is the transposed rotation, no concat's split.
struct RecognizeRotary : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root, PatternRewriter &rewriter) const override {
    for (auto [direct, rotated] : {std::pair(root.getLhs(), root.getRhs()),
                                   std::pair(root.getRhs(), root.getLhs())}) {
      auto dm = direct.getDefiningOp<MulOp>(), rm = rotated.getDefiningOp<MulOp>();
      if (!dm || !rm)
        continue;
      for (auto [x, cos] :
           {std::pair(dm.getLhs(), dm.getRhs()), std::pair(dm.getRhs(), dm.getLhs())})
        for (auto [half, sin] :
             {std::pair(rm.getLhs(), rm.getRhs()), std::pair(rm.getRhs(), rm.getLhs())})
          if (succeeded(rewrite(root, x, cos, half, sin, rewriter)))
            return success();
    }
    return failure();
  }

private:
  /// `half` = concat(-x[..., D/2:], x[..., :D/2]); cos and sin tables of x.
  static LogicalResult rewrite(AddOp root, Value x, Value cos, Value half, Value sin,
                               PatternRewriter &rewriter) {
    auto cat = half.getDefiningOp<ConcatOp>();
    if (!cat || cat.getInputs().size() != 2 || shapeOf(x) != shapeOf(root.getResult()))
      return failure();
    ArrayRef<int64_t> s = shapeOf(x);
    const int64_t d = s.back();
    if (d == ShapedType::kDynamic || d % 2 || cat.getAxis() != int64_t(s.size()) - 1)
      return failure();
    auto neg = cat.getInputs()[0].getDefiningOp<NegOp>();
    if (!neg || lastAxisSliceOf(neg.getInput(), d / 2, d) != x ||
        lastAxisSliceOf(cat.getInputs()[1], 0, d / 2) != x)
      return failure();
    DenseElementsAttr c = rotaryTable(cos, s), t = rotaryTable(sin, s);
    if (!c || !t || c.getType() != t.getType())
      return failure();
    SmallVector<APFloat> signedSin(t.getValues<APFloat>());
    for (size_t i = 0; i < signedSin.size(); ++i)
      if (int64_t(i % d) < d / 2)
        signedSin[i].changeSign();
    auto sinAttr = DenseElementsAttr::get(t.getType(), ArrayRef<APFloat>(signedSin));
    rewriter.replaceOp(root, buildRotary(rewriter, root.getLoc(), x, c, sinAttr, false));
    return success();
  }
};

/// An imported mlc.rotary of a head split (ONNX RotaryEmbedding) with
/// constant tables rotates the projection's rows instead (buildRotary).
struct RecognizeRotaryRows : OpRewritePattern<RotaryOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RotaryOp op, PatternRewriter &rewriter) const override {
    DenseElementsAttr cos = constantOf(op.getCos()), sin = constantOf(op.getSin());
    if (op.getTranspose() || !headSplitRows(op.getInput()) || !cos || !sin ||
        !rowLayoutTable(cos) || !rowLayoutTable(sin))
      return failure();
    rewriter.replaceOp(op, buildRotary(rewriter, op.getLoc(), op.getInput(), cos, sin,
                                       op.getInterleaved()));
    return success();
  }
};

/// Partial rotary (partial_rotary_factor < 1): concat(rotary(x[..., :R]),
/// x[..., R:]) is mlc.rotary of x with its R-wide tables, whose other D - R
/// features pass through.
struct RecognizePartialRotary : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp root, PatternRewriter &rewriter) const override {
    if (root.getInputs().size() != 2)
      return failure();
    auto rot = root.getInputs()[0].getDefiningOp<RotaryOp>();
    if (!rot || rot.getTranspose() || !rot->hasOneUse())
      return failure();
    ArrayRef<int64_t> out = shapeOf(root.getResult());
    const int64_t d = out.back(), r = shapeOf(rot.getResult()).back();
    if (root.getAxis() != int64_t(out.size()) - 1 || d == ShapedType::kDynamic)
      return failure();
    Value x = lastAxisSliceOf(rot.getInput(), 0, r);
    if (!x || lastAxisSliceOf(root.getInputs()[1], r, d) != x)
      return failure();
    DenseElementsAttr cos = constantOf(rot.getCos()), sin = constantOf(rot.getSin());
    if (cos && sin)
      rewriter.replaceOp(root,
                         buildRotary(rewriter, root.getLoc(), x, cos, sin, rot.getInterleaved()));
    else
      rewriter.replaceOpWithNewOp<RotaryOp>(root, x, rot.getCos(), rot.getSin(),
                                            rot.getInterleaved(), /*transpose=*/false);
    return success();
  }
};

/// x of `silu(x)`: mlc.silu x, or x * (1 + tanh(x / 2)) / 2 (the ONNX
/// import's x * Sigmoid(x)), factors in any order.
Value siluInput(Value v) {
  if (auto s = v.getDefiningOp<SiluOp>())
    return s.getInput();
  SmallVector<Value> f;
  factors(v, f);
  if (f.size() != 3)
    return Value();
  for (int g = 0; g < 3; ++g) {
    auto onePlus = plusConstant(f[g]);
    auto tanh = onePlus && near(onePlus->second, 1.0) ? onePlus->first.getDefiningOp<TanhOp>()
                                                      : TanhOp();
    auto half = tanh ? scaled(tanh.getInput()) : std::nullopt;
    if (!half || !near(half->second, 0.5))
      continue;
    Value x = half->first, a = f[(g + 1) % 3], c = f[(g + 2) % 3];
    if ((a == x && near(splat(c), 0.5)) || (c == x && near(splat(a), 0.5)))
      return x;
  }
  return Value();
}

/// silu(gate) * up as mlc.swiglu gate, up: one forward kernel that stores
/// only the product, and one backward kernel for both gradients. Only when
/// the SiLU has no other reader (otherwise it would be computed twice).
struct RecognizeSwiglu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    for (auto [act, up] : {std::pair(root.getLhs(), root.getRhs()),
                           std::pair(root.getRhs(), root.getLhs())}) {
      Value gate = act.hasOneUse() ? siluInput(act) : Value();
      if (!gate || gate.getType() != root.getType() || up.getType() != root.getType())
        continue;
      rewriter.replaceOpWithNewOp<SwigluOp>(root, gate, up);
      return success();
    }
    return failure();
  }
};

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

//===----------------------------------------------------------------------===//
// Linear layers on flattened rows: reshape(matmul(reshape(x, [N, K]), w) [+ b],
// [d..., M]) is matmul(x, w) [+ b] on x's own shape [d..., K] (the GEMM is the
// same; the bias and its gradient then fuse with their neighbours).
//===----------------------------------------------------------------------===//

struct RecognizeFlattenedLinear : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp root, PatternRewriter &rewriter) const override {
    Value inner = root.getInput();
    auto add = inner.getDefiningOp<AddOp>();
    Value bias;
    MatmulOp mm;
    if (add) {
      for (auto [m, c] : {std::pair(add.getLhs(), add.getRhs()),
                          std::pair(add.getRhs(), add.getLhs())})
        if (auto op = m.getDefiningOp<MatmulOp>(); op && rankOf(c) == 1) {
          mm = op;
          bias = c;
          break;
        }
    } else {
      mm = inner.getDefiningOp<MatmulOp>();
    }
    if (!mm || mm.getTransposeLhs() || mm.getAcc() || rankOf(mm.getResult()) != 2 ||
        rankOf(mm.getRhs()) != 2)
      return failure();
    auto flat = mm.getLhs().getDefiningOp<ReshapeOp>();
    if (!flat)
      return failure();
    Value x = flat.getInput();
    auto xs = shapeOf(x), out = shapeOf(root.getResult());
    auto rows = shapeOf(flat.getResult());
    // x of shape [d..., a, b] with K = a * b (the dynamo exporter flattens
    // attention's [B, S, H, D] straight to [B * S, H * D]) is read as
    // [d..., K]: only its trailing dims merge, so the rows stay x's own.
    bool sameRows = xs.size() == out.size() && xs.size() >= 2 &&
                    std::equal(xs.begin(), xs.end() - 1, out.begin());
    if (!sameRows && (out.size() < 2 || xs.size() <= out.size() ||
                      ShapedType::isDynamicShape(rows) ||
                      !std::equal(out.begin(), out.end() - 1, xs.begin()) ||
                      product(xs.drop_front(out.size() - 1)) != rows[1]))
      return failure();
    if (out.back() != shapeOf(mm.getResult()).back() || ShapedType::isDynamicShape(xs))
      return failure();
    // A bias the matmul carries itself (canonicalization folds the add in)
    // stays with it.
    Value ownBias = mm.getBias();
    if (ownBias && bias)
      return failure();
    if (bias && shapeOf(bias)[0] != out.back())
      return failure();
    Location loc = root.getLoc();
    if (!sameRows) {
      SmallVector<int64_t> shape(out.drop_back());
      shape.push_back(rows[1]);
      x = rewriter.create<ReshapeOp>(
          loc, RankedTensorType::get(shape, cast<RankedTensorType>(x.getType()).getElementType()),
          x);
    }
    Value y = rewriter.create<MatmulOp>(loc, x, mm.getRhs(), false, mm.getTransposeRhs());
    if (ownBias)
      y = rewriter.create<AddOp>(loc, y, ownBias);
    if (bias)
      y = add.getLhs() == bias ? rewriter.create<AddOp>(loc, bias, y).getResult()
                               : rewriter.create<AddOp>(loc, y, bias).getResult();
    rewriter.replaceOp(root, y);
    return success();
  }
};

/// matmul(x, transpose(w)) with the transpose swapping the last two dims is
/// matmul(x, w, transpose_rhs) (BERT's and GPT-2's `x @ W.T` as exported):
/// the GEMM reads w transposed instead of a copy, forward and backward.
struct RecognizeTransposedOperand : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp mm, PatternRewriter &rewriter) const override {
    auto swapsLastTwo = [](Value v) -> Value {
      auto t = v.getDefiningOp<TransposeOp>();
      if (!t)
        return Value();
      ArrayRef<int64_t> p = t.getPermutation();
      int64_t n = p.size();
      for (int64_t i = 0; i + 2 < n; ++i)
        if (p[i] != i)
          return Value();
      return n >= 2 && p[n - 2] == n - 1 && p[n - 1] == n - 2 ? t.getInput() : Value();
    };
    Value lhs = swapsLastTwo(mm.getLhs()), rhs = swapsLastTwo(mm.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(mm, lhs ? lhs : mm.getLhs(), rhs ? rhs : mm.getRhs(),
                                          mm.getTransposeLhs() != bool(lhs),
                                          mm.getTransposeRhs() != bool(rhs), mm.getF32Result(),
                                          mm.getBias(), mm.getAcc());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The next-token loss without copies of the logits: cross_entropy(logits[:,
// :-1] as rows, labels[:, 1:]) is cross_entropy(logits as rows, labels[:, 1:]
// followed by one ignored label per sequence). The same terms, mean and
// gradient (ignored rows get a zero gradient), but the largest tensor of the
// step is read in place instead of copied out (forward) and padded back
// (backward).
//===----------------------------------------------------------------------===//

struct RecognizeShiftedCrossEntropy : OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CrossEntropyOp ce, PatternRewriter &b) const override {
    auto logitsRows = ce.getLogits().getDefiningOp<ReshapeOp>();
    auto labelRows = ce.getLabels().getDefiningOp<ReshapeOp>();
    if (!logitsRows || !labelRows)
      return failure();
    auto logitsSlice = logitsRows.getInput().getDefiningOp<SliceOp>();
    auto labelSlice = labelRows.getInput().getDefiningOp<SliceOp>();
    if (!logitsSlice || !labelSlice)
      return failure();
    Value logits = logitsSlice.getInput(), labels = labelSlice.getInput();
    auto ls = shapeOf(logits), ys = shapeOf(labels);
    if (ls.size() != 3 || ys.size() != 2 || ls[0] != ys[0] || ls[1] != ys[1] || ls[1] < 2 ||
        ShapedType::isDynamicShape(ls) || ShapedType::isDynamicShape(ys))
      return failure();
    const int64_t B = ls[0], S = ls[1], V = ls[2];
    auto is = [](ArrayRef<int64_t> got, std::initializer_list<int64_t> want) {
      return got.size() == want.size() && std::equal(got.begin(), got.end(), want.begin());
    };
    if (!is(logitsSlice.getStarts(), {0, 0, 0}) || !is(logitsSlice.getEnds(), {B, S - 1, V}) ||
        !is(logitsSlice.getSteps(), {1, 1, 1}) || !is(labelSlice.getStarts(), {0, 1}) ||
        !is(labelSlice.getEnds(), {B, S}) || !is(labelSlice.getSteps(), {1, 1}))
      return failure();
    Location loc = ce.getLoc();
    auto labelType = cast<RankedTensorType>(labels.getType());
    auto fillType = RankedTensorType::get({B, 1}, labelType.getElementType());
    Value ignored = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(fillType, b.getIntegerAttr(labelType.getElementType(),
                                                               ce.getIgnoreIndex())));
    Value shifted = b.create<ConcatOp>(loc, ValueRange{labelSlice.getResult(), ignored},
                                       b.getI64IntegerAttr(1));
    auto rows = [&](Value v, ArrayRef<int64_t> shape) {
      auto t = cast<RankedTensorType>(v.getType());
      return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, t.getElementType()), v);
    };
    b.replaceOpWithNewOp<CrossEntropyOp>(ce, rows(logits, {B * S, V}), rows(shifted, {B * S}),
                                        ce.getIgnoreIndexAttr());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Slices that tile a dim: one split
//===----------------------------------------------------------------------===//

/// Of a unit-step slice whose every dim but one is whole: that dim and the
/// range [lo, hi) it keeps (Python's bounds normalized).
struct Cut {
  int64_t axis, lo, hi;
};
std::optional<Cut> cutOf(SliceOp s) {
  auto shape = shapeOf(s.getInput());
  std::optional<Cut> cut;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t n = shape[d];
    if (s.getSteps()[d] != 1 || ShapedType::isDynamic(n))
      return std::nullopt;
    auto norm = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
    const int64_t lo = norm(s.getStarts()[d]), hi = norm(s.getEnds()[d]);
    if (lo == 0 && hi == n)
      continue;
    if (cut || lo >= hi)
      return std::nullopt;
    cut = Cut{int64_t(d), lo, hi};
  }
  return cut;
}

/// Slices of one value that tile one of its dims as one mlc.split. Falcon's
/// fused QKV projection is cut into its Q, K and V heads by three slices,
/// Phi3's into its Q, K and V columns; as a split, the gradient is one
/// concat that the attention's backward writes in place, where the slices'
/// gradients were three zero-padded copies and their sum. The last dim is
/// cut so only where it is a product's columns (a fused projection's): a
/// head's last dim is rotate-half's and partial rotary's to slice, which
/// their own patterns read.
struct RecognizeSlicesAsSplit : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp root, PatternRewriter &rewriter) const override {
    std::optional<Cut> mine = cutOf(root);
    Value x = root.getInput();
    if (!mine || root->use_empty() ||
        (mine->axis + 1 == rankOf(x) && !x.getDefiningOp<MatmulOp>()))
      return failure();
    SmallVector<std::pair<Cut, SliceOp>> pieces;
    for (Operation *user : x.getUsers()) {
      auto s = dyn_cast<SliceOp>(user);
      std::optional<Cut> c = s ? cutOf(s) : std::nullopt;
      if (!c || c->axis != mine->axis || s->use_empty())
        continue;
      // The split goes where the first slice is: every slice after it.
      if (s->getBlock() != root->getBlock() || s->isBeforeInBlock(root))
        return failure();
      pieces.push_back({*c, s});
    }
    llvm::sort(pieces, [](auto &a, auto &b) {
      return std::tie(a.first.lo, a.first.hi) < std::tie(b.first.lo, b.first.hi);
    });
    // Consecutive ranges from 0 to the end (a range sliced twice is one piece).
    SmallVector<int64_t> sizes;
    int64_t end = 0;
    for (auto &[c, s] : pieces) {
      if (!sizes.empty() && c.lo == end - sizes.back() && c.hi == end)
        continue; // the previous range again
      if (c.lo != end)
        return failure();
      sizes.push_back(c.hi - c.lo);
      end = c.hi;
    }
    if (sizes.size() < 2 || end != shapeOf(x)[mine->axis])
      return failure();
    auto split = rewriter.create<SplitOp>(root.getLoc(), x, rewriter.getI64IntegerAttr(mine->axis),
                                          rewriter.getDenseI64ArrayAttr(sizes));
    for (auto &[c, s] : pieces) {
      int64_t k = 0;
      for (int64_t at = 0; at != c.lo; at += sizes[k++])
        ;
      if (s == root)
        rewriter.replaceOp(root, split.getResult(k));
      else // left dead: erased with the other replaced chains
        rewriter.replaceAllUsesWith(s.getResult(), split.getResult(k));
    }
    return success();
  }
};

/// Offers every op of `fn` that exists now, in order, to `patterns` once
/// (no folding, no revisiting: ops a rewrite makes are not matched again);
/// returns how many rewrites applied.
int64_t applyOnce(func::FuncOp fn, const FrozenRewritePatternSet &patterns) {
  PatternApplicator applicator(patterns);
  applicator.applyDefaultCostModel();
  PatternRewriter rewriter(fn.getContext());
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) { ops.push_back(op); });
  int64_t applied = 0;
  for (Operation *op : ops) {
    rewriter.setInsertionPoint(op);
    applied += succeeded(applicator.matchAndRewrite(op, rewriter));
  }
  return applied;
}

class RecognizePass : public mlc::impl::MlcRecognizeBase<RecognizePass> {
public:
  LogicalResult initialize(MLIRContext *ctx) final {
    RewritePatternSet blocks(ctx), attention(ctx), grouped(ctx), splits(ctx);
    blocks.add<RecognizeLayerNorm, RecognizeRmsNorm, RecognizeGelu, RecognizeRotary,
               RecognizeRotaryRows, RecognizePartialRotary, RecognizeSwiglu,
               RecognizeFlattenedLinear, RecognizeTransposedOperand,
               RecognizeShiftedCrossEntropy>(ctx);
    attention.add<RecognizeAttention, RecognizeAttentionMask>(ctx);
    grouped.add<RecognizeGroupedKV>(ctx);
    splits.add<RecognizeSlicesAsSplit>(ctx);
    blockPatterns = std::move(blocks);
    splitPatterns = std::move(splits);
    attentionPatterns = std::move(attention);
    groupedPatterns = std::move(grouped);
    return success();
  }

  void runOnOperation() final {
    func::FuncOp fn = getOperation();
    // LayerNorm and GELU first: attention's operands may be built from them.
    int64_t found = applyOnce(fn, blockPatterns);
    found += applyOnce(fn, attentionPatterns);
    // Then the attention ops (imported or just recognized) read grouped K/V.
    found += applyOnce(fn, groupedPatterns);
    // Last, slices that tile a dim (after the rotaries read theirs).
    found += applyOnce(fn, splitPatterns);
    // The replaced chains are dead now (users come after their operands).
    for (Block &block : fn.getBody())
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
        if (isOpTriviallyDead(&op))
          op.erase();
    recognized += found;
  }

private:
  FrozenRewritePatternSet blockPatterns, attentionPatterns, groupedPatterns, splitPatterns;
};

} // namespace
