//===- MemoryReport.cpp - mlc compile's memory plan and --device-memory ---===//
//
//   mlc compile MODEL --report [--device-memory SIZE|h100|h200]
//   mlc compile MODEL --device-memory SIZE|h100|h200 [-o PKG | --emit=plan]
//
// The plan's memory per rank (MemoryPlan.h) in the report, and the refusal
// of a plan that does not fit the device before the package is written.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/MemoryPlan.h"
#include "compiler/tools/Tool.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace mlc::tool {
namespace {

cl::opt<std::string>
    deviceMemory("device-memory",
                 cl::desc("Refuse a plan whose memory per rank (as --report "
                          "states it) exceeds this: a size "
                          "(80GB, 80GiB, 141e9 bytes) or a device's capacity "
                          "(h100: 80 GB, h200: 141 GB)"),
                 cl::value_desc("size"), cl::sub(compileCmd()),
                 cl::cat(category()));

Expected<MemoryPlan> planOf(mlir::ModuleOp plan) {
  auto p = memoryPlanOf(plan, ranksFlag, dtype);
  if (p)
    p->recompute = recompute;
  return p;
}

} // namespace

Expected<bool> deviceMemoryGiven() {
  if (deviceMemory.empty())
    return false;
  auto limit = parseDeviceMemory(deviceMemory);
  if (!limit)
    return limit.takeError();
  return true;
}

int memoryReport(mlir::ModuleOp plan, std::string &json) {
  auto p = planOf(plan);
  if (!p)
    return fail(toString(p.takeError()));
  outs() << formatMemoryPlan(*p);
  json += (json.empty() ? "" : ", ") + std::string("\"memory\": ") +
          memoryPlanJson(*p);
  if (deviceMemory.empty())
    return 0;
  auto limit = parseDeviceMemory(deviceMemory);
  if (!limit)
    return fail(toString(limit.takeError()));
  Error err = checkFits(*p, *limit, deviceMemory);
  const bool fits = !err;
  consumeError(
      std::move(err)); // the refusal comes after the report (runReport)
  outs() << "    " << (fits ? "fits" : "does not fit") << " --device-memory "
         << deviceMemory << " (" << humanBytes(*limit) << ")\n";
  return 0;
}

Error checkDeviceMemory(mlir::ModuleOp plan) {
  if (deviceMemory.empty())
    return Error::success();
  auto limit = parseDeviceMemory(deviceMemory);
  if (!limit)
    return limit.takeError();
  auto p = planOf(plan);
  if (!p)
    return p.takeError();
  return checkFits(*p, *limit, deviceMemory);
}

} // namespace mlc::tool
