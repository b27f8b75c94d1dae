//===- MemoryPlan.h - what a rank allocates, stated from the plan -*- C++
//-*-===//
//
// `mlc compile MODEL --report` prints, per rank and before anything runs,
// the bytes each backend will allocate for the package these flags compile,
// item by item (contract/DeviceMemory.h): the flat parameter, gradient,
// moment and accumulation buffers, the activation arena (split into the
// activations saved for backward, per layer, and the transient rest), the
// inputs, communication buffers, the GEMM workspace and the runtime's small
// buffers. `--device-memory SIZE` refuses a plan whose total does not fit.
//
// Everything comes from the lowered plan (after mlc-plan-memory and the
// CUDA target's passes): plan.param shapes, plan.input shapes at the token
// capacity, each plan.func's arena_bytes, the arena slices' live ranges,
// the kernels' cuda.scratch and the launches' operands. The runtime records
// what it allocates under the same items (`mlc train --memory-report`), and
// test/tools/memory-runtime.test holds the two equal on the CPU and on the
// emulated CUDA device.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_TOOLS_MEMORYPLAN_H
#define MLC_COMPILER_TOOLS_MEMORYPLAN_H

#include "compiler/tools/Collectives.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mlc::tool {

/// Saved activations of one group of buffers: a layer (its index in the
/// parameters' names, `h.3.`, `layers.3.`, `layer.3.`) or, with layer -1,
/// those outside the layers (embeddings, final norm, head, loss).
struct LayerBytes {
  int64_t layer = -1;
  int64_t bytes = 0;
};

struct MemoryPlan {
  /// The bytes each backend allocates, by item (contract/DeviceMemory.h).
  std::map<std::string, int64_t> cuda, cpu;
  /// Of the arena: the slices of @train_step that hold a value written in
  /// forward (before the loss step) and read in backward, as placed.
  int64_t saved = 0;
  std::vector<LayerBytes> savedByLayer; // layers in order, then layer -1
  /// Of the arena: values computed in forward from the parameters alone and
  /// read in backward (the weights' bf16 copies under --dtype bf16).
  int64_t weightCopies = 0;
  /// The most bytes of arena slices live at any one step: the arena minus
  /// this is what first-fit placement loses to fragmentation.
  int64_t livePeak = 0;
  /// Flat-buffer elements and their type; the products' type (bf16 under
  /// --dtype bf16); whether the plan has a training step at all.
  int64_t parameters = 0;
  std::string paramDtype, computeDtype;
  bool training = false;
  /// Ranks the package runs on (every rank allocates the same).
  int64_t ranks = 1;
  /// --use-distributed-optimizer: each rank holds its shards of the moments.
  bool shardedMoments = false;
  /// --tensor-parallel T: the plan is one rank's of a group of T. Of its
  /// `parameters`, `splitParameters` are its slices of the parameters split
  /// over the group (mlc.tp_split: 1/T of each); the rest are replicated
  /// whole on every rank (norms, positions, row-parallel biases).
  /// `wholeParameters` is the model's count, T x split + replicated.
  int64_t tensorParallel = 1, splitParameters = 0, wholeParameters = 0;
  /// --sequence-parallel: the stream between the regions is split too.
  bool sequenceParallel = false;
  /// @train_step's collectives over the tensor-parallel group.
  std::vector<Collective> tpCollectives;
  /// The --recompute the plan was compiled with (none, selective, full),
  /// for the advice on what shrinks the saved activations.
  std::string recompute = "none";

  /// The gradient-sum buffer a run allocates when it accumulates
  /// micro-batches (--global-batch above micro-batch x ranks; 0 when no
  /// function binds one): outside cuda and cpu and their totals, since a
  /// run without accumulation never allocates it.
  int64_t accumulationSums = 0, accumulationSumsCpu = 0;

  int64_t total(const std::map<std::string, int64_t> &items) const;
  /// The arena's bytes beyond the saved activations and weight copies (the
  /// transient peak with fragmentation), on the CUDA backend.
  int64_t transient() const;
};

/// The loss step of a plan.func (@train_step): the first launch or GEMM
/// that writes the buffer the function returns as "loss". The steps before
/// it are forward, those after it backward; null when nothing writes a loss.
mlir::Operation *lossStepOf(mlir::Operation *func);

/// The memory plan of a module in the plan dialect. `computeDtype` is the
/// products' type (the --dtype flag), for the advice on what shrinks it.
llvm::Expected<MemoryPlan> memoryPlanOf(mlir::ModuleOp plan, int64_t ranks,
                                        const std::string &computeDtype);

/// The report's memory section, and its JSON object.
std::string formatMemoryPlan(const MemoryPlan &p);
std::string memoryPlanJson(const MemoryPlan &p);

/// --device-memory: a size (80GB, 80GiB, 141e9 bytes; K/M/G/T in powers of
/// 1000, Ki/Mi/Gi/Ti in powers of 1024) or a device, h100 (80 GB) or h200
/// (141 GB), the capacities their datasheets state.
llvm::Expected<int64_t> parseDeviceMemory(llvm::StringRef spec);

/// An error when the plan's CUDA total exceeds `limit` bytes: it names the
/// largest items and the flags that would shrink them; success otherwise.
llvm::Error checkFits(const MemoryPlan &p, int64_t limit, llvm::StringRef spec);

/// Bytes in human units (1.50 GiB, 12.0 MiB, 512 B).
std::string humanBytes(int64_t bytes);
/// A count with thousands separators (1,048,576).
std::string withCommas(int64_t n);

// `mlc compile`'s side (MemoryReport.cpp, which owns --device-memory).

/// Whether --device-memory was given; a bad value is an error before
/// anything compiles.
llvm::Expected<bool> deviceMemoryGiven();
/// --report's memory section of a lowered module: printed (with whether it
/// fits --device-memory), and `json` gets its "memory" field.
int memoryReport(mlir::ModuleOp plan, std::string &json);
/// --device-memory without --report: an error when the plan does not fit.
llvm::Error checkDeviceMemory(mlir::ModuleOp plan);

/// `--recompute auto`: what it chose and what that costs, measured on the
/// plans it compiled (MemoryReport.cpp).
struct RecomputeChoice {
  /// mlc-recompute's mode ("" for none, selective, full+selective) and
  /// num-layers (-1: every layer).
  std::string mode;
  int64_t numLayers = -1;
  /// Layers the model has (from the parameters' names).
  int64_t layers = 0;
  /// Saved activations and the CUDA total without recomputation and with
  /// the choice; the step's FLOPs and predicted time (h200's roofline)
  /// without and with it.
  int64_t savedNone = 0, savedChosen = 0, totalNone = 0, totalChosen = 0;
  double flopsNone = 0, flopsChosen = 0, secondsNone = 0, secondsChosen = 0;
  /// Plans compiled to choose, in order: the mode and num-layers, the
  /// saved activations, the CUDA total and the step's FLOPs of each.
  struct Trial {
    std::string mode;
    int64_t numLayers = -1, saved = 0, total = 0;
    double flops = 0;
  };
  std::vector<Trial> trials;
  /// The choice in words (none, selective, selective + full on layers 0-N).
  std::string describe() const;
};

/// Compiles the training step with one mlc-recompute mode and num-layers
/// and lowers it to the plan.
using RecomputeTrial = std::function<llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>(
    const std::string &mode, int64_t numLayers)>;

/// `--recompute auto` with --device-memory: the least recomputation whose
/// plan fits (none, selective, then selective with full recomputation of
/// layers 0 to N-1 for the least N); an error naming the largest items of
/// the plan that recomputes everything when even that does not fit, or
/// when --device-memory is missing.
llvm::Expected<RecomputeChoice> chooseRecompute(const RecomputeTrial &trial);

/// The last choice of chooseRecompute (for --report), if any.
const RecomputeChoice *lastRecomputeChoice();

} // namespace mlc::tool

#endif // MLC_COMPILER_TOOLS_MEMORYPLAN_H
