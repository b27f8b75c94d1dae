//===- PlanTemplates.cpp - the kernel templates and their params -----------===//

#include "dialects/plan/PlanTemplates.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace mlc::plan {

namespace {

using K = ParamKind;
constexpr bool req = true, opt = false;

// A row count: `rows` (at the token capacity), `rows_per_token` when dynamic.
#define MLC_ROWS {"rows", K::I64, req}, {"rows_per_token", K::I64, opt}

const TemplateParam fillParams[] = {
    {"element", K::Type, req}, {"count", K::I64, req}, {"value", K::Number, req}};
const TemplateParam constantParams[] = {{"element", K::Type, req},
                                        {"values", K::Elements, req}};
// The cosine or sine table of a rotary embedding (mlc.rotary_table):
// positions x 2 * len(inv_freq) values computed in the kernel.
const TemplateParam rotaryTableParams[] = {{"element", K::Type, req},
                                           {"positions", K::I64, req},
                                           {"inv_freq", K::Elements, req},
                                           {"sine", K::Flag, opt}};
const TemplateParam softmaxParams[] = {
    {"element", K::Type, req}, MLC_ROWS, {"columns", K::I64, req}, {"log", K::Flag, opt}};
const TemplateParam softmaxGradParams[] = {
    {"element", K::Type, req}, MLC_ROWS, {"columns", K::I64, req}};
// `rms`: RMSNorm's form of the template; `residual`: its gradient adds the
// residual stream's (rms_norm_grad ... plus).
const TemplateParam layerNormParams[] = {{"element", K::Type, req}, MLC_ROWS,
                                         {"columns", K::I64, req},  {"eps", K::F64, req},
                                         {"rms", K::Flag, opt},     {"unit", K::Flag, opt}};
const TemplateParam layerNormGradParams[] = {
    {"element", K::Type, req}, MLC_ROWS,          {"capacity", K::I64, req}, {"columns", K::I64, req},
    {"eps", K::F64, req},      {"rms", K::Flag, opt}, {"residual", K::Flag, opt},
    {"unit", K::Flag, opt}};
const TemplateParam crossEntropyParams[] = {{"element", K::Type, req}, {"labels", K::Type, req},
                                            MLC_ROWS, {"columns", K::I64, req},
                                            {"ignore", K::I64, req}};
const TemplateParam crossEntropyWithGradParams[] = {
    {"element", K::Type, req}, {"labels", K::Type, req}, {"grad", K::Type, req}, MLC_ROWS,
    {"columns", K::I64, req},  {"ignore", K::I64, req},  {"scale", K::Float, opt}};
const TemplateParam crossEntropyGradParams[] = {
    {"element", K::Type, req}, {"labels", K::Type, req}, MLC_ROWS, {"columns", K::I64, req},
    {"ignore", K::I64, req},   {"scale", K::Float, opt}};
const TemplateParam embeddingParams[] = {{"element", K::Type, req}, {"ids", K::Type, req},
                                         MLC_ROWS, {"vocab", K::I64, req},
                                         {"columns", K::I64, req}};
const TemplateParam embeddingGradParams[] = {
    {"element", K::Type, req}, {"ids", K::Type, req}, MLC_ROWS,
    {"vocab", K::I64, req},    {"columns", K::I64, req}, {"padding", K::I64, opt},
    {"accumulate", K::Flag, opt}};
const TemplateParam copiesParams[] = {
    {"element", K::Type, req}, {"nests", K::Nests, req}, {"zero_bytes", K::I64, opt}};
const TemplateParam reductionParams[] = {
    {"reduce", K::String, req},          {"layout", K::String, req},
    {"element", K::Type, req},           {"rows", K::I64, opt}, // not in a general layout
    {"rows_per_token", K::I64, opt},     {"outputs", K::I64, opt},            {"length", K::I64, opt},
    {"count", K::I64, opt},              {"kept_dims", K::I64Array, opt},
    {"kept_strides", K::I64Array, opt},  {"reduced_dims", K::I64Array, opt},
    {"reduced_strides", K::I64Array, opt}};
const TemplateParam attentionParams[] = {
    {"element", K::Type, req},          {"arg_types", K::TypeArray, req},
    {"arg_written", K::BoolArray, req}, {"backward", K::Flag, opt},
    {"varlen", K::Flag, opt},           {"causal", K::Flag, opt},
    {"mask", K::Flag, opt},             {"bf16_products", K::Flag, opt},
    {"batch", K::I64, req},             {"heads", K::I64, req},
    {"kv_heads", K::I64, req},
    {"seq_q", K::I64, req},             {"seq_k", K::I64, req},
    {"head_dim", K::I64, req},          {"value_dim", K::I64, req},
    {"token_capacity", K::I64, req},    {"scale", K::F64, req},
    {"dropout", K::F64, req},           {"seed", K::I64, req},
    {"query", K::I64, req},             {"mask_strides", K::I64Array, req},
    {"cu_slot", K::I64, req},           {"tensors", K::I64Array, req},
    {"rotary_dim", K::I64, opt},        {"interleaved", K::Flag, opt},
    {"rotary_strides", K::I64Array, opt}, {"rotary_slot", K::I64, opt},
    {"softcap", K::F64, opt},           {"window", K::I64, opt}};

#undef MLC_ROWS

const TemplateSchema schemas[] = {
    {"fill", fillParams},
    {"constant", constantParams},
    {"rotary_table", rotaryTableParams},
    {"softmax", softmaxParams},
    {"softmax_grad", softmaxGradParams},
    {"layer_norm", layerNormParams},
    {"layer_norm_grad", layerNormGradParams},
    {"cross_entropy", crossEntropyParams},
    {"cross_entropy_with_grad", crossEntropyWithGradParams},
    {"cross_entropy_grad", crossEntropyGradParams},
    {"embedding", embeddingParams},
    {"embedding_grad", embeddingGradParams},
    {"copies", copiesParams},
    {"iota", copiesParams},
    {"reduction", reductionParams},
    {"attention", attentionParams},
};

bool isIntOf(Attribute a, unsigned width) {
  auto i = dyn_cast<IntegerAttr>(a);
  return i && i.getType().isInteger(width);
}

} // namespace

llvm::ArrayRef<TemplateSchema> templateSchemas() { return schemas; }

const TemplateSchema *templateSchema(llvm::StringRef name) {
  for (const TemplateSchema &s : schemas)
    if (s.name == name)
      return &s;
  return nullptr;
}

bool templateWritesArg(llvm::StringRef name, DictionaryAttr params, int64_t arg) {
  if (auto written = params ? params.getAs<DenseBoolArrayAttr>("arg_written") : nullptr)
    return arg >= 0 && arg < int64_t(written.size()) && written[arg];
  int64_t outputs = 1;
  if (name == "layer_norm_grad") // dx, dw (, db)
    outputs = params && params.get("rms") ? 2 : 3;
  else if (name == "cross_entropy_with_grad") // the loss, the gradient
    outputs = 2;
  return arg >= 0 && arg < outputs;
}

bool isParamKind(Attribute a, ParamKind kind) {
  switch (kind) {
  case K::I64:
    return isIntOf(a, 64);
  case K::F64: {
    auto f = dyn_cast<FloatAttr>(a);
    return f && f.getType().isF64();
  }
  case K::Float:
    return isa<FloatAttr>(a);
  case K::Number:
    return isa<FloatAttr, IntegerAttr>(a);
  case K::Type:
    return isa<TypeAttr>(a);
  case K::Flag:
    return isa<UnitAttr>(a);
  case K::String:
    return isa<StringAttr>(a);
  case K::I64Array:
    return isa<DenseI64ArrayAttr>(a);
  case K::BoolArray:
    return isa<DenseBoolArrayAttr>(a);
  case K::TypeArray: {
    auto arr = dyn_cast<ArrayAttr>(a);
    return arr && llvm::all_of(arr, [](Attribute e) { return isa<TypeAttr>(e); });
  }
  case K::Nests: {
    auto arr = dyn_cast<ArrayAttr>(a);
    return arr && llvm::all_of(arr, [](Attribute e) { return isa<DictionaryAttr>(e); });
  }
  case K::Elements:
    return isa<DenseElementsAttr>(a);
  }
  return false;
}

llvm::StringRef paramKindName(ParamKind kind) {
  switch (kind) {
  case K::I64: return "an i64";
  case K::F64: return "an f64";
  case K::Float: return "a float";
  case K::Number: return "an integer or a float";
  case K::Type: return "a type";
  case K::Flag: return "a flag (unit attribute)";
  case K::String: return "a string";
  case K::I64Array: return "an i64 array";
  case K::BoolArray: return "an i1 array";
  case K::TypeArray: return "an array of types";
  case K::Nests: return "an array of dictionaries";
  case K::Elements: return "dense elements";
  }
  return "";
}

} // namespace mlc::plan
