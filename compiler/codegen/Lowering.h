//===- Lowering.h - graph functions to the plan dialect --------*- C++ -*-===//
//
// The work of `mlc-lower-to-plan`: every graph op of @forward, @evaluate and
// @train_step becomes a plan step (a GEMM, or the launch of a generated
// kernel kept as IR: a template's parameters or a body of scalar ops), every value a buffer
// (a flat parameter or gradient slice, an input, an arena slice or a strided
// view that costs no copy). The graph functions are replaced by the plan.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_LOWERING_H
#define MLC_COMPILER_CODEGEN_LOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace mlc {

/// Lowers @forward (required), @evaluate and @train_step (if present) in
/// place. Parameters are laid out in the order their gradients become ready;
/// arena slices are left unplaced (offset -1) for mlc-plan-memory.
llvm::Error lowerToPlan(mlir::ModuleOp module);

} // namespace mlc

#endif // MLC_COMPILER_CODEGEN_LOWERING_H
