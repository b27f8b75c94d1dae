//===- Checkpoint.h - checkpoints and exact resume -------------*- C++ -*-===//
//
// A checkpoint is one directory per step, SAVE_DIR/step-00000100/:
//
//   model.safetensors      the parameters under the model's names (loads
//                          into the matching HuggingFace model)
//   optimizer.safetensors  the AdamW moments: exp_avg.NAME, exp_avg_sq.NAME
//   state.json             the step, and what the run's numbers depend on:
//                          the model and package, the seed, the optimizer
//                          and schedule settings, the data and its split
//   checkpoint.json        the format and version and the content hash of
//                          each file above; written last
//
// The directory is written under a temporary name, every file flushed to
// disk, and renamed into place: a crash mid-write leaves the previous
// checkpoints as they were. Batches depend only on (seed, step) and dropout
// masks on the step, so restoring parameters, moments and the step resumes
// a run exactly: the same losses, bit for bit, as a run that never stopped.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_CHECKPOINT_H
#define MLC_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/backend/Backend.h"
#include "runtime/train/Options.h"

#include <string>

namespace mlc::rt {

constexpr int kCheckpointVersion = 1;

/// Writes the checkpoint of step `step` into `saveDir` and keeps the newest
/// `keep` checkpoints there (0: all). Returns its directory.
std::string saveCheckpoint(Backend &backend, const TrainOptions &o, int64_t step);

/// "latest" (the newest complete checkpoint in --save-dir) or a directory.
std::string resolveCheckpoint(const std::string &spec, const std::string &saveDir);

/// Restores parameters and moments from a checkpoint and returns its step.
/// A checkpoint of another model, package format or run settings is refused
/// with a message that names the difference.
int64_t loadCheckpoint(Backend &backend, const TrainOptions &o, const std::string &dir);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_CHECKPOINT_H
