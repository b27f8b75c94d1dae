//===- DeviceMemory.h - what a rank allocates, item by item ----*- C++ -*-===//
//
// `mlc compile --report` states, from the plan, the bytes each backend
// allocates for a package; the runtime records what it does allocate under
// the same items (`mlc train --memory-report FILE`), and a test holds the
// two equal. The items and the runtime's fixed sizes are spelled here only.
//
//   parameters      the flat parameter buffer (paramCount x dtype)
//   gradients       the flat gradient buffer (same size)
//   moments         AdamW's two moment buffers (twice that)
//   gradient_sums   the gradient-accumulation sums (same size; allocated
//                   when the plan has @accumulate, i.e. every training plan)
//   arena           the activation arena: the largest plan.func arena
//                   (mlc-plan-memory); the report splits it into the
//                   activations saved for backward and the transient rest
//   inputs          the batch tensors, at the token capacity
//   communication   buffers of the gradient collectives beyond the gradients
//                   themselves (sums are in place): CUDA's bucket norms
//   gemm_workspace  cuBLASLt's workspace (CUDA; a CPU BLAS keeps its own)
//   runtime         per-step scalars, and on CUDA the kernel context, error
//                   words, kernel scratch and kernel argument tables
//
//===----------------------------------------------------------------------===//

#ifndef MLC_CONTRACT_DEVICEMEMORY_H
#define MLC_CONTRACT_DEVICEMEMORY_H

#include <cstdint>

namespace mlc::memory {

inline constexpr const char *kParameters = "parameters";
inline constexpr const char *kGradients = "gradients";
inline constexpr const char *kMoments = "moments";
inline constexpr const char *kGradientSums = "gradient_sums";
inline constexpr const char *kArena = "arena";
inline constexpr const char *kInputs = "inputs";
inline constexpr const char *kCommunication = "communication";
inline constexpr const char *kGemmWorkspace = "gemm_workspace";
inline constexpr const char *kRuntime = "runtime";

/// Every item, in the report's order.
inline constexpr const char *kItems[] = {
    kParameters, kGradients,     kMoments,       kGradientSums, kArena,
    kInputs,     kCommunication, kGemmWorkspace, kRuntime};

/// The CPU backend aligns its arena to this and allocates at least this.
inline constexpr int64_t kCpuArenaAlignment = 64;

/// The CUDA backend asks the driver for at least this many bytes per
/// allocation (an empty buffer still gets a valid pointer).
inline constexpr int64_t kCudaMinAllocation = 256;
/// cuBLASLt's workspace: one per backend, for every GEMM's algorithm.
inline constexpr int64_t kCublasLtWorkspaceBytes = int64_t(32) << 20;
/// The kernel context every generated kernel reads (CudaKernelCtx: step,
/// error pointer, rows, scratch pointer) and the three error words.
inline constexpr int64_t kCudaKernelContextBytes = 48;
inline constexpr int64_t kCudaErrorWordsBytes = 3 * 8;
/// The smallest kernel scratch the CUDA backend allocates.
inline constexpr int64_t kCudaMinScratch = 8;
/// Per-block partial norms of a bucket (bucket-wise clipping), f64 each.
inline constexpr int64_t kCudaBucketNormParts = 256;

/// Bytes the CUDA backend allocates for a buffer of `bytes`.
inline constexpr int64_t cudaAllocation(int64_t bytes) {
  return bytes < kCudaMinAllocation ? kCudaMinAllocation : bytes;
}

} // namespace mlc::memory

#endif // MLC_CONTRACT_DEVICEMEMORY_H
