//===- Passes.h - the passes of mlc ----------------------------*- C++ -*-===//

#ifndef MLC_PASSES_PASSES_H
#define MLC_PASSES_PASSES_H

#include "contract/StepFunctions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlc

#endif // MLC_PASSES_PASSES_H
