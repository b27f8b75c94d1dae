//===- Copies.cpp - strided copies and the flat index ----------------------===//
//
// `copies`: p0 at each nest's destination = the nest's source argument
// (views, concatenation, padding); `iota`: p0 = the flat index along its
// nests. Each nest (params.nests: dims, dynamic, the destination's and
// source's offset and strides, src_arg) is one target pointwise nest and one
// grid-stride CUDA phase at the vector lanes mlc-cuda-vectorize chose for
// it; `zero_bytes` of p0 are cleared first (a phase of their own).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

llvm::Error noNests(plan::KernelOp k) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "kernel @" + k.getSymName() + ": no nests");
}

/// Both templates: `Iota` tells them apart.
template <typename Model, typename Attr, bool Iota>
struct NestsModel : TemplateModel<Model, Attr> {
  static constexpr plan::TemplateParam kSchema[] = {{"element", K::Type, true},
                                                    {"nests", K::Nests, true},
                                                    {"zero_bytes", K::I64, false}};

  /// Per nest, its destination written and (copies) its source read, each
  /// over the elements its strides reach; `zero_bytes` cleared first.
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *op,
                                             const plan::CostContext &) const {
    plan::KernelOp k = NestsModel::kernelOf(op);
    ParamsReader top = NestsModel::reader(op);
    const double el = double(plan::elementBytes(top.type("element")));
    if (auto err = top.error())
      return std::move(err);
    DictionaryAttr params = k.getParamsAttr();
    auto nests = params.getAs<ArrayAttr>("nests");
    if (!nests)
      return noNests(k);
    plan::TemplateCost c;
    if (auto zero = params.getAs<IntegerAttr>("zero_bytes"))
      c.bytes += double(zero.getInt());
    for (Attribute a : nests) {
      ParamsReader r(dyn_cast<DictionaryAttr>(a), k.getSymName());
      Shape dims = r.i64s("dims"), dst = r.i64s("dst_strides"), src = r.i64s("src_strides");
      if (auto err = r.error())
        return std::move(err);
      c.bytes += accessExtent(dims, dst) * el;
      if (!Iota)
        c.bytes += accessExtent(dims, src) * el;
    }
    return c;
  }

  /// [the zeroing], then a grid-stride phase per nest.
  llvm::Error scheduleCuda(Attribute, Operation *op, CudaSchedule &s) const {
    plan::KernelOp k = NestsModel::kernelOf(op);
    if (auto zero = k.getParamsAttr().getAs<IntegerAttr>("zero_bytes"))
      s.phases.push_back(cudaStrided(zero.getInt(), 4));
    auto nests = k.getParamsAttr().getAs<ArrayAttr>("nests");
    for (Attribute a : nests ? nests : ArrayAttr::get(k.getContext(), {})) {
      ParamsReader n(dyn_cast<DictionaryAttr>(a), k.getSymName());
      Shape dims = n.i64s("dims");
      int64_t lanes = n.i64("vector_lanes");
      if (auto err = n.error())
        return err;
      s.phases.push_back(cudaStrided(product(dims) / std::max<int64_t>(1, lanes)));
    }
    return llvm::Error::success();
  }

  /// Each nest as the target's pointwise nest, with the CUDA target's
  /// vector decision for it (mlc-cuda-vectorize).
  llvm::Expected<std::string> print(Attribute, Operation *op, KernelTarget &target) const {
    plan::KernelOp k = NestsModel::kernelOf(op);
    ParamsReader top = NestsModel::reader(op);
    Type el = top.type("element");
    if (auto err = top.error())
      return std::move(err);
    std::string name = k.getSymName().str();
    DictionaryAttr params = k.getParamsAttr();
    auto nests = params.getAs<ArrayAttr>("nests");
    if (!nests)
      return noNests(k);
    std::vector<KernelArg> args{{el, true}};
    if (!Iota)
      args.resize(1 + nests.size(), {el, false});
    std::string out = target.arguments(args);
    if (auto zero = params.getAs<IntegerAttr>("zero_bytes"))
      out += target.zero(zero.getInt());
    for (Attribute a : nests) {
      ParamsReader r(dyn_cast<DictionaryAttr>(a), name);
      PointwiseNest n;
      n.dims = r.i64s("dims");
      n.dynamic = r.flag("dynamic");
      int slot = Iota ? 0 : int(r.i64("src_arg"));
      n.accs = {{0, r.i64("dst_offset"), r.i64s("dst_strides"), el},
                {slot, r.i64("src_offset"), r.i64s("src_strides"), Iota ? Type() : el}};
      if (target.name() == "cuda") {
        if (!r.has("vector_lanes"))
          return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                         "kernel @" + name +
                                             ": no vector decision (run mlc-cuda-vectorize)");
        n.lanes = r.i64("vector_lanes");
      }
      if (auto err = r.error())
        return std::move(err);
      n.vector = {r.flag("dst_vector"), r.flag("src_vector")};
      n.read = {false, !Iota};
      n.written = {true, false};
      n.offsetUsed = {!n.vector[0], Iota || !n.vector[1]};
      std::string src = Iota ? "(" + cType(el) + ")o1" : "p" + std::to_string(slot) + "[o1]";
      std::string body = "    p0[o0] = " + src + ";\n";
      std::string vectorBody = "    " + std::string(n.vector[0] ? "v0[u]" : "p0[o0]") + " = " +
                               (n.vector[1] ? "v1[u]" : src) + ";\n";
      out += target.pointwiseNest(n, body, vectorBody);
    }
    return out;
  }
};

struct CopiesModel : NestsModel<CopiesModel, plan::CopiesTemplateAttr, false> {};
struct IotaModel : NestsModel<IotaModel, plan::IotaTemplateAttr, true> {};

} // namespace

void attachCopyModels(MLIRContext *context) {
  plan::CopiesTemplateAttr::attachInterface<CopiesModel>(*context);
  plan::IotaTemplateAttr::attachInterface<IotaModel>(*context);
}

} // namespace mlc::lowering
