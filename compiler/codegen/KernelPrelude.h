//===- KernelPrelude.h - the top of every generated kernels.cpp -*- C++ -*-===//
//
// The prelude is a source of its own, prelude/cpu.h (compiled alone by a
// test), embedded at build time; the compiler pastes it into kernels.cpp,
// followed by the row and column kernels, prelude/rows.h, the flat-buffer
// kernels (AdamW, the gradient norm), prelude/optimizer.h, the remaining
// reductions, prelude/reduce.h, the fills, prelude/fill.h, and the
// attention templates, prelude/attention.h.
// Documented here once: the kernel ABI, the counter-based random numbers and the
// helpers kernels share (call-free exp/tanh, attention's tile products).
//
//   extern "C" void kN(char **b, MlcKernelCtx *ctx);
//   extern "C" const int64_t kN_args;  // buffers it takes (checked at load)
//   extern "C" const char kN_kind[];   // its template, for MLC_PROFILE
//
// b[i] is the i-th buffer of the launch (outputs first, then inputs, as the
// plan line lists them). ctx->step is the training step (dropout masks);
// ctx->rows the batch's token count where the token dimension is dynamic;
// a kernel that meets bad data (a label or token id out of range) records
// it in ctx->error[0..3] = {code, row, value, limit} instead of crashing
// (the lowest such row), and the runtime turns it into a message.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_KERNELPRELUDE_H
#define MLC_COMPILER_KERNELPRELUDE_H

#include <string>

namespace mlc {

#include "compiler/codegen/CpuAttention.inc"
#include "compiler/codegen/CpuFill.inc"
#include "compiler/codegen/CpuOptimizer.inc"
#include "compiler/codegen/CpuPrelude.inc"
#include "compiler/codegen/CpuReduce.inc"
#include "compiler/codegen/CpuRows.inc"

/// kernels.cpp's prelude: prelude/cpu.h with prelude/mlc_shared.h (the
/// helpers whose results must be the same bits on every target: dropout's
/// counter-based random numbers and bf16 storage; and attention's argument
/// structs, alike on both targets) in place of its include.
/// Each prelude defines MLC_FN (a helper's qualifiers), MLC_MEMBER (a member
/// function's) and mlc_float_bits / mlc_bits_float before the shared part.
/// The row kernels of prelude/rows.h, the flat-buffer kernels of
/// prelude/optimizer.h, the reductions of prelude/reduce.h, the fills of
/// prelude/fill.h and the attention templates of prelude/attention.h follow
/// it.
inline std::string kernelPrelude() {
  return std::string(kCpuPreludeSource) + "\n" + kCpuRowsSource + "\n" + kCpuOptimizerSource +
         "\n" + kCpuReduceSource + "\n" + kCpuFillSource + "\n" + kCpuAttentionSource;
}

} // namespace mlc

#endif // MLC_COMPILER_KERNELPRELUDE_H
