//===- mlc-opt.cpp - mlir-opt with the mlc dialects and passes -------------===//
//
// Runs any mlc pass (or upstream pass) on textual MLIR, with mlir-opt's flags:
// --split-input-file, --verify-diagnostics, --mlir-print-ir-after-all, ...
// `--mlc-graph-pipeline --mlc-lowering-pipeline` replays `mlc compile` from a
// frontend's module (`mlc compile --emit=graph`) to the plan.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "dialects/plan/PlanDialect.h"
#include "compiler/codegen/templates/TemplateModel.h"
#include "compiler/codegen/Passes.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlc::registerMlcPasses();
  mlc::registerGraphPipeline();
  mlc::registerCodegenPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlc::MlcDialect, mlc::plan::PlanDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::tensor::TensorDialect>();
  mlc::lowering::registerTemplateModels(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mlc optimizer driver\n", registry));
}
