//===- Checkpoint.h - checkpoints and exact resume -------------*- C++ -*-===//
//
// A checkpoint is one directory per step, SAVE_DIR/step-00000100/:
//
//   model.safetensors      the parameters under the model's names (loads
//                          into the matching HuggingFace model)
//   optimizer.safetensors  the AdamW moments: exp_avg.NAME, exp_avg_sq.NAME
//   state.json             the step, and what the run's numbers depend on:
//                          the model and package (its content hash), the
//                          seed, the optimizer, clipping and schedule
//                          settings, the data and its split, the loss's
//                          labels (--eod-mask-loss, --eod-token) and
//                          weighting, the layout (data-parallel ranks,
//                          tensor-parallel size) and the global batch
//   hf/                    with --save-dir-hf: the parameters as a Hugging
//                          Face model directory (ModelDirectory.h) that
//                          from_pretrained loads; not read on resume
//   checkpoint.json        the format and version, the run's id and the
//                          content hash of each file above (hf/ aside);
//                          written last
//
// Every tensor is whole, under its HF name, whatever the layout that wrote
// it: the parameters and moments are gathered to the writer (the group's
// first rank of the first data-parallel replica) a tensor at a time, the
// tensor-parallel group's slices (and under the distributed optimizer the
// data-parallel group's shards first), and streamed into the files
// (WholeTensors.h): the writer holds one whole tensor at once, the other
// ranks nothing gathered (hf/ too). On resume each rank reads its slices and shards
// of each tensor from the files (never a whole file), at any
// tensor-parallel size and rank count; a checkpoint of another layout is a
// changed setting (tensor-parallel, ranks, package), and the run prints
// one line naming both layouts.
//
// The directory is written under a temporary name, every file flushed to
// disk, and renamed into place: a crash mid-write leaves the previous
// checkpoints as they were. Batches depend only on (seed, step) and dropout
// masks on the step, so restoring parameters, moments and the step resumes
// a run exactly: the same losses, bit for bit, as a run that never stopped.
//
// A resumed run is the same run (it keeps the run id); --keep rotates only
// the checkpoints of this run, never the newest one it wrote, and a run
// refuses to start where it would overwrite another run's checkpoint.
// Every field of state.json is checked (type and range) when it is read; a
// checkpoint at or past --steps leaves nothing to train, which is an error.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_CHECKPOINT_H
#define MLC_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/backend/Backend.h"
#include "runtime/train/Options.h"
#include "support/Error.h"

#include <string>

namespace mlc::rt {

constexpr int kCheckpointVersion = 1;

/// The writer's refusal of a checkpoint before any tensor moved (--save-dir
/// holds another run's checkpoint of the step, or cannot be written): the
/// other ranks stopped at the agreement, in no gather, so the run may go on.
class CheckpointRefused : public Error {
public:
  using Error::Error;
};

/// Writes the checkpoint of step `step` into `saveDir` and keeps the newest
/// `keep` checkpoints there (0: all). Collective: every rank of the run
/// calls it. The tensors are gathered to the writer (WholeTensors.h: the
/// first replica's tensor-parallel rank 0) one at a time and streamed into
/// the files. Returns its directory on the first data-parallel replica's
/// ranks, "" elsewhere. Throws CheckpointRefused on the writer when it
/// refuses up front; any other Error (a gather that failed or timed out, a
/// write) is not one.
std::string saveCheckpoint(Backend &backend, const TrainOptions &o, int64_t step);

/// "latest" (the newest complete checkpoint in --save-dir) or a directory.
std::string resolveCheckpoint(const std::string &spec, const std::string &saveDir);

/// What a resumed run continues from.
struct Resumed {
  int64_t step = 0;
  std::string runId;
};

/// Restores parameters and moments from a checkpoint. A checkpoint of
/// another model, package or run settings is refused with the differences
/// listed, unless --resume-with-changes names each of them (then they are
/// printed and the run continues with its own settings).
Resumed loadCheckpoint(Backend &backend, const TrainOptions &o, const std::string &dir);

/// A new run's id.
std::string newRunId();

/// Refuses, before training, a --save-dir where this run (steps `first` ..
/// --steps) would overwrite a checkpoint of another run.
void checkSaveDir(const TrainOptions &o, int64_t first);

/// The package's identity: a hash of its manifest's fields and file hashes
/// (plan, kernels, graph), whatever directory it is in.
std::string packageHash(const Package &pkg);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_CHECKPOINT_H
