//===- PlanTemplates.h - the kernel templates and their params --*- C++ -*-===//
//
// The one list of the templates a `plan.kernel` may name, each with the
// parameters its `params` dictionary carries and their kinds. The kernel
// verifier checks a template kernel against it (an unknown template, a
// missing required parameter or one of the wrong kind is an error naming
// the kernel, the template and the parameter); the printers and
// mlc-cuda-launch read params knowing they are there.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_PLAN_PLANTEMPLATES_H
#define MLC_DIALECTS_PLAN_PLANTEMPLATES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mlc::plan {

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

struct TemplateSchema {
  llvm::StringLiteral name;
  llvm::ArrayRef<TemplateParam> params;
};

/// Every template, in one table.
llvm::ArrayRef<TemplateSchema> templateSchemas();
/// The schema of template `name`, or null when there is none.
const TemplateSchema *templateSchema(llvm::StringRef name);
/// Whether `value` is of `kind`.
bool isParamKind(mlir::Attribute value, ParamKind kind);
/// The kind's name in a diagnostic ("an i64", "an i64 array", ...).
llvm::StringRef paramKindName(ParamKind kind);
/// Whether a kernel of template `name` with `params` writes its argument
/// `arg`. Outputs come first: every template writes argument 0;
/// layer_norm_grad also dw and db (not an RMSNorm's: it has none),
/// cross_entropy_with_grad the gradient; attention marks each argument
/// (`arg_written`).
bool templateWritesArg(llvm::StringRef name, mlir::DictionaryAttr params, int64_t arg);

} // namespace mlc::plan

#endif // MLC_DIALECTS_PLAN_PLANTEMPLATES_H
