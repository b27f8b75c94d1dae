//===- PlanTemplates.cpp - the template parameters' schema check -----------===//

#include "dialects/plan/PlanTemplates.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace mlc::plan {

namespace {

using K = ParamKind;

bool isIntOf(Attribute a, unsigned width) {
  auto i = dyn_cast<IntegerAttr>(a);
  return i && i.getType().isInteger(width);
}

} // namespace

LogicalResult verifyTemplateParams(Operation *op, ArrayRef<TemplateParam> schema) {
  auto k = cast<KernelOp>(op);
  StringRef name = k.getKernelTemplateAttr().getTemplateName();
  DictionaryAttr params = k.getParamsAttr();
  if (!params)
    return k.emitOpError("template kernel '") << name << "' has no params";
  for (const TemplateParam &p : schema) {
    Attribute value = params.get(p.name);
    if (!value && p.required)
      return k.emitOpError("@") << k.getSymName() << " (template '" << name
                                << "'): parameter '" << p.name << "' is missing";
    if (value && !isParamKind(value, p.kind))
      return k.emitOpError("@") << k.getSymName() << " (template '" << name
                                << "'): parameter '" << p.name << "' must be "
                                << paramKindName(p.kind) << ", got " << value;
  }
  return success();
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
