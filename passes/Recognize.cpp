//===- Recognize.cpp - decomposed subgraphs as the graph ops mlc fuses ------===//
//
// An exported model spells LayerNorm, RMSNorm, GELU, rotary embeddings, SwiGLU
// and attention as chains of elementwise ops, reductions and matmuls. Each
// rewrite pattern of mlc-recognize recognizes one spelling (operands of
// commutative ops in either order) and replaces the chain's root by the graph
// op, whose kernels and gradients mlc knows; the chain's other ops die unless
// something else reads them. A pattern creates nothing until its match is
// certain. A chain that differs in any constant or shape is left as it is:
// recognition never changes what the graph computes beyond rounding.
//
// This file holds the pass, the matchers the patterns share, and the
// patterns on linear layers, the next-token loss and slices; the other
// families are in RecognizeNormsActivations.cpp, RecognizeRotary.cpp and
// RecognizeAttention.cpp (RecognizePatterns.h lists them).
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"
#include "passes/RecognizePatterns.h"

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
using namespace mlc::recognize;

//===----------------------------------------------------------------------===//
// Matchers the patterns share (RecognizePatterns.h)
//===----------------------------------------------------------------------===//

namespace mlc {
namespace recognize {

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

bool near(std::optional<double> v, double want, double tol) {
  return v && std::fabs(*v - want) <= tol * std::max(1.0, std::fabs(want));
}

std::optional<std::pair<Value, double>> mulByConstant(Value v) { return withConstant<MulOp>(v); }
std::optional<std::pair<Value, double>> plusConstant(Value v) { return withConstant<AddOp>(v); }

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

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

} // namespace recognize
} // namespace mlc

namespace {

int64_t product(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

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
    populateNormActivationPatterns(blocks);
    populateRotaryPatterns(blocks);
    blocks.add<RecognizeFlattenedLinear, RecognizeTransposedOperand,
               RecognizeShiftedCrossEntropy>(ctx);
    populateAttentionPatterns(attention);
    populateGroupedKVPatterns(grouped);
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
