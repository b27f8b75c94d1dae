//===- Rows.cpp - softmax, LayerNorm and their gradients -------------------===//
//
// Row kernels: `rows` rows of `columns` contiguous elements, on CUDA a block
// per row (cudaPerRow). LayerNorm's gradient adds the column sums of dw and
// db (two more phases, their partials in scratch with the rows' mean and
// rstd). Costs count each tensor's elements once per pass that reads or
// writes it. All four are typed templates: their parameters are the
// attributes' (#plan.layer_norm<element = f32, rows = 4, columns = 8, eps =
// 1.000000e-05>, PlanTemplates.td), their kernels have no params.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

/// The rows and columns of a row kernel, and its element's bytes.
struct RowShape {
  double rows, columns, el;
};
template <typename Attr> RowShape rowShape(Attr t) {
  return {double(t.getRows()), double(t.getColumns()),
          double(plan::elementBytes(t.getElement()))};
}

/// `eps` as an f64 literal.
std::string epsLiteral(const APFloat &eps, MLIRContext *context) {
  return literal(eps.convertToDouble(), Float64Type::get(context));
}

/// Row kernels share their checks and their CUDA schedule: a block per row.
template <typename Model, typename Attr> struct RowModel : TemplateModel<Model, Attr> {
  using Base = TemplateModel<Model, Attr>;

  /// What the parameters' types cannot say, for every row template (each
  /// model's verifyKernel calls it first): no params dictionary, a float
  /// `element`, a row count >= 0 and rows of `columns` > 0 elements.
  static LogicalResult verifyRows(Attr t, Operation *op) {
    if (failed(Base::refuseParams(op)))
      return mlir::failure();
    return success(succeeded(Base::verifyFloat(op, "element", t.getElement())) &&
                   succeeded(Base::verifyRowParams(op, t)) &&
                   succeeded(Base::verifyCount(op, "columns", t.getColumns(), true)));
  }
  /// A norm's `eps`: a finite f64 >= 0.
  static LogicalResult verifyEps(Operation *op, const APFloat &eps) {
    if (&eps.getSemantics() != &APFloat::IEEEdouble())
      return Base::kernelError(op) << "parameter 'eps' must be an f64";
    if ((eps.isNegative() && !eps.isZero()) || !eps.isFinite())
      return Base::kernelError(op) << "parameter 'eps' must be finite and >= 0, got "
                                   << eps.convertToDouble();
    return success();
  }
  /// The kernel's buffers, `args` for these parameters.
  static LogicalResult verifyArgs(Operation *op, int64_t args) {
    const int64_t numArgs = Base::kernelOf(op).getNumArgs();
    if (numArgs != args)
      return Base::kernelError(op) << "takes " << args << " arguments with these parameters, got "
                                   << numArgs;
    return success();
  }
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto t = cast<Attr>(attr);
    s.phases = {cudaPerRow(rowsOf(t), t.getColumns())};
    return llvm::Error::success();
  }
  /// `bytes` and `flops` per element of the rows x columns.
  static plan::TemplateCost perElement(Attribute attr, double tensors, double vectors,
                                       double flops) {
    RowShape s = rowShape(cast<Attr>(attr));
    plan::TemplateCost c;
    c.bytes = (tensors * s.rows * s.columns + vectors * s.columns) * s.el;
    c.flops = flops * s.rows * s.columns;
    return c;
  }
};

/// p0 = softmax(p1) (or, with `log`, log_softmax) along each row.
struct SoftmaxModel : RowModel<SoftmaxModel, plan::SoftmaxTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    if (failed(verifyRows(cast<plan::SoftmaxTemplateAttr>(attr), op)))
      return mlir::failure();
    return verifyArgs(op, 2);
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    return perElement(attr, 2, 0, 5); // y = softmax(x)
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto t = cast<plan::SoftmaxTemplateAttr>(attr);
    return target.softmax(t.getElement(), rowsOf(t), t.getColumns(), t.getLog());
  }
};

/// p0 = y * (g - sum(g * y)) from g = p1, y = p2.
struct SoftmaxGradModel : RowModel<SoftmaxGradModel, plan::SoftmaxGradTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    if (failed(verifyRows(cast<plan::SoftmaxGradTemplateAttr>(attr), op)))
      return mlir::failure();
    return verifyArgs(op, 3);
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    return perElement(attr, 3, 0, 3); // dx from dy, y
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto t = cast<plan::SoftmaxGradTemplateAttr>(attr);
    return target.softmaxGrad(t.getElement(), rowsOf(t), t.getColumns());
  }
};

/// p0 = LayerNorm(p1) * p2 + p3 (`rms`: RMSNorm, no bias; `unit`: neither
/// weight nor bias).
struct LayerNormModel : RowModel<LayerNormModel, plan::LayerNormTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto t = cast<plan::LayerNormTemplateAttr>(attr);
    if (failed(verifyRows(t, op)) || failed(verifyEps(op, t.getEps())))
      return mlir::failure();
    return verifyArgs(op, 2 + (t.getUnit() ? 0 : t.getRms() ? 1 : 2));
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    return perElement(attr, 2, 2, 8); // y from x, weight, bias
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *k, KernelTarget &target) const {
    auto t = cast<plan::LayerNormTemplateAttr>(attr);
    return target.layerNorm(t.getElement(), rowsOf(t), t.getColumns(),
                            epsLiteral(t.getEps(), k->getContext()), t.getRms(), t.getUnit());
  }
};

/// LayerNorm's gradients dx, dw, db (RMSNorm's dx, dw); `residual`: the
/// residual stream's gradient is added to dx.
struct LayerNormGradModel : RowModel<LayerNormGradModel, plan::LayerNormGradTemplateAttr> {
  using Attr = plan::LayerNormGradTemplateAttr;

  /// Besides the rows: `eps`, float `copy` and `grad_element` types where
  /// present, and a scratch of `capacity` rows holding the `rows`.
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto t = cast<Attr>(attr);
    if (failed(verifyRows(t, op)) || failed(verifyEps(op, t.getEps())))
      return mlir::failure();
    if (t.getCopy() && failed(verifyFloat(op, "copy", t.getCopy())))
      return mlir::failure();
    if (t.getGradElement() && failed(verifyFloat(op, "grad_element", t.getGradElement())))
      return mlir::failure();
    if (t.getCapacity() < t.getRows())
      return kernelError(op) << "parameter 'capacity' must be >= rows (" << t.getRows()
                             << "), got " << t.getCapacity();
    return success();
  }
  /// dx, dw (, db: not an RMSNorm's), and dx's `copy`, the last argument.
  bool writesArg(Attribute attr, Operation *k, int64_t arg) const {
    auto t = cast<Attr>(attr);
    if (t.getCopy() && arg == int64_t(kernelOf(k).getNumArgs()) - 1)
      return true;
    return arg >= 0 && arg < (t.getRms() ? 2 : 3);
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    // dx per row from dy, x, weight; dw, db per column from dy, x again.
    auto t = cast<Attr>(attr);
    RowShape s = rowShape(t);
    plan::TemplateCost c;
    // (g, read twice, in its own type where it is bf16.)
    const double gradBytes =
        t.getGradElement() ? double(plan::elementBytes(t.getGradElement())) : s.el;
    c.bytes = (3 * s.rows * s.columns + 3 * s.columns) * s.el + 2 * s.rows * s.columns * gradBytes;
    if (Type copy = t.getCopy())
      c.bytes += s.rows * s.columns * double(plan::elementBytes(copy));
    c.flops = 14 * s.rows * s.columns;
    return c;
  }
  /// The rows, then the column sums' two phases; scratch: (mean, rstd) per
  /// row and the chunks' partial dw, db.
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto t = cast<Attr>(attr);
    const int64_t cap = t.getCapacity(), E = t.getColumns();
    s.phases = {cudaPerRow(rowsOf(t), E)};
    s.scratch = (2 * cap + 2 * cudaColumnSums(s, cap, E) * E) * 8;
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *k, KernelTarget &target) const {
    auto t = cast<Attr>(attr);
    return target.layerNormGrad(t.getElement(), rowsOf(t), t.getCapacity(), t.getColumns(),
                                epsLiteral(t.getEps(), k->getContext()), t.getRms(),
                                t.getResidual(), t.getUnit(), t.getCopy(),
                                t.getGradElement() ? t.getGradElement() : t.getElement(),
                                t.getPlusOne());
  }
};

} // namespace

void attachRowsModels(MLIRContext *context) {
  plan::SoftmaxTemplateAttr::attachInterface<SoftmaxModel>(*context);
  plan::SoftmaxGradTemplateAttr::attachInterface<SoftmaxGradModel>(*context);
  plan::LayerNormTemplateAttr::attachInterface<LayerNormModel>(*context);
  plan::LayerNormGradTemplateAttr::attachInterface<LayerNormGradModel>(*context);
}

} // namespace mlc::lowering
