//===- VocabParallel.h - vocabulary-parallel lookup and loss ----*- C++ -*-===//
//
// Megatron-LM's VocabParallelEmbedding and vocab_parallel_cross_entropy as
// graph ops: each rank of a tensor-parallel group of `size` ranks holds
// rows [rank * V/size, (rank + 1) * V/size) of the vocabulary, and the
// lookup and the loss are built from existing mlc ops plus mlc.tp_copy and
// mlc.tp_reduce, so they fuse like any other graph and autodiff derives
// their backward. mlc-shard-tensor-parallel calls these; they are exact
// (the same values as one process holding the whole vocabulary, up to the
// order of float sums).
//
// The rank comes from the step's scalars "tp_rank" (one f64: this rank's
// index in its tensor-parallel group), which the runtime fills once.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PASSES_VOCABPARALLEL_H
#define MLC_PASSES_VOCABPARALLEL_H

#include "dialects/mlc/MlcDialect.h"

namespace mlc {

/// The name of the scalars argument that holds the tensor-parallel rank.
inline constexpr const char *kTpRankScalars = "tp_rank";

/// The unit attribute mlc-autodiff reads as "do not differentiate through
/// this op" (torch's detach; passes/Autodiff.cpp spells it too); the loss's
/// shift carries it.
inline constexpr const char *kStopGradientAttr = "mlc.stop_gradient";

/// The first vocabulary row this rank holds, `rank * rowsPerRank`, as a 0-d
/// tensor of integer type `el`, from the "tp_rank" scalars argument `rank`
/// (tensor<1xf64>).
mlir::Value vocabOffset(mlir::OpBuilder &b, mlir::Location loc, mlir::Value rank,
                        int64_t rowsPerRank, mlir::Type el);

/// Replaces `lookup` (whose table has already been cut to this rank's
/// rows) by the vocabulary-parallel lookup: ids outside this rank's rows
/// read row 0 and are zeroed, and an mlc.tp_reduce sum joins the ranks'
/// rows. `vocab` is the whole vocabulary. A padding_idx keeps its meaning
/// (that row is looked up but never trained by the lookup). Ids outside
/// [0, vocab) reach the local lookup unchanged, so its range check still
/// reports them.
void buildVocabParallelEmbedding(mlir::OpBuilder &b, EmbeddingOp lookup, mlir::Value offset,
                                 int64_t vocab);

/// Replaces `loss` (whose logits are this rank's columns of the vocabulary)
/// by the vocabulary-parallel cross-entropy: the row maxima joined by
/// mlc.tp_reduce max (detached: marked kStopGradientAttr), the exp-sums
/// and the target logit (which only the rank that holds the label's column
/// contributes) by mlc.tp_reduce sum.
/// The logits are never gathered. A label outside [0, vocab) that is not
/// the ignore index makes the loss +inf (one process's kernel reports it;
/// here no rank sees the whole row).
void buildVocabParallelCrossEntropy(mlir::OpBuilder &b, CrossEntropyOp loss, mlir::Value offset,
                                    int64_t vocab);

} // namespace mlc

#endif // MLC_PASSES_VOCABPARALLEL_H
