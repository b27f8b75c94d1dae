//===- ShardDropout.cpp - one process's dropout masks on split values -----===//
//
// See ShardDropout.h. A dropout of block r of N along dim A draws, for its
// local element i, the number one process draws at the whole tensor's
// index of that element, (i / S * N + r) * S + i % S with S the product of
// the block's dims from A on (mlc.dropout keeps S; attention keeps A, the
// lowering knowing its probabilities' sizes).
//
//===----------------------------------------------------------------------===//

#include "passes/ShardDropout.h"
#include "passes/VocabParallel.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace mlc {

Value tpRankArgument(func::FuncOp fn) {
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "mlc.scalars");
        name && name.getValue() == kTpRankScalars)
      return fn.getArgument(i);
  Builder b(fn.getContext());
  unsigned at = fn.getNumArguments();
  fn.insertArgument(at, RankedTensorType::get({1}, b.getF64Type()),
                    b.getDictionaryAttr(b.getNamedAttr("mlc.scalars",
                                                       b.getStringAttr(kTpRankScalars))),
                    fn.getLoc());
  return fn.getArgument(at);
}

LogicalResult markDropoutBlock(DropoutOp dropout, Value rank, int64_t blocks, int64_t axis) {
  if (dropout.getRank())
    return dropout.emitOpError("mlc-shard-tensor-parallel: this dropout is already a block of "
                               "a larger tensor");
  auto shape = cast<RankedTensorType>(dropout.getInput().getType()).getShape();
  int64_t span = 1;
  for (int64_t d : shape.drop_front(axis)) {
    if (ShapedType::isDynamic(d))
      return dropout.emitOpError("mlc-shard-tensor-parallel: a dropout of a value split along "
                                 "dim ")
             << axis << " needs static dims from it on to draw one process's mask";
    span *= d;
  }
  Builder b(dropout.getContext());
  dropout.getRankMutable().assign(rank);
  dropout.setBlocksAttr(b.getI64IntegerAttr(blocks));
  dropout.setSpanAttr(b.getI64IntegerAttr(span));
  return success();
}

LogicalResult shardDropouts(func::FuncOp fn, const llvm::DenseMap<Value, int64_t> &axis,
                            int64_t size) {
  SmallVector<DropoutOp> dropouts;
  SmallVector<AttentionOp> attentions;
  fn.walk([&](Operation *op) {
    if (auto d = dyn_cast<DropoutOp>(op); d && axis.count(d.getInput()))
      dropouts.push_back(d);
    else if (auto a = dyn_cast<AttentionOp>(op);
             a && !a.getDropout().isZero() && axis.count(a.getResult()))
      attentions.push_back(a);
  });
  if (dropouts.empty() && attentions.empty())
    return success();
  Value rank = tpRankArgument(fn);
  for (DropoutOp d : dropouts)
    if (failed(markDropoutBlock(d, rank, size, axis.lookup(d.getInput()))))
      return failure();
  Builder b(fn.getContext());
  for (AttentionOp a : attentions) {
    // The probabilities' counter space is [B, H, Sq, Sk] (varlen: [H, C,
    // C]); the heads are split.
    a.getRankMutable().assign(rank);
    a.setBlocksAttr(b.getI64IntegerAttr(size));
    a.setAxisAttr(b.getI64IntegerAttr(a.getCuSeqlens() ? 0 : 1));
  }
  return success();
}

} // namespace mlc
