//===- DataTest.cpp - datasets, BERT masking, length balancing -------------===//

#include "runtime/data/Balance.h"
#include "runtime/data/BertDataset.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Tokenizer.h"

#include <fstream>
#include <gtest/gtest.h>
#include <numeric>
#include <random>
#include <unistd.h>

using namespace mlc::rt;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/mlc-datatest-XXXXXX";
  return mkdtemp(tmpl);
}

/// A WordPiece-like vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK] then words.
std::string writeVocab(const std::string &dir, int words) {
  std::string path = dir + "/vocab.txt";
  std::ofstream out(path);
  out << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 0; i < words; ++i)
    out << "w" << i << "\n";
  return path;
}

} // namespace

TEST(IndexedDataset, WriteReadRoundTrip) {
  std::string dir = tempDir();
  {
    IndexedDatasetWriter w(dir + "/d", 70000); // int32 tokens
    w.addDocument({1, 2, 3});
    w.addDocument({});
    w.addDocument({65535, 69999});
    w.finish();
  }
  IndexedDataset d(dir + "/d");
  // The empty document is a boundary without a sequence, as Megatron writes it.
  ASSERT_EQ(d.documents(), 3);
  EXPECT_EQ(d.documentStart(1), 1);
  EXPECT_EQ(d.documentStart(2), 1);
  EXPECT_EQ(d.documentStart(3), 2);
  std::vector<int64_t> t;
  d.read(1, t);
  EXPECT_EQ(t, (std::vector<int64_t>{65535, 69999}));
  d.read(0, t, 1, 1);
  EXPECT_EQ(t, (std::vector<int64_t>{2}));
}

TEST(BertSamples, MaskingFollowsBert) {
  std::string dir = tempDir();
  std::string vocab = writeVocab(dir, 1000);
  {
    IndexedDatasetWriter w(dir + "/d", 1005);
    std::mt19937 rng(3);
    for (int doc = 0; doc < 400; ++doc) {
      std::vector<int32_t> tokens(10 + rng() % 200);
      for (int32_t &x : tokens)
        x = 5 + int32_t(rng() % 1000);
      tokens.push_back(3); // [SEP] as end of document
      w.addDocument(tokens);
    }
    w.finish();
  }
  BertSpecialTokens special = BertSpecialTokens::fromVocab(vocab);
  EXPECT_EQ(special.cls, 2);
  EXPECT_EQ(special.mask, 4);
  BertSamples samples(dir + "/d", "1,0,0", 0, 128, special, 7);
  int64_t candidates = 0, predicted = 0, masked = 0, kept = 0, replaced = 0;
  for (int64_t i = 0; i < 400; ++i) {
    BertSample s = samples.sample(i);
    ASSERT_EQ(s.inputIds.size(), 128u);
    EXPECT_EQ(s.inputIds[0], special.cls);
    EXPECT_EQ(s.labels[0], -100);                 // [CLS] never predicted
    EXPECT_EQ(s.labels[s.length - 1], -100);      // [SEP] never predicted
    EXPECT_EQ(s.attentionMask[s.length - 1], 1);
    if (s.length < 128) {
      EXPECT_EQ(s.attentionMask[s.length], 0);    // padding masked out
      EXPECT_EQ(s.inputIds[s.length], special.pad);
      EXPECT_EQ(s.labels[s.length], -100);
    }
    candidates += s.length - 2;
    for (int64_t p = 0; p < 128; ++p) {
      if (s.labels[p] == -100)
        continue;
      ++predicted;
      if (s.inputIds[p] == special.mask)
        ++masked;
      else if (s.inputIds[p] == s.labels[p])
        ++kept;
      else
        ++replaced;
    }
    // Deterministic in (seed, index).
    EXPECT_EQ(samples.sample(i).inputIds, s.inputIds);
  }
  double rate = double(predicted) / candidates;
  EXPECT_NEAR(rate, 0.15, 0.01);
  EXPECT_NEAR(double(masked) / predicted, 0.8, 0.03);
  EXPECT_NEAR(double(replaced + kept) / predicted, 0.2, 0.03);
  EXPECT_GT(kept, 0);
  EXPECT_GT(replaced, 0);
}

TEST(Split, FollowsMegatron) {
  // Megatron: cumulative rounded boundaries, the last adjusted to the size.
  auto r = splitRanges("969,30,1", 1000);
  EXPECT_EQ(r[0], (std::pair<int64_t, int64_t>{0, 969}));
  EXPECT_EQ(r[1], (std::pair<int64_t, int64_t>{969, 999}));
  EXPECT_EQ(r[2], (std::pair<int64_t, int64_t>{999, 1000}));
  auto q = splitRanges("90,10", 7);
  EXPECT_EQ(q[0].second, 6);
  EXPECT_EQ(q[1], (std::pair<int64_t, int64_t>{6, 7}));
}

// Megatron's documents at the edges: an EOD first (a one-token document),
// two in a row, one last (ends nothing more), none at all.
TEST(PackedDocuments, EdgesAsMegatron) {
  const int64_t E = 0, S = 5;
  const std::vector<int64_t> tokens = {E, 1, E, E, 2,  // [0] [1 E] [E] [2]
                                       3, 4, 5, 6, E,  // one document ending in EOD
                                       7, 8, 9, 1, 2}; // no EOD
  DocumentBoundaries d = findDocuments(tokens.data(), 3, S, E);
  std::vector<int32_t> cu = {0, 1, 3, 4, 5, 10, 15};
  cu.resize(3 * S + 1, 15);
  EXPECT_EQ(d.cuSeqlens, cu);
  EXPECT_EQ(d.positionIds,
            (std::vector<int64_t>{0, 0, 1, 0, 0, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  std::vector<int64_t> labels = tokens;
  maskLossAfterEod(tokens.data(), labels.data(), 3, S, E);
  EXPECT_EQ(labels, (std::vector<int64_t>{E, -100, E, -100, -100, 3, 4, 5, 6, E, 7, 8, 9, 1, 2}));
  // Every token an EOD: B x S one-token documents fill cu_seqlens exactly.
  const std::vector<int64_t> all(2 * S, E);
  d = findDocuments(all.data(), 2, S, E);
  std::vector<int32_t> each(2 * S + 1);
  std::iota(each.begin(), each.end(), 0);
  EXPECT_EQ(d.cuSeqlens, each);
}

TEST(Balance, PresortBeatsRandomOnHeavyTails) {
  std::vector<int64_t> lengths;
  std::mt19937 rng(5);
  std::lognormal_distribution<double> dist(4.0, 1.0);
  for (int i = 0; i < 20000; ++i)
    lengths.push_back(1 + int64_t(dist(rng)));
  auto presort = balanceStats(lengths, 512, 8, 4096, BalancePolicy::Presort, 1);
  auto zigzag = balanceStats(lengths, 512, 8, 4096, BalancePolicy::ZigZag, 1);
  auto random = balanceStats(lengths, 512, 8, 4096, BalancePolicy::Random, 1);
  EXPECT_LT(presort.imbalance, 1.02);
  EXPECT_LE(presort.imbalance, zigzag.imbalance);
  EXPECT_LT(zigzag.imbalance, random.imbalance);
  EXPECT_EQ(presort.tokens, random.tokens); // same samples, dealt differently
}

TEST(Gpt2PreTokenize, MatchesTheRegex) {
  EXPECT_EQ(gpt2PreTokenize("Hello world's  end!\n\nok"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end", "!", "\n", "\n",
                                      "ok"}));
  EXPECT_EQ(gpt2PreTokenize("a 123abc"), (std::vector<std::string>{"a", " 123", "abc"}));
}
