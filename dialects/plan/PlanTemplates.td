//===- PlanTemplates.td - kernel templates and their interface -*- tablegen -*-===//
//
// A template kernel (`plan.kernel @k3 rows #plan.softmax<element = f32,
// rows = 16, columns = 64> args(2)`) says what it computes with an
// attribute of this file: one AttrDef per template, each implementing
// TemplateAttrInterface. The interface is
// everything the rest of mlc asks of a template: whether a kernel of it is
// well formed, which of its arguments it writes, its bytes and FLOPs (for
// --roofline), its CUDA schedule (mlc-cuda-launch) and its printing for a
// target (kernels.cpp, kernels.cu). Nothing compares a template's name.
//
// The plan dialect knows no target: it declares the interface and promises
// it for every template here; the code generator implements it, one file
// per template family (compiler/codegen/templates/), and attaches those
// models to the attributes (registerTemplateModels). A context without them
// stops with MLIR's "promised interface ... never implemented" at the first
// template kernel it verifies.
//
// A template's parameters are the attribute's own, typed in ODS (`fill`:
// `#plan.fill<element = f32, count = 4, value = 0.0 : f32>`); its kernel
// has no `params` dictionary. What the types cannot say (a positive row
// length, a float element type) the implementation's verifyKernel checks,
// naming the kernel.
//
// docs/design.md "Adding a template" walks through adding one.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PLAN_TEMPLATES_TD
#define MLC_PLAN_TEMPLATES_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "dialects/plan/PlanTemplateInterface.td"

// A template: `cppName`Attr in C++, #plan.`name` in the IR.
class Plan_Template<string cppName, string name, string summaryText>
    : AttrDef<Plan_Dialect, cppName> {
  let mnemonic = name;
  let summary = summaryText;
}

// A double parameter (a norm's `eps = 1.000000e-05`, attention's `scale`):
// an f64 APFloat (LLVM hashes no double; compared bitwise), printed exactly
// (AsmPrinter::printFloat) and parsed as a float literal; with `default`,
// optional and elided at it.
class Plan_F64<string default = ""> : APFloatParameter<"an f64"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    ::llvm::APFloat value(0.0);
    if ($_parser.parseFloat(::llvm::APFloat::IEEEdouble(), value))
      return ::mlir::failure();
    return value;
  }() }];
  let defaultValue = default;
}

// A row count, the parameters of every template over rows: `rows`, and
// `rows_per_token` (0, elided: static) when the count is dynamic (`rows` at
// the token capacity; the kernel runs ctx->rows * rows_per_token rows).
// A template's parameters join it with !con: (ins ...) first, then these.
defvar Plan_RowParams = (ins "int64_t":$rows,
                             DefaultValuedParameter<"int64_t", "0">:$rows_per_token);

// Fills.
def Plan_FillTemplate : Plan_Template<"FillTemplate", "fill", "p0 = `count` copies of `value`"> {
  let description = [{
    A typed template: its parameters are the attribute's own, and its
    kernel has no `params` dictionary.

    ```mlir
    plan.kernel @k0 fill #plan.fill<element = f32, count = 4, value = 0.0 : f32> args(1)
    ```
  }];
  // `value`: an integer or float attribute, a literal of `element`
  // (checked by the model's verifyKernel, which names the kernel).
  let parameters = (ins "::mlir::Type":$element, "int64_t":$count,
                        "::mlir::Attribute":$value);
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_ConstantTemplate : Plan_Template<"ConstantTemplate", "constant", "p0 = the dense `values`"> {
  let description = [{
    ```mlir
    plan.kernel @k0 fill #plan.constant<element = f32, values = dense<[1.0, 2.0]> : tensor<2xf32>> args(1)
    ```
  }];
  // `values`' element type is `element`, and they are not a splat (that is
  // fill): both checked by the model's verifyKernel.
  let parameters = (ins "::mlir::Type":$element, "::mlir::DenseElementsAttr":$values);
  let assemblyFormat = "`<` struct(params) `>`";
}
// f64s printed whole, `array<f64: 1.0, 0.31622776389122009>`, which reads
// back exactly (the stripped `[...]` prints 6 digits).
def Plan_ExactF64sParameter : AttrParameter<"::mlir::DenseF64ArrayAttr", "f64s"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::mlir::DenseF64ArrayAttr> {
    ::mlir::DenseF64ArrayAttr values;
    if ($_parser.parseAttribute(values))
      return ::mlir::failure();
    return values;
  }() }];
  let printer = [{ $_printer.printAttribute($_self) }];
}
def Plan_RotaryTableTemplate : Plan_Template<"RotaryTableTemplate", "rotary_table",
    "p0 = a rotary embedding's cosine (or, with `sine`, signed sine) table"> {
  let description = [{
    `positions` rows of 2 * len(inv_freq) values: cos(p * inv_freq[i]) (or,
    with `sine`, the signed sine), as mlc.rotary_table.

    ```mlir
    plan.kernel @k0 fill #plan.rotary_table<element = f32, positions = 256, inv_freq = array<f64: 1.0, 0.1>, sine = true> args(1)
    ```
  }];
  let parameters = (ins "::mlir::Type":$element, "int64_t":$positions,
                        Plan_ExactF64sParameter:$inv_freq,
                        DefaultValuedParameter<"bool", "false">:$sine);
  let assemblyFormat = "`<` struct(params) `>`";
}
// Row kernels: `rows` rows of `columns` contiguous elements of `element`
// (Rows.cpp checks `columns` > 0 and the element types are floats).
def Plan_SoftmaxTemplate : Plan_Template<"SoftmaxTemplate", "softmax", "p0 = softmax(p1) (or log_softmax) per row"> {
  let description = [{
    ```mlir
    plan.kernel @k1 rows #plan.softmax<element = f32, rows = 16, columns = 64, log = true> args(2)
    ```
  }];
  let parameters = !con((ins "::mlir::Type":$element), Plan_RowParams,
                        (ins "int64_t":$columns, DefaultValuedParameter<"bool", "false">:$log));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_SoftmaxGradTemplate : Plan_Template<"SoftmaxGradTemplate", "softmax_grad", "softmax's input gradient"> {
  let parameters = !con((ins "::mlir::Type":$element), Plan_RowParams, (ins "int64_t":$columns));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_LayerNormTemplate : Plan_Template<"LayerNormTemplate", "layer_norm", "LayerNorm (or RMSNorm: `rms`)"> {
  let description = [{
    `unit`: no affine transform (the weight 1, the bias 0), neither read.

    ```mlir
    plan.kernel @k2 rows #plan.layer_norm<element = f32, rows = 4, columns = 64, eps = 1.000000e-05, unit = true> args(2)
    ```
  }];
  let parameters = !con((ins "::mlir::Type":$element), Plan_RowParams,
                        (ins "int64_t":$columns, Plan_F64<>:$eps,
                             DefaultValuedParameter<"bool", "false">:$rms,
                             DefaultValuedParameter<"bool", "false">:$unit));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_LayerNormGradTemplate : Plan_Template<"LayerNormGradTemplate", "layer_norm_grad",
    "LayerNorm's (RMSNorm's) gradients dx, dweight (, dbias)"> {
  let description = [{
    `capacity`: the rows the scratch holds (`rows` at most); `residual`: the
    residual stream's gradient is added to dx; `copy`: dx is also stored in
    that type, the last argument; `grad_element`: the incoming gradient's
    type where it is not `element`; `plus_one`: the weight is read as 1 + w.
  }];
  let parameters = !con((ins "::mlir::Type":$element), Plan_RowParams,
                        (ins "int64_t":$capacity, "int64_t":$columns, Plan_F64<>:$eps,
                             DefaultValuedParameter<"bool", "false">:$rms,
                             DefaultValuedParameter<"bool", "false">:$residual,
                             DefaultValuedParameter<"bool", "false">:$unit,
                             OptionalParameter<"::mlir::Type">:$copy,
                             OptionalParameter<"::mlir::Type">:$grad_element,
                             DefaultValuedParameter<"bool", "false">:$plus_one));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_CrossEntropyTemplate : Plan_Template<"CrossEntropyTemplate", "cross_entropy",
    "the mean cross-entropy of logits against labels"> {
  // The cross-entropy family: `element` the logits' type, `labels` the
  // labels' (an integer type), `columns` logits a row, rows labelled
  // `ignore` skipped. `scale`: the loss's incoming gradient, a constant
  // (the gradient without one reads it from its last argument, p3[0]).
  let parameters = !con((ins "::mlir::Type":$element, "::mlir::Type":$labels), Plan_RowParams,
                        (ins "int64_t":$columns, "int64_t":$ignore));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_CrossEntropyWithGradTemplate : Plan_Template<"CrossEntropyWithGradTemplate", "cross_entropy_with_grad",
    "the loss and its logits' gradient in one pass"> {
  // `grad`: the gradient's type (bf16 where it is written as a bf16 copy).
  let parameters = !con((ins "::mlir::Type":$element, "::mlir::Type":$labels,
                             "::mlir::Type":$grad), Plan_RowParams,
                        (ins "int64_t":$columns, "int64_t":$ignore, "::mlir::FloatAttr":$scale));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_CrossEntropyGradTemplate : Plan_Template<"CrossEntropyGradTemplate", "cross_entropy_grad",
    "the logits' gradient of the cross-entropy"> {
  let parameters = !con((ins "::mlir::Type":$element, "::mlir::Type":$labels), Plan_RowParams,
                        (ins "int64_t":$columns, "int64_t":$ignore,
                             OptionalParameter<"::mlir::FloatAttr">:$scale));
  let assemblyFormat = "`<` struct(params) `>`";
}
// Gathers and scatters: `rows` token ids of type `ids` into a [vocab,
// columns] table of `element`. The gradient's `padding`: the row whose
// gradient stays zero (absent: none); `accumulate`: the rows add to the
// table's gradient as it is (a tied head's), not to zeros.
def Plan_EmbeddingTemplate : Plan_Template<"EmbeddingTemplate", "embedding", "rows of a table gathered by id"> {
  let parameters = !con((ins "::mlir::Type":$element, "::mlir::Type":$ids), Plan_RowParams,
                        (ins "int64_t":$vocab, "int64_t":$columns));
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_EmbeddingGradTemplate : Plan_Template<"EmbeddingGradTemplate", "embedding_grad",
    "the table's gradient: rows scattered by id"> {
  let parameters = !con((ins "::mlir::Type":$element, "::mlir::Type":$ids), Plan_RowParams,
                        (ins "int64_t":$vocab, "int64_t":$columns,
                             OptionalParameter<"std::optional<int64_t>">:$padding,
                             DefaultValuedParameter<"bool", "false">:$accumulate));
  let assemblyFormat = "`<` struct(params) `>`";
}
// Copies.
// One nest of `copies` or `iota`: not a template (no kernel takes it as
// one), a list element of theirs. Over `dims` (its leading dimension the
// dynamic token count with `dynamic`), p0 at dst_offset + i . dst_strides
// = argument `src_arg` at src_offset + i . src_strides (iota: that offset
// itself; its src_arg is -1). mlc-cuda-vectorize adds the CUDA decision:
// `vector_lanes` (0, elided: not decided) and which accesses are vectors.
def Plan_Nest : AttrDef<Plan_Dialect, "Nest"> {
  let mnemonic = "nest";
  let summary = "one strided nest of a copies or iota kernel";
  let parameters = (ins "::mlir::DenseI64ArrayAttr":$dims,
                        DefaultValuedParameter<"bool", "false">:$dynamic,
                        "int64_t":$dst_offset, "::mlir::DenseI64ArrayAttr":$dst_strides,
                        "int64_t":$src_arg, "int64_t":$src_offset,
                        "::mlir::DenseI64ArrayAttr":$src_strides,
                        DefaultValuedParameter<"int64_t", "0">:$vector_lanes,
                        DefaultValuedParameter<"bool", "false">:$dst_vector,
                        DefaultValuedParameter<"bool", "false">:$src_vector);
  let assemblyFormat = "`<` struct(params) `>`";
}
// A template's nests: `[#plan.nest<...>, ...]`.
def Plan_NestsParameter : ArrayRefParameter<"::mlc::plan::NestAttr", "strided nests"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::SmallVector<::mlc::plan::NestAttr>> {
    ::llvm::SmallVector<::mlc::plan::NestAttr> nests;
    if ($_parser.parseCommaSeparatedList(::mlir::AsmParser::Delimiter::Square, [&]() {
          return $_parser.parseAttribute(nests.emplace_back());
        }))
      return ::mlir::failure();
    return nests;
  }() }];
  let printer = [{ $_printer << '['; ::llvm::interleaveComma($_self, $_printer); $_printer << ']' }];
}
def Plan_CopiesTemplate : Plan_Template<"CopiesTemplate", "copies", "strided copies, one nest each"> {
  let description = [{
    Argument k + 1 is nest k's source (its `src_arg`); `zero_bytes` (0,
    elided: none) of p0 are cleared first (padding).

    ```mlir
    plan.kernel @k1 copy #plan.copies<element = f32, nests = [#plan.nest<dims = [4, 8], dst_offset = 0, dst_strides = [16, 1], src_arg = 1, src_offset = 0, src_strides = [8, 1]>]> args(2)
    ```
  }];
  let parameters = (ins "::mlir::Type":$element, Plan_NestsParameter:$nests,
                        DefaultValuedParameter<"int64_t", "0">:$zero_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
}
def Plan_IotaTemplate : Plan_Template<"IotaTemplate", "iota", "p0 = the flat index, over strided nests"> {
  let parameters = (ins "::mlir::Type":$element, Plan_NestsParameter:$nests);
  let assemblyFormat = "`<` struct(params) `>`";
}
// Running sums (mlc.cumsum): p0 = the running sum of p1 along the middle
// dimension of [rows, length, inner], both contiguous; `exclusive` leaves
// each element out of its own sum, `reverse` sums from the end.
def Plan_ScanTemplate : Plan_Template<"ScanTemplate", "scan",
    "p0 = the running sum of p1 along one dimension"> {
  let parameters = !con((ins "::mlir::Type":$element), Plan_RowParams,
                        (ins "int64_t":$length, "int64_t":$inner,
                             DefaultValuedParameter<"bool", "false">:$exclusive,
                             DefaultValuedParameter<"bool", "false">:$reverse));
  let assemblyFormat = "`<` struct(params) `>`";
}
// Reductions and attention.
def Plan_ReductionKind : I32EnumAttr<"ReductionKind", "what a reduction computes", [
      I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>, I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlc::plan";
  let genSpecializedAttr = 0;
}
def Plan_ReductionLayout : I32EnumAttr<"ReductionLayout", "the axes a reduction runs over", [
      I32EnumAttrCase<"rows", 0>, I32EnumAttrCase<"columns", 1>, I32EnumAttrCase<"general", 2>]> {
  let cppNamespace = "::mlc::plan";
  let genSpecializedAttr = 0;
}
def Plan_ReductionTemplate : Plan_Template<"ReductionTemplate", "reduction",
    "sum, mean or max over rows, columns or any axes"> {
  let description = [{
    p0 = `reduce`(p1) in one of three layouts (ReductionKernel):
    `rows`: `outputs` rows of `length` contiguous elements (`rows` the row
    count, dynamic with `rows_per_token`); `columns`: the `length` column
    sums of `rows` rows; `general`: `outputs` elements, each over the
    `reduced_dims` (input strides `reduced_strides`) at its index in
    `kept_dims` (`kept_strides`). `mean` divides by `count`. What a layout
    does not use is absent (0 or empty, elided).

    ```mlir
    plan.kernel @k1 reduction #plan.reduction<reduce = sum, layout = rows, element = f32, rows = 4, outputs = 4, length = 8> args(2)
    ```
  }];
  let parameters = (ins EnumParameter<Plan_ReductionKind>:$reduce,
                        EnumParameter<Plan_ReductionLayout>:$layout,
                        "::mlir::Type":$element,
                        DefaultValuedParameter<"int64_t", "0">:$rows,
                        DefaultValuedParameter<"int64_t", "0">:$rows_per_token,
                        DefaultValuedParameter<"int64_t", "0">:$outputs,
                        DefaultValuedParameter<"int64_t", "0">:$length,
                        DefaultValuedParameter<"int64_t", "1">:$count,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$kept_dims,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$kept_strides,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$reduced_dims,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$reduced_strides);
  let assemblyFormat = "`<` struct(params) `>`";
}
// A list in square brackets (attention's `mask_strides = [0, 0, 8, 1]`: a
// bare ArrayRefParameter's commas would run into the next parameter's);
// with `optional`, elided when empty.
class Plan_List<string element, bit optional = 0> : ArrayRefParameter<element> {
  let parser = "[&]() -> ::mlir::FailureOr<::llvm::SmallVector<" # element # ">> {\n"
    "  ::llvm::SmallVector<" # element # "> values;\n"
    "  auto one = [&]() -> ::mlir::ParseResult {\n"
    "    auto value = ::mlir::FieldParser<" # element # ">::parse($_parser);\n"
    "    if (::mlir::failed(value))\n"
    "      return ::mlir::failure();\n"
    "    values.push_back(*value);\n"
    "    return ::mlir::success();\n"
    "  };\n"
    "  if ($_parser.parseCommaSeparatedList(::mlir::AsmParser::Delimiter::Square, one))\n"
    "    return ::mlir::failure();\n"
    "  return values;\n"
    "}()";
  let printer = "$_printer << '['; ::llvm::interleaveComma($_self, $_printer, [&](" # element #
                " value) { $_printer << value; }); $_printer << ']'";
  let comparator = cppType # "($_lhs) == " # cppType # "($_rhs)";
  let defaultValue = !if(optional, cppStorageType # "()", "");
}
// A flag: `causal = true`, elided when false.
defvar Plan_AttentionFlag = DefaultValuedParameter<"bool", "false">;

def Plan_AttentionTemplate : Plan_Template<"AttentionTemplate", "attention",
    "fused attention, forward or backward"> {
  let description = [{
    One kernel per attention (the scores, softmax and weighted values
    streamed through tiles; backward recomputes them from the row
    statistics). A typed template: its parameters are the attribute's own,
    and its kernel has no `params` dictionary. Its arguments are listed by
    `arg_types` and `arg_written`: the outputs, then q, k, v (at `query`),
    the mask (with `mask`), cu_seqlens (at `cu_slot`, varlen), the rotary
    tables cos and sin (at `rotary_slot`), the dropout block's rank (at
    `block_slot`). `tensors` holds per tensor argument up to v its element
    offset and its batch (varlen: token), head and row strides.

    ```mlir
    plan.kernel @k4 attention #plan.attention<element = f32, causal = true,
        batch = 2, heads = 4, kv_heads = 4, seq_q = 8, seq_k = 8, head_dim = 32,
        value_dim = 32, token_capacity = 0, scale = 0.17677669529663687,
        dropout = 0.0, seed = 0, arg_types = [f32, f32, f32, f32],
        arg_written = [true, false, false, false], query = 1,
        mask_strides = [0, 0, 0, 0], tensors = [...]> args(4)
    ```
  }];
  // What the types cannot say (dimensions positive, the arguments' slots
  // within the kernel's, the rotary and window rules) the model's
  // verifyKernel checks, naming the kernel. Absent optional parameters
  // read as AttentionKernel's "none": softcap 0, window 0, rotary_dim 0,
  // cu_slot, rotary_slot and block_slot -1.
  let parameters = (ins
      "::mlir::Type":$element,
      Plan_AttentionFlag:$backward, Plan_AttentionFlag:$varlen, Plan_AttentionFlag:$causal,
      Plan_AttentionFlag:$mask, Plan_AttentionFlag:$bf16_products,
      "int64_t":$batch, "int64_t":$heads, "int64_t":$kv_heads,
      "int64_t":$seq_q, "int64_t":$seq_k, "int64_t":$head_dim, "int64_t":$value_dim,
      "int64_t":$token_capacity,
      Plan_F64<>:$scale, Plan_F64<>:$dropout, "int64_t":$seed,
      Plan_F64<"::llvm::APFloat(0.0)">:$softcap,
      DefaultValuedParameter<"int64_t", "0">:$window,
      Plan_List<"::mlir::Type">:$arg_types, Plan_List<"bool">:$arg_written,
      "int64_t":$query, Plan_List<"int64_t">:$mask_strides,
      DefaultValuedParameter<"int64_t", "-1">:$cu_slot,
      Plan_List<"int64_t">:$tensors,
      DefaultValuedParameter<"int64_t", "0">:$rotary_dim, Plan_AttentionFlag:$interleaved,
      Plan_List<"int64_t", 1>:$rotary_strides,
      DefaultValuedParameter<"int64_t", "-1">:$rotary_slot,
      DefaultValuedParameter<"int64_t", "0">:$blocks,
      DefaultValuedParameter<"int64_t", "0">:$block_axis,
      DefaultValuedParameter<"int64_t", "-1">:$block_slot);
  let assemblyFormat = "`<` struct(params) `>`";
}

#endif // MLC_PLAN_TEMPLATES_TD
