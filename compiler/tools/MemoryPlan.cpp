//===- MemoryPlan.cpp - what a rank allocates, stated from the plan -------===//
//
// The model (MemoryPlan.h), item by item, as each backend allocates:
//
//   parameters, gradients   P x dtype each (P: the plan.params' elements)
//   moments                 2 x P x dtype (AdamW's m and v); under the
//                           distributed optimizer 2 x S x dtype, S the
//                           largest rank's shards: ceil(c / R) of every
//                           reduce-scattered bucket of c (every rank
//                           allocates that much)
//   gradient_sums           0: allocated only by a run that accumulates
//                           micro-batches (--global-batch above micro-batch
//                           x ranks), then P x dtype when a function binds
//                           grad_sum; stated apart (accumulationSums)
//   arena                   max over plan.funcs of arena_bytes (CPU: at
//                           least 64 and a multiple of it; CUDA: at least 256)
//   inputs                  each plan.input at the token capacity
//   communication           CUDA: the bucket norms (256 f64)
//   gemm_workspace          CUDA: cuBLASLt's 32 MiB
//   runtime                 each plan.scalars (f64); CUDA also the kernel
//                           context, error words, the largest cuda.scratch,
//                           each sharded launch's own context and windows
//                           and per function a table of its launches' buffer
//                           pointers (8 bytes each)
//
// CUDA allocations are at least 256 bytes each (contract/DeviceMemory.h).
//
// Saved for backward: the @train_step arena slices that hold a value
// written before its loss step (the first step that writes the buffer
// plan.output "loss" returns) and read after it, before anything from the
// loss step on overwrites the whole slice. Autodiff appends backward after
// the forward ops and the lowering keeps that order, so the loss step
// divides the two. What the loss step itself writes (the loss, a fused
// cross-entropy's gradient, written in place over the logits) is backward's.
// Saved slices computed from the parameters alone (under --dtype bf16, the
// weights' bf16 casts that backward's GEMMs read again) are weight copies,
// a line of their own.
//
// Per layer: a step belongs to the highest layer whose parameters it binds
// (the first all-digit component of a parameter's name: `h.3.attn...`,
// `model.layers.3...`, `bert.encoder.layer.3...`), to "outside the layers"
// when it binds only others (embeddings, final norm, head), and otherwise to
// the highest group among the buffers it reads; a slice belongs to the
// step that first touches it. It is an attribution, not a fact of the plan:
// a LayerNorm fused into the previous layer's residual add counts for the
// layer whose weights it applies.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/MemoryPlan.h"

#include "contract/DeviceMemory.h"
#include "contract/StepFunctions.h"
#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cctype>

using namespace mlir;
using llvm::formatv;
using llvm::StringRef;

namespace mlc::tool {
namespace mem = mlc::memory;
namespace {

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// How a step uses one operand.
struct Access {
  Value buffer;
  bool read = false, write = false;
};

/// The operands a step (plan.launch, plan.gemm, a tensor-parallel
/// collective) reads and writes: a GEMM reads its operands and bias (and its
/// out when it accumulates) and writes its out and GELU pre-activation; a
/// kernel writes what its body stores or its template outputs, and reads
/// what its body loads (a template, what it does not write); an all-gather
/// or reduce-scatter reads its in and writes its out, an all-reduce reads
/// and writes its buffer.
SmallVector<Access> accesses(Operation &step) {
  SmallVector<Access> out;
  if (auto g = dyn_cast<plan::TpAllGatherOp>(step))
    return {{g.getOut(), false, true}, {g.getIn(), true, false}};
  if (auto s = dyn_cast<plan::TpReduceScatterOp>(step))
    return {{s.getOut(), false, true}, {s.getIn(), true, false}};
  if (auto r = dyn_cast<plan::TpAllReduceOp>(step))
    return {{r.getBuffer(), true, true}};
  if (auto g = dyn_cast<plan::GemmOp>(step)) {
    out.push_back({g.getOut(), g.getAccumulate(), true});
    out.push_back({g.getLhs(), true, false});
    out.push_back({g.getRhs(), true, false});
    if (g.getBias())
      out.push_back({g.getBias(), true, false});
    if (g.getPre())
      out.push_back({g.getPre(), false, true});
    return out;
  }
  auto launch = cast<plan::LaunchOp>(step);
  auto k = SymbolTable::lookupNearestSymbolFrom<plan::KernelOp>(
      launch, launch.getKernelAttr());
  for (auto [i, v] : llvm::enumerate(launch.getOperands())) {
    bool write = k && plan::kernelWritesArg(k, int64_t(i));
    bool read = !write;
    if (k && !k.getBody().empty()) {
      read = false;
      k.getBody().walk(
          [&](plan::LoadOp l) { read |= l.getArg() == int64_t(i); });
    }
    out.push_back({v, read, write});
  }
  return out;
}

/// Whether `v` covers all of its arena root's bytes.
bool coversRoot(Value v, plan::ArenaOp root) {
  return plan::arenaRoot(v).second == 0 &&
         plan::bufferBytes(v) >= plan::bufferBytes(root.getBuffer());
}

} // namespace

Operation *lossStepOf(Operation *fn) {
  auto step = dyn_cast<plan::FuncOp>(fn);
  if (!step)
    return nullptr;
  Block &body = step.getBody().front();
  for (auto out : body.getOps<plan::OutputOp>())
    if (out.getName() == "loss")
      if (plan::ArenaOp root = plan::arenaRoot(out.getBuffer()).first)
        for (Operation &op : body)
          if (isa<plan::LaunchOp, plan::GemmOp>(op))
            for (const Access &a : accesses(op))
              if (a.write && plan::arenaRoot(a.buffer).first == root)
                return &op;
  return nullptr;
}

namespace {

/// The activations @train_step saves for backward, by layer group.
///
/// A slice is saved when a value written into it before the loss step is
/// read after it: a step after the loss step reads it before any step from
/// the loss step on has overwritten all of it. (A value written in place
/// over a forward one, a cross-entropy's gradient over the logits, is
/// backward's: the slice is live across the loss step but holds nothing
/// forward saved.)
void savedActivations(plan::FuncOp step, MemoryPlan &p) {
  Block &body = step.getBody().front();
  SmallVector<Operation *> steps;
  // The collectives too: a region's entry under --sequence-parallel writes
  // the gathered tokens that backward's weight gradients may read.
  for (Operation &op : body)
    if (isa<plan::LaunchOp, plan::GemmOp, plan::TpAllGatherOp, plan::TpReduceScatterOp,
            plan::TpAllReduceOp>(op))
      steps.push_back(&op);
  Operation *lossOp = lossStepOf(step);
  int loss = -1;
  for (int s = 0; s < int(steps.size()) && lossOp; ++s)
    if (steps[s] == lossOp)
      loss = s;
  if (loss < 0)
    return;

  // Forward: which slices hold a value written before the loss step, and
  // each slice's layer group (-1 outside the layers), from the first step
  // that touches it.
  // Slices computed from the parameters alone (their bf16 copies under
  // --dtype bf16) are copies of the weights, not activations.
  llvm::DenseMap<Operation *, int64_t> group;
  llvm::DenseSet<Operation *> forward, fromWeights;
  for (int s = 0; s < loss; ++s) {
    int64_t fromParams = -2, fromInputs = -2;
    bool readsParams = false, readsOther = false;
    SmallVector<Access> use = accesses(*steps[s]);
    for (const Access &a : use) {
      Value root = a.buffer;
      while (auto view = root.getDefiningOp<plan::ViewOp>())
        root = view.getSource();
      if (auto bind = root.getDefiningOp<plan::BindOp>()) {
        bool param = bind.getName() != "*" &&
                     bind.getKind() != plan::BufferKind::input &&
                     bind.getKind() != plan::BufferKind::scalars;
        if (param)
          fromParams = std::max(fromParams, layerOfParameterName(bind.getName()));
        // The whole flat parameter buffer (a params fusion: every weight's
        // bf16 copy) is parameters too, of no one layer.
        bool allParams = bind.getName() == "*" && bind.getKind() == plan::BufferKind::param;
        if (a.read)
          (param || allParams ? readsParams : readsOther) = true;
      } else if (plan::ArenaOp r = plan::arenaRoot(a.buffer).first) {
        auto it = group.find(r);
        if (it != group.end())
          fromInputs = std::max(fromInputs, it->second);
        if (a.read)
          (fromWeights.count(r) ? readsParams : readsOther) = true;
      }
    }
    int64_t g = fromParams != -2   ? fromParams
                : fromInputs != -2 ? fromInputs
                                   : -1;
    for (const Access &a : use)
      if (plan::ArenaOp r = plan::arenaRoot(a.buffer).first) {
        group.try_emplace(r, g);
        if (a.write) {
          forward.insert(r);
          if (readsParams && !readsOther)
            fromWeights.insert(r);
        }
      }
  }
  // Backward: a forward slice read before it is overwritten whole.
  llvm::DenseSet<Operation *> overwritten, saved;
  for (int s = loss; s < int(steps.size()); ++s) {
    SmallVector<Access> use = accesses(*steps[s]);
    if (s > loss)
      for (const Access &a : use)
        if (plan::ArenaOp r = plan::arenaRoot(a.buffer).first)
          if (a.read && forward.count(r) && !overwritten.count(r))
            saved.insert(r);
    for (const Access &a : use)
      if (plan::ArenaOp r = plan::arenaRoot(a.buffer).first)
        if (a.write && !a.read && coversRoot(a.buffer, r))
          overwritten.insert(r);
  }

  std::map<int64_t, int64_t> byGroup;
  for (plan::ArenaOp a : body.getOps<plan::ArenaOp>()) {
    if (!saved.count(a))
      continue;
    int64_t bytes =
        (plan::bufferBytes(a.getBuffer()) + 63) / 64 * 64; // as placed
    if (fromWeights.count(a)) {
      p.weightCopies += bytes;
      continue;
    }
    p.saved += bytes;
    byGroup[group.lookup(a)] += bytes;
  }
  for (auto &[g, bytes] : byGroup)
    if (g >= 0)
      p.savedByLayer.push_back({g, bytes});
  if (byGroup.count(-1))
    p.savedByLayer.push_back({-1, byGroup[-1]});
}

/// The most bytes of `fn`'s arena slices live at one step.
int64_t livePeak(plan::FuncOp fn) {
  auto ranges = plan::liveRanges(fn);
  int steps = 0;
  for (auto &[_, r] : ranges)
    steps = std::max(steps, r.last + 1);
  std::vector<int64_t> live(steps + 1, 0);
  for (plan::ArenaOp a : fn.getBody().front().getOps<plan::ArenaOp>()) {
    auto it = ranges.find(a);
    if (it == ranges.end())
      continue;
    int64_t bytes = (plan::bufferBytes(a.getBuffer()) + 63) / 64 * 64;
    for (int s = it->second.first; s <= it->second.last; ++s)
      live[s] += bytes;
  }
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

} // namespace

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}


std::string humanBytes(int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4)
    v /= 1024, ++u;
  if (u == 0)
    return std::to_string(bytes) + " B";
  return formatv(v >= 100  ? "{0:f0} {1}"
                 : v >= 10 ? "{0:f1} {1}"
                           : "{0:f2} {1}",
                 v, units[u]);
}

int64_t MemoryPlan::total(const std::map<std::string, int64_t> &items) const {
  int64_t sum = 0;
  for (auto &[_, bytes] : items)
    sum += bytes;
  return sum;
}

int64_t MemoryPlan::transient() const {
  auto it = cuda.find(mem::kArena);
  return (it == cuda.end() ? 0 : it->second) - saved - weightCopies;
}

llvm::Expected<MemoryPlan> memoryPlanOf(ModuleOp module, int64_t ranks,
                                        const std::string &computeDtype) {
  MemoryPlan p;
  p.ranks = ranks;
  p.computeDtype = computeDtype;
  int64_t capacity = 0;
  if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
    capacity = cap.getInt();
  int64_t paramBytes = 0, inputBytes = 0, scalarsCpu = 0, scalarsCuda = 0,
          arena = 0, shardElements = 0, elementSize = 4;
  bool sharded = false;
  std::vector<int64_t> shardLaunches; // each sharded launch's bucket (-1: all)
  int64_t buckets = 0;
  int64_t scratch = mem::kCudaMinScratch, argTables = 0;
  bool gradSums = false, lowered = false;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto param = dyn_cast<plan::ParamOp>(op)) {
      int64_t n = 1;
      for (int64_t d : param.getShape())
        n *= d;
      p.parameters += n;
      if (param->hasAttr("mlc.tp_split"))
        p.splitParameters += n;
      p.paramDtype = plan::dtypeName(param.getElement());
      paramBytes += n * plan::elementBytes(param.getElement());
      elementSize = plan::elementBytes(param.getElement());
    } else if (auto in = dyn_cast<plan::InputOp>(op)) {
      int64_t n = 1;
      for (int64_t d : in.getShape())
        n *= d < 0 ? capacity : d;
      inputBytes += n * plan::elementBytes(in.getElement());
    } else if (auto sc = dyn_cast<plan::ScalarsOp>(op)) {
      scalarsCpu += sc.getSize() * 8;
      scalarsCuda += mem::cudaAllocation(sc.getSize() * 8);
    } else if (auto k = dyn_cast<plan::KernelOp>(op)) {
      if (auto s = k->getAttrOfType<IntegerAttr>(plan::kCudaScratch))
        scratch = std::max(scratch, s.getInt());
    } else if (auto fn = dyn_cast<plan::FuncOp>(op)) {
      lowered = true;
      arena = std::max(arena, fn.getArenaBytes());
      int64_t pointers = 0;
      for (Operation &step : fn.getBody().front()) {
        if (auto launch = dyn_cast<plan::LaunchOp>(step)) {
          pointers += launch.getOperands().size();
          if (auto shard = launch.getShard())
            shardLaunches.push_back(*shard);
        }
        if (auto bind = dyn_cast<plan::BindOp>(step))
          gradSums |= bind.getKind() == plan::BufferKind::grad_sum;
        if (auto rs = dyn_cast<plan::ReduceScatterStartOp>(step)) {
          sharded = true;
          ++buckets;
          shardElements += (rs.getCount() + ranks - 1) / std::max<int64_t>(ranks, 1);
        }
      }
      argTables += mem::cudaAllocation(std::max<int64_t>(pointers, 1) * 8);
      if (fn.getSymName() == mlc::kTrainStepFn) {
        p.training = true;
        savedActivations(fn, p);
        p.livePeak = std::max(p.livePeak, livePeak(fn));
      }
    }
  }
  if (!lowered)
    return error("the memory plan needs a lowered module (plan.func ops)");
  if (p.paramDtype.empty())
    p.paramDtype = "f32"; // the runtime's flat buffers when nothing trains

  p.shardedMoments = sharded;
  p.tensorParallel = tensorParallelSize(module);
  p.sequenceParallel = module->hasAttr("mlc.sequence_parallel");
  p.wholeParameters = p.parameters + (p.tensorParallel - 1) * p.splitParameters;
  p.tpCollectives = tensorParallelCollectives(module);
  const int64_t momentBytes = sharded ? shardElements * elementSize : paramBytes;
  // The CPU backend (CpuBackend.cpp): vectors of exactly these bytes.
  const int64_t align = mem::kCpuArenaAlignment;
  p.cpu = {{mem::kParameters, paramBytes},
           {mem::kGradients, paramBytes},
           {mem::kMoments, 2 * momentBytes},
           {mem::kGradientSums, 0},
           {mem::kArena, (std::max(arena, align) + align - 1) / align * align},
           {mem::kInputs, inputBytes},
           {mem::kCommunication, 0},
           {mem::kGemmWorkspace, 0},
           {mem::kRuntime, scalarsCpu}};
  // The CUDA backend (CudaBackend.cpp): one driver allocation each; a
  // sharded launch has a kernel context and a window table of its own.
  for (int64_t shard : shardLaunches)
    argTables += mem::cudaAllocation(mem::kCudaKernelContextBytes) +
                 mem::cudaAllocation((shard < 0 ? buckets : 1) * 3 * 8);
  int64_t inputsCuda = 0;
  for (auto in : module.getBody()->getOps<plan::InputOp>()) {
    int64_t n = 1;
    for (int64_t d : in.getShape())
      n *= d < 0 ? capacity : d;
    inputsCuda += mem::cudaAllocation(n * plan::elementBytes(in.getElement()));
  }
  const int64_t flat = mem::cudaAllocation(paramBytes);
  // The sums' buffer: only a run that accumulates allocates it (the
  // runtime binds it on first use), so it is stated apart from the total.
  p.accumulationSumsCpu = gradSums ? paramBytes : 0;
  p.accumulationSums = gradSums ? flat : 0;
  p.cuda = {
      {mem::kParameters, flat},
      {mem::kGradients, flat},
      {mem::kMoments, 2 * mem::cudaAllocation(momentBytes)},
      {mem::kGradientSums, 0},
      {mem::kArena, mem::cudaAllocation(arena)},
      {mem::kInputs, inputsCuda},
      {mem::kCommunication, mem::cudaAllocation(mem::kCudaBucketNormParts * 8)},
      {mem::kGemmWorkspace, mem::cudaAllocation(mem::kCublasLtWorkspaceBytes)},
      {mem::kRuntime, scalarsCuda +
                          mem::cudaAllocation(mem::kCudaKernelContextBytes) +
                          mem::cudaAllocation(mem::kCudaErrorWordsBytes) +
                          mem::cudaAllocation(scratch) + argTables}};
  return p;
}

namespace {

/// The tensor-parallel collectives of one step, by phase and kind.
std::string formatCollectives(const MemoryPlan &p) {
  if (p.tpCollectives.empty())
    return "";
  const int64_t t = p.tensorParallel;
  std::string s = formatv("  tensor-parallel collectives per step (each over the group of {0}, "
                          "this rank's tensors):\n",
                          t);
  s += formatv("    {0,-35} {1,8} {2,17} {3,11}\n", "", "count", "bytes", "");
  int64_t count = 0, bytes = 0;
  double sent = 0;
  for (const Collective &c : p.tpCollectives) {
    s += formatv("    {0,-35} {1,8} {2,17} {3,11}\n",
                 (c.backward ? "backward " : "forward  ") + c.op, c.count,
                 withCommas(c.bytes), humanBytes(c.bytes));
    count += c.count, bytes += c.bytes;
    sent += ringShare(c.op, t) * double(c.bytes);
  }
  s += formatv("    {0,-35} {1,8} {2,17} {3,11}\n", "total", count, withCommas(bytes),
               humanBytes(bytes));
  s += formatv("    each rank sends {0} ({1}) per step in a ring: 2 (T-1)/T of an all-reduce's "
               "bytes, (T-1)/T of an all-gather's or reduce-scatter's\n",
               withCommas(int64_t(sent)), humanBytes(int64_t(sent)));
  return s;
}

} // namespace

std::string formatMemoryPlan(const MemoryPlan &p) {
  std::string s;
  auto line = [&](StringRef label, int64_t bytes, StringRef note = "") {
    s += formatv("    {0,-44} {1,17} {2,11}{3}\n", label, withCommas(bytes),
                 humanBytes(bytes),
                 note.empty() ? std::string() : "  " + note.str());
  };
  s += formatv("  memory per rank, as the CUDA backend allocates it{0}:\n",
               p.tensorParallel > 1
                   ? formatv(" (one of {0} tensor-parallel ranks{1}, each the same)",
                             p.tensorParallel,
                             p.ranks > 1 ? formatv(" x {0} data-parallel", p.ranks).str()
                                         : std::string())
                         .str()
               : p.ranks > 1 ? formatv(" ({0} ranks, each the same)", p.ranks).str()
                             : std::string());
  s += formatv("    {0,-44} {1,17} {2,11}\n", "", "bytes", "");
  auto at = [&](const char *item) { return p.cuda.at(item); };
  // Under tensor parallelism: this rank's share of the model.
  const std::string split =
      p.tensorParallel > 1
          ? formatv("(1/{0} of {1} split + {2} replicated, of the model's {3})", p.tensorParallel,
                    withCommas(p.splitParameters * p.tensorParallel),
                    withCommas(p.parameters - p.splitParameters), withCommas(p.wholeParameters))
                .str()
          : std::string();
  line(formatv("parameters ({0} x {1})", withCommas(p.parameters), p.paramDtype)
           .str(),
       at(mem::kParameters), split);
  line("gradients", at(mem::kGradients), p.tensorParallel > 1 ? "(as the parameters)" : "");
  line(p.shardedMoments ? formatv("optimizer moments (AdamW m and v, 1/{0} each)", p.ranks).str()
                        : std::string("optimizer moments (AdamW m and v)"),
       at(mem::kMoments));
  line("activations saved for backward", p.saved);
  // Runs of layers with equal bytes on one line.
  for (size_t i = 0; i < p.savedByLayer.size();) {
    const LayerBytes &l = p.savedByLayer[i];
    if (l.layer < 0) {
      line("  outside the layers (embeddings, head, loss)", l.bytes);
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < p.savedByLayer.size() &&
           p.savedByLayer[j + 1].layer == l.layer + int64_t(j + 1 - i) &&
           p.savedByLayer[j + 1].bytes == l.bytes)
      ++j;
    if (j == i)
      line(formatv("  layer {0}", l.layer).str(), l.bytes);
    else
      line(formatv("  layers {0}-{1}, each", l.layer, p.savedByLayer[j].layer)
               .str(),
           l.bytes,
           formatv("({0} x {1})", j - i + 1, humanBytes(l.bytes)).str());
    i = j + 1;
  }
  const int64_t gaps = p.cuda.at(mem::kArena) - p.livePeak;
  if (p.weightCopies)
    line("weight copies kept for backward (bf16)", p.weightCopies);
  line("arena beyond them (transient peak)", p.transient(),
       p.training && gaps > 0
           ? formatv("(of which {0} gaps between slices)", humanBytes(gaps))
                 .str()
           : std::string());
  line("inputs (one micro-batch)", at(mem::kInputs));
  line("communication buffers", at(mem::kCommunication),
       "(gradients are summed in place; NCCL's own buffers not counted)");
  line("GEMM workspace (cuBLASLt)", at(mem::kGemmWorkspace));
  line("runtime (scalars, kernel args, scratch)", at(mem::kRuntime));
  line("total", p.total(p.cuda));
  if (p.accumulationSums)
    line("with accumulation: gradient sums", p.accumulationSums,
         "(more, only when --global-batch > micro-batch x ranks)");
  s += formatv(
      "    on the CPU backend: {0} ({1}; no GEMM workspace or CUDA buffers)\n",
      withCommas(p.total(p.cpu)), humanBytes(p.total(p.cpu)));
  return s + formatCollectives(p);
}

std::string memoryPlanJson(const MemoryPlan &p) {
  auto items = [&](const std::map<std::string, int64_t> &m) {
    std::string j = "{";
    for (const char *item : mem::kItems)
      j += formatv("\"{0}\": {1}, ", item, m.at(item)).str();
    return j + formatv("\"total\": {0}}", p.total(m)).str();
  };
  std::string layers = "[";
  for (const LayerBytes &l : p.savedByLayer)
    layers += formatv("{0}{{\"layer\": {1}, \"bytes\": {2}}",
                      layers.size() > 1 ? ", " : "", l.layer, l.bytes)
                  .str();
  layers += "]";
  std::string tp = formatv("\"tensor_parallel\": {{\"size\": {0}, \"split_parameters\": {1}, "
                           "\"replicated_parameters\": {2}, \"model_parameters\": {3}, "
                           "\"collectives\": [",
                           p.tensorParallel, p.splitParameters,
                           p.parameters - p.splitParameters, p.wholeParameters);
  for (size_t i = 0; i < p.tpCollectives.size(); ++i) {
    const Collective &c = p.tpCollectives[i];
    tp += formatv("{0}{{\"op\": \"{1}\", \"phase\": \"{2}\", \"count\": {3}, "
                  "\"bytes\": {4}}",
                  i ? ", " : "", c.op, c.backward ? "backward" : "forward", c.count, c.bytes);
  }
  tp += "]}, ";
  return tp.insert(0, "{") +
         formatv("\"ranks\": {0}, \"distributed_optimizer\": {10}, "
                 "\"parameter_count\": {1}, "
                 "\"parameter_dtype\": \"{2}\", "
                 "\"saved_activations\": {3}, \"saved_by_layer\": {4}, "
                 "\"weight_copies\": {5}, \"transient_peak\": {6}, "
                 "\"arena_live_peak\": {7}, "
                 "\"cuda\": {8}, \"cpu\": {9}, "
                 "\"gradient_sums_when_accumulating\": "
                 "{{\"cuda\": {11}, \"cpu\": {12}}}",
                 p.ranks, p.parameters, p.paramDtype, p.saved, layers,
                 p.weightCopies, p.transient(), p.livePeak, items(p.cuda),
                 items(p.cpu), p.shardedMoments ? "true" : "false",
                 p.accumulationSums, p.accumulationSumsCpu)
      .str();
}

llvm::Expected<int64_t> parseDeviceMemory(StringRef spec) {
  StringRef s = spec.trim();
  std::string lower = s.lower();
  if (lower == "h100")
    return int64_t(80e9);
  if (lower == "h200")
    return int64_t(141e9);
  // The number's end: digits, a point, an exponent.
  size_t end = 0;
  while (end < s.size() &&
         (isdigit(s[end]) || s[end] == '.' ||
          ((s[end] == 'e' || s[end] == 'E') && end > 0 && end + 1 < s.size() &&
           (isdigit(s[end + 1]) || s[end + 1] == '+' || s[end + 1] == '-')) ||
          ((s[end] == '+' || s[end] == '-') && end > 0 &&
           (s[end - 1] == 'e' || s[end - 1] == 'E'))))
    ++end;
  double number;
  StringRef unit = s.drop_front(end).trim();
  std::string u = unit.lower();
  static const std::pair<const char *, double> units[] = {
      {"", 1},
      {"b", 1},
      {"k", 1e3},
      {"kb", 1e3},
      {"m", 1e6},
      {"mb", 1e6},
      {"g", 1e9},
      {"gb", 1e9},
      {"t", 1e12},
      {"tb", 1e12},
      {"kib", 1024.0},
      {"mib", 1048576.0},
      {"gib", 1073741824.0},
      {"tib", 1099511627776.0}};
  const double *scale = nullptr;
  for (auto &[name, value] : units)
    if (u == name)
      scale = &value;
  if (end == 0 || s.take_front(end).getAsDouble(number) || !scale ||
      !(number > 0) || number * *scale > 9e18)
    return error("--device-memory: expected a size (80GB, 80GiB, 141e9 bytes) "
                 "or a device "
                 "(h100, h200), got '" +
                 spec + "'");
  return int64_t(number * *scale);
}

llvm::Error checkFits(const MemoryPlan &p, int64_t limit, StringRef spec) {
  const int64_t total = p.total(p.cuda);
  if (total <= limit)
    return llvm::Error::success();
  // The items, largest first, the arena split as the report splits it.
  struct Item {
    std::string name;
    int64_t bytes;
    std::string shrink;
  };
  const bool f64 = p.paramDtype == "f64";
  // A larger tensor-parallel group divides the split parameters' state.
  const std::string state =
      (f64 ? std::string("--dtype f32 halves it")
           : "fixed by the model and its " + p.paramDtype + " parameters") +
      (p.tensorParallel > 1
           ? formatv(", or a larger --tensor-parallel than {0}", p.tensorParallel).str()
           : std::string(", or --tensor-parallel T divides most of it"));
  // (Not --dtype bf16: it halves the products' activations but keeps the
  // weights' bf16 copies from forward to backward, and its transient peak
  // grows; whether it saves bytes depends on the model and the batch.)
  std::string activations = "a smaller --micro-batch or --seq-len";
  if (p.computeDtype == "f64")
    activations += ", or --dtype f32";
  // Recomputation shrinks the saved activations only (its clones live in
  // backward's transient peak).
  std::string saved = activations;
  if (p.recompute == "none")
    saved = "--recompute selective or full, " + activations;
  else if (p.recompute == "selective")
    saved = "--recompute full, " + activations;
  // At T > 1 the stream's norms, dropout and residual adds keep every token.
  if (p.tensorParallel > 1 && !p.sequenceParallel)
    saved = formatv("--sequence-parallel divides most of it by {0}, ", p.tensorParallel).str() + saved;
  std::vector<Item> items = {
      {"optimizer moments", p.cuda.at(mem::kMoments),
       p.ranks > 1 && !p.shardedMoments
           ? formatv("--use-distributed-optimizer divides it by {0}", p.ranks).str()
       : p.tensorParallel > 1 && !p.shardedMoments
           // A whole node of tensor parallelism: the data-parallel replicas shard it.
           ? std::string("--use-distributed-optimizer over data-parallel --ranks R divides "
                         "it by R")
           : state},
      {"parameters", p.cuda.at(mem::kParameters), state},
      {"gradients", p.cuda.at(mem::kGradients), state},
      {"activations saved for backward", p.saved, saved},
      {"the arena's transient peak", p.transient(), activations},
      {"weight copies kept for backward", p.weightCopies, "fixed by the model"},
      {"inputs", p.cuda.at(mem::kInputs),
       "a smaller --micro-batch or --seq-len"},
      {"the GEMM workspace", p.cuda.at(mem::kGemmWorkspace), "fixed"}};
  std::stable_sort(
      items.begin(), items.end(),
      [](const Item &a, const Item &b) { return a.bytes > b.bytes; });
  std::string largest;
  for (size_t i = 0; i < 3 && i < items.size(); ++i)
    largest += formatv("\n  {0}: {1} ({2})", items[i].name,
                       humanBytes(items[i].bytes), items[i].shrink)
                   .str();
  return error(formatv("the plan needs {0} ({1} bytes) per rank, more than "
                       "--device-memory {2} "
                       "({3} bytes) holds; its largest items:{4}",
                       humanBytes(total), withCommas(total), spec,
                       withCommas(limit), largest)
                   .str());
}

} // namespace mlc::tool
