//===- Balance.cpp - dealing variable-length samples to ranks --------------===//

#include "runtime/data/Balance.h"
#include "support/Error.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace mlc::rt {

BalancePolicy parseBalancePolicy(const std::string &name) {
  if (name == "random")
    return BalancePolicy::Random;
  if (name == "zigzag")
    return BalancePolicy::ZigZag;
  if (name == "presort")
    return BalancePolicy::Presort;
  fail("unknown balance policy '" + name + "' (expected presort, zigzag or random)");
}

const char *policyName(BalancePolicy p) {
  switch (p) {
  case BalancePolicy::Random:
    return "random";
  case BalancePolicy::ZigZag:
    return "zigzag";
  case BalancePolicy::Presort:
    return "presort";
  }
  return "";
}

std::vector<std::vector<int64_t>> dealWindow(const std::vector<int64_t> &lengths, int ranks,
                                             BalancePolicy policy, int64_t maxPerRank) {
  if (maxPerRank > 0 && int64_t(lengths.size()) > maxPerRank * ranks)
    fail("internal: a window of " + std::to_string(lengths.size()) + " samples does not fit " +
         std::to_string(ranks) + " ranks of " + std::to_string(maxPerRank));
  std::vector<std::vector<int64_t>> out(ranks);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  if (policy == BalancePolicy::Random) {
    for (size_t i = 0; i < order.size(); ++i)
      out[i % ranks].push_back(order[i]);
    return out;
  }
  // Longest first; ties keep window order, so every rank computes the same deal.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  if (policy == BalancePolicy::ZigZag) {
    for (size_t i = 0; i < order.size(); ++i) {
      size_t round = i / ranks, pos = i % ranks;
      out[round % 2 ? ranks - 1 - pos : pos].push_back(order[i]);
    }
    return out;
  }
  std::vector<int64_t> load(ranks, 0);
  for (int64_t s : order) {
    int r = -1;
    for (int q = 0; q < ranks; ++q)
      if ((maxPerRank <= 0 || int64_t(out[q].size()) < maxPerRank) &&
          (r < 0 || load[q] < load[r]))
        r = q;
    out[r].push_back(s);
    load[r] += lengths[s];
  }
  return out;
}

BalanceStats balanceStats(std::vector<int64_t> lengths, int64_t seqLen, int ranks,
                          int64_t tokensPerRank, BalancePolicy policy, uint64_t seed) {
  if (ranks < 1 || tokensPerRank < seqLen)
    fail("--ranks must be >= 1 and --tokens-per-rank at least --seq-len");
  std::mt19937_64 rng(seed);
  std::shuffle(lengths.begin(), lengths.end(), rng);
  for (int64_t &l : lengths)
    l = std::min(l, seqLen);
  BalanceStats stats;
  double imbalanceSum = 0, padded = 0;
  const int64_t budget = int64_t(ranks) * tokensPerRank;
  size_t next = 0;
  while (next < lengths.size()) {
    std::vector<int64_t> window;
    int64_t total = 0;
    while (next < lengths.size() && total + lengths[next] <= budget) {
      total += lengths[next];
      window.push_back(lengths[next++]);
    }
    if (window.empty()) // cannot happen: every sample fits (tokensPerRank >= seqLen)
      break;
    auto deal = dealWindow(window, ranks, policy);
    int64_t maxLoad = 0;
    for (auto &rank : deal) {
      int64_t load = 0, longest = 0;
      for (int64_t s : rank) {
        load += window[s];
        longest = std::max(longest, window[s]);
      }
      maxLoad = std::max(maxLoad, load);
      padded += double(longest) * double(rank.size());
    }
    // A step of empty documents has no tokens to balance: it counts as even.
    imbalanceSum += total ? double(maxLoad) / (double(total) / ranks) : 1.0;
    stats.tokens += total;
    stats.samples += window.size();
    ++stats.steps;
  }
  stats.imbalance = stats.steps ? imbalanceSum / stats.steps : 1.0;
  stats.padding = padded > 0 ? 1.0 - double(stats.tokens) / padded : 0.0;
  stats.paddingFixed =
      stats.samples ? 1.0 - double(stats.tokens) / (double(stats.samples) * seqLen) : 0.0;
  return stats;
}

} // namespace mlc::rt
