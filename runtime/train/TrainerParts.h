//===- TrainerParts.h - what the training loop calls ------------*- C++ -*-===//
//
// Private to runtime/train/. The loop (Trainer.cpp, TrainingRun) reads top
// to bottom; what it calls lives by responsibility:
//   Parameters.cpp  the parameters: initialized, loaded, saved (and kept
//                   when a run stops on a non-finite step); `run`
//   Update.cpp      the update: the learning rate schedule, AdamW's scalars,
//                   and the guard that keeps the parameters finite
//   Progress.cpp    what a run reports: MFU and throughput, the progress
//                   line and the summaries on the console
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_TRAINERPARTS_H
#define MLC_RUNTIME_TRAIN_TRAINERPARTS_H

#include "runtime/backend/Backend.h"
#include "runtime/train/BatchSources.h"
#include "runtime/train/Options.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace mlc::rt {

//===----------------------------------------------------------------------===//
// Parameters (Parameters.cpp)
//===----------------------------------------------------------------------===//

/// A value as a message shows it: -0.5, 1e-09, nan, inf.
std::string valueText(double x);

/// --save: a safetensors file, or a Hugging Face model directory.
void saveWeights(Backend &backend, const TrainOptions &o);

/// A run that stops on a non-finite step writes --save with the parameters
/// before it, when they are finite (saveParameters writes no others); the
/// end of its error message says which.
std::string keepParameters(Backend &backend, const TrainOptions &o);

/// --memory-report: what the backend allocated, by item (contract/
/// DeviceMemory.h), and the total, as one JSON object.
void writeMemoryReport(const Backend &backend, const std::string &path);

//===----------------------------------------------------------------------===//
// The update (Update.cpp)
//===----------------------------------------------------------------------===//

/// `o` with the learning rate scaled to the global batch (--lr-scaling):
/// linear (Goyal et al.) or square-root, from the batch --lr was tuned for.
/// `globalBatch` is 0 for a model without input_ids [batch, ...].
TrainOptions scaledSchedule(const TrainOptions &o, int64_t globalBatch);

/// Runs @optimizer so that no update makes the parameters non-finite. It
/// keeps upper bounds on max |p| and max |m| (from the previous bounds, the
/// gradient norm and the step's scalars: |m'| <= max(|m|, |g'|), |update| <=
/// step_size * |m'| / eps); while they prove the update finite, which is
/// every step of a sane run, the update just runs. Otherwise the parameters
/// and moments are copied first and checked after; a non-finite result is
/// undone (the previous values restored) and the run stops, saving the
/// parameters of the last good step.
///
/// Under --use-distributed-optimizer each rank holds only its shard of the
/// moments, so its own max |m| bounds nothing on the others' shards, and a
/// moment that goes non-finite on one rank's shard (its parameters staying
/// finite) is seen by that rank alone. The bounds are therefore taken over
/// all the ranks (maxOverRanks): every rank holds the same ones, takes the
/// same path, and stops at the same step with the same message. The ranks
/// of a tensor-parallel group hold other slices of the parameters (and
/// moments) in any run: their bounds are the group's maxima as well.
class UpdateGuard {
public:
  explicit UpdateGuard(Backend &backend);

  void update(Backend &backend, const std::vector<double> &h, double gradBound, int64_t t,
              const TrainOptions &o);

private:
  /// Each of @values (n of them, none negative) becomes its largest over
  /// the tensor-parallel group (an all-reduce max) and, in a sharded run,
  /// over the data-parallel ranks. Exact: each rank sums its values into
  /// its own slots, zeros elsewhere (an infinity stays one). Other runs'
  /// data-parallel ranks hold the same buffers: nothing to combine there.
  static void maxOverRanks(Backend &backend, double *values, int n);

  /// max |x| over a flat buffer (infinity if any element is not finite).
  static double maxAbs(Backend &backend, FlatBuffer which);

  double limit, pBound = 0, mBound = 0;
};

//===----------------------------------------------------------------------===//
// What a run reports (Progress.cpp)
//===----------------------------------------------------------------------===//

/// A step's numbers before the update: the global batch's mean loss and
/// tokens, this rank's tokens, the ranks' token imbalance, and the seconds
/// this rank waited for gradient sums.
struct StepTotals {
  double loss = 0;
  int64_t tokens = 0, localTokens = 0;
  double imbalance = 0, waited = 0;
  /// Several ranks: SIGINT/SIGTERM reached one of them by the step's sums;
  /// every rank then stops after the same step.
  bool stop = false;
  /// The step's labels not ignored, over all its micro-batches and ranks
  /// (-1: the package has no input 'labels' to count them in).
  double terms = -1;
};

/// FLOPs of one @train_step's GEMMs (2 m n k per product; the token count
/// where a dimension is dynamic): the numerator of MFU.
double stepFlops(const Package &pkg, int64_t tokens);

/// Model FLOPs utilization: a step's model FLOPs per second over the
/// hardware's peak (--peak-tflops, else the device's own, printed once at
/// the start). It is never clamped: a step measured above the peak is
/// reported as measured, with a warning (once) that the peak is too low.
class MfuMeter {
public:
  MfuMeter(Backend &backend, const TrainOptions &o);

  /// The step's MFU (NaN without a peak); `warning` gets the text to print
  /// the first time a step exceeds the peak.
  double measure(int64_t step, double flops, double seconds, std::string &warning);

private:
  PeakRate peak_;
  bool warned_ = false;
};

/// The run's throughput: each step's MFU, and over the timed steps (all but
/// the first, which warms caches up) the time blocked waiting for gradient
/// sums; with MLC_PROFILE the training inputs drawn and the time drawing
/// them.
class Throughput {
public:
  /// MFU from here on, against the peak it prints (MfuMeter); each step's
  /// tokens are input_ids' elements, or where they vary the step's own.
  void startMfu(Backend &backend, const TrainOptions &o);
  /// The seconds this rank waited for gradient sums since the last call.
  double waitedSinceLast(const Backend &backend);
  /// Step t's MFU over this rank's `micro` micro-batches (NaN without a
  /// peak), counting it in the totals unless it is the run's `first`;
  /// `warning` as MfuMeter::measure's.
  double measure(const Package &pkg, int64_t t, int64_t first, int64_t micro,
                 const StepTotals &step, double ms, std::string &warning);
  /// MLC_PROFILE: `train` counts the inputs it draws and the time it takes.
  void countDraws(BatchFn &train);
  /// Several ranks: the time blocked waiting for gradient sums per step.
  void printCommunication(int ranks, int buckets) const;
  /// MLC_PROFILE: GEMM and kernel time per step, and the 12 slowest
  /// kernels (every kernel with MLC_PROFILE=all), then the training inputs
  /// drawn.
  void printProfile(const BackendProfile &prof, int64_t steps) const;

private:
  std::unique_ptr<MfuMeter> mfu_;
  int64_t tokenInput_ = 0; // input_ids' elements (-1: dynamic)
  double waitedBefore_ = 0, waitedTotal_ = 0, stepSecondsTotal_ = 0;
  int64_t timedSteps_ = 0;
  int64_t tensorsDrawn_ = 0; // MLC_PROFILE: training inputs drawn, and the time drawing them
  double drawSeconds_ = 0;
};

/// The console (rank 0's stderr): the progress line, one updating line on a
/// terminal (--progress live) or a line per --log-every steps otherwise,
/// and the lines around it.
class Console {
public:
  explicit Console(const TrainOptions &o);

  /// A live progress line left open (no newline yet) is closed before
  /// anything else is printed, and when the run ends, by an error too.
  struct OpenLine {
    bool open = false;
    void close() {
      if (open)
        std::fputc('\n', stderr);
      open = false;
    }
    ~OpenLine() { close(); }
  };

  /// The global batch and how it is split, where that is not plain.
  void announceBatch(const TrainOptions &o, const TrainOptions &given, const BatchLayout &layout,
                     int ranks) const;
  /// The clock of the ETA starts.
  void startClock() { runStart_ = std::chrono::steady_clock::now(); }
  /// The step's progress line.
  void printProgress(const TrainOptions &o, int64_t t, int64_t first, const StepTotals &step,
                     double norm, double lr, double ms, double mfu);

  bool live = false;
  /// Printed before a line that replaces the live line ("" otherwise).
  const char *clear = "";
  OpenLine line;

private:
  std::chrono::steady_clock::time_point runStart_;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_TRAINERPARTS_H
