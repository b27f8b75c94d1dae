//===- InPlace.cpp - results written where their readers want them --------===//
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
// Likewise a kernel writes a result straight into the layout of its one
// reader, a view or a concatenation, which then costs nothing: the pass
// marks those results `mlc.in_reader_layout` (ReaderLayouts says which
// layouts can hold them).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/LoweringMarks.h"
#include "compiler/codegen/Passes.h"
#include "passes/Passes.h"

namespace mlc {
#define GEN_PASS_DEF_MLCINPLACE
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;
using lowering::Shape;

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

/// The strides a producer writes `r` at in its reader's layout: r's one
/// reader is a transpose that keeps the innermost dimension, a reshape that
/// needs no copy of the layout it writes, or a concatenation (r's slice of
/// it); else none. The layouts chain (a reshape of a transpose into a
/// concatenation ...). Shapes take the module's token capacity for the
/// dynamic token dimension, as the lowering's buffers do.
class ReaderLayouts {
public:
  explicit ReaderLayouts(int64_t capacity) : capacity(capacity) {}

  std::optional<Shape> of(Value r) {
    if (!r.hasOneUse())
      return std::nullopt;
    Operation *user = *r.getUsers().begin();
    if (auto t = dyn_cast<TransposeOp>(user)) {
      ArrayRef<int64_t> perm = t.getPermutation();
      if (perm.empty() || perm.back() != int64_t(perm.size()) - 1)
        return std::nullopt; // writers need the innermost dimension contiguous
      Shape dst = destination(t.getResult()), out(perm.size());
      for (size_t i = 0; i < perm.size(); ++i)
        out[perm[i]] = dst[i];
      return out;
    }
    if (auto rs = dyn_cast<ReshapeOp>(user))
      return lowering::reshapeStrides(shape(rs.getResult()), destination(rs.getResult()),
                                      shape(r));
    if (auto c = dyn_cast<ConcatOp>(user))
      return concatenation(c);
    return std::nullopt;
  }

  /// Whether a concatenation lives in its one reader's layout, a transpose's.
  bool concatInReader(ConcatOp c) {
    Value x = c.getResult();
    return x.hasOneUse() && isa<TransposeOp>(*x.getUsers().begin()) && of(x);
  }

private:
  Shape shape(Value v) { return lowering::shapeOf(v, capacity); }
  Shape destination(Value x) {
    if (std::optional<Shape> s = of(x))
      return *s;
    return lowering::rowMajorStrides(shape(x));
  }
  Shape concatenation(ConcatOp c) {
    if (concatInReader(c))
      return *of(c.getResult());
    return lowering::rowMajorStrides(shape(c.getResult()));
  }

  int64_t capacity;
};

/// The results of `op` that its kernel writes in their reader's layout:
/// every attention (or attention gradient) result that a view or a
/// concatenation reads alone; a pointwise fusion's result of its
/// iteration's shape that a concatenation reads alone; a concatenation that
/// a transpose keeping the innermost dimension reads alone.
SmallVector<int64_t> resultsInReaderLayout(Operation *op, ReaderLayouts &layouts) {
  SmallVector<int64_t> marked;
  if (isa<AttentionOp, AttentionGradOp>(op)) {
    for (OpResult r : op->getResults())
      if (layouts.of(r))
        marked.push_back(r.getResultNumber());
  } else if (auto f = dyn_cast<FusionOp>(op); f && f.getKind() == FusionKind::pointwise) {
    // The iteration shape: a closing column reduction's input's, else the
    // first result's.
    Value iter = f.getResult(0);
    for (Operation &inner : f.getBody().front().without_terminator())
      if (auto r = dyn_cast<ReduceSumOp>(inner))
        iter = r.getInput();
    for (OpResult r : f->getResults())
      if (r.hasOneUse() && isa<ConcatOp>(*r.getUsers().begin()) &&
          cast<ShapedType>(r.getType()).getShape() ==
              cast<ShapedType>(iter.getType()).getShape())
        marked.push_back(r.getResultNumber());
  } else if (auto c = dyn_cast<ConcatOp>(op); c && layouts.concatInReader(c)) {
    marked.push_back(0);
  }
  return marked;
}

class InPlacePass : public mlc::impl::MlcInPlaceBase<InPlacePass> {
public:
  void runOnOperation() final {
    UnitAttr unit = UnitAttr::get(&getContext());
    ModuleOp module = getOperation();
    int64_t capacity = 0;
    if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
      capacity = cap.getInt();
    ReaderLayouts layouts(capacity);
    module.walk([&](Operation *op) {
      if (auto grad = dyn_cast<CrossEntropyGradOp>(op);
          grad && grad->hasAttr(kWithLossAttr) && mayOverwriteLogits(grad))
        grad->setAttr(kInPlaceAttr, unit);
      SmallVector<int64_t> marked = resultsInReaderLayout(op, layouts);
      if (!marked.empty())
        op->setAttr(kReaderLayoutAttr, DenseI64ArrayAttr::get(&getContext(), marked));
    });
  }
};

} // namespace
