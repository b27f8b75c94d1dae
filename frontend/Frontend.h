//===- Frontend.h - what every frontend hands the compiler -----*- C++ -*-===//
//
// A frontend (the builtin GPT-2/BERT builders in Models.h; an ONNX importer
// in frontend/onnx/) produces a module holding
//
//   func.func @forward(%p...: tensor<...> {mlc.param = "<name>"[, mlc.init = "<init>"]},
//                      %x...: tensor<...> {mlc.input = "<name>"})
//       -> (tensor<f32> {mlc.output = "loss"}, tensor<...> {mlc.output = "<name>"}...)
//
// in the mlc dialect: parameters and inputs in any order, each named once;
// parameters are statically shaped float tensors (their names are the
// weights' names in safetensors files); `mlc.init` is `normal:STD`, `zeros`,
// `ones` (default: normal:0.02 for matrices, zeros otherwise) or `package`
// (values the frontend hands over, stored in the package); training
// needs a scalar float result named "loss". A leading dynamic dimension
// (`?`) is the token count, sized by the module's `mlc.token_capacity`.
// The pipeline (compiler/Pipeline.cpp) checks this contract first, so a
// frontend's mistake is reported by name rather than deep in a pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_FRONTEND_H
#define MLC_FRONTEND_FRONTEND_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace mlc {

/// Checks the contract above; `training` also requires the loss (or
/// `mlc.infer_loss` on @forward: mlc-infer-loss then builds it).
llvm::Error verifyFrontendModule(mlir::ModuleOp module, bool training);

} // namespace mlc

#endif // MLC_FRONTEND_FRONTEND_H
