//===- KernelPrinter.cpp - plan.kernel ops to a target's source ------------===//
//
// A walk over the kernels that writes text and decides nothing: each
// template's parameters go to the target method of that template as they
// are (KernelTarget.h states what each computes).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelPrinter.h"
#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"

namespace mlc::lowering {

namespace {

/// A literal of type `el` (a float attribute's value, or an integer's).
std::string literalOf(Attribute value, Type el) {
  if (auto f = dyn_cast_or_null<FloatAttr>(value))
    return literal(f.getValueAsDouble(), el);
  if (auto i = dyn_cast_or_null<IntegerAttr>(value))
    return "(" + cType(el) + ")" + std::to_string(i.getValue().getSExtValue());
  return "";
}

} // namespace

llvm::Expected<std::string> printTemplateBody(llvm::StringRef t, DictionaryAttr params,
                                              llvm::StringRef name, KernelTarget &target) {
  ParamsReader r(params, name);
  std::string body;
  Type el = r.type("element");
  auto eps = [&] { return literal(r.f64("eps"), Float64Type::get(params.getContext())); };
  if (t == "fill") {
    body = target.fill(el, r.i64("count"), literalOf(r.attr("value"), el));
  } else if (t == "constant") {
    std::vector<std::string> values;
    auto dense = dyn_cast_or_null<DenseElementsAttr>(r.attr("values"));
    if (dense && isa<FloatType>(el))
      for (APFloat v : dense.getValues<APFloat>())
        values.push_back(literal(v.convertToDouble(), el));
    else if (dense)
      for (APInt v : dense.getValues<APInt>())
        values.push_back(std::to_string(v.getSExtValue()));
    body = target.constant(el, values);
  } else if (t == "softmax") {
    body = target.softmax(el, r.rows(), r.i64("columns"), r.flag("log"));
  } else if (t == "softmax_grad") {
    body = target.softmaxGrad(el, r.rows(), r.i64("columns"));
  } else if (t == "layer_norm") {
    body = target.layerNorm(el, r.rows(), r.i64("columns"), eps());
  } else if (t == "layer_norm_grad") {
    body = target.layerNormGrad(el, r.rows(), r.i64("capacity"), r.i64("columns"), eps());
  } else if (t == "cross_entropy") {
    body = target.crossEntropy(el, r.type("labels"), r.rows(), r.i64("columns"),
                               r.i64("ignore"));
  } else if (t == "cross_entropy_with_grad") {
    auto scale = dyn_cast_or_null<FloatAttr>(r.attr("scale"));
    body = target.crossEntropyWithGrad(el, r.type("labels"), r.type("grad"), r.rows(),
                                       r.i64("columns"), r.i64("ignore"),
                                       scale ? literalOf(scale, scale.getType()) : "");
  } else if (t == "cross_entropy_grad") {
    auto scale = params.getAs<FloatAttr>("scale");
    body = target.crossEntropyGrad(el, r.type("labels"), r.rows(), r.i64("columns"),
                                   r.i64("ignore"),
                                   scale ? literalOf(scale, scale.getType()) : "");
  } else if (t == "embedding") {
    body = target.embedding(el, r.type("ids"), r.rows(), r.i64("vocab"), r.i64("columns"));
  } else if (t == "embedding_grad") {
    body = target.embeddingGrad(el, r.type("ids"), r.rows(), r.i64("vocab"), r.i64("columns"));
  } else if (t == "reduction") {
    ReductionKernel k = decodeReduction(r);
    if (auto err = r.error())
      return std::move(err);
    body = target.reduction(k);
  } else if (t == "attention") {
    AttentionKernel a = decodeAttention(r);
    if (auto err = r.error())
      return std::move(err);
    body = target.attention(a);
  } else {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + name + ": unknown template '" + t + "'");
  }
  if (auto err = r.error())
    return std::move(err);
  return body;
}

bool printable(plan::KernelOp k, const KernelTarget &target) {
  if (k.getTemplateName())
    return true;
  return target.name() == "cuda" ? k.getCuda() && !k.getCuda()->empty()
                                 : k.getSource() && !k.getSource()->empty();
}

llvm::Expected<std::string> printKernel(plan::KernelOp k, KernelTarget &target) {
  std::string name = k.getSymName().str();
  std::string body;
  if (auto t = k.getTemplateName()) {
    auto printed = printTemplateBody(*t, k.getParamsAttr(), name, target);
    if (!printed)
      return printed.takeError();
    body = std::move(*printed);
  } else if (!printable(k, target)) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + name + " has no " + target.name() + " text");
  } else {
    body = (target.name() == "cuda" ? *k.getCuda() : *k.getSource()).str();
  }
  return target.function(name, plan::stringifyKernelTemplate(k.getKind()).str(), body,
                         k.getNumArgs());
}

} // namespace mlc::lowering
