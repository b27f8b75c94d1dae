//===- PreludeCalls.h - flat-buffer, reduction and fill calls -*- C++ -*-===//
//
// What both printers write for the templates of prelude/optimizer.h,
// reduce.h and fill.h (and their .cuh twins): the pointers, tables and
// lambdas of a call, alike on both targets; each target adds its template
// arguments (CUDA's launch shape) and phase comments. The element code of
// a plan kernel with a body (the AdamW update, the norm's square, a bias
// gradient's term) becomes the call's lambda, in the names these give it.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_PRELUDECALLS_H
#define MLC_COMPILER_CODEGEN_PRELUDECALLS_H

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/RowCalls.h"

#include <string>
#include <vector>

namespace mlc::lowering {

/// `  static const T name[N] = {v0, v1, ...};` (one element where there
/// are none: the templates never read it).
inline std::string staticTable(const std::string &T, const std::string &name,
                               const std::vector<std::string> &values) {
  std::string s = "  static const " + T + " " + name + "[" +
                  std::to_string(values.empty() ? 1 : values.size()) + "] = {";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i ? ", " : "") + values[i];
  return s + (values.empty() ? "0" : "") + "};\n";
}

/// A fused column sum's term: the element (r, c), its flat index, the
/// sum it adds to; the accesses' offsets, then the element code.
inline std::string columnTerm(const std::string &offsets, const std::string &body) {
  return "[&](const int64_t r, const int64_t c, const int64_t flat, double &sum) {\n" + offsets +
         body + "  }";
}

/// mlc_adamw's buffers: P, M, V (written), G and the step's scalars h.
inline std::string optimizerPointers(Type el) {
  const std::string T = cType(el);
  return "  " + T + " *P = (" + T + " *)b[0];\n  " + T + " *M = (" + T + " *)b[1];\n  " + T +
         " *V = (" + T + " *)b[2];\n  const " + T + " *G = (const " + T +
         " *)b[3];\n  const double *h = (const double *)b[4];\n";
}

/// mlc_adamw's update: one element's p, m, v (in place), g and the decay
/// factor x4, the element code between.
inline std::string adamwUpdate(Type el, const std::string &body) {
  const std::string T = cType(el);
  return "[&](" + T + " &p, " + T + " &m, " + T + " &v, const " + T + " g, const " + T +
         " x4) {\n" + body + "  }";
}

/// mlc_grad_norm's buffers: the norm and G.
inline std::string normPointers(Type el) {
  const std::string T = cType(el);
  return "  double *out = (double *)b[0];\n  const " + T + " *G = (const " + T + " *)b[1];\n";
}

/// mlc_grad_norm's value of one gradient g: the element code, then the
/// value it sums.
inline std::string normValue(Type el, const std::string &body, const std::string &value) {
  return "[&](const " + cType(el) + " g) -> double {\n" + body + "      return " + value +
         ";\n  }";
}

/// mlc_rotary_table<T, POSITIONS, HALF, F>.
inline std::string rotaryCall(Type el, int64_t positions, size_t half, bool sine) {
  return "mlc_rotary_table<" + cType(el) + ", " + std::to_string(positions) + ", " +
         std::to_string(half) + ", " + (sine ? "MLC_ROTARY_SIN" : "0") + ">";
}

/// A reduction over any axes: its {size, stride} table (kept axes, then
/// reduced) and the call of mlc_reduce_axes.
inline std::string reduceAxesCall(const ReductionKernel &r) {
  std::string axes;
  size_t n = 0;
  auto add = [&](const Shape &dims, const Shape &strides) {
    for (size_t d = 0; d < dims.size(); ++d, ++n)
      axes += (n ? ", {" : "{") + std::to_string(dims[d]) + ", " + std::to_string(strides[d]) + "}";
  };
  add(r.keptDims, r.keptStrides);
  add(r.reducedDims, r.reducedStrides);
  int64_t reduced = 1;
  for (int64_t d : r.reducedDims)
    reduced *= d;
  const bool isFloat = isa<FloatType>(r.element);
  const std::string table = "  static const int64_t axes[" + std::to_string(n ? n : 1) +
                            "][2] = {" + (n ? axes : "{1, 0}") + "};\n";
  return table + "  mlc_reduce_axes<" + cType(r.element) + ", " +
         (isFloat ? "double" : "int64_t") + ", " + reduceKind(r.kind) + ", " +
         std::to_string(r.count) + ", " + std::to_string(r.outputs) + ", " +
         std::to_string(reduced) + ", " + std::to_string(r.keptDims.size()) + ", " +
         std::to_string(r.reducedDims.size()) + ">(p0, p1, axes);\n";
}

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_PRELUDECALLS_H
