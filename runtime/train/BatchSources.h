//===- BatchSources.h - where a training step's batches come from -*- C++ -*-===//
//
// A batch source gives the tensor of each model input for a 0-based block,
// one micro-batch of the package: from a directory of NAME.npy arrays
// (--batches), GPT samples of indexed datasets or blends (--data PREFIX),
// masked-LM BERT samples (padded or packed for unpadded BERT), or a plain
// token file. Block k is rank k % R's; step t (0-based) of a run with R
// ranks and M micro-batches per rank trains blocks t R M .. (t + 1) R M - 1,
// so a step's global batch holds the same sequences however it is split.
// --data sources take samples k B .. (k + 1) B - 1 for block k. A block
// depends only on (seed, k), so a resumed run sees the batches it would have
// seen.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_BATCHSOURCES_H
#define MLC_RUNTIME_TRAIN_BATCHSOURCES_H

#include "runtime/core/Package.h"
#include "runtime/core/TensorIO.h"
#include "runtime/train/Options.h"

#include <functional>
#include <memory>

namespace mlc::rt {

using BatchFn = std::function<HostTensor(const InputInfo &input, int64_t t)>;

struct BatchSources {
  BatchFn train;
  BatchFn validation; // set when --eval-interval asks for it
  BatchFn test;       // the test split, when it has documents (evaluated at the end)
  /// Unpadded BERT over several ranks: max / mean tokens over the ranks of
  /// the last training batch dealt (every rank deals the same window, so
  /// each knows all shares); 0 when not measured.
  std::shared_ptr<double> imbalance = std::make_shared<double>(0.0);
  /// --batches: the micro-batches in one entry (a step's global batch over
  /// all ranks); 0 for the other sources.
  int64_t batchesPerStep = 0;
};

/// The sources the options name; errors name the file or flag at fault.
BatchSources openBatchSources(const Package &pkg, const TrainOptions &o);

/// A 64-bit seed derived from the run's seed and a name (a parameter, an
/// epoch): the same whatever the order things are drawn in.
uint64_t nameSeed(uint64_t seed, const std::string &name);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_BATCHSOURCES_H
