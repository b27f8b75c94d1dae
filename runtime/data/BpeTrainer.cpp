//===- BpeTrainer.cpp - learning a byte-level BPE vocabulary ---------------===//
//
// Counts GPT-2 pre-tokenized words, starts from the 256 byte symbols and
// repeatedly merges the most frequent adjacent pair (ties: the smaller pair
// of strings), updating only the words that contain it. A max-heap with lazy
// invalidation finds the next pair.
//
//===----------------------------------------------------------------------===//

#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"
#include "runtime/data/Tokenizer.h"

#include <map>
#include <queue>
#include <set>
#include <sys/stat.h>
#include <unordered_map>

namespace mlc::rt {

namespace {

using Pair = std::pair<int32_t, int32_t>;

struct PairHash {
  size_t operator()(const Pair &p) const {
    return std::hash<uint64_t>()((uint64_t(uint32_t(p.first)) << 32) | uint32_t(p.second));
  }
};

} // namespace

int64_t trainBpe(const std::vector<std::string> &texts, int64_t vocabSize,
                 const std::string &outputDir) {
  if (vocabSize < 257)
    fail("--vocab-size must be at least 257 (256 bytes and <|endoftext|>)");
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string &t : texts)
    for (std::string &w : gpt2PreTokenize(t))
      ++counts[w];
  std::vector<std::string> symbols(256);
  for (int b = 0; b < 256; ++b)
    utf8Append(symbols[b], byteToUnicode()[b]);
  struct Word {
    std::vector<int32_t> ids;
    int64_t count;
  };
  std::vector<Word> words;
  words.reserve(counts.size());
  for (auto &[w, c] : counts) {
    Word word{{}, c};
    for (unsigned char b : w)
      word.ids.push_back(b);
    words.push_back(std::move(word));
  }
  std::unordered_map<Pair, int64_t, PairHash> pairCount;
  std::unordered_map<Pair, std::set<int64_t>, PairHash> where;
  for (size_t i = 0; i < words.size(); ++i)
    for (size_t k = 0; k + 1 < words[i].ids.size(); ++k) {
      Pair p{words[i].ids[k], words[i].ids[k + 1]};
      pairCount[p] += words[i].count;
      where[p].insert(i);
    }
  struct Entry {
    int64_t count;
    Pair pair;
  };
  auto worse = [&](const Entry &a, const Entry &b) {
    if (a.count != b.count)
      return a.count < b.count;
    const std::string &al = symbols[a.pair.first], &bl = symbols[b.pair.first];
    if (al != bl)
      return al > bl;
    return symbols[a.pair.second] > symbols[b.pair.second];
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  for (auto &[p, c] : pairCount)
    heap.push({c, p});
  std::vector<Pair> merges;
  while (int64_t(symbols.size()) + 1 < vocabSize && !heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    auto it = pairCount.find(top.pair);
    if (it == pairCount.end() || it->second != top.count || top.count <= 0)
      continue; // stale
    Pair best = top.pair;
    int32_t id = symbols.size();
    symbols.push_back(symbols[best.first] + symbols[best.second]);
    merges.push_back(best);
    std::set<int64_t> affected = where[best];
    std::unordered_map<Pair, int64_t, PairHash> changed;
    for (int64_t wi : affected) {
      Word &w = words[wi];
      for (size_t k = 0; k + 1 < w.ids.size(); ++k) {
        Pair p{w.ids[k], w.ids[k + 1]};
        pairCount[p] -= w.count;
        changed[p];
      }
      std::vector<int32_t> merged;
      for (size_t k = 0; k < w.ids.size(); ++k) {
        if (k + 1 < w.ids.size() && w.ids[k] == best.first && w.ids[k + 1] == best.second) {
          merged.push_back(id);
          ++k;
        } else {
          merged.push_back(w.ids[k]);
        }
      }
      for (size_t k = 0; k + 1 < w.ids.size(); ++k)
        where[{w.ids[k], w.ids[k + 1]}].erase(wi);
      w.ids = std::move(merged);
      for (size_t k = 0; k + 1 < w.ids.size(); ++k) {
        Pair p{w.ids[k], w.ids[k + 1]};
        pairCount[p] += w.count;
        where[p].insert(wi);
        changed[p];
      }
    }
    for (auto &[p, _] : changed)
      if (pairCount[p] > 0)
        heap.push({pairCount[p], p});
  }
  makeDirectories(outputDir);
  std::string vocab = "{";
  for (size_t i = 0; i < symbols.size(); ++i)
    vocab += (i ? ", " : "") + jsonQuote(symbols[i]) + ": " + std::to_string(i);
  vocab += ", " + jsonQuote("<|endoftext|>") + ": " + std::to_string(symbols.size()) + "}\n";
  std::string mergeText = "#version: 0.2\n";
  for (const Pair &p : merges)
    mergeText += symbols[p.first] + " " + symbols[p.second] + "\n";
  writeFileAtomically(outputDir + "/vocab.json", vocab);
  writeFileAtomically(outputDir + "/merges.txt", mergeText);
  return int64_t(symbols.size()) + 1; // the entries written, <|endoftext|> included
}

} // namespace mlc::rt
