//===- Pipeline.h - from model to package ----------------------*- C++ -*-===//

#ifndef MLC_COMPILER_PIPELINE_H
#define MLC_COMPILER_PIPELINE_H

#include "compiler/Lowering.h"
#include "frontend/Models.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace mlc {

/// Runs the pipeline on a module holding @forward: an evaluation copy without
/// dropout (@evaluate), autodiff (adds @train_step) when `training`,
/// canonicalization and CSE, then pointwise fusion when `fuse`.
llvm::Error runPipeline(mlir::ModuleOp module, bool training, bool fuse = true);

struct PackageDescription {
  std::string family; // gpt2 | bert | onnx
  std::string configText;
  BuildOptions options;
};

/// Lowers the module and writes the package directory (manifest.json,
/// plan.txt, kernels.cpp, graph.mlir). Returns the lowered package.
llvm::Expected<LoweredPackage> writePackage(mlir::ModuleOp module, const std::string &dir,
                                            const PackageDescription &description);

} // namespace mlc

#endif // MLC_COMPILER_PIPELINE_H
