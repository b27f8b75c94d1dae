//===- Fills.cpp - fill, constant, rotary_table ----------------------------===//
//
// Kernels that write p0 from their parameters alone: `count` copies of a
// value, a dense constant, a rotary embedding's cosine or sine table. Each
// is one grid-stride CUDA phase over its elements and moves its output's
// bytes once.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

/// The elements of a dense parameter (0 when it is missing).
int64_t denseCount(ParamsReader &r, StringRef name) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(r.attr(name));
  return dense ? dense.getNumElements() : 0;
}

/// p0 = `count` copies of `value` (a literal of `element`): a typed
/// template, its parameters the attribute's (#plan.fill<...>).
struct FillModel : TemplateModel<FillModel, plan::FillTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto fill = cast<plan::FillTemplateAttr>(attr);
    if (failed(refuseParams(op)))
      return mlir::failure();
    if (!isa<FloatAttr, IntegerAttr>(fill.getValue()))
      return kernelError(op) << "parameter 'value' must be an integer or a float, got "
                             << fill.getValue();
    if (fill.getCount() < 0)
      return kernelError(op) << "parameter 'count' must be >= 0, got " << fill.getCount();
    return success();
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto fill = cast<plan::FillTemplateAttr>(attr);
    plan::TemplateCost c;
    c.bytes = double(fill.getCount()) * plan::elementBytes(fill.getElement());
    return c;
  }
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    s.phases = {cudaStrided(cast<plan::FillTemplateAttr>(attr).getCount())};
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto fill = cast<plan::FillTemplateAttr>(attr);
    return target.fill(fill.getElement(), fill.getCount(),
                       literalOf(fill.getValue(), fill.getElement()));
  }
};

/// p0 = the dense `values` (not a splat: fill is that).
struct ConstantModel : TemplateModel<ConstantModel, plan::ConstantTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {{"element", K::Type, true},
                                                    {"values", K::Elements, true}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    plan::TemplateCost c;
    c.bytes = double(denseCount(r, "values")) * plan::elementBytes(r.type("element"));
    return checked(r, c);
  }
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    s.phases = {cudaStrided(denseCount(r, "values"))};
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    Type el = r.type("element");
    std::vector<std::string> values;
    auto dense = dyn_cast_or_null<DenseElementsAttr>(r.attr("values"));
    if (dense && isa<FloatType>(el))
      for (APFloat v : dense.getValues<APFloat>())
        values.push_back(literal(v.convertToDouble(), el));
    else if (dense)
      for (APInt v : dense.getValues<APInt>())
        values.push_back(std::to_string(v.getSExtValue()));
    return checked(r, target.constant(el, values));
  }
};

/// The cosine or sine table of a rotary embedding (mlc.rotary_table):
/// positions x 2 * len(inv_freq) values computed in the kernel, one cos or
/// sin and a product each.
struct RotaryTableModel : TemplateModel<RotaryTableModel, plan::RotaryTableTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {{"element", K::Type, true},
                                                    {"positions", K::I64, true},
                                                    {"inv_freq", K::Elements, true},
                                                    {"sine", K::Flag, false}};

  static int64_t elements(ParamsReader &r) {
    return r.i64("positions") * 2 * denseCount(r, "inv_freq");
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    const double n = double(elements(r));
    plan::TemplateCost c;
    c.bytes = n * plan::elementBytes(r.type("element")), c.flops = 2 * n;
    return checked(r, c);
  }
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    s.phases = {cudaStrided(elements(r))};
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    std::vector<std::string> inv;
    if (auto dense = dyn_cast_or_null<DenseElementsAttr>(r.attr("inv_freq")))
      for (APFloat v : dense.getValues<APFloat>())
        inv.push_back(literal(v.convertToDouble(), Float64Type::get(k->getContext())));
    return checked(r, target.rotaryTable(r.type("element"), r.i64("positions"), inv,
                                         r.flag("sine")));
  }
};

} // namespace

void attachFillModels(MLIRContext *context) {
  plan::FillTemplateAttr::attachInterface<FillModel>(*context);
  plan::ConstantTemplateAttr::attachInterface<ConstantModel>(*context);
  plan::RotaryTableTemplateAttr::attachInterface<RotaryTableModel>(*context);
}

} // namespace mlc::lowering
