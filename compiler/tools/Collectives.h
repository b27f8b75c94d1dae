//===- Collectives.h - a plan's collectives: bytes and time on the wire -*- C++ -*-===//
//
// What `--report` and `--roofline` say about communication. The tensor-
// parallel collectives are read from the plan generically: every step whose
// op is `plan.tp_*` (`plan.tp_all_reduce` today; an all-gather or reduce-
// scatter over the group counts the same way when the plan has one), in
// @train_step, before the loss step (forward) or after it (backward), but
// `plan.tp_wait`. The time model is a ring over the link the group spans
// (Collectives.cpp); an asynchronous all-reduce (a tag) runs on a stream of
// its own and only what is left of it at its wait adds to the step.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_TOOLS_COLLECTIVES_H
#define MLC_COMPILER_TOOLS_COLLECTIVES_H

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace mlc::tool {

/// The tensor-parallel collectives of one kind in one phase of @train_step.
struct Collective {
  /// The plan op without its dialect (`tp_all_reduce`), with ` max` for a
  /// maximum's all-reduce.
  std::string op;
  bool backward = false;
  int64_t count = 0;
  /// The tensors' bytes: each step's largest buffer (the whole tensor an
  /// all-gather writes or a reduce-scatter reads).
  int64_t bytes = 0;
};

/// Whether `op` is a tensor-parallel collective step (`plan.tp_*`).
bool isTensorParallelCollective(mlir::Operation *op);
/// Its name as Collective::op spells it, and its bytes.
std::string collectiveName(mlir::Operation *op);
int64_t collectiveBytes(mlir::Operation *op);

/// @train_step's tensor-parallel collectives by kind and phase, forward
/// first, each in first-seen order. Empty without tensor parallelism.
std::vector<Collective> tensorParallelCollectives(mlir::ModuleOp plan);

/// The tensor-parallel size the plan was compiled for (`mlc.tensor_parallel`,
/// 1 when absent).
int64_t tensorParallelSize(mlir::ModuleOp plan);

/// A link between GPUs: bytes per second each GPU sends (and receives) at
/// once, and the latency of one step of a collective's algorithm.
struct Link {
  std::string name;
  double bandwidth = 0, latency = 0;
};

/// Seconds one collective of `bytes` (the whole tensor) takes over n ranks
/// on `link`: a ring moves 2 (n-1)/n of the bytes for an all-reduce and
/// (n-1)/n for an all-gather or reduce-scatter, at the link's bandwidth,
/// plus ceil(log2 n) latency steps (twice for an all-reduce: NCCL's tree
/// latency, as bench/scaling_model.py has it). 0 for n = 1.
double collectiveSeconds(llvm::StringRef op, double bytes, int64_t n, const Link &link);
/// The share of the tensor's bytes each rank sends for that collective.
double ringShare(llvm::StringRef op, int64_t n);

/// Collectives of one kind on the timeline, with their seconds.
struct CollectiveTime {
  std::string op;
  bool backward = false;
  int64_t count = 0;
  double bytes = 0, seconds = 0;
};

/// One step's communication on a timeline of its steps (Roofline.h): the
/// caller advances the compute clock by each kernel's time and hands every
/// other step to `step`, in the plan's order, function after function.
class CommTimeline {
public:
  /// T tensor-parallel ranks on `tp`, D data-parallel ranks on `dp`.
  CommTimeline(int64_t t, const Link &tp, int64_t d, const Link &dp)
      : t(t), d(d), tpLink(tp), dpLink(dp) {}
  void compute(double seconds) { clock += seconds; }
  /// Steps after `loss` (in @train_step) are backward's.
  void enterFunction(mlir::Operation *loss) { lossStep = loss, pastLoss = false; }
  /// A collective or a wait: its time on the timeline. Other steps: nothing.
  void step(mlir::Operation &op);

  std::vector<CollectiveTime> tp, dp;
  double tpSeconds = 0, dpSeconds = 0, dpExposed = 0;
  /// The tensor-parallel time the step waits for: every blocking
  /// collective's, and what an asynchronous all-reduce (a tag) has left
  /// when its plan.tp_wait is reached. tpAsync*: the asynchronous ones'
  /// seconds and bytes on the wire (tpSeconds counts them too).
  double tpExposed = 0, tpAsyncSeconds = 0, tpAsyncBytes = 0;

private:
  void record(std::vector<CollectiveTime> &rows, const std::string &op, double bytes,
              double seconds, bool backward);
  int64_t t, d;
  Link tpLink, dpLink;
  mlir::Operation *lossStep = nullptr;
  bool pastLoss = false;
  double clock = 0, streamFree = 0, tpStreamFree = 0;
  /// When each tag's collective arrives (all-reduce, reduce-scatter and
  /// all-gather tags are apart).
  std::map<std::pair<std::string, int64_t>, double> arrives;
};

} // namespace mlc::tool

#endif // MLC_COMPILER_TOOLS_COLLECTIVES_H
