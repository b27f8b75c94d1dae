//===- PlanOps.td - the plan dialect: a lowered training step -*- tablegen -*-===//
//
// The plan is what the runtime executes: per function, named buffers (slices
// of the flat parameter and gradient buffers, inputs, arena slices and views
// of them) and an ordered list of steps (kernel launches and GEMMs). The
// package writer serializes it as plan.txt (runtime/core/PlanFormat.h owns
// that grammar); `mlc compile --emit=plan` prints it as MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PLAN_OPS_TD
#define MLC_PLAN_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::mlc::plan";
  let summary = "The lowered training step: flat buffers, kernel launches, GEMMs";
  let description = [{
    A module in the `plan` dialect lists the parameters in flat-buffer order
    (`plan.param`), the model inputs (`plan.input`), every generated kernel
    once (`plan.kernel`: its template and source) and, per function
    (`plan.func`), its buffers and steps in execution order. Buffers are
    one-dimensional memrefs of their element type sized in elements; a
    dynamic token dimension is sized at the module's token capacity.
  }];
  let useDefaultAttributePrinterParser = 1;
}

include "dialects/plan/PlanTemplates.td"

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

// A 64-bit integer attribute read back signed (-1 marks "not placed" and
// "the token count").
def Plan_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t", "64-bit integer"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

def Plan_Buffer : MemRefRankOf<[AnyFloat, AnySignlessInteger], [1]>;

def Plan_KernelTemplate : I32EnumAttr<"KernelTemplate",
    "the shape of a generated kernel's loop, which a target wraps", [
      I32EnumAttrCase<"pointwise", 0>,
      I32EnumAttrCase<"rows", 1>,
      I32EnumAttrCase<"column_reduction", 2>,
      I32EnumAttrCase<"reduction", 3>,
      I32EnumAttrCase<"attention", 4>,
      I32EnumAttrCase<"optimizer", 5>,
      I32EnumAttrCase<"copy", 6>,
      I32EnumAttrCase<"fill", 7>,
      I32EnumAttrCase<"gather", 8>,
      I32EnumAttrCase<"scatter", 9>
    ]> {
  let cppNamespace = "::mlc::plan";
}

def Plan_BufferKind : I32EnumAttr<"BufferKind", "where a bound buffer lives", [
      I32EnumAttrCase<"param", 0>,
      I32EnumAttrCase<"grad", 1>,
      I32EnumAttrCase<"input", 2>,
      I32EnumAttrCase<"moment1", 3>,
      I32EnumAttrCase<"moment2", 4>,
      I32EnumAttrCase<"scalars", 5>,
      I32EnumAttrCase<"grad_sum", 6>
    ]> {
  let cppNamespace = "::mlc::plan";
}

//===----------------------------------------------------------------------===//
// Module-level declarations
//===----------------------------------------------------------------------===//

def Plan_ParamOp : Plan_Op<"param"> {
  let summary = "a parameter's slice of the flat buffers, in layout order";
  let description = [{
    Parameters are laid out in the flat parameter, gradient and moment
    buffers in the order of their `plan.param` ops (the order backward
    finishes their gradients). `decay` marks the ones AdamW decays
    (matrices); `init` is the seeded initialization (`normal:STD`, `zeros`,
    `ones`) or `package`: the values in the package's weights.safetensors
    (an imported model's initializers).

    ```mlir
    plan.param "transformer.wte.weight" : f32 [256, 128] decay init "normal:0.02"
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, TypeAttr:$element, DenseI64ArrayAttr:$shape,
                       UnitAttr:$decay, StrAttr:$init);
  let assemblyFormat = "$sym_name `:` $element $shape (`decay` $decay^)? `init` $init attr-dict";
  let hasVerifier = 1;
}

def Plan_InputOp : Plan_Op<"input"> {
  let summary = "a model input (a batch tensor); -1 marks the token dimension";
  let description = [{
    ```mlir
    plan.input "input_ids" : i64 [2, 16]
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, TypeAttr:$element, DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `:` $element $shape attr-dict";
  let hasVerifier = 1;
}

def Plan_ScalarsOp : Plan_Op<"scalars"> {
  let summary = "a vector of per-step scalars the runtime fills (the optimizer's)";
  let description = [{
    ```mlir
    plan.scalars "adamw" : f64 [9]
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, TypeAttr:$element, Plan_I64Attr:$size);
  let assemblyFormat = "$sym_name `:` $element ` ` `[` $size `]` attr-dict";
  let hasVerifier = 1;
}

def Plan_KernelOp : Plan_Op<"kernel", [Symbol, IsolatedFromAbove, NoTerminator]> {
  let summary = "a generated kernel: its template and parameters, or its body";
  let description = [{
    A kernel of `num_args` buffers (outputs first). A template kernel names
    its template with an attribute of PlanTemplates.td (`#plan.softmax`,
    `#plan.layer_norm`, `#plan.cross_entropy`, `#plan.embedding`,
    `#plan.fill`, `#plan.reduction`, `#plan.attention`, ...), which
    implements TemplateAttrInterface, and carries that template's typed
    parameters (`params`: element types, sizes, row counts, strides, flags);
    the package writer prints it for each target through the interface, so
    no target's text is in the plan. A dynamic row count is `rows` (at the
    token capacity) with `rows_per_token`.

    ```mlir
    plan.kernel @k3 rows #plan.softmax args(2)
        params {columns = 64 : i64, element = f32, rows = 32 : i64, rows_per_token = 1 : i64}
    ```

    A pointwise kernel is a loop nest over `params.dims` (the iteration
    space, unit dimensions dropped and dimensions contiguous for every
    access merged; `dynamic`: the leading extent is the token count times
    dims[0] / capacity) whose body is a region: `plan.load` of each argument
    it reads and `plan.store` of each it writes, each with its offset and
    strides along the dims, and between them the scalar computation (mlc
    ops on rank-0 tensors, each printed through its ScalarOpInterface).
    A target's pass decides on that structure how it runs (mlc-cuda-
    vectorize: `vector_lanes` in params, `vector` on each access moved as a
    vector).

    ```mlir
    plan.kernel @k0 pointwise args(3) params {dims = array<i64: 4, 3>} {
      %0 = plan.load arg 1 offset 0 strides [1, 4] : tensor<f32>
      %1 = plan.load arg 2 offset 0 strides [3, 1] : tensor<f32>
      %2 = mlc.add %0, %1 : tensor<f32>, tensor<f32>
      plan.store %2, arg 0 offset 0 strides [3, 1] : tensor<f32>
    }
    ```

    The same region form holds a fused bias gradient (`column_reduction`:
    `plan.accumulate`), a LayerNorm fused with its prologue (`rows`:
    `plan.normalize`) and the optimizer's update and the gradient norm over
    flat-buffer segments (`params.segments`; `plan.scalar`,
    `plan.decay_factor`). No kernel is text: every target prints each one
    from its template and params or its body.

    A target's scheduling pass records how it runs the kernel as
    discardable attributes (mlc-cuda-launch: `cuda.launch`, a `[grid,
    block]` array per phase, `cuda.scratch` bytes, attention's
    `cuda.tile`); the verifier checks their form, mlc-cuda-launch the phase
    count of a schedule written by hand against the one it decides.

    ```mlir
    plan.kernel @k3 rows #plan.softmax args(2) params {columns = 64 : i64, ...}
        attributes {cuda.launch = [array<i64: 32, 64>], cuda.scratch = 0 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Plan_KernelTemplate:$kind,
                       OptionalAttr<Plan_TemplateAttrInterface>:$kernel_template,
                       Plan_I64Attr:$num_args,
                       OptionalAttr<DictionaryAttr>:$params);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    $sym_name $kind ($kernel_template^)? `args` `(` $num_args `)` (`params` $params^)?
    attr-dict-with-keyword ($body^)?
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Plan_LoadOp : Plan_Op<"load", [HasParent<"KernelOp">]> {
  let summary = "reads a kernel argument's element at the nest's current index";
  let description = [{
    Element `offset + sum_d i_d * strides[d]` of argument `arg` (i_d the
    indices of the kernel's dims), as a rank-0 tensor of its element type.
    A stride of 0 broadcasts the argument along that dimension. `vector`
    (set by a target's pass): the target moves this access as vectors.

    ```mlir
    %x = plan.load arg 1 offset 0 strides [0, 1] : tensor<f32>
    ```
  }];
  let arguments = (ins Plan_I64Attr:$arg, Plan_I64Attr:$offset, DenseI64ArrayAttr:$strides,
                       UnitAttr:$vector);
  let results = (outs 0DTensorOf<[AnyFloat, AnySignlessInteger]>:$value);
  let assemblyFormat = [{
    `arg` $arg `offset` $offset `strides` $strides (`vector` $vector^)? attr-dict `:` type($value)
  }];
}

def Plan_AccumulateOp : Plan_Op<"accumulate", [HasParent<"KernelOp">]> {
  let summary = "adds the element's value to its column's sum in a kernel argument";
  let description = [{
    In a `column_reduction` kernel (rows x columns over `params.dims`, the
    first `lead` dims the rows): argument `arg` receives, per column, the
    sum over the rows of this value (a bias gradient fused into its
    producer). In a `reduction` kernel over flat-buffer segments (the
    gradient norm): `arg` receives the square root of the sum over all
    elements (in f64). How the rows are shared out and summed (in a fixed order, so
    the sums are deterministic) is the target's.

    ```mlir
    plan.accumulate %g, arg 1 : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[AnyFloat, AnySignlessInteger]>:$value, Plan_I64Attr:$arg);
  let assemblyFormat = "$value `,` `arg` $arg attr-dict `:` type($value)";
}

def Plan_NormalizeOp : Plan_Op<"normalize", [HasParent<"KernelOp">, AttrSizedOperandSegments]> {
  let summary = "stores the LayerNorm of the row's values in a kernel argument";
  let description = [{
    In a `rows` kernel (rows x E over `params.dims`, the last the row): the
    row's values of `input` (a pointwise prologue: a residual add, a bias)
    normalized, `(u - mean) / sqrt(var + params.eps) * weight + bias`, and
    stored in argument `arg` at its offset and strides, in its `element`
    type. With `rms` (RMSNorm, no bias) it is `(u * rstd) * weight`, rstd
    = 1 / sqrt(mean(u^2) + params.eps), `u * rstd` rounded to the input's
    type first. With `plus` (a post-norm's residual add, OLMo2's `h +
    norm(y)`) the stored value is `residual + ` that, the residual an element
    of the prologue's loads. How the row is shared out, kept and reduced is
    the target's.

    ```mlir
    plan.normalize %u, %w, %b, arg 0 offset 0 strides [128, 1]
        : tensor<f32>, tensor<f32>, tensor<f32> into f32
    plan.normalize rms %u, %w, arg 0 offset 0 strides [128, 1]
        : tensor<f32>, tensor<f32> into f32
    ```
  }];
  let arguments = (ins 0DTensorOf<[AnyFloat]>:$input, 0DTensorOf<[AnyFloat]>:$weight,
                       Optional<0DTensorOf<[AnyFloat]>>:$bias,
                       Optional<0DTensorOf<[AnyFloat]>>:$residual, Plan_I64Attr:$arg,
                       Plan_I64Attr:$offset, DenseI64ArrayAttr:$strides, TypeAttr:$element,
                       UnitAttr:$rms);
  let assemblyFormat = [{
    (`rms` $rms^)? $input `,` $weight `,` ($bias^ `,`)? (`plus` $residual^ `,`)? `arg` $arg
    `offset` $offset `strides` $strides attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)? (`plus` type($residual)^)? `into` $element
  }];
  let hasVerifier = 1;
}

def Plan_ScalarOp : Plan_Op<"scalar", [HasParent<"KernelOp">]> {
  let summary = "a per-step scalar of a kernel argument (f64), in the element's type";
  let description = [{
    Element `index` of argument `arg` (a `plan.scalars` vector of f64 the
    runtime fills each step, the optimizer's), read once per kernel and
    converted to the result's type.

    ```mlir
    %lr = plan.scalar arg 4 index 0 : tensor<f32>
    ```
  }];
  let arguments = (ins Plan_I64Attr:$arg, Plan_I64Attr:$index);
  let results = (outs 0DTensorOf<[AnyFloat]>:$value);
  let assemblyFormat = "`arg` $arg `index` $index attr-dict `:` type($value)";
}

def Plan_DecayFactorOp : Plan_Op<"decay_factor", [HasParent<"KernelOp">]> {
  let summary = "the optimizer's decay multiplier of the current segment";
  let description = [{
    In an `optimizer` kernel over flat-buffer segments (`params.segments`:
    offset, count, decays): scalar `index` of argument `arg` for a segment
    whose parameters decay, 1 for the others (biases, norms).

    ```mlir
    %d = plan.decay_factor arg 4 index 8 : tensor<f32>
    ```
  }];
  let arguments = (ins Plan_I64Attr:$arg, Plan_I64Attr:$index);
  let results = (outs 0DTensorOf<[AnyFloat]>:$value);
  let assemblyFormat = "`arg` $arg `index` $index attr-dict `:` type($value)";
}

def Plan_StoreOp : Plan_Op<"store", [HasParent<"KernelOp">]> {
  let summary = "writes a kernel argument's element at the nest's current index";
  let description = [{
    The written counterpart of `plan.load`: argument `arg` is an output of
    the kernel.

    ```mlir
    plan.store %y, arg 0 offset 0 strides [3, 1] : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[AnyFloat, AnySignlessInteger]>:$value, Plan_I64Attr:$arg,
                       Plan_I64Attr:$offset, DenseI64ArrayAttr:$strides, UnitAttr:$vector);
  let assemblyFormat = [{
    $value `,` `arg` $arg `offset` $offset `strides` $strides (`vector` $vector^)? attr-dict
    `:` type($value)
  }];
}

def Plan_FuncOp : Plan_Op<"func", [SingleBlock, NoTerminator,
    DeclareOpInterfaceMethods<RegionKindInterface>]> {
  let summary = "one function of the package: its buffers and steps in order";
  let description = [{
    `arena_bytes` is the size of the activation arena the function needs,
    set by `mlc-plan-memory` (0 before it runs).

    ```mlir
    plan.func "forward" arena 4096 {
      %w = plan.bind param "w" : memref<12xf32>
      %x = plan.bind input "x" : memref<8xf32>
      %y = plan.arena 0 : memref<6xf32>
      plan.gemm %y, %x, %w m 2 n 3 k 4 : memref<6xf32>, memref<8xf32>, memref<12xf32>
      plan.output "y" %y [2, 3] : memref<6xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$sym_name, Plan_I64Attr:$arena_bytes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `arena` $arena_bytes attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

def Plan_BindOp : Plan_Op<"bind"> {
  let summary = "a slice of a flat buffer, a whole flat buffer, an input or scalars";
  let description = [{
    `param`, `grad`, `moment1`, `moment2`: the named parameter's slice of
    that flat buffer, or the whole buffer for the name `*`. `input`: a
    `plan.input`; `scalars`: a `plan.scalars`.

    ```mlir
    %g = plan.bind grad "transformer.wte.weight" : memref<32768xf32>
    %all = plan.bind moment1 "*" : memref<1048576xf32>
    ```
  }];
  let arguments = (ins Plan_BufferKind:$kind, StrAttr:$name);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$kind $name attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Plan_ArenaOp : Plan_Op<"arena"> {
  let summary = "a slice of the function's arena at a byte offset";
  let description = [{
    The offset is -1 until `mlc-plan-memory` places the buffer: two arena
    buffers whose live ranges (first to last step that uses them or a view
    of them) overlap never share bytes.
  }];
  let arguments = (ins Plan_I64Attr:$offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$offset attr-dict `:` type($buffer)";
}

def Plan_ViewOp : Plan_Op<"view"> {
  let summary = "a buffer read or written through another at a byte offset";
  let arguments = (ins Plan_Buffer:$source, Plan_I64Attr:$offset);
  let results = (outs Plan_Buffer:$buffer);
  let assemblyFormat = "$source `[` $offset `]` attr-dict `:` type($source) `to` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

def Plan_LaunchOp : Plan_Op<"launch"> {
  let summary = "runs a generated kernel over buffers (outputs first)";
  let description = [{
    An optional `shard` (distributed optimizer, optimizer and norm kernels
    only) runs the kernel over this rank's shard of the bucket with that
    tag (the slice its `plan.reduce_scatter_start` leaves summed here), or
    of every bucket (-1); the moment buffers then hold this rank's shards
    only, bucket after bucket.
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel, Variadic<Plan_Buffer>:$operands,
                       OptionalAttr<Plan_I64Attr>:$shard);
  let builders = [
    OpBuilder<(ins "::mlir::FlatSymbolRefAttr":$kernel, "::mlir::ValueRange":$operands), [{
      build($_builder, $_state, kernel, operands, ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = "$kernel `(` $operands `)` attr-dict `:` type($operands)";
  let hasVerifier = 1;
}

def Plan_GemmOp : Plan_Op<"gemm", [AttrSizedOperandSegments]> {
  let summary = "out = op(lhs) x op(rhs) (+ out), batched with broadcasting strides";
  let description = [{
    Row-major GEMM through the backend's BLAS. `m` or `k` is -1 when it is
    the batch's token count (dynamic). `batch` lists the result's leading
    dimensions; `lhs_strides` and `rhs_strides` step through the operands'
    matrices per batch index (0 where an operand is broadcast). An optional
    `bias` (n elements of the result's type) is added to every row of the
    result, by the GEMM's epilogue where the backend's BLAS has one. With
    `gelu(%pre)` (f32, f64 or bf16), the product (plus bias) goes to `pre` and its
    tanh GELU, `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, to `out`:
    cuBLASLt's GELU_AUX epilogue, the MLP's activation without a kernel. A
    bf16 GELU is computed in f32 from the stored (rounded) pre-activation
    and rounded once.

    With `accumulate`, `out` is read as well as written: `out = op(lhs)
    op(rhs) (+ bias) + out`, the BLAS call's beta = 1 (a sum of products,
    mlc-accumulate-gemms), the sum computed in the GEMM's accumulation type
    and rounded once to out's. An earlier step of the function must have
    written `out` (a GEMM as its `out` or `gelu` pre-activation, or a launch
    whose kernel writes that argument: a body's store, a template's output;
    a step that only reads it does not count; the memory planner then keeps
    it live from that step on, and `out` never aliases an operand); there is
    no GELU epilogue.

    ```mlir
    plan.gemm %dx, %dq, %wq m 1024 n 64 k 64 : memref<65536xf32>, memref<65536xf32>, memref<4096xf32>
    plan.gemm %dx, %dk, %wk accumulate m 1024 n 64 k 32 : memref<65536xf32>, memref<32768xf32>, memref<2048xf32>
    ```
  }];
  let arguments = (ins Plan_Buffer:$out, Plan_Buffer:$lhs, Plan_Buffer:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       Plan_I64Attr:$m, Plan_I64Attr:$n, Plan_I64Attr:$k,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$batch,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$lhs_strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$rhs_strides,
                       Optional<Plan_Buffer>:$bias, Optional<Plan_Buffer>:$pre,
                       UnitAttr:$accumulate);
  let assemblyFormat = [{
    $out `,` $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`accumulate` $accumulate^)? `m` $m `n` $n `k` $k (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`gelu` `(` $pre^ `:` type($pre) `)`)? attr-dict `:` type($out) `,` type($lhs) `,` type($rhs)
  }];
  let hasVerifier = 1;
}

def Plan_AllReduceStartOp : Plan_Op<"all_reduce_start"> {
  let summary = "starts summing a slice of the gradients over the data-parallel ranks";
  let description = [{
    An asynchronous in-place sum over the ranks of `count` elements at
    element `offset` of the whole gradient buffer (`plan.bind grad "*"`),
    one bucket of `mlc-bucket-gradients`. It runs while the steps after it
    compute; the `plan.all_reduce_wait` of the same `tag` (later in the same
    function) blocks until the sum has arrived. With one rank both do
    nothing. `clip` (bucket-wise clipping) first scales the slice, this
    rank's gradients, by min(1, c_b / (||slice|| + 1e-6)), c_b = c *
    sqrt(count / all gradients) for the run's threshold c.

    ```mlir
    %g = plan.bind grad "*" : memref<120576xf32>
    plan.all_reduce_start %g [102400, 18176] tag 0 : memref<120576xf32>
    ...
    plan.all_reduce_wait tag 0
    ```
  }];
  let arguments = (ins Plan_Buffer:$buffer, Plan_I64Attr:$offset, Plan_I64Attr:$count,
                       Plan_I64Attr:$tag, UnitAttr:$clip);
  let assemblyFormat = [{
    $buffer `[` $offset `,` $count `]` `tag` $tag (`clip` $clip^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Plan_AllReduceWaitOp : Plan_Op<"all_reduce_wait"> {
  let summary = "waits for the all-reduce started with the same tag";
  let arguments = (ins Plan_I64Attr:$tag);
  let assemblyFormat = "`tag` $tag attr-dict";
}

//===----------------------------------------------------------------------===//
// The distributed optimizer (mlc-bucket-gradients distributed-optimizer=1)
//===----------------------------------------------------------------------===//

def Plan_ReduceScatterStartOp : Plan_Op<"reduce_scatter_start"> {
  let summary = "starts summing a bucket of gradients over the ranks, each rank "
                "keeping its shard of the sum";
  let description = [{
    The distributed optimizer's form of `plan.all_reduce_start`: the same
    bucket of the whole gradient buffer, but after the
    `plan.reduce_scatter_wait` of the same `tag` only this rank's shard of
    the bucket holds the sum over the ranks (the rest holds partial sums
    nobody reads). Rank r of R holds elements
    [offset + floor(r count / R), offset + floor((r + 1) count / R)) of the
    buffer: the shards of a bucket differ by at most one element, and the
    flat buffers need no padding. `clip` is bucket-wise clipping of this
    rank's whole bucket before the sum starts, as for the all-reduce.

    ```mlir
    %g = plan.bind grad "*" : memref<120576xf32>
    plan.reduce_scatter_start %g [102400, 18176] tag 0 : memref<120576xf32>
    ...
    plan.reduce_scatter_wait tag 0
    ```
  }];
  let arguments = (ins Plan_Buffer:$buffer, Plan_I64Attr:$offset, Plan_I64Attr:$count,
                       Plan_I64Attr:$tag, UnitAttr:$clip);
  let assemblyFormat = [{
    $buffer `[` $offset `,` $count `]` `tag` $tag (`clip` $clip^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Plan_ReduceScatterWaitOp : Plan_Op<"reduce_scatter_wait"> {
  let summary = "waits for the reduce-scatter started with the same tag";
  let arguments = (ins Plan_I64Attr:$tag);
  let assemblyFormat = "`tag` $tag attr-dict";
}

def Plan_AllGatherStartOp : Plan_Op<"all_gather_start"> {
  let summary = "starts sending this rank's updated shard of a bucket of "
                "parameters to every rank";
  let description = [{
    After the optimizer has updated this rank's shard of a bucket (a launch
    marked `shard = tag`), every rank's shard of the bucket
    [offset, offset + count) of the whole parameter buffer is copied to
    every rank, in place (the shards as `plan.reduce_scatter_start` deals
    them). The `plan.all_gather_wait` of the same tag, later in the same
    function, blocks until the whole bucket has arrived; the gathers of the
    first buckets proceed while the optimizer updates the later ones.

    ```mlir
    %p = plan.bind param "*" : memref<120576xf32>
    plan.launch @k27(%p, %m, %v, %g, %h) {shard = 0 : i64} : ...
    plan.all_gather_start %p [102400, 18176] tag 0 : memref<120576xf32>
    ```
  }];
  let arguments = (ins Plan_Buffer:$buffer, Plan_I64Attr:$offset, Plan_I64Attr:$count,
                       Plan_I64Attr:$tag);
  let assemblyFormat = [{
    $buffer `[` $offset `,` $count `]` `tag` $tag attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Plan_AllGatherWaitOp : Plan_Op<"all_gather_wait"> {
  let summary = "waits for the all-gather started with the same tag";
  let arguments = (ins Plan_I64Attr:$tag);
  let assemblyFormat = "`tag` $tag attr-dict";
}

def Plan_AllReduceNormOp : Plan_Op<"all_reduce_norm"> {
  let summary = "the norm of every rank's shard from each rank's own: "
                "out = sqrt(sum over ranks of out^2)";
  let description = [{
    A blocking scalar sum over the ranks (one f64). @grad_norm of a
    distributed-optimizer plan runs its norm kernel over this rank's shard
    (`shard = -1`: every bucket's shard) and then this: the global norm of
    the summed gradient.
  }];
  let arguments = (ins Plan_Buffer:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor parallelism (mlc-shard-tensor-parallel)
//===----------------------------------------------------------------------===//

def Plan_TpAllReduceOp : Plan_Op<"tp_all_reduce"> {
  let summary = "a blocking in-place sum (or max) of a buffer over the tensor-parallel group";
  let description = [{
    The lowering of `mlc.tp_reduce` (Megatron's `g`, and the backward of
    `mlc.tp_copy`, its `f`): every element of the buffer becomes the sum
    (`max`: the largest) of that element over the T ranks of this rank's
    tensor-parallel group, in place, before the next step runs. The group is
    T consecutive ranks of the run; the data-parallel gradient sums
    (`plan.all_reduce_start`) run over the other axis. A plan for one
    tensor-parallel rank has none.

    With a `tag` (a sum only; `mlc-overlap-tp-collectives`) the all-reduce
    is asynchronous: it starts here and runs while the steps after it
    compute (the weight-gradient GEMMs of a column-parallel layer's
    backward, Megatron's overlapped input-gradient all-reduce); the
    `plan.tp_wait` of the same tag, later in the same function and before
    any other step reads or writes the buffer, blocks until the sum has
    arrived.

    ```mlir
    plan.tp_all_reduce %y : memref<8192xf32>
    plan.tp_all_reduce %m max : memref<64xf32>
    plan.tp_all_reduce %dx tag 0 : memref<8192xf32>
    plan.gemm %dw, %x, %dy transpose_lhs m 64 n 128 k 64 : ...
    plan.tp_wait %dx tag 0 : memref<8192xf32>
    ```
  }];
  let arguments = (ins Plan_Buffer:$buffer, UnitAttr:$max, OptionalAttr<Plan_I64Attr>:$tag);
  let builders = [
    OpBuilder<(ins "::mlir::Value":$buffer, "::mlir::UnitAttr":$max), [{
      build($_builder, $_state, buffer, max, ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $buffer (`max` $max^)? (`tag` $tag^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Plan_TpWaitOp : Plan_Op<"tp_wait"> {
  let summary = "waits for the asynchronous tensor-parallel all-reduce with the same tag";
  let description = [{
    Blocks until the `plan.tp_all_reduce` started with this `tag` has
    summed `buffer` (the same buffer) over the tensor-parallel group. The
    buffer operand keeps it live (mlc-plan-memory) until here.
  }];
  let arguments = (ins Plan_Buffer:$buffer, Plan_I64Attr:$tag);
  let assemblyFormat = "$buffer `tag` $tag attr-dict `:` type($buffer)";
}

def Plan_TpAllGatherOp : Plan_Op<"tp_all_gather"> {
  let summary = "a blocking gather of the tensor-parallel ranks' slices, in rank order";
  let description = [{
    The lowering of `mlc.tp_all_gather` (sequence parallelism: a region's
    entry, and the backward of a reduce-scatter): `out` holds the T ranks'
    `in`s one after another, rank r's at r x the elements of `in`, on every
    rank of the tensor-parallel group (MPI_Allgather). `out` has T times the
    elements of `in` and the same element type; the two do not overlap.

    ```mlir
    plan.tp_all_gather %out, %in : memref<16384xf32>, memref<8192xf32>
    ```
  }];
  let arguments = (ins Plan_Buffer:$out, Plan_Buffer:$in);
  let assemblyFormat = "$out `,` $in attr-dict `:` type($out) `,` type($in)";
  let hasVerifier = 1;
}

def Plan_TpReduceScatterOp : Plan_Op<"tp_reduce_scatter"> {
  let summary = "a blocking sum over the tensor-parallel group, each rank keeping its slice";
  let description = [{
    The lowering of `mlc.tp_reduce_scatter` (sequence parallelism: a
    region's exit, and the backward of an all-gather): `out` becomes rank
    r's slice, the r-th of T equal blocks, of the sum over the group of the
    ranks' `in`s (MPI_Reduce_scatter_block). `in` has T times the elements
    of `out` and the same element type; the two do not overlap.

    ```mlir
    plan.tp_reduce_scatter %out, %in : memref<8192xf32>, memref<16384xf32>
    ```
  }];
  let arguments = (ins Plan_Buffer:$out, Plan_Buffer:$in);
  let assemblyFormat = "$out `,` $in attr-dict `:` type($out) `,` type($in)";
  let hasVerifier = 1;
}

def Plan_OutputOp : Plan_Op<"output"> {
  let summary = "a named result of the function; -1 marks the token dimension";
  let arguments = (ins StrAttr:$name, Plan_Buffer:$buffer, DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$name $buffer $shape attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

#endif // MLC_PLAN_OPS_TD
