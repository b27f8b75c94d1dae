//===- CrossEntropyKernel.cpp - the loss and its gradient -----------------===//
//
// mlc.cross_entropy and mlc.cross_entropy_grad as row kernels over the
// logits: #plan.cross_entropy and #plan.cross_entropy_grad, or, for a loss
// with the gradient mlc-fuse-cross-entropy marked `mlc.with_loss`, one
// #plan.cross_entropy_with_grad kernel, where the gradient overwrites the
// logits when mlc-in-place marked it `mlc.in_place`. Typed templates: their
// parameters are the attributes' own (PlanTemplates.td).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/LoweringMarks.h"
#include "passes/Passes.h"

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

/// A loss's splat constant incoming gradient `grad`, in its own type, or
/// null (the gradient kernel then reads it from its last argument).
static FloatAttr constantScale(Value grad) {
  auto c = grad.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return {};
  return FloatAttr::get(dense.getElementType(), dense.getSplatValue<APFloat>().convertToDouble());
}

/// The loss (with its marked gradient: emitCrossEntropyWithGrad) or the
/// gradient alone: a kernel over the logits' rows, the last axis the
/// classes.
llvm::Error FunctionLowering::emitCrossEntropy(Operation *op) {
  auto ce = dyn_cast<CrossEntropyOp>(op);
  auto cg = dyn_cast<CrossEntropyGradOp>(op);
  Value logits = ce ? ce.getLogits() : cg.getLogits();
  Value labels = ce ? ce.getLabels() : cg.getLabels();
  Type el = typeOf(op->getResult(0)).getElementType();
  Type lt = typeOf(labels).getElementType();
  Shape s = shapeOf(logits);
  Rows rows = rowsOf(product(s) / s.back(), dynamicRows(logits));
  Attribute k;
  FloatAttr scale; // the gradient's, where constant
  if (ce) {
    // With the gradient mlc-fuse-cross-entropy marked: one kernel for both.
    for (Operation *user : logits.getUsers())
      if (auto marked = dyn_cast<CrossEntropyGradOp>(user);
          marked && marked->hasAttr(kWithLossAttr) && !loweredWith.count(marked))
        return emitCrossEntropyWithGrad(ce, marked);
    k = plan::CrossEntropyTemplateAttr::get(context(), el, lt, rows.count, rows.perToken,
                                            s.back(), ce.getIgnoreIndex());
  } else {
    if (cg->hasAttr(kWithLossAttr))
      return failure(op, "marked mlc.with_loss, but no mlc.cross_entropy before it reads its "
                         "logits");
    if (cg->hasAttr(kInPlaceAttr))
      return failure(op, "marked mlc.in_place, but not mlc.with_loss: only the kernel of a loss "
                         "and its gradient writes the gradient over the logits");
    scale = constantScale(cg.getGrad());
    k = plan::CrossEntropyGradTemplateAttr::get(context(), el, lt, rows.count, rows.perToken,
                                                s.back(), cg.getIgnoreIndex(), scale);
  }
  std::vector<Value> bufs{arenaFor(op->getResult(0))};
  valueBuffers[op->getResult(0)] = bufs[0];
  bufs.push_back(bufferOf(logits));
  bufs.push_back(bufferOf(labels));
  if (cg && !scale)
    bufs.push_back(bufferOf(cg.getGrad()));
  addStep(k, DictionaryAttr(), bufs, KernelTemplate::rows);
  return llvm::Error::success();
}

/// A loss and the gradient mlc-fuse-cross-entropy marked (`mlc.with_loss`):
/// one kernel reads each row of logits once for both (log-softmax, loss and
/// its gradient).
llvm::Error FunctionLowering::emitCrossEntropyWithGrad(CrossEntropyOp ce, CrossEntropyGradOp cg) {
  FloatAttr scale = constantScale(cg.getGrad());
  if (cg.getLabels() != ce.getLabels() || cg.getIgnoreIndex() != ce.getIgnoreIndex() || !scale)
    return failure(cg, "marked mlc.with_loss, but it does not read its loss's labels with its "
                       "ignore index and a constant scale");
  Type el = typeOf(ce.getResult()).getElementType();
  std::vector<Value> bufs;
  bindResult(ce.getResult(), bufs);
  const Value logits = bufferOf(ce.getLogits());
  Type gradType = el;
  if (assignedBuffer(cg.getResult()) == buffers::logits) {
    // mlc-in-place's choice: the gradient overwrites the logits (each row's
    // x[label] is read before its gradient is written).
    if (!overwritable(ce.getLogits(), {ce.getOperation(), cg.getOperation()}))
      return failure(cg, "marked mlc.in_place, but its logits are read by more than its loss, "
                         "or are not a fresh arena slice (an input, a parameter or a view)");
    Value buf = alias(logits, 0, el, numel(cg.getResult()));
    valueBuffers[cg.getResult()] = buf;
    bufs.push_back(buf);
  } else if (assignedBuffer(cg.getResult()) == buffers::bf16Copy) {
    // --dtype bf16: a gradient read only as a bf16 copy is written as that copy.
    CastOp narrow = bf16Copy(cg, el);
    if (!narrow)
      return failure(cg, "assigned 'bf16_copy' (mlc.buffers), but it is not read only as a "
                         "bf16 copy of an f32 gradient");
    gradType = typeOf(narrow.getResult()).getElementType();
    bindResult(narrow.getResult(), bufs);
    lowersToo(narrow);
  } else {
    bindResult(cg.getResult(), bufs);
  }
  bufs.push_back(logits);
  bufs.push_back(bufferOf(ce.getLabels()));
  lowersToo(cg);
  Shape s = shapeOf(ce.getLogits());
  Rows rows = rowsOf(product(s) / s.back(), dynamicRows(ce.getLogits()));
  addStep(plan::CrossEntropyWithGradTemplateAttr::get(ce.getContext(), el,
                                                      typeOf(ce.getLabels()).getElementType(),
                                                      gradType, rows.count, rows.perToken,
                                                      s.back(), ce.getIgnoreIndex(), scale),
          DictionaryAttr(), bufs, KernelTemplate::rows);
  return llvm::Error::success();
}

} // namespace mlc::lowering
