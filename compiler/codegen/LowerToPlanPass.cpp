//===- LowerToPlanPass.cpp - mlc-lower-to-plan and the lowering pipeline --===//
//
// The pass around the lowering (Lowering.h): each of its errors becomes a
// diagnostic on the op that failed, at that op's location (its ONNX node or
// builtin layer).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Lowering.h"
#include "compiler/codegen/Passes.h"
#include "compiler/codegen/templates/TemplateModel.h"
#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace mlc {
#define GEN_PASS_DEF_MLCLOWERTOPLAN
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;

char mlc::LoweringError::ID = 0;

InFlightDiagnostic mlc::LoweringError::emit() const {
  return op ? op->emitError() : mlir::emitError(*loc);
}

namespace {

class LowerToPlanPass : public mlc::impl::MlcLowerToPlanBase<LowerToPlanPass> {
public:
  /// The plan dialect and its templates' models (templates/).
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    MlcLowerToPlanBase::getDependentDialects(registry);
    mlc::lowering::registerTemplateModels(registry);
  }
  void runOnOperation() final {
    if (auto err = mlc::lowerToPlan(getOperation())) {
      llvm::handleAllErrors(
          std::move(err),
          [](const mlc::LoweringError &e) { e.emit() << "mlc-lower-to-plan: " << e.message; },
          [&](const llvm::ErrorInfoBase &e) { // none should be: on the module
            getOperation().emitError("mlc-lower-to-plan: ") << e.message();
          });
      signalPassFailure();
    }
  }
};

} // namespace

namespace mlc {

void buildLoweringPipeline(OpPassManager &pm, const LoweringPipelineOptions &options) {
  // The graph the conversion will see (it folds before it converts), then
  // the lowering's choices, recorded on the graph ops it reads.
  pm.addPass(createMlcFold());
  pm.addPass(createMlcGemmEpilogues());
  pm.addPass(createMlcInPlace());
  pm.addPass(createMlcAssignBuffers()); // where every value lives
  pm.addPass(createMlcLowerToPlan());
  if (options.ranks > 1 || options.clip == "bucket") {
    MlcBucketGradientsOptions o;
    o.ranks = options.ranks;
    o.capMb = options.capMb;
    o.firstBucketMb = options.firstBucketMb;
    o.clip = options.clip;
    o.distributedOptimizer = options.distributedOptimizer;
    pm.addPass(createMlcBucketGradients(o));
  }
  pm.addPass(createMlcOverlapTpCollectives()); // tensor parallelism only
  pm.addPass(createMlcPlanMemory());
  // The targets' decisions on the kernels' IR.
  pm.addPass(createMlcCudaVectorize());
  pm.addPass(createMlcCudaLaunch());
}

void registerCodegenPasses() {
  registerMlcCodegenPasses();
  PassPipelineRegistration<LoweringPipelineOptions>(
      "mlc-lowering-pipeline",
      "The lowering of `mlc compile`: mlc-fold, mlc-gemm-epilogues, mlc-in-place, mlc-assign-buffers, "
      "mlc-lower-to-plan, "
      "mlc-bucket-gradients (data parallelism or bucket-wise clipping), "
      "mlc-overlap-tp-collectives (tensor parallelism), mlc-plan-memory, mlc-cuda-vectorize, "
      "mlc-cuda-launch",
      buildLoweringPipeline);
}

} // namespace mlc
