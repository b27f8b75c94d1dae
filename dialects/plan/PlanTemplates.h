//===- PlanTemplates.h - what the template interface speaks in -*- C++ -*-===//
//
// The types TemplateAttrInterface (PlanTemplates.td) takes and returns. A
// template's parameters are its attribute's own (ODS-typed), so no schema
// lives here.
//
// The code generator's types the interface passes through (the target a
// template prints for, the CUDA schedule it fills) are only declared here:
// the dialect knows no target.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_PLAN_PLANTEMPLATES_H
#define MLC_DIALECTS_PLAN_PLANTEMPLATES_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace mlc::lowering {
class KernelTarget;   // compiler/codegen/KernelTarget.h
struct CudaSchedule;  // compiler/codegen/KernelTarget.h
} // namespace mlc::lowering

namespace mlc::plan {

/// One launch's traffic and work (--roofline): `bytes` moved, `flops` done;
/// `bf16Products` when they run at the bf16 (tensor-core) rate.
struct TemplateCost {
  double bytes = 0, flops = 0;
  bool bf16Products = false;
};

/// What a cost needs beyond the kernel: the micro-batch's rows and length
/// (the integer input [B, S]; 0 when there is none), which bound a
/// variable-length attention's sequences.
struct CostContext {
  int64_t batchRows = 0, batchLength = 0;
};

} // namespace mlc::plan

#endif // MLC_DIALECTS_PLAN_PLANTEMPLATES_H
