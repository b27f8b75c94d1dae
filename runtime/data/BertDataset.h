//===- BertDataset.h - masked-language-model samples -----------*- C++ -*-===//
//
// BERT pretraining samples from an indexed dataset tokenized with a
// WordPiece vocabulary: one document segment per sample,
// [CLS] tokens... [SEP], truncated to seq-len. Masking follows BERT: 15% of the
// non-special positions (at least one) are predicted; of those, 80% become
// [MASK], 10% a random token and 10% stay. Labels are -100 elsewhere. Every
// sample is a pure function of (seed, index).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BERTDATASET_H
#define MLC_RUNTIME_BERTDATASET_H

#include "runtime/data/IndexedDataset.h"

#include <map>
#include <memory>

namespace mlc::rt {

struct BertSpecialTokens {
  int64_t cls = -1, sep = -1, mask = -1, pad = -1, vocabSize = 0;
  /// Reads the ids of [CLS], [SEP], [MASK] and [PAD] from a vocab.txt.
  static BertSpecialTokens fromVocab(const std::string &vocabFile);
};

struct BertSample {
  std::vector<int64_t> inputIds, tokenTypeIds, attentionMask, labels;
  int64_t length = 0; // tokens before padding
};

class BertSamples {
public:
  BertSamples(const std::string &prefix, const std::string &split, int part, int64_t seqLen,
              const BertSpecialTokens &special, uint64_t seed, double maskProb = 0.15);
  /// Sample `index`, padded to seq-len with [PAD] (attention_mask 0 there).
  BertSample sample(int64_t index);

private:
  std::unique_ptr<IndexedDataset> data_;
  int64_t begin_, end_, seqLen_;
  BertSpecialTokens special_;
  uint64_t seed_;
  double maskProb_;
  std::map<int64_t, std::vector<int64_t>> orders_; // document order per epoch
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_BERTDATASET_H
