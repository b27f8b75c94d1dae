//===- MlcLosses.h - the language-model losses as graph ops ----*- C++ -*-===//
//
// The two losses a language model trains on, built once for every frontend:
// the builtin GPT-2 and BERT, the ONNX importer's --loss, and mlc-infer-loss.
//
//   causal-lm   HuggingFace's shifted next-token loss: logits[:, :-1] against
//               labels[:, 1:]
//   masked-lm   every position's logits against its label; labels of -100
//               (the unmasked tokens) are skipped
//
// Both are the mean cross-entropy over the positions counted (mlc.cross_entropy
// with ignore_index -100).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_MLC_MLCLOSSES_H
#define MLC_DIALECTS_MLC_MLCLOSSES_H

#include "mlir/IR/Builders.h"

namespace mlc {

enum class LanguageModelLoss { Causal, Masked };

/// The loss of `logits` [B, S, V] against integer `labels` [B, S] (S >= 2
/// for the causal loss), a rank-0 float value.
mlir::Value buildLanguageModelLoss(mlir::OpBuilder &b, mlir::Location loc, mlir::Value logits,
                                   mlir::Value labels, LanguageModelLoss kind);

/// "causal-lm" / "masked-lm", as --loss spells them.
const char *lossName(LanguageModelLoss kind);

} // namespace mlc

#endif // MLC_DIALECTS_MLC_MLCLOSSES_H
