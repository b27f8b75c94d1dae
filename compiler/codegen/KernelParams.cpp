//===- KernelParams.cpp - a template kernel's parameters as attributes -----===//

#include "compiler/codegen/KernelParams.h"

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

namespace {

/// Argument types and whether each is written, as two parallel arrays.
void encodeArgs(ParamsBuilder &b, MLIRContext *context, const std::vector<KernelArg> &args) {
  SmallVector<Attribute> types;
  SmallVector<bool> written;
  for (const KernelArg &a : args) {
    types.push_back(TypeAttr::get(a.element));
    written.push_back(a.written);
  }
  b.attr("arg_types", ArrayAttr::get(context, types));
  b.attr("arg_written", DenseBoolArrayAttr::get(context, written));
}
std::vector<KernelArg> decodeArgs(ParamsReader &r) {
  std::vector<KernelArg> args;
  auto types = dyn_cast_or_null<ArrayAttr>(r.attr("arg_types"));
  auto written = dyn_cast_or_null<DenseBoolArrayAttr>(r.attr("arg_written"));
  if (!types || !written || types.size() != size_t(written.size()))
    return args;
  for (auto [t, w] : llvm::zip(types, written.asArrayRef()))
    if (auto ta = dyn_cast<TypeAttr>(t))
      args.push_back({ta.getValue(), w});
  return args;
}

} // namespace

DictionaryAttr encodeAttention(const AttentionKernel &a, MLIRContext *context) {
  ParamsBuilder b(context);
  b.type("element", a.element)
      .flag("backward", a.backward)
      .flag("varlen", a.varlen)
      .flag("causal", a.causal)
      .flag("mask", a.mask)
      .i64("batch", a.batch)
      .i64("heads", a.heads)
      .i64("kv_heads", a.kvHeads)
      .i64("seq_q", a.seqQ)
      .i64("seq_k", a.seqK)
      .i64("head_dim", a.headDim)
      .i64("value_dim", a.valueDim)
      .i64("token_capacity", a.tokenCapacity)
      .f64("scale", a.scale)
      .f64("dropout", a.dropout)
      .i64("seed", a.seed)
      .i64("query", a.query)
      .i64s("mask_strides", a.maskStrides)
      .i64("cu_slot", a.cuSlot)
      .flag("bf16_products", a.bf16Products);
  if (a.softcap > 0)
    b.f64("softcap", a.softcap);
  if (a.window > 0)
    b.i64("window", a.window);
  if (a.rotaryDim > 0)
    b.i64("rotary_dim", a.rotaryDim)
        .flag("interleaved", a.interleaved)
        .i64s("rotary_strides", {a.rotaryBatch, a.rotaryRow})
        .i64("rotary_slot", a.rotarySlot);
  if (a.blockSlot >= 0)
    b.i64("blocks", a.blocks).i64("block_axis", a.blockAxis).i64("block_slot", a.blockSlot);
  // Per tensor: offset, batch, head and row strides.
  Shape tensors;
  for (const AttentionKernel::Tensor &t : a.tensors)
    tensors.insert(tensors.end(), {t.offset, t.batchStride, t.headStride, t.rowStride});
  b.i64s("tensors", tensors);
  encodeArgs(b, context, a.args);
  return b.get();
}

AttentionKernel decodeAttention(ParamsReader &r) {
  AttentionKernel a;
  a.element = r.type("element");
  a.backward = r.flag("backward");
  a.varlen = r.flag("varlen");
  a.causal = r.flag("causal");
  a.mask = r.flag("mask");
  a.batch = r.i64("batch");
  a.heads = r.i64("heads");
  a.kvHeads = r.i64("kv_heads");
  a.seqQ = r.i64("seq_q");
  a.seqK = r.i64("seq_k");
  a.headDim = r.i64("head_dim");
  a.valueDim = r.i64("value_dim");
  a.tokenCapacity = r.i64("token_capacity");
  a.scale = r.f64("scale");
  a.dropout = r.f64("dropout");
  a.seed = r.i64("seed");
  a.query = r.i64("query");
  a.maskStrides = r.i64s("mask_strides");
  a.cuSlot = r.i64("cu_slot");
  a.bf16Products = r.flag("bf16_products");
  if (r.has("softcap"))
    a.softcap = r.f64("softcap");
  if (r.has("window"))
    a.window = r.i64("window");
  if (r.has("rotary_dim")) { // the plan verifier checked the four together
    a.rotaryDim = r.i64("rotary_dim");
    a.interleaved = r.flag("interleaved");
    Shape st = r.i64s("rotary_strides");
    if (st.size() == 2)
      a.rotaryBatch = st[0], a.rotaryRow = st[1];
    a.rotarySlot = r.i64("rotary_slot");
  }
  if (r.has("block_slot")) {
    a.blocks = r.i64("blocks");
    a.blockAxis = r.i64("block_axis");
    a.blockSlot = r.i64("block_slot");
  }
  Shape t = r.i64s("tensors");
  for (size_t i = 0; i + 3 < t.size(); i += 4)
    a.tensors.push_back({t[i], t[i + 1], t[i + 2], t[i + 3]});
  a.args = decodeArgs(r);
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
