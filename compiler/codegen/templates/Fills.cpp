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
    return verifyCount(op, "count", fill.getCount());
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
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto constant = cast<plan::ConstantTemplateAttr>(attr);
    if (failed(refuseParams(op)))
      return mlir::failure();
    DenseElementsAttr values = constant.getValues();
    if (values.getElementType() != constant.getElement())
      return kernelError(op) << "parameter 'values' must hold " << constant.getElement()
                             << " elements, got " << values.getElementType();
    if (!isa<FloatType, IntegerType>(constant.getElement()))
      return kernelError(op) << "parameter 'element' must be an integer or a float type, got "
                             << constant.getElement();
    return success();
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto constant = cast<plan::ConstantTemplateAttr>(attr);
    plan::TemplateCost c;
    c.bytes = double(constant.getValues().getNumElements()) *
              plan::elementBytes(constant.getElement());
    return c;
  }
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    s.phases = {cudaStrided(cast<plan::ConstantTemplateAttr>(attr).getValues().getNumElements())};
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto constant = cast<plan::ConstantTemplateAttr>(attr);
    Type el = constant.getElement();
    DenseElementsAttr dense = constant.getValues();
    std::vector<std::string> values;
    if (isa<FloatType>(el))
      for (APFloat v : dense.getValues<APFloat>())
        values.push_back(literal(v.convertToDouble(), el));
    else
      for (APInt v : dense.getValues<APInt>())
        values.push_back(std::to_string(v.getSExtValue()));
    return target.constant(el, values);
  }
};

/// The cosine or sine table of a rotary embedding (mlc.rotary_table):
/// positions x 2 * len(inv_freq) values computed in the kernel, one cos or
/// sin and a product each.
struct RotaryTableModel : TemplateModel<RotaryTableModel, plan::RotaryTableTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto table = cast<plan::RotaryTableTemplateAttr>(attr);
    if (failed(refuseParams(op)))
      return mlir::failure();
    return success(succeeded(verifyCount(op, "positions", table.getPositions())) &&
                   succeeded(verifyFloat(op, "element", table.getElement())));
  }
  static int64_t elements(plan::RotaryTableTemplateAttr table) {
    return table.getPositions() * 2 * table.getInvFreq().size();
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto table = cast<plan::RotaryTableTemplateAttr>(attr);
    const double n = double(elements(table));
    plan::TemplateCost c;
    c.bytes = n * plan::elementBytes(table.getElement()), c.flops = 2 * n;
    return c;
  }
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    s.phases = {cudaStrided(elements(cast<plan::RotaryTableTemplateAttr>(attr)))};
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *k, KernelTarget &target) const {
    auto table = cast<plan::RotaryTableTemplateAttr>(attr);
    std::vector<std::string> inv;
    for (double v : table.getInvFreq().asArrayRef())
      inv.push_back(literal(v, Float64Type::get(k->getContext())));
    return target.rotaryTable(table.getElement(), table.getPositions(), inv, table.getSine());
  }
};

} // namespace

void attachFillsModels(MLIRContext *context) {
  plan::FillTemplateAttr::attachInterface<FillModel>(*context);
  plan::ConstantTemplateAttr::attachInterface<ConstantModel>(*context);
  plan::RotaryTableTemplateAttr::attachInterface<RotaryTableModel>(*context);
}

} // namespace mlc::lowering
