//===- MlcDialect.h - the mlc graph dialect --------------------*- C++ -*-===//

#ifndef MLC_DIALECTS_MLC_MLCDIALECT_H
#define MLC_DIALECTS_MLC_MLCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/mlc/ScalarEmitter.h"

#include "dialects/mlc/MlcDialect.h.inc"
#include "dialects/mlc/MlcEnums.h.inc"
#include "dialects/mlc/MlcInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/mlc/MlcOps.h.inc"

#endif // MLC_DIALECTS_MLC_MLCDIALECT_H
