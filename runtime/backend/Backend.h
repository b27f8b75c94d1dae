//===- Backend.h - what the trainer and tools ask of a device ---*- C++ -*-===//
//
// A backend runs one package's plan on one device. It owns everything that
// lives there: the four flat buffers (parameters, gradients and the AdamW
// moments, `paramCount` elements each, laid out as Package::params says), the
// inputs and the activation arena. The trainer, `mlc` and `mlc-runtime` see
// only this interface: weights, moments and batches cross it as host copies,
// never as pointers into device memory.
//
// Backends:
//   backend/cpu/CpuBackend   host memory, kernels.cpp built by the host
//                            compiler (KernelCache), GEMMs through oneDNN
//                            or OpenBLAS
//   backend/cuda/CudaBackend device memory, kernels.cu through NVRTC, GEMMs
//                            through cuBLASLt, sums through NCCL; on a GPU
//                            or on the CUDA emulator's device
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_BACKEND_H
#define MLC_RUNTIME_BACKEND_BACKEND_H

#include "runtime/backend/Comm.h"
#include "runtime/core/Package.h"
#include "support/TensorIO.h"

#include <array>
#include <map>
#include <memory>
#include <string>

/// The clipping factor of a gradient (or a bucket of it) whose norm is
/// `norm`: min(1, threshold / (norm + 1e-6)), as torch's
/// clip_grad_norm_. Written once: MLC_CLIP_FACTOR(qualifiers) is this
/// function, `inline` for the trainer (global clipping) and the CPU backend,
/// and, stringized (MLC_SOURCE_TEXT), `__device__` in the CUDA backend's
/// bucket kernels (CudaKernels.cpp), which clip on the device.
#define MLC_CLIP_FACTOR(QUALIFIERS)                                                   \
  QUALIFIERS double mlcClipFactor(double threshold, double norm) {                   \
    const double clip = threshold / (norm + 1e-6);                                   \
    return clip < 1 ? clip : 1;                                                       \
  }
/// The text of its arguments, macros expanded first.
#define MLC_SOURCE_TEXT(...) MLC_SOURCE_TEXT_(__VA_ARGS__)
#define MLC_SOURCE_TEXT_(...) #__VA_ARGS__

namespace mlc::rt {

MLC_CLIP_FACTOR(inline)

/// The flat buffers of a training run, each `paramCount` elements of the
/// package's dtype. The compiled optimizer (@grad_norm, @optimizer) runs
/// over them like every other function.
enum class FlatBuffer { Params, Grads, AdamM, AdamV, GradSum };

/// A backend's flat buffers, one `Storage` each (a device address, a host
/// vector), indexed by FlatBuffer. The gradient sums stay empty until a run
/// first accumulates (the backend's allocateGradSums).
template <typename Storage> struct FlatBuffers {
  std::array<Storage, 5> buffers{};
  Storage &operator[](FlatBuffer which) { return buffers[size_t(which)]; }
  const Storage &operator[](FlatBuffer which) const { return buffers[size_t(which)]; }
};

/// Where a step's time went, measured only when MLC_PROFILE is set (clocks
/// stay off the hot path otherwise).
struct BackendProfile {
  bool enabled = false;
  double gemmSeconds = 0, kernelSeconds = 0;
  /// Always measured with more than one rank: time blocked in all-reduce
  /// waits (communication that backward did not hide).
  double commWaitSeconds = 0;
  std::map<std::string, double> secondsByKernel;
};

/// A device's peak rate, and the formula it came from, as the run prints it
/// ("2 cores x 2 FMA units x 16 f32 lanes x 2 FLOPs x 2.6 GHz").
struct PeakRate {
  double flops = 0; ///< FLOP/s; 0 where the device cannot tell
  std::string basis;
};

/// The host copies of the id inputs an embedding gathers by (input_ids,
/// position_ids, token_type_ids) of the last batch, by input name: a
/// kernel's report of an id out of range names the input that holds it.
using GatheredIds = std::map<std::string, std::vector<int64_t>>;

class Backend {
public:
  explicit Backend(const Package &pkg);
  virtual ~Backend();
  Backend(const Backend &) = delete;
  Backend &operator=(const Backend &) = delete;

  const Package &package() const { return pkg_; }
  /// Bytes per element of the flat buffers (the package's dtype).
  int64_t elementSize() const { return elementSize_; }
  /// "cpu", "cuda": for logs and errors.
  virtual std::string name() const = 0;

  /// Host <-> device copies of `bytes` bytes at byte `offset` of a flat buffer.
  virtual void upload(FlatBuffer which, int64_t offset, const void *src, int64_t bytes) = 0;
  virtual void download(FlatBuffer which, int64_t offset, void *dst, int64_t bytes) = 0;
  /// The sum of the squares, in f64, of elements [offset, offset + count) of
  /// a flat buffer (in elements, where download() takes bytes), read where
  /// they live: the CUDA backend sums on the
  /// device and copies back a few partial sums, never the elements (the
  /// tensor-parallel gradient norm's split part, every step).
  virtual double sumOfSquares(FlatBuffer which, int64_t offset, int64_t count);
  /// Sets a whole flat buffer to zero (fresh AdamW moments).
  virtual void zero(FlatBuffer which) = 0;

  /// Copies a batch tensor into the named input (converting integer dtypes);
  /// the shape must match the compiled one, except that a dynamic token
  /// dimension takes any size up to the package's capacity.
  virtual void setInput(const std::string &name, const HostTensor &t) = 0;
  /// Runs every step of a function. `step` keys the dropout masks.
  virtual void run(const std::string &function, int64_t step) = 0;
  /// A function output after run(), copied to the host.
  virtual HostTensor output(const std::string &function, const std::string &name) = 0;

  /// Fills a plan's per-step scalars (the optimizer's: the trainer computes
  /// them on the host before each update, see contract/OptimizerScalars.h).
  virtual void setScalars(const std::string &name, const std::vector<double> &values) = 0;

  /// f32 GEMMs in TF32 on tensor cores (a GPU's choice; the CPU has none).
  virtual void setTf32(bool) {}

  /// The hardware's peak arithmetic rate for the package's GEMMs, from the
  /// device's own description (never measured): the denominator of MFU.
  virtual PeakRate peakRate() { return {}; }

  /// Collectives over the data-parallel ranks: an asynchronous in-place sum
  /// of `count` elements at element `offset` of a flat buffer, identified by
  /// `tag` until its wait (the plan's all-reduce steps call them). Without a
  /// communicator (one rank) the sum is the buffer itself and both do nothing.
  /// Also lays out this rank's shards of a distributed-optimizer plan.
  void setCommunicator(std::shared_ptr<Communicator> comm);
  Communicator *communicator() const { return comm_.get(); }
  int worldSize() const;
  int rank() const;
  /// Tensor parallelism: the group of T consecutive ranks whose
  /// plan.tp_all_reduce steps this rank's plan takes part in (null: T = 1).
  /// The communicator above is then the data-parallel group: worldSize()
  /// and rank() count data-parallel ranks.
  void setTensorParallel(std::shared_ptr<Communicator> group) { tp_ = std::move(group); }
  Communicator *tensorParallel() const { return tp_.get(); }
  int tpRank() const { return tp_ ? tp_->rank() : 0; }
  int tpSize() const { return tp_ ? tp_->size() : 1; }
  virtual void allReduceStart(FlatBuffer which, int64_t offset, int64_t count, int tag);
  virtual void allReduceWait(int tag);
  /// The distributed optimizer's collectives (reducescatter, allgather,
  /// allreduce_norm steps), as the all-reduce's.
  virtual void reduceScatterStart(FlatBuffer which, int64_t offset, int64_t count, int tag);
  virtual void reduceScatterWait(int tag);
  virtual void allGatherStart(FlatBuffer which, int64_t offset, int64_t count, int tag);
  virtual void allGatherWait(int tag);
  /// Runs a plan step that starts or waits for one of the collectives above
  /// (a gradient bucket scaled by prepareBucket before its sum starts) and
  /// returns true; any other step (kernels, GEMMs, AllReduceNorm, whose
  /// place differs per backend) returns false, untouched.
  bool startOrWaitCollective(const StepDecl &s);

  /// The distributed optimizer: this rank's shard of each bucket the plan
  /// reduce-scatters (by tag): elements [offset, offset + count) of the
  /// flat buffers, whose AdamW moments are at `moment` of this rank's
  /// moment buffers (the shards bucket after bucket). Empty for a plan
  /// without the distributed optimizer. The bucket's own elements are
  /// [bucketOffset, bucketOffset + bucketCount).
  struct Shard {
    int64_t offset = 0, count = 0, moment = 0;
    int64_t bucketOffset = 0, bucketCount = 0;
  };
  const std::vector<Shard> &shards() const { return shards_; }
  bool sharded() const { return shardedPlan_; }
  /// Elements of each AdamW moment buffer on this rank: the package's
  /// parameters, or the sum of this rank's shards. FlatBuffer::AdamM and
  /// AdamV hold this many (download/upload/downloadAll/uploadAll).
  int64_t momentCount() const { return shardedPlan_ ? momentCount_ : pkg_.paramCount; }
  /// Elements each moment buffer is allocated with: the largest rank's
  /// shards (the last rank's, ceil(c / R) of every bucket of c), so that
  /// every rank allocates the same, as `mlc compile --report` states.
  int64_t momentCapacity() const { return shardedPlan_ ? momentCapacity_ : pkg_.paramCount; }

  /// Bucket-wise clipping (all-reduce steps marked clip): the run's
  /// threshold c; each bucket of n_b of the n gradients is clipped to
  /// c sqrt(n_b / n) before its sum starts. 0: off.
  void setBucketClip(double threshold) { bucketClip_ = threshold; }
  /// The weight of the next @train_step's gradients in the step's average
  /// (--calculate-per-token-loss: its micro-batch's share of the step's loss
  /// terms, times the micro-batches and ranks; 1 otherwise). Each bucket is
  /// scaled by it before its sum starts; a plan without sums (one rank)
  /// scales the gradients after @train_step.
  void setGradWeight(double weight) {
    gradWeight_ = weight;
    gradWeighted_ = gradWeighted_ || weight != 1.0;
  }

  BackendProfile profile;

  /// Bytes this backend has allocated so far, by item (the keys of
  /// contract/DeviceMemory.h): what `mlc train --memory-report` writes and
  /// `mlc compile --report` states in advance from the plan.
  const std::map<std::string, int64_t> &allocated() const { return allocated_; }

protected:
  /// Records an allocation of `bytes` under `item` (every backend calls it
  /// where it allocates, with the bytes it asks for).
  void account(const char *item, int64_t bytes) { allocated_[item] += bytes; }
  /// The kernel context's shard windows of a launch marked shard: {first,
  /// count, moment offset} per window (every bucket's for kAllShards).
  std::vector<int64_t> windows(int64_t shard) const;
  /// Called once the communicator (and so this rank's shards) is known: a
  /// sharded plan's backend sizes its moments to momentCount() here.
  virtual void shardsLaidOut() {}
  /// A plan.tp_all_reduce step of `fn` over the buffer at `data` (host
  /// memory): its sum (or max) over the tensor-parallel group, in place;
  /// an asynchronous one (s.async) only starts, and its TpWait step
  /// (tpWait) finishes it. tpOutstanding_ counts those in flight: the
  /// backend lets them progress between steps.
  void tpAllReduce(const FunctionPlan &fn, const StepDecl &s, void *data);
  void tpWait(const StepDecl &s);
  int tpOutstanding_ = 0;
  /// A plan.tp_all_gather or plan.tp_reduce_scatter step of `fn` from the
  /// buffer at `in` into the one at `out` (host memory).
  void tpSlices(const FunctionPlan &fn, const StepDecl &s, void *out, const void *in);
  /// The elements of such a step's slice (the gather's input, the
  /// reduce-scatter's output: one rank's part) and their size in bytes.
  std::pair<int64_t, int> tpSliceElements(const FunctionPlan &fn, const StepDecl &s) const;
  /// Fails unless this run's tensor-parallel group has the package's size.
  void requireTensorParallelGroup() const;
  /// The elements of a plan.tp_all_reduce step's buffer and their size in
  /// bytes (4: f32, 8: f64; any other type is refused).
  std::pair<int64_t, int> tpAllReduceElements(const FunctionPlan &fn, const StepDecl &s) const;
  /// Scales a gradient bucket before its sum starts (the rank's weight,
  /// bucket-wise clipping); startOrWaitCollective calls it.
  virtual void prepareBucket(int64_t offset, int64_t count, bool clip) {}

  /// Checks a batch tensor against input `name` (shape, integer dtypes,
  /// values that fit) and converts it to the input's dtype: the bytes the
  /// input holds. Where the leading dimension is the dynamic token count,
  /// records it (rows_).
  std::vector<char> prepareInput(const std::string &name, const HostTensor &t);
  /// Before a run: every input with a dynamic token dimension has the same
  /// token count, and cu_seqlens' last offset is that count.
  void checkRows() const;
  /// @train_step of a plan without gradient sums (one rank): its gradients
  /// take the weight after the run, not bucket by bucket.
  bool weighsAfterRun(const std::string &function) const;
  /// Output `name` of `function`: its arena buffer's id and an empty tensor
  /// of its dtype and shape (the token count filled in), data sized.
  HostTensor outputTensor(const std::string &function, const std::string &name,
                          int &buffer) const;
  /// Where buffer `id` of `fn` lives: a flat buffer, an input, a scalars
  /// block or the arena, and the byte offset into it (views followed to
  /// what they view; a parameter's slice at its offset). Unknown names are
  /// Errors that name the function.
  struct BufferPlace {
    enum Kind { Flat, Input, Scalars, Arena } kind = Arena;
    FlatBuffer flat = FlatBuffer::Params; // kind Flat
    std::string name;                      // kind Input or Scalars
    int64_t offset = 0;
  };
  BufferPlace place(const FunctionPlan &fn, int id) const;
  /// The element type of buffer `id` of `fn` (through views to what they view).
  std::string bufferDtype(const FunctionPlan &fn, int id) const;
  /// A GEMM step's element type (its three buffers'): f32, f64 or bf16, or
  /// "bf16-f32" (bf16 operands, an f32 result); other mixes are refused.
  std::string gemmDtype(const FunctionPlan &fn, const StepDecl &s) const;

  const Package &pkg_;
  int64_t elementSize_;
  int64_t rows_ = 0; // tokens of the current batch (dynamic token dimension)
  std::map<std::string, int64_t> inputRows_;
  /// The last batch's cu_seqlens' final offset (-1: none given): a package
  /// with a dynamic token dimension needs it to cover every token (checkRows).
  int64_t cuSeqlensEnd_ = -1;
  GatheredIds gatheredIds_;
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Communicator> tp_;
  bool shardedPlan_ = false;
  std::vector<Shard> shards_;
  int64_t momentCount_ = 0, momentCapacity_ = 0;
  double bucketClip_ = 0;
  double gradWeight_ = 1;
  /// A weight other than 1 was ever set: the weighting varies by micro-batch
  /// (a CUDA graph would replay the one it captured).
  bool gradWeighted_ = false;
  std::map<std::string, int64_t> allocated_;
};

/// The backend for `device`: "cpu", "cuda", "cuda-emulator", or "auto" (CUDA
/// when a device is there, else the CPU, saying why in one line when
/// `verbose`). An unknown or unavailable device is an Error that says which
/// devices this build has.
std::unique_ptr<Backend> createBackend(const std::string &device, const Package &pkg,
                                       bool verbose);

/// A kernel's report of bad data (code 1: an id an embedding gathers by, 2:
/// a label out of range) as the Error every backend gives. Code 1 names the
/// input of `ids` whose value at `row` it is (a position past the model's
/// positions is not a token outside the vocabulary).
[[noreturn]] void failKernelReport(int64_t code, int64_t row, int64_t value, int64_t limit,
                                   const GatheredIds &ids = {});

/// Whole-buffer host copies, for loading, saving and checkpointing.
std::vector<char> downloadAll(Backend &backend, FlatBuffer which);
void uploadAll(Backend &backend, FlatBuffer which, const std::vector<char> &host);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_BACKEND_H
