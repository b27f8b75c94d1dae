//===- Passes.h - the code generator's passes and pipeline ------*- C++ -*-===//
//
// `mlc-lower-to-plan` (the lowering of Lowering.h as a pass) and the
// lowering pipeline of `mlc compile`: mlc-gemm-epilogues and mlc-in-place
// (the lowering's choices, marked on the graph ops), mlc-assign-buffers
// (where every value lives, mlc.buffers), lower-to-plan, then, for data
// parallelism, mlc-bucket-gradients, then mlc-plan-memory, then the CUDA
// target's decisions on the kernels (mlc-cuda-vectorize, mlc-cuda-launch;
// the CPU target ignores them, plan.txt holds none). After the graph
// pipeline (passes/Pipelines.h),
//
//   mlc-opt --mlc-graph-pipeline --mlc-lowering-pipeline
//
// prints what `mlc compile --emit=plan` prints.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_PASSES_H
#define MLC_COMPILER_CODEGEN_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlc {

#define GEN_PASS_DECL
#include "compiler/codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/Passes.h.inc"

struct LoweringPipelineOptions : mlir::PassPipelineOptions<LoweringPipelineOptions> {
  Option<int64_t> ranks{*this, "ranks",
                        llvm::cl::desc("Data-parallel ranks the package runs on"),
                        llvm::cl::init(1)};
  Option<double> capMb{*this, "cap-mb", llvm::cl::desc("Gradient bucket size cap in MB"),
                       llvm::cl::init(25.0)};
  Option<double> firstBucketMb{*this, "first-bucket-mb",
                               llvm::cl::desc("Cap of the first gradient bucket in MB"),
                               llvm::cl::init(1.0)};
  Option<std::string> clip{*this, "clip",
                           llvm::cl::desc("Gradient clipping: global, bucket or none"),
                           llvm::cl::init("global")};
  Option<bool> distributedOptimizer{
      *this, "distributed-optimizer",
      llvm::cl::desc("Shard the optimizer over the ranks (ZeRO-1)"), llvm::cl::init(false)};
};

/// The graph functions to the plan: lowered, bucketed for data parallelism
/// (ranks > 1 or clip=bucket), their arenas placed, the CUDA target's
/// vectors and launches decided.
void buildLoweringPipeline(mlir::OpPassManager &pm, const LoweringPipelineOptions &options);

/// Registers the code generator's passes and `mlc-lowering-pipeline` for mlc-opt.
void registerCodegenPasses();

} // namespace mlc

#endif // MLC_COMPILER_CODEGEN_PASSES_H
