//===- PrintKernels.cpp - mlc-print-kernels: a plan's kernels as a target's text ===//
//
// The package writer's printing (KernelPrinter.h) as a pass, so a lit test
// or a reader sees one kernel of a plan in C++ or CUDA C.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelPrinter.h"
#include "compiler/codegen/Passes.h"
#include "compiler/codegen/templates/TemplateModel.h"
#include "dialects/plan/PlanDialect.h"

#include "llvm/Support/raw_ostream.h"

namespace mlc {
#define GEN_PASS_DEF_MLCPRINTKERNELS
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;

namespace {

class PrintKernelsPass : public mlc::impl::MlcPrintKernelsBase<PrintKernelsPass> {
public:
  /// The plan dialect and its templates' models (templates/).
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    MlcPrintKernelsBase::getDependentDialects(registry);
    mlc::lowering::registerTemplateModels(registry);
  }
  using MlcPrintKernelsBase::MlcPrintKernelsBase;
  void runOnOperation() final {
    ModuleOp module = getOperation();
    int64_t capacity = 0;
    if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
      capacity = cap.getInt();
    std::unique_ptr<mlc::lowering::KernelTarget> t;
    if (target == "cpu")
      t = mlc::lowering::createCpuTarget(capacity);
    else if (target == "cuda")
      t = mlc::lowering::createCudaTarget(capacity);
    else {
      module.emitError("mlc-print-kernels: unknown target '") << target << "' (cpu or cuda)";
      return signalPassFailure();
    }
    if (prelude)
      llvm::outs() << t->prelude();
    for (auto k : module.getOps<mlc::plan::KernelOp>()) {
      auto text = mlc::lowering::printKernel(k, *t);
      if (!text) {
        k.emitError(llvm::toString(text.takeError()));
        return signalPassFailure();
      }
      llvm::outs() << *text;
    }
  }
};

} // namespace
