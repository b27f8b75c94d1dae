//===- Passes.td - the passes of mlc -----------------------*- tablegen -*-===//

#ifndef MLC_PASSES_TD
#define MLC_PASSES_TD

include "mlir/Pass/PassBase.td"

def MlcAutodiff : Pass<"mlc-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation: builds the training step's gradients";
  let description = [{
    Clones `@forward` into `@train_step`, which returns the loss and then the
    gradient of every parameter (arguments marked `mlc.param`), each result
    marked `mlc.grad = "<parameter name>"`. The backward ops come from each
    op's GradientOpInterface rule, emitted in reverse order after the forward
    ops; a value used more than once (a tied embedding) sums its adjoints.
    Only ops between the parameters and the loss are differentiated. An op
    on that path without a rule is an error that names it. `@forward` stays
    as it is (inference, `mlc run`).

    Before:
    ```mlir
    func.func @forward(%w: tensor<4x3xf32> {mlc.param = "w"},
                       %x: tensor<2x4xf32> {mlc.input = "x"})
        -> (tensor<f32> {mlc.output = "loss"}) {
      %y = mlc.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32>
      %l = mlc.reduce_sum %y axes = [0, 1] : tensor<2x3xf32>
      return %l : tensor<f32>
    }
    ```
    After (besides `@forward`):
    ```mlir
    func.func @train_step(%w: ..., %x: ...)
        -> (tensor<f32> {mlc.output = "loss"}, tensor<4x3xf32> {mlc.grad = "w"}) {
      %y = mlc.matmul %x, %w : ...
      %l = mlc.reduce_sum %y axes = [0, 1] : ...
      %one = mlc.constant dense<1.0> : tensor<f32>
      %g = mlc.broadcast ... %one ... -> tensor<2x3xf32>
      %dw = mlc.matmul %x, %g transpose_lhs : ...
      return %l, %dw : tensor<f32>, tensor<4x3xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"forwardName", "forward", "std::string", "::mlc::kForwardFn",
           "The function to differentiate">,
    Option<"stepName", "step", "std::string", "::mlc::kTrainStepFn",
           "The function to create">
  ];
}

def MlcShardTensorParallel : Pass<"mlc-shard-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Splits attention heads and MLP units over a tensor-parallel group (Megatron's layout)";
  let description = [{
    Runs on the recognized `@forward`, before mlc-autodiff, and rewrites it
    into the program each of `size` ranks runs. Q/K/V and the MLP's up/gate
    projections become column-parallel (their weights and biases keep
    1/size of the output units: heads per rank = heads / size, KV heads
    too), the attention output and MLP down projections row-parallel (1/size
    of the input units). `mlc.tp_copy` (identity forward, all-reduce
    backward) enters each parallel region; `mlc.tp_reduce sum` sums each
    row-parallel product over the group, and its bias is added after it,
    once. The token embedding, the LM head and the cross-entropy are
    vocabulary-parallel (`vocab-parallel=true`, the default, as in
    Megatron): each rank holds V/size rows of the vocabulary; the lookup
    zeroes the ids it does not hold and an `mlc.tp_reduce sum` joins the
    ranks' rows; the head is column-parallel over the vocabulary and the
    loss joins the row maxima (`tp_reduce max`), the exp-sums and the
    target logit (`tp_reduce sum`) without gathering the logits. The rank
    is the step's scalars "tp_rank" (an argument the pass adds). Norms and
    the position and token-type embeddings stay replicated. Each
    split parameter gets `mlc.tp_split = {dim, blocks}` (which dim of its
    HF tensor is split, and the blocks each cut into `size` slices: Q, K
    and V of a fused c_attn), so a writer can gather full tensors. The
    module gets `mlc.tensor_parallel = size`.

    What cannot be split exactly is refused with the config key or op:
    heads or KV heads not divisible by `size`, an MLP width not divisible,
    a parameter read both split and whole (a tied projection inside a
    region), a split value reaching an op that would need it whole, a
    vocabulary not divisible by `size` (with the padded size that would be).
    `size=1` leaves the module unchanged.

    With `sequence-parallel=true` (Megatron's `--sequence-parallel`, size
    > 1) the residual stream between the regions runs on each rank's
    contiguous block of `tokens / size` rows (SequenceParallel.h): each
    region's `tp_copy` becomes `mlc.tp_all_gather` over the rows, its
    `tp_reduce sum` `mlc.tp_reduce_scatter`, replicated parameters read in
    the stream go through a `tp_copy` (their gradients summed over the
    group), and the module gets `mlc.sequence_parallel`. Tokens that
    `size` does not divide, and a stream value read by anything but the
    stream and the regions, are refused.

    Before (one head pair shown, size=2):
    ```mlir
    %q = mlc.matmul %x, %wq transpose_rhs : tensor<2x8x64xf32>, tensor<64x64xf32>
    ...
    %o = mlc.matmul %a, %wo transpose_rhs : tensor<2x8x64xf32>, tensor<64x64xf32>
    ```
    After:
    ```mlir
    %x1 = mlc.tp_copy %x : tensor<2x8x64xf32>
    %q = mlc.matmul %x1, %wq transpose_rhs : tensor<2x8x64xf32>, tensor<32x64xf32>
    ...
    %p = mlc.matmul %a, %wo transpose_rhs : tensor<2x8x32xf32>, tensor<64x32xf32>
    %o = mlc.tp_reduce sum %p : tensor<2x8x64xf32>
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"size", "size", "int64_t", "1",
           "Ranks of the tensor-parallel group (Megatron's --tensor-model-parallel-size)">,
    Option<"forwardName", "forward", "std::string", "::mlc::kForwardFn",
           "The function to shard">,
    Option<"vocabParallel", "vocab-parallel", "bool", "true",
           "Split the token embedding, the LM head and the cross-entropy over the "
           "vocabulary (Megatron's VocabParallelEmbedding and vocab_parallel_cross_entropy); "
           "false keeps them replicated">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Megatron's --sequence-parallel: the residual stream between the regions "
           "(its norms, dropout, residual adds) runs on each rank's 1/size of the tokens; "
           "the regions' entries become mlc.tp_all_gather and their exits "
           "mlc.tp_reduce_scatter over the flattened token rows">
  ];
}

def MlcRecompute : Pass<"mlc-recompute", "mlir::ModuleOp"> {
  let summary = "Recomputes chosen forward values in backward instead of keeping them";
  let description = [{
    Activation recomputation (Megatron-LM's `--recompute-granularity`) on
    `@train_step` after mlc-autodiff and before the fusions. The forward
    ops are those up to the loss's op (mlc-autodiff emits backward after
    them); a forward value read by a backward op is *saved*: it lives from
    forward to backward. For each saved value the pass chooses, it clones
    the forward ops that compute it into backward, right before its first
    backward reader, and every backward reader reads the clone. The forward
    value then dies in forward; the clones die right after their readers,
    and mlc-fuse-elementwise fuses them with their backward neighbours like
    any op (a recomputed GELU joins the kernel that reads it).

    Ops belong to layers by their parameters' names, as the memory report
    attributes them: the first all-digit component (`transformer.h.3.mlp`,
    `model.layers.3.self_attn`, `bert.encoder.layer.3.output`). An op that
    reads parameters belongs to the highest layer they name (-1 when they
    name none: embeddings, final norm, head); one that reads none, to the
    highest layer of its operands.

    - `mode=full`: each layer keeps only its inputs (the residual stream
      entering it, the parameters and what is computed outside the
      layers); every other value of the layer that backward reads is
      recomputed in backward, GEMMs and attention included (Megatron's full
      recomputation, one layer per checkpoint). A layer's value that a
      later layer or the head reads (its output) is kept. Values outside
      the layers are kept. With `num-layers=N`, only layers 0 to N-1 are
      recomputed and the others keep everything (Megatron's `block`
      method).
    - `mode=selective`: only values of cheap ops are recomputed: pointwise
      ops (GELU, SiLU, SwiGLU, dropout, casts, adds), rotary embeddings,
      LayerNorm and RMSNorm outputs and reshapes, when everything they are
      computed from is kept anyway (a value backward reads, a parameter, an
      input) or is itself such a cheap op. No GEMM or attention runs twice.
      (Megatron's selective recomputation recomputes the attention's
      softmax and dropout; mlc's fused attention never stores them, so
      here the cheap, large values are the MLP activation's output and the
      norms' outputs.)
    - `mode=full+selective`: full on layers 0 to N-1 (`num-layers`, which
      it needs) and selective on every other value: the layers past N and
      the values outside the layers. `mlc compile --recompute auto` chooses
      among none, selective and this with N from 1 to every layer.
    - empty or `none`: nothing changes.

    Ops with side effects (not Pure) are never cloned, and their values are
    kept. Dropout is: its mask is drawn from its `seed`, the step and the
    element's index (counter-based), so the clone draws the same mask, as
    the gradient's dropout already does; likewise attention's dropout.
    A clone computes what its forward op computed, from the same operands
    and seeds; a fused kernel's bits can still depend on which of its
    values it writes out (docs/scaling.md).

    Before (`mode=selective`):
    ```mlir
    %a = mlc.gelu %h approximate = tanh : tensor<8x3072xf32>
    %y = mlc.matmul %a, %w : tensor<8x3072xf32>, tensor<3072x768xf32>
    %l = ... loss ...
    ...
    %dw = mlc.matmul %a, %dy transpose_lhs : tensor<8x3072xf32>, tensor<8x768xf32>
    %dh = mlc.gelu_grad %da, %h approximate = tanh : tensor<8x3072xf32>
    ```
    After:
    ```mlir
    %a = mlc.gelu %h approximate = tanh : tensor<8x3072xf32>
    %y = mlc.matmul %a, %w : tensor<8x3072xf32>, tensor<3072x768xf32>
    %l = ... loss ...
    ...
    %a2 = mlc.gelu %h approximate = tanh : tensor<8x3072xf32>
    %dw = mlc.matmul %a2, %dy transpose_lhs : tensor<8x3072xf32>, tensor<8x768xf32>
    %dh = mlc.gelu_grad %da, %h approximate = tanh : tensor<8x3072xf32>
    ```
    (`%h` stays saved: GELU's gradient reads it.)
  }];
  let dependentDialects = ["::mlc::MlcDialect", "::mlir::func::FuncDialect"];
  let options = [
    Option<"mode", "mode", "std::string", "\"\"",
           "full (keep each layer's input), selective (recompute cheap ops' "
           "values), full+selective (full on the first num-layers, selective "
           "elsewhere) or none">,
    Option<"numLayers", "num-layers", "int64_t", "-1",
           "full: recompute layers 0 to N-1 only (-1: every layer)">,
    Option<"regather", "regather", "bool", "false",
           "Backward reads a fresh mlc.tp_all_gather of the saved shard instead "
           "of the forward's gathered tokens (and their reshapes and casts), "
           "so only the shard is saved (--sequence-parallel, as Megatron's "
           "sequence-parallel linear layers gather their input again for the "
           "weight gradient); with any mode">,
    Option<"stepName", "step", "std::string", "::mlc::kTrainStepFn",
           "The training step function">
  ];
  let statistics = [
    Statistic<"recomputedValues", "recomputed-values",
              "Saved values now recomputed in backward">,
    Statistic<"clonedOps", "cloned-ops", "Forward ops cloned into backward">
  ];
}

def MlcRecognize : Pass<"mlc-recognize", "mlir::func::FuncOp"> {
  let summary = "Recognizes decomposed norms, GELU, RoPE, SwiGLU and attention as graph ops";
  let description = [{
    An exported model (ONNX) spells its blocks as chains of elementwise ops,
    reductions and matmuls. This pass replaces each chain it recognizes by
    the graph op whose kernels and gradients mlc has, so that an import
    fuses like a builtin model:

    - LayerNorm over the last axis: `(x - mean(x)) / sqrt(mean((x -
      mean(x))^2) + eps) * w + b` (square as `pow(d, 2)` or `d * d`) becomes
      `mlc.layer_norm` with that epsilon;
    - RMSNorm over the last axis: `w * (x * rsqrt(mean(x^2) + eps))`, the
      inverse root also as `1 / sqrt` (ONNX's Reciprocal) or the product as
      `x / sqrt(...)`, and with transformers' casts (`x` cast to f32, the
      normalized value cast back to the weight's type) becomes
      `mlc.rms_norm` with that epsilon;
    - GELU: `x * 0.5 * (1 + erf(x / sqrt 2))` (or `x * (1/sqrt 2)`) becomes
      `mlc.gelu`, and `x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`
      (`pow(x, 3)` or `x * x * x`) `mlc.gelu approximate = tanh`;
    - attention over `[B, H, S, D]`: `matmul(softmax(matmul(q, kT) * scale
      [+ mask], axis 3) [dropout], v)`, the scale as a multiplication or a
      division by a constant; the mask additive (`add`, broadcasting to the
      scores) or causal (`select` of a lower-triangular boolean constant
      against a value below -1e30, as GPT-2's exporter writes it). It
      becomes `mlc.attention` (with `scale` when it is not 1/sqrt(D), the
      dropout of the probabilities as the attention's dropout); then K/V
      repeated to the query heads (`reshape [B, Hkv, 1, S, D]`, `broadcast`
      to `[B, Hkv, n, S, D]`, `reshape [B, Hkv * n, S, D]`, read by nothing
      else) are replaced by the kv heads themselves (grouped-query attention);
    - rotary embeddings: `x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin`
      with constant tables becomes `mlc.rotary` (rotate_half's sign folded
      into the sine table), `concat(rotary(x[..., :R]), x[..., R:])` one
      partial `mlc.rotary` of x, and a rotation of the head split
      `transpose(p, [0, 2, 1, 3])` rotates the rows p and transposes after;
    - SwiGLU: `silu(gate) * up` (`mlc.silu`, or the import's `gate * (1 +
      tanh(gate / 2)) / 2` read by nothing else) becomes `mlc.swiglu`;

    - a linear layer on flattened rows, `reshape(matmul(reshape(x, [N, K]),
      w) [+ b], [d..., M])` as exporters write `Gemm`, becomes `matmul(x, w)
      [+ b]` on x's own shape (the same GEMM; the bias then fuses);
    - `matmul(x, transpose(w))` swapping the last two dims becomes `matmul x,
      w transpose_rhs` (likewise for the left operand): no copy of w;
    - the next-token loss `cross_entropy(logits[:, :-1] as rows, labels[:,
      1:])` becomes `cross_entropy(logits as rows, concat(labels[:, 1:],
      ignore_index))`: the same terms and gradient, with the logits read in
      place instead of copied out and their gradient padded back (builtin
      GPT-2 and exports alike).

    Every constant must match (to 1e-5 relative), and a chain that differs
    stays as it is.
  }];
  let statistics = [
    Statistic<"recognized", "recognized", "Subgraphs replaced by graph ops">
  ];
  let dependentDialects = ["::mlc::MlcDialect"];
}

def MlcAccumulateGemms : Pass<"mlc-accumulate-gemms", "mlir::func::FuncOp"> {
  let summary = "Sums of matrix products accumulate in the GEMM (beta = 1)";
  let description = [{
    `add(matmul_a, matmul_b)` of two products that nothing else reads
    becomes `matmul_b acc(matmul_a)`: the second GEMM adds its product to
    the first's result (the BLAS call's beta = 1, in the first's buffer)
    instead of a pointwise kernel that reads both and writes the sum. A
    three-way sum chains, `c acc(b acc(a))`. Backward is full of such sums:
    the input gradient of projections sharing one input (Q, K, V; gate and
    up), of a weight used twice, of an input read by several products.
    A tied LM head's weight gradient plus the embedding's scatter,
    `add(matmul, embedding_grad)`, becomes `embedding_grad acc(matmul)`:
    the scatter adds its rows into the product's buffer.

    The sum's type is the products': the add must not broadcast, and a
    bf16 product widened for an f32 add (`add(cast(matmul), ...)` after
    mlc-autocast) becomes an `f32_result` product, so the sum accumulates in
    f32 and is rounded nowhere. Nothing else is narrowed or widened (an add
    of bf16 casts of f32 products stays). An add with an operand that is no
    product, or a product read elsewhere too, is left to mlc-fuse-elementwise.
    It runs in the fused pipeline only (`--no-fuse` keeps the adds).

    Before:
    ```mlir
    %a = mlc.matmul %dq, %wq : tensor<8x64xf32>, tensor<64x64xf32>
    %b = mlc.matmul %dk, %wk : tensor<8x32xf32>, tensor<32x64xf32>
    %s = mlc.add %a, %b : tensor<8x64xf32>, tensor<8x64xf32>
    ```
    After:
    ```mlir
    %a = mlc.matmul %dq, %wq : tensor<8x64xf32>, tensor<64x64xf32>
    %s = mlc.matmul %dk, %wk acc(%a : tensor<8x64xf32>) : tensor<8x32xf32>, tensor<32x64xf32>
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect"];
}

def MlcFuseCrossEntropy : Pass<"mlc-fuse-cross-entropy", "mlir::func::FuncOp"> {
  let summary = "A loss's gradient computed by the loss's kernel (marked mlc.with_loss)";
  let description = [{
    The training step's loss, `cross_entropy(logits, labels)`, and its
    gradient, `cross_entropy_grad(scale, logits, labels)`, both read every
    row of the logits and take its log-softmax. When the gradient reads the
    loss's logits and labels, with the loss's ignore index and a constant
    scale, and comes after the loss in its block, this pass marks it
    `mlc.with_loss`: the lowering then emits one kernel for both (the loss
    and the gradient from one read of each row, `#plan.cross_entropy_with_grad`)
    where the loss is, and nothing where the gradient is. A gradient of other
    logits or labels, another ignore index or a scale computed at run time
    (read from a buffer) keeps its own kernel. The lowering refuses a marked
    gradient it cannot emit so, naming it. It runs last in both pipelines
    (fused and `--no-fuse`), so that nothing moves the two apart after it.

    Before:
    ```mlir
    %l = mlc.cross_entropy %y, %t ignore_index = -100 : tensor<3x6xf32>, tensor<3xi64>
    %one = mlc.constant dense<1.0> : tensor<f32>
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    ```
    After:
    ```mlir
    %g = mlc.cross_entropy_grad %one, %y, %t ignore_index = -100 {mlc.with_loss} : tensor<f32>, tensor<3x6xf32>, tensor<3xi64>
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect"];
}

def MlcFoldCasts : Pass<"mlc-fold-casts", "mlir::func::FuncOp"> {
  let summary = "--dtype bf16: casts become conversions at a neighbouring kernel's loads or stores";
  let description = [{
    After mlc-autocast every edge between a bf16 product and the f32 ops
    around it is an `mlc.cast`. mlc-fuse-elementwise folds most of them
    into the fusion that computes or reads the value (a cast is pointwise).
    This pass decides, before fusion, the casts grouping cannot fold:

    A bf16 product widened to f32 for several readers
    (`cast(matmul) : f32` with two or more users, the product read by the
    cast alone, no bias or accumulator): when every reader is pointwise,
    each gets a widening of its own, which fusion folds into its kernel as
    a conversion at the load (the GEMM stores bf16, every reader loads 2
    bytes an element; SwiGLU's gate and up products); otherwise it becomes
    an `f32_result` product: the GEMM stores f32, and no widening kernel
    reads 2 and writes 4 bytes per element. A widening read by one op is
    left to fusion, which folds it into that op's kernel (the product stays
    bf16, half the bytes).

    A biased product (`f32_result bias(%b)`, f32 bias) read by pointwise
    ops only (the MLP's first projection, read by its GELU and GELU's
    gradient; the output projections, read by the residual add of the next
    LayerNorm's row kernel) becomes a bf16 product with a bf16 copy of its
    bias, as bf16 autocast computes a linear layer; each reader widens the
    bf16 product at its load. The lowering then makes the tanh GELU the
    GEMM's epilogue over the bf16 pre-activation, as it does in f32.

    An attention or attention gradient whose every result reaches, through
    views (transposes, reshapes) and a concatenation of its own results,
    each read once, a cast to bf16 (and otherwise only column sums) is
    marked `bf16_result`: its kernel stores bf16 and the casts are gone; a
    column sum beside a cast (a Q, K or V bias gradient) reads the bf16
    gradient through a widening cast of its own.

    The casts of parameters (function arguments marked `mlc.param`: the
    weights' bf16 copies that the products read) become one
    `mlc.fusion params` at the top of the function: a single kernel over
    the flat parameter buffer writes every copy (each a view of its
    output at the parameter's place), instead of a cast kernel per weight
    in every layer. Only when every such cast maps one element type to
    another and the cast parameters hold at least half of the parameters'
    elements (the kernel maps them all; biases and norms ride along).

    f32 and f64 graphs have no such casts: the pass changes nothing there.
    It runs in the fused pipeline only.

    Before:
    ```mlir
    %p = mlc.matmul %dh, %w : tensor<8x64xbf16>, tensor<64x172xbf16>
    %g = mlc.cast %p : tensor<8x172xbf16> -> tensor<8x172xf32>
    %a = mlc.mul %g, %x : tensor<8x172xf32>, tensor<8x172xf32>
    %b = mlc.mul %g, %y : tensor<8x172xf32>, tensor<8x172xf32>
    ```
    After:
    ```mlir
    %p = mlc.matmul %dh, %w : tensor<8x64xbf16>, tensor<64x172xbf16>
    %g1 = mlc.cast %p : tensor<8x172xbf16> -> tensor<8x172xf32>
    %g2 = mlc.cast %p : tensor<8x172xbf16> -> tensor<8x172xf32>
    %a = mlc.mul %g2, %x : tensor<8x172xf32>, tensor<8x172xf32>
    %b = mlc.mul %g1, %y : tensor<8x172xf32>, tensor<8x172xf32>
    ```
    and, for the parameters `%w1` and `%w2`:
    ```mlir
    %c:2 = mlc.fusion params ins(%w1, %w2 : tensor<64x64xf32>, tensor<64x172xf32>) {
    ^bb0(%x: tensor<f32>):
      %y = mlc.cast %x : tensor<f32> -> tensor<bf16>
      mlc.yield %y : tensor<bf16>
    } : tensor<64x64xbf16>, tensor<64x172xbf16>
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect"];
}

def MlcFuseElementwise : Pass<"mlc-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Groups chains of pointwise ops into mlc.fusion kernels";
  let description = [{
    Walks each function from its results backwards and grows groups of
    pointwise ops (add, sub, mul, div, pow, neg, exp, log, tanh, erf, sqrt,
    rsqrt, gelu, gelu_grad, compare, select, cast, broadcast, dropout) that
    produce the same shape: a producer joins its consumers' group when all of
    its users are in that group, or when its other users come after the
    group (then the group also writes it out: multi-output fusion). A value
    is computed once (see below), and nothing fuses across a GEMM, a reduction or
    any other non-pointwise op. A sum over leading dimensions (a bias
    gradient) can close a group: the kernel then accumulates the column
    sums as it goes, instead of reading the data again. A LayerNorm can close
    a group as a row root (kind "rows"): its input's pointwise prologue
    (bias, dropout, residual add) is computed row by row and normalized in
    the same kernel, which also writes the prologue values still needed
    elsewhere (the residual stream); an RMSNorm likewise. In backward, the
    sum of an RMSNorm's input gradient and the residual stream's gradient
    joins the norm gradient's row kernel (`mlc.rms_norm_grad ... plus %r`).
    Splat constants are copied into the regions.

    An mlc.rotary (a full rotation) joins its consumers' group like a
    pointwise op, at most one per group and never in a "rows" or column
    group: its input (and a transposed op's sin) is read at the element and
    at its pair partner, so that input's producer never joins it and the
    kernel reads it from memory. Sibling groups over one shape whose inputs
    are all inputs of the other (SwiGLU's two gradients) are merged into one
    kernel that reads the shared inputs once, when no reader of the earlier
    one's results runs before the later one, or when the later one's inputs
    all exist before the earlier one (the merged kernel then runs there).
    A value one sibling reads beyond the other's inputs, when a unary
    pointwise op of one of those inputs computes it (GeGLU's d up = g *
    gelu(gate) beside d gate, which reads gate), is computed again in the
    merged kernel instead of read. A column sum returned as two results
    (GPT-NeoX's two output biases' gradients) is computed once per result,
    each writing its own buffer instead of being copied to both. An RMSNorm
    weight `1 + w` (Gemma's) read only by norms and their gradients is
    copied into each norm's rows fusion and marked `mlc.consumer_load` for
    the gradients, whose row kernel adds 1 as it loads w: no kernel of its own.

    Before:
    ```mlir
    %0 = mlc.add %h, %b : tensor<8x3072xf32>, tensor<3072xf32>
    %1 = mlc.gelu %0 approximate = tanh : tensor<8x3072xf32>
    ```
    After:
    ```mlir
    %r:2 = mlc.fusion pointwise ins(%h, %b : tensor<8x3072xf32>, tensor<3072xf32>) {
    ^bb0(%x: tensor<8x3072xf32>, %y: tensor<3072xf32>):
      %0 = mlc.add %x, %y : tensor<8x3072xf32>, tensor<3072xf32>
      %1 = mlc.gelu %0 approximate = tanh : tensor<8x3072xf32>
      mlc.yield %0, %1 : tensor<8x3072xf32>, tensor<8x3072xf32>
    } : tensor<8x3072xf32>, tensor<8x3072xf32>
    ```
    (`%0` is yielded only when something outside the group still uses it.)
  }];
  let dependentDialects = ["::mlc::MlcDialect"];
}

def MlcFoldRotary : Pass<"mlc-fold-rotary", "mlir::func::FuncOp"> {
  let summary = "Reads rotary embeddings of Q and K inside attention";
  let description = [{
    An `mlc.rotary` of Q and one of K with the same tables, read (through
    the transposes and reshapes that split the heads) by nothing but
    `mlc.attention` / `mlc.attention_grad` in their query and key slots,
    become the attention ops' `rotary %cos, %sin` (and `interleaved`): the
    kernels rotate Q and K rows where they read them, so the rotated Q and K
    are never written. In the backward pass the gradient op then returns
    the gradients of the unrotated inputs, and the transposed rotaries of dQ
    and dK that followed it go too: a Llama layer loses four kernels.

    The tables are reshaped into the attention's index space, `[B | 1, 1,
    S | 1, R]` (variable-length `[T | 1, 1, R]`), a view of theirs. The
    pass leaves the rotaries where a rotated Q or K has another reader, Q
    and K rotate by different tables (or only one of them rotates), a
    gradient is not followed by its transposed rotary, the tables vary per
    head or have no strided form in that space (a view mixing whole and
    broadcast dims), two attention ops read the rotated Q and K through
    views that map the tables differently, or the token dimension is
    dynamic (unpadded variable-length attention: `tensor<?x...>`; the
    padded packed stream folds). It runs in the fused pipeline only, so that
    `--no-fuse` keeps the separate rotaries to compare against.

    Before:
    ```mlir
    %qr = mlc.rotary %q, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x1x16xf32>
    %qh = mlc.transpose %qr, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
    %kr = mlc.rotary %k, %cos, %sin : tensor<2x8x4x16xf32>, tensor<8x1x16xf32>
    %kh = mlc.transpose %kr, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
    %o = mlc.attention %qh, %kh, %v causal : ...
    ```
    After:
    ```mlir
    %c = mlc.reshape %cos : tensor<8x1x16xf32> -> tensor<1x1x8x16xf32>
    %s = mlc.reshape %sin : tensor<8x1x16xf32> -> tensor<1x1x8x16xf32>
    %qh = mlc.transpose %q, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
    %kh = mlc.transpose %k, [0, 2, 1, 3] : tensor<2x8x4x16xf32>
    %o = mlc.attention %qh, %kh, %v rotary %c, %s causal : ...
    ```
  }];
  let statistics = [
    Statistic<"folded", "folded", "Rotary pairs read inside attention">
  ];
  let dependentDialects = ["::mlc::MlcDialect"];
}

def MlcInferLoss : Pass<"mlc-infer-loss", "mlir::ModuleOp"> {
  let summary = "Picks and builds the loss of a logits-only model from its attention";
  let description = [{
    Acts on `@forward` only when the importer marked it
    `mlc.infer_loss = {logits = "...", labels = "..."}` (an ONNX export
    without a `loss` output, compiled without `--loss`). After
    `mlc-recognize`: if every `mlc.attention` is causal the model trains on
    the next-token loss (causal-lm); if none is and the logits' last
    dimension is an embedding table's row count, on the masked-LM loss.
    Otherwise it fails, saying which `--loss` to pass. The loss becomes the
    first result (`mlc.output = "loss"`), the labels a new last input, and
    `mlc.inferred_loss` records the choice.

    ```mlir
    func.func @forward(%ids: tensor<2x8xi64> {mlc.input = "input_ids"}, ...)
        -> (tensor<2x8x50xf32> {mlc.output = "logits"})
        attributes {mlc.infer_loss = {labels = "labels", logits = "logits"}}
    // becomes
    func.func @forward(..., %labels: tensor<2x8xi64> {mlc.input = "labels"})
        -> (tensor<f32> {mlc.output = "loss"}, tensor<2x8x50xf32> {mlc.output = "logits"})
        attributes {mlc.inferred_loss = "causal-lm"}
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect", "::mlir::func::FuncDialect"];
}

def MlcAutocast : Pass<"mlc-autocast", "mlir::ModuleOp"> {
  let summary = "Mixed precision: matrix products in bf16, everything else in f32";
  let description = [{
    `--dtype bf16`: every f32 `mlc.matmul` reads its operands rounded to
    bf16 and writes a bf16 product (tensor cores accumulate in f32), which
    its consumers read back as f32. Parameters, LayerNorm, softmax, the loss
    and the optimizer stay f32 (the master weights); autodiff then derives
    the backward products in bf16 and casts their gradients back to f32 —
    the semantics of PyTorch's bf16 autocast. Run before `mlc-eval-mode` and
    `mlc-autodiff`. Matmuls of other types (f64, already bf16) are left as
    they are; so is attention. The module is marked `mlc.autocast = "bf16"`,
    which kernel targets read (attention may run its products in bf16 too).

    Before:
    ```mlir
    %y = mlc.matmul %x, %w : tensor<8x768xf32>, tensor<768x3072xf32>
    ```
    After:
    ```mlir
    %x16 = mlc.cast %x : tensor<8x768xf32> -> tensor<8x768xbf16>
    %w16 = mlc.cast %w : tensor<768x3072xf32> -> tensor<768x3072xbf16>
    %y16 = mlc.matmul %x16, %w16 : tensor<8x768xbf16>, tensor<768x3072xbf16>
    %y = mlc.cast %y16 : tensor<8x3072xbf16> -> tensor<8x3072xf32>
    ```
  }];
  let dependentDialects = ["::mlc::MlcDialect"];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"bf16\"",
           "The products' element type (bf16)">
  ];
}

def MlcEvalMode : Pass<"mlc-eval-mode", "mlir::ModuleOp"> {
  let summary = "Adds @evaluate: @forward with dropout switched off";
  let description = [{
    Training graphs apply dropout; evaluation and inference must not. The pass
    clones `@forward` into `@evaluate`, replaces every `mlc.dropout` by its
    input and sets attention dropout to 0. `@forward` is left as it is.
  }];
  let dependentDialects = ["::mlc::MlcDialect", "::mlir::func::FuncDialect"];
}

def MlcOptimizer : Pass<"mlc-optimizer", "mlir::ModuleOp"> {
  let summary = "Adds AdamW and the gradient norm as graph functions";
  let description = [{
    From `@train_step`'s gradients (results marked `mlc.grad`), adds
    `@grad_norm` (the L2 norm of all gradients, accumulated in f64) and
    `@optimizer`: torch.optim.AdamW per parameter, as graph ops. Its
    arguments are the parameters, gradients, first and second moments
    (`mlc.param`, `mlc.grad`, `mlc.moment1`, `mlc.moment2`) and the step's
    f64 scalars (`mlc.scalars = "adamw"`: the clipping scale, step size and
    bias correction from the schedule's learning rate, betas, epsilon and the
    decay factor, in the order of runtime/core/OptimizerScalars.h); its
    results, marked `mlc.param_update`, `mlc.moment1_update` and
    `mlc.moment2_update`, are written back in place. Weight decay applies to
    parameters of rank >= 2. Both functions carry `mlc.optimizer = "adamw"`.

    With `fuse`, each function is one kernel over the flat buffers: the
    update is one `mlc.fusion optimizer` over the scalars, then the
    parameters, gradients, first and second moments, whose region is one
    element's update (block arguments p, g, m, v, the decay factor, then
    the scalars before the decay; `mlc.decay` says per parameter whether its
    factor is the scalar or 1), and the norm's sum is one
    `mlc.fusion norm` whose region is one element's square. Both forms are
    built from the same element rules.

    ```mlir
    func.func @optimizer(%p: tensor<3xf32> {mlc.param = "b"}, %g: ... {mlc.grad = "b"},
                         %m: ... {mlc.moment1 = "b"}, %v: ... {mlc.moment2 = "b"},
                         %h: tensor<9xf64> {mlc.scalars = "adamw"})
        -> (tensor<3xf32> {mlc.param_update = "b"}, ...)
    ```
  }];
  let options = [
    Option<"fuse", "fuse", "bool", "false",
           "Each function as one kernel over the flat buffers (an mlc.fusion)">,
  ];
  let dependentDialects = ["::mlc::MlcDialect", "::mlir::func::FuncDialect"];
}

def MlcBucketGradients : Pass<"mlc-bucket-gradients", "mlir::ModuleOp"> {
  let summary = "Sums @train_step's gradients over data-parallel ranks in buckets "
                "that overlap backward";
  let description = [{
    On a plan module compiled for `ranks` > 1: groups the gradients into
    buckets, contiguous slices of the flat gradient buffer taken in its
    layout order (the order backward finishes them), the first up to
    `first-bucket-mb` MB and the others up to `cap-mb` MB (a larger
    parameter is a bucket of its own). Each bucket's
    `plan.all_reduce_start` goes right after the last step of
    `@train_step` that reads or writes any of its gradients (a tied
    weight's gradient is complete only after its last use); the
    `plan.all_reduce_wait`s go at the end of `@train_step`, as late as
    possible: the summed gradients are first read by `@grad_norm` and
    `@optimizer`. With one rank (the default) nothing changes, unless
    `clip=bucket`.

    `distributed-optimizer=1` (with `ranks` > 1) shards the optimizer:
    each bucket gets a `plan.reduce_scatter_start`/`_wait` where the
    all-reduce would be; @grad_norm's kernel runs over this rank's shards
    (`shard = -1`) followed by `plan.all_reduce_norm`; @optimizer's fused
    update becomes one launch per bucket (`shard = tag`), each followed by
    the bucket's `plan.all_gather_start`, the `plan.all_gather_wait`s at its
    end.

    `clip=bucket` marks every start `clip`: before its all-reduce, the
    bucket's gradients on this rank are scaled by min(1, c_b / (norm + 1e-6))
    with the bucket's own L2 norm and c_b = c * sqrt(n_b / n) for the run's
    threshold c (`--clip-grad`), n_b the bucket's and n all the gradients:
    buckets at their thresholds make a gradient of norm exactly c, as global
    clipping would, and no bucket waits for the whole gradient's norm.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "1", "Data-parallel ranks the package runs on">,
    Option<"capMb", "cap-mb", "double", "25.0", "Bucket size cap in MB (1e6 bytes)">,
    Option<"firstBucketMb", "first-bucket-mb", "double", "1.0",
           "Cap of the first bucket, which starts earliest">,
    Option<"clip", "clip", "std::string", "\"global\"",
           "global (the trainer clips the summed gradient), bucket (each bucket "
           "clipped by its own norm before its all-reduce starts) or none">,
    Option<"distributedOptimizer", "distributed-optimizer", "bool", "false",
           "Shard the optimizer over the ranks (ZeRO-1): a reduce-scatter per "
           "bucket, the update over this rank's shards, an all-gather of the "
           "updated parameters per bucket">
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Gradient buckets">
  ];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

def MlcOverlapTpCollectives : Pass<"mlc-overlap-tp-collectives", "mlir::ModuleOp"> {
  let summary = "Overlaps tensor-parallel all-reduces with the GEMMs that do not "
                "need their sums";
  let description = [{
    On a plan module compiled for `mlc.tensor_parallel` > 1, before
    mlc-plan-memory: each `plan.tp_all_reduce` sum over an arena buffer
    starts as early as it can, right after the last step before it that
    reads or writes the buffer, and its `plan.tp_wait` goes as late as it
    can, before the first step after it that touches the buffer (or any
    other tensor-parallel collective, or anything that is not a launch, a
    GEMM or a data-parallel start or wait). When at least one `plan.gemm`
    then lies between the two, the all-reduce gets a `tag` (it starts
    asynchronously) and the wait is inserted; otherwise it stays blocking.
    In a column-parallel layer's backward the input gradient's all-reduce
    (the dual of `mlc.tp_copy`) so runs during the weight-gradient GEMM
    (Megatron's overlapped input-gradient all-reduce). Maxima, buffers
    bound to flat buffers and T = 1 are left alone.
  }];
  let statistics = [
    Statistic<"numOverlapped", "overlapped", "Tensor-parallel all-reduces made asynchronous">
  ];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

def MlcPlanMemory : Pass<"mlc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places each plan function's arena slices by liveness";
  let description = [{
    For every `plan.func`: the live range of each arena slice is the first
    to the last step that uses it or a view of it (an output stays live to
    the end); slices are placed first-fit, largest first, at 64-byte
    aligned offsets, so two slices share bytes only when their live ranges
    do not overlap. Sets each `plan.arena` offset and the function's
    `arena` size.
  }];
  let dependentDialects = ["::mlc::plan::PlanDialect"];
}

#endif // MLC_PASSES_TD
