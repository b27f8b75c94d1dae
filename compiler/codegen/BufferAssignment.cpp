//===- BufferAssignment.cpp - the lowering reads mlc.buffers ---------------===//
//
// mlc-lower-to-plan does not decide where a value lives: it reads
// mlc-assign-buffers' `mlc.buffers` (LoweringMarks.h) and refuses, on the
// op, an entry it cannot obey: a missing one, one of a kind that does not
// fit the op, a flat-buffer slice that is not the function's gradient or
// update of that name.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

namespace mlc::lowering {

namespace {

/// The kind a result of `op` must be assigned whatever else holds ("" where
/// the pass has a choice).
StringRef onlyKind(Operation *op) {
  if (op->hasAttr(kConsumerLoadAttr))
    return buffers::readerLoad;
  if (isViewOp(op))
    return buffers::view;
  if (isa<ConstantOp>(op))
    return buffers::constant;
  if (auto f = dyn_cast<FusionOp>(op)) {
    if (f.getKind() == FusionKind::optimizer)
      return buffers::flatBuffers;
    if (f.getKind() == FusionKind::params)
      return buffers::paramLayout;
  }
  return "";
}

/// Whether `kind` fits a result of `op` that has no only kind; why not.
std::optional<std::string> misfit(Operation *op, StringRef kind) {
  if (kind == buffers::arena)
    return std::nullopt;
  if (kind == buffers::accumulator)
    return whyNotInAccumulator(op);
  if (kind == buffers::logits || kind == buffers::bf16Copy)
    return isa<CrossEntropyGradOp>(op) && op->hasAttr(kWithLossAttr)
               ? std::nullopt
               : std::optional<std::string>("only a loss gradient written with its loss "
                                            "(mlc.with_loss) is");
  if (kind == buffers::input)
    return isa<TpReduceOp>(op) ? std::nullopt
                               : std::optional<std::string>("only an mlc.tp_reduce is");
  if (kind == buffers::readerLayout)
    return isa<AttentionOp, AttentionGradOp, FusionOp, ConcatOp>(op)
               ? std::nullopt
               : std::optional<std::string>("only an attention's, a fusion's or a "
                                            "concatenation's result is");
  for (StringRef own : {buffers::view, buffers::constant, buffers::readerLoad,
                        buffers::flatBuffers, buffers::paramLayout})
    if (kind == own)
      return "that kind fits only a view, a constant, a flat-buffer fusion or a widening read "
             "at its load, each its own";
  return "there is no such kind";
}

/// The flat buffer of a slice `KIND:NAME`.
std::optional<plan::BufferKind> sliceKind(StringRef kind) {
  return llvm::StringSwitch<std::optional<plan::BufferKind>>(kind)
      .Case("grad", plan::BufferKind::grad)
      .Case("param", plan::BufferKind::param)
      .Case("moment1", plan::BufferKind::moment1)
      .Case("moment2", plan::BufferKind::moment2)
      .Case("grad_sum", plan::BufferKind::grad_sum)
      .Default(std::nullopt);
}

/// Whether `v`, written into slice `slice`, is (through the accumulating
/// products that add to it in its buffer) the function's result of that
/// slice, which only the return reads, once.
bool returnedAs(func::FuncOp fn, Value v, StringRef slice) {
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    if (user->getNumResults() != 1 || productAccumulator(user) != v ||
        assignedBuffer(user->getResult(0)) != buffers::accumulator)
      break;
    v = user->getResult(0);
  }
  if (!v.hasOneUse())
    return false;
  OpOperand &use = *v.getUses().begin();
  if (!isa<func::ReturnOp>(use.getOwner()))
    return false;
  std::optional<std::string> expected = resultSlice(fn, use.getOperandNumber());
  return expected && *expected == slice;
}

} // namespace

llvm::Error FunctionLowering::readAssignment(Block &block) {
  for (Operation &op : block.without_terminator()) {
    if (op.getNumResults() == 0)
      continue;
    auto all = op.getAttrOfType<ArrayAttr>(kBuffersAttr);
    if (!all)
      return failure(&op, "no buffers assigned (mlc.buffers): mlc-assign-buffers runs before "
                          "mlc-lower-to-plan");
    if (all.size() != op.getNumResults() ||
        !llvm::all_of(all, [](Attribute a) { return isa<StringAttr>(a); }))
      return failure(&op, "mlc.buffers holds " + llvm::Twine(all.size()) +
                              " entries, not one string per result (" +
                              llvm::Twine(op.getNumResults()) + ")");
    for (OpResult r : op.getResults()) {
      StringRef kind = assignedBuffer(r);
      auto at = "result #" + std::to_string(r.getResultNumber()) + " is assigned '" +
                kind.str() + "'";
      StringRef only = onlyKind(&op);
      if (!only.empty()) {
        if (kind != only)
          return failure(&op, at + ", but a '" + op.getName().getStringRef() + "' lives in '" +
                                  only + "'");
        continue;
      }
      auto [flat, name] = kind.split(':');
      if (!name.empty()) {
        std::optional<plan::BufferKind> k = sliceKind(flat);
        if (!k)
          return failure(&op, at + ", but no flat buffer is named '" + flat + "'");
        if (!returnedAs(fn, r, kind))
          return failure(&op, at + ", but it is not @" + fn.getSymName() + "'s result of that "
                                   "slice, read only by the return (directly or through "
                                   "products that add to it)");
        targets[r] = {*k, name.str()};
        continue;
      }
      if (std::optional<std::string> why = misfit(&op, kind))
        return failure(&op, at + ", but " + *why + " (mlc.buffers)");
      if (kind == buffers::accumulator) // in its accumulator's flat buffer, if it is one
        if (auto it = targets.find(accumulatorOf(&op)); it != targets.end()) {
          auto slice = it->second;
          targets[r] = slice;
        }
    }
  }
  return llvm::Error::success();
}

} // namespace mlc::lowering
