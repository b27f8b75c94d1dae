//===- PlanTemplates.h - what the template interface speaks in -*- C++ -*-===//
//
// The types TemplateAttrInterface (PlanTemplates.td) takes and returns, and
// the parameter schema with which a template's implementation checks a
// kernel's `params` dictionary (verifyTemplateParams: a missing required
// parameter or one of the wrong kind is an error naming the kernel, the
// template and the parameter).
//
// The code generator's types the interface passes through (the target a
// template prints for, the CUDA schedule it fills) are only declared here:
// the dialect knows no target.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_PLAN_PLANTEMPLATES_H
#define MLC_DIALECTS_PLAN_PLANTEMPLATES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

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

/// What a parameter's attribute is.
enum class ParamKind {
  I64,        // an i64 integer
  F64,        // an f64 float
  Float,      // a float of any width (a literal of the kernel's element type)
  Number,     // an integer or a float (fill's value)
  Type,       // a type (an element type)
  Flag,       // a unit attribute, present when set
  String,     // a string (an enumerator: reduce = "sum", layout = "rows")
  I64Array,   // array<i64: ...>
  BoolArray,  // array<i1: ...>
  TypeArray,  // [f32, ...]
  Nests,      // [{...}, ...]: a copy kernel's nests (dictionaries)
  Elements,   // dense<...> : tensor<...> (a constant's values)
};

struct TemplateParam {
  llvm::StringLiteral name;
  ParamKind kind;
  bool required;
};

/// Whether `value` is of `kind`.
bool isParamKind(mlir::Attribute value, ParamKind kind);
/// The kind's name in a diagnostic ("an i64", "an i64 array", ...).
llvm::StringRef paramKindName(ParamKind kind);

/// Checks template kernel `kernel`'s params against `schema` (the
/// dictionary there, every
/// required parameter present, each present one of its kind), emitting the
/// error on the kernel: "@k3 (template 'softmax'): parameter 'columns' is
/// missing".
mlir::LogicalResult verifyTemplateParams(mlir::Operation *kernel,
                                         llvm::ArrayRef<TemplateParam> schema);

} // namespace mlc::plan

#endif // MLC_DIALECTS_PLAN_PLANTEMPLATES_H
