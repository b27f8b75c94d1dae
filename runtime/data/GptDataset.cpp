//===- GptDataset.cpp - GPT samples from indexed datasets ------------------===//

#include "runtime/data/GptDataset.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

namespace mlc::rt {

std::array<double, 3> parseSplit(const std::string &split) {
  std::array<double, 3> w{0, 0, 0};
  std::stringstream ss(split);
  std::string item;
  size_t n = 0;
  auto bad = [&] {
    fail("--split '" + split + "' needs up to three comma-separated non-negative weights "
         "(train, validation, test), not all zero, e.g. 969,30,1");
  };
  while (std::getline(ss, item, ',')) {
    char *end = nullptr;
    double x = std::strtod(item.c_str(), &end);
    if (n == 3 || item.empty() || *end || !std::isfinite(x) || x < 0)
      bad();
    w[n++] = x;
  }
  if (w[0] + w[1] + w[2] <= 0)
    bad();
  return w;
}

std::vector<std::pair<int64_t, int64_t>> splitRanges(const std::string &split,
                                                     int64_t documents) {
  std::array<double, 3> w = parseSplit(split);
  // A sum past the largest double is taken relative to the largest weight
  // (1e308,1e308 is 1,1, not all of it in training).
  if (std::isinf(w[0] + w[1] + w[2])) {
    const double largest = std::max({w[0], w[1], w[2]});
    for (double &x : w)
      x /= largest;
  }
  double total = w[0] + w[1] + w[2];
  // Megatron: cumulative rounded boundaries, the last adjusted to the size.
  std::vector<int64_t> index{0};
  for (double x : w)
    index.push_back(index.back() + int64_t(std::lround(x / total * double(documents))));
  int64_t diff = index.back() - documents;
  for (size_t i = 1; i < index.size(); ++i)
    index[i] -= diff;
  return {{index[0], index[1]}, {index[1], index[2]}, {index[2], index[3]}};
}

std::vector<std::pair<double, std::string>> parseBlend(const std::string &spec) {
  std::stringstream ss(spec);
  std::vector<std::string> words;
  std::string w;
  while (ss >> w)
    words.push_back(w);
  if (words.size() == 1)
    return {{1.0, words[0]}};
  if (words.empty() || words.size() % 2)
    fail("--data expects PREFIX or pairs of WEIGHT PREFIX, got '" + spec + "'");
  std::vector<std::pair<double, std::string>> blend;
  for (size_t i = 0; i < words.size(); i += 2) {
    char *end;
    double weight = std::strtod(words[i].c_str(), &end);
    if (*end || !(weight > 0) || !std::isfinite(weight))
      fail("--data: '" + words[i] + "' is not a positive weight");
    blend.push_back({weight, words[i + 1]});
  }
  return blend;
}

static uint64_t seedFor(uint64_t seed, const std::string &what) {
  return std::stoull(contentHash(std::to_string(seed) + "/" + what), nullptr, 16);
}

GptSamples::GptSamples(const std::vector<std::pair<double, std::string>> &blend,
                       const std::string &split, int part, int64_t seqLen, uint64_t seed)
    : seqLen_(seqLen), seed_(seed) {
  double largest = 0, total = 0;
  for (auto &[w, _] : blend)
    largest = std::max(largest, w), total += w;
  // A sum past the largest double is taken relative to the largest weight
  // (1e308 A 1e308 B is an even blend, not two weights of 0).
  const double scale = std::isinf(total) ? largest : 1;
  if (scale != 1) {
    total = 0;
    for (auto &[w, _] : blend)
      total += w / scale;
  }
  for (auto &[w, prefix] : blend) {
    Source s;
    s.data = std::make_unique<IndexedDataset>(prefix);
    auto range = splitRanges(split, s.data->documents())[part];
    // Documents of the split -> the sequences they hold (one per document when
    // mlc wrote the dataset; Megatron's sentence-split datasets hold more).
    s.begin = s.data->documentStart(range.first);
    s.end = s.data->documentStart(range.second);
    s.weight = w / scale / total;
    s.position = int(sources_.size());
    for (int64_t d = s.begin; d < s.end; ++d)
      s.tokens += s.data->length(d);
    if (s.tokens < seqLen)
      fail(prefix + ": the " + std::string(part == 0 ? "training" : part == 1 ? "validation" : "test") +
           " split holds " + std::to_string(s.tokens) + " tokens, fewer than one sample of " +
           std::to_string(seqLen));
    sources_.push_back(std::move(s));
  }
  blendCounts_.assign(sources_.size(), 0);
}

int64_t GptSamples::tokens() const {
  int64_t n = 0;
  for (const Source &s : sources_)
    n += s.tokens;
  return n;
}

void GptSamples::sourceSample(Source &s, int64_t index, int64_t *out) {
  const int64_t perEpoch = s.tokens / seqLen_;
  const int64_t epoch = index / perEpoch, k = index % perEpoch;
  // The shuffles are seeded by the source's place in the blend and the
  // epoch, not by its path: the same data gives the same batches wherever
  // it is stored.
  const std::string tag = "source" + std::to_string(s.position) + "/" + std::to_string(epoch);
  auto &order = s.docOrder[epoch];
  auto &starts = s.starts[epoch];
  auto &samples = s.sampleOrder[epoch];
  if (order.empty()) {
    order.resize(s.end - s.begin);
    std::iota(order.begin(), order.end(), s.begin);
    std::mt19937_64 rng(seedFor(seed_, "docs/" + tag));
    std::shuffle(order.begin(), order.end(), rng);
    starts.resize(order.size() + 1, 0);
    for (size_t i = 0; i < order.size(); ++i)
      starts[i + 1] = starts[i] + s.data->length(order[i]);
    samples.resize(perEpoch);
    std::iota(samples.begin(), samples.end(), 0);
    std::mt19937_64 rng2(seedFor(seed_, "samples/" + tag));
    std::shuffle(samples.begin(), samples.end(), rng2);
  }
  // Tokens [pos, pos + seqLen) of the epoch's concatenation.
  int64_t pos = samples[k] * seqLen_, filled = 0;
  size_t doc = std::upper_bound(starts.begin(), starts.end(), pos) - starts.begin() - 1;
  std::vector<int64_t> buf;
  while (filled < seqLen_) {
    int64_t offset = pos + filled - starts[doc];
    s.data->read(order[doc], buf, offset, seqLen_ - filled);
    std::copy(buf.begin(), buf.end(), out + filled);
    filled += buf.size();
    ++doc;
  }
}

void GptSamples::sample(int64_t index, int64_t *out) {
  // Blend: grow the index of (source, its sample) up to `index`, each time
  // taking the source furthest behind its weight.
  while (int64_t(blendIndex_.size()) <= index) {
    int64_t n = blendIndex_.size() + 1;
    int best = 0;
    double bestError = -1e300;
    for (size_t d = 0; d < sources_.size(); ++d) {
      double error = sources_[d].weight * double(n) - double(blendCounts_[d]);
      if (error > bestError) {
        bestError = error;
        best = d;
      }
    }
    blendIndex_.push_back({best, blendCounts_[best]++});
  }
  auto [source, local] = blendIndex_[index];
  sourceSample(sources_[source], local, out);
}

DocumentBoundaries findDocuments(const int64_t *tokens, int64_t B, int64_t S, int64_t eod) {
  DocumentBoundaries d;
  d.cuSeqlens.reserve(B * S + 1);
  d.positionIds.resize(B * S);
  d.cuSeqlens.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = 0;
    for (int64_t i = 0; i < S; ++i) {
      d.positionIds[b * S + i] = i - start;
      // An EOD in the last position ends the sample's document anyway.
      if (tokens[b * S + i] == eod && i + 1 < S) {
        start = i + 1;
        d.cuSeqlens.push_back(int32_t(b * S + start));
      }
    }
    d.cuSeqlens.push_back(int32_t((b + 1) * S));
  }
  d.cuSeqlens.resize(B * S + 1, int32_t(B * S));
  return d;
}

void maskLossAfterEod(const int64_t *tokens, int64_t *labels, int64_t B, int64_t S,
                      int64_t eod) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i + 1 < S; ++i)
      if (tokens[b * S + i] == eod)
        labels[b * S + i + 1] = -100;
}

} // namespace mlc::rt
