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
  return op->getName().getStringRef().starts_with("plan.tp_");
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

} // namespace mlc::tool
