//===- CudaBackend.cpp - the plan on an NVIDIA GPU --------------------------===//
//
// cuda.h and cublasLt.h give the types and constants only: every entry point
// is looked up at run time (the driver's through cuGetProcAddress at the
// CUDA 12.0 ABI, which 12.x and 13.x drivers serve; cuBLASLt's with dlsym).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackend.h"
#include "runtime/backend/KernelCache.h"
#include "runtime/backend/cuda/CudaApi.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/Nvrtc.h"
#include "support/Error.h"
#include "contract/DeviceMemory.h"
#include "contract/StepFunctions.h"
#include "runtime/core/Hash.h"
#include "support/TensorIO.h"


#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

namespace mlc::rt {

static_assert(sizeof(CudaKernelCtx) == memory::kCudaKernelContextBytes,
              "contract/DeviceMemory.h states the kernel context's size");

namespace {


/// The driver, loaded once; null with the reason when it cannot be.
Driver *driver(std::string *why) {
  static std::once_flag once;
  static Driver *instance = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      reason = "no NVIDIA driver (libcuda.so.1 cannot be loaded: " + std::string(dlerror()) + ")";
      return;
    }
    using GetProc = CUresult (*)(const char *, void **, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult *);
    auto getProc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
    if (!getProc) {
      reason = "the NVIDIA driver is older than CUDA 12 (no cuGetProcAddress_v2)";
      return;
    }
    auto *d = new Driver();
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      void *p = nullptr;
      CUdriverProcAddressQueryResult status;
      if (getProc(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p) {
        if (ok)
          reason = std::string("the NVIDIA driver lacks ") + name;
        ok = false;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    sym(d->init, "cuInit");
    sym(d->errorString, "cuGetErrorString");
    sym(d->deviceCount, "cuDeviceGetCount");
    sym(d->deviceGet, "cuDeviceGet");
    sym(d->deviceName, "cuDeviceGetName");
    sym(d->attribute, "cuDeviceGetAttribute");
    sym(d->totalMem, "cuDeviceTotalMem");
    sym(d->retain, "cuDevicePrimaryCtxRetain");
    sym(d->setCurrent, "cuCtxSetCurrent");
    sym(d->loadModule, "cuModuleLoadData");
    sym(d->getFunction, "cuModuleGetFunction");
    sym(d->alloc, "cuMemAlloc");
    sym(d->free, "cuMemFree");
    sym(d->htod, "cuMemcpyHtoD");
    sym(d->dtoh, "cuMemcpyDtoH");
    sym(d->memset8, "cuMemsetD8");
    sym(d->memset8Async, "cuMemsetD8Async");
    sym(d->htodAsync, "cuMemcpyHtoDAsync");
    sym(d->launch, "cuLaunchKernel");
    sym(d->streamCreate, "cuStreamCreate");
    sym(d->streamSync, "cuStreamSynchronize");
    sym(d->eventCreate, "cuEventCreate");
    sym(d->eventRecord, "cuEventRecord");
    sym(d->eventSync, "cuEventSynchronize");
    sym(d->elapsed, "cuEventElapsedTime");
    sym(d->beginCapture, "cuStreamBeginCapture");
    sym(d->endCapture, "cuStreamEndCapture");
    sym(d->instantiate, "cuGraphInstantiateWithFlags");
    sym(d->graphLaunch, "cuGraphLaunch");
    sym(d->graphDestroy, "cuGraphDestroy");
    sym(d->graphExecDestroy, "cuGraphExecDestroy");
    sym(d->funcSetAttribute, "cuFuncSetAttribute");
    sym(d->streamWaitEvent, "cuStreamWaitEvent");
    if (!ok) {
      delete d;
      return;
    }
    if (CUresult rc = d->init(0); rc != CUDA_SUCCESS) {
      const char *msg = nullptr;
      d->errorString(rc, &msg);
      reason = std::string("the NVIDIA driver does not start (cuInit: ") + (msg ? msg : "?") + ")";
      delete d;
      return;
    }
    int count = 0;
    if (d->deviceCount(&count) != CUDA_SUCCESS || count < 1) {
      reason = "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)";
      delete d;
      return;
    }
    instance = d;
  });
  if (!instance && why)
    *why = reason;
  return instance;
}


BlasLt *blasLt() {
  static std::once_flag once;
  static BlasLt *instance = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    void *lib = nullptr;
    for (const char *name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      reason = "cuBLASLt (libcublasLt.so.13 or .12) is not installed or not on the library path";
      return;
    }
    auto *b = new BlasLt();
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && ok) {
        reason = std::string("cuBLASLt lacks ") + name;
        ok = false;
      }
    };
    sym(b->create, "cublasLtCreate");
    sym(b->descCreate, "cublasLtMatmulDescCreate");
    sym(b->descSet, "cublasLtMatmulDescSetAttribute");
    sym(b->descDestroy, "cublasLtMatmulDescDestroy");
    sym(b->layoutCreate, "cublasLtMatrixLayoutCreate");
    sym(b->layoutSet, "cublasLtMatrixLayoutSetAttribute");
    sym(b->layoutDestroy, "cublasLtMatrixLayoutDestroy");
    sym(b->prefCreate, "cublasLtMatmulPreferenceCreate");
    sym(b->prefSet, "cublasLtMatmulPreferenceSetAttribute");
    sym(b->prefDestroy, "cublasLtMatmulPreferenceDestroy");
    sym(b->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(b->matmul, "cublasLtMatmul");
    if (!ok) {
      delete b;
      return;
    }
    instance = b;
  });
  if (!instance)
    fail("--device cuda: " + reason);
  return instance;
}


Nccl *nccl() {
  static std::once_flag once;
  static Nccl *instance = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      reason = "NCCL (libnccl.so.2) is not installed or not on the library path";
      return;
    }
    auto *n = new Nccl();
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && ok) {
        reason = std::string("NCCL lacks ") + name;
        ok = false;
      }
    };
    sym(n->uniqueId, "ncclGetUniqueId");
    sym(n->initRank, "ncclCommInitRank");
    sym(n->allReduce, "ncclAllReduce");
    sym(n->destroy, "ncclCommDestroy");
    sym(n->errorString, "ncclGetErrorString");
    sym(n->reduce, "ncclReduce");
    sym(n->broadcast, "ncclBroadcast");
    sym(n->groupStart, "ncclGroupStart");
    sym(n->groupEnd, "ncclGroupEnd");
    if (!ok) {
      delete n;
      return;
    }
    instance = n;
  });
  if (!instance)
    fail("data-parallel training on CUDA: " + reason);
  return instance;
}


/// kernels.cu compiled by NVRTC for the device's architecture.
class NvrtcLoader final : public ModuleLoader {
public:
  NvrtcLoader(Driver *d, std::string arch) : d_(d), arch_(std::move(arch)) {}
  CUmodule load(const std::string &source, const std::string &name, bool verbose) override;

private:
  Driver *d_;
  std::string arch_;
};

class CudaBackend final : public Backend {
public:
  /// `emulated`: on the CUDA emulator's device (EmulatedDevice.cpp).
  CudaBackend(const Package &pkg, bool verbose, bool emulated);
  ~CudaBackend() override;

  std::string name() const override { return emulated_ ? "cuda-emulator" : "cuda"; }
  void upload(FlatBuffer which, int64_t offset, const void *src, int64_t bytes) override;
  void download(FlatBuffer which, int64_t offset, void *dst, int64_t bytes) override;
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
  /// NCCL over the run's ranks (MLC_NCCL=1: also for one rank, to measure it).
  bool ncclWanted() const;
  void openNccl();
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
  CUdeviceptr params_ = 0, grads_ = 0, adamM_ = 0, adamV_ = 0, gradSum_ = 0, arena_ = 0;
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
  CUfunction geluF32_ = nullptr, geluF64_ = nullptr;
  CUdeviceptr bucketParts_ = 0;
  static constexpr int kBucketParts = memory::kCudaBucketNormParts;
  // NCCL: the communicator, its stream, and per tag the events that order a
  // bucket's sum after its gradients and the optimizer after the sum.
  ncclComm_t ncclComm_ = nullptr;
  CUstream commStream_ = nullptr;
  Events bucketEvents_, scatterEvents_, gatherEvents_;
  std::pair<CUevent, CUevent> timers_{nullptr, nullptr}; // MLC_PROFILE's
};

CUdeviceptr CudaBackend::allocate(int64_t bytes, const std::string &what, const char *item) {
  CUdeviceptr p = 0;
  const int64_t size = memory::cudaAllocation(bytes);
  CUresult rc = d_->alloc(&p, size_t(size));
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t total = 0;
    d_->totalMem(&total, device_);
    fail("CUDA: out of device memory allocating " + std::to_string(bytes >> 20) + " MiB for " +
         what + " (the device has " + std::to_string(total >> 20) +
         " MiB; try a smaller --micro-batch)");
  }
  check(rc, "allocating " + what);
  allocations_.push_back(p);
  account(item, size);
  return p;
}

void CudaBackend::write(CUdeviceptr dst, const void *src, size_t bytes, const std::string &what) {
  check(d_->htodAsync(dst, src, bytes, stream_), what);
  check(d_->streamSync(stream_), what);
}

void CudaBackend::clear(CUdeviceptr dst, size_t bytes, const std::string &what) {
  check(d_->memset8Async(dst, 0, bytes, stream_), what);
  check(d_->streamSync(stream_), what);
}

/// The dense rate of the GEMMs' type: the datasheet's for the data-centre
/// parts (which NVIDIA quotes at their sustained tensor clock, below the
/// boost clock the driver reports), else SMs x FLOPs per SM and clock (sm_90:
/// 4096 bf16, 2048 TF32, 256 f32 and f64; sm_80: half; others: the consumer
/// parts' 512 bf16, 256 TF32 and f32) x the driver's clock. The emulator has
/// no peak.
PeakRate CudaBackend::peakRate() {
  if (emulated_)
    return {};
  const std::string type = pkg_.computeDtype == "bf16" ? "bf16"
                           : elementSize_ == 8          ? "f64"
                           : tf32_                      ? "tf32"
                                                        : "f32";
  const int t = type == "bf16" ? 0 : type == "tf32" ? 1 : type == "f32" ? 2 : 3;
  struct Part {
    int major, sms;
    const char *what;
    double tflops[4]; // bf16, tf32, f32, f64 (dense)
  };
  static const Part parts[] = {{9, 132, "H100 SXM / H200", {989.4, 494.7, 66.9, 66.9}},
                               {9, 114, "H100 PCIe", {756.0, 378.0, 51.2, 51.2}},
                               {8, 108, "A100", {312.0, 156.0, 19.5, 19.5}}};
  const DeviceInfo &d = deviceInfo_;
  for (const Part &p : parts)
    if (p.major == d.major && p.sms == d.sms)
      return {p.tflops[t] * 1e12, d.name + ": the " + p.what + " datasheet's dense " + type};
  static const double perClock[3][4] = {{4096, 2048, 256, 256},  // sm_90
                                        {2048, 1024, 128, 128},  // sm_80
                                        {512, 256, 256, 4}};     // others
  const double rate = perClock[d.major >= 9 ? 0 : arch_ == "sm_80" ? 1 : 2][t];
  char basis[200];
  std::snprintf(basis, sizeof basis, "%s: %d SMs x %g %s FLOPs per clock x %.3g GHz",
                d.name.c_str(), d.sms, rate, type.c_str(), d.clockKHz / 1e6);
  return {rate * d.sms * d.clockKHz * 1e3, basis};
}

CudaBackend::CudaBackend(const Package &pkg, bool verbose, bool emulated)
    : Backend(pkg), emulated_(emulated) {
  std::string why;
  d_ = emulated ? emulatedDevice().driver : driver(&why);
  if (!d_)
    fail("--device cuda: " + why + "; use --device cpu");
  if (pkg.cudaSource.empty())
    fail(pkg.dir + ": the package has no kernels.cu (compiled by an mlc without the CUDA "
         "target); recompile it");
  if (!pkg.dtype.empty() && pkg.dtype != "f32" && pkg.dtype != "f64") // empty: no parameters
    fail("--device cuda: packages of dtype " + pkg.dtype + " are not supported yet");

  profile.enabled = std::getenv("MLC_PROFILE") != nullptr;
  if (const char *g = std::getenv("MLC_CUDA_GRAPH"))
    useGraphs_ = std::string(g) != "0";
  if (const char *e = std::getenv("MLC_CUBLASLT_EPILOGUE"))
    epilogues_ = std::string(e) != "0";
  verbose_ = verbose;
  check(d_->deviceGet(&device_, 0), "cuDeviceGet");
  check(d_->retain(&context_, device_), "retaining the device's primary context");
  check(d_->setCurrent(context_), "cuCtxSetCurrent");
  int major = 0, minor = 0, sms = 0, clockKHz = 0;
  d_->attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
  d_->attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
  d_->attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_);
  d_->attribute(&clockKHz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device_);
  arch_ = "sm_" + std::to_string(major) + std::to_string(minor);
  // (A driver that no longer reports the clock: the boost clocks of the
  // data-centre parts, 1.98 GHz on sm_90, 1.41 GHz before.)
  if (clockKHz <= 0)
    clockKHz = major >= 9 ? 1980000 : 1410000;
  char name[256] = {0};
  d_->deviceName(name, sizeof name, device_);
  deviceInfo_ = {name, major, sms, clockKHz};
  if (verbose)
    std::fprintf(stderr, "mlc: CUDA device 0: %s (%s, %d SMs)\n", name, arch_.c_str(), sms);
  check(d_->streamCreate(&stream_, CU_STREAM_NON_BLOCKING), "creating a stream");
  lt_ = emulated ? emulatedDevice().blasLt : blasLt();
  if (emulated) {
    loader_ = emulatedDevice().loader;
  } else {
    ownLoader_ = std::make_unique<NvrtcLoader>(d_, arch_);
    loader_ = ownLoader_.get();
  }
  checkBlas(lt_->create(&ltHandle_), "cublasLtCreate");

  const int64_t flatBytes = pkg.paramCount * elementSize_;
  params_ = allocate(flatBytes, "the parameters", memory::kParameters);
  grads_ = allocate(flatBytes, "the gradients", memory::kGradients);
  // The distributed optimizer's moments: the largest rank's shards.
  const int64_t momentBytes = momentCapacity() * elementSize_;
  adamM_ = allocate(momentBytes, "AdamW's first moments", memory::kMoments);
  adamV_ = allocate(momentBytes, "AdamW's second moments", memory::kMoments);
  for (CUdeviceptr p : {params_, grads_, adamM_, adamV_})
    clear(p, size_t(flatBytes), "clearing a flat buffer");
  int64_t arena = 256;
  for (auto &[_, fn] : pkg.functions)
    arena = std::max(arena, fn.arenaBytes);
  arena_ = allocate(arena, "the activation arena", memory::kArena);
  for (const InputInfo &in : pkg.inputs) {
    inputs_[in.name] =
        allocate(in.numel * dtypeSize(in.dtype), "input " + in.name, memory::kInputs);
    clear(inputs_[in.name], size_t(in.numel * dtypeSize(in.dtype)), "clearing an input");
  }
  for (const ScalarsInfo &s : pkg.scalars)
    scalars_[s.name] = allocate(s.size * 8, "scalars " + s.name, memory::kRuntime);
  ctx_ = allocate(sizeof(CudaKernelCtx), "the kernel context", memory::kRuntime);
  errors_ = allocate(memory::kCudaErrorWordsBytes, "the error words", memory::kRuntime);
  workspace_ = allocate(workspaceBytes_, "the cuBLASLt workspace", memory::kGemmWorkspace);
  loadKernels(verbose);

  for (auto &[name, fn] : pkg.functions) {
    Bound &b = bound_[name];
    for (size_t i = 0; i < fn.buffers.size(); ++i) {
      BufferPlace p = place(fn, int(i));
      b.usesGradSums |= p.kind == BufferPlace::Flat && p.flat == FlatBuffer::GradSum;
      b.pointers.push_back(resolve(fn, int(i)));
    }
    std::vector<CUdeviceptr> table;
    for (const StepDecl &s : fn.steps) {
      b.argOffset.push_back(int64_t(table.size()));
      b.gemmTypes.push_back(s.kind == StepDecl::Gemm ? gemmDtype(fn, s) : "");
      b.shardCtx.push_back(0);
      b.shardWindows.push_back(0);
      if (s.kind != StepDecl::Kernel) {
        b.labels.push_back(s.kind == StepDecl::Gemm                 ? "gemm"
                           : s.kind == StepDecl::ReduceScatterStart ? "reduce-scatter"
                           : s.kind == StepDecl::AllGatherStart     ? "all-gather"
                                                                    : "all-reduce");
        continue;
      }
      if (s.shard != StepDecl::kNoShard) {
        // A context of its own, pointing at its windows (written each run).
        b.shardCtx.back() = allocate(sizeof(CudaKernelCtx), "a sharded launch's kernel context",
                                     memory::kRuntime);
        b.shardWindows.back() =
            allocate(int64_t(windows(s.shard).size() * sizeof(int64_t)),
                     "a sharded launch's windows", memory::kRuntime);
      }
      auto it = kernels_.find(s.kernel);
      if (it == kernels_.end())
        fail(pkg.dir + ": kernel '" + s.kernel + "' is missing from kernels.cu");
      if (it->second.args != int64_t(s.buffers.size()))
        fail(pkg.dir + "/plan.txt: function " + name + " launches kernel " + s.kernel + " with " +
             std::to_string(s.buffers.size()) + " buffers; kernels.cu's takes " +
             std::to_string(it->second.args));
      for (int id : s.buffers)
        table.push_back(b.pointers[id]);
      b.labels.push_back(s.kernel + " " + it->second.kind);
    }
    b.argTable = allocate(int64_t(std::max<size_t>(table.size(), 1) * sizeof(CUdeviceptr)),
                          "the kernel argument table of " + name, memory::kRuntime);
    if (!table.empty())
      write(b.argTable, table.data(), table.size() * sizeof(CUdeviceptr),
            "uploading the kernel arguments");
  }
}

CudaBackend::~CudaBackend() {
  if (ncclComm_)
    nccl_->destroy(ncclComm_);
  for (auto &[_, p] : gemmPlans_) {
    lt_->layoutDestroy(p.a);
    lt_->layoutDestroy(p.b);
    lt_->layoutDestroy(p.c);
    lt_->descDestroy(p.desc);
  }
  for (auto &[_, b] : bound_)
    for (auto &[rows, g] : b.graphs)
      d_->graphExecDestroy(g);
  if (stream_)
    d_->streamSync(stream_);
  for (CUdeviceptr p : allocations_)
    d_->free(p);
}

/// `source` compiled for this device, through the cubin cache: the key is
/// the source, the architecture and NVRTC's version (a warm start compiles
/// nothing).
CUmodule NvrtcLoader::load(const std::string &source, const std::string &name, bool verbose) {
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    fail("--device cuda: " + why + " (NVRTC compiles the package's kernels)");
  std::string key = "cuda-" + contentHash(arch_ + "\n" + nvrtc->version() + "\n" + source);
  std::string path = cachedArtifact(key, "cubin", [&](const std::string &tmp) {
    auto t0 = std::chrono::steady_clock::now();
    if (verbose)
      std::fprintf(stderr, "mlc: compiling %s for %s (NVRTC %s)\n", name.c_str(), arch_.c_str(),
                   nvrtc->version().c_str());
    Nvrtc::Output out = nvrtc->compile(source, name, arch_, false);
    writeFileDurably(tmp, out.image, tmp);
    if (verbose)
      std::fprintf(stderr, "mlc: CUDA kernels compiled in %.1f s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  });
  std::ifstream f(path, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CUmodule module = nullptr;
  CUresult rc = d_->loadModule(&module, image.data());
  if (rc != CUDA_SUCCESS) {
    evictArtifact(path);
    const char *msg = nullptr;
    d_->errorString(rc, &msg);
    fail("CUDA: loading the compiled kernels (" + path + ") failed: " + (msg ? msg : "?"));
  }
  return module;
}

/// kernels.cu, its kernels, and the runtime's own.
void CudaBackend::loadKernels(bool verbose) {
  kernels_ = parseCudaKernels(pkg_.cudaSource, pkg_.dir + "/kernels.cu");
  int64_t scratch = memory::kCudaMinScratch;
  for (auto &[_, k] : kernels_)
    scratch = std::max(scratch, k.scratch);
  scratch_ = allocate(scratch, "the kernels' scratch", memory::kRuntime);
  module_ = loader_->load(pkg_.cudaSource, pkg_.dir + "/kernels.cu", verbose);
  builtins_ = loader_->load(cudaBucketKernels(), "the runtime's bucket kernels", false);
  const char *suffix = elementSize_ == 8 ? "_f64" : "_f32";
  check(d_->getFunction(&sumsq_, builtins_, (std::string("mlc_sumsq") + suffix).c_str()),
        "finding the bucket kernels");
  check(d_->getFunction(&scale_, builtins_, (std::string("mlc_scale") + suffix).c_str()),
        "finding the bucket kernels");
  check(d_->getFunction(&biasF32_, builtins_, "mlc_bias_f32"), "finding the bias kernels");
  check(d_->getFunction(&biasF64_, builtins_, "mlc_bias_f64"), "finding the bias kernels");
  check(d_->getFunction(&biasBf16_, builtins_, "mlc_bias_bf16"), "finding the bias kernels");
  check(d_->getFunction(&geluF32_, builtins_, "mlc_gelu_f32"), "finding the GELU kernels");
  check(d_->getFunction(&geluF64_, builtins_, "mlc_gelu_f64"), "finding the GELU kernels");
  bucketParts_ = allocate(kBucketParts * 8, "the bucket norms", memory::kCommunication);
  for (auto &[name, k] : kernels_) {
    CUfunction fn = nullptr;
    check(d_->getFunction(&fn, module_, name.c_str()), "finding kernel " + name);
    functions_[name] = fn;
  }
}

CUdeviceptr &CudaBackend::flat(FlatBuffer which) {
  switch (which) {
  case FlatBuffer::Params:
    return params_;
  case FlatBuffer::Grads:
    return grads_;
  case FlatBuffer::AdamM:
    return adamM_;
  case FlatBuffer::AdamV:
    return adamV_;
  case FlatBuffer::GradSum:
    if (!gradSum_)
      allocateGradSums();
    return gradSum_;
  }
  fail("internal: unknown flat buffer");
}

void CudaBackend::allocateGradSums() {
  gradSum_ = allocate(pkg_.paramCount * elementSize_, "the gradient sums", memory::kGradientSums);
  clear(gradSum_, size_t(pkg_.paramCount * elementSize_), "clearing the gradient sums");
  for (auto &[name, b] : bound_) {
    if (!b.usesGradSums)
      continue;
    const FunctionPlan &fn = pkg_.function(name);
    for (size_t i = 0; i < fn.buffers.size(); ++i)
      b.pointers[i] = resolve(fn, int(i));
    std::vector<CUdeviceptr> table = argTable(fn, b);
    if (!table.empty())
      write(b.argTable, table.data(), table.size() * sizeof(CUdeviceptr),
            "uploading the kernel arguments");
  }
}

/// Every kernel step's buffer pointers, in step order (the argument table).
std::vector<CUdeviceptr> CudaBackend::argTable(const FunctionPlan &fn, const Bound &b) const {
  std::vector<CUdeviceptr> table;
  for (const StepDecl &s : fn.steps)
    if (s.kind == StepDecl::Kernel)
      for (int id : s.buffers)
        table.push_back(b.pointers[size_t(id)]);
  return table;
}

static void checkRange(int64_t offset, int64_t bytes, int64_t size) {
  if (offset < 0 || bytes < 0 || offset + bytes > size)
    fail("internal: a copy of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
         " overruns a flat buffer of " + std::to_string(size));
}

/// Bytes of a flat buffer: the moments hold the largest rank's shards.
static int64_t flatBytes(const Backend &b, FlatBuffer which) {
  return (which == FlatBuffer::AdamM || which == FlatBuffer::AdamV ? b.momentCapacity()
                                                                   : b.package().paramCount) *
         b.elementSize();
}

void CudaBackend::shardsLaidOut() {}

void CudaBackend::upload(FlatBuffer which, int64_t offset, const void *src, int64_t bytes) {
  checkRange(offset, bytes, flatBytes(*this, which));
  check(d_->streamSync(stream_), "waiting for the device");
  write(flat(which) + offset, src, size_t(bytes), "copying to the device");
}

void CudaBackend::download(FlatBuffer which, int64_t offset, void *dst, int64_t bytes) {
  checkRange(offset, bytes, flatBytes(*this, which));
  check(d_->streamSync(stream_), "waiting for the device");
  check(d_->dtoh(dst, flat(which) + offset, size_t(bytes)), "copying from the device");
}

void CudaBackend::zero(FlatBuffer which) {
  clear(flat(which), size_t(flatBytes(*this, which)), "clearing a flat buffer");
}

CUdeviceptr CudaBackend::resolve(const FunctionPlan &fn, int id) {
  BufferPlace p = place(fn, id);
  switch (p.kind) {
  case BufferPlace::Flat:
    if (p.flat == FlatBuffer::GradSum && !gradSum_)
      return 0; // bound when a run first accumulates (allocateGradSums)
    return flat(p.flat) + p.offset;
  case BufferPlace::Scalars:
    return scalars_.at(p.name) + p.offset;
  case BufferPlace::Input:
    return inputs_.at(p.name) + p.offset;
  case BufferPlace::Arena:
    return arena_ + p.offset;
  }
  return 0;
}

void CudaBackend::setInput(const std::string &name, const HostTensor &t) {
  std::vector<char> data = prepareInput(name, t);
  check(d_->streamSync(stream_), "waiting for the device");
  write(inputs_.at(name), data.data(), data.size(), "copying input " + name);
}

void CudaBackend::setScalars(const std::string &name, const std::vector<double> &values) {
  const ScalarsInfo *info = nullptr;
  for (const ScalarsInfo &s : pkg_.scalars)
    if (s.name == name)
      info = &s;
  if (!info)
    fail("the package has no scalars named '" + name + "'");
  if (int64_t(values.size()) != info->size)
    fail("scalars '" + name + "' take " + std::to_string(info->size) + " values, got " +
         std::to_string(values.size()));
  check(d_->streamSync(stream_), "waiting for the device");
  write(scalars_.at(name), values.data(), values.size() * 8, "copying scalars");
}

CudaBackend::GemmShape CudaBackend::gemmShape(const StepDecl &s0, const std::string &dtype,
                                              CUdeviceptr out, CUdeviceptr lhs,
                                              CUdeviceptr rhs, CUdeviceptr bias,
                                              CUdeviceptr pre) const {
  GemmShape g;
  StepDecl &s = g.s;
  s = s0;
  if (s.m < 0)
    s.m = rows_;
  if (s.k < 0)
    s.k = rows_;
  for (int64_t d : s.batch)
    g.batches *= d;
  // Operand and result element types: one, except bf16 operands with an
  // f32 result ("bf16-f32").
  g.f64 = dtype == "f64";
  g.bf16 = dtype == "bf16" || dtype == "bf16-f32";
  g.size = g.f64 ? 8 : g.bf16 ? 2 : 4;
  g.outSize = dtype == "bf16" ? 2 : g.f64 ? 8 : 4;
  g.n = uint64_t(s.n);
  g.m = uint64_t(s.m);
  g.k = uint64_t(s.k);
  g.strided = s.batch.size() <= 1;
  g.tf32 = tf32_ && dtype == "f32";
  // Each operand's alignment, which cuBLASLt assumes to be 256 bytes unless
  // told: the largest power of two (up to 256) dividing its address and its
  // batch strides. Arena slices are 64-byte aligned; a weight's slice of the
  // flat parameters is aligned to its element offset.
  auto alignment = [&](CUdeviceptr base, const std::vector<int64_t> &strides, int64_t matrix,
                       int64_t bytes) {
    uint64_t bits = uint64_t(base) | 256;
    for (int64_t st : strides)
      bits |= uint64_t(st * bytes);
    if (g.batches > 1)
      bits |= uint64_t(matrix * bytes);
    return uint32_t(bits & (~bits + 1));
  };
  const int64_t mn = int64_t(g.m * g.n);
  // (With a GELU the product may go to pre instead of out: C and D are
  // assumed aligned as the less aligned of the two.)
  g.alignA = alignment(rhs, s.rhsStrides, 0, g.size);
  g.alignB = alignment(lhs, s.lhsStrides, 0, g.size);
  g.alignC = std::min(alignment(out, {}, mn, g.outSize),
                      pre ? alignment(pre, {}, mn, g.outSize) : 256u);
  // The heuristic reads the bias pointer's alignment (its value, not the
  // data): a plan holds for biases aligned alike.
  g.alignBias = bias ? alignment(bias, {}, 0, g.outSize) : 0;
  g.alignPre = pre ? alignment(pre, {}, mn, g.outSize) : 0;
  g.key = {s.m,       s.n,    s.k,      s.transA, s.transB, g.batches,   g.size,
           g.outSize, g.tf32, g.alignA, g.alignB, g.alignC, g.alignBias, g.alignPre};
  g.key.insert(g.key.end(), s.lhsStrides.begin(), s.lhsStrides.end());
  g.key.insert(g.key.end(), s.rhsStrides.begin(), s.rhsStrides.end());
  return g;
}

void CudaBackend::makeGemmPlan(const GemmShape &g, GemmPlan &plan, CUdeviceptr bias,
                               CUdeviceptr pre) {
  const StepDecl &s = g.s;
  const uint64_t m = g.m, n = g.n, k = g.k;
  const cudaDataType_t type = g.f64 ? CUDA_R_64F : g.bf16 ? CUDA_R_16BF : CUDA_R_32F,
                       outType = g.outSize == 2 ? CUDA_R_16BF : g.f64 ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute = g.f64    ? CUBLAS_COMPUTE_64F
                                      : g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  checkBlas(lt_->descCreate(&plan.desc, compute, g.f64 ? CUDA_R_64F : CUDA_R_32F),
            "creating a matmul description");
  cublasOperation_t ta = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    tb = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  // Stored shapes (column-major): B^T is n x k (k x n when transposed).
  checkBlas(lt_->layoutCreate(&plan.a, type, s.transB ? k : n, s.transB ? n : k,
                              int64_t(s.transB ? k : n)),
            "creating a layout");
  checkBlas(lt_->layoutCreate(&plan.b, type, s.transA ? m : k, s.transA ? k : m,
                              int64_t(s.transA ? m : k)),
            "creating a layout");
  checkBlas(lt_->layoutCreate(&plan.c, outType, n, m, int64_t(n)), "creating a layout");
  // One strided batch when the batch is one dimension (or absent); other
  // batch shapes loop.
  plan.strided = g.strided;
  if (g.strided && g.batches > 1) {
    int32_t count = int32_t(g.batches);
    int64_t sa = s.rhsStrides[0], sb = s.lhsStrides[0], sc = int64_t(m * n);
    for (auto [layout, stride] : {std::pair{plan.a, sa}, {plan.b, sb}, {plan.c, sc}}) {
      lt_->layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      lt_->layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                     sizeof stride);
    }
  }
  const uint64_t ws = uint64_t(workspaceBytes_);
  cublasLtMatmulPreference_t pref = nullptr;
  lt_->prefCreate(&pref);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &g.alignA, sizeof g.alignA);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &g.alignB, sizeof g.alignB);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &g.alignC, sizeof g.alignC);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &g.alignC, sizeof g.alignC);
  const bool found = chooseGemmAlgorithm(g, plan, pref, bias, pre);
  lt_->prefDestroy(pref);
  if (!found)
    fail("cuBLASLt has no algorithm for a " + std::to_string(s.m) + " x " +
         std::to_string(s.n) + " x " + std::to_string(s.k) + " product");
}

bool CudaBackend::chooseGemmAlgorithm(const GemmShape &g, GemmPlan &plan,
                                      cublasLtMatmulPreference_t pref, CUdeviceptr bias,
                                      CUdeviceptr pre) {
  // Epilogues, the most folded first; the plain product always.
  std::vector<uint32_t> epilogues;
  if (epilogues_ && pre)
    epilogues.push_back(bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX);
  if (epilogues_ && bias)
    epilogues.push_back(CUBLASLT_EPILOGUE_BIAS);
  epilogues.push_back(CUBLASLT_EPILOGUE_DEFAULT);
  const void *biasPtr = reinterpret_cast<const void *>(bias),
             *auxPtr = reinterpret_cast<const void *>(pre);
  const int64_t auxLd = int64_t(g.n), auxStride = int64_t(g.m * g.n);
  auto set = [&](cublasLtMatmulDescAttributes_t a, const void *v, size_t bytes) {
    return lt_->descSet(plan.desc, a, v, bytes) == CUBLAS_STATUS_SUCCESS;
  };
  for (uint32_t e : epilogues) {
    const bool withBias = e & CUBLASLT_EPILOGUE_BIAS, withGelu = e & CUBLASLT_EPILOGUE_GELU;
    bool ok = set(CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    if (withBias)
      ok = ok && set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPtr, sizeof biasPtr);
    if (withGelu) {
      ok = ok && set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &auxPtr, sizeof auxPtr) &&
           set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof auxLd);
      if (g.strided && g.batches > 1)
        ok = ok && set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &auxStride,
                       sizeof auxStride);
    }
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (e == CUBLASLT_EPILOGUE_DEFAULT)
      checkBlas(lt_->heuristic(ltHandle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                               &result, &found),
                "choosing a GEMM algorithm");
    else if (ok)
      ok = lt_->heuristic(ltHandle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                          &result, &found) == CUBLAS_STATUS_SUCCESS;
    if (found >= 1) {
      plan.biasKernel = bias && !withBias;
      plan.geluKernel = pre && !withGelu;
      plan.algo = result.algo;
      return true;
    }
    if (verbose_)
      std::fprintf(stderr,
                   "mlc: cuBLASLt has no algorithm with epilogue %u for a %lld x %lld x %lld "
                   "product; trying a simpler one\n",
                   e, (long long)g.s.m, (long long)g.s.n, (long long)g.s.k);
  }
  return false;
}

void CudaBackend::runGemmProducts(const GemmShape &g, GemmPlan &plan, CUdeviceptr product,
                                  CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr pre) {
  const StepDecl &s = g.s;
  const int64_t mn = int64_t(g.m * g.n);
  const bool geluEpilogue = pre && !plan.geluKernel;
  const double oneD = 1.0, zeroD = 0.0;
  const float oneF = 1.0f, zeroF = 0.0f;
  const void *alpha = g.f64 ? static_cast<const void *>(&oneD) : &oneF;
  // beta = 1: an accumulating GEMM adds its product to C (= D, in place).
  const void *beta = s.accumulate ? (g.f64 ? static_cast<const void *>(&oneD) : &oneF)
                                  : (g.f64 ? static_cast<const void *>(&zeroD) : &zeroF);
  const int64_t loops = g.strided ? 1 : g.batches;
  for (int64_t b = 0; b < loops; ++b) {
    int64_t lo = 0, ro = 0, rem = b;
    for (size_t dd = s.batch.size(); !g.strided && dd-- > 0;) {
      int64_t i = rem % s.batch[dd];
      rem /= s.batch[dd];
      lo += i * s.lhsStrides[dd];
      ro += i * s.rhsStrides[dd];
    }
    const CUdeviceptr A = rhs + ro * g.size, B = lhs + lo * g.size,
                      C = product + b * mn * g.outSize;
    if (geluEpilogue) { // this step's (and batch's) pre-activation
      const void *aux = reinterpret_cast<const void *>(pre + b * mn * g.outSize);
      checkBlas(lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                             sizeof aux),
                "setting a GEMM's GELU input");
    }
    checkBlas(lt_->matmul(ltHandle_, plan.desc, alpha, reinterpret_cast<const void *>(A), plan.a,
                          reinterpret_cast<const void *>(B), plan.b, beta,
                          reinterpret_cast<void *>(C), plan.c, reinterpret_cast<void *>(C),
                          plan.c, &plan.algo, reinterpret_cast<void *>(workspace_),
                          uint64_t(workspaceBytes_), stream_),
              "a " + std::to_string(s.m) + " x " + std::to_string(s.n) + " x " +
                  std::to_string(s.k) + " product");
  }
}

void CudaBackend::gemmEpilogueKernels(const GemmShape &g, const GemmPlan &plan,
                                      CUdeviceptr out, CUdeviceptr product, CUdeviceptr bias,
                                      CUdeviceptr pre) {
  long long rows = (long long)(g.batches * g.s.m), cols = (long long)g.s.n,
            count = rows * cols;
  const unsigned blocks = unsigned(std::min<long long>(4096, (count + 255) / 256));
  CUdeviceptr target = product;
  if (bias && plan.biasKernel) {
    CUfunction fn = g.outSize == 8 ? biasF64_ : g.outSize == 4 ? biasF32_ : biasBf16_;
    void *args[] = {&target, &bias, &rows, &cols};
    check(d_->launch(fn, blocks, 1, 1, 256, 1, 1, 0, stream_, args, nullptr),
          "adding a GEMM's bias");
  }
  if (pre && plan.geluKernel) {
    void *args[] = {&out, &pre, &count};
    check(d_->launch(g.outSize == 8 ? geluF64_ : geluF32_, blocks, 1, 1, 256, 1, 1, 0, stream_,
                     args, nullptr),
          "a GEMM's GELU");
  }
}

/// C = op(A) op(B) in row-major storage is, in cuBLASLt's column-major
/// terms, C^T = op(B)^T op(A)^T: B is the first operand, A the second, and
/// the product is n x m. f32 products accumulate in f32, without TF32
/// unless --tf32 on; bf16 products run on tensor cores, accumulating in f32.
/// A bias (n elements of the result's type, 0 for none) is cuBLASLt's BIAS
/// epilogue: added to every row of the row-major result (a column of the
/// column-major D, whose rows it matches) before the result is rounded.
/// With `pre` (f32, f64), GELU_AUX(_BIAS): the product (+ bias) goes to
/// pre, its tanh GELU to out. Where cuBLASLt has no algorithm with an
/// epilogue, the next simpler one is asked for and the runtime's kernels
/// add what it left out after the product. With `accumulate` the product
/// is added to out (beta = 1, C = D), before any bias kernel.
void CudaBackend::gemm(const StepDecl &s, const std::string &dtype, CUdeviceptr out,
                       CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr bias, CUdeviceptr pre) {
  const GemmShape g = gemmShape(s, dtype, out, lhs, rhs, bias, pre);
  // One plan per shape, strides and transposes: made once, reused by every
  // step (and by graph captures).
  GemmPlan &plan = gemmPlans_[g.key];
  if (!plan.desc)
    makeGemmPlan(g, plan, bias, pre);
  if (bias && !plan.biasKernel) { // this step's bias (plans are shared by products of one shape)
    const void *ptr = reinterpret_cast<const void *>(bias);
    checkBlas(lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr),
              "setting a GEMM's bias");
  }
  // The product's destination: out, or with a GELU left to the kernel, pre.
  const CUdeviceptr product = pre && plan.geluKernel ? pre : out;
  runGemmProducts(g, plan, product, lhs, rhs, pre);
  gemmEpilogueKernels(g, plan, out, product, bias, pre);
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

void CudaBackend::prepareBucket(int64_t offset, int64_t count, bool clip) {
  double threshold =
      clip ? bucketClip_ * std::sqrt(double(count) / double(pkg_.paramCount)) : 0.0;
  if (gradWeight_ == 1.0 && threshold <= 0)
    return;
  if (offset < 0 || count < 1 || offset + count > pkg_.paramCount)
    fail("internal: a gradient bucket past the end of the gradients");
  CUdeviceptr g = grads_ + offset * elementSize_;
  long long n = count;
  int parts = 0;
  if (threshold > 0) {
    parts = int(std::min<int64_t>(kBucketParts, (count + 255) / 256));
    void *args[] = {&g, &n, &bucketParts_};
    check(d_->launch(sumsq_, unsigned(parts), 1, 1, 256, 1, 1, 0, stream_, args, nullptr),
          "a gradient bucket's norm");
  }
  double weight = gradWeight_;
  void *args[] = {&g, &n, &bucketParts_, &parts, &weight, &threshold};
  unsigned blocks = unsigned(std::min<int64_t>(4096, (count + 1023) / 1024));
  check(d_->launch(scale_, blocks, 1, 1, 256, 1, 1, 0, stream_, args, nullptr),
        "scaling a gradient bucket");
}

bool CudaBackend::ncclWanted() const {
  if (worldSize() > 1)
    return true;
  const char *force = std::getenv("MLC_NCCL");
  return force && std::string(force) == "1";
}

/// Rank 0's NCCL id, broadcast over the MPI world; a stream for the sums.
void CudaBackend::openNccl() {
  nccl_ = emulated_ ? emulatedDevice().nccl : nccl();
  Nccl *n = nccl_;
  ncclUniqueId id;
  auto checkNccl = [&](ncclResult_t rc, const std::string &what) {
    if (rc != ncclSuccess)
      fail("NCCL: " + what + " failed: " + n->errorString(rc));
  };
  if (rank() == 0)
    checkNccl(n->uniqueId(&id), "ncclGetUniqueId");
  if (comm_ && worldSize() > 1)
    comm_->broadcast(&id, sizeof id, 0);
  checkNccl(n->initRank(&ncclComm_, worldSize(), id, rank()), "ncclCommInitRank");
  check(d_->streamCreate(&commStream_, CU_STREAM_NON_BLOCKING), "creating the NCCL stream");
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

void CudaBackend::run(const std::string &function, int64_t step) {
  checkRows();
  Bound &b = bound_.at(function);
  if (b.usesGradSums && !gradSum_)
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

HostTensor CudaBackend::output(const std::string &function, const std::string &name) {
  int id = 0;
  HostTensor t = outputTensor(function, name, id);
  check(d_->streamSync(stream_), "waiting for the device");
  check(d_->dtoh(t.data.data(), bound_.at(function).pointers[id], t.data.size()),
        "copying output " + name);
  return t;
}

} // namespace

bool cudaAvailable(std::string *why) { return driver(why) != nullptr; }

std::unique_ptr<Backend> createCudaBackend(const Package &pkg, bool verbose, bool emulated) {
  return std::make_unique<CudaBackend>(pkg, verbose, emulated);
}

} // namespace mlc::rt
