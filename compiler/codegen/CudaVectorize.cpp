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
  /// A copy kernel's nests (params.nests): the destination written, the
  /// source read (iota's source is its index: no element, never a vector).
  static void decideNests(mlc::plan::KernelOp k, int64_t capacity, bool iota) {
    using namespace mlc::lowering;
    MLIRContext *context = k.getContext();
    auto params = k.getParamsAttr();
    auto nests = params.getAs<ArrayAttr>("nests");
    auto element = params.getAs<TypeAttr>("element");
    if (!nests || !element)
      return;
    int64_t bytes = mlc::plan::elementBytes(element.getValue());
    auto i64s = [](DictionaryAttr d, StringRef name) {
      auto a = d.getAs<DenseI64ArrayAttr>(name);
      return a ? std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end())
               : std::vector<int64_t>();
    };
    auto i64 = [](DictionaryAttr d, StringRef name) {
      auto a = d.getAs<IntegerAttr>(name);
      return a ? a.getInt() : int64_t(0);
    };
    SmallVector<Attribute> decided;
    for (Attribute a : nests) {
      auto nest = cast<DictionaryAttr>(a);
      std::vector<NestAccess> accs{
          {i64(nest, "dst_offset"), i64s(nest, "dst_strides"), bytes, true},
          {i64(nest, "src_offset"), i64s(nest, "src_strides"), iota ? 0 : bytes, !iota}};
      VectorChoice c =
          chooseVectors(i64s(nest, "dims"), accs, bool(nest.get("dynamic")), capacity);
      NamedAttrList list(nest);
      list.set("vector_lanes", IntegerAttr::get(IntegerType::get(context, 64), c.lanes));
      list.erase("dst_vector");
      list.erase("src_vector");
      if (c.lanes > 1 && c.vector[0])
        list.set("dst_vector", UnitAttr::get(context));
      if (c.lanes > 1 && c.vector[1])
        list.set("src_vector", UnitAttr::get(context));
      decided.push_back(list.getDictionary(context));
    }
    NamedAttrList list(params);
    list.set("nests", ArrayAttr::get(context, decided));
    k.setParamsAttr(list.getDictionary(context));
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
