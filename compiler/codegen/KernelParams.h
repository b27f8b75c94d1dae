//===- KernelParams.h - a template kernel's parameters as attributes -*- C++ -*-===//
//
// A kernel with a body (pointwise, a fused row or column kernel) keeps what
// its loop needs beside the body in a `params` dictionary: its iteration
// space (`dims`), its rows, a fused norm's `eps`, a flat
// buffer's `segments`:
//
//   plan.kernel @k3 rows args(3)
//       params {dims = array<i64: 32, 64>, eps = 1.000000e-05 : f64, rows = 32 : i64} { ... }
//
// The lowering writes the dictionary (ParamsBuilder); the printers, the
// CUDA schedule and --roofline read it back (ParamsReader), a missing entry
// an error naming the kernel. A dynamic row count is `rows` (at the token
// capacity) with `rows_per_token`, never text. Template kernels have no
// dictionary: their parameters are their attribute's (PlanTemplates.td);
// AttentionKernel and ReductionKernel convert to and from theirs
// (encode / decode below).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_KERNELPARAMS_H
#define MLC_COMPILER_CODEGEN_KERNELPARAMS_H

#include "compiler/codegen/KernelTarget.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/Error.h"

namespace mlc::plan {
class AttentionTemplateAttr;
} // namespace mlc::plan

namespace mlc::lowering {

/// Writes a kernel's parameters (flags are present only when set).
class ParamsBuilder {
public:
  explicit ParamsBuilder(mlir::MLIRContext *context) : context(context) {}
  ParamsBuilder &type(llvm::StringRef name, mlir::Type t);
  ParamsBuilder &i64(llvm::StringRef name, int64_t v);
  ParamsBuilder &f64(llvm::StringRef name, double v);
  ParamsBuilder &flag(llvm::StringRef name, bool v);
  ParamsBuilder &i64s(llvm::StringRef name, llvm::ArrayRef<int64_t> v);
  ParamsBuilder &attr(llvm::StringRef name, mlir::Attribute a);
  /// `rows`, and `rows_per_token` when the count is dynamic.
  ParamsBuilder &rows(const Rows &r);
  mlir::DictionaryAttr get() const;

private:
  mlir::MLIRContext *context;
  mlir::NamedAttrList list;
};

/// Reads them back; a missing or mistyped parameter is remembered and
/// reported by `error()` (the reader returns a zero value meanwhile).
class ParamsReader {
public:
  ParamsReader(mlir::DictionaryAttr params, llvm::StringRef kernel)
      : params(params), kernel(kernel.str()) {}
  mlir::Type type(llvm::StringRef name);
  int64_t i64(llvm::StringRef name);
  double f64(llvm::StringRef name);
  bool flag(llvm::StringRef name) const;
  bool has(llvm::StringRef name) const;
  Shape i64s(llvm::StringRef name);
  mlir::Attribute attr(llvm::StringRef name);
  Rows rows();
  llvm::Error error();

private:
  void missing(llvm::StringRef name, llvm::StringRef what);
  mlir::DictionaryAttr params;
  std::string kernel, problem;
};

/// An attention kernel's typed template (#plan.attention<...>), and back.
plan::AttentionTemplateAttr encodeAttention(const AttentionKernel &a, mlir::MLIRContext *context);
AttentionKernel decodeAttention(plan::AttentionTemplateAttr attr);
/// A reduction as its template's attribute (#plan.reduction<...>), and back.
plan::ReductionTemplateAttr encodeReduction(const ReductionKernel &k, mlir::MLIRContext *context);
ReductionKernel decodeReduction(plan::ReductionTemplateAttr attr);

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_KERNELPARAMS_H
