//===- CrossEntropy.cpp - the loss, its gradient, both in one pass ---------===//
//
// Cross-entropy of `rows` rows of `columns` logits against integer labels
// (of type `labels`), rows labelled `ignore` skipped. On CUDA a block per
// row, plus single-block phases that count the labelled rows and sum the
// loss terms from scratch in a fixed order (reproducible sums).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

double bytesOf(Type t) { return double(plan::elementBytes(t)); }

/// The incoming gradient `scale` as a literal of its own type ("" if none).
std::string scaleLiteral(FloatAttr scale) {
  return scale ? literalOf(scale, scale.getType()) : "";
}

/// p0 = the mean loss of logits p1 against labels p2.
struct CrossEntropyModel : TemplateModel<CrossEntropyModel, plan::CrossEntropyTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, {"labels", K::Type, true}, MLC_TEMPLATE_ROWS,
      {"columns", K::I64, true},  {"ignore", K::I64, true}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    const double R = double(r.rows().count), C = double(r.i64("columns"));
    const double el = bytesOf(r.type("element"));
    plan::TemplateCost c;
    c.bytes = R * C * el + R * bytesOf(r.type("labels")) + el, c.flops = 4 * R * C;
    return checked(r, c);
  }
  /// The rows (each row's loss and whether it counts, in scratch), then
  /// their sum.
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    s.phases = {cudaPerRow(r.rows(), r.i64("columns")), cudaOneBlock()};
    s.scratch = 2 * r.rows().count * 8;
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.crossEntropy(r.type("element"), r.type("labels"), r.rows(),
                                          r.i64("columns"), r.i64("ignore")));
  }
};

/// The loss p0 and its gradient p1 (of type `grad`) in one pass over
/// logits p2 and labels p3; `scale` the loss's incoming gradient.
struct CrossEntropyWithGradModel
    : TemplateModel<CrossEntropyWithGradModel, plan::CrossEntropyWithGradTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, {"labels", K::Type, true}, {"grad", K::Type, true},
      MLC_TEMPLATE_ROWS,          {"columns", K::I64, true}, {"ignore", K::I64, true},
      {"scale", K::Float, false}};

  /// The loss and the gradient.
  bool writesArg(Attribute, Operation *, int64_t arg) const { return arg >= 0 && arg < 2; }
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    const double R = double(r.rows().count), C = double(r.i64("columns"));
    const double el = bytesOf(r.type("element"));
    plan::TemplateCost c;
    c.bytes = R * C * (el + bytesOf(r.type("grad"))) + R * bytesOf(r.type("labels")) + el;
    c.flops = 6 * R * C;
    return checked(r, c);
  }
  /// The labelled rows' count, the rows, the loss terms' sum.
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    s.phases = {cudaOneBlock(), cudaPerRow(r.rows(), r.i64("columns")), cudaOneBlock()};
    s.scratch = (1 + r.rows().count) * 8;
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    auto scale = dyn_cast_or_null<FloatAttr>(r.attr("scale"));
    return checked(r, target.crossEntropyWithGrad(r.type("element"), r.type("labels"),
                                                  r.type("grad"), r.rows(), r.i64("columns"),
                                                  r.i64("ignore"), scaleLiteral(scale)));
  }
};

/// The gradient p0 from logits p1, labels p2 and the incoming gradient
/// (`scale`, or p3[0]).
struct CrossEntropyGradModel
    : TemplateModel<CrossEntropyGradModel, plan::CrossEntropyGradTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, {"labels", K::Type, true}, MLC_TEMPLATE_ROWS,
      {"columns", K::I64, true},  {"ignore", K::I64, true},  {"scale", K::Float, false}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    const double R = double(r.rows().count), C = double(r.i64("columns"));
    plan::TemplateCost c;
    c.bytes = 2 * R * C * bytesOf(r.type("element")) + R * bytesOf(r.type("labels"));
    c.flops = 5 * R * C;
    return checked(r, c);
  }
  /// The labelled rows' count, then the rows.
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    s.phases = {cudaOneBlock(), cudaPerRow(r.rows(), r.i64("columns"))};
    s.scratch = (1 + r.rows().count) * 8;
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    auto scale = kernelOf(k).getParamsAttr().getAs<FloatAttr>("scale");
    return checked(r, target.crossEntropyGrad(r.type("element"), r.type("labels"), r.rows(),
                                              r.i64("columns"), r.i64("ignore"),
                                              scaleLiteral(scale)));
  }
};

} // namespace

void attachCrossEntropyModels(MLIRContext *context) {
  plan::CrossEntropyTemplateAttr::attachInterface<CrossEntropyModel>(*context);
  plan::CrossEntropyWithGradTemplateAttr::attachInterface<CrossEntropyWithGradModel>(*context);
  plan::CrossEntropyGradTemplateAttr::attachInterface<CrossEntropyGradModel>(*context);
}

} // namespace mlc::lowering
