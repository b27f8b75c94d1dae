//===- Lowering.h - graph to plan and kernels ------------------*- C++ -*-===//
//
// Lowers the graph-level functions of a module (@forward, @train_step) to the
// package's plan: buffers (flat parameters and gradients, inputs, and one
// liveness-planned arena per function), kernel launches and GEMM calls, and
// the C++ source of every kernel. The plan is the contract with the runtime
// (runtime/core/Package.h reads it); its text form is documented there.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_LOWERING_H
#define MLC_COMPILER_LOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlc {

struct LoweredPackage {
  /// plan.txt: parameters, inputs, then one block per function.
  std::string plan;
  /// kernels.cpp: every distinct kernel once, compiled by the host compiler.
  std::string kernelsCpp;
  /// Counts for reports: kernel launches and GEMM calls per function.
  struct Counts {
    int64_t kernels = 0, gemms = 0;
    /// Bytes every step reads and writes (each buffer it touches, once).
    int64_t bytes = 0;
  };
  std::map<std::string, Counts> counts;
};

/// Lowers @forward (required) and @train_step (if present). Parameters are
/// laid out in the flat buffer in the order their gradients become ready.
llvm::Expected<LoweredPackage> lowerModule(mlir::ModuleOp module);

} // namespace mlc

#endif // MLC_COMPILER_LOWERING_H
