//===- PlanDialect.cpp - the plan dialect's verifiers and helpers ----------===//
//
// The verifiers state what the runtime relies on: every buffer a step names
// lies inside its parent (views) or its flat buffer (bindings), arena slices
// are placed inside the arena and never share bytes while both are live,
// kernels are called with their argument count, and a GEMM's operands have
// one float type and cover the extents it reads and writes.
//
//===----------------------------------------------------------------------===//

#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

using namespace mlir;

#include "dialects/plan/PlanDialect.cpp.inc"
#include "dialects/plan/PlanEnums.cpp.inc"
#include "dialects/plan/PlanTemplateInterface.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanTemplates.cpp.inc"

namespace mlc::plan {

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/plan/PlanTemplates.cpp.inc"
      >();
  // The code generator implements the templates' interface
  // (compiler/codegen/templates/, registerTemplateModels).
  declarePromisedInterfaces<TemplateAttrInterface,
#define GET_ATTRDEF_LIST
#include "dialects/plan/PlanTemplates.cpp.inc"
                            >();
}

int64_t elementBytes(Type type) {
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, type.getIntOrFloatBitWidth() / 8);
  return 1;
}

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(1))
    return "i1";
  return "";
}

int64_t bufferBytes(Value buffer) {
  auto t = cast<MemRefType>(buffer.getType());
  return t.getNumElements() * elementBytes(t.getElementType());
}

std::pair<ArenaOp, int64_t> arenaRoot(Value buffer) {
  int64_t offset = 0;
  while (auto view = buffer.getDefiningOp<ViewOp>()) {
    offset += view.getOffset();
    buffer = view.getSource();
  }
  return {buffer.getDefiningOp<ArenaOp>(), offset};
}

llvm::DenseMap<Operation *, LiveRange> liveRanges(FuncOp fn) {
  llvm::DenseMap<Operation *, LiveRange> ranges;
  int step = 0;
  auto touch = [&](Value v, int at) {
    ArenaOp root = arenaRoot(v).first;
    if (!root)
      return;
    LiveRange &r = ranges[root];
    if (r.first < 0 || at < r.first)
      r.first = at;
    r.last = std::max(r.last, at);
  };
  for (Operation &op : fn.getBody().front()) {
    // An asynchronous all-reduce's buffer is live from its start to its wait.
    auto tp = dyn_cast<TpAllReduceOp>(op);
    if (isa<LaunchOp, GemmOp, TpAllGatherOp, TpReduceScatterOp, TpWaitOp>(op) ||
        (tp && tp.getTag())) {
      for (Value v : op.getOperands())
        touch(v, step);
      ++step;
    }
  }
  for (auto out : fn.getBody().front().getOps<OutputOp>())
    touch(out.getBuffer(), step);
  return ranges;
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

static bool isFlatFloat(Type t) { return t.isF32() || t.isF64(); }

LogicalResult ParamOp::verify() {
  if (!isFlatFloat(getElement()))
    return emitOpError("parameter element type must be f32 or f64, got ") << getElement();
  for (int64_t d : getShape())
    if (d < 1)
      return emitOpError("parameter dimensions must be positive");
  StringRef init = getInit();
  if (init != "zeros" && init != "ones" && init != "package" && !init.starts_with("normal:"))
    return emitOpError("init must be normal:STD, zeros, ones or package, got '") << init << "'";
  if (init.starts_with("normal:")) {
    double std;
    if (init.drop_front(7).getAsDouble(std) || !(std >= 0))
      return emitOpError("init normal:STD needs a standard deviation >= 0, got '")
             << init << "'";
  }
  return success();
}

LogicalResult InputOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 1 && !(i == 0 && shape[i] == -1))
      return emitOpError("input dimensions must be positive (-1 only for the leading "
                         "token dimension)");
  return success();
}

/// The CUDA schedule's form (mlc-cuda-launch): a non-empty array of
/// [grid, block] pairs, grid >= 1 and the block whole warps (a multiple of
/// 32: the runtime launches no other) of at most 1024 threads (CUDA's
/// most); scratch >= 0 and tile >= 1 where present. Errors name the kernel.
static LogicalResult verifyCudaSchedule(KernelOp k) {
  auto error = [&] { return k.emitOpError("@") << k.getSymName() << ": "; };
  Attribute launch = k->getAttr(kCudaLaunch);
  if (!launch) {
    if (k->hasAttr(kCudaScratch) || k->hasAttr(kCudaTile))
      return error() << "has a CUDA scratch or tile but no cuda.launch";
    return success();
  }
  auto phases = dyn_cast<ArrayAttr>(launch);
  if (!phases || phases.empty())
    return error() << "cuda.launch must be a non-empty array of [grid, block] phases";
  for (auto [i, a] : llvm::enumerate(phases)) {
    auto gb = dyn_cast<DenseI64ArrayAttr>(a);
    if (!gb || gb.size() != 2)
      return error() << "cuda.launch phase " << i << " is not array<i64: grid, block>";
    if (gb[0] < 1 || gb[1] < 32 || gb[1] > 1024 || gb[1] % 32 != 0)
      return error() << "cuda.launch phase " << i << " launches " << gb[0] << " blocks of "
                     << gb[1] << " threads (grid >= 1, block a multiple of 32 up to 1024)";
  }
  auto scratch = k->getAttr(kCudaScratch);
  if (scratch && (!isa<IntegerAttr>(scratch) || cast<IntegerAttr>(scratch).getInt() < 0))
    return error() << "cuda.scratch must be a non-negative i64 (bytes)";
  auto tile = k->getAttr(kCudaTile);
  if (tile && (!isa<IntegerAttr>(tile) || cast<IntegerAttr>(tile).getInt() < 1))
    return error() << "cuda.tile must be a positive i64 (key rows)";
  return success();
}

LogicalResult KernelOp::verify() {
  if (getNumArgs() < 1)
    return emitOpError("a kernel takes at least one buffer");
  if (failed(verifyCudaSchedule(*this)))
    return failure();
  if (!getBody().empty()) {
    if (getKernelTemplateAttr())
      return emitOpError("a kernel with a body has no template");
    if (!getParamsAttr() || !getParamsAttr().getAs<DenseI64ArrayAttr>("dims"))
      return emitOpError("a kernel with a body needs its iteration space (params.dims)");
    return success();
  }
  TemplateAttrInterface t = getKernelTemplateAttr();
  if (!t)
    return emitOpError("a kernel is a template (#plan.NAME and params) or a body");
  return t.verifyKernel(*this);
}

/// A body's accesses: in range, one offset and strides per argument (an
/// argument read and written is one access), strides over params.dims;
/// and every argument accessed.
LogicalResult KernelOp::verifyRegions() {
  if (getBody().empty())
    return success();
  if (!getBody().hasOneBlock() || getBody().front().getNumArguments())
    return emitOpError("a kernel body is one block without arguments");
  auto dims = getParamsAttr().getAs<DenseI64ArrayAttr>("dims");
  llvm::DenseMap<int64_t, std::pair<int64_t, ArrayRef<int64_t>>> accesses;
  for (Operation &op : getBody().front()) {
    int64_t arg, offset;
    ArrayRef<int64_t> strides;
    if (auto l = dyn_cast<LoadOp>(op))
      arg = l.getArg(), offset = l.getOffset(), strides = l.getStrides();
    else if (auto s = dyn_cast<StoreOp>(op))
      arg = s.getArg(), offset = s.getOffset(), strides = s.getStrides();
    else if (auto n = dyn_cast<NormalizeOp>(op)) {
      if (getKind() != KernelTemplate::rows)
        return op.emitOpError("normalizes in a ") << stringifyKernelTemplate(getKind())
                                                 << " kernel (only rows kernels do)";
      arg = n.getArg(), offset = n.getOffset(), strides = n.getStrides();
    } else if (auto a = dyn_cast<AccumulateOp>(op)) {
      if (getKind() != KernelTemplate::column_reduction && getKind() != KernelTemplate::reduction)
        return op.emitOpError("accumulates in a ") << stringifyKernelTemplate(getKind())
                                                  << " kernel (only column_reduction sums)";
      if (a.getArg() < 0 || a.getArg() >= getNumArgs() || accesses.count(a.getArg()))
        return op.emitOpError("accumulates into argument ")
               << a.getArg() << ", which is out of range or accessed elsewhere";
      accesses.try_emplace(a.getArg(), -1, ArrayRef<int64_t>());
      continue;
    } else if (isa<ScalarOp, DecayFactorOp>(op)) {
      int64_t a = isa<ScalarOp>(op) ? cast<ScalarOp>(op).getArg() : cast<DecayFactorOp>(op).getArg();
      if (getKind() != KernelTemplate::optimizer)
        return op.emitOpError("reads per-step scalars outside an optimizer kernel");
      if (a < 0 || a >= getNumArgs())
        return op.emitOpError("argument ") << a << " of a kernel of " << getNumArgs()
                                           << " arguments";
      accesses.try_emplace(a, -2, ArrayRef<int64_t>());
      continue;
    } else
      continue;
    if (arg < 0 || arg >= getNumArgs())
      return op.emitOpError("argument ") << arg << " of a kernel of " << getNumArgs()
                                         << " arguments";
    if (strides.size() != size_t(dims.size()))
      return op.emitOpError("has ") << strides.size() << " strides for a nest of "
                                    << dims.size() << " dimensions";
    auto [it, fresh] = accesses.try_emplace(arg, offset, strides);
    if (!fresh && (it->second.first != offset || it->second.second != strides))
      return op.emitOpError("argument ") << arg << " is accessed at two places";
  }
  if (int64_t(accesses.size()) != getNumArgs())
    return emitOpError("a kernel body accesses ") << accesses.size() << " of its "
                                                  << getNumArgs() << " arguments";
  return success();
}

RegionKind FuncOp::getRegionKind(unsigned) { return RegionKind::SSACFG; }

/// The bytes `buffer` covers: a key for the memory it lies in (the arena
/// for a placed arena slice, else the slice or bound buffer its views lead
/// to) and the byte range there.
struct ByteRange {
  Value root; // null: the function's arena (placed slices)
  int64_t first = 0, end = 0;
  bool overlaps(const ByteRange &o) const {
    return root == o.root && first < o.end && o.first < end;
  }
};
static ByteRange byteRange(Value buffer) {
  ByteRange r;
  int64_t offset = 0;
  Value v = buffer;
  while (auto view = v.getDefiningOp<ViewOp>()) {
    offset += view.getOffset();
    v = view.getSource();
  }
  r.root = v;
  if (auto arena = v.getDefiningOp<ArenaOp>(); arena && arena.getOffset() >= 0) {
    r.root = Value();
    offset += arena.getOffset();
  }
  r.first = offset;
  r.end = offset + bufferBytes(buffer);
  return r;
}

/// While an asynchronous plan.tp_all_reduce is in flight (from its start
/// to its plan.tp_wait) no other tensor-parallel collective runs (the
/// group's calls keep one order on every rank: on CUDA the asynchronous
/// one runs on a stream of its own) and no step reads or writes its
/// buffer's bytes (the sum lands there at the wait).
static LogicalResult verifyTpInFlight(FuncOp fn) {
  std::optional<int64_t> tag; // the one in flight
  ByteRange flight;
  for (Operation &op : fn.getBody().front()) {
    if (isBufferDecl(op))
      continue;
    auto tp = dyn_cast<TpAllReduceOp>(op);
    auto wait = dyn_cast<TpWaitOp>(op);
    if (tag && wait && wait.getTag() == *tag) {
      tag.reset();
      continue;
    }
    if (tag && isa<TpAllReduceOp, TpAllGatherOp, TpReduceScatterOp>(op))
      return op.emitOpError("runs while the tensor-parallel all-reduce tag ")
             << *tag << " is in flight (before its plan.tp_wait): the group's collectives "
                        "run one at a time, in one order";
    if (tag)
      for (Value v : op.getOperands())
        if (byteRange(v).overlaps(flight))
          return op.emitOpError("reads or writes the buffer of the tensor-parallel all-reduce "
                                "tag ")
                 << *tag << " before its plan.tp_wait";
    if (tp && tp.getTag()) {
      tag = *tp.getTag();
      flight = byteRange(tp.getBuffer());
    }
  }
  return success();
}

LogicalResult FuncOp::verifyRegions() {
  llvm::StringSet<> outputs;
  std::set<int64_t> started, waited;
  std::map<int64_t, Value> tpStarted; // asynchronous tp_all_reduce: tag -> buffer
  for (Operation &op : getBody().front()) {
    if (!isa<BindOp, ArenaOp, ViewOp, LaunchOp, GemmOp, OutputOp, AllReduceStartOp,
             AllReduceWaitOp, ReduceScatterStartOp, ReduceScatterWaitOp, AllGatherStartOp,
             AllGatherWaitOp, AllReduceNormOp, TpAllReduceOp, TpWaitOp, TpAllGatherOp,
             TpReduceScatterOp>(op))
      return op.emitOpError("is not allowed in a plan.func (bind, arena, view, launch, "
                            "gemm, the collectives and output are)");
    // Each collective starts once and is waited for once, after its start
    // (tags are per kind: an all-gather's tag 0 is not a reduce-scatter's).
    auto startTag = [&](Operation *start, int kind, int64_t tag) -> LogicalResult {
      if (!started.insert(tag * 4 + kind).second)
        return start->emitOpError("tag ") << tag << " is started twice";
      return success();
    };
    auto waitTag = [&](Operation *wait, int kind, int64_t tag,
                       StringRef startName) -> LogicalResult {
      if (!started.count(tag * 4 + kind))
        return wait->emitOpError("waits for tag ")
               << tag << ", which no earlier " << startName << " started";
      if (!waited.insert(tag * 4 + kind).second)
        return wait->emitOpError("tag ") << tag << " is waited for twice";
      return success();
    };
    if (auto start = dyn_cast<AllReduceStartOp>(op)) {
      if (failed(startTag(start, 0, start.getTag())))
        return failure();
    } else if (auto wait = dyn_cast<AllReduceWaitOp>(op)) {
      if (failed(waitTag(wait, 0, wait.getTag(), "plan.all_reduce_start")))
        return failure();
    } else if (auto start = dyn_cast<ReduceScatterStartOp>(op)) {
      if (failed(startTag(start, 1, start.getTag())))
        return failure();
    } else if (auto wait = dyn_cast<ReduceScatterWaitOp>(op)) {
      if (failed(waitTag(wait, 1, wait.getTag(), "plan.reduce_scatter_start")))
        return failure();
    } else if (auto start = dyn_cast<AllGatherStartOp>(op)) {
      if (failed(startTag(start, 2, start.getTag())))
        return failure();
    } else if (auto wait = dyn_cast<AllGatherWaitOp>(op)) {
      if (failed(waitTag(wait, 2, wait.getTag(), "plan.all_gather_start")))
        return failure();
    } else if (auto tp = dyn_cast<TpAllReduceOp>(op); tp && tp.getTag()) {
      if (failed(startTag(tp, 3, *tp.getTag())))
        return failure();
      tpStarted[*tp.getTag()] = tp.getBuffer();
    } else if (auto wait = dyn_cast<TpWaitOp>(op)) {
      if (failed(waitTag(wait, 3, wait.getTag(), "plan.tp_all_reduce")))
        return failure();
      if (tpStarted[wait.getTag()] != wait.getBuffer())
        return wait.emitOpError("waits for another buffer than tag ")
               << wait.getTag() << "'s all-reduce";
    }
    if (auto out = dyn_cast<OutputOp>(op))
      if (!outputs.insert(out.getName()).second)
        return out.emitOpError("output '") << out.getName() << "' is returned twice";
    if (auto arena = dyn_cast<ArenaOp>(op)) {
      int64_t off = arena.getOffset();
      if (off < -1)
        return arena.emitOpError("arena offset must be >= 0 (or -1: not yet placed)");
      if (off >= 0 && off + bufferBytes(arena.getBuffer()) > getArenaBytes())
        return arena.emitOpError("arena slice [")
               << off << ", " << off + bufferBytes(arena.getBuffer())
               << ") lies outside the function's arena of " << getArenaBytes() << " bytes";
    }
  }
  // `started` holds tag * 4 + kind (kind 0 all-reduce, 1 reduce-scatter,
  // 2 all-gather, 3 tensor-parallel all-reduce): the message names both.
  static const char *const kinds[] = {"all-reduce", "reduce-scatter", "all-gather",
                                      "tensor-parallel all-reduce"};
  for (int64_t key : started)
    if (!waited.count(key))
      return emitOpError() << kinds[key % 4] << " tag " << key / 4
                           << " is started but never waited for";
  if (failed(verifyTpInFlight(*this)))
    return failure();
  // Aliasing: placed arena slices that are live at the same time must not
  // share bytes.
  auto ranges = liveRanges(*this);
  SmallVector<ArenaOp> placed;
  for (auto arena : getBody().front().getOps<ArenaOp>())
    if (arena.getOffset() >= 0 && ranges.count(arena))
      placed.push_back(arena);
  for (size_t i = 0; i < placed.size(); ++i)
    for (size_t j = i + 1; j < placed.size(); ++j) {
      ArenaOp a = placed[i], b = placed[j];
      int64_t a0 = a.getOffset(), a1 = a0 + bufferBytes(a.getBuffer());
      int64_t b0 = b.getOffset(), b1 = b0 + bufferBytes(b.getBuffer());
      if (a0 < b1 && b0 < a1 && ranges[a].overlaps(ranges[b]))
        return b.emitOpError("shares arena bytes [")
               << std::max(a0, b0) << ", " << std::min(a1, b1)
               << ") with another slice while both are live (steps " << ranges[b].first
               << "-" << ranges[b].last << " and " << ranges[a].first << "-"
               << ranges[a].last << ")";
    }
  return success();
}

LogicalResult ScalarsOp::verify() {
  if (getSize() < 1)
    return emitOpError("scalars need a size >= 1");
  if (!getElement().isF64())
    return emitOpError("scalars are f64");
  return success();
}

LogicalResult NormalizeOp::verify() {
  if (getRms() == bool(getBias()))
    return emitOpError(getRms() ? "an RMSNorm (rms) takes no bias"
                                : "a LayerNorm needs a bias (or rms for an RMSNorm)");
  return success();
}

LogicalResult BindOp::verify() {
  auto module = (*this)->getParentOfType<ModuleOp>();
  if (!module)
    return success();
  auto type = cast<MemRefType>(getBuffer().getType());
  BufferKind kind = getKind();
  if (kind == BufferKind::input || kind == BufferKind::scalars) {
    for (Operation &op : module.getBody()->getOperations()) {
      Type el;
      int64_t n = -1;
      if (auto in = dyn_cast<InputOp>(op); in && kind == BufferKind::input &&
                                           in.getSymName() == getName()) {
        el = in.getElement();
      } else if (auto sc = dyn_cast<ScalarsOp>(op); sc && kind == BufferKind::scalars &&
                                                    sc.getSymName() == getName()) {
        el = sc.getElement();
        n = sc.getSize();
      } else {
        continue;
      }
      if (el != type.getElementType())
        return emitOpError(kind == BufferKind::input ? "input '" : "scalars '")
               << getName() << "' is " << el << ", the buffer " << type.getElementType();
      if (n >= 0 && n != type.getNumElements())
        return emitOpError("scalars '") << getName() << "' hold " << n << ", the buffer "
                                        << type.getNumElements();
      return success();
    }
    return emitOpError("names no ")
           << (kind == BufferKind::input ? "plan.input" : "plan.scalars") << " '" << getName()
           << "' of the module";
  }
  // A flat buffer: one parameter's slice, or all of it ("*").
  int64_t total = 0, mine = -1;
  Type el;
  for (auto p : module.getBody()->getOps<ParamOp>()) {
    int64_t n = 1;
    for (int64_t d : p.getShape())
      n *= d;
    total += n;
    el = p.getElement();
    if (p.getSymName() == getName()) {
      if (p.getElement() != type.getElementType() || n != type.getNumElements())
        return emitOpError("parameter '") << getName() << "' holds " << n << " x "
                                          << p.getElement() << ", the buffer " << type;
      mine = n;
    }
  }
  if (getName() == "*") {
    if (total != type.getNumElements() || (el && el != type.getElementType()))
      return emitOpError("the whole flat buffer holds ")
             << total << " x " << el << ", the buffer " << type;
    return success();
  }
  if (mine < 0)
    return emitOpError("names no plan.param '") << getName() << "' of the module";
  return success();
}

LogicalResult ViewOp::verify() {
  int64_t off = getOffset(), bytes = bufferBytes(getBuffer()), whole = bufferBytes(getSource());
  if (off < 0 || off + bytes > whole)
    return emitOpError("view of bytes [")
           << off << ", " << off + bytes << ") lies outside its source of " << whole << " bytes";
  if (off % elementBytes(cast<MemRefType>(getBuffer().getType()).getElementType()))
    return emitOpError("view offset ") << off << " is not a multiple of the element size";
  return success();
}

LogicalResult LaunchOp::verify() {
  auto kernel = SymbolTable::lookupNearestSymbolFrom<KernelOp>(*this, getKernelAttr());
  if (!kernel)
    return emitOpError("launches unknown kernel @") << getKernel();
  if (int64_t(getOperands().size()) != kernel.getNumArgs())
    return emitOpError("passes ") << getOperands().size() << " buffers to @" << getKernel()
                                  << ", which takes " << kernel.getNumArgs();
  if (auto shard = getShard()) {
    // Only the flat-buffer kernels know what a shard of a bucket is.
    const bool flat = kernel.getKind() == KernelTemplate::optimizer ||
                      (kernel.getKind() == KernelTemplate::reduction && kernel.getParams() &&
                       kernel.getParams()->get("segments"));
    if (!flat)
      return emitOpError("shard applies to the optimizer and gradient-norm kernels only; @")
             << getKernel() << " is neither";
    if (*shard < -1)
      return emitOpError("shard is a bucket's tag or -1 (every bucket), got ") << *shard;
  }
  return success();
}

/// The buffer a view chain starts from (an arena slice or a binding).
static Value rootBuffer(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewOp>())
    buffer = view.getSource();
  return buffer;
}

bool kernelWritesArg(KernelOp k, int64_t arg) {
  if (k.getBody().empty())
    return k.getKernelTemplateAttr() && k.getKernelTemplateAttr().writesArg(k, arg);
  for (Operation &op : k.getBody().front()) {
    if (auto s = dyn_cast<StoreOp>(op); s && s.getArg() == arg)
      return true;
    if (auto n = dyn_cast<NormalizeOp>(op); n && n.getArg() == arg)
      return true;
    if (auto a = dyn_cast<AccumulateOp>(op); a && a.getArg() == arg)
      return true;
  }
  return false;
}

/// Whether a step before `step` in its function writes `buffer`'s root (a
/// GEMM's out or gelu pre-activation, a launch's argument its kernel
/// writes): what an accumulating GEMM adds to must hold a value first. A
/// step that only reads it does not count.
static bool writtenBefore(Operation *step, Value buffer) {
  Value root = rootBuffer(buffer);
  auto isRoot = [&](Value v) { return v && rootBuffer(v) == root; };
  for (Operation *op = step->getPrevNode(); op; op = op->getPrevNode()) {
    if (auto g = dyn_cast<GemmOp>(op)) {
      if (isRoot(g.getOut()) || isRoot(g.getPre()))
        return true;
      continue;
    }
    auto launch = dyn_cast<LaunchOp>(op);
    if (!launch)
      continue;
    auto kernel = SymbolTable::lookupNearestSymbolFrom<KernelOp>(launch, launch.getKernelAttr());
    if (!kernel)
      continue;
    for (auto [i, v] : llvm::enumerate(launch.getOperands()))
      if (isRoot(v) && kernelWritesArg(kernel, int64_t(i)))
        return true;
  }
  return false;
}

LogicalResult GemmOp::verify() {
  Type el = cast<MemRefType>(getOut().getType()).getElementType();
  if (!isFlatFloat(el) && !el.isBF16())
    return emitOpError("GEMM element type must be f32, f64 or bf16, got ") << el;
  // bf16 operands may have an f32 result (the sums stored without rounding).
  Type in = cast<MemRefType>(getLhs().getType()).getElementType();
  if (!(in == el || (in.isBF16() && el.isF32())))
    return emitOpError("GEMM operands of ") << in << " with a result of " << el
                                            << "; the types must agree, or be bf16 -> f32";
  if (cast<MemRefType>(getRhs().getType()).getElementType() != in)
    return emitOpError("GEMM operands must share the element type ") << in;
  if (getN() < 1 || getM() < -1 || getM() == 0 || getK() < -1 || getK() == 0)
    return emitOpError("GEMM extents must be positive (m or k -1: the token count)");
  size_t nb = getBatch().size();
  if (getLhsStrides().size() != nb || getRhsStrides().size() != nb)
    return emitOpError("GEMM needs one lhs and one rhs stride per batch dimension (")
           << nb << ")";
  int64_t batches = 1;
  for (int64_t d : getBatch()) {
    if (d < 1)
      return emitOpError("GEMM batch dimensions must be positive");
    batches *= d;
  }
  // The extents a static GEMM touches must lie inside its buffers.
  if (getM() > 0 && getK() > 0) {
    auto numel = [](Value v) { return cast<MemRefType>(v.getType()).getNumElements(); };
    auto reach = [&](ArrayRef<int64_t> strides, int64_t matrix) {
      int64_t last = 0;
      for (size_t d = 0; d < nb; ++d)
        last += (getBatch()[d] - 1) * strides[d];
      return last + matrix;
    };
    if (batches * getM() * getN() > numel(getOut()))
      return emitOpError("GEMM writes ") << batches * getM() * getN()
                                         << " elements into a buffer of " << numel(getOut());
    if (reach(getLhsStrides(), getM() * getK()) > numel(getLhs()))
      return emitOpError("GEMM reads past the end of its lhs buffer");
    if (reach(getRhsStrides(), getK() * getN()) > numel(getRhs()))
      return emitOpError("GEMM reads past the end of its rhs buffer");
  }
  if (Value bias = getBias()) {
    auto bt = cast<MemRefType>(bias.getType());
    if (bt.getElementType() != el || bt.getNumElements() != getN())
      return emitOpError("GEMM bias must be the result's ")
             << getN() << " columns of " << el << ", got " << bt;
  }
  if (Value pre = getPre()) {
    if (pre.getType() != getOut().getType() || !(isFlatFloat(el) || el.isBF16()))
      return emitOpError("GEMM gelu(pre) takes an f32, f64 or bf16 pre-activation of the "
                         "result's type ")
             << getOut().getType() << ", got " << pre.getType();
  }
  if (getAccumulate()) {
    if (getPre())
      return emitOpError("an accumulating GEMM has no GELU epilogue");
    if (!writtenBefore(*this, getOut()))
      return emitOpError("accumulates into a buffer that no earlier step of the function "
                         "writes (its value would be undefined)");
  }
  auto [outRoot, outOff] = arenaRoot(getOut());
  for (Value in : {getLhs(), getRhs(), getBias(), getPre()}) {
    if (!in)
      continue;
    auto [root, off] = arenaRoot(in);
    if ((root && root == outRoot) || in == getOut())
      return emitOpError("GEMM output must not alias an operand");
  }
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  auto bind = getBuffer().getDefiningOp<BindOp>();
  if (!bind || bind.getKind() != BufferKind::grad || bind.getName() != "*")
    return emitOpError("reduces the whole gradient buffer (plan.bind grad \"*\")");
  int64_t n = cast<MemRefType>(getBuffer().getType()).getNumElements();
  if (getOffset() < 0 || getCount() < 1 || getOffset() > n - getCount())
    return emitOpError("slice [") << getOffset() << ", " << getOffset() + getCount()
                                  << ") is not inside the " << n << " gradients";
  if (getTag() < 0)
    return emitOpError("tag must be >= 0");
  return success();
}

/// A collective's slice [offset, offset + count) of a whole flat buffer of
/// `kind` (plan.bind KIND "*").
static LogicalResult verifyBucket(Operation *op, Value buffer, BufferKind kind,
                                  StringRef kindName, int64_t offset, int64_t count,
                                  int64_t tag) {
  auto bind = buffer.getDefiningOp<BindOp>();
  if (!bind || bind.getKind() != kind || bind.getName() != "*")
    return op->emitOpError("takes the whole ") << kindName << " buffer (plan.bind " << kindName
                                                << " \"*\")";
  int64_t n = cast<MemRefType>(buffer.getType()).getNumElements();
  if (offset < 0 || count < 1 || offset > n - count)
    return op->emitOpError("slice [") << offset << ", " << offset + count
                                      << ") is not inside the " << n << " elements";
  if (tag < 0)
    return op->emitOpError("tag must be >= 0");
  return success();
}

LogicalResult ReduceScatterStartOp::verify() {
  return verifyBucket(*this, getBuffer(), BufferKind::grad, "grad", getOffset(), getCount(),
                      getTag());
}

LogicalResult AllGatherStartOp::verify() {
  return verifyBucket(*this, getBuffer(), BufferKind::param, "param", getOffset(), getCount(),
                      getTag());
}

LogicalResult AllReduceNormOp::verify() {
  auto t = cast<MemRefType>(getBuffer().getType());
  if (t.getNumElements() != 1 || !t.getElementType().isF64())
    return emitOpError("sums one f64 norm over the ranks, got ") << t;
  return success();
}

LogicalResult TpAllReduceOp::verify() {
  auto t = cast<MemRefType>(getBuffer().getType());
  if (!isa<FloatType>(t.getElementType()))
    return emitOpError("reduces floating-point values, got ") << t;
  if (getTag() && getMax())
    return emitOpError("only a sum runs asynchronously (a tag), not a max");
  return success();
}

/// `whole` holds `groupSize` x the elements of `slice` for some group size
/// >= 2, of the same floating-point type.
static LogicalResult verifyTpSlices(Operation *op, Value slice, Value whole) {
  auto s = cast<MemRefType>(slice.getType()), w = cast<MemRefType>(whole.getType());
  if (!isa<FloatType>(s.getElementType()) || s.getElementType() != w.getElementType())
    return op->emitOpError("moves floating-point buffers of one element type, got ")
           << s << " and " << w;
  if (slice == whole || s.getNumElements() < 1 || w.getNumElements() % s.getNumElements() ||
      w.getNumElements() / s.getNumElements() < 2)
    return op->emitOpError("the whole buffer must hold T >= 2 slices of the other, got ")
           << w << " and " << s;
  return success();
}

LogicalResult TpAllGatherOp::verify() { return verifyTpSlices(*this, getIn(), getOut()); }

LogicalResult TpReduceScatterOp::verify() { return verifyTpSlices(*this, getOut(), getIn()); }

LogicalResult OutputOp::verify() {
  int64_t n = 1;
  for (size_t i = 0; i < getShape().size(); ++i) {
    int64_t d = getShape()[i];
    if (d < 1 && !(i == 0 && d == -1))
      return emitOpError("output dimensions must be positive (-1 only for the leading "
                         "token dimension)");
    n *= d < 0 ? 1 : d;
  }
  int64_t have = cast<MemRefType>(getBuffer().getType()).getNumElements();
  if (n > have)
    return emitOpError("output '") << getName() << "' of " << n << " elements reads a buffer of "
                                   << have;
  return success();
}

} // namespace mlc::plan

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"
