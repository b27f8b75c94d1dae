//===- CudaBackend.cpp - the plan on an NVIDIA GPU --------------------------===//
//
// The backend proper: device memory for the flat buffers, inputs, scalars
// and activation arena; kernels.cu loaded and its steps bound to pointers
// (the argument tables); copies in and out. The stream and graphs are
// CudaGraphs.cpp's, GEMMs CudaGemm.cpp's, collectives CudaCollectives.cpp's.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackend.h"
#include "runtime/backend/cuda/CudaBackendImpl.h"
#include "contract/StepFunctions.h"
#include "support/TensorIO.h"

#include <cstdlib>

namespace mlc::rt {

static_assert(sizeof(CudaKernelCtx) == memory::kCudaKernelContextBytes,
              "contract/DeviceMemory.h states the kernel context's size");

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
  d_ = emulated ? emulatedDevice().driver : loadDriver(&why);
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
  lt_ = emulated ? emulatedDevice().blasLt : loadBlasLt();
  if (emulated) {
    loader_ = emulatedDevice().loader;
  } else {
    ownLoader_ = std::make_unique<NvrtcLoader>(d_, arch_);
    loader_ = ownLoader_.get();
  }
  checkBlas(lt_->create(&ltHandle_), "cublasLtCreate");

  const int64_t flatBytes = pkg.paramCount * elementSize_;
  flats_[FlatBuffer::Params] = allocate(flatBytes, "the parameters", memory::kParameters);
  flats_[FlatBuffer::Grads] = allocate(flatBytes, "the gradients", memory::kGradients);
  // The distributed optimizer's moments: the largest rank's shards.
  const int64_t momentBytes = momentCapacity() * elementSize_;
  flats_[FlatBuffer::AdamM] = allocate(momentBytes, "AdamW's first moments", memory::kMoments);
  flats_[FlatBuffer::AdamV] = allocate(momentBytes, "AdamW's second moments", memory::kMoments);
  // Each cleared at its own size (the moments may be shards, smaller).
  for (FlatBuffer b : {FlatBuffer::Params, FlatBuffer::Grads})
    clear(flats_[b], size_t(flatBytes), "clearing a flat buffer");
  for (FlatBuffer b : {FlatBuffer::AdamM, FlatBuffer::AdamV})
    clear(flats_[b], size_t(momentBytes), "clearing a flat buffer");
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
                           : s.kind == StepDecl::TpWait             ? "tp-wait"
                           : s.kind == StepDecl::TpAllGather        ? "tp-all-gather"
                           : s.kind == StepDecl::TpReduceScatter    ? "tp-reduce-scatter"
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
  if (tpComm_)
    nccl_->destroy(tpComm_);
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
  check(d_->getFunction(&geluBf16_, builtins_, "mlc_gelu_bf16"), "finding the GELU kernels");
  bucketParts_ = allocate(kBucketParts * 8, "the bucket norms", memory::kCommunication);
  for (auto &[name, k] : kernels_) {
    CUfunction fn = nullptr;
    check(d_->getFunction(&fn, module_, name.c_str()), "finding kernel " + name);
    functions_[name] = fn;
  }
}

CUdeviceptr &CudaBackend::flat(FlatBuffer which) {
  if (which == FlatBuffer::GradSum && !flats_[which])
    allocateGradSums();
  return flats_[which];
}

void CudaBackend::allocateGradSums() {
  const int64_t bytes = pkg_.paramCount * elementSize_;
  CUdeviceptr &sums = flats_[FlatBuffer::GradSum];
  sums = allocate(bytes, "the gradient sums", memory::kGradientSums);
  clear(sums, size_t(bytes), "clearing the gradient sums");
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
    if (p.flat == FlatBuffer::GradSum && !flats_[FlatBuffer::GradSum])
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

HostTensor CudaBackend::output(const std::string &function, const std::string &name) {
  int id = 0;
  HostTensor t = outputTensor(function, name, id);
  check(d_->streamSync(stream_), "waiting for the device");
  check(d_->dtoh(t.data.data(), bound_.at(function).pointers[id], t.data.size()),
        "copying output " + name);
  return t;
}

std::unique_ptr<Backend> createCudaBackend(const Package &pkg, bool verbose, bool emulated) {
  return std::make_unique<CudaBackend>(pkg, verbose, emulated);
}

} // namespace mlc::rt
