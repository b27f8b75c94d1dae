//===- TensorParallel.h - one rank's slice of a tensor-parallel model -*- C++ -*-===//
//
// A package compiled with --tensor-parallel T is the program of one rank of
// a group of T (mlc-shard-tensor-parallel): its column- and row-parallel
// projections hold a slice of the HF tensor (ParamInfo::tpDim, tpBlocks),
// everything else the whole tensor. What crosses the runtime's edges stays
// whole and HF-named: weights are initialized, loaded and saved as the full
// tensors one process would hold, and each rank takes or gives its slice
// here. Rank r of the group holds, along dim tpDim, the r-th of T equal
// slices of each block (GPT-2's c_attn is three blocks: Q, K, V).
//
// `mpirun -np R` with R = T x D: the tensor-parallel groups are T
// consecutive ranks (world rank w is rank w % T of group w / T), the
// data-parallel groups the ranks with the same w % T.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_TENSORPARALLEL_H
#define MLC_RUNTIME_TRAIN_TENSORPARALLEL_H

#include "runtime/backend/Backend.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlc::rt {

/// The two groups of this rank of a run of `world` ranks split into
/// tensor-parallel groups of `t` (collective over the world). An Error,
/// naming both numbers, when the world's size is not a multiple of t.
struct ParallelGroups {
  std::shared_ptr<Communicator> tensor, data;
};
ParallelGroups splitWorld(Communicator &world, int64_t t);

/// The HF shape of parameter `p` of a package whose tensor-parallel group
/// has `t` ranks (p.shape itself when p is not split).
std::vector<int64_t> wholeShape(const ParamInfo &p, int64_t t);

/// The runs of a split parameter p's whole tensor (wholeShape(p, t), of
/// `es`-byte elements), in the whole's order: each is consecutive bytes of
/// the whole and of one rank's slice. Along dim tpDim the whole is block
/// after block, each block the ranks' parts in rank order; a rank's part of
/// a block is `block / t` consecutive rows of its slice. `run` gets the
/// rank, the run's byte offsets in the whole and in that rank's slice, and
/// its bytes.
void forEachSliceRun(const ParamInfo &p, int64_t t, int64_t es,
                     const std::function<void(int rank, int64_t whole, int64_t slice,
                                              int64_t bytes)> &run);

/// Rank `rank`'s slice of `whole` (an HF tensor of wholeShape(p, t), any
/// dtype) for parameter p.
HostTensor sliceOfWhole(const HostTensor &whole, const ParamInfo &p, int rank, int64_t t);

/// Gives a vocabulary-parallel package its rank in the tensor-parallel
/// group: the step's scalars "tp_rank" (mlc-shard-tensor-parallel's lookups
/// and loss read their vocabulary offset from it). Other packages have none.
void setTensorParallelRank(Backend &backend);

/// The global gradient norm from @grad_norm's `localNorm`, the norm of this
/// rank's gradient buffer (under the distributed optimizer: of its shards,
/// summed over the data-parallel group): every split parameter's slices
/// counted once over the group, every replicated parameter once (collective
/// over the group, and over the data-parallel group when sharded).
double tensorParallelGradNorm(Backend &backend, double localNorm);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_TENSORPARALLEL_H
