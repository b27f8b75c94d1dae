//===- CudaEmulation.h - kernels.cu run by the host compiler ----*- C++ -*-===//
//
// The CUDA emulator (`--device cuda-emulator`) runs the CUDA backend on the
// CPU, so that the backend and its kernels are tested on machines without a
// GPU: EmulatedDevice.cpp stands in for the driver, cuBLASLt and NCCL, and
// kernels.cu is compiled by the host C++ compiler behind the header below,
// which supplies what CUDA C uses (thread and block indices, __shared__,
// __syncthreads, warp shuffles, atomics): emulation.h, a source of its own
// (compiled alone in test/tools/cuda-emulation-source.test).
//
// Each CUDA thread is a fiber (ucontext) with its own stack; a block's
// fibers run on one OS thread, switching at barriers: __syncthreads waits
// for every live thread of the block, a shuffle for every live lane of the
// warp (each lane publishes its value, then reads its partner's). Blocks
// are shared out among OpenMP threads, and __shared__ memory is
// thread_local, so each OS thread's block has its own. A barrier that can
// never complete (divergent __syncthreads) aborts with a message instead of
// hanging.
//
// It is slow (a context switch per thread per barrier) and meant for small
// shapes: the tests compare it with the CPU kernels on tiny models.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CUDA_CUDAEMULATION_H
#define MLC_RUNTIME_BACKEND_CUDA_CUDAEMULATION_H

namespace mlc::rt {

#include "runtime/backend/cuda/CudaEmulationHeader.inc"

/// The header kernels.cu is compiled behind: backend/cuda/emulation.h,
/// embedded at build time (its last line restarts the line count at
/// kernels.cu's first, so that errors name the kernel's lines).
inline const char *cudaEmulationHeader() { return kCudaEmulationHeader; }

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CUDA_CUDAEMULATION_H
