//===- Pipelines.h - the graph passes of `mlc compile`, in order -*- C++ -*-===//
//
// What `mlc compile` runs between a frontend's @forward and the lowering,
// as one pass pipeline, so that `mlc-opt --mlc-graph-pipeline` replays it:
//
//   mlc compile gpt2 --emit=graph | mlc-opt --mlc-graph-pipeline
//
// prints what `mlc compile gpt2 --emit=mlir` prints. The lowering's pipeline
// (compiler/codegen/Passes.h) continues from there to the plan.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PASSES_PIPELINES_H
#define MLC_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlc {

struct GraphPipelineOptions : mlir::PassPipelineOptions<GraphPipelineOptions> {
  Option<bool> training{*this, "training",
                        llvm::cl::desc("Build @train_step (mlc-autodiff), @grad_norm and "
                                       "@optimizer (mlc-optimizer)"),
                        llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Read rotaries inside attention (mlc-fold-rotary), fuse "
                                   "sums of products (mlc-accumulate-gemms), pointwise ops "
                                   "(mlc-fuse-elementwise) and the "
                                   "optimizer (mlc-optimizer{fuse})"),
                    llvm::cl::init(true)};
  Option<std::string> autocast{*this, "autocast",
                               llvm::cl::desc("bf16: matrix products in bf16 (mlc-autocast); "
                                              "empty: every op in the graph's type"),
                               llvm::cl::init("")};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("full | selective: forward values recomputed in backward instead of "
                     "kept (mlc-recompute, after autodiff, canonicalization and CSE, before "
                     "the fusions); empty or none: every saved value is kept"),
      llvm::cl::init("")};
  Option<int64_t> tensorParallel{
      *this, "tensor-parallel",
      llvm::cl::desc("Ranks of a tensor-parallel group: > 1 splits heads and MLP units over "
                     "them (mlc-shard-tensor-parallel, after recognition)"),
      llvm::cl::init(1)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("With tensor-parallel > 1: the residual stream between the regions on "
                     "each rank's 1/T of the tokens (mlc-shard-tensor-parallel's "
                     "sequence-parallel)"),
      llvm::cl::init(false)};
  Option<int64_t> recomputeNumLayers{
      *this, "recompute-num-layers",
      llvm::cl::desc("recompute=full: only layers 0 to N-1 (-1: all)"), llvm::cl::init(-1)};
};

/// Recognition of decomposed blocks, autocast, @evaluate, autodiff and the
/// optimizer, canonicalization and CSE, recomputation, then the fusions.
void buildGraphPipeline(mlir::OpPassManager &pm, const GraphPipelineOptions &options);

/// Registers `mlc-graph-pipeline` for mlc-opt.
void registerGraphPipeline();

} // namespace mlc

#endif // MLC_PASSES_PIPELINES_H
