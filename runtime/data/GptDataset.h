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
