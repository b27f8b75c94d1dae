//===- GptDataset.h - GPT samples from indexed datasets --------*- C++ -*-===//
//
// Megatron's GPT dataset, reduced to what a training step needs: the
// documents of a split, visited in a seeded random order each epoch,
// concatenated (with the EOD tokens that preprocessing appended) and cut
// into samples of seq-len tokens; the samples of an epoch are shuffled too.
// Several datasets blend by weight, sample by sample, the way Megatron's
// blended dataset picks them (the dataset furthest behind its share goes
// next). Every sample is a pure function of (seed, index), so a resumed run
// sees exactly the batches it would have seen.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_GPTDATASET_H
#define MLC_RUNTIME_GPTDATASET_H

#include "runtime/data/IndexedDataset.h"

#include <array>

#include <map>
#include <memory>

namespace mlc::rt {

/// Megatron's --split: "969,30,1" (up to three non-negative weights, missing
/// ones 0, not all zero); an Error names the flag.
std::array<double, 3> parseSplit(const std::string &split);
/// The split's document ranges [begin, end) of train, validation and test
/// for `documents` documents.
std::vector<std::pair<int64_t, int64_t>> splitRanges(const std::string &split,
                                                     int64_t documents);

/// --data "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ...".
std::vector<std::pair<double, std::string>> parseBlend(const std::string &spec);

/// The documents of a micro-batch of GPT samples, as Megatron-LM's
/// _get_ltor_masks_and_position_ids finds them: an EOD token at position i
/// of a sample ends a document there (the EOD is its last token), and the
/// next one starts at i + 1. With --reset-attention-mask tokens after i
/// do not attend to tokens <= i; with --reset-position-ids positions
/// restart at 0 at i + 1. Here the block-diagonal mask is not built: the
/// documents are offsets into the micro-batch flattened to B x S tokens.
struct DocumentBoundaries {
  /// [B * S + 1] offsets of the documents in the flattened micro-batch:
  /// 0, every sample's starts, B * S, then B * S again up to the fixed size
  /// (empty sequences), so the model's shape does not depend on the data.
  std::vector<int32_t> cuSeqlens;
  /// [B, S] each token's position within its document.
  std::vector<int64_t> positionIds;
};
/// The documents of `tokens` [B, S] split at `eod`.
DocumentBoundaries findDocuments(const int64_t *tokens, int64_t B, int64_t S, int64_t eod);
/// Megatron's --eod-mask-loss for mlc's labels [B, S] (the loss compares
/// the prediction at i with labels[i + 1]): labels[i + 1] = -100, ignored,
/// where tokens[i] is an EOD, within each sample.
void maskLossAfterEod(const int64_t *tokens, int64_t *labels, int64_t B, int64_t S, int64_t eod);

class GptSamples {
public:
  /// `part` is 0 (train), 1 (validation) or 2 (test) of `split`.
  GptSamples(const std::vector<std::pair<double, std::string>> &blend,
             const std::string &split, int part, int64_t seqLen, uint64_t seed);
  /// Writes sample `index` (seq-len tokens) into `out`.
  void sample(int64_t index, int64_t *out);
  int64_t tokens() const;

private:
  struct Source {
    std::unique_ptr<IndexedDataset> data;
    int64_t begin, end; // document range of the split
    double weight;
    int64_t tokens = 0;
    int position = 0; // in the blend: names its shuffles, so they don't depend on the path
    std::map<int64_t, std::vector<int64_t>> docOrder, starts, sampleOrder; // per epoch
  };
  void sourceSample(Source &s, int64_t index, int64_t *out);
  std::vector<Source> sources_;
  std::vector<int64_t> blendCounts_; // samples taken from each source so far
  std::vector<std::pair<int, int64_t>> blendIndex_; // index -> (source, its sample)
  int64_t seqLen_;
  uint64_t seed_;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_GPTDATASET_H
