//===- TemplateModel.h - implementing a kernel template --------*- C++ -*-===//
//
// Each kernel template (an attribute of dialects/plan/PlanTemplates.td) is
// implemented here, in codegen, as an external model of the plan dialect's
// TemplateAttrInterface: one struct per template, in one file per family
// (Fills.cpp, Rows.cpp, CrossEntropy.cpp, Embedding.cpp, Copies.cpp, Scan.cpp,
// Reduction.cpp, Attention.cpp), holding all that mlc knows of it:
//
//   verifyKernel   what a kernel of it needs beyond its parameters' types
//                  (by default: no `params` dictionary, refuseParams)
//   writesArg      its outputs (by default argument 0)
//   getCost        bytes and FLOPs of a launch (--roofline)
//   scheduleCuda   the CUDA phases, scratch and tile (mlc-cuda-launch); the
//                  CUDA printer's `if (phase == K)` follow these phases
//   print          the call of the target's method (KernelTarget.h)
//
// TemplateModel supplies the name and the defaults; each file's attach
// function (attach<File>Models: Fills.cpp's attachFillsModels) attaches its
// models to their attributes, and registerTemplateModels
// (TemplateModels.cpp) calls every file's, found by CMake: a new file needs
// no other edit.
// docs/design.md "Adding a template" walks through adding one.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_TEMPLATES_TEMPLATEMODEL_H
#define MLC_COMPILER_CODEGEN_TEMPLATES_TEMPLATEMODEL_H

#include "compiler/codegen/CudaSchedule.h"
#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/KernelTarget.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/DialectRegistry.h"

namespace mlc::lowering {

/// The base of a template's model: `Model` the template's struct, `Attr`
/// its attribute (its parameters typed in ODS). `Model` defines the
/// interface's getCost, scheduleCuda and print; it may redefine
/// verifyKernel (calling refuseParams first) and writesArg.
template <typename Model, typename Attr>
struct TemplateModel : plan::TemplateAttrInterface::ExternalModel<Model, Attr> {
  llvm::StringRef getTemplateName(mlir::Attribute) const { return Attr::getMnemonic(); }
  mlir::LogicalResult verifyKernel(mlir::Attribute, mlir::Operation *kernel) const {
    return refuseParams(kernel);
  }
  /// Outputs come first: argument 0.
  bool writesArg(mlir::Attribute, mlir::Operation *, int64_t arg) const { return arg == 0; }

protected:
  /// "@k0 (template 'fill'): ", the start of every error of a kernel's
  /// parameters, on the kernel.
  static mlir::InFlightDiagnostic kernelError(mlir::Operation *kernel) {
    plan::KernelOp k = kernelOf(kernel);
    return k.emitOpError("@") << k.getSymName() << " (template '" << Attr::getMnemonic()
                              << "'): ";
  }
  /// A typed template (its parameters the attribute's own, in ODS) refuses a
  /// `params` dictionary on its kernel.
  static mlir::LogicalResult refuseParams(mlir::Operation *kernel) {
    if (kernelOf(kernel).getParams())
      return kernelError(kernel) << "takes its parameters in #plan." << Attr::getMnemonic()
                                 << "<...>, not in params";
    return mlir::success();
  }
  /// `type`, the parameter `name`, is a float type.
  static mlir::LogicalResult verifyFloat(mlir::Operation *kernel, llvm::StringRef name,
                                         mlir::Type type) {
    if (!llvm::isa<mlir::FloatType>(type))
      return kernelError(kernel) << "parameter '" << name << "' must be a float type, got "
                                 << type;
    return mlir::success();
  }
  /// `value`, the parameter `name`, is >= 0 (`positive`: > 0).
  static mlir::LogicalResult verifyCount(mlir::Operation *kernel, llvm::StringRef name,
                                         int64_t value, bool positive = false) {
    if (value < (positive ? 1 : 0))
      return kernelError(kernel) << "parameter '" << name << "' must be "
                                 << (positive ? "> 0" : ">= 0") << ", got " << value;
    return mlir::success();
  }
  /// A template over rows (Plan_RowParams): `rows` and `rows_per_token`
  /// are >= 0.
  template <typename A> static mlir::LogicalResult verifyRowParams(mlir::Operation *kernel, A a) {
    return mlir::success(mlir::succeeded(verifyCount(kernel, "rows", a.getRows())) &&
                         mlir::succeeded(verifyCount(kernel, "rows_per_token",
                                                     a.getRowsPerToken())));
  }
  static plan::KernelOp kernelOf(mlir::Operation *op) { return llvm::cast<plan::KernelOp>(op); }
};

/// A typed template's row count (Plan_RowParams in PlanTemplates.td: `rows`,
/// at the token capacity when `rows_per_token` is not 0).
template <typename A> Rows rowsOf(A attr) { return Rows{attr.getRows(), attr.getRowsPerToken()}; }

// The CUDA schedule's building blocks (CudaLaunch.cpp states the rules).
/// A grid-stride phase over `work` items, `perThread` a thread.
CudaSchedule::Phase cudaStrided(int64_t work, int64_t perThread = 1);
/// A block per row of C elements.
CudaSchedule::Phase cudaPerRow(const Rows &rows, int64_t C);
/// One block of the grid-stride block size (a sum of partials).
CudaSchedule::Phase cudaOneBlock();
/// The two column-sum phases over R rows of C columns; returns the chunks.
int64_t cudaColumnSums(CudaSchedule &s, int64_t R, int64_t C);

/// The elements an access reaches: the dims it strides along (a stride of
/// 0 reads one element for the whole dimension).
int64_t accessExtent(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> strides);

/// A literal of type `el` (a float attribute's value, or an integer's).
std::string literalOf(mlir::Attribute value, mlir::Type el);

/// Attention's forward FLOPs, 2 B H Sq Sk (D + Dv), before causal halving
/// (a variable-length batch's upper bound: Attention.cpp).
double attentionForwardFlops(const AttentionKernel &a, const plan::CostContext &context);

/// Attaches every template's model to its attribute once the plan dialect
/// loads in a context with `registry`.
void registerTemplateModels(mlir::DialectRegistry &registry);

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_TEMPLATES_TEMPLATEMODEL_H
