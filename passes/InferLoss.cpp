//===- InferLoss.cpp - the loss of a logits-only model, from its attention ===//
//
// An ONNX export of a language model often returns only its logits. The
// importer then marks @forward `mlc.infer_loss = {logits, labels}` (when no
// --loss was given), and this pass, after mlc-recognize, decides which loss
// the model trains on from what recognition found:
//
//   every mlc.attention causal                   causal-lm (next-token loss)
//   none causal, and the logits' last dimension  masked-lm
//   is an embedding table's row count (the
//   vocabulary)
//
// Anything else (no attention recognized, causal and bidirectional mixed, a
// bidirectional model whose output is not vocabulary-sized) is an error that
// says which --loss to pass. The loss is built as --loss would build it
// (MlcLosses.h): a new input `labels` [B, S] and a first result `loss`; the
// choice is left on @forward as `mlc.inferred_loss` for the compiler to report.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcLosses.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlc {
#define GEN_PASS_DEF_MLCINFERLOSS
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

constexpr const char *kHint = "; pass --loss causal-lm (GPT-like) or --loss masked-lm (BERT-like)";

/// The loss `fn`'s recognized attention implies for logits of `vocab`
/// columns, or an error on `fn`.
FailureOr<LanguageModelLoss> lossFromAttention(func::FuncOp fn, int64_t vocab) {
  int causal = 0, bidirectional = 0;
  bool vocabularySized = false;
  fn.walk([&](Operation *op) {
    if (auto a = dyn_cast<AttentionOp>(op))
      ++(a.getCausal() ? causal : bidirectional);
    if (auto e = dyn_cast<EmbeddingOp>(op))
      vocabularySized |= cast<RankedTensorType>(e.getWeight().getType()).getDimSize(0) == vocab;
  });
  if (!causal && !bidirectional)
    return fn.emitError("mlc-infer-loss: cannot tell which loss the model trains on: no "
                        "attention was recognized")
           << kHint;
  if (causal && bidirectional)
    return fn.emitError("mlc-infer-loss: cannot tell which loss the model trains on: ")
           << causal << " causal and " << bidirectional << " bidirectional attentions" << kHint;
  if (causal)
    return LanguageModelLoss::Causal;
  if (!vocabularySized)
    return fn.emitError("mlc-infer-loss: the attention is bidirectional but the logits' "
                        "last dimension (")
           << vocab << ") is no embedding table's row count, so not a masked-LM head" << kHint;
  return LanguageModelLoss::Masked;
}

std::optional<unsigned> resultNamed(func::FuncOp fn, StringRef name) {
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto n = fn.getResultAttrOfType<StringAttr>(i, "mlc.output"); n && n.getValue() == name)
      return i;
  return std::nullopt;
}

LogicalResult inferLoss(func::FuncOp fn, DictionaryAttr spec) {
  auto logitsName = spec.getAs<StringAttr>("logits"), labelsName = spec.getAs<StringAttr>("labels");
  if (!logitsName || !labelsName)
    return fn.emitError("mlc-infer-loss: mlc.infer_loss needs string entries logits and labels");
  if (resultNamed(fn, "loss"))
    return fn.emitError("mlc-infer-loss: @forward already returns 'loss'");
  std::optional<unsigned> index = resultNamed(fn, logitsName.getValue());
  if (!index)
    return fn.emitError("mlc-infer-loss: @forward has no output '") << logitsName.getValue()
                                                                     << "' to compute a loss from";
  auto type = cast<RankedTensorType>(fn.getResultTypes()[*index]);
  if (type.getRank() != 3 || !type.hasStaticShape() || type.getDimSize(1) < 2)
    return fn.emitError("mlc-infer-loss: the logits must be [batch, sequence >= 2, vocab], got ")
           << type;
  FailureOr<LanguageModelLoss> kind = lossFromAttention(fn, type.getDimSize(2));
  if (failed(kind))
    return failure();
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  OpBuilder b(ret);
  auto labelsType = RankedTensorType::get({type.getDimSize(0), type.getDimSize(1)},
                                          b.getI64Type());
  unsigned arg = fn.getNumArguments();
  fn.insertArgument(arg, labelsType, b.getDictionaryAttr(b.getNamedAttr("mlc.input", labelsName)),
                    fn.getLoc());
  Value loss = buildLanguageModelLoss(b, fn.getLoc(), ret.getOperand(*index), fn.getArgument(arg),
                                      *kind);
  fn.insertResult(0, loss.getType(),
                  b.getDictionaryAttr(b.getNamedAttr("mlc.output", b.getStringAttr("loss"))));
  ret->insertOperands(0, loss);
  fn->removeAttr("mlc.infer_loss");
  fn->setAttr("mlc.inferred_loss", b.getStringAttr(lossName(*kind)));
  return success();
}

class InferLossPass : public mlc::impl::MlcInferLossBase<InferLossPass> {
public:
  void runOnOperation() final {
    auto fn = getOperation().lookupSymbol<func::FuncOp>(mlc::kForwardFn);
    if (!fn)
      return;
    auto spec = fn->getAttrOfType<DictionaryAttr>("mlc.infer_loss");
    if (!spec)
      return; // the loss is the model's or --loss's
    if (failed(inferLoss(fn, spec)))
      signalPassFailure();
  }
};

} // namespace
