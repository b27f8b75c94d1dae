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
#include "support/TensorIO.h"
#include "runtime/train/Options.h"

#include <functional>
#include <memory>

namespace mlc::rt {

class Tokenizer;

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

/// How one optimizer step's global batch is split, as Megatron-LM's
/// --global-batch-size: over the ranks, then into micro-batches of the
/// package's micro-batch, so global = ranks x micro x sequences. The global
/// batch is --global-batch, or one entry of --batches, or one micro-batch
/// per rank. `global` is 0 for a model without input_ids [batch, ...].
struct BatchLayout {
  int64_t global = 0;    // sequences per optimizer step, over all ranks
  int64_t micro = 1;     // micro-batches per rank and step
  int64_t sequences = 0; // sequences per micro-batch (the package's)
};

/// The layout of the run's steps; an error names the numbers that do not
/// divide.
BatchLayout batchLayout(const Package &pkg, const TrainOptions &o, const BatchSources &sources);

/// The sources the options name; errors name the file or flag at fault.
BatchSources openBatchSources(const Package &pkg, const TrainOptions &o);

/// The tokenizer that made --data's first dataset, from the record `mlc
/// preprocess` wrote beside it; null where there is none (no indexed
/// --data, or a dataset without a record).
std::unique_ptr<Tokenizer> datasetTokenizer(const TrainOptions &o);

/// A 64-bit seed derived from the run's seed and a name (a parameter, an
/// epoch): the same whatever the order things are drawn in.
uint64_t nameSeed(uint64_t seed, const std::string &name);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_BATCHSOURCES_H
