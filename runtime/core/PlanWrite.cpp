//===- PlanWrite.cpp - writing plan.txt ------------------------------------===//
//
// The plan's text form, written from PlanData (the plan dialect's serializer
// fills one); PlanFormat.cpp reads it back.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/PlanFormat.h"

#include <sstream>

namespace mlc::rt {

namespace {

const char *kindName(BufferDecl::Kind k) {
  switch (k) {
  case BufferDecl::Param:
    return "param";
  case BufferDecl::Grad:
    return "grad";
  case BufferDecl::Input:
    return "input";
  case BufferDecl::Arena:
    return "arena";
  case BufferDecl::Alias:
    return "alias";
  case BufferDecl::Moment1:
    return "moment1";
  case BufferDecl::Moment2:
    return "moment2";
  case BufferDecl::Scalars:
    return "scalars";
  case BufferDecl::GradSum:
    return "grad_sum";
  }
  return "?";
}

} // namespace

std::string writePlan(const PlanData &plan) {
  std::ostringstream os;
  os << "mlc-plan " << kPlanVersion << "\n";
  if (plan.tokenCapacity)
    os << "tokens " << plan.tokenCapacity << "\n";
  if (plan.tensorParallel > 1)
    os << "tensor_parallel " << plan.tensorParallel << "\n";
  if (plan.sequenceParallel)
    os << "sequence_parallel\n";
  for (const ParamInfo &p : plan.params) {
    os << "param " << p.name << " " << p.dtype << " " << shapeText(p.shape) << " "
       << (p.decay ? 1 : 0) << " " << p.init;
    if (p.tpDim >= 0) {
      os << " tp " << p.tpDim << " ";
      for (size_t i = 0; i < p.tpBlocks.size(); ++i)
        os << (i ? "," : "") << p.tpBlocks[i];
    }
    os << "\n";
  }
  for (const InputInfo &in : plan.inputs)
    os << "input " << in.name << " " << in.dtype << " " << shapeText(in.shape) << "\n";
  for (const ScalarsInfo &s : plan.scalars)
    os << "scalars " << s.name << " " << s.dtype << " " << s.size << "\n";
  for (const FunctionPlan &fn : plan.functions) {
    os << "func " << fn.name << " " << fn.arenaBytes << "\n";
    for (size_t i = 0; i < fn.buffers.size(); ++i) {
      const BufferDecl &b = fn.buffers[i];
      os << "buf %" << i << " " << kindName(b.kind);
      if (b.kind == BufferDecl::Arena)
        os << " " << b.offset << " " << b.dtype << " " << b.numel;
      else if (b.kind == BufferDecl::Alias)
        os << " %" << b.alias << " " << b.offset << " " << b.dtype << " " << b.numel;
      else
        os << " " << b.name;
      os << "\n";
    }
    for (const StepDecl &s : fn.steps) {
      if (s.kind == StepDecl::Kernel) {
        os << "kernel " << s.kernel;
        for (int b : s.buffers)
          os << " %" << b;
        if (s.shard != StepDecl::kNoShard)
          os << " shard "
             << (s.shard == StepDecl::kAllShards ? std::string("*") : std::to_string(s.shard));
        os << "\n";
        continue;
      } else if (s.kind == StepDecl::AllReduceStart || s.kind == StepDecl::ReduceScatterStart ||
                 s.kind == StepDecl::AllGatherStart) {
        os << collectiveName(s.kind) << " " << s.tag << " " << s.offset << " " << s.count;
        for (int b : s.buffers)
          os << " %" << b;
        os << (s.clip ? " clip\n" : "\n");
        continue;
      } else if (s.kind == StepDecl::AllReduceWait || s.kind == StepDecl::ReduceScatterWait ||
                 s.kind == StepDecl::AllGatherWait) {
        os << collectiveName(s.kind) << " " << s.tag;
      } else if (s.kind == StepDecl::AllReduceNorm) {
        os << "allreduce_norm";
      } else if (s.kind == StepDecl::TpAllReduce) {
        os << "tp_allreduce " << (s.max ? "max" : "sum");
        if (s.async) {
          os << " %" << s.buffers.at(0) << " tag " << s.tag << "\n";
          continue;
        }
      } else if (s.kind == StepDecl::TpWait) {
        os << "tp_wait " << s.tag;
      } else if (s.kind == StepDecl::TpAllGather) {
        os << "tp_allgather";
      } else if (s.kind == StepDecl::TpReduceScatter) {
        os << "tp_reducescatter";
      } else {
        auto extent = [](int64_t v) { return v < 0 ? std::string("T") : std::to_string(v); };
        os << "gemm " << s.transA << " " << s.transB << " " << extent(s.m) << " " << s.n << " "
           << extent(s.k) << " " << s.batch.size();
        for (auto *v : {&s.batch, &s.lhsStrides, &s.rhsStrides})
          for (int64_t x : *v)
            os << " " << x;
        os << (s.accumulate ? " accumulate" : "") << (s.bias ? " bias" : "")
           << (s.gelu ? " gelu" : "");
      }
      for (int b : s.buffers)
        os << " %" << b;
      os << "\n";
    }
    for (const FunctionPlan::Output &o : fn.outputs)
      os << "output " << o.name << " %" << o.buffer << " " << shapeText(o.shape) << "\n";
    os << "end\n";
  }
  return os.str();
}

} // namespace mlc::rt
