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
#include "compiler/tools/Roofline.h"
#include "compiler/tools/Tool.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

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

std::optional<RecomputeChoice> &chosen() {
  static std::optional<RecomputeChoice> c;
  return c;
}

Expected<MemoryPlan> planOf(mlir::ModuleOp plan) {
  auto p = memoryPlanOf(plan, ranksFlag, dtype);
  if (p) {
    p->recompute = recompute;
    if (recompute == "auto" && chosen()) // the advice follows what auto chose
      p->recompute = chosen()->mode.empty()           ? "none"
                     : chosen()->mode == "selective" ? "selective"
                                                      : "full";
  }
  return p;
}

/// The step's FLOPs and predicted seconds at h200's limits.
Expected<std::pair<double, double>> stepCost(mlir::ModuleOp plan) {
  auto device = parseRooflineDevice("h200");
  if (!device)
    return device.takeError();
  auto r = rooflineOf(plan, *device, ranksFlag);
  if (!r)
    return r.takeError();
  double flops = 0;
  for (const RooflineItem &item : r->items)
    flops += item.flops;
  return std::make_pair(flops, r->seconds);
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
  if (const RecomputeChoice *c = lastRecomputeChoice()) {
    const double extra = c->flopsChosen - c->flopsNone;
    outs() << formatv("    --recompute auto: {0}\n", c->describe());
    outs() << formatv("      saved activations {0} -> {1} ({2} fewer); total {3} -> {4}\n",
                      humanBytes(c->savedNone), humanBytes(c->savedChosen),
                      humanBytes(c->savedNone - c->savedChosen), humanBytes(c->totalNone),
                      humanBytes(c->totalChosen));
    outs() << formatv("      recomputes {0:f3} GFLOP per step ({1:f1}% more FLOPs); h200 "
                      "roofline {2:f3} -> {3:f3} ms\n",
                      extra / 1e9, c->flopsNone > 0 ? 100 * extra / c->flopsNone : 0.0,
                      c->secondsNone * 1e3, c->secondsChosen * 1e3);
    outs() << "      plans compiled to choose (recompute, saved activations, total, GFLOP):\n";
    for (const RecomputeChoice::Trial &t : c->trials)
      outs() << formatv("        {0,-28} {1,17} {2,17} {3,12:f3}\n",
                        t.mode.empty()      ? std::string("none")
                        : t.numLayers < 0   ? t.mode
                                            : t.mode + " " + std::to_string(t.numLayers),
                        withCommas(t.saved), withCommas(t.total), t.flops / 1e9);
    json += formatv(", \"recompute_auto\": {{\"mode\": \"{0}\", \"num_layers\": {1}, "
                    "\"layers\": {2}, \"saved_none\": {3}, \"saved_chosen\": {4}, "
                    "\"total_none\": {5}, \"total_chosen\": {6}, \"flops_none\": {7:e6}, "
                    "\"flops_chosen\": {8:e6}, \"trials\": {9}}",
                    c->mode.empty() ? "none" : c->mode, c->numLayers, c->layers, c->savedNone,
                    c->savedChosen, c->totalNone, c->totalChosen, c->flopsNone,
                    c->flopsChosen, c->trials.size())
                .str();
  }
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

std::string RecomputeChoice::describe() const {
  if (mode.empty())
    return "nothing recomputed (the plan fits as it is)";
  if (mode == "selective")
    return "selective (the norms' and pointwise ops' outputs, no GEMM)";
  const int64_t n = numLayers < 0 ? layers : numLayers;
  return formatv("selective, and full on {0} of {1} layers ({2})", n, layers,
                 n == 1 ? std::string("layer 0") : "layers 0-" + std::to_string(n - 1))
      .str();
}

const RecomputeChoice *lastRecomputeChoice() { return chosen() ? &*chosen() : nullptr; }

// The items are the saved activations at two granularities: every cheap
// value (selective: pointwise ops' and norms' outputs, recomputed without a
// GEMM) and each layer whole (full: everything but its input, GEMMs and
// attention again). This is a greedy by bytes saved per recomputed FLOP:
// selective frees the most bytes per FLOP (its FLOPs are a few per element),
// so it comes first; whole layers come next, and as a transformer's layers
// are alike (the same bytes, the same FLOPs) every one frees as much per
// FLOP as the next, so the fewest layers that fit is the least FLOPs, the
// knapsack's optimum at a layer's granularity. The bytes and FLOPs are not
// estimated: each candidate is compiled and lowered, and its plan's
// memory (MemoryPlan) and roofline FLOPs measured; the least number of
// layers is bisected (saved bytes fall as N grows), log2(layers) plans.
Expected<RecomputeChoice> chooseRecompute(const RecomputeTrial &trial) {
  if (deviceMemory.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--recompute auto chooses what to recompute for a memory "
                             "budget: give it one with mlc compile --device-memory "
                             "SIZE|h100|h200 (mlc train PKG trains the package it writes)");
  auto limit = parseDeviceMemory(deviceMemory);
  if (!limit)
    return limit.takeError();
  RecomputeChoice c;
  struct Measured {
    MemoryPlan plan;
    double flops = 0, seconds = 0;
  };
  auto measure = [&](const std::string &mode, int64_t n) -> Expected<Measured> {
    auto module = trial(mode, n);
    if (!module)
      return module.takeError();
    auto p = memoryPlanOf(**module, ranksFlag, dtype);
    if (!p)
      return p.takeError();
    p->recompute = mode.empty() ? "none" : mode == "selective" ? "selective" : "full";
    auto cost = stepCost(**module);
    if (!cost)
      return cost.takeError();
    c.trials.push_back({mode, n, p->saved, p->total(p->cuda), cost->first});
    return Measured{*p, cost->first, cost->second};
  };
  auto fits = [&](const Measured &m) { return m.plan.total(m.plan.cuda) <= *limit; };
  auto choose = [&](const std::string &mode, int64_t n, const Measured &m) {
    c.mode = mode;
    c.numLayers = n;
    c.savedChosen = m.plan.saved;
    c.totalChosen = m.plan.total(m.plan.cuda);
    c.flopsChosen = m.flops;
    c.secondsChosen = m.seconds;
    chosen() = c;
    return c;
  };
  auto none = measure("", -1);
  if (!none)
    return none.takeError();
  c.savedNone = none->plan.saved;
  c.totalNone = none->plan.total(none->plan.cuda);
  c.flopsNone = none->flops;
  c.secondsNone = none->seconds;
  for (const LayerBytes &l : none->plan.savedByLayer)
    c.layers = std::max(c.layers, l.layer + 1);
  if (fits(*none))
    return choose("", -1, *none);
  auto selective = measure("selective", -1);
  if (!selective)
    return selective.takeError();
  if (fits(*selective) || c.layers == 0)
    return fits(*selective)
               ? choose("selective", -1, *selective)
               : Expected<RecomputeChoice>(createStringError(
                     inconvertibleErrorCode(),
                     "--recompute auto: even selective recomputation does not fit, and no "
                     "parameter names a layer to recompute whole: " +
                         toString(checkFits(selective->plan, *limit, deviceMemory))));
  auto all = measure("full+selective", -1);
  if (!all)
    return all.takeError();
  if (!fits(*all))
    return createStringError(inconvertibleErrorCode(),
                             "--recompute auto: even recomputing every layer (full) does not "
                             "fit: " +
                                 toString(checkFits(all->plan, *limit, deviceMemory)));
  // The least N in [1, layers] that fits; `layers` does.
  int64_t lo = 1, hi = c.layers;
  std::optional<Measured> best;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    auto m = measure("full+selective", mid);
    if (!m)
      return m.takeError();
    if (fits(*m)) {
      hi = mid;
      best = std::move(*m);
    } else {
      lo = mid + 1;
    }
  }
  if (hi == c.layers)
    return choose("full+selective", -1, *all);
  return choose("full+selective", hi, *best);
}

} // namespace mlc::tool
