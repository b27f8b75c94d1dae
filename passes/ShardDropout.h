//===- ShardDropout.h - one process's dropout masks on split values -*- C++ -*-===//
//
// A dropout draws its mask from (seed, step, element index). On a value
// that tensor parallelism splits, a rank holds block r of the whole tensor
// one process would hold, so drawing at its local indices would give masks
// that are not the blocks of one process's mask. mlc-shard-tensor-parallel
// calls shardDropouts after its rewrite: every mlc.dropout of a split value
// and every attention with dropout on split heads gets `block %rank of N`
// (mlc.dropout: `span S`; attention: `along A` of its probabilities), the
// rank being the "tp_rank" scalars argument, so each element draws at the
// whole tensor's index. Dropouts of replicated values are left as they are
// (the same values and the same masks on every rank).
//
// The block marking is generic: any pass that holds block r of N along a
// dim of a tensor (sequence parallelism's token-sharded stream) can mark
// its dropouts with markDropoutBlock.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PASSES_SHARDDROPOUT_H
#define MLC_PASSES_SHARDDROPOUT_H

#include "dialects/mlc/MlcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlc {

/// The "tp_rank" scalars argument of `fn` (tensor<1xf64> {mlc.scalars =
/// "tp_rank"}), appended if it has none.
mlir::Value tpRankArgument(mlir::func::FuncOp fn);

/// Marks `dropout` (whose input's type is already the block's) as block
/// `rank` of `blocks` along dim `axis` of the whole tensor. Fails, naming
/// the op, where a dim from `axis` on is dynamic.
mlir::LogicalResult markDropoutBlock(DropoutOp dropout, mlir::Value rank, int64_t blocks,
                                     int64_t axis);

/// Marks every dropout in `fn` whose input is split (`axis`: each split
/// value's split dim, the types already the rank's) as a block of `size`,
/// and every mlc.attention with dropout whose result is split (its heads),
/// its probabilities' heads dim. (A split value is one block of the whole:
/// the seeds are traced through no dropout, so none sits between a fused
/// projection, whose rank holds a slice of each block, and its split.)
mlir::LogicalResult shardDropouts(mlir::func::FuncOp fn,
                                  const llvm::DenseMap<mlir::Value, int64_t> &axis,
                                  int64_t size);

} // namespace mlc

#endif // MLC_PASSES_SHARDDROPOUT_H
