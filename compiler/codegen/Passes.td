//===- Passes.td - the code generator's passes -------------*- tablegen -*-===//
//
// The passes that turn the graph into the plan. They live with the code
// generator (compiler/codegen) because they run it; the graph passes
// (passes/Passes.td) know nothing of them.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_CODEGEN_PASSES_TD
#define MLC_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def MlcLowerToPlan : Pass<"mlc-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "Lowers the graph functions to the plan: buffers, views, kernels, GEMMs";
  let description = [{
    Replaces `@forward`, `@evaluate` and `@train_step` by the plan dialect:
    `plan.param` per parameter in the order backward finishes their
    gradients (the flat-buffer layout), `plan.input` per model input, one
    `plan.kernel` per distinct generated kernel, and a `plan.func` per
    function with its buffers and steps. Matmuls become `plan.gemm`; every
    other op (or fusion) a `plan.launch`. Transposes, reshapes, splits and
    slices cost no kernel when their consumers read strided data (a
    `plan.view`); a view that a consumer needs contiguous is copied by a
    `copy` kernel. A gradient an op produces directly is written into the
    flat gradient buffer (`plan.bind grad`). Arena slices are left unplaced
    (offset -1) for `mlc-plan-memory`.
  }];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

#endif // MLC_CODEGEN_PASSES_TD
