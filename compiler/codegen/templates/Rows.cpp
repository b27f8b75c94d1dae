//===- Rows.cpp - softmax, LayerNorm and their gradients -------------------===//
//
// Row kernels: `rows` rows of `columns` contiguous elements, on CUDA a block
// per row (cudaPerRow). LayerNorm's gradient adds the column sums of dw and
// db (two more phases, their partials in scratch with the rows' mean and
// rstd). Costs count each tensor's elements once per pass that reads or
// writes it.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

/// The rows and columns of a row kernel, and its element's bytes.
struct RowShape {
  double rows, columns, el;
};
RowShape rowShape(ParamsReader &r) {
  return {double(r.rows().count), double(r.i64("columns")),
          double(plan::elementBytes(r.type("element")))};
}

/// Row kernels share their CUDA schedule: a block per row.
template <typename Model, typename Attr> struct RowModel : TemplateModel<Model, Attr> {
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = RowModel::reader(k);
    s.phases = {cudaPerRow(r.rows(), r.i64("columns"))};
    return r.error();
  }
  /// `bytes` and `flops` per element of the rows x columns.
  static llvm::Expected<plan::TemplateCost> perElement(Operation *k, double tensors,
                                                       double vectors, double flops) {
    ParamsReader r = RowModel::reader(k);
    RowShape s = rowShape(r);
    plan::TemplateCost c;
    c.bytes = (tensors * s.rows * s.columns + vectors * s.columns) * s.el;
    c.flops = flops * s.rows * s.columns;
    return RowModel::checked(r, c);
  }
};

/// p0 = softmax(p1) (or, with `log`, log_softmax) along each row.
struct SoftmaxModel : RowModel<SoftmaxModel, plan::SoftmaxTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, MLC_TEMPLATE_ROWS, {"columns", K::I64, true},
      {"log", K::Flag, false}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    return perElement(k, 2, 0, 5); // y = softmax(x)
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.softmax(r.type("element"), r.rows(), r.i64("columns"),
                                     r.flag("log")));
  }
};

/// p0 = y * (g - sum(g * y)) from g = p1, y = p2.
struct SoftmaxGradModel : RowModel<SoftmaxGradModel, plan::SoftmaxGradTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, MLC_TEMPLATE_ROWS, {"columns", K::I64, true}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    return perElement(k, 3, 0, 3); // dx from dy, y
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.softmaxGrad(r.type("element"), r.rows(), r.i64("columns")));
  }
};

/// `eps` as an f64 literal.
std::string epsLiteral(ParamsReader &r, MLIRContext *context) {
  return literal(r.f64("eps"), Float64Type::get(context));
}

/// p0 = LayerNorm(p1) * p2 + p3 (`rms`: RMSNorm, no bias).
struct LayerNormModel : RowModel<LayerNormModel, plan::LayerNormTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, MLC_TEMPLATE_ROWS, {"columns", K::I64, true},
      {"eps", K::F64, true},      {"rms", K::Flag, false},    {"unit", K::Flag, false}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    return perElement(k, 2, 2, 8); // y from x, weight, bias
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.layerNorm(r.type("element"), r.rows(), r.i64("columns"),
                                       epsLiteral(r, k->getContext()), r.flag("rms"),
                                       r.flag("unit")));
  }
};

/// LayerNorm's gradients dx, dw, db (RMSNorm's dx, dw); `residual`: the
/// residual stream's gradient is added to dx.
struct LayerNormGradModel : TemplateModel<LayerNormGradModel, plan::LayerNormGradTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, MLC_TEMPLATE_ROWS,     {"capacity", K::I64, true},
      {"columns", K::I64, true},  {"eps", K::F64, true}, {"rms", K::Flag, false},
      {"residual", K::Flag, false}, {"unit", K::Flag, false}, {"copy", K::Type, false},
      {"grad_element", K::Type, false}, {"plus_one", K::Flag, false}};

  /// dx, dw (, db: not an RMSNorm's), and dx's `copy`, the last argument.
  bool writesArg(Attribute, Operation *k, int64_t arg) const {
    plan::KernelOp kernel = kernelOf(k);
    if (kernel.getParamsAttr().get("copy") && arg == int64_t(kernel.getNumArgs()) - 1)
      return true;
    return arg >= 0 && arg < (kernel.getParamsAttr().get("rms") ? 2 : 3);
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    // dx per row from dy, x, weight; dw, db per column from dy, x again.
    ParamsReader r = reader(k);
    RowShape s = rowShape(r);
    plan::TemplateCost c;
    // (g, read twice, in its own type where it is bf16.)
    const double gradBytes =
        r.has("grad_element") ? double(plan::elementBytes(r.type("grad_element"))) : s.el;
    c.bytes = (3 * s.rows * s.columns + 3 * s.columns) * s.el + 2 * s.rows * s.columns * gradBytes;
    if (Type copy = r.has("copy") ? r.type("copy") : Type())
      c.bytes += s.rows * s.columns * double(plan::elementBytes(copy));
    c.flops = 14 * s.rows * s.columns;
    return checked(r, c);
  }
  /// The rows, then the column sums' two phases; scratch: (mean, rstd) per
  /// row and the chunks' partial dw, db.
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    const int64_t cap = r.i64("capacity"), E = r.i64("columns");
    s.phases = {cudaPerRow(r.rows(), E)};
    s.scratch = (2 * cap + 2 * cudaColumnSums(s, cap, E) * E) * 8;
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.layerNormGrad(r.type("element"), r.rows(), r.i64("capacity"),
                                           r.i64("columns"), epsLiteral(r, k->getContext()),
                                           r.flag("rms"), r.flag("residual"), r.flag("unit"),
                                           r.has("copy") ? r.type("copy") : Type(),
                                           r.has("grad_element") ? r.type("grad_element")
                                                                 : r.type("element"),
                                           r.flag("plus_one")));
  }
};

} // namespace

void attachRowModels(MLIRContext *context) {
  plan::SoftmaxTemplateAttr::attachInterface<SoftmaxModel>(*context);
  plan::SoftmaxGradTemplateAttr::attachInterface<SoftmaxGradModel>(*context);
  plan::LayerNormTemplateAttr::attachInterface<LayerNormModel>(*context);
  plan::LayerNormGradTemplateAttr::attachInterface<LayerNormGradModel>(*context);
}

} // namespace mlc::lowering
