//===- TensorParallel.cpp - one rank's slice of a tensor-parallel model ---===//

#include "runtime/train/TensorParallel.h"
#include "runtime/train/BatchSources.h"
#include "support/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace mlc::rt {

ParallelGroups splitWorld(Communicator &world, int64_t t) {
  const int r = world.rank(), size = world.size();
  if (t < 1 || size % t != 0)
    fail("mpirun started " + std::to_string(size) + " ranks, which --tensor-parallel " +
         std::to_string(t) + " does not divide: the ranks are tensor-parallel groups of " +
         std::to_string(t) + " times data-parallel groups");
  ParallelGroups g;
  // Consecutive ranks share a node's fast links: they form the groups whose
  // collectives run inside every layer.
  g.tensor = world.split(int(r / t), int(r % t));
  g.data = world.split(int(r % t), int(r / t));
  return g;
}

std::vector<int64_t> wholeShape(const ParamInfo &p, int64_t t) {
  std::vector<int64_t> s = p.shape;
  if (p.tpDim >= 0)
    s[size_t(p.tpDim)] *= t;
  return s;
}

void forEachSliceRun(const ParamInfo &p, int64_t t, int64_t es,
                     const std::function<void(int rank, int64_t whole, int64_t slice,
                                              int64_t bytes)> &run) {
  const size_t d = size_t(p.tpDim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i)
    outer *= p.shape[i];
  for (size_t i = d + 1; i < p.shape.size(); ++i)
    inner *= p.shape[i];
  const int64_t local = p.shape[d], full = local * t, row = inner * es;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t first = 0, blockStart = 0; // the block's first row in a slice, in the whole
    for (int64_t block : p.tpBlocks) {
      const int64_t part = block / t;
      for (int64_t r = 0; r < t; ++r)
        run(int(r), (o * full + blockStart + r * part) * row, (o * local + first) * row,
            part * row);
      first += part;
      blockStart += block;
    }
  }
}

HostTensor sliceOfWhole(const HostTensor &whole, const ParamInfo &p, int rank, int64_t t) {
  if (p.tpDim < 0)
    return whole;
  HostTensor slice;
  slice.dtype = whole.dtype;
  slice.shape = p.shape;
  const int64_t es = dtypeSize(whole.dtype);
  slice.data.resize(size_t(p.numel * es));
  forEachSliceRun(p, t, es, [&](int r, int64_t at, int64_t to, int64_t bytes) {
    if (r == rank)
      std::memcpy(slice.data.data() + to, whole.data.data() + at, size_t(bytes));
  });
  return slice;
}

double tensorParallelGradNorm(Backend &backend, double localNorm) {
  Communicator *tp = backend.tensorParallel();
  if (!tp || tp->size() <= 1)
    return localNorm;
  const bool finite = std::isfinite(localNorm);
  // ||g||^2 = (replicated: the same on every rank, counted once) + (split:
  // each rank's slices, summed over the group). This rank's buffer holds
  // the replicated part and its own slices.
  // Under the distributed optimizer only this rank's shards hold summed
  // gradients (and localNorm is already the norm over the data-parallel
  // group's shards): the split parameters' squares are taken over the
  // shards and summed over that group too. Adjacent ranges are summed as
  // one, where the gradients live (Backend::sumOfSquares).
  std::vector<std::pair<int64_t, int64_t>> ranges; // [begin, end), in order
  auto add = [&](int64_t begin, int64_t end) {
    if (begin >= end)
      return;
    if (!ranges.empty() && ranges.back().second == begin)
      ranges.back().second = end;
    else
      ranges.push_back({begin, end});
  };
  std::vector<const ParamInfo *> split;
  for (const ParamInfo &p : backend.package().params)
    if (p.tpDim >= 0)
      split.push_back(&p);
  std::sort(split.begin(), split.end(),
            [](const ParamInfo *a, const ParamInfo *b) { return a->offset < b->offset; });
  std::vector<Backend::Shard> shards;
  if (backend.sharded())
    shards = backend.shards();
  std::sort(shards.begin(), shards.end(),
            [](const Backend::Shard &a, const Backend::Shard &b) { return a.offset < b.offset; });
  for (const ParamInfo *p : split) {
    if (!backend.sharded()) {
      add(p->offset, p->offset + p->numel);
      continue;
    }
    for (const Backend::Shard &s : shards)
      add(std::max(p->offset, s.offset), std::min(p->offset + p->numel, s.offset + s.count));
  }
  double splitSquares = 0;
  for (auto [begin, end] : ranges)
    splitSquares += backend.sumOfSquares(FlatBuffer::Grads, begin, end - begin);
  if (Communicator *dp = backend.communicator(); backend.sharded() && dp && dp->size() > 1)
    dp->sum(&splitSquares, 1);
  // The replicated part, localNorm^2 - split, is the same on every rank up
  // to rounding: the group's mean of it, so that every rank computes the
  // same norm from the same sums, bit for bit (the norm scales the update
  // under --clip global; ranks that clipped their replicated parameters by
  // norms a rounding apart would drift apart, and a checkpoint holds rank
  // 0's copy).
  const double replicated = finite ? localNorm * localNorm - splitSquares : 0.0;
  double sums[2] = {splitSquares, replicated};
  tp->allReduce(sums, 2, /*f64=*/true, /*max=*/false);
  // A non-finite norm on any rank is one on every rank (the run skips or
  // stops at the same step).
  double bad = finite && std::isfinite(sums[0]) && std::isfinite(sums[1]) ? 0.0 : 1.0;
  tp->allReduce(&bad, 1, /*f64=*/true, /*max=*/true);
  if (bad > 0)
    return std::numeric_limits<double>::quiet_NaN();
  const double squares = sums[1] / double(tp->size()) + sums[0];
  return std::sqrt(std::max(0.0, squares));
}

void setTensorParallelRank(Backend &backend) {
  for (const ScalarsInfo &s : backend.package().scalars)
    if (s.name == "tp_rank")
      backend.setScalars("tp_rank", {double(backend.tpRank())});
}

} // namespace mlc::rt
