//===- SequenceParallel.h - Megatron's --sequence-parallel ------*- C++ -*-===//
//
// The second half of mlc-shard-tensor-parallel with sequence-parallel=true:
// once the tensor-parallel regions are in place (each entered by an
// mlc.tp_copy, each left by an mlc.tp_reduce sum), the residual stream
// between them (its elementwise ops, norms and dropout) runs on this rank's
// 1/size of the tokens. The stream's [tokens..., hidden] values become
// [tokens / size, hidden]: rank r holds the r-th of `size` contiguous blocks
// of the flattened rows. A region's entry becomes mlc.tp_all_gather over
// those rows, its exit mlc.tp_reduce_scatter; a replicated value the stream
// reads whole (the embedding output) enters it exactly through its rank's
// rows, and the replicated parameters the stream reads (norm weights and
// biases, the row-parallel biases) are read through an mlc.tp_copy, whose
// all-reduce in backward sums their gradients over the ranks' tokens.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PASSES_SEQUENCEPARALLEL_H
#define MLC_PASSES_SEQUENCEPARALLEL_H

#include "dialects/mlc/MlcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlc {

/// Rewrites `fn` (already split by mlc-shard-tensor-parallel: `entries` are
/// the regions' tp_copy ops, `exits` their tp_reduce sum ops) so that the
/// residual stream between the regions is split over the tokens of a
/// tensor-parallel group of `size` ranks. Fails, with the op named, when the
/// stream's tokens do not divide by `size` or a value of the stream reaches
/// an op that would need every token. `rank` returns (creating it if
/// `fn` has none) the "tp_rank" scalars argument.
mlir::LogicalResult
applySequenceParallel(mlir::func::FuncOp fn, int64_t size, llvm::ArrayRef<TpCopyOp> entries,
                      llvm::ArrayRef<TpReduceOp> exits,
                      llvm::function_ref<mlir::Value()> rank);

} // namespace mlc

#endif // MLC_PASSES_SEQUENCEPARALLEL_H
