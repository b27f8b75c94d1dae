//===- CudaSchedule.h - how the CUDA target launches a kernel --*- C++ -*-===//
//
// mlc-cuda-launch decides, from each kernel's template (its scheduleCuda,
// compiler/codegen/templates/) or its body's nest, the CUDA launch of every
// phase and the scratch it needs, and records it on the plan.kernel:
//
//   plan.kernel @k7 rows #plan.softmax args(2) params {columns = 64 : i64, ...}
//       attributes {cuda.launch = [array<i64: 32, 64>], cuda.scratch = 0 : i64}
//
// The CUDA printer reads the schedule back (readCudaSchedule) to write
// `if (phase == K)` per phase and the kernel's `// mlc.kernel ... scratch=N
// launch=GxB,...` line, which the runtime launches from; the templates take
// their chunk counts and tiles from it, so each number is decided once,
// here.
//
// A kernel CUDA cannot run (an attention block whose shared memory exceeds
// the 48 KB a block may declare statically) is not an error here, since
// every package is lowered for both targets and the CPU runs it: its
// `cuda.refusal` says why, the printer writes it as a `// mlc.refuse` line,
// and whatever reads kernels.cu for CUDA (the CUDA backend and emulator,
// `mlc compile --report`, `--emit=ptx`) fails with it.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_CUDASCHEDULE_H
#define MLC_COMPILER_CODEGEN_CUDASCHEDULE_H

#include "compiler/codegen/KernelTarget.h"
#include "dialects/plan/PlanDialect.h"

#include "llvm/Support/Error.h"

#include <optional>

namespace mlc::lowering {

/// Whether attention runs on tensor cores (mlc_attention_tc_*): bf16
/// products of f32 tensors, head dimensions multiples of 16 (8 for the
/// forward pass's values) and at most 256.
bool attentionOnTensorCores(const AttentionKernel &a);

/// The heads an attention grid's query tiles repeat over: batch x heads
/// padded, heads varlen (its tiles are the packed stream's), so that the
/// grid is attentionGridHeads(a) x MlcAttention::queryBlocks.
int64_t attentionGridHeads(const AttentionKernel &a);

/// The threads of a grid-stride or column-sum phase's block.
inline constexpr int64_t kCudaThreads = 256;
/// The most static shared memory a CUDA block may declare (48 KB).
inline constexpr int64_t kCudaStaticSharedBytes = 48 * 1024;
/// The attribute of a kernel CUDA cannot run: why (a string naming it).
inline constexpr llvm::StringLiteral kCudaRefusal = "cuda.refusal";

/// The schedule of kernel `k`;
/// an error names the kernel and what it lacks.
llvm::Expected<CudaSchedule> decideCudaSchedule(plan::KernelOp k);

/// The schedule recorded on `k` (none: mlc-cuda-launch has not run).
std::optional<CudaSchedule> readCudaSchedule(plan::KernelOp k);
void writeCudaSchedule(plan::KernelOp k, const CudaSchedule &s);

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_CUDASCHEDULE_H
