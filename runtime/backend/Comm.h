//===- Comm.h - collectives over the ranks of a run ------------*- C++ -*-===//
//
// A Communicator sums buffers over the ranks of a data-parallel run. The
// world is what launched the process: `mpirun -np R mlc train ...` gives R
// ranks over Open MPI (CPU buffers; NCCL for device buffers goes behind the
// same interface), a plain launch gives none (one rank, no collectives).
// split() makes sub-communicators of it: under --tensor-parallel T, the
// tensor-parallel group of T consecutive ranks (plan.tp_all_reduce) and the
// data-parallel group across the groups (the gradient buckets).
//
// Sums are in place. allReduceStart() returns at once; the sum progresses
// while the caller computes (the backend calls progress() between kernel
// launches, since MPI progresses non-blocking collectives only inside MPI
// calls) and allReduceWait() returns when it has arrived. Every blocking
// call gives up after the timeout with an Error that says which rank waited
// for what: a rank that died or hangs never hangs the others.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_COMM_H
#define MLC_RUNTIME_BACKEND_COMM_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlc::rt {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi": for logs.
  virtual std::string name() const = 0;

  /// Starts summing `count` elements (f64 when `f64`, else f32) at `data`
  /// over the ranks, in place; `tag` names it until its wait.
  virtual void allReduceStart(void *data, int64_t count, bool f64, int tag) = 0;
  virtual void allReduceWait(int tag) = 0;
  /// The distributed optimizer's collectives over a bucket of `count`
  /// elements at `data`, each rank's shard as shardOf() deals them
  /// (PlanFormat.h). reduceScatter: after its wait, this rank's shard of the
  /// bucket holds the sum over the ranks (the rest of the bucket holds
  /// partial sums). allGather: after its wait, every rank's shard is in
  /// place on every rank. Tags are per kind.
  virtual void reduceScatterStart(void *data, int64_t count, bool f64, int tag) = 0;
  virtual void reduceScatterWait(int tag) = 0;
  virtual void allGatherStart(void *data, int64_t count, bool f64, int tag) = 0;
  virtual void allGatherWait(int tag) = 0;
  /// Lets outstanding sums progress; cheap when none is outstanding.
  virtual void progress() = 0;
  /// Blocking sum of a few doubles (losses, token counts).
  virtual void sum(double *values, int count) = 0;
  /// Blocking copy of `bytes` bytes at `data` from rank `root` to every rank
  /// (NCCL's unique id).
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  /// Blocking in-place sum (`max`: largest) of `count` elements (f64 when
  /// `f64`, else f32) at `data` over the ranks: the tensor-parallel group's
  /// plan.tp_all_reduce.
  virtual void allReduce(void *data, int64_t count, bool f64, bool max) = 0;
  /// The asynchronous form of allReduce's sum (a plan.tp_all_reduce with a
  /// tag, mlc-overlap-tp-collectives): starts here, progresses with
  /// progress(), and has arrived when tpAllReduceWait(tag) returns.
  virtual void tpAllReduceStart(void *data, int64_t count, bool f64, int tag) = 0;
  virtual void tpAllReduceWait(int tag) = 0;
  /// Sequence parallelism (plan.tp_all_gather): blocking; `out` gets every
  /// rank's `count` elements (f64 when `f64`, else f32) at `in`, rank r's at
  /// r x count. `in` and `out` do not overlap.
  virtual void allGather(const void *in, void *out, int64_t count, bool f64) = 0;
  /// Sequence parallelism (plan.tp_reduce_scatter): blocking; `out` (`count`
  /// elements) gets this rank's block, the rank-th of size() blocks, of the
  /// sum over the ranks of `in` (size() x count elements). No overlap.
  virtual void reduceScatter(const void *in, void *out, int64_t count, bool f64) = 0;
  /// Blocking gather of `bytes` bytes at `data` from every rank into `out`
  /// (size() x bytes, rank r's at r x bytes), on every rank.
  virtual void allGatherBytes(const void *data, int64_t bytes, void *out) = 0;
  /// The ranks of this communicator with the same `color`, ordered by
  /// `key`: a sub-communicator (collective: every rank calls it). The
  /// tensor- and data-parallel groups of a run are two of them.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;
  /// Ends the whole run from one rank (after an error it reports).
  [[noreturn]] virtual void abort(int code) = 0;
  /// Blocking gather to rank `root` alone: every rank sends its `bytes`
  /// bytes at `data`; on `root`, `out` gets rank r's `counts[r]` bytes after
  /// those of ranks 0 .. r-1 (`counts` and `out` are read on root only).
  /// The other ranks keep nothing: the checkpoint writer's gather.
  virtual void gatherBytes(const void *data, int64_t bytes, void *out,
                           const std::vector<int64_t> &counts, int root);
};

/// Compares `settings` (name -> value) with rank 0's; collective. When a
/// rank's differ, every rank fails with the same Error: each such rank's
/// differences (of the first four), one line each ("--lr: rank 0's '0.001',
/// rank 1's '0.002'"). `what` names the settings in it ("settings", "a
/// package").
void requireSameAsRank0(Communicator &comm, const std::map<std::string, std::string> &settings,
                        const std::string &what);

/// True when mpirun (or another MPI launcher) started this process.
bool launchedByMpi();

/// The world of this process: an MPI communicator when launchedByMpi()
/// (initializing MPI once), null otherwise. `timeoutSeconds` bounds every
/// wait. Fails with an Error when MPI launched the process but this build
/// has no MPI.
std::shared_ptr<Communicator> openWorld(double timeoutSeconds);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_COMM_H
