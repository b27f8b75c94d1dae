//===- Pipeline.h - from model to package ----------------------*- C++ -*-===//

#ifndef MLC_COMPILER_PIPELINE_H
#define MLC_COMPILER_PIPELINE_H

#include "frontend/Models.h"
#include "support/TensorIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <string>

namespace mlc {

/// Runs the pipeline on a module holding @forward: an evaluation copy without
/// dropout (@evaluate), autodiff (adds @train_step) and the optimizer
/// (@grad_norm, @optimizer) when `training`, canonicalization and CSE, then,
/// when `fuse`, the optimizer's and the pointwise fusions.
/// `autocast` ("bf16") runs the products in that type (mlc-autocast).
/// `recompute` (full, selective) recomputes saved activations in backward
/// (mlc-recompute); under full, only layers 0 to `recomputeNumLayers` - 1
/// when it is not -1. `tensorParallel` > 1 splits the model over a
/// tensor-parallel group of that many ranks (mlc-shard-tensor-parallel,
/// after recognition): the package is one rank's program.
llvm::Error runPipeline(mlir::ModuleOp module, bool training, bool fuse = true,
                        const std::string &autocast = "", const std::string &recompute = "",
                        int64_t recomputeNumLayers = -1, int64_t tensorParallel = 1,
                        bool sequenceParallel = false);

/// The serialized plan of a lowered module: plan.txt, kernels.cpp,
/// kernels.cu, and counts for reports, taken from the plan (per function).
struct LoweredPackage {
  std::string plan, kernelsCpp, kernelsCu;
  struct Counts {
    int64_t kernels = 0, gemms = 0;
    /// Bytes every step reads and writes (each buffer it names, once).
    int64_t bytes = 0;
    /// For reports: the kernels of @optimizer and @grad_norm.
    int64_t optimizerKernels = 0;
  };
  std::map<std::string, Counts> counts;
};

/// Data parallelism: the ranks a package runs on and its gradient buckets
/// (mlc-bucket-gradients; nothing is inserted for one rank).
struct DataParallelOptions {
  int64_t ranks = 1;
  double bucketCapMb = 25, firstBucketMb = 1;
  /// global | bucket | none (bucket: each bucket clipped before its sum).
  std::string clip = "global";
  /// --use-distributed-optimizer: the optimizer sharded over the ranks
  /// (reduce-scatter, sharded update, all-gather; nothing for one rank).
  bool distributedOptimizer = false;
};

/// Runs the lowering pipeline (mlc-gemm-epilogues and mlc-in-place, which
/// record the lowering's fusion and in-place choices in the graph, then
/// mlc-lower-to-plan, mlc-bucket-gradients, mlc-overlap-tp-collectives,
/// mlc-plan-memory and the CUDA schedule passes) on the module, in place:
/// the graph functions become the plan dialect.
llvm::Error lowerToPlanPipeline(mlir::ModuleOp module, const DataParallelOptions &dp = {});
/// Serializes a module in the plan dialect (PlanWriter.cpp).
llvm::Expected<LoweredPackage> serializePlan(mlir::ModuleOp module);
/// Both: the module is consumed.
llvm::Expected<LoweredPackage> lowerModule(mlir::ModuleOp module,
                                           const DataParallelOptions &dp = {});

struct PackageDescription {
  std::string family; // gpt2 | bert | llama | onnx
  std::string configText;
  BuildOptions options;
  /// Initial values of the parameters marked mlc.init = "package" (an
  /// imported model's initializers): written as weights.safetensors.
  std::vector<std::pair<std::string, rt::HostTensor>> weights;
  DataParallelOptions dataParallel;
  /// Whether pointwise chains were fused (--fuse, --no-fuse): the manifest
  /// records it with the other compile flags, which a run of the package
  /// (`mlc train PACKAGE --micro-batch ...`) checks its flags against.
  bool fused = true;
  /// --recompute's mode (none, selective, full), recorded alike.
  std::string recompute = "none";
  int64_t recomputeNumLayers = -1;
  /// Parameter -> its other names (an imported model's tied weights):
  /// written as aliases.json, {"lm_head.weight": ["transformer.wte.weight"]},
  /// when there are any.
  std::map<std::string, std::vector<std::string>> aliases;
  /// A builtin model's Hugging Face config.json (hfConfigJson): written as
  /// hf_config.json, which `--save DIR` copies into the model directory.
  std::string hfConfig;
  /// Called with the lowered plan before anything is written: an error
  /// (a plan over `mlc compile --device-memory`) leaves no package.
  std::function<llvm::Error(mlir::ModuleOp)> checkPlan;
};

/// Lowers the module and writes the package directory (manifest.json,
/// plan.txt, kernels.cpp, graph.mlir, weights.safetensors when the
/// description has weights, aliases.json when it has aliases). Returns the lowered package.
llvm::Expected<LoweredPackage> writePackage(mlir::ModuleOp module, const std::string &dir,
                                            const PackageDescription &description);

} // namespace mlc

#endif // MLC_COMPILER_PIPELINE_H
