//===- NormCalls.h - the call of a fused norm's template ---------*- C++ -*-===//
//
// LayerNorm or RMSNorm of a pointwise prologue (a `rows` fusion) is one call
// of mlc_layer_norm_fused (prelude/rows.h, prelude/rows.cuh, where its math
// and memory traffic are stated), alike on both targets: the printers write
// only what comes from the kernel's IR, the prologue's element code as the
// lambda u and the element's stores as the lambda out; the template owns
// the row's statistics and the normalization.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_NORMCALLS_H
#define MLC_COMPILER_CODEGEN_NORMCALLS_H

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/RowCalls.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace mlc::lowering {

/// The operands of one fused norm, as KernelTarget::layerNormFusion has them.
struct NormFusion {
  mlir::Type el;
  int64_t E;
  std::string rows, eps, bases, offsets, body, input;
  llvm::ArrayRef<int> slots;
  std::string weight, bias, residual;
  bool rms;
};

/// mlc_layer_norm_fused<T, E, F>(R, eps, u, out): u(r, c) runs the
/// prologue's element code (each access's row base and offset first) and
/// returns the normalized input; out(r, c, norm) stores norm(w, b, h), the
/// element's value (MlcRowNorm, prelude/mlc_shared.h), to each of the
/// slots (a second one: its bf16 copy, converted at the store). An absent
/// bias or residual is 0, which the template never reads (MLC_ROW_RMS, no
/// MLC_ROW_RESIDUAL).
inline std::string layerNormFusionCall(const NormFusion &n) {
  const std::string T = cType(n.el), head = "  [&](const int64_t r, const int64_t c";
  const std::string flags =
      rowFlags({{n.rms, "MLC_ROW_RMS"}, {!n.residual.empty(), "MLC_ROW_RESIDUAL"}});
  std::string k = "  mlc_layer_norm_fused<" + T + ", " + std::to_string(n.E) + ", " + flags +
                  ">(" + n.rows + ", " + n.eps + ",\n";
  k += head + ") {\n" + n.bases + n.offsets + n.body + "    return " + n.input + ";\n  },\n";
  k += head + ", const MlcRowNorm<" + T + ", " + flags + "> &norm) {\n" + n.bases + n.offsets;
  k += "    const " + T + " y = norm(" + n.weight + ", " +
       (n.rms || n.bias.empty() ? "0" : n.bias) + ", " + (n.residual.empty() ? "0" : n.residual) +
       ");\n";
  for (int slot : n.slots)
    k += "    p" + std::to_string(slot) + "[o" + std::to_string(slot) + "] = y;\n";
  return k + "  });\n";
}

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_NORMCALLS_H
