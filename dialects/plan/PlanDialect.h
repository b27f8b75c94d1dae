//===- PlanDialect.h - the plan dialect ------------------------*- C++ -*-===//

#ifndef MLC_DIALECTS_PLAN_PLANDIALECT_H
#define MLC_DIALECTS_PLAN_PLANDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"

#include "dialects/plan/PlanTemplates.h"

#include "dialects/plan/PlanDialect.h.inc"
#include "dialects/plan/PlanEnums.h.inc"
#include "dialects/plan/PlanTemplateInterface.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanTemplates.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

#include "llvm/ADT/DenseMap.h"

namespace mlc::plan {

/// A kernel's CUDA schedule (mlc-cuda-launch): `cuda.launch` a [grid,
/// block] array<i64> per phase, `cuda.scratch` the scratch bytes (i64),
/// `cuda.tile` attention's key rows per shared tile (i64). KernelOp's
/// verifier checks their form.
inline constexpr llvm::StringLiteral kCudaLaunch = "cuda.launch";
inline constexpr llvm::StringLiteral kCudaScratch = "cuda.scratch";
inline constexpr llvm::StringLiteral kCudaTile = "cuda.tile";

/// Whether `op` declares a buffer (plan.bind, plan.arena, plan.view): it
/// runs nothing, unlike a function's steps.
inline bool isBufferDecl(mlir::Operation &op) { return mlir::isa<BindOp, ArenaOp, ViewOp>(op); }

/// Bytes of a plan buffer (elements x element size; i1 is one byte).
int64_t bufferBytes(mlir::Value buffer);
/// Bytes of one element of `type` as the runtime stores it.
int64_t elementBytes(mlir::Type type);
/// The runtime's name of an element type (f32, f64, i64, i32, i1), or "".
std::string dtypeName(mlir::Type type);

/// The arena buffer (plan.arena) a buffer is a view of, and its byte offset
/// into it; {null, 0} for buffers bound to parameters, gradients or inputs.
std::pair<ArenaOp, int64_t> arenaRoot(mlir::Value buffer);

/// Whether kernel `k` writes its argument `arg`: a body's plan.store,
/// plan.normalize or plan.accumulate into it, or one of its template's
/// outputs (TemplateAttrInterface::writesArg).
bool kernelWritesArg(KernelOp k, int64_t arg);

/// Live ranges of a function's arena buffers: the first and last step (the
/// index of a plan.launch or plan.gemm in execution order) that reads or
/// writes the buffer or a view of it; a buffer a plan.output returns stays
/// live past the last step.
struct LiveRange {
  int first = -1, last = -1;
  bool overlaps(const LiveRange &o) const { return first <= o.last && o.first <= last; }
};
llvm::DenseMap<mlir::Operation *, LiveRange> liveRanges(FuncOp fn);

} // namespace mlc::plan

#endif // MLC_DIALECTS_PLAN_PLANDIALECT_H
