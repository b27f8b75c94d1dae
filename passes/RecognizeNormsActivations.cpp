//===- RecognizeNormsActivations.cpp - norms and the MLP's activations -----===//
//
// mlc-recognize's patterns for LayerNorm, RMSNorm (with transformers' f32
// casts), GELU (erf and tanh forms) and SwiGLU, as the exporters write them
// out in elementwise ops and reductions (Recognize.cpp has the pass).
//
//===----------------------------------------------------------------------===//

#include "passes/RecognizePatterns.h"

#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlc;
using namespace mlc::recognize;

namespace {

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
// SwiGLU: silu(gate) * up
//===----------------------------------------------------------------------===//

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

} // namespace

void mlc::recognize::populateNormActivationPatterns(RewritePatternSet &patterns) {
  patterns.add<RecognizeLayerNorm, RecognizeRmsNorm, RecognizeGelu, RecognizeSwiglu>(
      patterns.getContext());
}
