//===- Trainer.h - the training loop ---------------------------*- C++ -*-===//
//
// Reads top to bottom: initialize or load weights, then per step: bind a
// batch, run the train step, clip, AdamW, log; save at the end.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAINER_H
#define MLC_RUNTIME_TRAINER_H

#include "runtime/CpuBackend.h"

#include <functional>

namespace mlc::rt {

struct TrainOptions {
  int64_t steps = 100;
  double lr = 3e-4, minLr = 0.0;
  int64_t warmup = 0;
  std::string schedule = "cosine"; // constant | cosine
  double weightDecay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double clipGrad = 1.0; // global L2 norm; 0 disables
  uint64_t seed = 1234;
  std::string init;       // safetensors with HF names
  std::string save;       // safetensors written at the end
  std::string batchesDir; // NAME.npy per input, leading dim = step
  std::string data;       // indexed dataset PREFIX, a blend "W1 P1 W2 P2", or a token file
  std::string split = "969,30,1"; // Megatron's train/validation/test split
  std::string vocabFile;          // BERT data: the WordPiece vocab.txt (special ids)
  int64_t evalInterval = 0, evalIters = 10; // validation loss every N steps
  std::string logJson;
  int64_t logEvery = 1;
  bool quiet = false;
};

/// Fills the flat parameters from the package's init spec (seeded, the same
/// for a given seed and parameter name whatever the layout).
void initializeParameters(CpuBackend &backend, uint64_t seed);
/// Loads weights by name; every missing, unexpected or mis-shaped name is
/// listed in one error.
void loadParameters(CpuBackend &backend, const std::string &path);
void saveParameters(CpuBackend &backend, const std::string &path);

/// Learning rate at 1-based step `step`.
double learningRate(const TrainOptions &o, int64_t step);

/// One AdamW step over flat parameter, gradient and moment buffers of
/// `elementSize`-byte floats laid out as `params` says (torch.optim.AdamW's
/// math, weight decay on `decay` parameters, `gradScale` folded in from
/// clipping); t is 1-based.
void adamwUpdate(const std::vector<ParamInfo> &params, int64_t elementSize, char *p,
                 const char *g, char *m, char *v, const TrainOptions &o, double lr, int64_t t,
                 double gradScale);

/// L2 norm of the whole flat gradient.
double gradientNorm(CpuBackend &backend);

/// Trains; returns the per-step losses.
std::vector<double> train(CpuBackend &backend, const TrainOptions &options);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAINER_H
