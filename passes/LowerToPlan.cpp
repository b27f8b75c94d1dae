//===- LowerToPlan.cpp - the mlc-lower-to-plan pass -------------------------===//
//
// The pass around compiler/codegen's lowering (Lowering.h): errors become
// diagnostics on the module.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Lowering.h"
#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

namespace mlc {
#define GEN_PASS_DEF_MLCLOWERTOPLAN
#include "passes/Passes.h.inc"
} // namespace mlc

namespace {

class LowerToPlanPass : public mlc::impl::MlcLowerToPlanBase<LowerToPlanPass> {
public:
  void runOnOperation() final {
    if (auto err = mlc::lowerToPlan(getOperation())) {
      getOperation().emitError("mlc-lower-to-plan: ") << llvm::toString(std::move(err));
      signalPassFailure();
    }
  }
};

} // namespace
