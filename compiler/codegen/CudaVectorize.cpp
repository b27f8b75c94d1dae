//===- CudaVectorize.cpp - mlc-cuda-vectorize: vector accesses on kernel IR ===//
//
// The CUDA target's decision for each pointwise kernel with a body, made on
// its structure (Vectorize.h states the rule) and recorded in the IR: the
// kernel's `vector_lanes` and each vector access's `vector` flag.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/Passes.h"
#include "compiler/codegen/templates/TemplateModel.h"
#include "compiler/codegen/Vectorize.h"
#include "dialects/plan/PlanDialect.h"

namespace mlc {
#define GEN_PASS_DEF_MLCCUDAVECTORIZE
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;

namespace {

class CudaVectorizePass : public mlc::impl::MlcCudaVectorizeBase<CudaVectorizePass> {
public:
  /// The plan dialect and its templates' models (templates/).
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    MlcCudaVectorizeBase::getDependentDialects(registry);
    mlc::lowering::registerTemplateModels(registry);
  }
  void runOnOperation() final {
    ModuleOp module = getOperation();
    int64_t capacity = 0;
    if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
      capacity = cap.getInt();
    module.walk([&](mlc::plan::KernelOp k) {
      // Pointwise nests only: a rows or column_reduction body is the
      // element code of a template whose loops are the target's own.
      auto kind = k.getKind();
      if (!k.getBody().empty() &&
          (kind == mlc::plan::KernelTemplate::pointwise || kind == mlc::plan::KernelTemplate::copy))
        decide(k, capacity);
      else if (isa_and_nonnull<mlc::plan::CopiesTemplateAttr, mlc::plan::IotaTemplateAttr>(
                   k.getKernelTemplateAttr()))
        decideNests(k, capacity, isa<mlc::plan::IotaTemplateAttr>(k.getKernelTemplateAttr()));
    });
  }

private:
  /// A copy kernel's nests (#plan.nest<...>): the destination written, the
  /// source read (iota's source is its index: no element, never a vector).
  static void decideNests(mlc::plan::KernelOp k, int64_t capacity, bool iota) {
    using namespace mlc::lowering;
    using mlc::plan::NestAttr;
    Attribute t = k.getKernelTemplateAttr();
    auto copies = dyn_cast<mlc::plan::CopiesTemplateAttr>(t);
    auto iotaAttr = dyn_cast<mlc::plan::IotaTemplateAttr>(t);
    Type element = copies ? copies.getElement() : iotaAttr.getElement();
    ArrayRef<NestAttr> nests = copies ? copies.getNests() : iotaAttr.getNests();
    int64_t bytes = mlc::plan::elementBytes(element);
    auto vec = [](DenseI64ArrayAttr a) {
      return std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
    };
    SmallVector<NestAttr> decided;
    for (NestAttr n : nests) {
      std::vector<NestAccess> accs{{n.getDstOffset(), vec(n.getDstStrides()), bytes, true},
                                   {n.getSrcOffset(), vec(n.getSrcStrides()), iota ? 0 : bytes,
                                    !iota}};
      VectorChoice c = chooseVectors(vec(n.getDims()), accs, n.getDynamic(), capacity);
      decided.push_back(NestAttr::get(k.getContext(), n.getDims(), n.getDynamic(),
                                      n.getDstOffset(), n.getDstStrides(), n.getSrcArg(),
                                      n.getSrcOffset(), n.getSrcStrides(), c.lanes,
                                      c.lanes > 1 && c.vector[0], c.lanes > 1 && c.vector[1]));
    }
    Attribute typed =
        copies ? Attribute(mlc::plan::CopiesTemplateAttr::get(k.getContext(), element, decided,
                                                              copies.getZeroBytes()))
               : Attribute(mlc::plan::IotaTemplateAttr::get(k.getContext(), element, decided));
    k.setKernelTemplateAttr(cast<mlc::plan::TemplateAttrInterface>(typed));
  }

  static void decide(mlc::plan::KernelOp k, int64_t capacity) {
    using namespace mlc::lowering;
    auto params = k.getParamsAttr();
    auto dims = params.getAs<DenseI64ArrayAttr>("dims");
    std::vector<int64_t> shape(dims.asArrayRef().begin(), dims.asArrayRef().end());
    std::vector<NestAccess> accs(k.getNumArgs());
    auto note = [&](int64_t arg, int64_t offset, ArrayRef<int64_t> strides, Value v) {
      Type el = cast<RankedTensorType>(v.getType()).getElementType();
      accs[arg] = {offset, std::vector<int64_t>(strides.begin(), strides.end()),
                   mlc::plan::elementBytes(el), true};
    };
    k.getBody().walk([&](Operation *op) {
      if (auto l = dyn_cast<mlc::plan::LoadOp>(op))
        note(l.getArg(), l.getOffset(), l.getStrides(), l.getValue());
      else if (auto s = dyn_cast<mlc::plan::StoreOp>(op))
        note(s.getArg(), s.getOffset(), s.getStrides(), s.getValue());
    });
    VectorChoice choice = chooseVectors(shape, accs, bool(params.get("dynamic")), capacity);
    NamedAttrList list(params);
    list.set("vector_lanes", IntegerAttr::get(IntegerType::get(k.getContext(), 64), choice.lanes));
    k.setParamsAttr(list.getDictionary(k.getContext()));
    auto isVector = [&](int64_t arg) { return choice.lanes > 1 && choice.vector[arg]; };
    k.getBody().walk([&](Operation *op) {
      if (auto l = dyn_cast<mlc::plan::LoadOp>(op))
        l.setVector(isVector(l.getArg()));
      else if (auto s = dyn_cast<mlc::plan::StoreOp>(op))
        s.setVector(isVector(s.getArg()));
    });
  }
};

} // namespace
