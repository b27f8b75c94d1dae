//===- Comm.cpp - Open MPI collectives ---------------------------------------===//

#include "runtime/backend/Comm.h"
#include "support/Error.h"
#include "runtime/core/PlanFormat.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#ifdef MLC_HAVE_MPI
// The C API only (not the deprecated C++ bindings, which need another library).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mlc::rt {

bool launchedByMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var))
      return true;
  return false;
}

namespace {

/// `text` on rank `root`, on every rank.
std::string broadcastText(Communicator &comm, std::string text, int root) {
  int64_t size = int64_t(text.size());
  comm.broadcast(&size, sizeof size, root);
  text.resize(size_t(size));
  comm.broadcast(text.data(), size, root);
  return text;
}

std::string encode(const std::map<std::string, std::string> &settings) {
  std::string text;
  for (const auto &[name, value] : settings)
    text += name + '\0' + value + '\0';
  return text;
}

std::map<std::string, std::string> decode(const std::string &text) {
  std::map<std::string, std::string> settings;
  for (size_t at = 0; at < text.size();) {
    size_t name = text.find('\0', at), value = text.find('\0', name + 1);
    settings[text.substr(at, name - at)] = text.substr(name + 1, value - name - 1);
    at = value + 1;
  }
  return settings;
}

} // namespace

void requireSameAsRank0(Communicator &comm, const std::map<std::string, std::string> &settings,
                        const std::string &what) {
  const int me = comm.rank();
  std::map<std::string, std::string> theirs = decode(broadcastText(comm, encode(settings), 0));
  std::string differences;
  auto line = [&](const std::string &name, const std::string *first, const std::string *mine) {
    differences += "\n  " + name + ": rank 0's " + (first ? "'" + *first + "'" : "none") +
                   ", rank " + std::to_string(me) + "'s " + (mine ? "'" + *mine + "'" : "none");
  };
  for (const auto &[name, value] : theirs) {
    auto it = settings.find(name);
    if (it == settings.end() || it->second != value)
      line(name, &value, it == settings.end() ? nullptr : &it->second);
  }
  for (const auto &[name, value] : settings)
    if (!theirs.count(name))
      line(name, nullptr, &value);
  std::vector<double> differs(size_t(comm.size()), 0.0);
  differs[size_t(me)] = differences.empty() ? 0.0 : 1.0;
  comm.sum(differs.data(), comm.size());
  // The differing ranks' lists, the first few of them, on every rank.
  constexpr int kListed = 4;
  std::string who, listed;
  int count = 0;
  for (int r = 0; r < comm.size(); ++r) {
    if (differs[size_t(r)] == 0)
      continue;
    if (++count > kListed)
      continue;
    who += (who.empty() ? "" : ", ") + std::to_string(r);
    listed += broadcastText(comm, me == r ? differences : "", r);
  }
  if (count == 0)
    return;
  fail((count == 1 ? "rank " + who + " was" : "ranks " + who + " were") + " started with " +
       what + " other than rank 0's:" + listed +
       (count > kListed ? "\n  (and " + std::to_string(count - kListed) + " more ranks)" : ""));
}

#ifdef MLC_HAVE_MPI
namespace {

class MpiCommunicator final : public Communicator {
public:
  /// A sub-communicator (split()): its own ranks, the same timeout.
  MpiCommunicator(MPI_Comm comm, double timeout) : timeout_(timeout), comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  explicit MpiCommunicator(double timeout) : timeout_(timeout) {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      // Errors come back as codes, reported as mlc errors.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized)
          MPI_Finalize();
      });
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void allReduceStart(void *data, int64_t count, bool f64, int tag) override {
    startSum(pending_, data, count, f64, tag, "all-reduce", "the gradient all-reduce");
  }

  void allReduceWait(int tag) override {
    finishSum(pending_, tag, "all-reduce",
              "the gradient all-reduce of bucket " + std::to_string(tag));
  }

  void progress() override {
    for (auto &[tag, request] : pending_) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      (void)tag;
    }
    for (auto &[tag, shard] : sharded_) {
      int done = 0;
      MPI_Test(&shard.request, &done, MPI_STATUS_IGNORE);
      (void)tag;
    }
    for (auto &[tag, request] : tpPending_) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      (void)tag;
    }
  }

  // In place, as the gradients' all-reduce: MPI_Ireduce_scatter leaves this
  // rank's sum at the start of the bucket (moved to its shard at the wait),
  // MPI_Iallgatherv takes each rank's shard where it lies.
  void reduceScatterStart(void *data, int64_t count, bool f64, int tag) override {
    Shard &s = startShard(data, count, f64, kReduceScatter, tag);
    check(MPI_Ireduce_scatter(MPI_IN_PLACE, data, s.counts.data(), f64 ? MPI_DOUBLE : MPI_FLOAT,
                              MPI_SUM, comm_, &s.request),
          "starting the gradient reduce-scatter");
  }
  void reduceScatterWait(int tag) override {
    Shard s = finishShard(kReduceScatter, tag, "the gradient reduce-scatter of bucket ");
    const size_t es = s.f64 ? 8 : 4;
    char *base = static_cast<char *>(s.data);
    if (s.displs[size_t(rank_)] > 0)
      std::memmove(base + size_t(s.displs[size_t(rank_)]) * es, base,
                   size_t(s.counts[size_t(rank_)]) * es);
  }
  void allGatherStart(void *data, int64_t count, bool f64, int tag) override {
    Shard &s = startShard(data, count, f64, kAllGather, tag);
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, s.counts.data(),
                          s.displs.data(), f64 ? MPI_DOUBLE : MPI_FLOAT, comm_,
                          &s.request),
          "starting the parameter all-gather");
  }
  void allGatherWait(int tag) override {
    finishShard(kAllGather, tag, "the parameter all-gather of bucket ");
  }

  void sum(double *values, int count) override {
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, comm_,
                         &request),
          "summing the step's totals over the ranks");
    waitFor(request, "the other ranks' step totals (loss, label and token counts)");
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    if (bytes > INT32_MAX)
      fail("internal: a broadcast of " + std::to_string(bytes) + " bytes");
    MPI_Request request;
    check(MPI_Ibcast(data, int(bytes), MPI_BYTE, root, comm_, &request),
          "a broadcast");
    waitFor(request, "rank " + std::to_string(root) + "'s broadcast");
  }

  void barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(comm_, &request), "a barrier");
    waitFor(request, "the other ranks (barrier)");
  }

  void allReduce(void *data, int64_t count, bool f64, bool max) override {
    if (count > INT32_MAX)
      fail("a tensor-parallel all-reduce of " + std::to_string(count) +
           " elements is larger than MPI takes");
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), f64 ? MPI_DOUBLE : MPI_FLOAT,
                         max ? MPI_MAX : MPI_SUM, comm_, &request),
          "starting a tensor-parallel all-reduce");
    waitFor(request, "a tensor-parallel all-reduce (the group's partial sums)");
  }

  void tpAllReduceStart(void *data, int64_t count, bool f64, int tag) override {
    startSum(tpPending_, data, count, f64, tag, "tensor-parallel all-reduce",
             "a tensor-parallel all-reduce");
  }

  void tpAllReduceWait(int tag) override {
    finishSum(tpPending_, tag, "tensor-parallel all-reduce",
              "the asynchronous tensor-parallel all-reduce " + std::to_string(tag) +
                  " (the group's partial input gradients)");
  }

  void allGather(const void *in, void *out, int64_t count, bool f64) override {
    if (count > INT32_MAX)
      fail("a tensor-parallel all-gather of " + std::to_string(count) +
           " elements per rank is larger than MPI takes");
    MPI_Datatype type = f64 ? MPI_DOUBLE : MPI_FLOAT;
    MPI_Request request;
    check(MPI_Iallgather(in, int(count), type, out, int(count), type, comm_, &request),
          "starting a tensor-parallel all-gather");
    waitFor(request, "a tensor-parallel all-gather (the group's slices of the tokens)");
  }

  void reduceScatter(const void *in, void *out, int64_t count, bool f64) override {
    if (count > INT32_MAX)
      fail("a tensor-parallel reduce-scatter of " + std::to_string(count) +
           " elements per rank is larger than MPI takes");
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(in, out, int(count), f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                                    comm_, &request),
          "starting a tensor-parallel reduce-scatter");
    waitFor(request, "a tensor-parallel reduce-scatter (the group's partial sums)");
  }

  void allGatherBytes(const void *data, int64_t bytes, void *out) override {
    if (bytes > INT32_MAX)
      fail("a gather of " + std::to_string(bytes) + " bytes per rank is larger than MPI takes");
    MPI_Request request;
    check(MPI_Iallgather(data, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, comm_,
                         &request),
          "starting a gather");
    waitFor(request, "the other ranks' slices (a gather)");
  }

  std::shared_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, key, &sub), "splitting the ranks into groups");
    return std::make_shared<MpiCommunicator>(sub, timeout_);
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  // Point to point, in pieces of at most 1 GiB (MPI counts are ints): a
  // whole tensor of any size reaches the root with nothing kept elsewhere.
  void gatherBytes(const void *data, int64_t bytes, void *out, const std::vector<int64_t> &counts,
                   int root) override {
    constexpr int64_t kPiece = int64_t(1) << 30;
    constexpr int kTag = 77; // any: mlc sends no other point-to-point messages
    std::vector<MPI_Request> requests;
    auto post = [&](char *at, int64_t n, int peer, bool receive) {
      for (int64_t done = 0; done < n; done += kPiece) {
        MPI_Request r;
        const int piece = int(std::min(kPiece, n - done));
        check(receive ? MPI_Irecv(at + done, piece, MPI_BYTE, peer, kTag, comm_, &r)
                      : MPI_Isend(at + done, piece, MPI_BYTE, peer, kTag, comm_, &r),
              "a gather to rank " + std::to_string(root));
        requests.push_back(r);
      }
    };
    if (rank_ != root) {
      post(static_cast<char *>(const_cast<void *>(data)), bytes, root, false);
    } else {
      if (int64_t(counts.size()) != size_ || counts[size_t(root)] != bytes)
        fail("internal: a gather's counts do not match the ranks");
      char *at = static_cast<char *>(out);
      for (int r = 0; r < size_; at += counts[size_t(r)], ++r)
        if (r == root)
          std::memmove(at, data, size_t(bytes));
        else
          post(at, counts[size_t(r)], r, true);
    }
    try {
      for (MPI_Request &r : requests)
        waitFor(r, rank_ == root ? "the other ranks' slices (a gather to this rank)"
                                 : "rank " + std::to_string(root) + " (a gather to it)");
    } catch (const Error &e) {
      // The caller frees the buffers as the error unwinds: no request may
      // stay posted on them, or a late message lands in freed memory (or a
      // send reads it). One that cannot be cancelled (a send the peer
      // matched, that never completes) leaves nothing safe: the world ends.
      if (!cancelAll(requests)) {
        fprintf(stderr, "mlc: error: %s; a message of the gather could not be cancelled\n",
                e.what());
        abort(1);
      }
      throw;
    }
  }

private:
  void check(int rc, const std::string &what) {
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(rc, text, &length);
      fail("rank " + std::to_string(rank_) + ": " + what + " failed: " +
           std::string(text, length));
    }
  }
  /// Cancels every request still posted (done ones are null) and waits a
  /// few seconds for each to end, so that no buffer of theirs is written or
  /// read afterwards. False when one did not end.
  static bool cancelAll(std::vector<MPI_Request> &requests) {
    for (MPI_Request &r : requests)
      if (r != MPI_REQUEST_NULL)
        MPI_Cancel(&r);
    const auto start = std::chrono::steady_clock::now();
    for (MPI_Request &r : requests)
      for (int done = 0; r != MPI_REQUEST_NULL && !done;) {
        if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
          return false;
        if (!done) {
          if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5))
            return false;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
    return true;
  }
  /// A non-blocking in-place sum of `count` elements at `data`, kept in
  /// `pending` under `tag` until finishSum; `kind` names it in messages
  /// ("all-reduce"), `what` in a failed start ("the gradient all-reduce").
  void startSum(std::map<int, MPI_Request> &pending, void *data, int64_t count, bool f64,
                int tag, const std::string &kind, const std::string &what) {
    if (pending.count(tag))
      fail("internal: " + kind + " " + std::to_string(tag) + " started twice");
    if (count > INT32_MAX)
      fail(kind + " " + std::to_string(tag) + " of " + std::to_string(count) +
           " elements is larger than MPI takes");
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                         comm_, &request),
          "starting " + what);
    pending[tag] = request;
  }
  /// Waits for startSum's `tag` in `pending` and forgets it; `what` names
  /// it when the wait runs out.
  void finishSum(std::map<int, MPI_Request> &pending, int tag, const std::string &kind,
                 const std::string &what) {
    auto it = pending.find(tag);
    if (it == pending.end())
      fail("internal: " + kind + " " + std::to_string(tag) + " was never started");
    waitFor(it->second, what);
    pending.erase(it);
  }
  /// Tests until done; sleeps a little between tests once the wait is long.
  void waitFor(MPI_Request &request, const std::string &what) {
    auto start = std::chrono::steady_clock::now();
    for (int64_t spins = 0;; ++spins) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "waiting for " + what);
      if (done)
        return;
      double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_)
        fail("rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
             ": waited " + std::to_string(int64_t(waited)) + " s for " + what +
             " (--comm-timeout); another rank died or hangs");
      if (spins > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  enum ShardKind { kReduceScatter, kAllGather };
  struct Shard {
    MPI_Request request;
    void *data = nullptr;
    bool f64 = false;
    std::vector<int> counts, displs; // per rank, as shardOf() deals the bucket
  };
  Shard &startShard(void *data, int64_t count, bool f64, ShardKind kind, int tag) {
    const int key = tag * 2 + kind;
    if (sharded_.count(key))
      fail("internal: " + std::string(kind == kReduceScatter ? "reduce-scatter " : "all-gather ") +
           std::to_string(tag) + " started twice");
    if (count > INT32_MAX)
      fail("a bucket of " + std::to_string(count) + " elements is larger than MPI takes");
    Shard &s = sharded_[key];
    s.data = data;
    s.f64 = f64;
    for (int r = 0; r < size_; ++r) {
      ShardRange range = shardOf(count, r, size_);
      s.counts.push_back(int(range.count));
      s.displs.push_back(int(range.first));
    }
    return s;
  }
  Shard finishShard(ShardKind kind, int tag, const std::string &what) {
    auto it = sharded_.find(tag * 2 + kind);
    if (it == sharded_.end())
      fail("internal: " + what + std::to_string(tag) + " was never started");
    waitFor(it->second.request, what + std::to_string(tag));
    Shard s = std::move(it->second);
    sharded_.erase(it);
    return s;
  }

  double timeout_;
  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0, size_ = 1;
  std::map<int, MPI_Request> pending_;
  std::map<int, MPI_Request> tpPending_; // asynchronous tensor-parallel all-reduces
  std::map<int, Shard> sharded_;
};

} // namespace

std::shared_ptr<Communicator> openWorld(double timeoutSeconds) {
  if (!launchedByMpi())
    return nullptr;
  static std::shared_ptr<Communicator> world =
      std::make_shared<MpiCommunicator>(timeoutSeconds);
  return world;
}
#else
std::shared_ptr<Communicator> openWorld(double) {
  if (launchedByMpi())
    fail("this process was launched by mpirun, but this build of mlc has no MPI (install "
         "libopenmpi-dev and rebuild)");
  return nullptr;
}
#endif

void Communicator::gatherBytes(const void *data, int64_t bytes, void *out,
                               const std::vector<int64_t> &counts, int root) {
  if (size() != 1 || root != 0 || counts.size() != 1 || counts[0] != bytes)
    fail("internal: " + name() + " has no gather to one rank for " + std::to_string(size()) +
         " ranks");
  std::memmove(out, data, size_t(bytes));
}

} // namespace mlc::rt
