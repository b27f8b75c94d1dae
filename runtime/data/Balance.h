//===- Balance.h - dealing variable-length samples to ranks ----*- C++ -*-===//
//
// Local presorting (the MLPerf BERT record's technique): every rank derives
// the same global sample order from the shared seed, takes the same window
// of samples for the next step, and deals it out so that each rank's
// micro-batch holds nearly the same number of tokens. No communication is
// needed, and unpadded (packed) batches waste nothing on padding.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BALANCE_H
#define MLC_RUNTIME_BALANCE_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlc::rt {

enum class BalancePolicy {
  Random,  // deal the window in its (random) order, round robin
  ZigZag,  // sort by length, deal 0..R-1 then R-1..0 (the MLPerf record)
  Presort, // sort by length, each sample to the currently lightest rank
};

BalancePolicy parseBalancePolicy(const std::string &name);
const char *policyName(BalancePolicy p);

/// Deals the samples of one window (their lengths) to `ranks` ranks; returns
/// each rank's sample positions within the window. `maxPerRank` > 0 caps the
/// samples a rank takes (a packed micro-batch holds at most that many
/// sequences): presort then gives each sample to the lightest rank with room.
std::vector<std::vector<int64_t>> dealWindow(const std::vector<int64_t> &lengths, int ranks,
                                             BalancePolicy policy, int64_t maxPerRank = 0);

struct BalanceStats {
  int64_t steps = 0, samples = 0, tokens = 0;
  double imbalance = 0; // mean over steps of max / mean tokens per rank
  double padding = 0;      // padding share if each rank padded to its longest sample
  double paddingFixed = 0; // padding share if every sample were padded to seq-len
};

/// One epoch of variable-length samples (lengths in a seeded random order,
/// each truncated at seqLen): steps take the next samples up to
/// ranks * tokensPerRank tokens and deal them with `policy`.
BalanceStats balanceStats(std::vector<int64_t> lengths, int64_t seqLen, int ranks,
                          int64_t tokensPerRank, BalancePolicy policy, uint64_t seed);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BALANCE_H
