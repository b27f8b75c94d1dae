//===- AttentionSource.h - the call of an attention template ----*- C++ -*-===//
//
// Both targets' attention kernels are templates in real source files
// (prelude/attention.cuh, prelude/attention.h) that take their run-time
// sizes as an MlcAttention and their buffers as an MlcAttentionArgs
// (prelude/mlc_shared.h); a plan kernel is the literals of those two and
// one call. These write the literals and the variant flags, once for both.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_ATTENTIONSOURCE_H
#define MLC_COMPILER_CODEGEN_ATTENTIONSOURCE_H

#include "compiler/codegen/LoweringImpl.h"

#include <sstream>
#include <string>

namespace mlc::lowering {

/// `const MlcAttention<T> s = {...};`: the sizes of `a`, with `queryBlocks`
/// blocks per head (CUDA's grid; 0 where unused). Tensor roles in order O
/// (or dQ), dK, dV, dO, Q, K, V; the ones a forward pass lacks are zeros.
inline std::string attentionSizes(const AttentionKernel &a, int64_t queryBlocks) {
  std::vector<AttentionKernel::Tensor> roles(7, AttentionKernel::Tensor{0, 0, 0, 0});
  for (int k = 0; k < (a.backward ? 4 : 1); ++k)
    roles[k] = a.tensors[k];
  for (int k = 0; k < 3; ++k)
    roles[4 + k] = a.tensors[a.query + k];
  const std::vector<int64_t> ms = a.mask ? a.maskStrides : std::vector<int64_t>(4, 0);
  std::ostringstream b;
  b << "  // batch, heads, kv heads, seq q, seq k, token capacity, query blocks; per tensor (O or\n"
       "  // dQ, dK, dV, dO, Q, K, V) its offset and batch, head, row strides; the mask's\n"
       "  // strides; scale, dropout, keep scale, seed; rotary dim, tables' batch and row strides;\n"
       "  // soft-capping, sliding window; dropout's block: span, count, rank (where given)\n"
    << "  const MlcAttention<" << cType(a.element) << "> s = {" << a.batch << ", " << a.heads
    << ", " << a.kvHeads << ", " << a.seqQ << ", " << a.seqK << ", " << a.tokenCapacity << ", "
    << queryBlocks << ",\n      {";
  for (int k = 0; k < 7; ++k)
    b << (k ? ", " : "") << "{" << roles[k].offset << ", " << roles[k].batchStride << ", "
      << roles[k].headStride << ", " << roles[k].rowStride << "}";
  b << "},\n      {" << ms[0] << ", " << ms[1] << ", " << ms[2] << ", " << ms[3] << "}, "
    << literal(a.scale, a.element) << ", " << std::to_string(a.dropout) << ", "
    << literal(1.0 / (1.0 - a.dropout), a.element) << ", " << a.seed << "ull, {"
    << a.rotaryDim << ", " << a.rotaryBatch << ", " << a.rotaryRow << "}";
  // Left out where not given: the aggregate's 0, no capping, no window,
  // whole probabilities.
  if (a.softcap > 0 || a.window > 0 || a.blockSlot >= 0)
    b << ", " << literal(a.softcap, mlir::Float64Type::get(a.element.getContext()));
  if (a.window > 0 || a.blockSlot >= 0)
    b << ", " << a.window;
  if (a.blockSlot >= 0) {
    // The block's span in dropout's counter space [B, H, Sq, Sk] (varlen:
    // [H, C, C]) from its axis on, the count, and the rank read now.
    std::vector<int64_t> space =
        a.varlen ? std::vector<int64_t>{a.heads, a.tokenCapacity, a.tokenCapacity}
                 : std::vector<int64_t>{a.batch, a.heads, a.seqQ, a.seqK};
    int64_t span = 1;
    for (size_t d = a.blockAxis; d < space.size(); ++d)
      span *= space[d];
    b << ",\n      {" << span << "ull, " << a.blocks << "ull, (uint64_t)p" << a.blockSlot
      << "[0]}";
  }
  b << "};\n";
  return b.str();
}

/// `const MlcAttentionArgs<T, I> x = {...};` over the bound arguments
/// p0..pN (outputs, [dO], q, k, v, [mask], [cu_seqlens], [cos, sin]).
inline std::string attentionBuffers(const AttentionKernel &a) {
  auto p = [](int i) { return "p" + std::to_string(i); };
  const int qi = a.query;
  const std::string I = a.varlen ? cType(a.args[a.cuSlot].element) : "int32_t";
  // The outputs' type where it is not the element's (bf16_result).
  const mlir::Type out = a.args.empty() ? a.element : a.args[0].element;
  const std::string O = out == a.element ? "" : ", " + cType(out);
  return "  const MlcAttentionArgs<" + cType(a.element) + ", " + I + O + "> x = {" + p(0) + ", " +
         (a.backward ? p(1) + ", " + p(2) + ", " + p(3) : "0, 0, 0") + ", " + p(qi) + ", " +
         p(qi + 1) + ", " + p(qi + 2) + ", " + (a.mask ? p(qi + 3) : "0") + ", " +
         (a.varlen ? p(a.cuSlot) : "0") + ", " +
         (a.rotaryDim > 0 ? p(a.rotarySlot) + ", " + p(a.rotarySlot + 1) : "0, 0") + "};\n";
}

/// The variant flags: `MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT`, or `0`.
inline std::string attentionFlags(const AttentionKernel &a) {
  std::string flags;
  for (auto [on, name] : {std::pair{a.causal, "CAUSAL"}, {a.mask, "MASK"}, {a.varlen, "VARLEN"},
                          {a.dropout > 0, "DROPOUT"}, {a.kvHeads != a.heads, "GROUPED"},
                          {a.rotaryDim > 0, "ROTARY"}, {a.interleaved, "INTERLEAVED"},
                          {a.softcap > 0, "SOFTCAP"}, {a.window > 0, "WINDOW"},
                          {a.blockSlot >= 0, "BLOCK"}})
    if (on)
      flags += (flags.empty() ? "MLC_ATTN_" : " | MLC_ATTN_") + std::string(name);
  return flags.empty() ? "0" : flags;
}

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_ATTENTIONSOURCE_H
