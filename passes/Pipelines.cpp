//===- Pipelines.cpp - the graph passes of `mlc compile`, in order --------===//

#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace mlc {

void buildGraphPipeline(OpPassManager &pm, const GraphPipelineOptions &options) {
  // Imported graphs: constants deduplicated, then their decomposed blocks
  // recognized (builtin graphs have none).
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createMlcRecognize());
  // A logits-only import's loss, from the attention just recognized; then
  // recognition again, for the loss's own patterns (the shifted
  // next-token loss). It finds nothing new in any other graph.
  pm.addPass(createMlcInferLoss());
  pm.addNestedPass<func::FuncOp>(createMlcRecognize());
  // One tensor-parallel rank's program, from the recognized graph and
  // before autodiff, which places the backward collectives.
  if (options.tensorParallel > 1) {
    MlcShardTensorParallelOptions o;
    o.size = options.tensorParallel;
    o.sequenceParallel = options.sequenceParallel;
    pm.addPass(createMlcShardTensorParallel(o));
  }
  if (!options.autocast.empty()) {
    MlcAutocastOptions o;
    o.dtype = options.autocast;
    pm.addPass(createMlcAutocast(o));
  }
  pm.addPass(createMlcEvalMode());
  if (options.training) {
    pm.addPass(createMlcAutodiff());
    MlcOptimizerOptions o;
    o.fuse = options.fuse;
    pm.addPass(createMlcOptimizer(o));
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After CSE, which would merge the clones back into the forward ops;
  // before the fusions, which fuse the clones with their backward readers.
  // Under --sequence-parallel it also gathers the regions' inputs again in
  // backward, so that each rank keeps only its tokens' rows.
  bool regather = options.tensorParallel > 1 && options.sequenceParallel;
  if (options.training && (!options.recompute.empty() || regather)) {
    MlcRecomputeOptions o;
    o.mode = options.recompute;
    o.numLayers = options.recomputeNumLayers;
    o.regather = regather;
    pm.addPass(createMlcRecompute(o));
  }
  if (options.fuse) {
    pm.addNestedPass<func::FuncOp>(createMlcFoldRotary());
    pm.addNestedPass<func::FuncOp>(createMlcAccumulateGemms());
    pm.addNestedPass<func::FuncOp>(createMlcFoldCasts());
    pm.addNestedPass<func::FuncOp>(createMlcFuseElementwise());
  }
  // Last, fused or not: the loss and its gradient in one kernel.
  pm.addNestedPass<func::FuncOp>(createMlcFuseCrossEntropy());
}

void registerGraphPipeline() {
  PassPipelineRegistration<GraphPipelineOptions>(
      "mlc-graph-pipeline",
      "The graph passes of `mlc compile`: recognition, with tensor-parallel=T > 1 "
      "mlc-shard-tensor-parallel, autocast, @evaluate, autodiff, the "
      "optimizer, canonicalization; with recompute=full|selective mlc-recompute; with fuse=true mlc-fold-rotary (rotary inside "
      "attention), mlc-accumulate-gemms (sums of products in the GEMMs), "
      "mlc-fold-casts (bf16 casts at loads and stores) and mlc-fuse-elementwise; "
      "then mlc-fuse-cross-entropy (a loss and its gradient in one kernel)",
      buildGraphPipeline);
}

} // namespace mlc
