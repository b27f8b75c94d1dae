//===- Attention.cpp - fused attention, forward and backward ---------------===//
//
// One kernel per attention (AttentionKernel, its typed template
// #plan.attention<...> by encodeAttention):
// the scores, softmax and weighted values streamed through tiles, never
// stored; backward recomputes them from the row statistics. Its arguments
// are listed by `arg_types` and `arg_written` (verifyShape checks
// them and the slots within them); the rotary tables, the soft cap and the
// sliding window are checked together (verifyRotary).
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

double elementBytesOf(Type t) { return double(plan::elementBytes(t)); }

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
llvm::Expected<plan::TemplateCost> attentionCost(const AttentionKernel &a, plan::KernelOp k,
                                                const plan::CostContext &mb) {
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

/// A typed template (#plan.attention<...>): AttentionKernel's fields are
/// the attribute's parameters (decodeAttention reads them back).
struct AttentionModel : TemplateModel<AttentionModel, plan::AttentionTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto a = cast<plan::AttentionTemplateAttr>(attr);
    if (failed(refuseParams(op)) || failed(verifyShape(a, kernelOf(op))))
      return failure();
    return verifyRotary(a, kernelOf(op));
  }
  /// Each argument as `arg_written` marks it.
  bool writesArg(Attribute attr, Operation *, int64_t arg) const {
    llvm::ArrayRef<bool> written = cast<plan::AttentionTemplateAttr>(attr).getArgWritten();
    return arg >= 0 && arg < int64_t(written.size()) && written[arg];
  }
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *k,
                                             const plan::CostContext &context) const {
    return attentionCost(decodeAttention(cast<plan::AttentionTemplateAttr>(attr)), kernelOf(k),
                         context);
  }
  /// Forward: one phase; backward: the row statistics, dK and dV, dQ.
  llvm::Error scheduleCuda(Attribute attr, Operation *k, CudaSchedule &s) const {
    attentionSchedule(decodeAttention(cast<plan::AttentionTemplateAttr>(attr)), s,
                      kernelOf(k).getSymName());
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    return target.attention(decodeAttention(cast<plan::AttentionTemplateAttr>(attr)));
  }

private:
  /// What an attention kernel's types cannot say about its shape and its
  /// arguments: `arg_types` and `arg_written` list the kernel's arguments,
  /// q, k, v (from `query`), cu_seqlens (`cu_slot`, varlen only) and the
  /// dropout block's rank (`block_slot`) are among them, the heads and head
  /// dimensions are positive (kv_heads dividing heads), `tensors` holds four
  /// entries a tensor, and the dropout is a probability below 1.
  static LogicalResult verifyShape(plan::AttentionTemplateAttr a, plan::KernelOp k) {
    const int64_t n = k.getNumArgs();
    if (int64_t(a.getArgTypes().size()) != n || int64_t(a.getArgWritten().size()) != n)
      return kernelError(k) << "parameters 'arg_types' and 'arg_written' must list its " << n
                            << " arguments, got " << a.getArgTypes().size() << " and "
                            << a.getArgWritten().size();
    for (auto [name, value] : {std::pair<StringRef, int64_t>{"heads", a.getHeads()},
                               {"kv_heads", a.getKvHeads()},
                               {"head_dim", a.getHeadDim()},
                               {"value_dim", a.getValueDim()}})
      if (value <= 0)
        return kernelError(k) << "parameter '" << name << "' must be > 0, got " << value;
    if (a.getHeads() % a.getKvHeads())
      return kernelError(k) << "kv_heads " << a.getKvHeads() << " must divide heads "
                            << a.getHeads();
    if (a.getQuery() < 0 || a.getQuery() + 3 > n)
      return kernelError(k) << "query " << a.getQuery() << " puts q, k and v outside its "
                            << n << " arguments";
    if (a.getVarlen() != (a.getCuSlot() >= 0) || a.getCuSlot() >= n)
      return kernelError(k) << "cu_slot " << a.getCuSlot() << " must name one of its " << n
                            << " arguments exactly when varlen";
    if (a.getBlockSlot() < -1 || a.getBlockSlot() >= n)
      return kernelError(k) << "block_slot " << a.getBlockSlot() << " is outside its " << n
                            << " arguments";
    if (a.getMaskStrides().size() != 4)
      return kernelError(k) << "parameter 'mask_strides' must hold 4 entries ([B, H, Sq, Sk]), "
                            << "got " << a.getMaskStrides().size();
    if (a.getTensors().size() % 4)
      return kernelError(k) << "parameter 'tensors' must hold 4 entries a tensor (offset, batch, "
                            << "head and row strides), got " << a.getTensors().size();
    if (const double p = a.getDropout().convertToDouble(); !(p >= 0.0 && p < 1.0))
      return kernelError(k) << "dropout " << p << " must be in [0, 1)";
    return success();
  }

  /// An attention kernel's rotary tables (MLC_ATTN_ROTARY), checked together:
  /// `rotary_dim` R (even, 0 < R <= head_dim) names them, and with it come
  /// their batch and row strides (`rotary_strides`, two) and cos's argument
  /// (`rotary_slot`; sin is the next argument, both within the kernel's).
  /// None of the others goes without R. A `softcap` is positive and finite;
  /// a `window` at least 1, on causal attention only (absent, both are 0).
  static LogicalResult verifyRotary(plan::AttentionTemplateAttr a, plan::KernelOp k) {
    // Soft-capping c * tanh(s / c): c positive and finite (0: none).
    const double cap = a.getSoftcap().convertToDouble();
    if (cap != 0.0 && !(cap > 0.0 && std::isfinite(cap)))
      return kernelError(k) << "softcap " << cap << " must be positive and finite";
    // The sliding window: query i sees keys i - window + 1 .. i.
    if (a.getWindow() != 0) {
      if (a.getWindow() < 1)
        return kernelError(k) << "window " << a.getWindow() << " must be at least 1";
      if (!a.getCausal())
        return kernelError(k) << "a sliding window needs causal attention";
    }
    const int64_t r = a.getRotaryDim();
    if (r == 0) {
      for (auto [name, given] : {std::pair<StringRef, bool>{"rotary_strides",
                                                            !a.getRotaryStrides().empty()},
                                 {"rotary_slot", a.getRotarySlot() != -1},
                                 {"interleaved", a.getInterleaved()}})
        if (given)
          return kernelError(k) << "parameter '" << name << "' without 'rotary_dim'";
      return success();
    }
    if (r < 0 || r % 2 || r > a.getHeadDim())
      return kernelError(k) << "rotary_dim " << r
                            << " must be even, positive and at most head_dim ("
                            << a.getHeadDim() << ")";
    if (a.getRotaryStrides().size() != 2)
      return kernelError(k) << "rotary_dim needs rotary_strides of 2 entries (the tables' "
                               "batch and row strides), got "
                            << a.getRotaryStrides().size();
    const int64_t slot = a.getRotarySlot();
    if (slot == -1)
      return kernelError(k) << "rotary_dim needs rotary_slot (the argument of the cos table)";
    if (slot < 0 || slot + 1 >= int64_t(k.getNumArgs()))
      return kernelError(k) << "rotary_slot " << slot << " puts cos and sin outside its "
                            << k.getNumArgs() << " arguments";
    return success();
  }
};

} // namespace

void attachAttentionModels(MLIRContext *context) {
  plan::AttentionTemplateAttr::attachInterface<AttentionModel>(*context);
}

} // namespace mlc::lowering
