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

#include <optional>

namespace mlc {

/// An error of the lowering and where it happened: the op that failed, or
/// (a function argument) a location. mlc-lower-to-plan emits it there, so
/// the diagnostic names the op's location: its ONNX node or builtin layer.
class LoweringError : public llvm::ErrorInfo<LoweringError> {
public:
  static char ID;
  LoweringError(mlir::Operation *op, std::string message) : op(op), message(std::move(message)) {}
  LoweringError(mlir::Location loc, std::string message) : loc(loc), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }
  /// The diagnostic, on the op (or at the location).
  mlir::InFlightDiagnostic emit() const;

  mlir::Operation *op = nullptr;
  std::optional<mlir::Location> loc;
  std::string message;
};

/// Lowers @forward (required), @evaluate and @train_step (if present) in
/// place. Parameters are laid out in the order their gradients become ready;
/// arena slices are left unplaced (offset -1) for mlc-plan-memory. Every
/// error is a LoweringError on the op that failed.
llvm::Error lowerToPlan(mlir::ModuleOp module);

} // namespace mlc

#endif // MLC_COMPILER_CODEGEN_LOWERING_H
