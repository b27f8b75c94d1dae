//===- Trainer.h - the training loop ---------------------------*- C++ -*-===//
//
// Reads top to bottom: initialize or load weights, then per step: bind a
// batch, run @train_step (loss and gradients), @grad_norm, stop before a
// non-finite update, run @optimizer (AdamW with the clipping scale folded
// in), log; save at the end. Every function is compiled into the package;
// the loop talks to the device only through the Backend interface.
//
// Defined by responsibility: train in Trainer.cpp, the parameters and
// runForward in Parameters.cpp, the schedule and AdamW's scalars in
// Update.cpp (the loop's other parts: TrainerParts.h).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_TRAINER_H
#define MLC_RUNTIME_TRAIN_TRAINER_H

#include "runtime/backend/Backend.h"
#include "runtime/train/Options.h"

#include <vector>

namespace mlc::rt {

/// Fills the flat parameters from the package's init spec (seeded, the same
/// for a given seed and parameter name whatever the layout).
void initializeParameters(Backend &backend, uint64_t seed);
/// Loads weights by name; every missing, unexpected or mis-shaped name is
/// listed in one error.
void loadParameters(Backend &backend, const std::string &path);
/// Writes the parameters as whole HF tensors (a safetensors file): gathered
/// from the tensor-parallel group to its first rank, which writes, tensor
/// after tensor (collective: WholeTensors.h).
void saveParameters(Backend &backend, const std::string &path);

/// Learning rate at 1-based step `step`.
double learningRate(const TrainOptions &o, int64_t step);

/// The compiled optimizer's scalars for 1-based step t at learning rate lr
/// with the clipping scale folded in (contract/OptimizerScalars.h).
std::vector<double> adamwScalars(const TrainOptions &o, double lr, int64_t t, double scale);

/// Trains; returns the per-step losses.
std::vector<double> train(Backend &backend, const TrainOptions &options);

/// What `run` (mlc run, mlc-runtime run) does with a package: load or
/// initialize the weights, bind every input (NAME=FILE.npy; a missing input
/// is an error that names its shape), run @evaluate (the forward pass
/// without dropout) and write each output as OUTPUT_DIR/NAME.npy.
struct RunOptions {
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir;
};
void runForward(Backend &backend, const TrainOptions &weights, const RunOptions &run);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_TRAINER_H
