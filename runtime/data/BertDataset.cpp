//===- BertDataset.cpp - masked-language-model samples ---------------------===//

#include "runtime/data/BertDataset.h"
#include "support/Error.h"
#include "runtime/data/GptDataset.h"
#include "runtime/core/Hash.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

namespace mlc::rt {

BertSpecialTokens BertSpecialTokens::fromVocab(const std::string &vocabFile) {
  std::ifstream in(vocabFile);
  if (!in)
    fail(vocabFile + ": cannot open (BERT data needs the WordPiece vocab.txt)");
  BertSpecialTokens t;
  std::string line;
  int64_t id = 0;
  for (; std::getline(in, line); ++id) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line == "[CLS]")
      t.cls = id;
    else if (line == "[SEP]")
      t.sep = id;
    else if (line == "[MASK]")
      t.mask = id;
    else if (line == "[PAD]")
      t.pad = id;
  }
  t.vocabSize = id;
  if (t.cls < 0 || t.sep < 0 || t.mask < 0 || t.pad < 0)
    fail(vocabFile + ": needs [CLS], [SEP], [MASK] and [PAD] entries");
  return t;
}

BertSamples::BertSamples(const std::string &prefix, const std::string &split, int part,
                         int64_t seqLen, const BertSpecialTokens &special, uint64_t seed,
                         double maskProb)
    : data_(std::make_unique<IndexedDataset>(prefix)), seqLen_(seqLen), special_(special),
      seed_(seed), maskProb_(maskProb) {
  if (seqLen < 3)
    fail("BERT samples need --seq-len >= 3");
  auto range = splitRanges(split, data_->documents())[part];
  begin_ = range.first;
  end_ = range.second;
  if (end_ <= begin_)
    fail(prefix + ": the split '" + split + "' leaves no documents for this part");
}

BertSample BertSamples::sample(int64_t index) {
  const int64_t docs = end_ - begin_, epoch = index / docs;
  auto &order = orders_[epoch];
  if (order.empty()) {
    order.resize(docs);
    std::iota(order.begin(), order.end(), begin_);
    std::mt19937_64 rng(std::stoull(
        contentHash(std::to_string(seed_) + "/bert-docs/" + std::to_string(epoch)), nullptr,
        16));
    std::shuffle(order.begin(), order.end(), rng);
  }
  int64_t doc = order[index % docs];
  std::vector<int64_t> tokens, part;
  for (int64_t q = data_->documentStart(doc); q < data_->documentStart(doc + 1); ++q) {
    data_->read(q, part);
    tokens.insert(tokens.end(), part.begin(), part.end());
  }
  if (!tokens.empty() && tokens.back() == special_.sep)
    tokens.pop_back(); // preprocessing's end-of-document mark
  if (int64_t(tokens.size()) > seqLen_ - 2)
    tokens.resize(seqLen_ - 2);
  BertSample s;
  s.inputIds.push_back(special_.cls);
  s.inputIds.insert(s.inputIds.end(), tokens.begin(), tokens.end());
  s.inputIds.push_back(special_.sep);
  s.length = s.inputIds.size();
  s.labels.assign(seqLen_, -100);
  // Masking: positions 1 .. length-2 (never [CLS] or [SEP]).
  std::mt19937_64 rng(std::stoull(
      contentHash(std::to_string(seed_) + "/bert-mask/" + std::to_string(index)), nullptr, 16));
  std::vector<int64_t> positions(s.length - 2);
  std::iota(positions.begin(), positions.end(), 1);
  std::shuffle(positions.begin(), positions.end(), rng);
  int64_t predict = std::max<int64_t>(1, int64_t(std::lround(maskProb_ * positions.size())));
  predict = std::min<int64_t>(predict, positions.size());
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int64_t> randomToken(0, special_.vocabSize - 1);
  for (int64_t k = 0; k < predict; ++k) {
    int64_t p = positions[k];
    s.labels[p] = s.inputIds[p];
    double r = u(rng);
    if (r < 0.8)
      s.inputIds[p] = special_.mask;
    else if (r < 0.9)
      s.inputIds[p] = randomToken(rng);
  }
  s.attentionMask.assign(seqLen_, 0);
  std::fill(s.attentionMask.begin(), s.attentionMask.begin() + s.length, 1);
  s.inputIds.resize(seqLen_, special_.pad);
  s.tokenTypeIds.assign(seqLen_, 0);
  return s;
}

} // namespace mlc::rt
