//===- Attention.cpp - fused attention, forward and backward ---------------===//
//
// One kernel per attention (AttentionKernel, encoded by encodeAttention):
// the scores, softmax and weighted values streamed through tiles, never
// stored; backward recomputes them from the row statistics. Its arguments
// are listed by `arg_types` and `arg_written`; the rotary tables, the soft
// cap and the sliding window are checked together (verifyAttentionRotary).
// The CUDA block (attentionBlock) keeps the tiles within 40 KB of shared
// memory, and a block that still exceeds CUDA's 48 KB is recorded as
// refused (cuda.refusal) rather than failing: the CPU runs it.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CudaSchedule.h"
#include "compiler/codegen/templates/TemplateModel.h"

#include <cmath>

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

double elementBytesOf(Type t) { return double(plan::elementBytes(t)); }

/// An attention kernel's rotary tables (MLC_ATTN_ROTARY), checked together:
/// `rotary_dim` R (even, 0 < R <= head_dim) names them, and with it come
/// their batch and row strides (`rotary_strides`, two) and cos's argument
/// (`rotary_slot`; sin is the next argument, both within the kernel's).
/// None of the others goes without R. A `softcap` is positive and finite;
/// a `window` at least 1, on causal attention only.
LogicalResult verifyAttentionRotary(plan::KernelOp k) {
  DictionaryAttr params = k.getParamsAttr();
  auto error = [&]() {
    return k.emitOpError("@") << k.getSymName() << " (template 'attention'): ";
  };
  // Soft-capping c * tanh(s / c): c positive and finite (absent: none).
  if (auto cap = params.getAs<FloatAttr>("softcap");
      cap && !(cap.getValueAsDouble() > 0.0 && std::isfinite(cap.getValueAsDouble())))
    return error() << "softcap " << cap.getValueAsDouble() << " must be positive and finite";
  // The sliding window: query i sees keys i - window + 1 .. i.
  if (auto window = params.getAs<IntegerAttr>("window")) {
    if (window.getInt() < 1)
      return error() << "window " << window.getInt() << " must be at least 1";
    if (!params.get("causal"))
      return error() << "a sliding window needs causal attention";
  }
  auto dim = params.getAs<IntegerAttr>("rotary_dim");
  if (!dim) {
    for (StringRef name : {"rotary_strides", "rotary_slot", "interleaved"})
      if (params.get(name))
        return error() << "parameter '" << name << "' without 'rotary_dim'";
    return success();
  }
  const int64_t r = dim.getInt(), headDim = params.getAs<IntegerAttr>("head_dim").getInt();
  if (r <= 0 || r % 2 || r > headDim)
    return error() << "rotary_dim " << r << " must be even, positive and at most head_dim ("
                   << headDim << ")";
  auto strides = params.getAs<DenseI64ArrayAttr>("rotary_strides");
  if (!strides || strides.size() != 2)
    return error() << "rotary_dim needs rotary_strides of 2 entries (the tables' batch and "
                      "row strides), got "
                   << (strides ? std::to_string(strides.size()) : std::string("none"));
  auto slot = params.getAs<IntegerAttr>("rotary_slot");
  if (!slot)
    return error() << "rotary_dim needs rotary_slot (the argument of the cos table)";
  if (slot.getInt() < 0 || slot.getInt() + 1 >= int64_t(k.getNumArgs()))
    return error() << "rotary_slot " << slot.getInt() << " puts cos and sin outside its "
                   << k.getNumArgs() << " arguments";
  return success();
}

/// An attention kernel's CUDA block: query rows, threads, key rows per
/// tile, and the static shared memory of its template (attention.cuh).
struct AttentionBlock {
  int64_t rows = 64, threads = 128, tile = 32, sharedBytes = 0;
};

AttentionBlock attentionBlock(const AttentionKernel &a) {
  const int64_t D = a.headDim, Dv = a.valueDim, bytes = plan::elementBytes(a.element);
  AttentionBlock b;
  if (attentionOnTensorCores(a)) {
    // MlcAttentionTcTile: 32 rows of W / 2 + 4 words and W columns of
    // 16 + 4; backward two of them and three statistics per tile row (or,
    // in their place, 64 rows of D + 1 floats).
    const int64_t W = std::max(D, Dv), tileBytes = (32 * (W / 2 + 4) + W * (16 + 4)) * 4;
    b.sharedBytes =
        a.backward ? std::max(2 * tileBytes + 3 * 32 * 4, 64 * (D + 1) * 4) : tileBytes;
    return b;
  }
  // The block's own rows (backward: q, dO, dQ and two statistics, padded)
  // and a key/value tile within 40 KB: fewer rows first, down to a warp
  // (a block is whole warps), then a smaller tile, down to one key row
  // (f64 heads of 64 in backward: 32 rows, tiles of 4).
  const int64_t own = a.backward ? D + Dv + 2 : 0;
  auto shared = [&] { return (b.rows * own + b.tile * (D + Dv)) * bytes; };
  while (b.rows > 32 && shared() > 40 * 1024)
    b.rows /= 2;
  while (b.tile > 1 && shared() > 40 * 1024)
    b.tile /= 2;
  b.threads = b.rows;
  b.sharedBytes = shared();
  return b;
}

/// Why CUDA cannot run attention kernel `name` (its block over 48 KB of
/// shared memory even at its smallest), and what would fit; "" if it can.
std::string attentionRefusal(const AttentionKernel &a, int64_t sharedBytes,
                             llvm::StringRef name) {
  if (sharedBytes <= kCudaStaticSharedBytes)
    return "";
  auto fits = [&](AttentionKernel k) {
    return attentionBlock(k).sharedBytes <= kCudaStaticSharedBytes;
  };
  // The largest D = Dv that fits on the same kind of kernel (tensor cores or not).
  int64_t most = std::max(a.headDim, a.valueDim);
  for (; most > 1; --most) {
    AttentionKernel smaller = a;
    smaller.headDim = smaller.valueDim = most;
    if (attentionOnTensorCores(smaller) == attentionOnTensorCores(a) && fits(smaller))
      break;
  }
  AttentionKernel bf16 = a;
  bf16.element = Float32Type::get(a.element.getContext());
  bf16.bf16Products = true;
  const std::string type = plan::dtypeName(a.element) + (a.bf16Products ? ", bf16 products" : "");
  return ("kernel @" + name + ": attention" + (a.backward ? " backward" : "") + " (" + type +
          ", D = " + llvm::Twine(a.headDim) + ", Dv = " + llvm::Twine(a.valueDim) + ") needs " +
          llvm::Twine(sharedBytes) + " bytes of shared memory a block, more than CUDA's " +
          llvm::Twine(kCudaStaticSharedBytes) +
          ": it runs on the CPU only (for CUDA, a head dimension of at most " +
          llvm::Twine(most) + (fits(bf16) && !a.bf16Products ? ", or --dtype bf16" : "") + ")")
      .str();
}

void attentionSchedule(const AttentionKernel &a, CudaSchedule &s, llvm::StringRef name) {
  const AttentionBlock b = attentionBlock(a);
  const int64_t rowsPer = b.rows, tile = b.tile, threads = b.threads;
  s.refusal = attentionRefusal(a, b.sharedBytes, name);
  // Varlen: tiles of the packed stream, whatever its sequences.
  const int64_t maxLen = a.varlen ? a.tokenCapacity : std::max(a.seqQ, a.seqK);
  const int64_t qTiles = (maxLen + rowsPer - 1) / rowsPer;
  const CudaSchedule::Phase launch{attentionGridHeads(a) * qTiles, threads};
  s.phases.assign(a.backward ? 3 : 1, launch);
  s.tile = tile;
  if (a.backward) {
    const int64_t statRows = a.varlen ? a.heads * a.tokenCapacity : a.batch * a.heads * a.seqQ;
    s.scratch = statRows * 3 * 8;
  }
}

/// The longest sequence a variable-length attention's batch can hold:
/// packed documents (a slot per token of the micro-batch's B x S, each
/// document cut at its row's end) S; otherwise (unpadded BERT: B sequences
/// sharing B x S tokens) the token capacity over the sequences.
double longestSequence(const AttentionKernel &a, const plan::CostContext &mb) {
  if (mb.batchRows > 0 && mb.batchRows * mb.batchLength == a.tokenCapacity &&
      a.batch > mb.batchRows)
    return double(mb.batchLength);
  return double(a.tokenCapacity) / double(a.batch);
}

/// Attention's forward FLOPs, 2 B H Sq Sk (D + Dv) (QK^T and PV), before
/// causal halving. A variable-length batch's depend on the lengths each
/// step brings, which the plan does not know: its upper bound, every
/// sequence as long as it can be (as many as the token capacity holds),
/// which is the padded form's count.
} // namespace

double attentionForwardFlops(const AttentionKernel &a, const plan::CostContext &mb) {
  double batch = double(a.batch), sq = double(a.seqQ), sk = double(a.seqK);
  if (a.varlen && a.batch > 0) {
    sq = sk = longestSequence(a, mb);
    batch = std::min(batch, std::floor(double(a.tokenCapacity) / sq));
  }
  return 2.0 * batch * a.heads * sq * sk * (a.headDim + a.valueDim);
}


namespace {

/// Attention (AttentionKernel's arguments): each tensor once, [B, H, S, D]
/// (variable length: the token capacity x H x D); the mask over the
/// dimensions its strides reach; cu_seqlens; the rotary tables.
llvm::Expected<plan::TemplateCost> attentionCost(plan::KernelOp k,
                                                const plan::CostContext &mb) {
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  AttentionKernel a = decodeAttention(r);
  if (auto err = r.error())
    return std::move(err);
  if (a.args.size() < size_t(a.query + 3))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + k.getSymName() + ": attention without q, k, v");
  // Q, O and their gradients have `heads` heads; K, V and theirs `kv_heads`
  // (grouped-query attention reads each kv head for a group of query heads).
  const double perBatch = a.varlen ? 1 : a.batch;
  const double rowsQ = a.varlen ? double(a.tokenCapacity) : double(a.seqQ);
  const double rowsK = a.varlen ? double(a.tokenCapacity) : double(a.seqK);
  const double qSide = perBatch * a.heads * rowsQ,
               kSide = perBatch * (a.kvHeads > 0 ? a.kvHeads : a.heads) * rowsK;
  // Per tensor argument: rows (over all heads) x width, in argument order.
  std::vector<std::pair<double, double>> shapes;
  if (a.backward)
    shapes = {{qSide, double(a.headDim)}, {kSide, double(a.headDim)},
              {kSide, double(a.valueDim)}, {qSide, double(a.valueDim)}};
  else
    shapes = {{qSide, double(a.valueDim)}};
  shapes.push_back({qSide, double(a.headDim)});
  shapes.push_back({kSide, double(a.headDim)});
  shapes.push_back({kSide, double(a.valueDim)});
  plan::TemplateCost c;
  for (size_t i = 0; i < shapes.size() && i < a.args.size(); ++i)
    c.bytes += shapes[i].first * shapes[i].second * elementBytesOf(a.args[i].element);
  size_t next = a.query + 3;
  if (a.mask && next < a.args.size()) {
    c.bytes += accessExtent({a.batch, a.heads, a.seqQ, a.seqK}, a.maskStrides) *
               elementBytesOf(a.args[next].element);
    ++next;
  }
  if (a.cuSlot >= 0 && size_t(a.cuSlot) < a.args.size())
    c.bytes += (a.batch + 1) * elementBytesOf(a.args[a.cuSlot].element);
  // The rotary tables: cos and sin, R wide, over the rows their strides
  // reach (positions, per sequence or per token).
  if (a.rotaryDim > 0 && size_t(a.rotarySlot + 1) < a.args.size()) {
    const double rows = a.varlen ? (a.rotaryRow ? double(a.tokenCapacity) : 1)
                                 : (a.rotaryBatch ? double(a.batch) : 1) *
                                       (a.rotaryRow ? double(a.seqQ) : 1);
    c.bytes += 2 * rows * double(a.rotaryDim) * elementBytesOf(a.args[a.rotarySlot].element);
  }
  double forward = attentionForwardFlops(a, mb);
  if (a.causal)
    forward /= 2;
  c.flops = a.backward ? 2.5 * forward : forward;
  c.bf16Products = a.bf16Products;
  return c;
}

struct AttentionModel : TemplateModel<AttentionModel, plan::AttentionTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true},           {"arg_types", K::TypeArray, true},
      {"arg_written", K::BoolArray, true},  {"backward", K::Flag, false},
      {"varlen", K::Flag, false},           {"causal", K::Flag, false},
      {"mask", K::Flag, false},             {"bf16_products", K::Flag, false},
      {"batch", K::I64, true},              {"heads", K::I64, true},
      {"kv_heads", K::I64, true},           {"seq_q", K::I64, true},
      {"seq_k", K::I64, true},              {"head_dim", K::I64, true},
      {"value_dim", K::I64, true},          {"token_capacity", K::I64, true},
      {"scale", K::F64, true},              {"dropout", K::F64, true},
      {"seed", K::I64, true},               {"query", K::I64, true},
      {"mask_strides", K::I64Array, true},  {"cu_slot", K::I64, true},
      {"tensors", K::I64Array, true},       {"rotary_dim", K::I64, false},
      {"interleaved", K::Flag, false},      {"rotary_strides", K::I64Array, false},
      {"rotary_slot", K::I64, false},       {"softcap", K::F64, false},
      {"window", K::I64, false},            {"blocks", K::I64, false},
      {"block_axis", K::I64, false},        {"block_slot", K::I64, false}};

  LogicalResult verifyKernel(Attribute, Operation *k) const {
    if (failed(verifyParams(k)))
      return failure();
    return verifyAttentionRotary(kernelOf(k));
  }
  /// Each argument as `arg_written` marks it.
  bool writesArg(Attribute, Operation *k, int64_t arg) const {
    auto written = kernelOf(k).getParamsAttr().getAs<DenseBoolArrayAttr>("arg_written");
    return written && arg >= 0 && arg < int64_t(written.size()) && written[arg];
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &context) const {
    return attentionCost(kernelOf(k), context);
  }
  /// Forward: one phase; backward: the row statistics, dK and dV, dQ.
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    AttentionKernel a = decodeAttention(r);
    if (auto err = r.error())
      return err;
    attentionSchedule(a, s, kernelOf(k).getSymName());
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    AttentionKernel a = decodeAttention(r);
    if (auto err = r.error())
      return std::move(err);
    return target.attention(a);
  }
};

} // namespace

void attachAttentionModels(MLIRContext *context) {
  plan::AttentionTemplateAttr::attachInterface<AttentionModel>(*context);
}

} // namespace mlc::lowering
