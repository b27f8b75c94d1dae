//===- EvalMode.cpp - an inference copy of the forward graph ---------------===//

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCEVALMODE
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

class EvalModePass : public mlc::impl::MlcEvalModeBase<EvalModePass> {
public:
  void runOnOperation() final {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(mlc::kForwardFn);
    if (!forward) {
      module.emitError("mlc-eval-mode: no function @forward");
      return signalPassFailure();
    }
    if (module.lookupSymbol(mlc::kEvaluateFn))
      return; // already there
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto eval = cast<func::FuncOp>(b.clone(*forward));
    eval.setSymName(mlc::kEvaluateFn);
    eval.walk([&](Operation *op) {
      if (auto d = dyn_cast<DropoutOp>(op)) {
        d.replaceAllUsesWith(d.getInput());
        d.erase();
      } else if (auto a = dyn_cast<AttentionOp>(op)) {
        a.setDropoutAttr(b.getF64FloatAttr(0.0));
        a.setSeedAttr(b.getI64IntegerAttr(0));
      }
    });
  }
};

} // namespace
