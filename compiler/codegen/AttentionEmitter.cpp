//===- AttentionEmitter.cpp - attention kernels ---------------------------===//
//
// The plan.kernel of an attention op and of its gradient: the attention
// template's parameters (shapes, strides, masks, dropout, rotary tables).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"

#include <cmath>

namespace mlc::lowering {

/// The rotary tables of an attention kernel, [B | 1, 1, S | 1, R] (varlen
/// [T | 1, 1, R]): their buffers, R and the batch and row strides that
/// MlcAttentionRotary holds. The kernel reads both tables at those strides
/// from their first element, so a view with an offset, a strided last dim
/// or strides other than the other table's is copied first.
void FunctionLowering::rotaryTables(Value cos, Value sin, bool varlen, AttentionKernel &desc,
                                    std::vector<Value> &bufs) {
  View c = viewOf(cos), s = viewOf(sin);
  auto plain = [](const View &w) { return w.offset == 0 && w.strides.back() == 1; };
  if (!plain(c) || !plain(s) || c.strides != s.strides) {
    c = own(cos);
    s = own(sin);
  }
  auto stride = [&](size_t d) { return c.shape[d] == 1 ? 0 : c.strides[d]; };
  desc.rotaryDim = c.shape.back();
  desc.rotaryBatch = varlen ? 0 : stride(0);
  desc.rotaryRow = stride(varlen ? 0 : 2);
  bufs.push_back(c.buffer);
  bufs.push_back(s.buffer);
}

llvm::Error FunctionLowering::emitAttention(Operation *op, bool backward) {
  Value q, k, v, mask, cu, cos, sin, rank;
  FloatAttr scaleAttr, softcapAttr;
  IntegerAttr windowAttr, blocksAttr, axisAttr;
  bool causal, interleaved;
  double dropout;
  int64_t seed;
  if (auto a = dyn_cast<AttentionOp>(op)) {
    q = a.getQuery(), k = a.getKey(), v = a.getValue(), mask = a.getMask(),
    cu = a.getCuSeqlens(), scaleAttr = a.getScaleAttr(), causal = a.getCausal();
    dropout = a.getDropout().convertToDouble(), seed = a.getSeed();
    cos = a.getCos(), sin = a.getSin(), interleaved = a.getInterleaved();
    softcapAttr = a.getSoftcapAttr(), windowAttr = a.getWindowAttr();
    rank = a.getRank(), blocksAttr = a.getBlocksAttr(), axisAttr = a.getAxisAttr();
  } else {
    auto g = cast<AttentionGradOp>(op);
    q = g.getQuery(), k = g.getKey(), v = g.getValue(), mask = g.getMask(),
    cu = g.getCuSeqlens(), scaleAttr = g.getScaleAttr(), causal = g.getCausal();
    dropout = g.getDropout().convertToDouble(), seed = g.getSeed();
    cos = g.getCos(), sin = g.getSin(), interleaved = g.getInterleaved();
    softcapAttr = g.getSoftcapAttr(), windowAttr = g.getWindowAttr();
    rank = g.getRank(), blocksAttr = g.getBlocksAttr(), axisAttr = g.getAxisAttr();
  }
  // Padded: [B, H, S, D], one (batch, head) per iteration. Variable-length:
  // [T, H, D] packed tokens, one (sequence, head) per iteration, the sequence
  // being tokens cu_seqlens[n] .. cu_seqlens[n + 1] (L of them).
  const bool varlen = bool(cu);
  Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t B = 0, H, Hkv, Sq = 0, D, Sk = 0, Dv;
  if (varlen) {
    H = qs[1], Hkv = ks[1], D = qs[2], Dv = vs[2];
    B = shapeOf(cu)[0] - 1; // sequences (trailing empty ones allowed)
  } else {
    B = qs[0], H = qs[1], Hkv = ks[1], Sq = qs[2], D = qs[3], Sk = ks[2], Dv = vs[3];
  }
  double scale = scaleAttr ? scaleAttr.getValueAsDouble() : 1.0 / std::sqrt(double(D));
  Type el = typeOf(q).getElementType();
  Shape maskStrides(4, 0);
  if (mask)
    maskStrides = broadcastStrides(shapeOf(mask), {B, H, Sq, Sk});
  // Every [B, H, S, D] operand and result is a strided view whose innermost
  // dimension is contiguous: q, k, v read through the transposes and the
  // split of the fused QKV projection, and results written straight into
  // the layout their consumers want.
  std::vector<Value> bufs;
  std::vector<View> tensors; // outputs, [grad], q, k, v
  for (Value r : op->getResults()) {
    // In its reader's layout where mlc-in-place marked it, else its own.
    std::optional<View> w;
    if (inReaderLayout(op, cast<OpResult>(r).getResultNumber())) {
      w = outputView(r);
      if (!w)
        return failure(op, "marked mlc.in_reader_layout, but result " +
                               llvm::Twine(cast<OpResult>(r).getResultNumber()) +
                               " is read by no view whose layout can hold it");
    } else {
      valueBuffers[r] = arenaFor(r);
      w = own(r);
    }
    tensors.push_back(*w);
    bufs.push_back(w->buffer);
  }
  int nOut = op->getNumResults();
  Value grad = backward ? op->getOperand(0) : Value();
  // Argument order: outputs, [grad], q, k, v, [mask].
  // (The outputs in their own type: bf16 with `bf16_result`, mlc-fold-casts.)
  std::vector<std::pair<Type, bool>> slots;
  for (Value r : op->getResults())
    slots.push_back({typeOf(r).getElementType(), true});
  std::vector<Value> reads;
  if (backward)
    reads.push_back(grad);
  int qi = nOut + (backward ? 1 : 0);
  reads.insert(reads.end(), {q, k, v});
  for (Value x : reads) {
    View w = viewOf(x);
    if (w.strides.back() != 1)
      w = own(x);
    tensors.push_back(w);
    bufs.push_back(w.buffer);
    slots.push_back({el, false});
  }
  if (mask) {
    bufs.push_back(bufferOf(mask));
    slots.push_back({el, false});
  }
  int cuSlot = -1;
  if (varlen) {
    cuSlot = slots.size();
    bufs.push_back(bufferOf(cu));
    slots.push_back({typeOf(cu).getElementType(), false});
  }
  // The kernel's description: sizes, flags and each tensor's strides.
  AttentionKernel desc;
  if (cos) {
    desc.rotarySlot = slots.size();
    rotaryTables(cos, sin, varlen, desc, bufs);
    slots.push_back({el, false});
    slots.push_back({el, false});
    desc.interleaved = interleaved;
  }
  // Dropout on a block of one process's probabilities: the rank's buffer.
  if (rank && dropout > 0) {
    desc.blockSlot = slots.size();
    desc.blocks = blocksAttr.getInt(), desc.blockAxis = axisAttr.getInt();
    bufs.push_back(bufferOf(rank));
    slots.push_back({typeOf(rank).getElementType(), false});
  }
  desc.element = el;
  desc.backward = backward;
  desc.varlen = varlen;
  desc.causal = causal;
  desc.batch = B, desc.heads = H, desc.kvHeads = Hkv, desc.seqQ = Sq, desc.seqK = Sk,
  desc.headDim = D, desc.valueDim = Dv, desc.tokenCapacity = kernels.tokenCapacity;
  desc.scale = scale, desc.dropout = dropout, desc.seed = seed;
  desc.softcap = softcapAttr ? softcapAttr.getValueAsDouble() : 0.0;
  // A window as long as the keys (padded) hides nothing causal attention
  // shows; varlen sequences may be longer than any static bound.
  desc.window = windowAttr && (varlen || windowAttr.getInt() < Sk) ? windowAttr.getInt() : 0;
  // A static token dimension (packed documents of a fixed-size micro-batch)
  // is its own capacity: the CUDA grid's query tiles and the backward's
  // per-row statistics cover its tokens.
  if (varlen && !ShapedType::isDynamic(qs[0]))
    desc.tokenCapacity = std::max(desc.tokenCapacity, qs[0]);
  for (const View &w : tensors)
    desc.tensors.push_back({w.offset, w.strides[0], w.strides[1], w.strides[varlen ? 0 : 2]});
  for (auto [t, written] : slots)
    desc.args.push_back({t, written});
  desc.query = qi;
  desc.mask = bool(mask);
  desc.maskStrides = maskStrides;
  desc.cuSlot = cuSlot;
  if (auto module = fn->getParentOfType<ModuleOp>())
    if (auto products = module->getAttrOfType<StringAttr>("mlc.autocast"))
      desc.bf16Products = products.getValue() == "bf16";
  addStep(encodeAttention(desc, op->getContext()), DictionaryAttr(), bufs,
          KernelTemplate::attention);
  return llvm::Error::success();
}

} // namespace mlc::lowering
