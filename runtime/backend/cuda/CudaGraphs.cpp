//===- CudaGraphs.cpp - the CUDA backend's stream and graphs ---------------===//
//
// Every step of a function is enqueued on one non-blocking compute stream.
// After a warm-up run, a function's whole step is captured once as a CUDA
// graph per token count and replayed as one launch (the kernels read the
// step and token count from device memory, so the graph holds across
// steps); MLC_CUDA_GRAPH=0 launches step by step, and MLC_PROFILE times
// each step with events instead. A run writes the kernel context first and
// reads the kernels' error words after; host copies and clears are ordered
// on the same stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackendImpl.h"
#include "contract/StepFunctions.h"

#include <cmath>

namespace mlc::rt {

void CudaBackend::write(CUdeviceptr dst, const void *src, size_t bytes, const std::string &what) {
  check(d_->htodAsync(dst, src, bytes, stream_), what);
  check(d_->streamSync(stream_), what);
}

void CudaBackend::clear(CUdeviceptr dst, size_t bytes, const std::string &what) {
  check(d_->memset8Async(dst, 0, bytes, stream_), what);
  check(d_->streamSync(stream_), what);
}

void CudaBackend::enqueue(const std::string &function, bool timed) {
  const FunctionPlan &fn = pkg_.function(function);
  Bound &b = bound_.at(function);
  if (timed && !timers_.first) {
    check(d_->eventCreate(&timers_.first, CU_EVENT_DEFAULT), "creating an event");
    check(d_->eventCreate(&timers_.second, CU_EVENT_DEFAULT), "creating an event");
  }
  CUevent start = timers_.first, stop = timers_.second;
  for (size_t i = 0; i < fn.steps.size(); ++i) {
    const StepDecl &s = fn.steps[i];
    if (timed)
      d_->eventRecord(start, stream_);
    if (s.kind == StepDecl::Kernel) {
      const CudaKernelInfo &k = kernels_.at(s.kernel);
      CUfunction f = functions_.at(s.kernel);
      CUdeviceptr args = b.argTable + b.argOffset[i] * sizeof(CUdeviceptr);
      for (size_t p = 0; p < k.launches.size(); ++p) {
        int phase = int(p);
        CUdeviceptr *ctx = b.shardCtx[i] ? &b.shardCtx[i] : &ctx_;
        void *params[] = {&args, ctx, &phase};
        check(d_->launch(f, unsigned(k.launches[p].grid), 1, 1, unsigned(k.launches[p].block), 1,
                         1, 0, stream_, params, nullptr),
              "launching kernel " + s.kernel + " phase " + std::to_string(p));
      }
    } else if (s.kind == StepDecl::Gemm) {
      gemm(s, b.gemmTypes[i], b.pointers[s.buffers[0]], b.pointers[s.buffers[1]],
           b.pointers[s.buffers[2]], s.bias ? b.pointers[s.buffers[3]] : 0,
           s.gelu ? b.pointers[s.buffers.back()] : 0);
    } else if (s.kind == StepDecl::TpAllReduce) {
      tpAllReduceStep(fn, s, b.pointers[s.buffers[0]]);
    } else if (s.kind == StepDecl::TpWait) {
      tpWaitStep(s);
    } else if (s.kind == StepDecl::TpAllGather || s.kind == StepDecl::TpReduceScatter) {
      tpSlicesStep(fn, s, b.pointers[s.buffers[0]], b.pointers[s.buffers[1]]);
    } else {
      startOrWaitCollective(s);
    } // AllReduceNorm: after the function, on the host (run())

    if (timed) {
      d_->eventRecord(stop, stream_);
      check(d_->eventSync(stop), "running " + b.labels[i]);
      float ms = 0;
      d_->elapsed(&ms, start, stop);
      (s.kind == StepDecl::Kernel ? profile.kernelSeconds : profile.gemmSeconds) += ms / 1e3;
      profile.secondsByKernel[b.labels[i]] += ms / 1e3;
    }
  }
}

void CudaBackend::run(const std::string &function, int64_t step) {
  checkRows();
  // The tensor-parallel group's communicator opens before any step is
  // enqueued or captured (its ncclCommInitRank is collective over the group).
  if (pkg_.tensorParallel > 1 && !tpComm_) {
    requireTensorParallelGroup();
    tpComm_ = openNcclComm(tensorParallel(), "the tensor-parallel group");
  }
  Bound &b = bound_.at(function);
  if (b.usesGradSums && !flats_[FlatBuffer::GradSum])
    allocateGradSums();
  // The context and error words live in device memory, written before the
  // step (synchronously: the host values are on this stack).
  int64_t words[3];
  resetCudaErrorWords(words);
  CudaKernelCtx ctx{step, reinterpret_cast<int64_t *>(errors_), rows_,
                    reinterpret_cast<char *>(scratch_)};
  check(d_->streamSync(stream_), "waiting for the device");
  write(errors_, words, sizeof words, "resetting the error words");
  write(ctx_, &ctx, sizeof ctx, "writing the kernel context");
  const FunctionPlan &fn = pkg_.function(function);
  for (size_t i = 0; i < b.shardCtx.size(); ++i) {
    if (!b.shardCtx[i])
      continue;
    std::vector<int64_t> w = windows(fn.steps[i].shard);
    write(b.shardWindows[i], w.data(), w.size() * sizeof(int64_t), "writing a launch's windows");
    CudaKernelCtx sharded = ctx;
    sharded.win = reinterpret_cast<const int64_t *>(b.shardWindows[i]);
    sharded.nwin = int64_t(w.size() / 3);
    write(b.shardCtx[i], &sharded, sizeof sharded, "writing a sharded launch's context");
  }
  if (profile.enabled) {
    enqueue(function, /*timed=*/true);
  } else if (!useGraphs_ || b.runs == 0 || (gradWeighted_ && !weighsAfterRun(function) &&
                                             function == kTrainStepFn)) {
    // The first run is eager: cuBLASLt settles its choices before capture.
    // So is a step whose buckets take a weight that varies by micro-batch
    // (a graph would replay the weight it captured).
    enqueue(function, /*timed=*/false);
  } else {
    auto it = b.graphs.find(rows_);
    if (it == b.graphs.end()) {
      check(d_->beginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "starting a CUDA graph capture");
      enqueue(function, /*timed=*/false);
      CUgraph graph = nullptr;
      check(d_->endCapture(stream_, &graph), "ending a CUDA graph capture");
      CUgraphExec exec = nullptr;
      check(d_->instantiate(&exec, graph, 0), "instantiating the step's CUDA graph");
      d_->graphDestroy(graph);
      it = b.graphs.emplace(rows_, exec).first;
    }
    check(d_->graphLaunch(it->second, stream_), "launching the step's CUDA graph");
  }
  if (weighsAfterRun(function))
    prepareBucket(0, pkg_.paramCount, /*clip=*/false); // the weight, where not 1
  ++b.runs;
  check(d_->streamSync(stream_), "running " + function);
  check(d_->dtoh(words, errors_, sizeof words), "reading the error words");
  checkCudaErrorWords(words, gatheredIds_);
  // A sharded norm (@grad_norm's last step): this rank's kernel took the
  // norm of its shards; their squares are summed over the ranks here, on
  // the host, which reads the norm next anyway (and so no graph holds it).
  for (size_t i = 0; i < fn.steps.size(); ++i) {
    const StepDecl &s = fn.steps[i];
    if (s.kind != StepDecl::AllReduceNorm || !comm_ || worldSize() <= 1)
      continue;
    if (i + 1 != fn.steps.size())
      fail("internal: " + function + "'s allreduce_norm is not its last step");
    double norm = 0;
    CUdeviceptr at = b.pointers[size_t(s.buffers[0])];
    check(d_->dtoh(&norm, at, sizeof norm), "reading this rank's gradient norm");
    double squares = norm * norm;
    comm_->sum(&squares, 1);
    norm = std::sqrt(squares);
    write(at, &norm, sizeof norm, "writing the gradient norm");
  }
}

} // namespace mlc::rt
