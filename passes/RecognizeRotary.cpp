//===- RecognizeRotary.cpp - rotary embeddings ------------------------------===//
//
// mlc-recognize's patterns for rotary position embeddings: HF's rotate-half
// form with constant tables, an imported mlc.rotary of a head split, and
// partial rotary, each as mlc.rotary over the projection's rows where the
// tables allow (Recognize.cpp has the pass).
//
//===----------------------------------------------------------------------===//

#include "passes/RecognizePatterns.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlc;
using namespace mlc::recognize;

namespace {

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

} // namespace

void mlc::recognize::populateRotaryPatterns(RewritePatternSet &patterns) {
  patterns.add<RecognizeRotary, RecognizeRotaryRows, RecognizePartialRotary>(
      patterns.getContext());
}
