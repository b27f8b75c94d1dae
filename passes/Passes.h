//===- Passes.h - the passes of mlc ----------------------------*- C++ -*-===//

#ifndef MLC_PASSES_PASSES_H
#define MLC_PASSES_PASSES_H

#include "contract/StepFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlc {

/// The layer a parameter's name names: its first all-digit component
/// (`transformer.h.3.attn.c_attn.weight` -> 3), or -1. mlc-recompute cuts
/// layers by it, and the memory report attributes saved bytes by it.
int64_t layerOfParameterName(llvm::StringRef name);

/// The unit attribute mlc-recompute puts on the ops it clones into
/// backward: a fusion must not move them back before the loss.
inline constexpr llvm::StringLiteral kRecomputedAttr = "mlc.recomputed";

/// The unit attribute mlc-fuse-cross-entropy puts on a cross_entropy_grad
/// that its loss's kernel computes (the lowering emits none of its own).
inline constexpr llvm::StringLiteral kWithLossAttr = "mlc.with_loss";

/// The index of @fn's result marked `mlc.output = "loss"`, else 0.
unsigned lossResultIndex(mlir::func::FuncOp fn);

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlc

#endif // MLC_PASSES_PASSES_H
