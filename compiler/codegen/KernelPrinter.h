//===- KernelPrinter.h - plan.kernel ops to a target's source ---*- C++ -*-===//
//
// Kernels stay in the plan as IR (a template and its parameters,
// KernelParams.h) until the package is written; then each one becomes a
// function of kernels.cpp or kernels.cu here, through its template's model
// (compiler/codegen/templates/), or from its body (pointwise nests, fusions, the optimizer).
// The CUDA target prints from the schedule mlc-cuda-launch recorded.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_KERNELPRINTER_H
#define MLC_COMPILER_CODEGEN_KERNELPRINTER_H

#include "compiler/codegen/KernelTarget.h"
#include "dialects/plan/PlanDialect.h"

#include "llvm/Support/Error.h"

namespace mlc::lowering {

/// The kernel as one function of the target's source file.
llvm::Expected<std::string> printKernel(plan::KernelOp kernel, KernelTarget &target);

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_KERNELPRINTER_H
