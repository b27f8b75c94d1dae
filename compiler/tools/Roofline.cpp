//===- Roofline.cpp - a plan's step time at a GPU's limits ----------------===//
//
// The model (Roofline.h):
//
//   time(kernel launch) = max(bytes / bandwidth, FLOPs / peak)
//   step                = sum over the launches of @train_step, @grad_norm
//                         and @optimizer (+ launches x launch overhead)
//
// Bytes are what each launch reads and writes of its arguments in device
// memory, once each: a region kernel's every access (plan.load, plan.store,
// plan.normalize, plan.accumulate) over the elements its strides reach (a
// stride 0 broadcasts, so a broadcast operand counts once); a template's
// arguments from its parameters, as that template moves them (a LayerNorm
// gradient reads dy and x twice: once per row for dx, once per column for
// dw/db). Scratch (a reduction's per-block partials, a LayerNorm's per-row
// statistics) is a few KB per launch and is left out, as are the step's
// scalars. Caches are assumed to hold nothing between launches. Under the
// distributed optimizer a launch with a `shard` (AdamW per bucket, the norm)
// moves and computes its body's share of this rank's ceil(c / R) elements
// of the bucket (of every bucket, shard -1). The collectives are not in
// `seconds`, the kernels' step: a timeline of the plan's steps
// (CommTimeline, Collectives.h) gives the tensor-parallel collectives'
// blocking time and the data-parallel ones' exposed time, which
// stepSeconds() adds (docs/scaling.md, "Llama-3 8B and 70B on 8 to 1,024
// H200s").
//
// FLOPs: a GEMM's 2 m n k per batch matrix, at the tensor-core rate for
// bf16 operands and the f32 GEMM rate otherwise (mlc's f32 GEMMs run without
// TF32); attention's 2 B H Sq Sk (D + Dv) forward (QK^T and PV), halved when
// causal, and 2.5 times that backward (QK^T again, dV, dP, dQ, dK) (a
// variable-length batch at its upper bound, the padded form's), at the
// bf16 rate when its products are bf16 and at the CUDA-core f32 rate
// otherwise; every other kernel about one FLOP per scalar op and element, at
// the CUDA-core rate (never the binding limit: 60 TFLOP/s over 4.3 TB/s is
// 14 FLOPs per byte).
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Roofline.h"

#include "compiler/tools/Collectives.h"
#include "compiler/tools/MemoryPlan.h"

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/templates/TemplateModel.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/plan/PlanDialect.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <tuple>

using namespace mlir;
using llvm::formatv;
using llvm::StringRef;

namespace mlc::tool {
namespace {

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

/// The links of an HGX H100/H200 node, which both presets and a device
/// given whole start from (bench/scaling_model.py's numbers): NVLink 4,
/// 900 GB/s per GPU both directions together (450 GB/s each way, the
/// H200 and H100 SXM datasheets), of which NCCL's ring reaches about 85%;
/// one ConnectX-7 NDR InfiniBand NIC per GPU, 400 Gb/s = 50 GB/s, at 90%;
/// 3 us per collective step inside the node, 8 us across; 8 GPUs a node.
void setDefaultLinks(RooflineDevice &d) {
  d.nvlink = 0.85 * 450e9, d.ib = 0.9 * 50e9;
  d.nvlinkLatency = 3e-6, d.ibLatency = 8e-6;
  d.gpusPerNode = 8;
  d.commBasis = "NVLink 4: 450 GB/s per GPU and direction (datasheet) at 85%; InfiniBand "
                "NDR: one 400 Gb/s NIC per GPU at 90%; 3 / 8 us per step; 8 GPUs a node";
}

/// The presets. h200: the copy bandwidth and bf16 GEMM rate measured on
/// the H200 this project benchmarks on; the f32 rates are an assumption,
/// 0.9 of its datasheet's 67 TFLOP/s. h100 (SXM): its datasheet's 3.35 TB/s
/// and dense bf16 derated as the H200's measured figures are (0.86 and 0.80
/// of its datasheet), f32 as the H200's (the same 67 TFLOP/s datasheet).
RooflineDevice preset(StringRef name) {
  RooflineDevice d;
  d.name = name.str();
  if (name == "h200") {
    d.bandwidth = 4.3e12, d.bf16 = 790e12, d.f32Gemm = 60e12, d.f32 = 60e12;
    d.peakBf16 = 989.4e12, d.peakF32 = 66.9e12;
    d.basis = "H200: 4.3 TB/s copy and 790 TFLOP/s bf16 GEMM measured; f32 60 TFLOP/s "
              "assumed (GEMMs without TF32, CUDA cores); MFU over the datasheet's dense "
              "989.4 (bf16) / 66.9 (f32) TFLOP/s";
  } else if (name == "h100") {
    d.bandwidth = 2.88e12, d.bf16 = 790e12, d.f32Gemm = 60e12, d.f32 = 60e12;
    d.peakBf16 = 989.4e12, d.peakF32 = 66.9e12;
    d.basis = "H100 SXM: datasheet 3.35 TB/s, 989 TFLOP/s bf16, 67 TFLOP/s f32, derated as "
              "the H200's measured figures (not measured on an H100)";
  } else {
    d.name.clear();
  }
  setDefaultLinks(d);
  return d;
}

} // namespace

llvm::Expected<RooflineDevice> parseRooflineDevice(StringRef spec) {
  llvm::SmallVector<StringRef> parts;
  spec.split(parts, ',', -1, false);
  RooflineDevice d;
  size_t first = 0;
  if (!parts.empty() && !parts[0].contains('=')) {
    d = preset(parts[0].trim().lower());
    if (d.name.empty())
      return error("--roofline: unknown device '" + parts[0].trim() +
                   "' (known: h200, h100; or bw=TB/s,bf16=TFLOP/s,f32=TFLOP/s[,...])");
    first = 1;
  } else {
    d.name = "custom";
    setDefaultLinks(d);
  }
  bool f32GemmGiven = false, peakBf16Given = false, peakF32Given = false;
  for (size_t i = first; i < parts.size(); ++i) {
    auto [key, text] = parts[i].split('=');
    key = key.trim(), text = text.trim();
    double v = 0;
    if (!parts[i].contains('=') || text.getAsDouble(v) || !(v >= 0) || v > 1e9)
      return error("--roofline: '" + parts[i] + "' is not key=number");
    if (key == "bw")
      d.bandwidth = v * 1e12;
    else if (key == "bf16")
      d.bf16 = v * 1e12;
    else if (key == "f32")
      d.f32 = v * 1e12;
    else if (key == "f32gemm")
      d.f32Gemm = v * 1e12, f32GemmGiven = true;
    else if (key == "peak-bf16")
      d.peakBf16 = v * 1e12, peakBf16Given = true;
    else if (key == "peak-f32")
      d.peakF32 = v * 1e12, peakF32Given = true;
    else if (key == "launch")
      d.launch = v * 1e-6;
    else if (key == "nvlink")
      d.nvlink = v * 1e9, d.commBasis = "as given";
    else if (key == "ib")
      d.ib = v * 1e9, d.commBasis = "as given";
    else if (key == "node" && v >= 1 && v == double(int64_t(v)))
      d.gpusPerNode = int64_t(v);
    else if (key == "node")
      return error("--roofline: node=" + text + " is not a number of GPUs");
    else
      return error("--roofline: unknown key '" + key +
                   "' (bw, bf16, f32, f32gemm, peak-bf16, peak-f32, launch, nvlink, ib, "
                   "node)");
  }
  if (first == 0) {
    if (!f32GemmGiven)
      d.f32Gemm = d.f32;
    if (!peakBf16Given)
      d.peakBf16 = d.bf16;
    if (!peakF32Given)
      d.peakF32 = d.f32Gemm;
    d.basis = "as given";
  } else if (parts.size() > 1) {
    d.basis += "; overridden: " + spec.split(',').second.str();
  }
  for (auto [what, v] : {std::pair<const char *, double>{"bw", d.bandwidth},
                         {"bf16", d.bf16},
                         {"f32", d.f32},
                         {"f32gemm", d.f32Gemm},
                         {"peak-bf16", d.peakBf16},
                         {"peak-f32", d.peakF32},
                         {"nvlink", d.nvlink},
                         {"ib", d.ib}})
    if (!(v > 0)) // MFU divides by the peaks: a zero one is as wrong as a zero rate
      return error(llvm::Twine("--roofline: the device needs a positive ") + what +
                   " (TB/s for bw, GB/s for nvlink and ib, TFLOP/s otherwise)");
  return d;
}

namespace {

//===----------------------------------------------------------------------===//
// Bytes and FLOPs of one launch
//===----------------------------------------------------------------------===//

struct Cost {
  double bytes = 0, flops = 0;
  /// The FLOP rate that applies: 0 for the CUDA-core rate.
  double peak = 0;
  bool fromBuffers = false;
};

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

double bytesOf(Type t) { return double(plan::elementBytes(t)); }
Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// A kernel with a body: pointwise, rows (a LayerNorm with its prologue),
/// column_reduction, reduction and optimizer over flat-buffer segments.
/// Each access moves its extent; each scalar op is a FLOP per element of
/// the iteration space (a LayerNorm about 8).
llvm::Expected<Cost> bodyCost(plan::KernelOp k) {
  lowering::ParamsReader r(k.getParamsAttr(), k.getSymName());
  lowering::Shape dims = r.i64s("dims");
  const bool columns = k.getKind() == plan::KernelTemplate::column_reduction;
  const int64_t lead = columns ? r.i64("lead") : 0;
  if (auto err = r.error())
    return std::move(err);
  const double elements = double(product(dims));
  Cost c;
  for (Operation &op : k.getBody().front()) {
    if (auto l = dyn_cast<plan::LoadOp>(op)) {
      c.bytes += lowering::accessExtent(dims, l.getStrides()) * bytesOf(elementOf(l.getValue()));
    } else if (auto s = dyn_cast<plan::StoreOp>(op)) {
      c.bytes += lowering::accessExtent(dims, s.getStrides()) * bytesOf(elementOf(s.getValue()));
    } else if (auto n = dyn_cast<plan::NormalizeOp>(op)) {
      c.bytes += lowering::accessExtent(dims, n.getStrides()) * bytesOf(n.getElement());
      c.flops += 8 * elements;
    } else if (auto a = dyn_cast<plan::AccumulateOp>(op)) {
      // A column reduction's sums, one per column; the norm's one f64.
      const int64_t sums =
          columns ? product(ArrayRef<int64_t>(dims).drop_front(std::min<size_t>(lead, dims.size())))
                  : 1;
      c.bytes += sums * bytesOf(elementOf(a.getValue()));
      c.flops += elements;
    } else if (isa<ScalarOpInterface>(op)) {
      c.flops += elements;
    }
  }
  return c;
}

/// The micro-batch's rows: the integer input [B, S] (input_ids), if any.
struct MicroBatch {
  int64_t rows = 0, length = 0;
};

/// One launch of kernel `k`: its cost from the IR (a body's ops, a
/// template's model: TemplateAttrInterface::getCost), or, for a kernel that
/// is neither, its buffers' bytes, each once.
llvm::Expected<Cost> launchCost(plan::KernelOp k, plan::LaunchOp launch,
                                const RooflineDevice &d, const MicroBatch &mb) {
  if (!k.getBody().empty())
    return bodyCost(k);
  if (plan::TemplateAttrInterface t = k.getKernelTemplateAttr()) {
    auto known = t.getCost(k, plan::CostContext{mb.rows, mb.length});
    if (!known)
      return known.takeError();
    Cost c;
    c.bytes = known->bytes, c.flops = known->flops;
    c.peak = known->bf16Products ? d.bf16 : 0;
    return c;
  }
  Cost c;
  c.fromBuffers = true;
  llvm::DenseSet<Value> seen;
  for (Value v : launch.getOperands())
    if (seen.insert(v).second)
      c.bytes += double(plan::bufferBytes(v));
  return c;
}

/// One GEMM: 2 m n k FLOPs per batch matrix; the operands read once (a
/// broadcast operand, batch stride 0, once for all), the result written,
/// the bias read and GELU's pre-activation written; an accumulating GEMM
/// reads its result too (beta = 1).
Cost gemmCost(plan::GemmOp g, int64_t capacity, const RooflineDevice &d, std::string &name) {
  auto dim = [&](int64_t v) { return v < 0 ? capacity : v; };
  const int64_t m = dim(g.getM()), n = g.getN(), k = dim(g.getK());
  ArrayRef<int64_t> batch = g.getBatch();
  const double batches = double(product(batch));
  Type lt = elementOf(g.getLhs()), rt = elementOf(g.getRhs()), ot = elementOf(g.getOut());
  Cost c;
  c.bytes = double(lowering::accessExtent(batch, g.getLhsStrides())) * m * k * bytesOf(lt) +
            double(lowering::accessExtent(batch, g.getRhsStrides())) * k * n * bytesOf(rt) +
            batches * m * n * bytesOf(ot);
  if (g.getAccumulate())
    c.bytes += batches * m * n * bytesOf(ot);
  if (g.getBias())
    c.bytes += n * bytesOf(elementOf(g.getBias()));
  if (g.getPre())
    c.bytes += batches * m * n * bytesOf(elementOf(g.getPre()));
  c.flops = 2.0 * batches * m * n * k;
  const bool bf16 = lt.isBF16() && rt.isBF16();
  c.peak = bf16 ? d.bf16 : d.f32Gemm;
  std::string b;
  for (int64_t x : batch)
    b += std::to_string(x) + "x";
  name = formatv("gemm {0}{1}x{2}x{3}{4}{5}", b, m, n, k,
                 g.getTransposeLhs() ? " tA" : "", g.getTransposeRhs() ? " tB" : "")
             .str();
  auto spell = [](Type t) {
    std::string text;
    llvm::raw_string_ostream os(text);
    t.print(os);
    return text;
  };
  name += " " + spell(lt) + (lt == rt ? "" : "/" + spell(rt)) + "->" + spell(ot);
  if (g.getAccumulate())
    name += " +=";
  if (g.getBias())
    name += " +bias";
  if (g.getPre())
    name += " +gelu";
  return c;
}

std::string groupOf(plan::KernelOp k, StringRef fn) {
  if (fn != "train_step" && fn != "forward")
    return "optimizer";
  switch (k.getKind()) {
  case plan::KernelTemplate::attention:
    return "attention";
  case plan::KernelTemplate::rows:
  case plan::KernelTemplate::column_reduction:
  case plan::KernelTemplate::reduction:
    return "rows";
  default:
    return "pointwise";
  }
}

/// The table's rows in first-launch order: kernels alike (a layer's copy
/// of another's, differing in a dropout seed: the same template, bytes and
/// FLOPs per launch) share one row; GEMM shapes and kernels read from their
/// buffers stay apart.
std::vector<RooflineItem> rowsOf(std::map<std::string, RooflineItem> &items,
                                 const std::vector<std::string> &order) {
  std::vector<RooflineItem> rows;
  std::map<std::tuple<std::string, std::string, double, double>, size_t> alike;
  for (const std::string &name : order) {
    RooflineItem &it = items[name];
    auto key = std::make_tuple(it.group, it.kind, it.bytes / it.launches, it.flops / it.launches);
    auto [at, fresh] = alike.try_emplace(key, rows.size());
    if (fresh || it.group == "gemm" || it.fromBuffers) {
      if (it.group != "gemm")
        it.kernels = {name};
      rows.push_back(it);
      continue;
    }
    RooflineItem &row = rows[at->second];
    row.kernels.push_back(name);
    row.launches += it.launches;
    row.bytes += it.bytes, row.flops += it.flops, row.seconds += it.seconds;
    row.name = row.kernels.front() + " +" + std::to_string(row.kernels.size() - 1) + " alike";
  }
  return rows;
}

/// The timeline of a plan for T (from the module) x `ranks` GPUs: the
/// tensor-parallel group on NVLink while it fits a node, the data-parallel
/// group while all T x D ranks do, else on InfiniBand.
CommTimeline timelineOf(ModuleOp module, const RooflineDevice &d, int64_t ranks,
                        Roofline &out) {
  out.tensorParallel = tensorParallelSize(module);
  out.dataParallel = std::max<int64_t>(ranks, 1);
  const Link nvlink{"NVLink", d.nvlink, d.nvlinkLatency};
  const Link ib{"InfiniBand", d.ib, d.ibLatency};
  const Link &tp = out.tensorParallel <= d.gpusPerNode ? nvlink : ib;
  const Link &dp = out.tensorParallel * out.dataParallel <= d.gpusPerNode ? nvlink : ib;
  out.tpLink = tp.name, out.dpLink = dp.name;
  return CommTimeline(out.tensorParallel, tp, out.dataParallel, dp);
}

} // namespace

llvm::Expected<Roofline> rooflineOf(ModuleOp module, const RooflineDevice &d, int64_t ranks) {
  Roofline out;
  out.device = d;
  int64_t capacity = 0;
  if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
    capacity = cap.getInt();
  int64_t inputTokens = 0; // the largest integer input: input_ids, labels [B, S]
  MicroBatch mb;
  int64_t split = 0; // this rank's elements of the tensor-parallel split parameters

  llvm::StringMap<plan::KernelOp> kernels;
  llvm::StringMap<plan::FuncOp> funcs;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto k = dyn_cast<plan::KernelOp>(op))
      kernels[k.getSymName()] = k;
    else if (auto f = dyn_cast<plan::FuncOp>(op))
      funcs[f.getSymName()] = f;
    else if (auto p = dyn_cast<plan::ParamOp>(op))
      out.parameters += product(p.getShape()), split += p->hasAttr("mlc.tp_split")
                                                            ? product(p.getShape())
                                                            : 0;
    else if (auto in = dyn_cast<plan::InputOp>(op); in && isa<IntegerType>(in.getElement())) {
      inputTokens = std::max(inputTokens, product(in.getShape()));
      if (in.getShape().size() == 2 && in.getShape()[0] > 0 && in.getShape()[1] > 0)
        mb = {in.getShape()[0], in.getShape()[1]};
    }
  }
  // Packed documents' cu_seqlens [B S + 1] is no token count: the rows are.
  out.tokens = capacity > 0 ? capacity : mb.rows > 0 ? mb.rows * mb.length : inputTokens;
  if (funcs.count("train_step"))
    out.functions = {"train_step", "grad_norm", "optimizer"};
  else if (funcs.count("forward"))
    out.functions = {"forward"};
  else
    return error("--roofline: the plan has neither @train_step nor @forward");
  // The distributed optimizer's buckets (tag -> gradients reduce-scattered):
  // a launch with a `shard` runs over this rank's ceil(c / R) of bucket c
  // (of every bucket: shard -1), not over the flat buffers its body spans.
  std::map<int64_t, int64_t> buckets;
  for (const std::string &fn : out.functions)
    if (auto f = funcs.lookup(fn))
      for (auto rs : f.getBody().front().getOps<plan::ReduceScatterStartOp>())
        buckets[rs.getTag()] = rs.getCount();
  const int64_t r = std::max<int64_t>(ranks, 1);
  auto shardFraction = [&](int64_t tag) {
    int64_t elements = 0;
    for (auto [t, count] : buckets)
      if (tag < 0 || t == tag)
        elements += (count + r - 1) / r;
    return out.parameters > 0 && elements > 0
               ? std::min(1.0, double(elements) / double(out.parameters))
               : 1.0;
  };
  std::map<std::string, RooflineItem> items;
  std::vector<std::string> order; // first launch first
  double attentionForward = 0; // for MFU: forward attention, no causal halving
  CommTimeline comm = timelineOf(module, d, ranks, out);
  auto add = [&](const std::string &name, const std::string &kind, const std::string &group,
                 const Cost &c) {
    RooflineItem &it = items[name];
    if (it.name.empty())
      order.push_back(name);
    it.name = name, it.kind = kind, it.group = group;
    it.fromBuffers = c.fromBuffers;
    ++it.launches;
    it.bytes += c.bytes, it.flops += c.flops;
    const double memory = c.bytes / d.bandwidth, compute = c.flops / (c.peak ? c.peak : d.f32);
    it.seconds += std::max(memory, compute);
    it.computeBound = compute > memory;
    comm.compute(std::max(memory, compute) + d.launch);
  };
  for (const std::string &fn : out.functions) {
    auto f = funcs.lookup(fn);
    if (!f)
      continue;
    comm.enterFunction(lossStepOf(f));
    for (Operation &op : f.getBody().front()) {
      comm.step(op);
      if (auto g = dyn_cast<plan::GemmOp>(op)) {
        std::string name;
        Cost c = gemmCost(g, capacity, d, name);
        out.bf16 = out.bf16 || elementOf(g.getLhs()).isBF16();
        add(name, "gemm", "gemm", c);
      } else if (auto l = dyn_cast<plan::LaunchOp>(op)) {
        plan::KernelOp k = kernels.lookup(l.getKernel());
        if (!k)
          return error("--roofline: @" + fn + " launches @" + l.getKernel() +
                       ", which the plan does not declare");
        auto c = launchCost(k, l, d, mb);
        if (!c)
          return c.takeError();
        if (auto shard = l.getShard()) {
          const double f = shardFraction(*shard);
          c->bytes *= f, c->flops *= f;
        }
        std::string kind = plan::stringifyKernelTemplate(k.getKind()).str();
        if (auto t = k.getKernelTemplateAttr())
          kind += " " + t.getTemplateName().str();
        add(k.getSymName().str(), kind, groupOf(k, fn), *c);
        auto attention =
            dyn_cast_or_null<plan::AttentionTemplateAttr>(k.getKernelTemplateAttr());
        if (fn == out.functions.front() && attention) {
          lowering::AttentionKernel a = lowering::decodeAttention(attention);
          if (!a.backward)
            attentionForward +=
                lowering::attentionForwardFlops(a, plan::CostContext{mb.rows, mb.length});
          out.attentionUpperBound = out.attentionUpperBound || a.varlen;
        }
      }
    }
  }
  for (const std::string &name : order) {
    out.seconds += items[name].seconds;
    out.launches += items[name].launches;
  }
  out.items = rowsOf(items, order);
  out.launchSeconds = out.launches * d.launch;
  out.seconds += out.launchSeconds;
  std::stable_sort(out.items.begin(), out.items.end(),
                   [](const RooflineItem &a, const RooflineItem &b) {
                     return a.seconds > b.seconds;
                   });
  // The group's model FLOPs over its T GPUs: the whole model's parameters
  // (each split one's slice T times), the rank's own heads' attention.
  const bool training = out.functions.size() > 1;
  out.parameters += (out.tensorParallel - 1) * split;
  out.modelFlops = (training ? 6.0 : 2.0) * double(out.parameters) * double(out.tokens) /
                       double(out.tensorParallel) +
                   (training ? 3 : 1) * attentionForward;
  out.tpComms = comm.tp, out.dpComms = comm.dp;
  out.tpSeconds = comm.tpSeconds, out.dpSeconds = comm.dpSeconds;
  out.tpExposed = comm.tpExposed, out.tpAsyncSeconds = comm.tpAsyncSeconds;
  out.tpAsyncBytes = comm.tpAsyncBytes;
  out.dpExposed = comm.dpExposed;
  out.peak = out.bf16 ? d.peakBf16 : d.peakF32;
  return out;
}

} // namespace mlc::tool
