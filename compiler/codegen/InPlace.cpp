//===- InPlace.cpp - a loss's gradient written over its logits ------------===//
//
// mlc-in-place: a pass of the lowering pipeline, after mlc-gemm-epilogues.
// The kernel of a loss and its gradient (a cross_entropy_grad that
// mlc-fuse-cross-entropy marked mlc.with_loss) reads each row's x[label]
// before it writes the row's gradient, so the gradient can overwrite the
// logits when nothing else reads them: one logits-sized arena slice less
// (the largest activation of a language model) and no second stream
// through memory. This pass decides where and marks the gradient
// `mlc.in_place`; mlc-lower-to-plan obeys the mark, and refuses one whose
// logits are not a fresh arena slice that only the loss and its gradient
// read.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringMarks.h"
#include "compiler/codegen/Passes.h"
#include "passes/Passes.h"

namespace mlc {
#define GEN_PASS_DEF_MLCINPLACE
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Whether the gradient is read only as a bf16 copy (a cast, possibly
/// through a reshape): --dtype bf16, where the kernel writes that copy
/// instead, which is not the logits' bytes.
bool readAsBf16Copy(CrossEntropyGradOp grad) {
  if (!grad.getResult().hasOneUse() || !elementOf(grad.getResult()).isF32())
    return false;
  Operation *reader = *grad.getResult().getUsers().begin();
  if (auto rs = dyn_cast<ReshapeOp>(reader); rs && rs.getResult().hasOneUse())
    reader = *rs.getResult().getUsers().begin();
  auto c = dyn_cast<CastOp>(reader);
  return c && elementOf(c.getResult()).isBF16();
}

/// Whether `logits` own their bytes: produced by a kernel (not a function
/// argument, a constant or a view such as a transpose, split, slice or a
/// parameter's bf16 copy), directly or through reshapes that are their
/// input's only reader.
bool ownsItsBytes(Value logits) {
  Value v = logits;
  while (auto rs = v.getDefiningOp<ReshapeOp>()) {
    if (!rs.getInput().hasOneUse())
      return false;
    v = rs.getInput();
  }
  Operation *def = v.getDefiningOp();
  if (!def || isa<ConstantOp, TransposeOp, SplitOp, SliceOp, TpCopyOp>(def))
    return false;
  auto f = dyn_cast<FusionOp>(def);
  return !f || f.getKind() != FusionKind::params;
}

/// Whether `grad` may overwrite its logits: their only readers are the
/// gradient and one loss, and they own their bytes.
bool mayOverwriteLogits(CrossEntropyGradOp grad) {
  Value logits = grad.getLogits();
  Operation *loss = nullptr;
  for (Operation *user : logits.getUsers()) {
    if (user == grad.getOperation())
      continue;
    if (!isa<CrossEntropyOp>(user) || (loss && loss != user))
      return false;
    loss = user;
  }
  return loss && !readAsBf16Copy(grad) && ownsItsBytes(logits);
}

class InPlacePass : public mlc::impl::MlcInPlaceBase<InPlacePass> {
public:
  void runOnOperation() final {
    UnitAttr unit = UnitAttr::get(&getContext());
    getOperation().walk([&](CrossEntropyGradOp grad) {
      if (grad->hasAttr(kWithLossAttr) && mayOverwriteLogits(grad))
        grad->setAttr(kInPlaceAttr, unit);
    });
  }
};

} // namespace
