//===- LowerCollectives.cpp - the tensor-parallel collectives' steps ------===//
//
// FunctionLowering::lowerTpCollective: mlc.tp_reduce becomes a
// plan.tp_all_reduce over its partial sums (in place where nothing else reads
// them), mlc.tp_all_gather and mlc.tp_reduce_scatter (sequence parallelism)
// a plan.tp_all_gather / plan.tp_reduce_scatter from a contiguous buffer
// into one of their own. None of them is a kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"

namespace mlc {
namespace lowering {

llvm::Error FunctionLowering::lowerTpCollective(Operation *op) {
  if (auto r = dyn_cast<TpReduceOp>(op)) {
    // In place where mlc-assign-buffers put it over its partial sums (free
    // after this reduce), else into a copy of them.
    Type el = typeOf(r.getResult()).getElementType();
    Value in = r.getInput(), out = r.getResult();
    Value buf;
    if (assignedBuffer(out) == buffers::input) {
      if (!overwritable(in, {op}))
        return failure(op, "assigned its partial sums' buffer (mlc.buffers 'input'), but they "
                           "are read by more than it, or are not a fresh arena slice");
      buf = bufferOf(in);
    } else {
      buf = arenaFor(out);
      emitCopies(buf, el, numel(out), false, {in}, {0}, rowMajorStrides(shapeOf(out)));
    }
    valueBuffers[out] = buf;
    addPlanStep<plan::TpAllReduceOp>(buf, r.getKind() == TpReduceKind::max
                                              ? UnitAttr::get(context())
                                              : UnitAttr());
    return llvm::Error::success();
  }
  // Sequence parallelism: the ranks' contiguous blocks of rows, from (and
  // into) buffers of their own.
  Value out = op->getResult(0);
  Value in = bufferOf(op->getOperand(0));
  Value buf = arenaFor(out);
  valueBuffers[out] = buf;
  if (isa<TpAllGatherOp>(op))
    addPlanStep<plan::TpAllGatherOp>(buf, in);
  else
    addPlanStep<plan::TpReduceScatterOp>(buf, in);
  return llvm::Error::success();
}

} // namespace lowering
} // namespace mlc
