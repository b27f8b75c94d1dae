//===- FuseCrossEntropy.cpp - a loss's gradient computed by its kernel ----===//
//
// The training step's loss, cross_entropy(logits, labels), and its gradient,
// cross_entropy_grad(scale, logits, labels), both read every row of the
// logits: a log-softmax, then the loss or the gradient. When the gradient
// reads the loss's logits and labels with its ignore index and a constant
// scale, one kernel computes both from one read of each row; this pass marks
// such a gradient `mlc.with_loss`, and the lowering emits it with its loss.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlc {
#define GEN_PASS_DEF_MLCFUSECROSSENTROPY
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

/// A splat floating-point constant: the kernel scales by it as a literal.
bool isConstantScale(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  return dense && dense.isSplat() && isa<FloatType>(dense.getElementType());
}

/// The gradient `loss`'s kernel can compute: the first cross_entropy_grad
/// after it in its block over the same logits and labels, with the same
/// ignore index and a constant scale, not marked already.
CrossEntropyGradOp gradientOf(CrossEntropyOp loss) {
  CrossEntropyGradOp first;
  for (Operation *user : loss.getLogits().getUsers()) {
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    if (grad && !grad->hasAttr(kWithLossAttr) && grad->getBlock() == loss->getBlock() &&
        loss->isBeforeInBlock(grad) && grad.getLabels() == loss.getLabels() &&
        grad.getIgnoreIndex() == loss.getIgnoreIndex() && isConstantScale(grad.getGrad()) &&
        (!first || grad->isBeforeInBlock(first)))
      first = grad;
  }
  return first;
}

class FuseCrossEntropyPass : public mlc::impl::MlcFuseCrossEntropyBase<FuseCrossEntropyPass> {
public:
  void runOnOperation() final {
    UnitAttr unit = UnitAttr::get(&getContext());
    getOperation().walk([&](CrossEntropyOp loss) {
      if (CrossEntropyGradOp grad = gradientOf(loss)) {
        grad->setAttr(kWithLossAttr, unit);
        // Its kernel computes the loss too: located at both.
        grad->setLoc(FusedLoc::get({grad.getLoc(), loss.getLoc()}, Attribute(), &getContext()));
      }
    });
  }
};

} // namespace
