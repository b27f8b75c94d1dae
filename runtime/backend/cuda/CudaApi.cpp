//===- CudaApi.cpp - the driver, cuBLASLt, NCCL and NVRTC, loaded at run time ===//
//
// cuda.h and cublasLt.h give the types and constants only: every entry point
// is looked up at run time (the driver's through cuGetProcAddress at the
// CUDA 12.0 ABI, which 12.x and 13.x drivers serve; cuBLASLt's and NCCL's
// with dlsym). Each library is loaded once, by the first backend that needs
// it; kernels.cu becomes a module through NVRTC and the cubin cache.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaApi.h"
#include "runtime/backend/KernelCache.h"
#include "runtime/backend/cuda/CudaBackend.h"
#include "runtime/backend/cuda/Nvrtc.h"
#include "runtime/core/Hash.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include <chrono>
#include <dlfcn.h>
#include <fstream>
#include <iterator>
#include <mutex>

namespace mlc::rt {

/// The driver, loaded once; null with the reason when it cannot be.
Driver *loadDriver(std::string *why) {
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


BlasLt *loadBlasLt() {
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


Nccl *loadNccl() {
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
    sym(n->allGather, "ncclAllGather");
    sym(n->reduceScatter, "ncclReduceScatter");
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
  const ArtifactId loaded = artifactId(path);
  std::ifstream f(path, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CUmodule module = nullptr;
  CUresult rc = d_->loadModule(&module, image.data());
  if (rc != CUDA_SUCCESS) {
    evictArtifact(path, loaded);
    const char *msg = nullptr;
    d_->errorString(rc, &msg);
    fail("CUDA: loading the compiled kernels (" + path + ") failed: " + (msg ? msg : "?"));
  }
  return module;
}

bool cudaAvailable(std::string *why) { return loadDriver(why) != nullptr; }

} // namespace mlc::rt
