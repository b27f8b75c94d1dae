//===- Roofline.h - a plan's step time at a GPU's limits --------*- C++ -*-===//
//
// `mlc compile MODEL --roofline h200` reads the lowered plan (after fusion
// and memory planning) and gives, per kernel and per GEMM shape of one
// training step, the bytes it moves and the FLOPs it does, the time each
// would take at the device's limits, max(bytes / bandwidth, FLOPs / peak),
// and their sum: the step time the plan predicts if every kernel ran at
// the hardware's roofline. It is a model, no GPU runs: the number a
// measured step is compared against.
//
// Everything comes from the plan's IR: a region kernel's loads and stores
// with their strides over its iteration space, a template kernel's typed
// parameters, a GEMM's m, n, k, batch strides and operand types. Nothing
// is read back from generated text.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_TOOLS_ROOFLINE_H
#define MLC_COMPILER_TOOLS_ROOFLINE_H

#include "compiler/tools/Collectives.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlc::tool {

/// A GPU's limits, in bytes and FLOPs per second.
struct RooflineDevice {
  std::string name;
  /// Copy bandwidth of device memory (read + write bytes per second).
  double bandwidth = 0;
  /// bf16 GEMMs on tensor cores (f32 accumulation); also attention whose
  /// products are bf16 (--dtype bf16).
  double bf16 = 0;
  /// f32 GEMMs as mlc runs them (cuBLASLt without TF32) and f64 GEMMs.
  double f32Gemm = 0;
  /// CUDA-core f32 arithmetic: every other kernel, f32 attention.
  double f32 = 0;
  /// Seconds added per launch (0: the step replays as one CUDA graph).
  double launch = 0;
  /// The dense datasheet peaks MFU divides by (bf16, f32), as PyTorch's
  /// benchmark on the same machine does.
  double peakBf16 = 0, peakF32 = 0;
  /// Where the numbers come from, for the report's header.
  std::string basis;
  /// Communication (Collectives.h): per GPU and direction, NVLink inside a
  /// node of `gpusPerNode` GPUs, the GPU's InfiniBand NIC across nodes, as
  /// bus bandwidths (the datasheet's at the efficiency NCCL reaches), and
  /// the latency of one step of a collective on each.
  double nvlink = 0, ib = 0, nvlinkLatency = 0, ibLatency = 0;
  int64_t gpusPerNode = 8;
  std::string commBasis;
};

/// `NAME[,key=value...]` or `key=value,...`: a preset (h200, h100) with
/// optional overrides, or a device given whole. Keys: bw (TB/s), bf16,
/// f32gemm, f32, peak-bf16, peak-f32 (TFLOP/s), launch (µs), nvlink and ib
/// (GB/s per GPU, as used), node (GPUs per node).
llvm::Expected<RooflineDevice> parseRooflineDevice(llvm::StringRef spec);

/// One row of the table: a kernel (all its launches in the step), kernels
/// alike (the same template, bytes and FLOPs per launch: one per layer), or
/// one GEMM shape (all GEMMs of that shape and types).
struct RooflineItem {
  std::string name, kind;
  /// The plan's kernels of the row (none for a GEMM shape).
  std::vector<std::string> kernels;
  /// gemm | attention | pointwise | rows | optimizer
  std::string group;
  int64_t launches = 0;
  double bytes = 0, flops = 0, seconds = 0;
  bool computeBound = false;
  /// A kernel whose template the model does not know (a template added
  /// without a cost here): its bytes are its buffers', each once, and no FLOPs.
  bool fromBuffers = false;
};

struct Roofline {
  RooflineDevice device;
  /// The functions one step runs (@train_step, @grad_norm, @optimizer).
  std::vector<std::string> functions;
  /// Sorted by predicted time, longest first.
  std::vector<RooflineItem> items;
  double seconds = 0, launchSeconds = 0;
  int64_t launches = 0;
  /// Tokens per step (rooflineOf), parameters, and the step's model FLOPs for MFU:
  /// 6 N tokens + 12 x (forward attention's 2 B H Sq Sk (D + Dv), no
  /// causal halving) = PaLM's 6 N + 12 L S E per token.
  int64_t tokens = 0, parameters = 0;
  double modelFlops = 0;
  /// Variable-length attention (packed documents, unpadded BERT): its
  /// FLOPs are an upper bound, every sequence as long as the batch allows
  /// (the padded form's), since the lengths come with each batch.
  bool attentionUpperBound = false;
  /// The MFU peak that applies (bf16 when the package's GEMMs are bf16).
  double peak = 0;
  bool bf16 = false;

  /// Communication. The plan is one rank's of T tensor-parallel x D data-
  /// parallel ranks; `parameters` counts the whole model (T x a split
  /// parameter's slice) and `modelFlops` is one GPU's share, 1/T of the
  /// group's (its tokens are the group's: tokens/s per GPU is tokens / T /
  /// step).
  int64_t tensorParallel = 1, dataParallel = 1;
  /// The links each group's collectives cross.
  std::string tpLink, dpLink;
  /// @train_step's tensor-parallel collectives (Collectives.h) with their
  /// seconds on the wire, and the part the step waits for: the blocking
  /// ones' and what the asynchronous all-reduces (tpAsync*, hidden under
  /// the weight-gradient GEMMs up to their waits) leave exposed.
  std::vector<CollectiveTime> tpComms;
  double tpSeconds = 0, tpExposed = 0, tpAsyncSeconds = 0, tpAsyncBytes = 0;
  /// The data-parallel gradient buckets (all-reduced, or reduce-scattered
  /// and their parameters all-gathered under the distributed optimizer)
  /// and the norm's scalar sum: their time on the wire, and how much of it
  /// the step waits for (the rest runs under backward and the update).
  std::vector<CollectiveTime> dpComms;
  double dpSeconds = 0, dpExposed = 0;
  /// The step with communication: kernels and the exposed tensor- and
  /// data-parallel time.
  double stepSeconds() const { return seconds + tpExposed + dpExposed; }
  bool communicates() const { return tensorParallel > 1 || dataParallel > 1; }
  /// Tokens/s per GPU and MFU of a step of `step` seconds (the T ranks of a
  /// tensor-parallel group share their tokens; modelFlops is one GPU's
  /// share, against one GPU's peak).
  double tokensPerGpu(double step) const {
    return step > 0 ? tokens / step / tensorParallel : 0.0;
  }
  double mfu(double step) const { return step > 0 && peak > 0 ? modelFlops / step / peak : 0.0; }
};

/// The roofline of one step of a module in the plan dialect. Its tokens
/// (for tokens/s and MFU) are the plan's token capacity where it has one
/// (unpadded batches: a full micro-batch), else the elements of its integer
/// input [B, S] (input_ids, labels: micro-batch x sequence length), else of
/// its largest integer input.
/// `ranks`: the data-parallel ranks, for the distributed optimizer's
/// launches over this rank's shards (ceil(c / ranks) of each bucket of c)
/// and the time of the gradients' collectives over them.
///
/// Communication runs on a timeline of the plan's steps in order: each
/// kernel and GEMM advances the compute clock by its roofline time; a
/// tensor-parallel collective blocks it for its time; a data-parallel
/// bucket's collective starts when the plan starts it (backward has
/// written the bucket's last gradient) or when the previous one has
/// finished (one communication stream), and its wait holds the clock until
/// it has arrived: that hold is the exposed time.
llvm::Expected<Roofline> rooflineOf(mlir::ModuleOp plan, const RooflineDevice &device,
                                    int64_t ranks = 1);

/// The report's table and totals, and its JSON object.
std::string formatRoofline(const Roofline &r);
std::string rooflineJson(const Roofline &r);

} // namespace mlc::tool

#endif // MLC_COMPILER_TOOLS_ROOFLINE_H
