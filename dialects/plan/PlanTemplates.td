//===- PlanTemplates.td - kernel templates and their interface -*- tablegen -*-===//
//
// A template kernel (`plan.kernel @k3 rows #plan.softmax args(2) params
// {...}`) says what it computes with an attribute of this file: one AttrDef
// per template, each implementing TemplateAttrInterface. The interface is
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
// `#plan.fill<element = f32, count = 4, value = 0.0 : f32>`), or, for the
// templates not yet moved to that form, the kernel's `params` dictionary,
// which the implementation's verifyKernel checks against the template's
// schema (TemplateParam lists, PlanTemplates.h).
//
// docs/design.md "Adding a template" walks through adding one.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PLAN_TEMPLATES_TD
#define MLC_PLAN_TEMPLATES_TD

include "mlir/IR/AttrTypeBase.td"
include "dialects/plan/PlanTemplateInterface.td"

// A template: `cppName`Attr in C++, #plan.`name` in the IR.
class Plan_Template<string cppName, string name, string summaryText>
    : AttrDef<Plan_Dialect, cppName> {
  let mnemonic = name;
  let summary = summaryText;
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
def Plan_ConstantTemplate : Plan_Template<"ConstantTemplate", "constant", "p0 = the dense `values`">;
def Plan_RotaryTableTemplate : Plan_Template<"RotaryTableTemplate", "rotary_table",
    "p0 = a rotary embedding's cosine (or, with `sine`, signed sine) table">;
// Row kernels.
def Plan_SoftmaxTemplate : Plan_Template<"SoftmaxTemplate", "softmax", "p0 = softmax(p1) (or log_softmax) per row">;
def Plan_SoftmaxGradTemplate : Plan_Template<"SoftmaxGradTemplate", "softmax_grad", "softmax's input gradient">;
def Plan_LayerNormTemplate : Plan_Template<"LayerNormTemplate", "layer_norm", "LayerNorm (or RMSNorm: `rms`)">;
def Plan_LayerNormGradTemplate : Plan_Template<"LayerNormGradTemplate", "layer_norm_grad",
    "LayerNorm's (RMSNorm's) gradients dx, dweight (, dbias)">;
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
def Plan_CopiesTemplate : Plan_Template<"CopiesTemplate", "copies", "strided copies, one nest each">;
def Plan_IotaTemplate : Plan_Template<"IotaTemplate", "iota", "p0 = the flat index, over strided nests">;
// Reductions and attention.
def Plan_ReductionTemplate : Plan_Template<"ReductionTemplate", "reduction",
    "sum, mean or max over rows, columns or any axes">;
def Plan_AttentionTemplate : Plan_Template<"AttentionTemplate", "attention",
    "fused attention, forward or backward">;

#endif // MLC_PLAN_TEMPLATES_TD
