//===- CudaBackendImpl.h - the CUDA backend's class -------------*- C++ -*-===//
//
// Private to runtime/backend/cuda/. One class, defined by responsibility in
// four files:
//   CudaBackend.cpp      device memory, the bound plan, copies in and out
//   CudaGraphs.cpp       the compute stream: a function's steps enqueued,
//                        captured once as a CUDA graph and replayed
//   CudaGemm.cpp         GEMMs through cuBLASLt: plans, epilogues, and the
//                        runtime's kernels for what an epilogue left out
//   CudaCollectives.cpp  gradient buckets: their scaling, and NCCL's
//                        all-reduce, reduce-scatter and all-gather on a
//                        stream of their own
// The libraries it calls are loaded by CudaApi.cpp (or are the emulator's).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CUDA_CUDABACKENDIMPL_H
#define MLC_RUNTIME_BACKEND_CUDA_CUDABACKENDIMPL_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/cuda/CudaApi.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "contract/DeviceMemory.h"
#include "support/Error.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlc::rt {

class CudaBackend final : public Backend {
public:
  /// `emulated`: on the CUDA emulator's device (EmulatedDevice.cpp).
  CudaBackend(const Package &pkg, bool verbose, bool emulated);
  ~CudaBackend() override;

  std::string name() const override { return emulated_ ? "cuda-emulator" : "cuda"; }
  void upload(FlatBuffer which, int64_t offset, const void *src, int64_t bytes) override;
  void download(FlatBuffer which, int64_t offset, void *dst, int64_t bytes) override;
  double sumOfSquares(FlatBuffer which, int64_t offset, int64_t count) override;
  void zero(FlatBuffer which) override;
  void setInput(const std::string &name, const HostTensor &t) override;
  void run(const std::string &function, int64_t step) override;
  HostTensor output(const std::string &function, const std::string &name) override;
  void setScalars(const std::string &name, const std::vector<double> &values) override;
  PeakRate peakRate() override;
  void setTf32(bool on) override { tf32_ = on; }
  void allReduceStart(FlatBuffer which, int64_t offset, int64_t count, int tag) override;
  void allReduceWait(int tag) override;
  void reduceScatterStart(FlatBuffer which, int64_t offset, int64_t count, int tag) override;
  void reduceScatterWait(int tag) override;
  void allGatherStart(FlatBuffer which, int64_t offset, int64_t count, int tag) override;
  void allGatherWait(int tag) override;

protected:
  void shardsLaidOut() override;

public:

private:
  void check(CUresult rc, const std::string &what) const {
    if (rc == CUDA_SUCCESS)
      return;
    const char *msg = nullptr;
    d_->errorString(rc, &msg);
    fail("CUDA: " + what + " failed: " + (msg ? msg : "unknown error") + " (" +
         std::to_string(int(rc)) + ")");
  }
  void checkBlas(cublasStatus_t rc, const std::string &what) const {
    if (rc != CUBLAS_STATUS_SUCCESS)
      fail("cuBLASLt: " + what + " failed (status " + std::to_string(int(rc)) + ")");
  }
  /// Device memory for `what`, recorded under `item` (contract/DeviceMemory.h).
  CUdeviceptr allocate(int64_t bytes, const std::string &what, const char *item);
  /// Host-to-device copies and clears ordered on the compute stream (a
  /// synchronous cuMemcpy runs on the legacy stream, which a non-blocking
  /// stream does not wait for), complete when these return.
  void write(CUdeviceptr dst, const void *src, size_t bytes, const std::string &what);
  void clear(CUdeviceptr dst, size_t bytes, const std::string &what);
  CUdeviceptr &flat(FlatBuffer which);
  CUdeviceptr resolve(const FunctionPlan &fn, int id);
  void loadKernels(bool verbose);
  /// Enqueues every step of `fn` on the stream (no synchronization).
  void enqueue(const std::string &function, bool timed);
  void gemm(const StepDecl &s, const std::string &dtype, CUdeviceptr out, CUdeviceptr lhs,
            CUdeviceptr rhs, CUdeviceptr bias, CUdeviceptr pre);
  /// One GEMM step resolved: its sizes (the token count filled in), element
  /// types and operand alignments, and `key`, which names its plan.
  struct GemmShape {
    StepDecl s;
    int64_t batches = 1;
    bool f64 = false, bf16 = false, tf32 = false, strided = true;
    int64_t size = 4, outSize = 4; // bytes per operand, result element
    uint64_t m = 0, n = 0, k = 0;
    uint32_t alignA = 0, alignB = 0, alignC = 0, alignBias = 0, alignPre = 0;
    std::vector<int64_t> key;
  };
  struct GemmPlan;
  GemmShape gemmShape(const StepDecl &s, const std::string &dtype, CUdeviceptr out,
                      CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr bias, CUdeviceptr pre) const;
  /// cuBLASLt's description and layouts of `g`, and its algorithm.
  void makeGemmPlan(const GemmShape &g, GemmPlan &plan, CUdeviceptr bias, CUdeviceptr pre);
  /// Asks cuBLASLt for an algorithm with the most folded epilogue it has
  /// (GELU and bias, bias, none); false when it has none at all.
  bool chooseGemmAlgorithm(const GemmShape &g, GemmPlan &plan,
                           cublasLtMatmulPreference_t pref, CUdeviceptr bias, CUdeviceptr pre);
  /// The products into `product`: one strided-batch call, or one per batch.
  void runGemmProducts(const GemmShape &g, GemmPlan &plan, CUdeviceptr product,
                       CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr pre);
  /// What the chosen epilogue left out, as the runtime's kernels: the bias
  /// added to `product`, the GELU of pre into out.
  void gemmEpilogueKernels(const GemmShape &g, const GemmPlan &plan, CUdeviceptr out,
                           CUdeviceptr product, CUdeviceptr bias, CUdeviceptr pre);
  /// Scales a gradient bucket before its sum (the rank's weight, bucket-wise
  /// clipping), on the compute stream.
  void prepareBucket(int64_t offset, int64_t count, bool clip) override;
  int launchSumOfSquares(CUdeviceptr g, int64_t count, const char *what);
  /// NCCL over the run's ranks (MLC_NCCL=1: also for one rank, to measure it).
  bool ncclWanted() const;
  ncclComm_t openNcclComm(Communicator *group, const char *what);
  void openNccl();
  void tpAllReduceStep(const FunctionPlan &fn, const StepDecl &s, CUdeviceptr data);
  void tpWaitStep(const StepDecl &s);
  void tpSlicesStep(const FunctionPlan &fn, const StepDecl &s, CUdeviceptr out, CUdeviceptr in);
  /// A collective on the NCCL stream, ordered after the compute stream's
  /// work so far (`events`[tag].first) and recording `events`[tag].second
  /// when done; `issue` enqueues its NCCL calls on that stream.
  using Events = std::map<int, std::pair<CUevent, CUevent>>;
  void collectiveStart(Events &events, int tag, FlatBuffer which, int64_t offset, int64_t count,
                       const char *what,
                       const std::function<ncclResult_t(CUdeviceptr, cudaStream_t)> &issue);
  /// The compute stream waits for `events`[tag]'s collective.
  void collectiveWait(Events &events, int tag, const char *what);

  bool emulated_;
  Driver *d_;
  BlasLt *lt_ = nullptr;
  Nccl *nccl_ = nullptr; // loaded with the first all-reduce
  std::unique_ptr<ModuleLoader> ownLoader_;
  ModuleLoader *loader_ = nullptr;
  cublasLtHandle_t ltHandle_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
  std::string arch_;
  struct DeviceInfo {
    std::string name;
    int major = 0, sms = 0, clockKHz = 0;
  } deviceInfo_;
  std::vector<CUdeviceptr> allocations_;
  FlatBuffers<CUdeviceptr> flats_; // the gradient sums 0 until allocated
  CUdeviceptr arena_ = 0;
  CUdeviceptr ctx_ = 0, errors_ = 0, scratch_ = 0, workspace_ = 0;
  int64_t workspaceBytes_ = memory::kCublasLtWorkspaceBytes;
  std::map<std::string, CUdeviceptr> inputs_, scalars_;
  std::map<std::string, CudaKernelInfo> kernels_;
  std::map<std::string, CUfunction> functions_;
  struct Bound {
    std::vector<CUdeviceptr> pointers; // per buffer
    CUdeviceptr argTable = 0;          // every kernel step's buffer pointers, in step order
    std::vector<int64_t> argOffset;    // per step: its first entry in the table
    std::vector<std::string> labels;   // per step, for the profile
    std::vector<std::string> gemmTypes; // per step: a GEMM's dtype
    std::map<int64_t, CUgraphExec> graphs; // by token count
    /// Per step: a launch over this rank's shards has its own kernel
    /// context and windows (0 otherwise).
    std::vector<CUdeviceptr> shardCtx, shardWindows;
    int runs = 0;
    /// Binds the gradient sums: their pointers stay 0 until a run
    /// accumulates (allocateGradSums binds them then).
    bool usesGradSums = false;
  };
  /// The gradient-sum buffer, allocated by the first run that accumulates
  /// micro-batches (none without --global-batch accumulation), and the
  /// pointers and argument tables of the functions that bind it.
  void allocateGradSums();
  std::vector<CUdeviceptr> argTable(const FunctionPlan &fn, const Bound &b) const;
  std::map<std::string, Bound> bound_;
  bool useGraphs_ = true;
  bool tf32_ = false;
  /// cuBLASLt's description of one GEMM shape and the algorithm it chose.
  struct GemmPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
    bool strided = true;
    /// The bias is added by mlc_bias_*, the GELU by mlc_gelu_*, after the
    /// product: cuBLASLt had no algorithm with their epilogue (or
    /// MLC_CUBLASLT_EPILOGUE=0).
    bool biasKernel = false, geluKernel = false;
  };
  bool epilogues_ = true, verbose_ = false;
  std::map<std::vector<int64_t>, GemmPlan> gemmPlans_;
  CUmodule builtins_ = nullptr;
  CUfunction sumsq_ = nullptr, scale_ = nullptr;
  CUfunction biasF32_ = nullptr, biasF64_ = nullptr, biasBf16_ = nullptr;
  CUfunction geluF32_ = nullptr, geluF64_ = nullptr, geluBf16_ = nullptr;
  CUdeviceptr bucketParts_ = 0;
  static constexpr int kBucketParts = memory::kCudaBucketNormParts;
  // NCCL: the communicator, its stream, and per tag the events that order a
  // bucket's sum after its gradients and the optimizer after the sum.
  ncclComm_t ncclComm_ = nullptr;
  ncclComm_t tpComm_ = nullptr; // the tensor-parallel group's (plan.tp_all_reduce)
  // The asynchronous tensor-parallel all-reduces' stream and events (by tag).
  CUstream tpStream_ = nullptr;
  CUstream commStream_ = nullptr;
  Events bucketEvents_, scatterEvents_, gatherEvents_, tpEvents_;
  std::pair<CUevent, CUevent> timers_{nullptr, nullptr}; // MLC_PROFILE's
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CUDA_CUDABACKENDIMPL_H
