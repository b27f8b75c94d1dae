//===- VocabParallel.cpp - vocabulary-parallel lookup and loss ------------===//
//
// The lookup and the loss of a vocabulary split over a tensor-parallel group,
// written with existing mlc ops (see VocabParallel.h). Each is the math of
// Megatron-LM's VocabParallelEmbedding / vocab_parallel_cross_entropy:
//
//   lookup  local = ids - offset; own = 0 <= local < V/T
//           y = tp_reduce sum(select(own, W_r[own ? local : 0], 0))
//   loss    m = detach(tp_reduce max(max_j z_j))           (the shift)
//           s = tp_reduce sum(sum_j exp(z_j - m))
//           t = tp_reduce sum(sum_j (j == y - offset) ? z_j - m : 0)
//           loss = sum over counted rows of (log s - t) / count
//
// Only the rank that holds a label's column adds its logit to t; the others
// add exact zeros, so the sums equal one process's. The shift m only keeps
// exp from overflowing: log s - t = log sum_j exp(z_j) - z_y for any m, so
// its gradient is zero in exact arithmetic and it is not differentiated
// (the max's all-reduce is marked mlc.stop_gradient, as Megatron computes
// the max under no_grad). Backward then has no all-reduce for the shift and
// keeps neither the logits (the max's rule would read them) nor anything of
// the max: it reads the exponentials (exp's rule) and the target mask (the
// select's). The gradients of the logits come out as one process's:
// softmax(z) - onehot(y), times the row's weight; without the detach they
// differ from it by the shift's rounding (a partial sum over the group that
// is zero only in exact arithmetic).
//
//===----------------------------------------------------------------------===//

#include "passes/VocabParallel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <limits>

using namespace mlir;

namespace mlc {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A 0-d float constant of element type `el`.
Value splat(OpBuilder &b, Location loc, Type el, double value) {
  auto t = RankedTensorType::get({}, el);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getFloatAttr(el, value)));
}

/// A 0-d integer constant of element type `el`.
Value splat(OpBuilder &b, Location loc, Type el, int64_t value) {
  auto t = RankedTensorType::get({}, el);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getIntegerAttr(el, value)));
}

Value compare(OpBuilder &b, Location loc, ComparePredicate p, Value lhs, Value rhs) {
  return b.create<CompareOp>(loc, p, lhs, rhs);
}

/// lo <= x < hi for an integer tensor x and 0-d integer bounds (x's type).
Value inRange(OpBuilder &b, Location loc, Value x, Value lo, Value hi) {
  Value ge = compare(b, loc, ComparePredicate::ge, x, lo);
  Value lt = compare(b, loc, ComparePredicate::lt, x, hi);
  return b.create<SelectOp>(loc, ge, lt, ge); // ge && lt
}

/// `v` with a trailing dim of 1, so it broadcasts over a row.
Value column(OpBuilder &b, Location loc, Value v) {
  SmallVector<int64_t> shape(typeOf(v).getShape());
  shape.push_back(1);
  return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, typeOf(v).getElementType()), v);
}

} // namespace

Value vocabOffset(OpBuilder &b, Location loc, Value rank, int64_t rowsPerRank, Type el) {
  Value r = b.create<ReshapeOp>(loc, RankedTensorType::get({}, typeOf(rank).getElementType()),
                                rank);
  Value ri = b.create<CastOp>(loc, RankedTensorType::get({}, el), r);
  return b.create<MulOp>(loc, ri, splat(b, loc, el, rowsPerRank));
}

void buildVocabParallelEmbedding(OpBuilder &b, EmbeddingOp lookup, Value offset, int64_t vocab) {
  Location loc = lookup.getLoc();
  b.setInsertionPoint(lookup);
  Value ids = lookup.getIndices(), table = lookup.getWeight();
  Type idEl = typeOf(ids).getElementType();
  const int64_t rows = typeOf(table).getDimSize(0);
  Value zero = splat(b, loc, idEl, int64_t(0)), rowsV = splat(b, loc, idEl, rows);
  if (typeOf(offset).getElementType() != idEl)
    offset = b.create<CastOp>(loc, RankedTensorType::get({}, idEl), offset);

  // The local row of each id; ids this rank does not hold read row 0 (and
  // are zeroed below), ids outside the vocabulary stay as they are, so the
  // lookup's own range check reports them.
  Value local = b.create<SubOp>(loc, ids, offset);
  Value own = inRange(b, loc, local, zero, rowsV);
  Value valid = inRange(b, loc, ids, zero, splat(b, loc, idEl, vocab));
  Value other = b.create<SelectOp>(loc, valid, zero, ids);
  Value index = b.create<SelectOp>(loc, own, local, other);
  Value rowsOut = b.create<EmbeddingOp>(loc, table, index);
  Type el = typeOf(rowsOut).getElementType();
  Value fzero = splat(b, loc, el, 0.0);
  Value own1 = inRange(b, loc, column(b, loc, local), zero, rowsV);
  Value mine = b.create<SelectOp>(loc, own1, rowsOut, fzero);

  if (std::optional<int64_t> pad = lookup.getPaddingIdx()) {
    // torch's padding_idx: that row is looked up, but the lookups give it no
    // gradient. Its local index differs between ranks, so the ordinary
    // lookup above carries no padding_idx; the padding ids read their row
    // from a lookup of that one row marked padding_idx (no gradient ever),
    // on the rank that holds it, and zeros elsewhere. The ordinary lookup's
    // adjoint at the padding ids is zero (the select takes the other side).
    int64_t p = *pad, slot = p % rows;
    auto oneId = RankedTensorType::get({1}, idEl);
    Value slotIdx = b.create<ConstantOp>(loc, DenseElementsAttr::get(oneId, b.getIntegerAttr(idEl, slot)));
    Value padRow = b.create<EmbeddingOp>(loc, table, slotIdx, b.getI64IntegerAttr(slot));
    Value holds = compare(b, loc, ComparePredicate::eq, offset, splat(b, loc, idEl, p - slot));
    Value padValue = b.create<SelectOp>(loc, holds, padRow, fzero);
    Value isPad = compare(b, loc, ComparePredicate::eq, column(b, loc, ids), splat(b, loc, idEl, p));
    mine = b.create<SelectOp>(loc, isPad, padValue, mine);
  }
  Value joined = b.create<TpReduceOp>(loc, typeOf(mine), TpReduceKind::sum, mine);
  lookup.getResult().replaceAllUsesWith(joined);
  lookup.erase();
}

void buildVocabParallelCrossEntropy(OpBuilder &b, CrossEntropyOp loss, Value offset, int64_t vocab) {
  Location loc = loss.getLoc();
  b.setInsertionPoint(loss);
  Value z = loss.getLogits(), labels = loss.getLabels();
  Type el = typeOf(z).getElementType(), idEl = typeOf(labels).getElementType();
  const int64_t cols = typeOf(z).getDimSize(1);
  if (typeOf(offset).getElementType() != idEl)
    offset = b.create<CastOp>(loc, RankedTensorType::get({}, idEl), offset);

  // The shift: the row maxima over the group, detached (see the file
  // comment): no backward all-reduce, and the logits are not kept for it.
  Value localMax = b.create<ReduceMaxOp>(loc, z, ArrayRef<int64_t>{1}, /*keepdims=*/true);
  auto joinedMax = b.create<TpReduceOp>(loc, typeOf(localMax), TpReduceKind::max, localMax);
  joinedMax->setAttr(kStopGradientAttr, b.getUnitAttr());
  Value m = joinedMax;
  Value shifted = b.create<SubOp>(loc, z, m);
  Value localSum = b.create<ReduceSumOp>(loc, b.create<ExpOp>(loc, shifted).getResult(),
                                         ArrayRef<int64_t>{1}, /*keepdims=*/true);
  Value s = b.create<TpReduceOp>(loc, typeOf(localSum), TpReduceKind::sum, localSum);

  // The target's shifted logit: a label's local column matches one column
  // of one rank; elsewhere it matches none (local < 0 or >= cols).
  Value local = column(b, loc, b.create<SubOp>(loc, labels, offset));
  Value colIds = b.create<IotaOp>(loc, RankedTensorType::get({cols}, idEl), uint64_t(0));
  Value hit = compare(b, loc, ComparePredicate::eq, local, colIds);
  Value fzero = splat(b, loc, el, 0.0);
  Value localTarget = b.create<ReduceSumOp>(loc, b.create<SelectOp>(loc, hit, shifted, fzero).getResult(),
                                            ArrayRef<int64_t>{1}, /*keepdims=*/true);
  Value t = b.create<TpReduceOp>(loc, typeOf(localTarget), TpReduceKind::sum, localTarget);
  Value row = b.create<SubOp>(loc, b.create<LogOp>(loc, s).getResult(), t);

  // The rows counted: labels that are not the ignore index. One that is
  // outside the vocabulary makes the loss +inf instead of a silent miss.
  Value labels1 = column(b, loc, labels);
  Value counted = compare(b, loc, ComparePredicate::ne, labels1,
                          splat(b, loc, idEl, int64_t(loss.getIgnoreIndex())));
  Value valid = inRange(b, loc, labels1, splat(b, loc, idEl, int64_t(0)), splat(b, loc, idEl, vocab));
  Value inf = splat(b, loc, el, std::numeric_limits<double>::infinity());
  Value rowLoss = b.create<SelectOp>(loc, counted, b.create<SelectOp>(loc, valid, row, inf).getResult(),
                                     fzero);
  Value countedF =
      b.create<CastOp>(loc, RankedTensorType::get(typeOf(counted).getShape(), el), counted);
  Value total, count;
  if (typeOf(rowLoss).isDynamicDim(0)) {
    // Unpadded tokens (a dynamic row count): the sums over the rows are
    // taken into kept columns, [rows, 2] of (loss, counted) -> [2], a
    // column sum over the dynamic rows (a full one has no kernel).
    Value pairIds = b.create<IotaOp>(loc, RankedTensorType::get({2}, idEl), uint64_t(0));
    Value first = compare(b, loc, ComparePredicate::eq, pairIds, splat(b, loc, idEl, int64_t(0)));
    Value pairs = b.create<SelectOp>(loc, first, rowLoss, countedF);
    Value sums = b.create<ReduceSumOp>(loc, pairs, ArrayRef<int64_t>{0});
    total = b.create<ReduceSumOp>(loc, b.create<SelectOp>(loc, first, sums, fzero).getResult(),
                                  ArrayRef<int64_t>{0});
    count = b.create<ReduceSumOp>(loc, b.create<SelectOp>(loc, first, fzero, sums).getResult(),
                                  ArrayRef<int64_t>{0});
  } else {
    total = b.create<ReduceSumOp>(loc, rowLoss, ArrayRef<int64_t>{0, 1});
    count = b.create<ReduceSumOp>(loc, countedF, ArrayRef<int64_t>{0, 1});
  }
  // Every label ignored: 0, as mlc.cross_entropy defines it.
  Value one = splat(b, loc, el, 1.0);
  Value any = compare(b, loc, ComparePredicate::gt, count, fzero);
  Value denom = b.create<SelectOp>(loc, any, count, one);
  Value result = b.create<DivOp>(loc, total, denom);
  if (result.getType() != loss.getType())
    result = b.create<CastOp>(loc, loss.getType(), result);
  loss.getResult().replaceAllUsesWith(result);
  loss.erase();
}

} // namespace mlc
