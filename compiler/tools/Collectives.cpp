//===- Collectives.cpp - a plan's collectives: bytes and time on the wire ---===//
//
// The tensor-parallel steps of a plan, read by their op's name so that
// every `plan.tp_*` step counts, and the ring model of their time
// (Collectives.h). A step's bytes are its largest buffer operand: an
// all-reduce's tensor, an all-gather's output, a reduce-scatter's input.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Collectives.h"

#include "compiler/tools/MemoryPlan.h"
#include "contract/StepFunctions.h"
#include "dialects/plan/PlanDialect.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using llvm::StringRef;

namespace mlc::tool {

bool isTensorParallelCollective(Operation *op) {
  // plan.tp_wait moves nothing: its all-reduce counted at its start.
  return op->getName().getStringRef().starts_with("plan.tp_") && !isa<plan::TpWaitOp>(op);
}

std::string collectiveName(Operation *op) {
  std::string name = op->getName().getStringRef().drop_front(5).str(); // "plan."
  if (op->hasAttr("max"))
    name += " max";
  return name;
}

int64_t collectiveBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()))
      bytes = std::max(bytes, plan::bufferBytes(v));
  for (Value v : op->getResults())
    if (isa<MemRefType>(v.getType()))
      bytes = std::max(bytes, plan::bufferBytes(v));
  return bytes;
}

int64_t tensorParallelSize(ModuleOp plan) {
  auto t = plan->getAttrOfType<IntegerAttr>("mlc.tensor_parallel");
  return t ? std::max<int64_t>(t.getInt(), 1) : 1;
}

std::vector<Collective> tensorParallelCollectives(ModuleOp plan) {
  std::vector<Collective> forward, backward;
  for (auto fn : plan.getBody()->getOps<plan::FuncOp>()) {
    if (fn.getSymName() != mlc::kTrainStepFn)
      continue;
    Operation *loss = lossStepOf(fn);
    bool pastLoss = false;
    for (Operation &op : fn.getBody().front()) {
      pastLoss = pastLoss || &op == loss;
      if (!isTensorParallelCollective(&op))
        continue;
      std::vector<Collective> &phase = pastLoss ? backward : forward;
      std::string name = collectiveName(&op);
      auto it = std::find_if(phase.begin(), phase.end(),
                             [&](const Collective &c) { return c.op == name; });
      if (it == phase.end())
        it = phase.insert(phase.end(), Collective{name, pastLoss, 0, 0});
      ++it->count;
      it->bytes += collectiveBytes(&op);
    }
  }
  forward.insert(forward.end(), backward.begin(), backward.end());
  return forward;
}

double ringShare(StringRef op, int64_t n) {
  if (n <= 1)
    return 0;
  const double share = double(n - 1) / double(n);
  return op.contains("all_reduce") ? 2 * share : share;
}

double collectiveSeconds(StringRef op, double bytes, int64_t n, const Link &link) {
  if (n <= 1)
    return 0;
  const double steps = std::ceil(std::log2(double(n))) * (op.contains("all_reduce") ? 2 : 1);
  return ringShare(op, n) * bytes / link.bandwidth + steps * link.latency;
}

void CommTimeline::record(std::vector<CollectiveTime> &rows, const std::string &op,
                          double bytes, double seconds, bool backward) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const CollectiveTime &c) {
    return c.op == op && c.backward == backward;
  });
  if (it == rows.end())
    it = rows.insert(rows.end(), CollectiveTime{op, backward, 0, 0, 0});
  ++it->count;
  it->bytes += bytes, it->seconds += seconds;
}

void CommTimeline::step(Operation &op) {
  pastLoss = pastLoss || &op == lossStep;
  if (isTensorParallelCollective(&op)) {
    const std::string name = collectiveName(&op);
    const double bytes = double(collectiveBytes(&op));
    const double seconds = collectiveSeconds(name, bytes, t, tpLink);
    record(tp, name, bytes, seconds, pastLoss);
    tpSeconds += seconds;
    auto reduce = dyn_cast<plan::TpAllReduceOp>(op);
    if (reduce && reduce.getTag()) {
      // Asynchronous (mlc-overlap-tp-collectives): on the group's stream,
      // under the steps up to its plan.tp_wait.
      tpStreamFree = std::max(tpStreamFree, clock) + seconds;
      arrives[{"tp", *reduce.getTag()}] = tpStreamFree;
      tpAsyncSeconds += seconds, tpAsyncBytes += bytes;
      return;
    }
    // Blocking: the next step reads the sum.
    tpExposed += seconds, clock += seconds;
    return;
  }
  if (auto w = dyn_cast<plan::TpWaitOp>(op)) {
    auto it = arrives.find({"tp", w.getTag()});
    if (it != arrives.end() && it->second > clock) {
      tpExposed += it->second - clock;
      clock = it->second;
    }
    return;
  }
  // The data-parallel buckets: [offset, count) of a flat buffer.
  auto start = [&](StringRef kind, Value buffer, int64_t count, int64_t tag) {
    const double bytes = double(count) * double(plan::elementBytes(
                                             cast<MemRefType>(buffer.getType()).getElementType()));
    const double seconds = collectiveSeconds(kind, bytes, d, dpLink);
    record(dp, kind.str(), bytes, seconds, false);
    dpSeconds += seconds;
    streamFree = std::max(streamFree, clock) + seconds;
    arrives[{kind.str(), tag}] = streamFree;
  };
  auto wait = [&](StringRef kind, int64_t tag) {
    auto it = arrives.find({kind.str(), tag});
    if (it == arrives.end() || it->second <= clock)
      return;
    dpExposed += it->second - clock;
    clock = it->second;
  };
  if (auto s = dyn_cast<plan::AllReduceStartOp>(op))
    start("all_reduce", s.getBuffer(), s.getCount(), s.getTag());
  else if (auto s = dyn_cast<plan::ReduceScatterStartOp>(op))
    start("reduce_scatter", s.getBuffer(), s.getCount(), s.getTag());
  else if (auto s = dyn_cast<plan::AllGatherStartOp>(op))
    start("all_gather", s.getBuffer(), s.getCount(), s.getTag());
  else if (auto w = dyn_cast<plan::AllReduceWaitOp>(op))
    wait("all_reduce", w.getTag());
  else if (auto w = dyn_cast<plan::ReduceScatterWaitOp>(op))
    wait("reduce_scatter", w.getTag());
  else if (auto w = dyn_cast<plan::AllGatherWaitOp>(op))
    wait("all_gather", w.getTag());
  else if (isa<plan::AllReduceNormOp>(op)) {
    // One f64, blocking, after every bucket's sum (on the same stream).
    const double seconds = collectiveSeconds("all_reduce", 8, d, dpLink);
    record(dp, "all_reduce_norm", 8, seconds, false);
    dpSeconds += seconds;
    const double done = std::max(streamFree, clock) + seconds;
    dpExposed += done - clock;
    clock = streamFree = done;
  }
}

} // namespace mlc::tool
