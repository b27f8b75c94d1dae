//===- Reduction.cpp - sum, mean or max over rows, columns or any axes -----===//
//
// p0 = reduce(p1) (ReductionKernel; its #plan.reduction<...> written by
// encodeReduction): `layout` rows (a block per row on CUDA), columns (the
// two column-sum phases, the chunks' partials in scratch) or general (a
// thread per output). Every input element is read and added once, every
// output written once.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

struct ReductionModel : TemplateModel<ReductionModel, plan::ReductionTemplateAttr> {
  /// What its layout reads is there and positive; what it does not, absent.
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto a = cast<plan::ReductionTemplateAttr>(attr);
    if (failed(refuseParams(op)))
      return mlir::failure();
    const bool general = a.getLayout() == plan::ReductionLayout::general;
    auto positive = [&](StringRef name, int64_t v) -> LogicalResult {
      if (v > 0)
        return success();
      return kernelError(op) << "parameter '" << name << "' must be > 0 in a "
                             << plan::stringifyReductionLayout(a.getLayout())
                             << " reduction, got " << v;
    };
    if (!general && (mlir::failed(positive("rows", a.getRows())) ||
                     mlir::failed(positive("length", a.getLength()))))
      return mlir::failure();
    if (a.getLayout() != plan::ReductionLayout::columns &&
        mlir::failed(positive("outputs", a.getOutputs())))
      return mlir::failure();
    if (a.getCount() < 1)
      return kernelError(op) << "parameter 'count' must be > 0, got " << a.getCount();
    const bool axes = a.getKeptDims() || a.getKeptStrides() || a.getReducedDims() ||
                      a.getReducedStrides();
    if (!general && axes)
      return kernelError(op) << "the kept and reduced axes belong to a general reduction";
    if (general) {
      if (!a.getKeptDims() || !a.getKeptStrides() || !a.getReducedDims() ||
          !a.getReducedStrides())
        return kernelError(op) << "a general reduction needs kept_dims, kept_strides, "
                                  "reduced_dims and reduced_strides";
      if (a.getKeptDims().size() != a.getKeptStrides().size() ||
          a.getReducedDims().size() != a.getReducedStrides().size())
        return kernelError(op) << "a general reduction's dims and strides differ in length";
    }
    return success();
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    ReductionKernel red = decodeReduction(cast<plan::ReductionTemplateAttr>(attr));
    double in = 0, out = 0;
    if (red.shape == ReductionKernel::General)
      out = double(product(red.keptDims)), in = out * double(product(red.reducedDims));
    else if (red.shape == ReductionKernel::Columns)
      out = double(red.length), in = double(red.rows.count) * red.length;
    else
      out = double(red.rows.count), in = out * red.length;
    plan::TemplateCost c;
    c.bytes = (in + out) * double(plan::elementBytes(red.element)), c.flops = in;
    return c;
  }
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    ReductionKernel red = decodeReduction(cast<plan::ReductionTemplateAttr>(attr));
    if (red.shape == ReductionKernel::Rows)
      s.phases = {cudaPerRow(red.rows, red.length)};
    else if (red.shape == ReductionKernel::Columns)
      s.scratch = cudaColumnSums(s, red.rows.count, red.length) * red.length * 8;
    else
      s.phases = {cudaStrided(red.outputs)};
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    return target.reduction(decodeReduction(cast<plan::ReductionTemplateAttr>(attr)));
  }
};

} // namespace

void attachReductionModels(MLIRContext *context) {
  plan::ReductionTemplateAttr::attachInterface<ReductionModel>(*context);
}

} // namespace mlc::lowering
