//===- PlanTemplateInterface.td - what mlc asks of a template -*- tablegen -*-===//
//
// The interface every kernel template (PlanTemplates.td) implements; the
// code generator's models implement it (compiler/codegen/templates/).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PLAN_TEMPLATE_INTERFACE_TD
#define MLC_PLAN_TEMPLATE_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Plan_TemplateAttrInterface : AttrInterface<"TemplateAttrInterface"> {
  let cppNamespace = "::mlc::plan";
  let description = [{
    What a kernel template is to mlc. `kernel` is always the plan.kernel
    carrying the template (its symbol names the kernel in diagnostics, its
    `params` are the template's parameters). The code generator implements
    every method (compiler/codegen/templates/TemplateModel.h).
  }];
  let methods = [
    InterfaceMethod<"The template's name (diagnostics and profiles only).",
      "::llvm::StringRef", "getTemplateName">,
    InterfaceMethod<[{
        Checks the kernel's params against the template (each required
        parameter there and of its kind) and what else the template needs;
        errors are emitted on the kernel and name it and the parameter.
      }],
      "::mlir::LogicalResult", "verifyKernel", (ins "::mlir::Operation *":$kernel)>,
    InterfaceMethod<"Whether a kernel of this template writes its argument `arg`.",
      "bool", "writesArg", (ins "::mlir::Operation *":$kernel, "int64_t":$arg)>,
    InterfaceMethod<[{
        The bytes one launch moves and the FLOPs it does, from the params
        (--roofline).
      }],
      "::llvm::Expected<::mlc::plan::TemplateCost>", "getCost",
      (ins "::mlir::Operation *":$kernel, "const ::mlc::plan::CostContext &":$context)>,
    InterfaceMethod<[{
        The CUDA target's schedule of the kernel: its phases (a grid and
        block each), scratch bytes and tile (mlc-cuda-launch records it).
      }],
      "::llvm::Error", "scheduleCuda",
      (ins "::mlir::Operation *":$kernel, "::mlc::lowering::CudaSchedule &":$schedule)>,
    InterfaceMethod<[{
        The kernel's body in `target`'s language: the call of the target's
        method of this template (or the template's own text over the
        target's loops).
      }],
      "::llvm::Expected<std::string>", "print",
      (ins "::mlir::Operation *":$kernel, "::mlc::lowering::KernelTarget &":$target)>,
  ];
}

#endif // MLC_PLAN_TEMPLATE_INTERFACE_TD
