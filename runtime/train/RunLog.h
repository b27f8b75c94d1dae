//===- RunLog.h - where a training run's numbers go -------------*- C++ -*-===//
//
// Every row a run logs (a step, an evaluation, the test) goes to each of its
// sinks: the JSON log (--log-json, one object per line) and TensorBoard's
// event files (--tensorboard-dir, scalars named as the JSON keys). Each sink
// is held by its run alone (an flock for the run's lifetime: a second run on
// the same log or directory is refused, naming the first's process), and
// every write is checked: a full disk or a file-size limit is one Error that
// names the file, never a log that silently stops.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_RUNLOG_H
#define MLC_RUNTIME_TRAIN_RUNLOG_H

#include "runtime/train/Options.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlc::rt {

/// A number as the JSON log writes it: 10 significant digits, or null when
/// it is not finite (JSON has no NaN or infinity).
std::string jsonNumber(double x);

/// One row of the log: its step and named numbers, in the order written.
struct LogRow {
  explicit LogRow(int64_t step) : step(step) {}
  LogRow &add(const char *key, double value) {
    values.push_back({key, value});
    return *this;
  }
  int64_t step;
  std::vector<std::pair<std::string, double>> values;
  bool skipped = false; ///< a step whose update was skipped (non-finite loss or norm)
};

/// `{"step": 3, "loss": 2.5, ...}` and a newline: one line of the JSON log.
std::string jsonLine(const LogRow &row);

class RunLog {
public:
  /// One destination of the rows.
  class Sink {
  public:
    virtual ~Sink() = default;
    virtual void write(const LogRow &row) = 0;
    /// Closes the file; an Error if its last writes did not reach it.
    virtual void close() = 0;
  };

  /// Opens the sinks `o` names (--log-json, --tensorboard-dir; none when both
  /// are empty). A run that resumes (--resume) at `firstStep` continues its
  /// JSON log from there: rows of later steps (written after the checkpoint
  /// by the run that stopped) are cut, so no step is logged twice.
  RunLog(const TrainOptions &o, int64_t firstStep);
  ~RunLog();
  void write(const LogRow &row);
  /// Closes every sink, checking each (at the end of a run that succeeded).
  void close();

private:
  std::vector<std::unique_ptr<Sink>> sinks_;
};

/// Checks a --tensorboard-dir before the run starts: a directory or a path
/// that can become one, in a build that has the event writer (protobuf).
void checkTensorBoardDir(const std::string &dir);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_RUNLOG_H
