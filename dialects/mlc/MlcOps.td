//===- MlcOps.td - ops of the mlc graph dialect ------------*- tablegen -*-===//
//
// Every op a GPT-2 or BERT training step needs at the graph level. Result
// types are inferred (InferTypeOpAdaptor) wherever the operands determine
// them; ops whose result shape is a choice (reshape, broadcast, cast, iota)
// spell it out and verify it.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_OPS_TD
#define MLC_OPS_TD

include "dialects/mlc/MlcDialect.td"
include "dialects/mlc/MlcInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Mlc_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the Gaussian CDF", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::mlc";
}

def Mlc_FusionKind : I32EnumAttr<"FusionKind",
    "the loop a fusion region runs as", [
      I32EnumAttrCase<"pointwise", 0>,
      I32EnumAttrCase<"rows", 1>,
      I32EnumAttrCase<"optimizer", 2>,
      I32EnumAttrCase<"norm", 3>,
      I32EnumAttrCase<"params", 4>
    ]> {
  let cppNamespace = "::mlc";
}

def Mlc_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>
    ]> {
  let cppNamespace = "::mlc";
}

//===----------------------------------------------------------------------===//
// ConstantOp, IotaOp
//===----------------------------------------------------------------------===//

def Mlc_ConstantOp : Mlc_Op<"constant",
    [ConstantLike, Pure, InferTypeOpAdaptor]> {
  let summary = "A tensor constant";
  let description = [{
    Materializes a dense tensor literal. Splats keep a large constant small.

    ```mlir
    %zero = mlc.constant dense<0.0> : tensor<4x8xf32>
    %ids = mlc.constant dense<[1, 2, 3]> : tensor<3xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Mlc_IotaOp : Mlc_Op<"iota", [Pure]> {
  let summary = "Counts 0, 1, 2, ... along one dimension";
  let description = [{
    Fills the result with its index along `dimension` (position ids). Works on
    dynamic shapes, where a constant cannot.

    ```mlir
    %pos = mlc.iota dim = 1 : tensor<1x?xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Mlc_NumericTensor:$result);
  let assemblyFormat = "`dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mlc_RotaryTableOp : Mlc_Op<"rotary_table", [Pure]> {
  let summary = "A rotary embedding's cosine or sine table, computed where it is used";
  let description = [{
    The table of a rotary embedding over positions p < S and the head's D
    dimensions, as the builtin Llama's mlc.rotary reads it: element (p, j)
    is cos(p * inv_freq[j mod D/2]), or with `sine` sin(p * inv_freq[j mod
    D/2]) negated on the first half (rotate_half's sign). The result is
    [S, 1..., D]. In f32 the angle is the f32 product of p and the f32
    inv_freq (as transformers computes it) and cos/sin are taken in f64 and
    rounded; otherwise everything is f64. It stands for a constant of S * D
    values that the kernel computes instead of carrying them in its source:
    at 8192 positions the literal tables made kernel sources of 60 MB.

    ```mlir
    %cos = mlc.rotary_table {inv_freq = array<f64: 1.0, 0.01>, sine = false} : tensor<8x1x4xf32>
    ```
  }];
  let arguments = (ins DenseF64ArrayAttr:$inv_freq, BoolAttr:$sine);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// EmbeddingOp, MatmulOp
//===----------------------------------------------------------------------===//

def Mlc_EmbeddingOp : Mlc_Op<"embedding", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Gathers rows of a table (token or position embedding)";
  let description = [{
    `result[i..., :] = weight[indices[i...], :]`. The result has the indices'
    shape followed by the table's row size.

    ```mlir
    %x = mlc.embedding %wte, %input_ids : tensor<50257x768xf32>, tensor<8x1024xi64>
    // %x : tensor<8x1024x768xf32>
    ```

    `padding_idx` is torch's `nn.Embedding(padding_idx=p)`: row `p` is looked
    up like any other, but the lookups of it give the table no gradient, so
    training never moves that row (only weight decay does). The table's other
    uses (a tied output projection) still reach every row.

    ```mlir
    %x = mlc.embedding %wte, %input_ids {padding_idx = 1 : i64} : tensor<256x64xf32>, tensor<2x16xi64>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$weight, Mlc_IntTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Mlc_FloatTensor:$result);
  let builders = [OpBuilder<(ins "::mlir::Value":$weight, "::mlir::Value":$indices), [{
    build($_builder, $_state, weight, indices, ::mlir::IntegerAttr());
  }]>];
  let hasVerifier = 1;
  let assemblyFormat =
      "$weight `,` $indices attr-dict `:` type($weight) `,` type($indices)";
}

def Mlc_MatmulOp : Mlc_Op<"matmul", [Pure, InferTypeOpAdaptor, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `result[b..., m, n] = sum_k op(lhs)[b..., m, k] * op(rhs)[b..., k, n]` where
    `op` transposes the last two dimensions when `transpose_lhs` /
    `transpose_rhs` is set. Batch dimensions broadcast (numpy rules); a rank-2
    operand is shared by every batch. Both operands have rank >= 2 and the same
    element type, which the result has too, except with `f32_result`: bf16
    operands, the f32 sums stored without rounding to bf16 (a weight gradient
    kept in f32, logits read by the loss). An optional `bias` (rank 1, the
    result's columns and element type) is added to every row: the GEMM's
    epilogue, so a linear layer's bias costs no kernel of its own. The
    canonicalizer folds `add(matmul, bias)` (and `add(cast(matmul), bias)`
    of bf16 products) into it. An optional accumulator `acc` (the result's
    type) is added too, `result = op(lhs) op(rhs) (+ bias) + acc`: the BLAS
    call's beta = 1, so a sum of products (the input gradient of Q, K and V
    projections sharing one input) costs no add kernel. mlc-accumulate-gemms
    forms it from `add(matmul, matmul)` in the fused pipeline; the lowering
    writes the product into acc's own buffer where acc has no other reader.

    ```mlir
    %h = mlc.matmul %x, %w : tensor<8x1024x768xf32>, tensor<768x2304xf32>
    %s = mlc.matmul %q, %k transpose_rhs : tensor<8x12x1024x64xf32>, tensor<8x12x1024x64xf32>
    %g = mlc.matmul %a, %d transpose_lhs f32_result : tensor<8192x768xbf16>, tensor<8192x3072xbf16>
    %y = mlc.matmul %x, %w bias(%b : tensor<2304xf32>) : tensor<8x1024x768xf32>, tensor<768x2304xf32>
    %dx = mlc.matmul %dk, %wk acc(%dq : tensor<8x1024x768xf32>) : tensor<8x1024x768xf32>, tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$lhs, Mlc_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       UnitAttr:$f32_result, Optional<Mlc_FloatTensor>:$bias,
                       Optional<Mlc_FloatTensor>:$acc);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    (`f32_result` $f32_result^)? (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`acc` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($lhs) `,` type($rhs)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transpose_lhs, CArg<"bool", "false">:$transpose_rhs,
                   CArg<"bool", "false">:$f32_result), [{
      build($_builder, $_state, lhs, rhs, transpose_lhs, transpose_rhs, f32_result,
            ::mlir::Value(), ::mlir::Value());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The gradients of lhs and rhs (buildGradients adds the bias's and acc's).
    ::mlir::LogicalResult productGradients(::mlir::OpBuilder &b,
                                           ::llvm::ArrayRef<::mlir::Value> rg,
                                           ::llvm::SmallVectorImpl<::mlir::Value> &og);
  }];
}

//===----------------------------------------------------------------------===//
// Binary pointwise ops (numpy broadcasting)
//===----------------------------------------------------------------------===//

class Mlc_BinaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : Mlc_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
        DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasFolder = 1;
}

def Mlc_AddOp : Mlc_BinaryOp<"add", Mlc_NumericTensor, [Commutative]> {
  let summary = "Elementwise sum with broadcasting";
  let description = [{
    Numpy broadcasting: shapes align on the right, and a dimension of 1 stretches.

    ```mlir
    %y = mlc.add %x, %bias : tensor<8x1024x768xf32>, tensor<768xf32>
    ```
  }];
  let hasCanonicalizer = 1;
}

def Mlc_SubOp : Mlc_BinaryOp<"sub", Mlc_NumericTensor> {
  let summary = "Elementwise difference with broadcasting";
  let description = [{
    ```mlir
    %y = mlc.sub %x, %mean : tensor<8x768xf32>, tensor<8x1xf32>
    ```
  }];
}

def Mlc_MulOp : Mlc_BinaryOp<"mul", Mlc_NumericTensor, [Commutative]> {
  let summary = "Elementwise product with broadcasting";
  let description = [{
    ```mlir
    %y = mlc.mul %x, %gamma : tensor<8x768xf32>, tensor<768xf32>
    ```
  }];
}

def Mlc_DivOp : Mlc_BinaryOp<"div", Mlc_NumericTensor> {
  let summary = "Elementwise quotient with broadcasting";
  let description = [{
    ```mlir
    %y = mlc.div %scores, %scale : tensor<8x12x64x64xf32>, tensor<f32>
    ```
  }];
}

def Mlc_PowOp : Mlc_BinaryOp<"pow", Mlc_FloatTensor> {
  let summary = "Elementwise power with broadcasting";
  let description = [{
    ```mlir
    %y = mlc.pow %x, %three : tensor<8x3072xf32>, tensor<f32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Unary pointwise ops
//===----------------------------------------------------------------------===//

class Mlc_UnaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : Mlc_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
        DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>])> {
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Mlc_NegOp : Mlc_UnaryOp<"neg", Mlc_NumericTensor> {
  let summary = "Elementwise negation";
  let description = [{
    ```mlir
    %y = mlc.neg %x : tensor<8x768xf32>
    ```
  }];
  let hasFolder = 1;
}

def Mlc_ExpOp : Mlc_UnaryOp<"exp", Mlc_FloatTensor> {
  let summary = "Elementwise e^x";
  let description = [{
    ```mlir
    %y = mlc.exp %x : tensor<8x768xf32>
    ```
  }];
}

def Mlc_LogOp : Mlc_UnaryOp<"log", Mlc_FloatTensor> {
  let summary = "Elementwise natural logarithm";
  let description = [{
    ```mlir
    %y = mlc.log %x : tensor<8x768xf32>
    ```
  }];
}

def Mlc_TanhOp : Mlc_UnaryOp<"tanh", Mlc_FloatTensor> {
  let summary = "Elementwise hyperbolic tangent";
  let description = [{
    ```mlir
    %y = mlc.tanh %x : tensor<8x3072xf32>
    ```
  }];
}

def Mlc_ErfOp : Mlc_UnaryOp<"erf", Mlc_FloatTensor> {
  let summary = "Elementwise Gauss error function";
  let description = [{
    ```mlir
    %y = mlc.erf %x : tensor<8x3072xf32>
    ```
  }];
}

def Mlc_SqrtOp : Mlc_UnaryOp<"sqrt", Mlc_FloatTensor> {
  let summary = "Elementwise square root";
  let description = [{
    ```mlir
    %y = mlc.sqrt %x : tensor<8x1xf32>
    ```
  }];
}

def Mlc_RsqrtOp : Mlc_UnaryOp<"rsqrt", Mlc_FloatTensor> {
  let summary = "Elementwise reciprocal square root";
  let description = [{
    ```mlir
    %y = mlc.rsqrt %var : tensor<8x1xf32>
    ```
  }];
}

def Mlc_GeluOp : Mlc_UnaryOp<"gelu", Mlc_FloatTensor> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate = none` (BERT): `x * 0.5 * (1 + erf(x / sqrt(2)))`.
    `approximate = tanh` (GPT-2's `gelu_new`):
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.

    ```mlir
    %y = mlc.gelu %x approximate = tanh : tensor<8x3072xf32>
    %z = mlc.gelu %x : tensor<8x3072xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input,
      DefaultValuedAttr<Mlc_GeluApproximation, "::mlc::GeluApproximation::none">:$approximate);
  let assemblyFormat =
      "$input (`approximate` `=` $approximate^)? attr-dict `:` type($result)";
}

def Mlc_SiluOp : Mlc_UnaryOp<"silu", Mlc_FloatTensor> {
  let summary = "Sigmoid linear unit (swish): x * sigmoid(x)";
  let description = [{
    `x / (1 + exp(-x))`: the activation of Llama's gated MLP,
    `down(silu(gate(x)) * up(x))`. Its gradient is
    `g * s * (1 + x * (1 - s))` with `s = sigmoid(x)`, written with
    existing pointwise ops so that it fuses like any other chain.

    ```mlir
    %y = mlc.silu %gate : tensor<8x1024x5632xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

def Mlc_RotaryOp : Mlc_Op<"rotary", [Pure, AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["cos", "sin"]>, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Rotary position embedding: x * cos + partner(x) * sin";
  let description = [{
    Rotates each pair of elements of the last (head) dimension of `input`
    by the angle of its position (`[B, H, S, D]` with `[S, D]` tables, or
    the projection's rows `[B, S, H, D]` with `[S, 1, D]` tables, as the
    builtin Llama does so that the head split is a view on both sides): `result[d] = x[d] * cos[d] + x[p(d)] * sin[d]`, with
    `p` the pair partner of element `d`:

    - rotate-half (HF's `rotate_half`, the default): the head dim seen as
      `[2, D/2]`, the partner of `(j, i)` is `(1 - j, i)`;
    - `interleaved` (GPT-J, ONNX `RotaryEmbedding` with `interleaved = 1`):
      the head dim seen as `[D/2, 2]`, the partner of `(i, j)` is `(i, 1 - j)`.

    `cos` and `sin` are per-element tables of the last dimension, broadcast
    against `input` (`[S, R]` for one position per row, `[B, 1, S, R]` for
    position ids per sequence, e.g. packed documents whose positions reset;
    `[S, 1, R]` and `[B, S, 1, R]` over `[B, S, H, D]`).
    Their last dim `R` is the rotary dim: the first `R` elements of the head
    dim rotate (pairs within them) and the other `D - R` pass through
    (`partial_rotary_factor = R / D`, ONNX's `rotary_embedding_dim`).
    `sin` carries rotate-half's sign: where the partner comes first in HF's
    formula (`-x2 * sin` on the first half, `+x1 * sin` on the second), the
    table holds `-sin` and `+sin`, so the op is a sum of two products and no
    sign depends on the index. The tables are constants of the step (they
    come from the positions, nothing trained), so they get no gradient.

    `transpose` reads `sin` at the partner too:
    `result[d] = x[d] * cos[d] + x[p(d)] * sin[p(d)]`. That is the transpose
    of the rotation (the rotation by `-theta`), the gradient of the op:
    `d input = mlc.rotary %dy, %cos, %sin transpose`, and the gradient of a
    transposed op is the plain one.

    In a kernel the partner is one more strided read of the same buffer (at
    offset `R/2` with stride `-R/2` along the split dim, or `1` and `-1`
    when interleaved), so the op is pointwise over the split iteration
    space and reads each element once from memory (the partner's line is the
    element's own or its neighbour's). A partial rotation is two nests (the
    rotated part and the pass-through copy) and fuses with nothing.

    ```mlir
    %q = mlc.rotary %x, %cos, %sin : tensor<8x32x1024x64xf32>, tensor<1024x64xf32>
    %g = mlc.rotary %dy, %cos, %sin interleaved transpose
        : tensor<8x32x1024x64xf32>, tensor<1024x64xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, Mlc_FloatTensor:$cos, Mlc_FloatTensor:$sin,
                       UnitAttr:$interleaved, UnitAttr:$transpose);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin (`interleaved` $interleaved^)? (`transpose` $transpose^)?
    attr-dict `:` type($input) `,` type($cos)
  }];
  let hasVerifier = 1;
}

def Mlc_SwigluOp : Mlc_Op<"swiglu", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Gated linear unit with SiLU: silu(gate) * up";
  let description = [{
    The product of Llama's gated MLP, `down(silu(gate(x)) * up(x))`, as one
    elementwise op. Its gradient is written from `gate` and `up` alone
    (`d up = g * silu(gate)`, `d gate = g * up * s * (1 + gate * (1 - s))`
    with `s = sigmoid(gate)`), so the forward kernel stores only the
    product (no SiLU saved for the backward) and the two gradients, which
    read the same inputs, are one backward kernel: 8 bytes read and 4
    written per element forward, 12 read and 8 written backward (f32).

    ```mlir
    %h = mlc.swiglu %gate, %up : tensor<8x1024x5632xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$gate, Mlc_FloatTensor:$up);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// CompareOp, SelectOp, CastOp
//===----------------------------------------------------------------------===//

def Mlc_CompareOp : Mlc_Op<"compare", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Elementwise comparison with broadcasting; yields i1";
  let description = [{
    ```mlir
    %keep = mlc.compare ne %labels, %ignore : tensor<8x1024xi64>, tensor<i64>
    ```
  }];
  let arguments = (ins Mlc_ComparePredicate:$predicate,
                       Mlc_NumericTensor:$lhs, Mlc_NumericTensor:$rhs);
  let results = (outs Mlc_BoolTensor:$result);
  let assemblyFormat =
      "$predicate $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Mlc_SelectOp : Mlc_Op<"select", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Elementwise choice: condition ? true_value : false_value";
  let description = [{
    All three operands broadcast together (numpy rules).

    ```mlir
    %m = mlc.select %causal, %scores, %neg_inf : tensor<64x64xi1>, tensor<8x12x64x64xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Mlc_BoolTensor:$condition, Mlc_AnyTensor:$true_value,
                       Mlc_AnyTensor:$false_value);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:`
    type($condition) `,` type($true_value) `,` type($false_value)
  }];
}

def Mlc_CastOp : Mlc_Op<"cast", [Pure, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Converts the element type; the shape stays";
  let description = [{
    ```mlir
    %f = mlc.cast %mask : tensor<8x1024xi64> -> tensor<8x1024xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def Mlc_ReshapeOp : Mlc_Op<"reshape", [Pure, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Reinterprets the elements in a new shape (row-major)";
  let description = [{
    The element count is kept. A dynamic result dimension is either the same
    leading dynamic dimension as the input's, or the single dimension that the
    element count determines at run time.

    ```mlir
    %h = mlc.reshape %x : tensor<8x1024x768xf32> -> tensor<8x1024x12x64xf32>
    %t = mlc.reshape %y : tensor<?x1024x768xf32> -> tensor<?x768xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Mlc_TransposeOp : Mlc_Op<"transpose", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Permutes dimensions: result dim i = input dim permutation[i]";
  let description = [{
    ```mlir
    %h = mlc.transpose %x, [0, 2, 1, 3] : tensor<8x1024x12x64xf32>
    // %h : tensor<8x12x1024x64xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = "$input `,` $permutation attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Mlc_BroadcastOp : Mlc_Op<"broadcast", [Pure, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Expands to a larger shape (numpy broadcasting)";
  let description = [{
    ```mlir
    %b = mlc.broadcast %bias : tensor<768xf32> -> tensor<8x1024x768xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Mlc_SliceOp : Mlc_Op<"slice", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Strided slice along every dimension (Python semantics)";
  let description = [{
    For each dimension: `start:end:step` with Python's rules (negative indices
    count from the end, out-of-range bounds clamp), step >= 1. One entry per
    dimension in each of `starts`, `ends`, `steps`.

    ```mlir
    // logits[:, :-1, :]
    %l = mlc.slice %logits starts = [0, 0, 0] ends = [8, -1, 50257] steps = [1, 1, 1]
        : tensor<8x1024x50257xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$steps);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `ends` `=` $ends `steps` `=` $steps attr-dict
    `:` type($input)
  }];
  let hasFolder = 1;
}

def Mlc_ConcatOp : Mlc_Op<"concat", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Joins tensors along one dimension";
  let description = [{
    ```mlir
    %qkv = mlc.concat(%q, %k, %v) axis = 2 : tensor<8x1024x768xf32>, tensor<8x1024x768xf32>, tensor<8x1024x768xf32>
    ```
  }];
  let arguments = (ins Variadic<Mlc_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat =
      "`(` $inputs `)` `axis` `=` $axis attr-dict `:` type($inputs)";
  let hasFolder = 1;
}

def Mlc_SplitOp : Mlc_Op<"split", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Cuts a tensor into pieces of the given sizes along one dimension";
  let description = [{
    ```mlir
    %q, %k, %v = mlc.split %qkv axis = 2 sizes = [768, 768, 768] : tensor<8x1024x2304xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Mlc_AnyTensor>:$results);
  let assemblyFormat =
      "$input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:` type($input)";
}

def Mlc_CumSumOp : Mlc_Op<"cumsum", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Running sum along one axis (ONNX CumSum)";
  let description = [{
    result[..., i, ...] = the sum of input[..., j, ...] over j <= i along
    `axis` (j < i with `exclusive`; from the end, j >= i or j > i, with
    `reverse`), in the input's type: integers exactly. Position ids from
    a run-time attention mask are its common use (`cumsum(mask) * mask -
    1` in a model exported with an `attention_mask` input). The gradient of
    a float running sum is the running sum of the gradient the other way.

    ```mlir
    %c = mlc.cumsum %mask axis = 1 : tensor<8x1024xi64>
    %r = mlc.cumsum %x axis = -1 exclusive reverse : tensor<2x4x6xf32>
    ```
  }];
  let arguments = (ins Mlc_NumericTensor:$input, I64Attr:$axis, UnitAttr:$exclusive,
                       UnitAttr:$reverse);
  let results = (outs Mlc_NumericTensor:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis (`exclusive` $exclusive^)? (`reverse` $reverse^)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Mlc_ReduceOp<string mnemonic, Type operandType>
    : Mlc_Op<mnemonic, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let arguments = (ins operandType:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs operandType:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:` type($input)
  }];
}

def Mlc_ReduceSumOp : Mlc_ReduceOp<"reduce_sum", Mlc_NumericTensor> {
  let summary = "Sum over the given axes";
  let description = [{
    Axes may be negative (counted from the end); each appears once. With
    `keepdims` the reduced dimensions stay as size 1.

    ```mlir
    %s = mlc.reduce_sum %x axes = [-1] keepdims : tensor<8x768xf32>
    ```
  }];
}

def Mlc_ReduceMeanOp : Mlc_ReduceOp<"reduce_mean", Mlc_FloatTensor> {
  let summary = "Mean over the given axes";
  let description = [{
    ```mlir
    %m = mlc.reduce_mean %x axes = [0, 1] : tensor<8x1024x768xf32>
    ```
  }];
}

def Mlc_ReduceMaxOp : Mlc_ReduceOp<"reduce_max", Mlc_NumericTensor> {
  let summary = "Maximum over the given axes";
  let description = [{
    ```mlir
    %m = mlc.reduce_max %x axes = [-1] keepdims : tensor<8x12x64x64xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Normalizations and losses
//===----------------------------------------------------------------------===//

def Mlc_SoftmaxOp : Mlc_Op<"softmax", [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "exp(x - max) / sum(exp(x - max)) along one axis";
  let description = [{
    ```mlir
    %p = mlc.softmax %scores axis = -1 : tensor<8x12x64x64xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mlc_LogSoftmaxOp : Mlc_Op<"log_softmax", [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "x - max - log(sum(exp(x - max))) along one axis";
  let description = [{
    ```mlir
    %lp = mlc.log_softmax %logits axis = -1 : tensor<8192x50257xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mlc_LayerNormOp : Mlc_Op<"layer_norm", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * weight + bias`, with the mean and
    the biased variance taken over the last dimension; `weight` and `bias` have
    that dimension's size.

    ```mlir
    %y = mlc.layer_norm %x, %gamma, %beta epsilon = 1.0e-05
        : tensor<8x1024x768xf32>, tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, Mlc_FloatTensor:$weight,
                       Mlc_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `epsilon` `=` $epsilon attr-dict `:`
    type($input) `,` type($weight) `,` type($bias)
  }];
}

def Mlc_RmsNormOp : Mlc_Op<"rms_norm", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Root-mean-square normalization over the last dimension";
  let description = [{
    `y = weight * (x * rstd)` with `rstd = 1 / sqrt(mean(x^2) + epsilon)`,
    the mean taken over the last dimension; `weight` has that dimension's
    size. No mean is subtracted and there is no bias (Llama's, Qwen2's and
    ONNX opset 23's RMSNormalization). The row statistic is computed in
    double by the kernels; `x * rstd` is rounded to the element type before
    the weight multiplies it, the order transformers' LlamaRMSNorm uses.

    ```mlir
    %y = mlc.rms_norm %x, %w epsilon = 1.0e-06
        : tensor<8x1024x4096xf32>, tensor<4096xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, Mlc_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `epsilon` `=` $epsilon attr-dict `:` type($input) `,` type($weight)
  }];
}

def Mlc_CrossEntropyOp : Mlc_Op<"cross_entropy", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Mean softmax cross-entropy over rows, skipping ignored labels";
  let description = [{
    `loss = sum_{i: labels[i] != ignore_index} -log_softmax(logits[i])[labels[i]]
    / count(labels != ignore_index)`, as `torch.nn.functional.cross_entropy`
    with `reduction='mean'` (0 when every label is ignored). Logits are
    `[rows, classes]`, labels `[rows]`; the loss is a 0-d tensor.

    ```mlir
    %loss = mlc.cross_entropy %logits, %labels ignore_index = -100
        : tensor<8184x50257xf32>, tensor<8184xi64>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$logits, Mlc_IntTensor:$labels,
                       I64Attr:$ignore_index);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `ignore_index` `=` $ignore_index attr-dict `:`
    type($logits) `,` type($labels)
  }];
}

def Mlc_DropoutOp : Mlc_Op<"dropout", [Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Zeroes elements with probability `ratio`, scales the rest";
  let description = [{
    Training-mode dropout: each element is kept with probability `1 - ratio`
    and scaled by `1 / (1 - ratio)`. The mask comes from a counter-based
    generator keyed by `seed`, the training step and the element index, so
    the backward pass regenerates it instead of storing it. `ratio = 0` is
    the identity.

    A block of a larger tensor (`block %rank of N span S`): the input is
    block `r` of `N` equal blocks of a whole tensor that one process would
    hold, `r` read at run time from `%rank` (a `tensor<1xf64>`: the
    "tp_rank" scalars of tensor parallelism). Split along dim `A`, the
    block's flat elements come in rows of `S` = the product of its dims
    from `A` on, and its element `i` is the whole tensor's element
    `(i / S * N + r) * S + i % S`. Each element draws the number one
    process draws for that element of the whole tensor, so the ranks'
    masks are the blocks of one process's mask. `S` (not `A`) is what the
    op keeps, so a kernel's scalar copy of the op keeps it too; the
    verifier checks that it is the product of a suffix of the input's
    dims. `mlc-shard-tensor-parallel` sets it on the dropouts of split
    values; any dim can be split (heads, hidden units, or the tokens of a
    sequence-parallel stream: `S` is then the whole block for dim 0).

    ```mlir
    %y = mlc.dropout %x ratio = 1.0e-01 seed = 7 : tensor<8x1024x768xf32>
    %z = mlc.dropout %h ratio = 1.0e-01 seed = 9 block %rank of 2 span 1536
        : tensor<8x1024x1536xf32>, tensor<1xf64>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, F64Attr:$ratio, I64Attr:$seed,
                       Optional<RankedTensorOf<[F64]>>:$rank,
                       OptionalAttr<I64Attr>:$blocks, OptionalAttr<I64Attr>:$span);
  let results = (outs Mlc_FloatTensor:$result);
  let builders = [
    // Dropout of a whole tensor.
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::FloatAttr":$ratio,
                   "::mlir::IntegerAttr":$seed), [{
      build($_builder, $_state, input.getType(), input, ratio, seed, ::mlir::Value(),
            ::mlir::IntegerAttr(), ::mlir::IntegerAttr());
    }]>];
  let assemblyFormat = [{
    $input `ratio` `=` $ratio `seed` `=` $seed
    (`block` $rank^ `of` $blocks `span` $span)? attr-dict `:` type($result)
    (`,` type($rank)^)?
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Tensor-parallel collectives: TpCopyOp, TpReduceOp
//===----------------------------------------------------------------------===//

def Mlc_TpReduceKind : I32EnumAttr<"TpReduceKind",
    "how mlc.tp_reduce combines the ranks' tensors", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"max", 1>
    ]> {
  let cppNamespace = "::mlc";
}

def Mlc_TpCopyOp : Mlc_Op<"tp_copy", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Enters a tensor-parallel region: identity forward, all-reduce backward";
  let description = [{
    Megatron-LM's `f` (`copy_to_tensor_model_parallel_region`). Every rank of
    the tensor-parallel group holds the same `input` (a replicated
    activation); each rank feeds it to its own shard of the column-parallel
    projections that follow. The forward is the identity. Each rank's
    adjoint is only its shard's part of the full gradient, so the gradient
    rule is `mlc.tp_reduce sum`: the all-reduce that makes the adjoint whole
    on every rank. `mlc-shard-tensor-parallel` places it on the input of
    every column-parallel region.

    ```mlir
    %x1 = mlc.tp_copy %x : tensor<8x1024x768xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Mlc_TpReduceOp : Mlc_Op<"tp_reduce", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "All-reduce over the tensor-parallel group (sum or max)";
  let description = [{
    `sum` is Megatron-LM's `g` (`reduce_from_tensor_model_parallel_region`):
    each rank holds a partial sum (a row-parallel projection's product over
    its shard of the hidden units) and every rank gets the total. Its
    consumers are replicated, so every rank holds the same whole adjoint of
    the result, which is already each partial's adjoint: the gradient rule is
    `mlc.tp_copy` (the identity forward, whose own gradient is this
    all-reduce again, so the pair stays dual under repeated differentiation).

    `max` is the maximum over the group, the shift of a vocabulary-parallel
    softmax (Megatron's `vocab_parallel_cross_entropy`). Its gradient goes to
    the elements that attain the maximum (`select(input == result, g, 0)`,
    the rule of `mlc.reduce_max`), assuming, like `sum`, that every rank
    holds the whole adjoint. A shift read by each rank's own columns has
    only a partial adjoint per rank: put an `mlc.tp_copy` after the max (as
    mlc-shard-tensor-parallel does), whose all-reduce makes it whole (zero
    in exact arithmetic, as a softmax's shift changes nothing).

    ```mlir
    %y = mlc.tp_reduce sum %partial : tensor<8x1024x768xf32>
    %m = mlc.tp_reduce max %local_max : tensor<8192x1xf32>
    ```
  }];
  let arguments = (ins Mlc_TpReduceKind:$kind, Mlc_FloatTensor:$input);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($result)";
}

// Sequence parallelism (Megatron-LM's --sequence-parallel): between the
// tensor-parallel regions, norms and dropout run on each rank's slice of
// the tokens; a region's entry gathers the tokens and its exit sums the
// partial products and scatters them. The pair is conjugate like tp_copy /
// tp_reduce sum: each is the other's gradient. Verified and differentiated
// in MlcCollectives.cpp.

def Mlc_TpAllGatherOp : Mlc_Op<"tp_all_gather", [Pure,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Joins the ranks' slices along one dim (all-gather over the tensor-parallel group)";
  let description = [{
    Megatron-LM's `gather_from_sequence_parallel_region`: each rank of the
    group holds a slice of dim `axis` (its tokens); every rank gets the whole
    tensor, the ranks' slices in rank order, so `axis` grows by the group's
    size. Under sequence parallelism it takes the place of `mlc.tp_copy` at
    a region's entry. The adjoint each rank then holds of the whole is only
    its own part, so the gradient rule is `mlc.tp_reduce_scatter` along the
    same dim: summed over the group, each rank keeping its slice.

    ```mlir
    %x = mlc.tp_all_gather %xs axis = 1 : tensor<8x512x768xf32> -> tensor<8x1024x768xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mlc_TpReduceScatterOp : Mlc_Op<"tp_reduce_scatter", [Pure,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Sums over the tensor-parallel group, each rank keeping a slice of one dim";
  let description = [{
    Megatron-LM's `reduce_scatter_to_sequence_parallel_region`: each rank
    holds a partial sum (a row-parallel product); the sum over the group is
    cut along dim `axis` into the group's size slices and rank r keeps the
    r-th, so `axis` shrinks by the group's size. Under sequence parallelism
    it takes the place of `mlc.tp_reduce sum` after a row-parallel product.
    Its gradient rule is `mlc.tp_all_gather` along the same dim: each rank's
    slice of the adjoint, joined, is the adjoint of every partial sum.

    ```mlir
    %ys = mlc.tp_reduce_scatter %partial axis = 1 : tensor<8x1024x768xf32> -> tensor<8x512x768xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def Mlc_AttentionOp : Mlc_Op<"attention",
    [Pure, AttrSizedOperandSegments, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Scaled dot-product attention (padded or variable-length)";
  let description = [{
    `softmax(scale * q k^T + mask) v`, row by row, with `scale` defaulting to
    `1/sqrt(head_dim)`.

    Padded form: `query [B, H, Sq, D]`, `key [B, H, Sk, D]`,
    `value [B, H, Sk, Dv]` give `[B, H, Sq, Dv]`. The optional additive `mask`
    broadcasts to `[B, H, Sq, Sk]` (BERT's `(1 - attention_mask) * -10000`).
    `causal` lets query `i` see keys `j <= i` (GPT-2).

    Grouped-query attention (Llama, Mistral, Qwen2): `key` and `value` may
    have `H_kv` heads where `H_kv` divides `H`; query head `h` reads kv head
    `h / (H / H_kv)`, and the kernels index K/V by the kv head rather than
    repeating them in memory (the gradients of a kv head sum its group).

    Variable-length form: with `cu_seqlens` (`[N + 1]` int32 offsets into
    the packed token dimension), `query`/`key`/`value` are `[T, H, D]` for
    `T` tokens of `N` sequences, and a token attends only within its own
    sequence: no padding is stored or computed.

    Rotary embedding (`rotary %cos, %sin`, `mlc-fold-rotary`): `query` and
    `key` are read rotated, `mlc.rotary`'s rotation of their rows (pairs of
    the first `R` head dims; `interleaved` pairs `(2i, 2i + 1)`, else
    rotate-half's), so the rotated Q and K are never written to memory.
    The tables are `[B | 1, 1, S | 1, R]` (varlen: `[T | 1, 1, R]`):
    broadcast over the heads (Q's and the kv heads alike), one row per
    position, which Q and K share (`Sq = Sk`). The gradients are those of
    the unrotated inputs; the tables get none.

    Soft-capping (`softcap = c`, Gemma 2's `attn_logit_softcapping`,
    FlashAttention's `softcap`): each score `s = scale * q k^T` becomes
    `c * tanh(s / c)` before the mask and the softmax, so no logit leaves
    (-c, c). The backward pass multiplies the scores' gradient by
    `1 - tanh^2(s / c)`. Both kernels apply it as they form the scores.

    Sliding window (`window = W`, with `causal`: Mistral's `sliding_window`,
    FlashAttention's `window_size = (W - 1, 0)`): query `i` sees the `W`
    keys `i - W + 1 .. i` only. The kernels skip the keys outside the
    window; no mask is built or read.

    `bf16_result` (`mlc-fold-casts`, `--dtype bf16`): the result is stored
    in bf16, the conversion at the kernel's store, where its only reader
    was a cast to bf16 for the next product; the kernel computes as before.

    `dropout` drops attention probabilities in training (HF's `attn_pdrop`,
    `attention_probs_dropout_prob`) with masks drawn like `mlc.dropout`'s
    from `seed`, the step and the probability's index, so the backward pass
    regenerates them. With `block %rank of N along A` the probabilities
    are block `r` of `N` along dim `A` of one process's (`r` read from
    `%rank` at run time, as `mlc.dropout`'s block): each draws the number
    one process draws for the same probability. Dropout's counter space is
    the probabilities' `[B, H, Sq, Sk]` (varlen: `[H, C, C]`, C the token
    capacity), so a split of the heads is `along 1` (varlen: `along 0`);
    any dim but the keys' can be split.

    ```mlir
    %o = mlc.attention %q, %k, %v causal
        : tensor<8x12x1024x64xf32>, tensor<8x12x1024x64xf32>, tensor<8x12x1024x64xf32>
    %p = mlc.attention %q, %k, %v mask %m
        : tensor<8x12x128x64xf32>, tensor<8x12x128x64xf32>, tensor<8x12x128x64xf32>, tensor<8x1x1x128xf32>
    %d = mlc.attention %q, %k, %v causal dropout = 1.0e-01 seed = 4
        : tensor<8x12x1024x64xf32>, tensor<8x12x1024x64xf32>, tensor<8x12x1024x64xf32>
    %u = mlc.attention %qt, %kt, %vt cu_seqlens %cu
        : tensor<?x12x64xf32>, tensor<?x12x64xf32>, tensor<?x12x64xf32>, tensor<9xi32>
    %r = mlc.attention %q, %k, %v rotary %cos, %sin causal
        : tensor<8x32x1024x64xf32>, tensor<8x4x1024x64xf32>, tensor<8x4x1024x64xf32>,
          tensor<1x1x1024x64xf32>, tensor<1x1x1024x64xf32>
    %c = mlc.attention %q, %k, %v causal scale = 6.25e-02 softcap = 5.0e+01
        : tensor<8x8x1024x256xf32>, tensor<8x4x1024x256xf32>, tensor<8x4x1024x256xf32>
    %w = mlc.attention %q, %k, %v causal window = 4096
        : tensor<8x32x8192x128xf32>, tensor<8x8x8192x128xf32>, tensor<8x8x8192x128xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$query, Mlc_FloatTensor:$key,
                       Mlc_FloatTensor:$value,
                       Optional<Mlc_FloatTensor>:$mask,
                       Optional<RankedTensorOf<[I32]>>:$cu_seqlens,
                       Optional<Mlc_FloatTensor>:$cos, Optional<Mlc_FloatTensor>:$sin,
                       Optional<RankedTensorOf<[F64]>>:$rank,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$seed, UnitAttr:$interleaved,
                       OptionalAttr<F64Attr>:$softcap, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<I64Attr>:$blocks, OptionalAttr<I64Attr>:$axis,
                       UnitAttr:$bf16_result);
  let builders = [
    // Attention without rotary tables (and soft-capping when given).
    OpBuilder<(ins "::mlir::Value":$query, "::mlir::Value":$key, "::mlir::Value":$value,
                   "::mlir::Value":$mask, "::mlir::Value":$cu_seqlens,
                   "::mlir::UnitAttr":$causal, "::mlir::FloatAttr":$scale,
                   "::mlir::FloatAttr":$dropout, "::mlir::IntegerAttr":$seed,
                   CArg<"::mlir::FloatAttr", "{}">:$softcap,
                   CArg<"::mlir::IntegerAttr", "{}">:$window), [{
      build($_builder, $_state, query, key, value, mask, cu_seqlens, ::mlir::Value(),
            ::mlir::Value(), ::mlir::Value(), causal, scale, dropout, seed, ::mlir::UnitAttr(),
            softcap, window, ::mlir::IntegerAttr(), ::mlir::IntegerAttr(), ::mlir::UnitAttr());
    }]>,
    // Every operand and attribute but bf16_result (f32 results).
    OpBuilder<(ins "::mlir::Value":$query, "::mlir::Value":$key, "::mlir::Value":$value,
                   "::mlir::Value":$mask, "::mlir::Value":$cu_seqlens, "::mlir::Value":$cos,
                   "::mlir::Value":$sin, "::mlir::Value":$rank, "::mlir::UnitAttr":$causal,
                   "::mlir::FloatAttr":$scale, "::mlir::FloatAttr":$dropout,
                   "::mlir::IntegerAttr":$seed, "::mlir::UnitAttr":$interleaved,
                   "::mlir::FloatAttr":$softcap, "::mlir::IntegerAttr":$window,
                   "::mlir::IntegerAttr":$blocks, "::mlir::IntegerAttr":$axis), [{
      build($_builder, $_state, query, key, value, mask, cu_seqlens, cos, sin, rank, causal,
            scale, dropout, seed, interleaved, softcap, window, blocks, axis, ::mlir::UnitAttr());
    }]>];
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`cu_seqlens` $cu_seqlens^)?
    (`rotary` $cos^ `,` $sin)? (`interleaved` $interleaved^)? (`causal` $causal^)? (`scale` `=` $scale^)?
    (`softcap` `=` $softcap^)? (`window` `=` $window^)? (`dropout` `=` $dropout^ `seed` `=` $seed)?
    (`block` $rank^ `of` $blocks `along` $axis)? (`bf16_result` $bf16_result^)? attr-dict `:` type(operands)
  }];
}

//===----------------------------------------------------------------------===//
// PadOp and the backward ops that autodiff emits
//===----------------------------------------------------------------------===//

def Mlc_PadOp : Mlc_Op<"pad", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Mlc_GradientOpInterface>]> {
  let summary = "Surrounds a tensor with zeros";
  let description = [{
    Adds `low[d]` zeros before and `high[d]` zeros after dimension `d`. The
    gradient of a slice is the pad of the result's gradient.

    ```mlir
    %p = mlc.pad %g low = [0, 0, 0] high = [0, 1, 0] : tensor<8x1023x50257xf32>
    // %p : tensor<8x1024x50257xf32>
    ```
  }];
  let arguments = (ins Mlc_AnyTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high);
  let results = (outs Mlc_AnyTensor:$result);
  let assemblyFormat =
      "$input `low` `=` $low `high` `=` $high attr-dict `:` type($input)";
}

def Mlc_GeluGradOp : Mlc_Op<"gelu_grad", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Mlc_ScalarOpInterface>]> {
  let summary = "Gradient of gelu: grad * gelu'(input)";
  let description = [{
    ```mlir
    %dx = mlc.gelu_grad %g, %x approximate = tanh : tensor<8x3072xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_FloatTensor:$input,
      DefaultValuedAttr<Mlc_GeluApproximation, "::mlc::GeluApproximation::none">:$approximate);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $input (`approximate` `=` $approximate^)? attr-dict `:` type($result)";
}

def Mlc_SoftmaxGradOp : Mlc_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of softmax from its output: y * (g - sum(g * y))";
  let description = [{
    ```mlir
    %dx = mlc.softmax_grad %g, %y axis = -1 : tensor<8x12x64x64xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_FloatTensor:$output, I64Attr:$axis);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $output `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Mlc_LayerNormGradOp : Mlc_Op<"layer_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of layer_norm: input, weight and bias";
  let description = [{
    Recomputes the row mean and reciprocal standard deviation from `input`,
    then with `xhat = (x - mean) * rstd` and `dxhat = grad * weight`:
    `d_input = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`,
    `d_weight = sum over rows of grad * xhat`, `d_bias = sum over rows of grad`.

    With `plus %r` (of the input's type), `d_input` is `r + ...`: the
    residual stream's gradient, added in the row kernel that writes
    `d_input`, as `rms_norm_grad`'s `plus` does.

    ```mlir
    %dx, %dw, %db = mlc.layer_norm_grad %g, %x, %w epsilon = 1.0e-05
        : tensor<8x768xf32>, tensor<8x768xf32>, tensor<768xf32>
    %dx2, %dw2, %db2 = mlc.layer_norm_grad %g, %x, %w plus %r epsilon = 1.0e-05
        : tensor<8x768xf32>, tensor<8x768xf32>, tensor<768xf32>, tensor<8x768xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_FloatTensor:$input,
                       Mlc_FloatTensor:$weight, Optional<Mlc_FloatTensor>:$residual,
                       F64Attr:$epsilon);
  let results = (outs Mlc_FloatTensor:$input_grad, Mlc_FloatTensor:$weight_grad,
                      Mlc_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight (`plus` $residual^)? `epsilon` `=` $epsilon attr-dict `:`
    type($grad) `,` type($input) `,` type($weight) (`,` type($residual)^)?
  }];
}

def Mlc_RmsNormGradOp : Mlc_Op<"rms_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of rms_norm: input and weight";
  let description = [{
    Recomputes the row's `rstd = 1 / sqrt(mean(x^2) + epsilon)` from
    `input`, then with `xhat = x * rstd` and `dxhat = grad * weight`:
    `d_input = rstd * (dxhat - xhat * mean(dxhat * xhat))` and
    `d_weight = sum over rows of grad * xhat`.

    With `plus %r` (of the input's type), `d_input` is `r + ...`: the
    residual stream's gradient, added in the row kernel that writes
    `d_input` (`mlc-fuse-elementwise` forms it from the adjoint sum
    `d_input + r`), so the sum never makes a pass of its own.

    ```mlir
    %dx, %dw = mlc.rms_norm_grad %g, %x, %w epsilon = 1.0e-06
        : tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<4096xf32>
    %dx2, %dw2 = mlc.rms_norm_grad %g, %x, %w plus %r epsilon = 1.0e-06
        : tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<4096xf32>, tensor<8x4096xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_FloatTensor:$input,
                       Mlc_FloatTensor:$weight, Optional<Mlc_FloatTensor>:$residual,
                       F64Attr:$epsilon);
  let results = (outs Mlc_FloatTensor:$input_grad, Mlc_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight (`plus` $residual^)? `epsilon` `=` $epsilon attr-dict `:`
    type($grad) `,` type($input) `,` type($weight) (`,` type($residual)^)?
  }];
}

def Mlc_CrossEntropyGradOp : Mlc_Op<"cross_entropy_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradient of mean cross-entropy with respect to the logits";
  let description = [{
    `d_logits[i] = grad * (softmax(logits[i]) - onehot(labels[i])) / count`
    for rows whose label is not `ignore_index` (0 elsewhere), where `count`
    is the number of such rows.

    ```mlir
    %dl = mlc.cross_entropy_grad %g, %logits, %labels ignore_index = -100
        : tensor<f32>, tensor<8184x50257xf32>, tensor<8184xi64>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_FloatTensor:$logits,
                       Mlc_IntTensor:$labels, I64Attr:$ignore_index);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $labels `ignore_index` `=` $ignore_index attr-dict `:`
    type($grad) `,` type($logits) `,` type($labels)
  }];
}

def Mlc_EmbeddingGradOp : Mlc_Op<"embedding_grad", [Pure]> {
  let summary = "Gradient of embedding: scatter-adds rows into a zero table";
  let description = [{
    `result[indices[i...], :] += grad[i..., :]`; rows never looked up get 0.
    With `padding_idx = p` (torch's `nn.Embedding(padding_idx=p)`) the
    lookups of row `p` add nothing: that row's gradient is 0, at no cost (the
    scatter skips them). With an accumulator `acc` (the result's type) the
    rows are added to it instead of to zeros: a tied LM head's weight
    gradient (a product) and the embedding's are one table, the scatter
    adding into the product's buffer (mlc-accumulate-gemms) instead of a
    kernel summing the two.

    ```mlir
    %dw = mlc.embedding_grad %g, %ids : tensor<8x1024x768xf32>, tensor<8x1024xi64> -> tensor<50257x768xf32>
    %dw = mlc.embedding_grad %g, %ids {padding_idx = 0 : i64} : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<256x64xf32>
    %dt = mlc.embedding_grad %g, %ids acc(%dh : tensor<256x64xf32>) : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_IntTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx,
                       Optional<Mlc_FloatTensor>:$acc);
  let results = (outs Mlc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices (`acc` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($grad) `,`
    type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Mlc_AttentionGradOp : Mlc_Op<"attention_grad",
    [Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "Gradients of attention with respect to query, key and value";
  let description = [{
    Recomputes the probabilities `P = softmax(scale * q k^T + mask)` (with
    the same causal / variable-length rules as `mlc.attention`) and returns
    `dq = scale * dS k`, `dk = scale * dS^T q`, `dv = Pd^T grad`, where
    `Pd` is P after dropout (mask M, kept entries scaled by 1 / (1 - dropout)),
    `dP = (grad v^T) * M / (1 - dropout)` and `dS = P * (dP - rowsum(P * dP))`.
    With `rotary %cos, %sin` (as `mlc.attention`'s) q and k are read rotated
    and `dq`, `dk` are the gradients of the unrotated inputs (the transposed
    rotation applied to them; grouped-query: to dk summed over the group).
    With `softcap = c` the scores are capped as in `mlc.attention` and dS
    is multiplied by `1 - tanh^2(scale * q k^T / c)` before dq and dk.
    With `window = W` the keys outside each query's window are skipped, as
    in `mlc.attention`.
    With `bf16_result` (as `mlc.attention`'s) dq, dk, dv are stored in bf16.

    ```mlir
    %dq, %dk, %dv = mlc.attention_grad %g, %q, %k, %v causal
        : tensor<8x12x64x32xf32>, tensor<8x12x64x32xf32>, tensor<8x12x64x32xf32>, tensor<8x12x64x32xf32>
    ```
  }];
  let arguments = (ins Mlc_FloatTensor:$grad, Mlc_FloatTensor:$query,
                       Mlc_FloatTensor:$key, Mlc_FloatTensor:$value,
                       Optional<Mlc_FloatTensor>:$mask,
                       Optional<RankedTensorOf<[I32]>>:$cu_seqlens,
                       Optional<Mlc_FloatTensor>:$cos, Optional<Mlc_FloatTensor>:$sin,
                       Optional<RankedTensorOf<[F64]>>:$rank,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$seed, UnitAttr:$interleaved,
                       OptionalAttr<F64Attr>:$softcap, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<I64Attr>:$blocks, OptionalAttr<I64Attr>:$axis,
                       UnitAttr:$bf16_result);
  let builders = [
    // Every operand and attribute but bf16_result (f32 results).
    OpBuilder<(ins "::mlir::Value":$grad, "::mlir::Value":$query, "::mlir::Value":$key,
                   "::mlir::Value":$value, "::mlir::Value":$mask, "::mlir::Value":$cu_seqlens,
                   "::mlir::Value":$cos, "::mlir::Value":$sin, "::mlir::Value":$rank,
                   "::mlir::UnitAttr":$causal, "::mlir::FloatAttr":$scale,
                   "::mlir::FloatAttr":$dropout, "::mlir::IntegerAttr":$seed,
                   "::mlir::UnitAttr":$interleaved, "::mlir::FloatAttr":$softcap,
                   "::mlir::IntegerAttr":$window, "::mlir::IntegerAttr":$blocks,
                   "::mlir::IntegerAttr":$axis), [{
      build($_builder, $_state, grad, query, key, value, mask, cu_seqlens, cos, sin, rank,
            causal, scale, dropout, seed, interleaved, softcap, window, blocks, axis,
            ::mlir::UnitAttr());
    }]>];
  let results = (outs Mlc_FloatTensor:$query_grad, Mlc_FloatTensor:$key_grad,
                      Mlc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value (`mask` $mask^)? (`cu_seqlens` $cu_seqlens^)?
    (`rotary` $cos^ `,` $sin)? (`interleaved` $interleaved^)? (`causal` $causal^)? (`scale` `=` $scale^)?
    (`softcap` `=` $softcap^)? (`window` `=` $window^)? (`dropout` `=` $dropout^ `seed` `=` $seed)?
    (`block` $rank^ `of` $blocks `along` $axis)? (`bf16_result` $bf16_result^)? attr-dict `:` type(operands)
  }];
}

//===----------------------------------------------------------------------===//
// FusionOp, YieldOp
//===----------------------------------------------------------------------===//

def Mlc_FusionOp : Mlc_Op<"fusion", [IsolatedFromAbove, Pure,
    SingleBlockImplicitTerminator<"::mlc::YieldOp">]> {
  let summary = "Ops that run as one generated kernel";
  let description = [{
    A region of graph ops that the lowering emits as a single kernel: one
    pass over the data, intermediate values in registers, only the yielded
    values written to memory. `mlc-fuse-elementwise` forms them. The block
    arguments stand for `inputs`; the yielded values become the results.

    `pointwise`: every op is elementwise and produces the region's
    iteration shape; inputs may broadcast to it. A `mlc.reduce_sum` over the
    leading dimensions may end the region (a bias gradient): its result is
    accumulated while the region iterates.

    `rows`: pointwise ops as above, closed by a `mlc.layer_norm` or
    `mlc.rms_norm` whose input they compute; the kernel works row by row.

    `optimizer` (built by `mlc-optimizer{fuse}`): one multi-tensor update.
    The inputs are the optimizer's scalars (a 1-D f64 tensor), then the
    parameters, gradients, first and second moments of every updated
    parameter (N each); the results are the new parameters and moments (3N).
    The region is the update of one element: its block takes a parameter,
    gradient and moment element, the decay factor (the scalars' last entry
    for parameters that decay, else 1) and the other scalars, each as a
    rank-0 tensor of the parameters' type; it yields the new parameter and
    moments. The kernel runs it over the flat buffers.

    `norm` (built by `mlc-optimizer{fuse}`): the L2 norm over every element
    of its inputs (gradients): the region maps one element (a rank-0 block
    argument) to its square; the result is the square root of their sum.

    `params` (built by `mlc-fold-casts`): one map of the parameters, as a
    single kernel over the flat parameter buffer. The inputs are function
    arguments marked `mlc.param`, of one element type; result i is input i
    mapped element by element: the region takes one element (a rank-0 block
    argument) and yields its image (a rank-0 tensor of the results' element
    type). Under --dtype bf16 it writes the bf16 copies of the weights that
    the step's products read, in one pass over memory instead of a cast
    kernel per weight.

    ```mlir
    %r = mlc.fusion pointwise ins(%h, %b : tensor<8x3072xf32>, tensor<3072xf32>) {
    ^bb0(%x: tensor<8x3072xf32>, %y: tensor<3072xf32>):
      %0 = mlc.add %x, %y : tensor<8x3072xf32>, tensor<3072xf32>
      %1 = mlc.gelu %0 approximate = tanh : tensor<8x3072xf32>
      mlc.yield %1 : tensor<8x3072xf32>
    } : tensor<8x3072xf32>
    ```
  }];
  let arguments = (ins Mlc_FusionKind:$kind, Variadic<Mlc_AnyTensor>:$inputs);
  let results = (outs Variadic<Mlc_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `ins` `(` $inputs `:` type($inputs) `)` $body attr-dict `:` type($results)
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlc::FusionKind":$kind, "::mlir::TypeRange":$results,
                   "::mlir::ValueRange":$inputs)>
  ];
}

def Mlc_YieldOp : Mlc_Op<"yield", [Pure, Terminator, HasParent<"::mlc::FusionOp">,
    ReturnLike]> {
  let summary = "The values a fusion region writes out";
  let description = [{
    ```mlir
    mlc.yield %sum, %normed : tensor<8x768xf32>, tensor<8x768xf32>
    ```
  }];
  let arguments = (ins Variadic<Mlc_AnyTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* empty yield */ }]>];
}

#endif // MLC_OPS_TD
