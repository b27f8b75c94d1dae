//===- Model.h - MODEL as a graph and through the pipeline -----*- C++ -*-===//
//
// What compile, import, train, run and generate share: MODEL (a builtin
// name with --config, or an ONNX file) built into its forward graph under
// the shared flags (Tool.h), and that graph through the graph pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_TOOLS_MODEL_H
#define MLC_COMPILER_TOOLS_MODEL_H

#include "compiler/Pipeline.h"

#include "mlir/IR/MLIRContext.h"

#include <optional>

namespace mlc::tool {

/// MODEL's forward graph (the builtin builder or the ONNX importer) and what
/// the package manifest says about it.
struct Graph {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlc::PackageDescription description;
};

/// Builds MODEL's graph. `layers` > 0 overrides a builtin model's layer
/// count (for reports).
llvm::Expected<Graph> buildGraph(mlir::MLIRContext &ctx, int64_t layers = 0);

/// Builds MODEL's graph and runs the pipeline (training: the step, the
/// optimizer); `fused` overrides --fuse/--no-fuse.
llvm::Expected<Graph> compileModel(mlir::MLIRContext &ctx, bool training, int64_t layers = 0,
                                   std::optional<bool> fused = std::nullopt);

} // namespace mlc::tool

#endif // MLC_COMPILER_TOOLS_MODEL_H
