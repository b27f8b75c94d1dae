//===- OverlapTpCollectives.cpp - the mlc-overlap-tp-collectives pass -----===//
//
// Tensor parallelism's backward sums the column-parallel layers' input
// gradients over the group (the duals of mlc.tp_copy): dX = dY W_shard^T is
// a partial sum on each rank. The weight gradient dW = X^T dY, computed
// next to it, does not need that sum, so the all-reduce can run while it is
// computed (Megatron's async input-gradient all-reduce). On the plan:
//
//   plan.gemm %dx, %dy, %w transpose_rhs ...     plan.gemm %dx, %dy, %w ...
//   plan.gemm %dw, %x, %dy transpose_lhs ...  => plan.tp_all_reduce %dx tag 0
//   plan.tp_all_reduce %dx                       plan.gemm %dw, %x, %dy ...
//   plan.launch @k(%out, %dx, ...)               plan.tp_wait %dx tag 0
//                                                plan.launch @k(%out, %dx, ...)
//
// A step touches the buffer when one of its operands is (a view of) the
// same arena slice, or, once slices are placed, shares bytes with it. The
// start is moved up across launches and GEMMs that do not touch it; the
// wait goes before the first step after it that touches it or is anything
// but a launch, a GEMM or a data-parallel start or wait (another
// tensor-parallel collective in particular: one tensor-parallel collective
// is in flight at a time, in the same order on every rank). Only where a
// GEMM then lies between the two is the all-reduce made asynchronous.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCOVERLAPTPCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc::plan;

namespace {

/// The bytes of an arena slice: its root, offset and size (offset -1 when
/// the root is not yet placed).
struct Slice {
  ArenaOp root;
  int64_t first = -1, bytes = 0;
};

Slice sliceOf(Value buffer) {
  auto [root, offset] = arenaRoot(buffer);
  if (!root)
    return {};
  const int64_t placed = root.getOffset();
  return {root, placed < 0 ? -1 : placed + offset, bufferBytes(buffer)};
}

/// Whether a step reads or writes any part of `s`.
bool touches(Operation &op, const Slice &s) {
  for (Value v : op.getOperands()) {
    Slice o = sliceOf(v);
    if (!o.root)
      continue;
    if (o.root == s.root)
      return true;
    if (o.first >= 0 && s.first >= 0 && o.first < s.first + s.bytes &&
        s.first < o.first + o.bytes)
      return true;
  }
  return false;
}

/// Steps an asynchronous tensor-parallel all-reduce may run across (when
/// they do not touch its buffer).
bool mayCross(Operation &op) {
  return isBufferDecl(op) ||
         isa<LaunchOp, GemmOp, AllReduceStartOp, AllReduceWaitOp, ReduceScatterStartOp,
             ReduceScatterWaitOp>(op);
}

class OverlapTpCollectivesPass
    : public mlc::impl::MlcOverlapTpCollectivesBase<OverlapTpCollectivesPass> {
public:
  using MlcOverlapTpCollectivesBase::MlcOverlapTpCollectivesBase;

  void runOnOperation() final {
    ModuleOp module = getOperation();
    auto t = module->getAttrOfType<IntegerAttr>("mlc.tensor_parallel");
    if (!t || t.getInt() <= 1)
      return; // no group: no tensor-parallel collectives
    for (FuncOp fn : module.getOps<FuncOp>())
      overlap(fn);
  }

private:
  void overlap(FuncOp fn) {
    Block &body = fn.getBody().front();
    int64_t tag = 0;
    for (auto w : body.getOps<TpWaitOp>())
      tag = std::max(tag, w.getTag() + 1);
    SmallVector<TpAllReduceOp> reduces(body.getOps<TpAllReduceOp>());
    for (TpAllReduceOp reduce : reduces) {
      if (reduce.getMax() || reduce.getTag())
        continue;
      Slice s = sliceOf(reduce.getBuffer());
      if (!s.root)
        continue; // a flat buffer's slice (a replicated parameter's gradient)
      // The earliest start: after the last step before it that touches the
      // buffer (or that it may not cross).
      Operation *after = reduce->getPrevNode();
      while (after && mayCross(*after) && !touches(*after, s))
        after = after->getPrevNode();
      // The latest wait: before the first step after it that touches the
      // buffer (or that it may not cross).
      Operation *before = reduce->getNextNode();
      while (before && mayCross(*before) && !touches(*before, s))
        before = before->getNextNode();
      if (!before)
        continue; // a plan.func ends with its outputs; be safe
      int gemms = 0;
      for (Operation *op = after ? after->getNextNode() : &body.front(); op != before;
           op = op->getNextNode())
        gemms += isa<GemmOp>(op) ? 1 : 0;
      if (gemms == 0)
        continue; // a reader right after: nothing to overlap
      // The start goes after the last declaration of its buffer too.
      Operation *def = reduce.getBuffer().getDefiningOp();
      if (after)
        reduce->moveAfter(after);
      else
        reduce->moveBefore(&body.front());
      if (def && def->getBlock() == &body && reduce->isBeforeInBlock(def))
        reduce->moveAfter(def);
      reduce.setTagAttr(IntegerAttr::get(IntegerType::get(fn.getContext(), 64), tag));
      OpBuilder builder(before);
      builder.create<TpWaitOp>(reduce.getLoc(), reduce.getBuffer(), tag);
      ++tag;
      ++numOverlapped;
    }
  }
};

} // namespace
