//===- PlanWriter.cpp - the plan dialect to plan.txt and kernel sources ---===//
//
// The package's serialized plan: the plan dialect's buffers and steps become
// plan.txt through runtime/core/PlanFormat (the grammar's one owner), the
// plan.kernel ops become kernels.cpp (the prelude, then one extern "C"
// function per kernel) and kernels.cu (the CUDA prelude, then one
// __global__ function per kernel).
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipeline.h"
#include "compiler/codegen/KernelPrinter.h"
#include "dialects/plan/PlanDialect.h"
#include "runtime/core/PlanFormat.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <sstream>

using namespace mlir;

namespace mlc {

namespace {

llvm::Error failure(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace

using plan::dtypeName;

namespace {

/// The runtime's name for a bound buffer's kind.
rt::BufferDecl::Kind bufferKind(plan::BufferKind kind) {
  switch (kind) {
  case plan::BufferKind::param:
    return rt::BufferDecl::Param;
  case plan::BufferKind::grad:
    return rt::BufferDecl::Grad;
  case plan::BufferKind::input:
    return rt::BufferDecl::Input;
  case plan::BufferKind::moment1:
    return rt::BufferDecl::Moment1;
  case plan::BufferKind::moment2:
    return rt::BufferDecl::Moment2;
  case plan::BufferKind::scalars:
    return rt::BufferDecl::Scalars;
  case plan::BufferKind::grad_sum:
    return rt::BufferDecl::GradSum;
  }
  llvm_unreachable("every buffer kind is listed");
}

/// One plan.func as the runtime's FunctionPlan: its buffers, its steps in
/// order, its outputs; `counts` gets its launches, GEMMs and bytes.
llvm::Expected<rt::FunctionPlan> serializeFunction(plan::FuncOp fn,
                                                   LoweredPackage::Counts &counts) {
  rt::FunctionPlan f;
  f.name = fn.getSymName().str();
  f.arenaBytes = fn.getArenaBytes();
  // Beyond any one device: a typo in a batch size, not a model (an
  // imported model's shapes are only checked here).
  const int64_t limit = int64_t(16) << 40;
  if (f.arenaBytes > limit)
    return failure(llvm::formatv("@{0} would need {1:f0} GiB of activations (the limit "
                                 "is 16384 GiB); is the micro-batch or sequence length "
                                 "too large?",
                                 f.name, double(f.arenaBytes) / double(1ull << 30))
                       .str());
  llvm::DenseMap<Value, int> ids;
  for (Operation &inner : fn.getBody().front()) {
    if (inner.getNumResults() == 1 && isa<MemRefType>(inner.getResult(0).getType())) {
      rt::BufferDecl b;
      if (auto bind = dyn_cast<plan::BindOp>(inner)) {
        b.kind = bufferKind(bind.getKind());
        b.name = bind.getName().str();
      } else if (auto arena = dyn_cast<plan::ArenaOp>(inner)) {
        if (arena.getOffset() < 0)
          return failure("@" + f.name + ": an arena slice is not placed (run mlc-plan-memory)");
        auto t = cast<MemRefType>(arena.getBuffer().getType());
        b.kind = rt::BufferDecl::Arena;
        b.offset = arena.getOffset();
        b.dtype = dtypeName(t.getElementType());
        b.numel = t.getNumElements();
      } else if (auto view = dyn_cast<plan::ViewOp>(inner)) {
        auto t = cast<MemRefType>(view.getBuffer().getType());
        b.kind = rt::BufferDecl::Alias;
        b.alias = ids.lookup(view.getSource());
        b.offset = view.getOffset();
        b.dtype = dtypeName(t.getElementType());
        b.numel = t.getNumElements();
      }
      ids[inner.getResult(0)] = f.buffers.size();
      f.buffers.push_back(b);
      continue;
    }
    rt::StepDecl s;
    if (auto launch = dyn_cast<plan::LaunchOp>(inner)) {
      s.kind = rt::StepDecl::Kernel;
      s.kernel = launch.getKernel().str();
      if (auto shard = launch.getShard())
        s.shard = *shard < 0 ? rt::StepDecl::kAllShards : *shard;
      ++counts.kernels;
    } else if (auto gemm = dyn_cast<plan::GemmOp>(inner)) {
      s.kind = rt::StepDecl::Gemm;
      s.transA = gemm.getTransposeLhs();
      s.transB = gemm.getTransposeRhs();
      s.m = gemm.getM();
      s.n = gemm.getN();
      s.k = gemm.getK();
      s.batch.assign(gemm.getBatch().begin(), gemm.getBatch().end());
      s.lhsStrides.assign(gemm.getLhsStrides().begin(), gemm.getLhsStrides().end());
      s.rhsStrides.assign(gemm.getRhsStrides().begin(), gemm.getRhsStrides().end());
      s.bias = bool(gemm.getBias());
      s.gelu = bool(gemm.getPre());
      s.accumulate = gemm.getAccumulate();
      ++counts.gemms;
    } else if (auto start = dyn_cast<plan::AllReduceStartOp>(inner)) {
      s.kind = rt::StepDecl::AllReduceStart;
      s.tag = start.getTag();
      s.offset = start.getOffset();
      s.count = start.getCount();
      s.clip = start.getClip();
    } else if (auto wait = dyn_cast<plan::AllReduceWaitOp>(inner)) {
      s.kind = rt::StepDecl::AllReduceWait;
      s.tag = wait.getTag();
    } else if (auto start = dyn_cast<plan::ReduceScatterStartOp>(inner)) {
      s.kind = rt::StepDecl::ReduceScatterStart;
      s.tag = start.getTag();
      s.offset = start.getOffset();
      s.count = start.getCount();
      s.clip = start.getClip();
    } else if (auto wait = dyn_cast<plan::ReduceScatterWaitOp>(inner)) {
      s.kind = rt::StepDecl::ReduceScatterWait;
      s.tag = wait.getTag();
    } else if (auto start = dyn_cast<plan::AllGatherStartOp>(inner)) {
      s.kind = rt::StepDecl::AllGatherStart;
      s.tag = start.getTag();
      s.offset = start.getOffset();
      s.count = start.getCount();
    } else if (auto wait = dyn_cast<plan::AllGatherWaitOp>(inner)) {
      s.kind = rt::StepDecl::AllGatherWait;
      s.tag = wait.getTag();
    } else if (isa<plan::AllReduceNormOp>(inner)) {
      s.kind = rt::StepDecl::AllReduceNorm;
    } else if (auto tp = dyn_cast<plan::TpAllReduceOp>(inner)) {
      s.kind = rt::StepDecl::TpAllReduce;
      s.max = tp.getMax();
      s.async = tp.getTag().has_value();
      s.tag = tp.getTag().value_or(0);
    } else if (auto wait = dyn_cast<plan::TpWaitOp>(inner)) {
      s.kind = rt::StepDecl::TpWait;
      s.tag = wait.getTag();
    } else if (isa<plan::TpAllGatherOp>(inner)) {
      s.kind = rt::StepDecl::TpAllGather;
    } else if (isa<plan::TpReduceScatterOp>(inner)) {
      s.kind = rt::StepDecl::TpReduceScatter;
    } else if (auto o = dyn_cast<plan::OutputOp>(inner)) {
      f.outputs.push_back({o.getName().str(), ids.lookup(o.getBuffer()),
                           std::vector<int64_t>(o.getShape().begin(), o.getShape().end())});
      continue;
    } else {
      return failure("@" + f.name + ": cannot serialize '" +
                     inner.getName().getStringRef() + "'");
    }
    llvm::DenseSet<Value> seen;
    for (Value v : inner.getOperands()) {
      s.buffers.push_back(ids.lookup(v));
      if (seen.insert(v).second && s.kind != rt::StepDecl::TpWait) // its start moved them
        counts.bytes += plan::bufferBytes(v);
    }
    f.steps.push_back(s);
  }
  return f;
}

} // namespace

llvm::Expected<LoweredPackage> serializePlan(ModuleOp module) {
  rt::PlanData data;
  LoweredPackage out;
  if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
    data.tokenCapacity = cap.getInt();
  if (auto tp = module->getAttrOfType<IntegerAttr>("mlc.tensor_parallel"))
    data.tensorParallel = tp.getInt();
  data.sequenceParallel = module->hasAttr("mlc.sequence_parallel");
  // The CPU target's source file (kernels.cpp) and the CUDA target's
  // (kernels.cu), printed from
  // the plan's kernels here and nowhere before.
  std::unique_ptr<lowering::KernelTarget> target =
      lowering::createCpuTarget(data.tokenCapacity);
  std::unique_ptr<lowering::KernelTarget> cuda = lowering::createCudaTarget(data.tokenCapacity);
  std::ostringstream kernels, kernelsCu;
  kernels << target->prelude();
  kernelsCu << cuda->prelude();
  int64_t offset = 0;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto p = dyn_cast<plan::ParamOp>(op)) {
      rt::ParamInfo info;
      info.name = p.getSymName().str();
      info.dtype = dtypeName(p.getElement());
      info.shape.assign(p.getShape().begin(), p.getShape().end());
      info.numel = 1;
      for (int64_t d : info.shape)
        info.numel *= d;
      info.offset = offset;
      offset += info.numel;
      info.decay = p.getDecay();
      info.init = p.getInit().str();
      if (auto split = p->getAttrOfType<DictionaryAttr>("mlc.tp_split")) {
        info.tpDim = cast<IntegerAttr>(split.get("dim")).getInt();
        auto blocks = cast<DenseI64ArrayAttr>(split.get("blocks")).asArrayRef();
        info.tpBlocks.assign(blocks.begin(), blocks.end());
      }
      data.params.push_back(info);
    } else if (auto in = dyn_cast<plan::InputOp>(op)) {
      rt::InputInfo info;
      info.name = in.getSymName().str();
      info.dtype = dtypeName(in.getElement());
      info.shape.assign(in.getShape().begin(), in.getShape().end());
      data.inputs.push_back(info);
    } else if (auto sc = dyn_cast<plan::ScalarsOp>(op)) {
      data.scalars.push_back({sc.getSymName().str(), dtypeName(sc.getElement()), sc.getSize()});
    } else if (auto k = dyn_cast<plan::KernelOp>(op)) {
      auto cpuText = lowering::printKernel(k, *target);
      if (!cpuText)
        return cpuText.takeError();
      kernels << *cpuText;
      auto cudaText = lowering::printKernel(k, *cuda);
      if (!cudaText)
        return cudaText.takeError();
      kernelsCu << *cudaText;
    } else if (auto fn = dyn_cast<plan::FuncOp>(op)) {
      auto f = serializeFunction(fn, out.counts[fn.getSymName().str()]);
      if (!f)
        return f.takeError();
      data.functions.push_back(std::move(*f));
    }
  }
  out.plan = rt::writePlan(data);
  out.kernelsCpp = kernels.str();
  out.kernelsCu = kernelsCu.str();
  return out;
}

} // namespace mlc
