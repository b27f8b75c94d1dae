//===- RowCalls.h - the calls of the row kernels' templates -----*- C++ -*-===//
//
// The row and column kernels are templates of the preludes (prelude/rows.h
// for the CPU, prelude/rows.cuh for CUDA), where each one's math and memory
// traffic are stated; a plan kernel of these families is one call. Both
// targets call them alike: the kernel's arguments (p0..pN, outputs first),
// the template arguments (element types, the row length, the MLC_ROW_*
// flags) and the pointers in the template's order, 0 for a buffer the
// variant has none of. Built here once for both printers; a target adds
// what is its own (CUDA: the column sums' chunks and the phase).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_ROWCALLS_H
#define MLC_COMPILER_ROWCALLS_H

#include "compiler/codegen/LoweringImpl.h"

#include <initializer_list>
#include <utility>

namespace mlc::lowering {

/// A call of a row template: the kernel's arguments, then what goes between
/// the template's <> and its ().
struct RowCall {
  std::vector<KernelArg> args;
  std::string types, pointers;
};

/// The MLC_ROW_* flags that hold, or 0.
inline std::string rowFlags(std::initializer_list<std::pair<bool, const char *>> flags) {
  std::string s;
  for (const auto &[on, name] : flags)
    if (on)
      s += std::string(s.empty() ? "" : " | ") + name;
  return s.empty() ? "0" : s;
}

/// A reduction's kind as the templates name it.
inline std::string reduceKind(ReductionKernel::Kind k) {
  return k == ReductionKernel::Max    ? "MLC_REDUCE_MAX"
         : k == ReductionKernel::Mean ? "MLC_REDUCE_MEAN"
                                      : "MLC_REDUCE_SUM";
}

inline std::string slot(int i) { return i < 0 ? "0" : "p" + std::to_string(i); }

/// mlc_layer_norm<T, E, F>(y, x, w, b, ...): y, x, then w (not `unit`) and
/// b (neither `unit` nor `rms`).
inline RowCall layerNormCall(mlir::Type el, int64_t E, bool rms, bool unit) {
  RowCall c{{{el, true}, {el, false}}, "", ""};
  if (!unit)
    c.args.push_back({el, false});
  if (!rms && !unit)
    c.args.push_back({el, false});
  c.types = cType(el) + ", " + std::to_string(E) + ", " +
            rowFlags({{rms, "MLC_ROW_RMS"}, {unit, "MLC_ROW_UNIT"}});
  c.pointers = "p0, p1, " + slot(unit ? -1 : 2) + ", " + slot(rms || unit ? -1 : 3);
  return c;
}

/// mlc_layer_norm_grad<T, TG, TC, E, F>(dx, dw, db, g, x, w, res, copy,
/// ...): outputs dx, dw (, db), then the inputs g (in its own type `grad`),
/// x, w (none when `unit`), the residual stream's gradient, and dx's copy
/// (of type `copy`, written) last. With `plusOne` the weight is 1 + w
/// (Gemma's RMSNorm), added at the load (MLC_ROW_PLUS_ONE).
inline RowCall layerNormGradCall(mlir::Type el, int64_t E, bool rms, bool residual, bool unit,
                                 mlir::Type copy, mlir::Type grad, bool plusOne = false) {
  const int in = rms ? 2 : 3;
  RowCall c{{{el, true}, {el, true}}, "", ""};
  if (!rms)
    c.args.push_back({el, true});
  c.args.insert(c.args.end(), {{grad, false}, {el, false}});
  if (!unit)
    c.args.push_back({el, false});
  const int res = residual ? int(c.args.size()) : -1;
  if (residual)
    c.args.push_back({el, false});
  const int cp = copy ? int(c.args.size()) : -1;
  if (copy)
    c.args.push_back({copy, true});
  const std::string T = cType(el);
  c.types = T + ", " + cType(grad) + ", " + (copy ? cType(copy) : T) + ", " + std::to_string(E) +
            ", " +
            rowFlags({{rms, "MLC_ROW_RMS"},
                      {unit, "MLC_ROW_UNIT"},
                      {residual, "MLC_ROW_RESIDUAL"},
                      {bool(copy), "MLC_ROW_COPY"},
                      {plusOne, "MLC_ROW_PLUS_ONE"}});
  c.pointers = "p0, p1, " + slot(rms ? -1 : 2) + ", " + slot(in) + ", " + slot(in + 1) + ", " +
               slot(unit ? -1 : in + 2) + ", " + slot(res) + ", " + slot(cp);
  return c;
}

} // namespace mlc::lowering

#endif // MLC_COMPILER_ROWCALLS_H
