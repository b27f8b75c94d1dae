//===- RooflineReport.cpp - the roofline as a table and as JSON ----------===//
//
// `mlc compile --roofline`'s output (Roofline.h): the device, one row per
// kernel or GEMM shape (longest first), the groups' totals, the predicted
// step with its tokens/s and MFU; and the same as one JSON object for
// --report-json.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Roofline.h"

#include "support/Json.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using llvm::formatv;
using llvm::StringRef;

namespace mlc::tool {

namespace {

const char *const kGroups[] = {"gemm", "attention", "pointwise", "rows", "optimizer"};

struct Totals {
  int64_t launches = 0;
  double bytes = 0, flops = 0, seconds = 0;
};
Totals totalsOf(const Roofline &r, StringRef group) {
  Totals t;
  for (const RooflineItem &it : r.items)
    if (it.group == group)
      t.launches += it.launches, t.bytes += it.bytes, t.flops += it.flops,
          t.seconds += it.seconds;
  return t;
}

std::string share(double part, double whole) {
  return formatv("{0:f1}%", whole > 0 ? 100 * part / whole : 0.0).str();
}

/// The collectives' rows, their totals and the step with them.
std::string formatCommunication(const Roofline &r) {
  const RooflineDevice &d = r.device;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << formatv("  communication per step: tensor-parallel T = {0}{1}, data-parallel D = {2}{3} "
                "({4} GPUs)\n",
                r.tensorParallel, r.tensorParallel > 1 ? " on " + r.tpLink : std::string(),
                r.dataParallel, r.dataParallel > 1 ? " on " + r.dpLink : std::string(),
                r.tensorParallel * r.dataParallel);
  os << formatv("    ({0}; NVLink {1:f1} GB/s, InfiniBand {2:f1} GB/s per GPU as used; ring: "
                "2 (n-1)/n of an all-reduce's bytes, (n-1)/n of a reduce-scatter's or "
                "all-gather's, + ceil(log2 n) steps' latency, twice for an all-reduce)\n",
                d.commBasis, d.nvlink / 1e9, d.ib / 1e9);
  os << formatv("    {0,-15} {1,-28} {2,8} {3,12} {4,12}\n", "group", "collective", "count",
                "MB", "us");
  auto rows = [&](StringRef group, const std::vector<CollectiveTime> &comms) {
    for (const CollectiveTime &c : comms)
      os << formatv("    {0,-15} {1,-28} {2,8} {3,12:f3} {4,12:f1}\n", group,
                    group == "data-parallel" ? c.op
                                             : (c.backward ? "backward " : "forward  ") + c.op,
                    c.count, c.bytes / 1e6,
                    c.seconds * 1e6);
  };
  rows("tensor-parallel", r.tpComms);
  rows("data-parallel", r.dpComms);
  if (r.tensorParallel > 1 && r.tpAsyncSeconds == 0)
    os << formatv("    tensor-parallel: {0:f3} ms, blocking (the next product reads each sum)\n",
                  r.tpSeconds * 1e3);
  else if (r.tensorParallel > 1)
    os << formatv("    tensor-parallel: {0:f3} ms on the wire, {1:f3} ms exposed ({2:f3} MB, "
                  "{3:f3} ms, asynchronous under the weight-gradient GEMMs; the rest "
                  "blocking)\n",
                  r.tpSeconds * 1e3, r.tpExposed * 1e3, r.tpAsyncBytes / 1e6,
                  r.tpAsyncSeconds * 1e3);
  if (r.dataParallel > 1)
    os << formatv("    data-parallel: {0:f3} ms on the wire, {1:f3} ms exposed (the rest under "
                  "backward and the update, one bucket at a time as the plan starts them)\n",
                  r.dpSeconds * 1e3, r.dpExposed * 1e3);
  const double step = r.stepSeconds();
  const double perGpu = r.tokensPerGpu(step);
  os << formatv("  predicted step with communication: {0:f3} ms, {1:f0} tokens/s per GPU "
                "({2:f0} over the {3} GPUs), MFU {4:f3}\n",
                step * 1e3, perGpu, perGpu * r.tensorParallel * r.dataParallel,
                r.tensorParallel * r.dataParallel,
                r.mfu(step));
  return s;
}

} // namespace

std::string formatRoofline(const Roofline &r) {
  const RooflineDevice &d = r.device;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << formatv("  roofline on {0}: {1:f2} TB/s, bf16 {2:f0} TFLOP/s, f32 GEMM {3:f0} TFLOP/s, "
                "f32 {4:f0} TFLOP/s, launch {5:f1} us\n",
                d.name, d.bandwidth / 1e12, d.bf16 / 1e12, d.f32Gemm / 1e12, d.f32 / 1e12,
                d.launch * 1e6);
  os << "    (" << d.basis << ")\n";
  std::string fns;
  for (const std::string &f : r.functions)
    fns += (fns.empty() ? "@" : " + @") + f;
  os << "  one step = " << fns << "; time = max(bytes / bandwidth, FLOPs / peak) per launch\n";
  os << formatv("    {0,-40} {1,-30} {2,8} {3,10} {4,10} {5,10} {6,7} {7}\n", "kernel / GEMM",
                "template", "launches", "MB", "GFLOP", "us", "share", "bound");
  bool buffers = false;
  for (const RooflineItem &it : r.items) {
    buffers = buffers || it.fromBuffers;
    os << formatv("    {0,-40} {1,-30} {2,8} {3,10:f2} {4,10:f3} {5,10:f1} {6,7} {7}\n",
                  it.name + (it.fromBuffers ? "*" : ""), it.kind, it.launches, it.bytes / 1e6,
                  it.flops / 1e9, it.seconds * 1e6, share(it.seconds, r.seconds),
                  it.computeBound ? "compute" : "memory");
  }
  if (buffers)
    os << "    * a kernel the model cannot read (text, or a template it does not know): "
          "its buffers' bytes, each once, no FLOPs\n";
  os << formatv("  {0,-12} {1,8} {2,10} {3,10} {4,10} {5,7}\n", "group", "launches", "MB",
                "GFLOP", "us", "share");
  for (const char *g : kGroups) {
    Totals t = totalsOf(r, g);
    os << formatv("  {0,-12} {1,8} {2,10:f1} {3,10:f1} {4,10:f1} {5,7}", g, t.launches,
                  t.bytes / 1e6, t.flops / 1e9, t.seconds * 1e6, share(t.seconds, r.seconds));
    // Variable-length attention's lengths come with each batch.
    if (r.attentionUpperBound && StringRef(g) == "attention")
      os << "  upper bound: variable-length, each sequence as long as the batch allows "
            "(the padded FLOPs)";
    os << "\n";
  }
  if (d.launch > 0)
    os << formatv("  {0,-12} {1,8} {2,10} {3,10} {4,10:f1} {5,7}\n", "launch", r.launches, "",
                  "", r.launchSeconds * 1e6, share(r.launchSeconds, r.seconds));
  // Per GPU: a tensor-parallel group's T GPUs share its tokens.
  const double tokensPerSecond = r.tokensPerGpu(r.seconds);
  const double mfu = r.mfu(r.seconds);
  os << formatv("  predicted step: {0:f3} ms at the limits ({1}), {2:f0} tokens/s, MFU {3:f3}\n",
                r.seconds * 1e3,
                d.launch > 0 ? formatv("{0:f1} us per launch", d.launch * 1e6).str()
                             : std::string("no launch overhead: one CUDA graph"),
                tokensPerSecond, mfu);
  os << formatv("    MFU: {0} FLOPs per token = {1:f1} GFLOP per step (N = {2} parameters, "
                "{3} tokens, attention from the plan, not halved{6}) over {4:f1} TFLOP/s "
                "({5}){7}\n",
                r.functions.size() > 1 ? "(6 N + 12 L S E)" : "(2 N + 4 L S E)",
                r.modelFlops / 1e9, r.parameters, r.tokens, r.peak / 1e12,
                r.bf16 ? "bf16" : "f32", r.attentionUpperBound ? ", its upper bound" : "",
                r.tensorParallel > 1
                    ? formatv(", per GPU: the step's over the {0} GPUs of a tensor-parallel "
                              "group, which share its tokens",
                              r.tensorParallel)
                          .str()
                    : std::string());
  if (r.communicates())
    os << formatCommunication(r);
  return s;
}

std::string rooflineJson(const Roofline &r) {
  auto num = [](double v) { return formatv("{0:e9}", v).str(); };
  auto quote = [](StringRef text) { return mlc::rt::jsonQuote(text.str()); };
  const RooflineDevice &d = r.device;
  std::string s = "{\"device\": " + quote(d.name) + ", \"bandwidth\": " + num(d.bandwidth) +
                  ", \"bf16_flops\": " + num(d.bf16) + ", \"f32_gemm_flops\": " +
                  num(d.f32Gemm) + ", \"f32_flops\": " + num(d.f32) + ", \"launch_s\": " +
                  num(d.launch) + ", \"step_s\": " + num(r.seconds) +
                  ", \"launches\": " + std::to_string(r.launches) +
                  ", \"tokens\": " + std::to_string(r.tokens) +
                  ", \"parameters\": " + std::to_string(r.parameters) +
                  ", \"model_flops\": " + num(r.modelFlops) + ", \"mfu_peak\": " + num(r.peak) +
                  ", \"attention_upper_bound\": " + (r.attentionUpperBound ? "true" : "false") +
                  ", \"tokens_per_s\": " +
                  num(r.tokensPerGpu(r.seconds)) +
                  ", \"mfu\": " +
                  num(r.mfu(r.seconds));
  auto fields = [&](int64_t launches, double bytes, double flops, double seconds) {
    return "\"launches\": " + std::to_string(launches) + ", \"bytes\": " + num(bytes) +
           ", \"flops\": " + num(flops) + ", \"s\": " + num(seconds);
  };
  const double step = r.stepSeconds();
  s += ", \"tensor_parallel\": " + std::to_string(r.tensorParallel) +
       ", \"data_parallel\": " + std::to_string(r.dataParallel) + ", \"tp_s\": " +
       num(r.tpSeconds) + ", \"tp_exposed_s\": " + num(r.tpExposed) +
       ", \"tp_async_s\": " + num(r.tpAsyncSeconds) + ", \"tp_async_bytes\": " +
       num(r.tpAsyncBytes) + ", \"dp_wire_s\": " + num(r.dpSeconds) +
       ", \"dp_exposed_s\": " + num(r.dpExposed) + ", \"step_with_comm_s\": " + num(step) +
       ", \"tokens_per_s_with_comm\": " +
       num(r.tokensPerGpu(step)) + ", \"mfu_with_comm\": " +
       num(r.mfu(step)) + ", \"collectives\": [";
  bool first = true;
  for (auto [group, comms] : {std::pair<const char *, const std::vector<CollectiveTime> *>{
                                  "tensor_parallel", &r.tpComms},
                              {"data_parallel", &r.dpComms}})
    for (const CollectiveTime &c : *comms) {
      s += (first ? "" : ", ") + std::string("{\"group\": ") + quote(group) +
           ", \"op\": " + quote(c.op) + ", \"phase\": " +
           quote(StringRef(group) == "data_parallel" ? "step"
                 : c.backward                          ? "backward"
                                                       : "forward") +
           ", \"count\": " + std::to_string(c.count) + ", \"bytes\": " + num(c.bytes) +
           ", \"s\": " + num(c.seconds) + "}";
      first = false;
    }
  s += "]";
  s += ", \"groups\": {";
  for (const char *g : kGroups) {
    Totals t = totalsOf(r, g);
    s += (g == kGroups[0] ? "" : ", ") + quote(g) + ": {" +
         fields(t.launches, t.bytes, t.flops, t.seconds) + "}";
  }
  s += "}, \"items\": [";
  for (size_t i = 0; i < r.items.size(); ++i) {
    const RooflineItem &it = r.items[i];
    s += (i ? ", " : "") + std::string("{\"name\": ") + quote(it.name) +
         ", \"kind\": " + quote(it.kind) + ", \"group\": " + quote(it.group) + ", " +
         fields(it.launches, it.bytes, it.flops, it.seconds) + ", \"bound\": " +
         quote(it.computeBound ? "compute" : "memory") +
         ", \"from_buffers\": " + (it.fromBuffers ? "true" : "false") + ", \"kernels\": [";
    for (size_t j = 0; j < it.kernels.size(); ++j)
      s += (j ? ", " : "") + quote(it.kernels[j]);
    s += "]}";
  }
  return s + "]}";
}

} // namespace mlc::tool
