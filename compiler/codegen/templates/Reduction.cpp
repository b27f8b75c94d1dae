//===- Reduction.cpp - sum, mean or max over rows, columns or any axes -----===//
//
// p0 = reduce(p1) (ReductionKernel, encoded by encodeReduction): `layout`
// rows (a block per row on CUDA), columns (the two column-sum phases, the
// chunks' partials in scratch) or general (a thread per output). Every
// input element is read and added once, every output written once.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

struct ReductionModel : TemplateModel<ReductionModel, plan::ReductionTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"reduce", K::String, true},          {"layout", K::String, true},
      {"element", K::Type, true},           {"rows", K::I64, false}, // not in a general layout
      {"rows_per_token", K::I64, false},    {"outputs", K::I64, false},
      {"length", K::I64, false},            {"count", K::I64, false},
      {"kept_dims", K::I64Array, false},    {"kept_strides", K::I64Array, false},
      {"reduced_dims", K::I64Array, false}, {"reduced_strides", K::I64Array, false}};

  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    ReductionKernel red = decodeReduction(r);
    double in = 0, out = 0;
    if (red.shape == ReductionKernel::General)
      out = double(product(red.keptDims)), in = out * double(product(red.reducedDims));
    else if (red.shape == ReductionKernel::Columns)
      out = double(red.length), in = double(red.rows.count) * red.length;
    else
      out = double(red.rows.count), in = out * red.length;
    plan::TemplateCost c;
    c.bytes = (in + out) * double(plan::elementBytes(red.element)), c.flops = in;
    return checked(r, c);
  }
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    ReductionKernel red = decodeReduction(r);
    if (red.shape == ReductionKernel::Rows)
      s.phases = {cudaPerRow(red.rows, red.length)};
    else if (red.shape == ReductionKernel::Columns)
      s.scratch = cudaColumnSums(s, red.rows.count, red.length) * red.length * 8;
    else
      s.phases = {cudaStrided(red.outputs)};
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    ReductionKernel red = decodeReduction(r);
    if (auto err = r.error())
      return std::move(err);
    return target.reduction(red);
  }
};

} // namespace

void attachReductionModels(MLIRContext *context) {
  plan::ReductionTemplateAttr::attachInterface<ReductionModel>(*context);
}

} // namespace mlc::lowering
