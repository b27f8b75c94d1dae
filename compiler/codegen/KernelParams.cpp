//===- KernelParams.cpp - a template kernel's parameters as attributes -----===//

#include "compiler/codegen/KernelParams.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace mlc::lowering {

ParamsBuilder &ParamsBuilder::type(llvm::StringRef name, Type t) {
  list.set(name, TypeAttr::get(t));
  return *this;
}
ParamsBuilder &ParamsBuilder::i64(llvm::StringRef name, int64_t v) {
  list.set(name, IntegerAttr::get(IntegerType::get(context, 64), v));
  return *this;
}
ParamsBuilder &ParamsBuilder::f64(llvm::StringRef name, double v) {
  list.set(name, FloatAttr::get(Float64Type::get(context), v));
  return *this;
}
ParamsBuilder &ParamsBuilder::flag(llvm::StringRef name, bool v) {
  if (v)
    list.set(name, UnitAttr::get(context));
  return *this;
}
ParamsBuilder &ParamsBuilder::i64s(llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
  list.set(name, DenseI64ArrayAttr::get(context, v));
  return *this;
}
ParamsBuilder &ParamsBuilder::attr(llvm::StringRef name, Attribute a) {
  list.set(name, a);
  return *this;
}
ParamsBuilder &ParamsBuilder::rows(const Rows &r) {
  i64("rows", r.count);
  if (r.dynamic())
    i64("rows_per_token", r.perToken);
  return *this;
}
DictionaryAttr ParamsBuilder::get() const { return list.getDictionary(context); }

void ParamsReader::missing(llvm::StringRef name, llvm::StringRef what) {
  if (problem.empty())
    problem = "kernel @" + kernel + ": parameter '" + name.str() + "' is missing or not " +
              what.str();
}
Type ParamsReader::type(llvm::StringRef name) {
  if (auto t = params ? params.getAs<TypeAttr>(name) : TypeAttr())
    return t.getValue();
  missing(name, "a type");
  return params ? Type(NoneType::get(params.getContext())) : Type();
}
int64_t ParamsReader::i64(llvm::StringRef name) {
  if (auto v = params ? params.getAs<IntegerAttr>(name) : IntegerAttr())
    return v.getValue().getSExtValue();
  missing(name, "an integer");
  return 0;
}
double ParamsReader::f64(llvm::StringRef name) {
  if (auto v = params ? params.getAs<FloatAttr>(name) : FloatAttr())
    return v.getValueAsDouble();
  missing(name, "a float");
  return 0;
}
bool ParamsReader::flag(llvm::StringRef name) const { return has(name); }
bool ParamsReader::has(llvm::StringRef name) const { return params && params.get(name); }
Shape ParamsReader::i64s(llvm::StringRef name) {
  if (auto v = params ? params.getAs<DenseI64ArrayAttr>(name) : DenseI64ArrayAttr())
    return Shape(v.asArrayRef().begin(), v.asArrayRef().end());
  missing(name, "an i64 array");
  return {};
}
Attribute ParamsReader::attr(llvm::StringRef name) {
  Attribute a = params ? params.get(name) : Attribute();
  if (!a)
    missing(name, "present");
  return a;
}
Rows ParamsReader::rows() {
  Rows r;
  r.count = i64("rows");
  if (has("rows_per_token"))
    r.perToken = i64("rows_per_token");
  return r;
}
llvm::Error ParamsReader::error() {
  if (problem.empty())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), problem);
}

plan::AttentionTemplateAttr encodeAttention(const AttentionKernel &a, MLIRContext *context) {
  // Per tensor: offset, batch, head and row strides.
  Shape tensors;
  for (const AttentionKernel::Tensor &t : a.tensors)
    tensors.insert(tensors.end(), {t.offset, t.batchStride, t.headStride, t.rowStride});
  SmallVector<Type> types;
  SmallVector<bool> written;
  for (const KernelArg &arg : a.args) {
    types.push_back(arg.element);
    written.push_back(arg.written);
  }
  const bool rotary = a.rotaryDim > 0, blocked = a.blockSlot >= 0;
  return plan::AttentionTemplateAttr::get(
      context, a.element, a.backward, a.varlen, a.causal, a.mask, a.bf16Products, a.batch,
      a.heads, a.kvHeads, a.seqQ, a.seqK, a.headDim, a.valueDim, a.tokenCapacity,
      APFloat(a.scale), APFloat(a.dropout), a.seed, APFloat(a.softcap > 0 ? a.softcap : 0.0),
      a.window > 0 ? a.window : 0, types, written, a.query, a.maskStrides, a.cuSlot, tensors,
      rotary ? a.rotaryDim : 0, rotary && a.interleaved,
      rotary ? Shape{a.rotaryBatch, a.rotaryRow} : Shape{}, rotary ? a.rotarySlot : -1,
      blocked ? a.blocks : 0, blocked ? a.blockAxis : 0, blocked ? a.blockSlot : -1);
}

AttentionKernel decodeAttention(plan::AttentionTemplateAttr attr) {
  AttentionKernel a;
  a.element = attr.getElement();
  a.backward = attr.getBackward();
  a.varlen = attr.getVarlen();
  a.causal = attr.getCausal();
  a.mask = attr.getMask();
  a.bf16Products = attr.getBf16Products();
  a.batch = attr.getBatch();
  a.heads = attr.getHeads();
  a.kvHeads = attr.getKvHeads();
  a.seqQ = attr.getSeqQ();
  a.seqK = attr.getSeqK();
  a.headDim = attr.getHeadDim();
  a.valueDim = attr.getValueDim();
  a.tokenCapacity = attr.getTokenCapacity();
  a.scale = attr.getScale().convertToDouble();
  a.dropout = attr.getDropout().convertToDouble();
  a.seed = attr.getSeed();
  a.softcap = attr.getSoftcap().convertToDouble();
  a.window = attr.getWindow();
  a.query = attr.getQuery();
  a.maskStrides.assign(attr.getMaskStrides().begin(), attr.getMaskStrides().end());
  a.cuSlot = attr.getCuSlot();
  if (attr.getRotaryDim() > 0) { // the plan verifier checked them together
    a.rotaryDim = attr.getRotaryDim();
    a.interleaved = attr.getInterleaved();
    if (attr.getRotaryStrides().size() == 2)
      a.rotaryBatch = attr.getRotaryStrides()[0], a.rotaryRow = attr.getRotaryStrides()[1];
    a.rotarySlot = attr.getRotarySlot();
  }
  if (attr.getBlockSlot() >= 0) {
    a.blocks = attr.getBlocks();
    a.blockAxis = attr.getBlockAxis();
    a.blockSlot = attr.getBlockSlot();
  }
  llvm::ArrayRef<int64_t> t = attr.getTensors();
  for (size_t i = 0; i + 3 < t.size(); i += 4)
    a.tensors.push_back({t[i], t[i + 1], t[i + 2], t[i + 3]});
  for (auto [type, written] : llvm::zip(attr.getArgTypes(), attr.getArgWritten()))
    a.args.push_back({type, written});
  return a;
}

// The template's enums are ReductionKernel's, value for value.
static_assert(int(plan::ReductionKind::sum) == ReductionKernel::Sum &&
              int(plan::ReductionKind::mean) == ReductionKernel::Mean &&
              int(plan::ReductionKind::max) == ReductionKernel::Max);
static_assert(int(plan::ReductionLayout::rows) == ReductionKernel::Rows &&
              int(plan::ReductionLayout::columns) == ReductionKernel::Columns &&
              int(plan::ReductionLayout::general) == ReductionKernel::General);

plan::ReductionTemplateAttr encodeReduction(const ReductionKernel &k, MLIRContext *context) {
  const bool general = k.shape == ReductionKernel::General;
  auto array = [&](const Shape &v) {
    return general ? DenseI64ArrayAttr::get(context, v) : DenseI64ArrayAttr();
  };
  return plan::ReductionTemplateAttr::get(
      context, plan::ReductionKind(k.kind), plan::ReductionLayout(k.shape), k.element,
      general ? 0 : k.rows.count, general ? 0 : k.rows.perToken,
      k.shape == ReductionKernel::Columns ? 0 : k.outputs, general ? 0 : k.length,
      k.kind == ReductionKernel::Mean ? k.count : 1, array(k.keptDims), array(k.keptStrides),
      array(k.reducedDims), array(k.reducedStrides));
}

ReductionKernel decodeReduction(plan::ReductionTemplateAttr attr) {
  auto shape = [](DenseI64ArrayAttr a) {
    return a ? Shape(a.asArrayRef().begin(), a.asArrayRef().end()) : Shape();
  };
  ReductionKernel k;
  k.kind = ReductionKernel::Kind(attr.getReduce());
  k.shape = ReductionKernel::Layout(attr.getLayout());
  k.element = attr.getElement();
  k.rows = Rows{attr.getRows(), attr.getRowsPerToken()};
  k.outputs = attr.getOutputs();
  k.length = attr.getLength();
  k.count = attr.getCount();
  k.keptDims = shape(attr.getKeptDims());
  k.keptStrides = shape(attr.getKeptStrides());
  k.reducedDims = shape(attr.getReducedDims());
  k.reducedStrides = shape(attr.getReducedStrides());
  return k;
}

} // namespace mlc::lowering
