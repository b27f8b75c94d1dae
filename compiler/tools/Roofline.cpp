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
// of the bucket (of every bucket, shard -1); the reduce-scatters and
// all-gathers themselves are not in the step (docs/scaling.md models them).
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

#include "compiler/codegen/KernelParams.h"
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
    else
      return error("--roofline: unknown key '" + key +
                   "' (bw, bf16, f32, f32gemm, peak-bf16, peak-f32, launch)");
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
                         {"peak-f32", d.peakF32}})
    if (!(v > 0)) // MFU divides by the peaks: a zero one is as wrong as a zero rate
      return error(llvm::Twine("--roofline: the device needs a positive ") + what +
                   " (TB/s for bw, TFLOP/s otherwise)");
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

/// The elements an access reaches: the dims it strides along (a stride of
/// 0 reads one element for the whole dimension).
int64_t extent(ArrayRef<int64_t> dims, ArrayRef<int64_t> strides) {
  int64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (d >= strides.size() || strides[d] != 0)
      n *= dims[d];
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
      c.bytes += extent(dims, l.getStrides()) * bytesOf(elementOf(l.getValue()));
    } else if (auto s = dyn_cast<plan::StoreOp>(op)) {
      c.bytes += extent(dims, s.getStrides()) * bytesOf(elementOf(s.getValue()));
    } else if (auto n = dyn_cast<plan::NormalizeOp>(op)) {
      c.bytes += extent(dims, n.getStrides()) * bytesOf(n.getElement());
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

/// `copies` and `iota`: per nest, its destination written and (copies) its
/// source read, each over the elements its strides reach; `zero_bytes`
/// cleared first.
llvm::Expected<Cost> nestsCost(plan::KernelOp k, bool iota, double el) {
  Cost c;
  DictionaryAttr params = k.getParamsAttr();
  auto nests = params.getAs<ArrayAttr>("nests");
  if (!nests)
    return error("kernel @" + k.getSymName() + ": no nests");
  if (auto zero = params.getAs<IntegerAttr>("zero_bytes"))
    c.bytes += double(zero.getInt());
  for (Attribute a : nests) {
    lowering::ParamsReader r(dyn_cast<DictionaryAttr>(a), k.getSymName());
    lowering::Shape dims = r.i64s("dims"), dst = r.i64s("dst_strides"),
                    src = r.i64s("src_strides");
    if (auto err = r.error())
      return std::move(err);
    c.bytes += extent(dims, dst) * el;
    if (!iota)
      c.bytes += extent(dims, src) * el;
  }
  return c;
}

/// The micro-batch's rows: the integer input [B, S] (input_ids), if any.
struct MicroBatch {
  int64_t rows = 0, length = 0;
};

/// The longest sequence a variable-length attention's batch can hold:
/// packed documents (a slot per token of the micro-batch's B x S, each
/// document cut at its row's end) S; otherwise (unpadded BERT: B sequences
/// sharing B x S tokens) the token capacity over the sequences.
double longestSequence(const lowering::AttentionKernel &a, const MicroBatch &mb) {
  if (mb.rows > 0 && mb.rows * mb.length == a.tokenCapacity && a.batch > mb.rows)
    return double(mb.length);
  return double(a.tokenCapacity) / double(a.batch);
}

/// Attention's forward FLOPs, 2 B H Sq Sk (D + Dv) (QK^T and PV), before
/// causal halving. A variable-length batch's depend on the lengths each
/// step brings, which the plan does not know: its upper bound, every
/// sequence as long as it can be (as many as the token capacity holds),
/// which is the padded form's count.
double attentionForwardFlops(const lowering::AttentionKernel &a, const MicroBatch &mb) {
  double batch = double(a.batch), sq = double(a.seqQ), sk = double(a.seqK);
  if (a.varlen && a.batch > 0) {
    sq = sk = longestSequence(a, mb);
    batch = std::min(batch, std::floor(double(a.tokenCapacity) / sq));
  }
  return 2.0 * batch * a.heads * sq * sk * (a.headDim + a.valueDim);
}

/// Attention (AttentionKernel's arguments): each tensor once, [B, H, S, D]
/// (variable length: the token capacity x H x D); the mask over the
/// dimensions its strides reach; cu_seqlens; the rotary tables.
llvm::Expected<Cost> attentionCost(plan::KernelOp k, const RooflineDevice &d,
                                   const MicroBatch &mb) {
  lowering::ParamsReader r(k.getParamsAttr(), k.getSymName());
  lowering::AttentionKernel a = lowering::decodeAttention(r);
  if (auto err = r.error())
    return std::move(err);
  if (a.args.size() < size_t(a.query + 3))
    return error("kernel @" + k.getSymName() + ": attention without q, k, v");
  // Q, O and their gradients have `heads` heads; K, V and theirs `kv_heads`
  // (grouped-query attention reads each kv head for a group of query heads).
  const double perBatch = a.varlen ? 1 : a.batch;
  const double rowsQ = a.varlen ? double(a.tokenCapacity) : double(a.seqQ);
  const double rowsK = a.varlen ? double(a.tokenCapacity) : double(a.seqK);
  const double qSide = perBatch * a.heads * rowsQ,
               kSide = perBatch * (a.kvHeads > 0 ? a.kvHeads : a.heads) * rowsK;
  // Per tensor argument: rows (over all heads) x width, in argument order.
  std::vector<std::pair<double, double>> shapes;
  if (a.backward)
    shapes = {{qSide, double(a.headDim)}, {kSide, double(a.headDim)},
              {kSide, double(a.valueDim)}, {qSide, double(a.valueDim)}};
  else
    shapes = {{qSide, double(a.valueDim)}};
  shapes.push_back({qSide, double(a.headDim)});
  shapes.push_back({kSide, double(a.headDim)});
  shapes.push_back({kSide, double(a.valueDim)});
  Cost c;
  for (size_t i = 0; i < shapes.size() && i < a.args.size(); ++i)
    c.bytes += shapes[i].first * shapes[i].second * bytesOf(a.args[i].element);
  size_t next = a.query + 3;
  if (a.mask && next < a.args.size()) {
    c.bytes += extent({a.batch, a.heads, a.seqQ, a.seqK}, a.maskStrides) *
               bytesOf(a.args[next].element);
    ++next;
  }
  if (a.cuSlot >= 0 && size_t(a.cuSlot) < a.args.size())
    c.bytes += (a.batch + 1) * bytesOf(a.args[a.cuSlot].element);
  // The rotary tables: cos and sin, R wide, over the rows their strides
  // reach (positions, per sequence or per token).
  if (a.rotaryDim > 0 && size_t(a.rotarySlot + 1) < a.args.size()) {
    const double rows = a.varlen ? (a.rotaryRow ? double(a.tokenCapacity) : 1)
                                 : (a.rotaryBatch ? double(a.batch) : 1) *
                                       (a.rotaryRow ? double(a.seqQ) : 1);
    c.bytes += 2 * rows * double(a.rotaryDim) * bytesOf(a.args[a.rotarySlot].element);
  }
  double forward = attentionForwardFlops(a, mb);
  if (a.causal)
    forward /= 2;
  c.flops = a.backward ? 2.5 * forward : forward;
  c.peak = a.bf16Products ? d.bf16 : d.f32;
  return c;
}

/// A row, reduction, gather or fill template: its arguments from its
/// parameters (KernelTarget.h states each template's arguments), or
/// nothing for a template the model does not know.
llvm::Expected<std::optional<Cost>> templateCost(plan::KernelOp k, StringRef t) {
  lowering::ParamsReader r(k.getParamsAttr(), k.getSymName());
  const double el = bytesOf(r.type("element"));
  Cost c;
  auto rowsAndColumns = [&](double &R, double &C) {
    R = double(r.rows().count), C = double(r.i64("columns"));
  };
  double R = 0, C = 0;
  if (t == "fill") {
    c.bytes = r.i64("count") * el;
  } else if (t == "constant") {
    auto dense = dyn_cast_or_null<DenseElementsAttr>(r.attr("values"));
    c.bytes = (dense ? dense.getNumElements() : 0) * el;
  } else if (t == "rotary_table") { // one cos or sin and a product per element
    auto inv = dyn_cast_or_null<DenseElementsAttr>(r.attr("inv_freq"));
    const double n = double(r.i64("positions")) * 2 * (inv ? inv.getNumElements() : 0);
    c.bytes = n * el, c.flops = 2 * n;
  } else if (t == "softmax") { // y = softmax(x)
    rowsAndColumns(R, C);
    c.bytes = 2 * R * C * el, c.flops = 5 * R * C;
  } else if (t == "softmax_grad") { // dx from dy, y
    rowsAndColumns(R, C);
    c.bytes = 3 * R * C * el, c.flops = 3 * R * C;
  } else if (t == "layer_norm") { // y from x, weight, bias
    rowsAndColumns(R, C);
    c.bytes = (2 * R * C + 2 * C) * el, c.flops = 8 * R * C;
  } else if (t == "layer_norm_grad") {
    // dx per row from dy, x, weight; dw, db per column from dy, x again.
    rowsAndColumns(R, C);
    c.bytes = (5 * R * C + 3 * C) * el, c.flops = 14 * R * C;
  } else if (t == "cross_entropy") { // the loss from logits and labels
    rowsAndColumns(R, C);
    c.bytes = R * C * el + R * bytesOf(r.type("labels")) + el, c.flops = 4 * R * C;
  } else if (t == "cross_entropy_with_grad") { // and its gradient, in one pass
    rowsAndColumns(R, C);
    c.bytes = R * C * (el + bytesOf(r.type("grad"))) + R * bytesOf(r.type("labels")) + el;
    c.flops = 6 * R * C;
  } else if (t == "cross_entropy_grad") {
    rowsAndColumns(R, C);
    c.bytes = 2 * R * C * el + R * bytesOf(r.type("labels")), c.flops = 5 * R * C;
  } else if (t == "embedding") { // rows gathered from the table
    R = double(r.rows().count), C = double(r.i64("columns"));
    c.bytes = 2 * R * C * el + R * bytesOf(r.type("ids"));
  } else if (t == "embedding_grad") {
    // The table zeroed, then each token's row added: grad read, table
    // rows read and written.
    R = double(r.rows().count), C = double(r.i64("columns"));
    // (With accumulate the table is not zeroed: the rows add to it as it is.)
    c.bytes = ((r.flag("accumulate") ? 0 : double(r.i64("vocab")) * C) + 3 * R * C) * el +
              R * bytesOf(r.type("ids"));
    c.flops = R * C;
  } else if (t == "reduction") {
    lowering::ReductionKernel red = lowering::decodeReduction(r);
    double in = 0, out = 0;
    if (red.shape == lowering::ReductionKernel::General)
      out = double(product(red.keptDims)), in = out * double(product(red.reducedDims));
    else if (red.shape == lowering::ReductionKernel::Columns)
      out = double(red.length), in = double(red.rows.count) * red.length;
    else
      out = double(red.rows.count), in = out * red.length;
    c.bytes = (in + out) * bytesOf(red.element), c.flops = in;
  } else {
    return std::optional<Cost>();
  }
  if (auto err = r.error())
    return std::move(err);
  return std::optional<Cost>(c);
}

/// One launch of kernel `k`: its cost from the IR, or (a kernel given as
/// text, a template the model does not know) its buffers' bytes, each once.
llvm::Expected<Cost> launchCost(plan::KernelOp k, plan::LaunchOp launch,
                                const RooflineDevice &d, const MicroBatch &mb) {
  std::optional<StringRef> t = k.getTemplateName();
  llvm::Expected<Cost> known = Cost();
  bool modelled = true;
  if (!k.getBody().empty()) {
    known = bodyCost(k);
  } else if (t && (*t == "copies" || *t == "iota")) {
    lowering::ParamsReader r(k.getParamsAttr(), k.getSymName());
    double el = bytesOf(r.type("element"));
    if (auto err = r.error())
      return std::move(err);
    known = nestsCost(k, *t == "iota", el);
  } else if (t && *t == "attention") {
    known = attentionCost(k, d, mb);
  } else if (t) {
    auto c = templateCost(k, *t);
    if (!c)
      return c.takeError();
    modelled = c->has_value();
    if (modelled)
      known = **c;
  } else {
    modelled = false;
  }
  if (!known || modelled)
    return known;
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
  c.bytes = double(extent(batch, g.getLhsStrides())) * m * k * bytesOf(lt) +
            double(extent(batch, g.getRhsStrides())) * k * n * bytesOf(rt) +
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

} // namespace

llvm::Expected<Roofline> rooflineOf(ModuleOp module, const RooflineDevice &d, int64_t ranks) {
  Roofline out;
  out.device = d;
  int64_t capacity = 0;
  if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
    capacity = cap.getInt();
  int64_t inputTokens = 0; // the largest integer input: input_ids, labels [B, S]
  MicroBatch mb;

  llvm::StringMap<plan::KernelOp> kernels;
  llvm::StringMap<plan::FuncOp> funcs;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto k = dyn_cast<plan::KernelOp>(op))
      kernels[k.getSymName()] = k;
    else if (auto f = dyn_cast<plan::FuncOp>(op))
      funcs[f.getSymName()] = f;
    else if (auto p = dyn_cast<plan::ParamOp>(op))
      out.parameters += product(p.getShape());
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
  };
  for (const std::string &fn : out.functions) {
    auto f = funcs.lookup(fn);
    if (!f)
      continue;
    for (Operation &op : f.getBody().front()) {
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
        if (auto t = k.getTemplateName())
          kind += " " + t->str();
        add(k.getSymName().str(), kind, groupOf(k, fn), *c);
        if (fn == out.functions.front() && k.getKind() == plan::KernelTemplate::attention) {
          lowering::ParamsReader r(k.getParamsAttr(), k.getSymName());
          lowering::AttentionKernel a = lowering::decodeAttention(r);
          if (!a.backward)
            attentionForward += attentionForwardFlops(a, mb);
          out.attentionUpperBound = out.attentionUpperBound || a.varlen;
          llvm::consumeError(r.error());
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
  const bool training = out.functions.size() > 1;
  out.modelFlops = (training ? 6.0 : 2.0) * double(out.parameters) * double(out.tokens) +
                   (training ? 3 : 1) * attentionForward;
  out.peak = out.bf16 ? d.peakBf16 : d.peakF32;
  return out;
}

} // namespace mlc::tool
