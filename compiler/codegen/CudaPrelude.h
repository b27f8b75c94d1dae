//===- CudaPrelude.h - the top of every generated kernels.cu ----*- C++ -*-===//
//
// The prelude is a source of its own, prelude/cuda.cuh (compiled alone by a
// test), embedded at build time; the compiler pastes it into kernels.cu,
// followed by the row and column kernels, prelude/rows.cuh, the
// flat-buffer kernels, prelude/optimizer.cuh, the remaining reductions,
// prelude/reduce.cuh, the fills, prelude/fill.cuh, and the attention
// templates, prelude/attention.cuh (each compiled alone, instantiated, by
// another test).
// Documented here once: the CUDA kernel ABI, the helpers kernels share, and the line
// that describes each kernel's launches to the runtime.
//
// kernels.cu is self-contained: it includes no header, so NVRTC compiles it
// alone for the device's architecture. Every plan kernel kN is one
// __global__ function run as one or more phases (launches in stream order,
// so a phase sees everything the previous one wrote):
//
//   // mlc.kernel kN KIND args=A scratch=S launch=G0x B0,G1x B1,...
//   extern "C" __global__ void kN(char *const *b, const MlcKernelCtx *ctx,
//                                 int phase);
//
// launch lists, per phase, the grid (blocks) and block (threads) sizes: all
// static, fixed at compile time from the package's shapes (a dynamic token
// count is read from ctx->rows inside the kernel and covered by grid-stride
// loops), so a whole training step can be captured once as a CUDA graph.
// mlc-cuda-launch decides them on the plan (cuda.launch, cuda.scratch).
// scratch is the bytes of device scratch the kernel needs between phases
// (ctx->scratch; the runtime allocates the largest). b[i] is the i-th
// buffer of the launch, as on the CPU.
//
// Reductions are deterministic: fixed grids, per-block partials written to
// scratch and summed in a fixed order by a later phase, no float atomics,
// so a run is bit-reproducible on one device.
//
// Errors (a token id or label out of range) go to ctx->error, 3 words in
// device memory that the runtime sets to {0, ~0, 0} before a step:
// {code, (row << 32) | uint32(value), limit}; the first kernel's code wins,
// and within it the lowest row (an atomic minimum of the packed key).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CUDAPRELUDE_H
#define MLC_COMPILER_CUDAPRELUDE_H

#include "compiler/codegen/KernelPrelude.h"

#include <string>

namespace mlc {

#include "compiler/codegen/CudaAttention.inc"
#include "compiler/codegen/CudaFill.inc"
#include "compiler/codegen/CudaOptimizer.inc"
#include "compiler/codegen/CudaPrelude.inc"
#include "compiler/codegen/CudaReduce.inc"
#include "compiler/codegen/CudaRows.inc"

/// kernels.cu's prelude: prelude/cuda.cuh with prelude/mlc_shared.h in place
/// of its include (the helpers that give the CPU's bits, KernelPrelude.h),
/// then the row kernels of prelude/rows.cuh, the flat-buffer kernels of
/// prelude/optimizer.cuh, the reductions of prelude/reduce.cuh, the fills of
/// prelude/fill.cuh and the attention templates of prelude/attention.cuh.
inline std::string cudaKernelPrelude() {
  return std::string(kCudaPreludeSource) + "\n" + kCudaRowsSource + "\n" +
         kCudaOptimizerSource + "\n" + kCudaReduceSource + "\n" + kCudaFillSource + "\n" +
         kCudaAttentionSource;
}

} // namespace mlc

#endif // MLC_COMPILER_CUDAPRELUDE_H
