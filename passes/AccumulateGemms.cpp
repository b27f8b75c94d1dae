//===- AccumulateGemms.cpp - sums of products accumulate in the GEMM -------===//
//
// add(matmul_a, matmul_b) -> matmul_b acc(matmul_a): the second product is
// added to the first by its own GEMM (the BLAS call's beta = 1) instead of
// by a pointwise kernel that reads both and writes the sum. The input
// gradient of projections that share one input (Q, K and V; gate and up)
// is such a sum, as is the gradient of a weight or input read by several
// products. A three-way sum chains: add(add(a, b), c) -> c acc(b acc(a)).
// A tied LM head's weight gradient (a product) plus the embedding's (a
// scatter) is add(matmul, embedding_grad) -> embedding_grad acc(matmul): the
// scatter adds its rows into the product's buffer instead of into zeros.
// A product added to an RMSNorm gradient's dx or to another product's sum that
// others read too (OLMo2's residual stream gradient, its post-norms'
// branches summed with the input gradients of the next projections:
// add(dx, p) -> p acc(dx)) accumulates onto that value, which the GEMM
// then overwrites in place where nothing reads it after the sum.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlc {
#define GEN_PASS_DEF_MLCACCUMULATEGEMMS
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

/// An operand of the sum that a GEMM can produce in the sum's type: a
/// product read by the add alone, or (autocast) a bf16 product widened to
/// f32 for the add alone, which becomes an f32_result product.
struct Term {
  MatmulOp product;
  CastOp widen; // null when the product already has the sum's type
};

std::optional<Term> termOf(Value v, Type sumType) {
  Term t;
  t.product = v.getDefiningOp<MatmulOp>();
  if (!t.product && (t.widen = v.getDefiningOp<CastOp>())) {
    t.product = t.widen.getInput().getDefiningOp<MatmulOp>();
    // Widening stores the f32 sums unrounded: a bias or accumulator of the
    // bf16 product would have the wrong type.
    if (!t.product || !t.widen->hasOneUse() || t.product.getF32Result() ||
        t.product.getBias() || t.product.getAcc() ||
        !cast<RankedTensorType>(t.product.getType()).getElementType().isBF16() ||
        !cast<RankedTensorType>(sumType).getElementType().isF32())
      return std::nullopt;
  }
  if (!t.product || !t.product->hasOneUse() || v.getType() != sumType)
    return std::nullopt;
  return t;
}

/// The term in the sum's type: its product, or the widened product
/// replaced by an f32_result one (at the cast).
Value inSumType(PatternRewriter &rewriter, const Term &t) {
  MatmulOp p = t.product;
  if (!t.widen)
    return p.getResult();
  rewriter.setInsertionPoint(t.widen);
  Value wide = rewriter.create<MatmulOp>(p.getLoc(), p.getLhs(), p.getRhs(), p.getTransposeLhs(),
                                         p.getTransposeRhs(), /*f32_result=*/true,
                                         /*bias=*/Value(), /*acc=*/Value());
  rewriter.replaceOp(t.widen, wide);
  rewriter.eraseOp(p);
  return wide;
}

struct SumOfProducts : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    Type sumType = add.getType();
    std::optional<Term> x = termOf(add.getLhs(), sumType), y = termOf(add.getRhs(), sumType);
    if (!x || !y || x->product == y->product || x->product->getBlock() != add->getBlock() ||
        y->product->getBlock() != add->getBlock())
      return failure();
    // x accumulates into y: x has no accumulator of its own and, when
    // neither has, is the later product, so a chain grows at its end.
    if (x->product.getAcc() || (!y->product.getAcc() && x->product->isBeforeInBlock(y->product)))
      std::swap(x, y);
    if (x->product.getAcc())
      return failure();
    Value acc = inSumType(rewriter, *y);
    // At the add, where x's operands and the accumulator are all defined.
    MatmulOp p = x->product;
    rewriter.setInsertionPoint(add);
    Value sum = rewriter.create<MatmulOp>(p.getLoc(), p.getLhs(), p.getRhs(), p.getTransposeLhs(),
                                          p.getTransposeRhs(),
                                          p.getF32Result() || bool(x->widen), p.getBias(), acc);
    rewriter.replaceOp(add, sum);
    if (x->widen)
      rewriter.eraseOp(x->widen);
    rewriter.eraseOp(p);
    return success();
  }
};

struct ScatterIntoProduct : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    Type sumType = add.getType();
    for (auto [a, b] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
      auto scatter = a.getDefiningOp<EmbeddingGradOp>();
      std::optional<Term> product = termOf(b, sumType);
      if (!scatter || scatter.getAcc() || !scatter->hasOneUse() || a.getType() != sumType ||
          !product || scatter->getBlock() != add->getBlock() ||
          product->product->getBlock() != add->getBlock())
        continue;
      Value acc = inSumType(rewriter, *product);
      rewriter.setInsertionPoint(add);
      Value sum = rewriter.create<EmbeddingGradOp>(scatter.getLoc(), sumType, scatter.getGrad(),
                                                   scatter.getIndices(),
                                                   scatter.getPaddingIdxAttr(), acc);
      rewriter.replaceOp(add, sum);
      rewriter.eraseOp(scatter);
      return success();
    }
    return failure();
  }
};

/// Whether `x` is `v` or may be a view of it: reached from x through ops of
/// one operand (transposes, reshapes, slices; conservatively any such op).
static bool reads(Value x, Value v) {
  for (int depth = 0; x && depth < 16; ++depth) {
    if (x == v)
      return true;
    Operation *def = x.getDefiningOp();
    if (!def || def->getNumOperands() != 1)
      return false;
    x = def->getOperand(0);
  }
  return true;
}

/// add(v, p) -> p acc(v), v an RMSNorm gradient's dx or a product (or sum of
/// products) read elsewhere too, that nothing reads after the add: the
/// product's GEMM adds itself onto v (in v's buffer where v's other readers
/// all come first: mlc-assign-buffers' `accumulator`).
struct ProductOntoValue : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    Type sumType = add.getType();
    for (auto [v, q] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
      std::optional<Term> product = termOf(q, sumType);
      Operation *def = v.getDefiningOp();
      if (!product || product->product.getAcc() || v == q || v.getType() != sumType || !def ||
          def->getBlock() != add->getBlock() || product->product->getBlock() != add->getBlock() ||
          termOf(v, sumType) || v.hasOneUse())
        continue;
      // (A LayerNorm's dx, BERT's post-LN stream plus the Q/K/V input
      // gradients, would take its products alike; left to its pointwise sum
      // for now, so that the builtin models' plans stay as they are.)
      const bool dx = isa<RmsNormGradOp>(def) && v == def->getResult(0);
      if (!dx && !isa<MatmulOp>(def))
        continue;
      if (llvm::any_of(v.getUsers(), [&](Operation *u) {
            return u != add && (u->getBlock() != add->getBlock() || add->isBeforeInBlock(u));
          }))
        continue;
      // The GEMM writes v's buffer: it must not read v, itself or through a
      // view (a residual linear, v + Linear(v), before a post-norm).
      MatmulOp m = product->product;
      if (llvm::any_of(ValueRange{m.getLhs(), m.getRhs()}, [&](Value x) { return reads(x, v); }) ||
          (m.getBias() && reads(m.getBias(), v)))
        continue;
      Value wide = inSumType(rewriter, *product);
      auto p = wide.getDefiningOp<MatmulOp>();
      rewriter.setInsertionPoint(add);
      Value sum = rewriter.create<MatmulOp>(p.getLoc(), p.getLhs(), p.getRhs(),
                                            p.getTransposeLhs(), p.getTransposeRhs(),
                                            p.getF32Result(), p.getBias(), v);
      rewriter.replaceOp(add, sum);
      rewriter.eraseOp(p);
      return success();
    }
    return failure();
  }
};

class AccumulateGemmsPass : public mlc::impl::MlcAccumulateGemmsBase<AccumulateGemmsPass> {
public:
  void runOnOperation() final {
    RewritePatternSet patterns(&getContext());
    patterns.add<SumOfProducts, ScatterIntoProduct, ProductOntoValue>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError("mlc-accumulate-gemms: the rewrites did not converge");
      signalPassFailure();
    }
  }
};

} // namespace
