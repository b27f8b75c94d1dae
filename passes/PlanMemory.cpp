//===- PlanMemory.cpp - the mlc-plan-memory pass ----------------------------===//
//
// First-fit placement of each plan function's arena slices, largest first,
// over their live ranges (plan::liveRanges): two slices share bytes only
// when no step uses both while both hold data.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

#include <algorithm>

namespace mlc {
#define GEN_PASS_DEF_MLCPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc::plan;

namespace {

void placeArena(FuncOp fn) {
  auto ranges = liveRanges(fn);
  auto bytes = [](ArenaOp a) { return (bufferBytes(a.getBuffer()) + 63) / 64 * 64; };
  std::vector<ArenaOp> order;
  for (ArenaOp a : fn.getBody().front().getOps<ArenaOp>()) {
    if (ranges.count(a))
      order.push_back(a);
    else
      a.setOffset(0); // never read or written: takes no space of its own
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](ArenaOp a, ArenaOp b) { return bytes(a) > bytes(b); });
  int64_t arenaBytes = 0;
  std::vector<ArenaOp> placed;
  for (ArenaOp a : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (ArenaOp p : placed)
      if (ranges[p].overlaps(ranges[a]))
        busy.push_back({p.getOffset(), p.getOffset() + bytes(p)});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + bytes(a) <= lo)
        break;
      offset = std::max(offset, hi);
    }
    a.setOffset(offset);
    arenaBytes = std::max(arenaBytes, offset + bytes(a));
    placed.push_back(a);
  }
  fn.setArenaBytes(arenaBytes);
}

class PlanMemoryPass : public mlc::impl::MlcPlanMemoryBase<PlanMemoryPass> {
public:
  void runOnOperation() final {
    for (FuncOp fn : getOperation().getOps<FuncOp>())
      placeArena(fn);
  }
};

} // namespace
