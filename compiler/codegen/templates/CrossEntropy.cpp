//===- CrossEntropy.cpp - the loss, its gradient, both in one pass ---------===//
//
// Cross-entropy of `rows` rows of `columns` logits against integer labels
// (of type `labels`), rows labelled `ignore` skipped. On CUDA a block per
// row, plus single-block phases that count the labelled rows and sum the
// loss terms from scratch in a fixed order (reproducible sums). Typed
// templates: their parameters are the attributes' own
// (#plan.cross_entropy<...>, PlanTemplates.td).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

double bytesOf(Type t) { return double(plan::elementBytes(t)); }

/// The incoming gradient `scale` as a literal of its own type ("" if none).
std::string scaleLiteral(FloatAttr scale) {
  return scale ? literalOf(scale, scale.getType()) : "";
}

/// What the three templates' verifyKernel checks beyond the types: float
/// logits, integer labels, a row count and a row of logits.
template <typename Model, typename Attr> struct LossModel : TemplateModel<Model, Attr> {
  using Base = TemplateModel<Model, Attr>;
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto a = cast<Attr>(attr);
    if (failed(Base::refuseParams(op)))
      return failure();
    if (!isa<IntegerType>(a.getLabels()))
      return Base::kernelError(op) << "parameter 'labels' must be an integer type, got "
                                   << a.getLabels();
    return success(succeeded(Base::verifyFloat(op, "element", a.getElement())) &&
                   succeeded(Base::verifyRowParams(op, a)) &&
                   succeeded(Base::verifyCount(op, "columns", a.getColumns(), true)));
  }
};

/// p0 = the mean loss of logits p1 against labels p2.
struct CrossEntropyModel : LossModel<CrossEntropyModel, plan::CrossEntropyTemplateAttr> {
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto a = cast<plan::CrossEntropyTemplateAttr>(attr);
    const double R = double(a.getRows()), C = double(a.getColumns());
    const double el = bytesOf(a.getElement());
    plan::TemplateCost c;
    c.bytes = R * C * el + R * bytesOf(a.getLabels()) + el, c.flops = 4 * R * C;
    return c;
  }
  /// The rows (each row's loss and whether it counts, in scratch), then
  /// their sum.
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto a = cast<plan::CrossEntropyTemplateAttr>(attr);
    s.phases = {cudaPerRow(rowsOf(a), a.getColumns()), cudaOneBlock()};
    s.scratch = 2 * a.getRows() * 8;
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto a = cast<plan::CrossEntropyTemplateAttr>(attr);
    return target.crossEntropy(a.getElement(), a.getLabels(), rowsOf(a), a.getColumns(),
                               a.getIgnore());
  }
};

/// The loss p0 and its gradient p1 (of type `grad`) in one pass over
/// logits p2 and labels p3; `scale` the loss's incoming gradient.
struct CrossEntropyWithGradModel
    : LossModel<CrossEntropyWithGradModel, plan::CrossEntropyWithGradTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto a = cast<plan::CrossEntropyWithGradTemplateAttr>(attr);
    if (failed(LossModel::verifyKernel(attr, op)))
      return failure();
    return verifyFloat(op, "grad", a.getGrad());
  }
  /// The loss and the gradient.
  bool writesArg(Attribute, Operation *, int64_t arg) const { return arg >= 0 && arg < 2; }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto a = cast<plan::CrossEntropyWithGradTemplateAttr>(attr);
    const double R = double(a.getRows()), C = double(a.getColumns());
    const double el = bytesOf(a.getElement());
    plan::TemplateCost c;
    c.bytes = R * C * (el + bytesOf(a.getGrad())) + R * bytesOf(a.getLabels()) + el;
    c.flops = 6 * R * C;
    return c;
  }
  /// The labelled rows' count, the rows, the loss terms' sum.
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto a = cast<plan::CrossEntropyWithGradTemplateAttr>(attr);
    s.phases = {cudaOneBlock(), cudaPerRow(rowsOf(a), a.getColumns()), cudaOneBlock()};
    s.scratch = (1 + a.getRows()) * 8;
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto a = cast<plan::CrossEntropyWithGradTemplateAttr>(attr);
    return target.crossEntropyWithGrad(a.getElement(), a.getLabels(), a.getGrad(), rowsOf(a),
                                       a.getColumns(), a.getIgnore(), scaleLiteral(a.getScale()));
  }
};

/// The gradient p0 from logits p1, labels p2 and the incoming gradient
/// (`scale`, or p3[0]).
struct CrossEntropyGradModel
    : LossModel<CrossEntropyGradModel, plan::CrossEntropyGradTemplateAttr> {
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto a = cast<plan::CrossEntropyGradTemplateAttr>(attr);
    const double R = double(a.getRows()), C = double(a.getColumns());
    plan::TemplateCost c;
    c.bytes = 2 * R * C * bytesOf(a.getElement()) + R * bytesOf(a.getLabels());
    c.flops = 5 * R * C;
    return c;
  }
  /// The labelled rows' count, then the rows.
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto a = cast<plan::CrossEntropyGradTemplateAttr>(attr);
    s.phases = {cudaOneBlock(), cudaPerRow(rowsOf(a), a.getColumns())};
    s.scratch = (1 + a.getRows()) * 8;
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto a = cast<plan::CrossEntropyGradTemplateAttr>(attr);
    return target.crossEntropyGrad(a.getElement(), a.getLabels(), rowsOf(a), a.getColumns(),
                                   a.getIgnore(), scaleLiteral(a.getScale()));
  }
};

} // namespace

void attachCrossEntropyModels(MLIRContext *context) {
  plan::CrossEntropyTemplateAttr::attachInterface<CrossEntropyModel>(*context);
  plan::CrossEntropyWithGradTemplateAttr::attachInterface<CrossEntropyWithGradModel>(*context);
  plan::CrossEntropyGradTemplateAttr::attachInterface<CrossEntropyGradModel>(*context);
}

} // namespace mlc::lowering
