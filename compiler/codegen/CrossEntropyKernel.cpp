//===- CrossEntropyKernel.cpp - a loss and its gradient in one kernel -----===//
//
// The cross-entropy loss with the gradient mlc-fuse-cross-entropy marked
// `mlc.with_loss`: one #plan.cross_entropy_with_grad kernel, where the
// gradient overwrites the logits when mlc-in-place marked it `mlc.in_place`.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/LoweringMarks.h"

namespace mlc::lowering {

/// The cast that is the gradient's only reader (through a reshape), from
/// f32 to bf16, or null: the kernel then writes the gradient as that copy.
static CastOp bf16Copy(CrossEntropyGradOp cg, Type el) {
  if (!cg.getResult().hasOneUse())
    return {};
  Operation *reader = *cg.getResult().getUsers().begin();
  if (auto rs = dyn_cast<ReshapeOp>(reader); rs && rs.getResult().hasOneUse())
    reader = *rs.getResult().getUsers().begin();
  auto c = dyn_cast<CastOp>(reader);
  if (c && el.isF32() && typeOf(c.getResult()).getElementType().isBF16())
    return c;
  return {};
}

/// A loss and the gradient mlc-fuse-cross-entropy marked (`mlc.with_loss`):
/// one kernel reads each row of logits once for both (log-softmax, loss and
/// its gradient). `params` holds the loss's rows, labels and ignore index.
llvm::Error FunctionLowering::emitCrossEntropyWithGrad(CrossEntropyOp ce, CrossEntropyGradOp cg,
                                                       ParamsBuilder &params) {
  auto c = cg.getGrad().getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (cg.getLabels() != ce.getLabels() || cg.getIgnoreIndex() != ce.getIgnoreIndex() || !dense ||
      !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return failure(cg, "marked mlc.with_loss, but it does not read its loss's labels with its "
                       "ignore index and a constant scale");
  params.attr("scale", FloatAttr::get(dense.getElementType(),
                                      dense.getSplatValue<APFloat>().convertToDouble()));
  Type el = typeOf(ce.getResult()).getElementType();
  std::vector<int> bufs;
  auto bindOut = [&](Value v) {
    int id = arenaFor(v);
    valueBuffers[v] = id;
    bufs.push_back(id);
  };
  bindOut(ce.getResult());
  const int logits = bufferOf(ce.getLogits());
  Type gradType = el;
  if (assignedBuffer(cg.getResult()) == buffers::logits) {
    // mlc-in-place's choice: the gradient overwrites the logits (each row's
    // x[label] is read before its gradient is written).
    if (!overwritable(ce.getLogits(), {ce.getOperation(), cg.getOperation()}))
      return failure(cg, "marked mlc.in_place, but its logits are read by more than its loss, "
                         "or are not a fresh arena slice (an input, a parameter or a view)");
    int id = newBuffer({Buffer::Alias, el, numel(cg.getResult())});
    buffers[id].alias = logits;
    valueBuffers[cg.getResult()] = id;
    bufs.push_back(id);
  } else if (assignedBuffer(cg.getResult()) == buffers::bf16Copy) {
    // --dtype bf16: a gradient read only as a bf16 copy is written as that copy.
    CastOp narrow = bf16Copy(cg, el);
    if (!narrow)
      return failure(cg, "assigned 'bf16_copy' (mlc.buffers), but it is not read only as a "
                         "bf16 copy of an f32 gradient");
    gradType = typeOf(narrow.getResult()).getElementType();
    bindOut(narrow.getResult());
    emittedWith.insert(narrow.getOperation());
  } else {
    bindOut(cg.getResult());
  }
  bufs.push_back(logits);
  bufs.push_back(bufferOf(ce.getLabels()));
  emittedWith.insert(cg.getOperation());
  params.type("grad", gradType);
  addStep(plan::CrossEntropyWithGradTemplateAttr::get(ce.getContext()), params.get(), bufs,
          KernelTemplate::rows);
  return llvm::Error::success();
}

} // namespace mlc::lowering
