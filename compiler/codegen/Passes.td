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

def MlcFold : Pass<"mlc-fold", "mlir::ModuleOp"> {
  let summary = "Folds the graph functions' ops until none folds, and erases what the folds left unread";
  let description = [{
    The first pass of the lowering pipeline. mlc-lower-to-plan is a dialect
    conversion, and MLIR's conversion folds an op before it tries the op's
    pattern; the decisions the passes between record on the graph (a result
    written in its one reader's layout, where each value lives) would then
    be about ops the conversion has changed. This pass folds with the same
    rule (in place, or into existing values or materialized constants),
    round after round until no op folds, then erases the ops no one reads
    any more. mlc-lower-to-plan refuses, on the op, a graph that still
    folds.

    ```mlir
    %r = mlc.reshape %t : tensor<4x3xf32> -> tensor<12xf32>
    %q = mlc.reshape %r : tensor<12xf32> -> tensor<2x6xf32>
    %y = mlc.mul %q, %ones : tensor<2x6xf32>, tensor<2x6xf32>
    // becomes
    %q = mlc.reshape %t : tensor<4x3xf32> -> tensor<2x6xf32>
    // and %y's readers read %q
    ```
  }];
}

def MlcGemmEpilogues : Pass<"mlc-gemm-epilogues", "mlir::ModuleOp"> {
  let summary = "Marks the tanh GELUs that their product's GEMM computes as its epilogue (mlc.gemm_epilogue)";
  let description = [{
    The first pass of the lowering pipeline. A tanh GELU of a matmul's
    product costs no kernel of its own where the GEMM computes it as its
    epilogue: the GEMM stores the product (the pre-activation, which the
    GELU's gradient reads) and the GELU (`plan.gemm ... gelu(%pre)`). This
    pass marks such a GELU `mlc.gemm_epilogue`; mlc-lower-to-plan emits a
    marked GELU with its product's GEMM and refuses, on the GELU, a mark it
    cannot obey (an erf GELU, a product with an accumulator, two marked
    readers of one product, an input that is not a product).

    Marked: the one `mlc.gelu` (tanh) of an f32 or f64 product; under
    `--dtype bf16`, the one pointwise fusion cast-GELU-cast of a bf16
    product that has no `mlc.gelu`. Not marked: an erf GELU; a product that
    two GELUs read (the forward's and its recomputation in backward,
    mlc-recompute: a GPU's epilogue does not round as mlc's GELU kernel
    does, and the recomputed value must be the forward's, bit for bit); a
    product with an accumulator (`acc`), which the epilogue would not see.

    ```mlir
    %h = mlc.matmul %x, %w bias(%b : tensor<3072xf32>) : tensor<8x1024x768xf32>, tensor<768x3072xf32>
    %g = mlc.gelu %h approximate = tanh {mlc.gemm_epilogue} : tensor<8x1024x3072xf32>
    ```
  }];
}

def MlcInPlace : Pass<"mlc-in-place", "mlir::ModuleOp"> {
  let summary = "Marks the loss gradients that overwrite their logits (mlc.in_place) and the results written in their reader's layout (mlc.in_reader_layout)";
  let description = [{
    A pass of the lowering pipeline, after mlc-gemm-epilogues. The kernel
    of a loss and its gradient (a `cross_entropy_grad` marked
    `mlc.with_loss` by mlc-fuse-cross-entropy) reads each row's x[label]
    before it writes the row's gradient, so the gradient can overwrite the
    logits: one logits-sized arena slice less and no second stream through
    memory. This pass marks such a gradient `mlc.in_place` where the logits'
    only readers are the gradient and its loss and they own their bytes
    (produced by a kernel, directly or through reshapes that are their
    input's only reader; not an input, a parameter, a constant or a view),
    and where the gradient is not read only as a bf16 copy (`--dtype bf16`:
    the kernel writes that copy instead). mlc-lower-to-plan obeys the mark
    and refuses, on the gradient, one whose logits it may not overwrite.

    It also marks the results a kernel writes in their one reader's layout,
    `mlc.in_reader_layout = array<i64: ...>` (the result numbers), so that
    the views and concatenations between them cost nothing: an attention's
    (or its gradient's) outputs through transposes that keep the innermost
    dimension, reshapes that need no copy of the layout they are written
    in, and concatenations; a pointwise fusion's result of its iteration's
    shape that a concatenation alone reads (into its slice); a
    concatenation that a transpose keeping the innermost dimension alone
    reads. The lowering refuses, on the op, a marked result whose reader's
    layout cannot hold it.

    ```mlir
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.in_place, mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    ```
  }];
}

def MlcAssignBuffers : Pass<"mlc-assign-buffers", "mlir::ModuleOp"> {
  let summary = "Decides where every result of the graph functions lives (mlc.buffers)";
  let description = [{
    A pass of the lowering pipeline, after mlc-in-place. It records on every
    op of the graph functions (@forward, @evaluate, @train_step and the
    optimizer's) `mlc.buffers = ["...", ...]`, one entry per result:

    - `arena`: an arena slice of its own (placed by mlc-plan-memory);
    - `grad:NAME` (`param:`, `moment1:`, `moment2:`, `grad_sum:`): its
      slice of a flat buffer: a gradient or an optimizer's update that an
      op produces and only the return reads, or the first product of a
      chain of accumulating products that ends in one;
    - `view`: a transpose, reshape, split, slice or tp_copy, a strided view
      of its input (copied only for a reader that needs it contiguous);
    - `accumulator`: a matmul or embedding gradient that adds itself to its
      accumulator's buffer (the accumulator a product only it reads);
    - `reader_layout`: written in its one reader's layout (marked
      `mlc.in_reader_layout` by mlc-in-place);
    - `logits`: a loss gradient over its logits (`mlc.in_place`);
      `bf16_copy`: one read only as a bf16 copy, which its kernel writes;
    - `input`: a tensor-parallel reduce over its partial sums, which
      nothing else reads and which own their arena slice;
    - `constant`, `param_layout` (a `params` fusion's result),
      `flat_buffers` (an optimizer fusion's), `reader_load` (a widening
      its readers convert at the load): no decision of this pass's.

    mlc-lower-to-plan reads the entries and refuses, on the op, one it
    cannot obey (or an op without them). This pass refuses, on the op, an
    `mlc.in_reader_layout` that names a result the op lacks and an
    `mlc.in_place` on an op other than a `cross_entropy_grad`.

    ```mlir
    %p = mlc.matmul %x, %w {mlc.buffers = ["arena"]} : ...
    %t = mlc.transpose %p permutation = [1, 0] {mlc.buffers = ["view"]} : ...
    %g = mlc.matmul %t, %y {mlc.buffers = ["grad:w"]} : ...
    ```
  }];
}

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
    flat gradient buffer (`plan.bind grad`). A tensor-parallel rank's
    `mlc.tp_copy` is a view and its `mlc.tp_reduce` a `plan.tp_all_reduce`
    (in place over partial products nothing else reads). Where each value
    lives is mlc-assign-buffers' decision (`mlc.buffers`, which it needs on
    every op). Arena slices are left unplaced (offset -1) for
    `mlc-plan-memory`.
  }];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

def MlcCudaVectorize : Pass<"mlc-cuda-vectorize", "mlir::ModuleOp"> {
  let summary = "Decides which accesses of each pointwise kernel the CUDA target moves as vectors";
  let description = [{
    On every `plan.kernel` with a body (a pointwise nest of `plan.load`s,
    scalar ops and `plan.store`s): an access is a vector when its element
    is 1, 2, 4 or 8 bytes, it is contiguous along the innermost dimension
    (stride 1), and its offset and outer strides are multiples of the lanes;
    lanes are 16 bytes of the widest such element, halved until they divide
    the innermost extent. Records `vector_lanes` in the kernel's params (1:
    scalar) and `vector` on the loads and stores moved as vectors; a strided
    or broadcast access (stride 0) stays scalar. The CUDA printer only reads
    the decision; the CPU target ignores it.

    ```mlir
    // before
    plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4, 64>} {
      %0 = plan.load arg 1 offset 0 strides [0, 1] : tensor<f32>
      plan.store %0, arg 0 offset 0 strides [64, 1] : tensor<f32>
    }
    // after
    plan.kernel @k0 pointwise args(2) params {dims = array<i64: 4, 64>, vector_lanes = 4 : i64} {
      %0 = plan.load arg 1 offset 0 strides [0, 1] vector : tensor<f32>
      plan.store %0, arg 0 offset 0 strides [64, 1] vector : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

def MlcCudaLaunch : Pass<"mlc-cuda-launch", "mlir::ModuleOp"> {
  let summary = "Decides each kernel's CUDA phases (grid, block) and scratch bytes";
  let description = [{
    On every `plan.kernel` without a schedule: from its template and params
    (a body: its nest, or its flat-buffer segments, and the `vector_lanes`
    of mlc-cuda-vectorize, which runs first), the CUDA target's launch of
    each phase in order and the scratch bytes the phases share, recorded as
    `cuda.launch` (a `[grid, block]` array per phase), `cuda.scratch` and,
    for attention, `cuda.tile` (key rows per shared-memory tile) and, for
    one whose block would exceed CUDA's 48 KB of static shared memory,
    `cuda.refusal` (why, naming the kernel: the CUDA readers of kernels.cu
    fail with it, the CPU runs the kernel).
    CudaLaunch.cpp states the rules. The CUDA printer writes `if (phase ==
    K)` and the kernel's `// mlc.kernel ... launch=GxB,...` line from them;
    the CPU target ignores them. A kernel that carries a schedule is left
    as it is.

    ```mlir
    // before
    plan.kernel @k0 rows #plan.softmax args(2)
        params {columns = 64 : i64, element = f32, rows = 32 : i64}
    // after
    plan.kernel @k0 rows #plan.softmax args(2)
        params {columns = 64 : i64, element = f32, rows = 32 : i64}
        attributes {cuda.launch = [array<i64: 32, 64>], cuda.scratch = 0 : i64}
    ```
  }];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

def MlcPrintKernels : Pass<"mlc-print-kernels", "mlir::ModuleOp"> {
  let summary = "Prints every plan.kernel as the target writes it (kernels.cpp / kernels.cu)";
  let description = [{
    Writes each kernel's function, as the package writer would, to stdout
    (the module itself is unchanged): for tests and for reading one kernel.
    `prelude` writes the target's prelude first.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The kernel target: cpu or cuda">,
    Option<"prelude", "prelude", "bool", /*default=*/"false",
           "Write the target's prelude first">
  ];
}

#endif // MLC_CODEGEN_PASSES_TD
