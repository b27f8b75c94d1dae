//===- Copies.cpp - strided copies and the flat index ----------------------===//
//
// `copies`: p0 at each nest's destination = the nest's source argument
// (views, concatenation, padding); `iota`: p0 = the flat index along its
// nests. Each nest (#plan.nest<...>: dims, dynamic, the destination's and
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

Shape toShape(DenseI64ArrayAttr a) { return Shape(a.asArrayRef().begin(), a.asArrayRef().end()); }

/// Both templates: `Iota` tells them apart.
template <typename Model, typename Attr, bool Iota>
struct NestsModel : TemplateModel<Model, Attr> {
  /// Each nest's strides span its dims; a copy's source is one of the
  /// kernel's inputs (iota's is its index: -1).
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto t = cast<Attr>(attr);
    if (failed(NestsModel::refuseParams(op)))
      return mlir::failure();
    const int64_t args = NestsModel::kernelOf(op).getNumArgs();
    if (t.getNests().empty())
      return NestsModel::kernelError(op) << "parameter 'nests' must not be empty";
    for (auto [i, n] : llvm::enumerate(t.getNests())) {
      const size_t rank = n.getDims().size();
      if (n.getDstStrides().size() != rank || n.getSrcStrides().size() != rank)
        return NestsModel::kernelError(op)
               << "nest " << i << ": " << rank << " dims but " << n.getDstStrides().size()
               << " destination and " << n.getSrcStrides().size() << " source strides";
      const int64_t src = n.getSrcArg();
      if (Iota && src != -1)
        return NestsModel::kernelError(op)
               << "nest " << i << ": parameter 'src_arg' must be -1 (the index), got " << src;
      if (!Iota && (src < 1 || src >= args))
        return NestsModel::kernelError(op) << "nest " << i
                                           << ": parameter 'src_arg' must be an input, 1 to "
                                           << args - 1 << ", got " << src;
      if (n.getVectorLanes() < 0)
        return NestsModel::kernelError(op)
               << "nest " << i << ": parameter 'vector_lanes' must be >= 0, got "
               << n.getVectorLanes();
    }
    return success();
  }

  /// Per nest, its destination written and (copies) its source read, each
  /// over the elements its strides reach; `zero_bytes` cleared first.
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto t = cast<Attr>(attr);
    const double el = double(plan::elementBytes(t.getElement()));
    plan::TemplateCost c;
    c.bytes += double(zeroBytes(t));
    for (plan::NestAttr n : t.getNests()) {
      Shape dims = toShape(n.getDims());
      c.bytes += accessExtent(dims, n.getDstStrides().asArrayRef()) * el;
      if (!Iota)
        c.bytes += accessExtent(dims, n.getSrcStrides().asArrayRef()) * el;
    }
    return c;
  }

  /// [the zeroing], then a grid-stride phase per nest.
  llvm::Error scheduleCuda(Attribute attr, Operation *op, CudaSchedule &s) const {
    auto t = cast<Attr>(attr);
    if (zeroBytes(t))
      s.phases.push_back(cudaStrided(zeroBytes(t), 4));
    for (plan::NestAttr n : t.getNests()) {
      if (n.getVectorLanes() == 0)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "kernel @" + NestsModel::kernelOf(op).getSymName() +
                                           ": no vector decision (run mlc-cuda-vectorize first)");
      s.phases.push_back(cudaStrided(product(toShape(n.getDims())) / n.getVectorLanes()));
    }
    return llvm::Error::success();
  }

  /// Each nest as the target's pointwise nest, with the CUDA target's
  /// vector decision for it (mlc-cuda-vectorize).
  llvm::Expected<std::string> print(Attribute attr, Operation *op, KernelTarget &target) const {
    auto t = cast<Attr>(attr);
    Type el = t.getElement();
    std::string name = NestsModel::kernelOf(op).getSymName().str();
    std::vector<KernelArg> args{{el, true}};
    if (!Iota)
      args.resize(1 + t.getNests().size(), {el, false});
    std::string out = target.arguments(args);
    if (zeroBytes(t))
      out += target.zero(zeroBytes(t));
    for (plan::NestAttr nest : t.getNests()) {
      PointwiseNest n;
      n.dims = toShape(nest.getDims());
      n.dynamic = nest.getDynamic();
      int slot = Iota ? 0 : int(nest.getSrcArg());
      n.accs = {{0, nest.getDstOffset(), toShape(nest.getDstStrides()), el},
                {slot, nest.getSrcOffset(), toShape(nest.getSrcStrides()), Iota ? Type() : el}};
      if (target.name() == "cuda") {
        if (nest.getVectorLanes() == 0)
          return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                         "kernel @" + name +
                                             ": no vector decision (run mlc-cuda-vectorize)");
        n.lanes = nest.getVectorLanes();
      }
      n.vector = {nest.getDstVector(), nest.getSrcVector()};
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

private:
  /// The bytes of p0 cleared first (copies' `zero_bytes`; iota clears none).
  static int64_t zeroBytes(Attr t) {
    if constexpr (Iota)
      return 0;
    else
      return t.getZeroBytes();
  }
};

struct CopiesModel : NestsModel<CopiesModel, plan::CopiesTemplateAttr, false> {};
struct IotaModel : NestsModel<IotaModel, plan::IotaTemplateAttr, true> {};

} // namespace

void attachCopiesModels(MLIRContext *context) {
  plan::CopiesTemplateAttr::attachInterface<CopiesModel>(*context);
  plan::IotaTemplateAttr::attachInterface<IotaModel>(*context);
}

} // namespace mlc::lowering
