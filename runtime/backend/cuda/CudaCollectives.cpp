//===- CudaCollectives.cpp - the CUDA backend's gradient buckets and NCCL ---===//
//
// A gradient bucket is scaled on the compute stream (the rank's weight,
// bucket-wise clipping), then summed over the ranks by NCCL on a stream of
// its own, ordered by events, so that backward goes on computing while it
// runs.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackendImpl.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace mlc::rt {

/// The bucket-norm kernel over `count` elements at `g`: one partial sum of
/// squares per block in bucketParts_; returns the blocks launched.
int CudaBackend::launchSumOfSquares(CUdeviceptr g, int64_t count, const char *what) {
  long long n = count;
  const int parts = int(std::min<int64_t>(kBucketParts, (count + 255) / 256));
  void *args[] = {&g, &n, &bucketParts_};
  check(d_->launch(sumsq_, unsigned(parts), 1, 1, 256, 1, 1, 0, stream_, args, nullptr), what);
  return parts;
}

void CudaBackend::prepareBucket(int64_t offset, int64_t count, bool clip) {
  double threshold =
      clip ? bucketClip_ * std::sqrt(double(count) / double(pkg_.paramCount)) : 0.0;
  if (gradWeight_ == 1.0 && threshold <= 0)
    return;
  if (offset < 0 || count < 1 || offset + count > pkg_.paramCount)
    fail("internal: a gradient bucket past the end of the gradients");
  CUdeviceptr g = flats_[FlatBuffer::Grads] + offset * elementSize_;
  long long n = count;
  int parts = threshold > 0 ? launchSumOfSquares(g, count, "a gradient bucket's norm") : 0;
  double weight = gradWeight_;
  void *args[] = {&g, &n, &bucketParts_, &parts, &weight, &threshold};
  unsigned blocks = unsigned(std::min<int64_t>(4096, (count + 1023) / 1024));
  check(d_->launch(scale_, blocks, 1, 1, 256, 1, 1, 0, stream_, args, nullptr),
        "scaling a gradient bucket");
}

/// The bucket norm's kernel over any range: partial sums per block, added
/// on the host in block order.
double CudaBackend::sumOfSquares(FlatBuffer which, int64_t offset, int64_t count) {
  const int64_t total = which == FlatBuffer::AdamM || which == FlatBuffer::AdamV
                            ? momentCount()
                            : pkg_.paramCount;
  if (offset < 0 || count < 0 || offset + count > total)
    fail("internal: a sum of squares past the end of a flat buffer");
  if (count == 0)
    return 0.0;
  const int parts = launchSumOfSquares(flat(which) + offset * elementSize_, count,
                                       "a sum of squares over the gradients");
  std::vector<double> host(size_t(parts), 0.0);
  check(d_->streamSync(stream_), "a sum of squares over the gradients");
  check(d_->dtoh(host.data(), bucketParts_, size_t(parts) * sizeof(double)),
        "reading a sum of squares");
  double sum = 0;
  for (double p : host)
    sum += p;
  return sum;
}

bool CudaBackend::ncclWanted() const {
  if (worldSize() > 1)
    return true;
  const char *force = std::getenv("MLC_NCCL");
  return force && std::string(force) == "1";
}

/// The NCCL communicator of the host group `group` (null: this rank alone):
/// its first rank's NCCL id, broadcast over the group (MPI). On the
/// emulator the group itself then carries the sums.
ncclComm_t CudaBackend::openNcclComm(Communicator *group, const char *what) {
  if (!nccl_)
    nccl_ = emulated_ ? emulatedDevice().nccl : loadNccl();
  Nccl *n = nccl_;
  auto checkNccl = [&](ncclResult_t rc, const std::string &call) {
    if (rc != ncclSuccess)
      fail(std::string("NCCL: ") + call + " of " + what + " failed: " + n->errorString(rc));
  };
  const int ranks = group ? group->size() : 1, rank = group ? group->rank() : 0;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0)
    checkNccl(n->uniqueId(&id), "ncclGetUniqueId");
  if (ranks > 1) {
    group->broadcast(&id, sizeof id, 0);
    if (emulated_)
      emulatedDevice().bindGroup(id, group);
  }
  ncclComm_t comm = nullptr;
  checkNccl(n->initRank(&comm, ranks, id, rank), "ncclCommInitRank");
  return comm;
}

/// The data-parallel ranks' communicator and a stream for the gradient sums.
void CudaBackend::openNccl() {
  ncclComm_ = openNcclComm(worldSize() > 1 ? comm_.get() : nullptr, "the data-parallel group");
  check(d_->streamCreate(&commStream_, CU_STREAM_NON_BLOCKING), "creating the NCCL stream");
}

/// A plan.tp_all_reduce step: the sum (or maximum) over the tensor-parallel
/// group, in place, on the compute stream: the next kernel reads it, so
/// there is nothing to overlap, and the stream's order (and a captured
/// graph) holds it. An asynchronous one (a tag) runs on the tensor-parallel
/// stream once the compute stream has written the buffer (an event), while
/// the compute stream goes on (the weight-gradient GEMMs); its plan.tp_wait
/// makes the compute stream wait for its event. One is in flight at a time
/// (mlc-overlap-tp-collectives), so the group's NCCL calls keep one order.
void CudaBackend::tpAllReduceStep(const FunctionPlan &fn, const StepDecl &s, CUdeviceptr data) {
  if (!tpComm_)
    fail("internal: the tensor-parallel NCCL communicator is not open");
  auto [count, es] = tpAllReduceElements(fn, s);
  void *p = reinterpret_cast<void *>(data);
  CUstream stream = stream_;
  CUevent done = nullptr;
  if (s.async) {
    if (!tpStream_)
      check(d_->streamCreate(&tpStream_, CU_STREAM_NON_BLOCKING),
            "creating the tensor-parallel NCCL stream");
    auto &[ready, finished] = tpEvents_[int(s.tag)];
    if (!ready) {
      check(d_->eventCreate(&ready, CU_EVENT_DISABLE_TIMING), "creating an event");
      check(d_->eventCreate(&finished, CU_EVENT_DISABLE_TIMING), "creating an event");
    }
    const std::string ordering =
        "ordering the tensor-parallel all-reduce " + std::to_string(s.tag);
    check(d_->eventRecord(ready, stream_), ordering);
    check(d_->streamWaitEvent(tpStream_, ready, 0), ordering);
    stream = tpStream_;
    done = finished;
  }
  ncclResult_t rc = nccl_->allReduce(p, p, size_t(count), es == 8 ? ncclFloat64 : ncclFloat32,
                                     s.max ? ncclMax : ncclSum, tpComm_,
                                     reinterpret_cast<cudaStream_t>(stream));
  if (rc != ncclSuccess)
    fail(std::string("NCCL: the tensor-parallel all-reduce ") + (s.max ? "(max)" : "(sum)") +
         " of " + std::to_string(count) + " elements failed: " + nccl_->errorString(rc));
  if (done)
    check(d_->eventRecord(done, tpStream_),
          "ordering the tensor-parallel all-reduce " + std::to_string(s.tag));
}

void CudaBackend::tpWaitStep(const StepDecl &s) {
  auto it = tpEvents_.find(int(s.tag));
  if (it == tpEvents_.end())
    fail("internal: the tensor-parallel all-reduce " + std::to_string(s.tag) +
         " was never started");
  check(d_->streamWaitEvent(stream_, it->second.second, 0),
        "waiting for the tensor-parallel all-reduce " + std::to_string(s.tag));
}

/// A plan.tp_all_gather or plan.tp_reduce_scatter step (sequence
/// parallelism): ncclAllGather or ncclReduceScatter over the
/// tensor-parallel group from the buffer at `in` into the one at `out`, on
/// the compute stream, as the blocking all-reduce: the next kernel reads
/// `out`, and the stream's order (and a captured graph) holds it. The plan
/// verifier keeps it out of an asynchronous all-reduce's flight, so the
/// group's NCCL calls keep one order across the two streams.
void CudaBackend::tpSlicesStep(const FunctionPlan &fn, const StepDecl &s, CUdeviceptr out,
                               CUdeviceptr in) {
  if (!tpComm_)
    fail("internal: the tensor-parallel NCCL communicator is not open");
  auto [count, es] = tpSliceElements(fn, s);
  const ncclDataType_t type = es == 8 ? ncclFloat64 : ncclFloat32;
  const void *from = reinterpret_cast<const void *>(in);
  void *to = reinterpret_cast<void *>(out);
  auto stream = reinterpret_cast<cudaStream_t>(stream_);
  const bool gather = s.kind == StepDecl::TpAllGather;
  ncclResult_t rc = gather ? nccl_->allGather(from, to, size_t(count), type, tpComm_, stream)
                           : nccl_->reduceScatter(from, to, size_t(count), type, ncclSum,
                                                  tpComm_, stream);
  if (rc != ncclSuccess)
    fail(std::string("NCCL: the tensor-parallel ") + (gather ? "all-gather" : "reduce-scatter") +
         " of " + std::to_string(count) + " elements per rank failed: " + nccl_->errorString(rc));
}

/// The bucket's sum runs on the NCCL stream once the compute stream has
/// written its gradients (an event), so backward goes on computing; its
/// wait makes the compute stream wait for the sum's event. Both are stream
/// orderings: nothing blocks the host, and a captured graph holds them.
void CudaBackend::collectiveStart(
    Events &events, int tag, FlatBuffer which, int64_t offset, int64_t count, const char *what,
    const std::function<ncclResult_t(CUdeviceptr, cudaStream_t)> &issue) {
  if (!ncclComm_)
    openNccl();
  if (offset < 0 || count < 1 || offset + count > pkg_.paramCount)
    fail(std::string("internal: ") + what + " past the end of a flat buffer");
  auto &[ready, done] = events[tag];
  if (!ready) {
    check(d_->eventCreate(&ready, CU_EVENT_DISABLE_TIMING), "creating an event");
    check(d_->eventCreate(&done, CU_EVENT_DISABLE_TIMING), "creating an event");
  }
  const std::string ordering =
      std::string("ordering ") + what + " of bucket " + std::to_string(tag);
  check(d_->eventRecord(ready, stream_), ordering);
  check(d_->streamWaitEvent(commStream_, ready, 0), ordering);
  ncclResult_t rc = issue(flat(which) + offset * elementSize_,
                          reinterpret_cast<cudaStream_t>(commStream_));
  if (rc != ncclSuccess)
    fail(std::string("NCCL: ") + what + " of gradient bucket " + std::to_string(tag) +
         " failed: " + nccl_->errorString(rc));
  check(d_->eventRecord(done, commStream_), ordering);
}

void CudaBackend::collectiveWait(Events &events, int tag, const char *what) {
  auto it = events.find(tag);
  if (it == events.end())
    fail(std::string("internal: ") + what + " " + std::to_string(tag) + " was never started");
  check(d_->streamWaitEvent(stream_, it->second.second, 0),
        std::string("waiting for ") + what + " of bucket " + std::to_string(tag));
}

/// The bucket's sum runs on the NCCL stream once the compute stream has
/// written its gradients (an event), so backward goes on computing; its
/// wait makes the compute stream wait for the sum's event. Both are stream
/// orderings: nothing blocks the host, and a captured graph holds them.
void CudaBackend::allReduceStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  if (!ncclWanted())
    return;
  const ncclDataType_t type = elementSize_ == 8 ? ncclFloat64 : ncclFloat32;
  collectiveStart(bucketEvents_, tag, which, offset, count, "the all-reduce",
                  [&](CUdeviceptr data, cudaStream_t stream) {
                    void *p = reinterpret_cast<void *>(data);
                    return nccl_->allReduce(p, p, size_t(count), type, ncclSum, ncclComm_, stream);
                  });
}

void CudaBackend::allReduceWait(int tag) {
  if (!ncclWanted())
    return;
  collectiveWait(bucketEvents_, tag, "the all-reduce");
}

// The distributed optimizer's collectives, ordered as the all-reduce is.
// Its shards are uneven (shardOf(): floor(r * c / R) to floor((r + 1) * c /
// R) of a bucket of c), while ncclReduceScatter and ncclAllGather take the
// same count from every rank; rather than pad every bucket (and the
// moments, and the AdamW windows) to a multiple of R on CUDA alone, each is
// a group of per-shard collectives in place: a reduce-scatter is one
// ncclReduce per shard, to its rank, and an all-gather one ncclBroadcast
// per shard, from its rank (NCCL runs a group's calls as one operation; each
// moves what the equal-count collective would). After a reduce-scatter, the
// other ranks' shards here are left as this rank's own gradients, which
// nothing reads (Comm.h: "partial sums").

void CudaBackend::reduceScatterStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  if (!ncclWanted())
    return;
  const ncclDataType_t type = elementSize_ == 8 ? ncclFloat64 : ncclFloat32;
  const int ranks = worldSize();
  collectiveStart(scatterEvents_, tag, which, offset, count, "the reduce-scatter",
                  [&](CUdeviceptr data, cudaStream_t stream) {
                    ncclResult_t rc = nccl_->groupStart();
                    for (int r = 0; r < ranks && rc == ncclSuccess; ++r) {
                      ShardRange sh = shardOf(count, r, ranks);
                      if (sh.count == 0)
                        continue; // every rank skips the same shards
                      void *p = reinterpret_cast<void *>(data + sh.first * elementSize_);
                      rc = nccl_->reduce(p, p, size_t(sh.count), type, ncclSum, r, ncclComm_,
                                         stream);
                    }
                    ncclResult_t end = nccl_->groupEnd();
                    return rc != ncclSuccess ? rc : end;
                  });
}

void CudaBackend::reduceScatterWait(int tag) {
  if (!ncclWanted())
    return;
  collectiveWait(scatterEvents_, tag, "the reduce-scatter");
}

void CudaBackend::allGatherStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  if (!ncclWanted())
    return;
  const ncclDataType_t type = elementSize_ == 8 ? ncclFloat64 : ncclFloat32;
  const int ranks = worldSize();
  collectiveStart(gatherEvents_, tag, which, offset, count, "the all-gather",
                  [&](CUdeviceptr data, cudaStream_t stream) {
                    ncclResult_t rc = nccl_->groupStart();
                    for (int r = 0; r < ranks && rc == ncclSuccess; ++r) {
                      ShardRange sh = shardOf(count, r, ranks);
                      if (sh.count == 0)
                        continue;
                      void *p = reinterpret_cast<void *>(data + sh.first * elementSize_);
                      rc = nccl_->broadcast(p, p, size_t(sh.count), type, r, ncclComm_, stream);
                    }
                    ncclResult_t end = nccl_->groupEnd();
                    return rc != ncclSuccess ? rc : end;
                  });
}

void CudaBackend::allGatherWait(int tag) {
  if (!ncclWanted())
    return;
  collectiveWait(gatherEvents_, tag, "the all-gather");
}

} // namespace mlc::rt
