//===- CudaApi.h - the CUDA libraries' entry points mlc calls ---*- C++ -*-===//
//
// Private to runtime/backend/cuda/. The CUDA backend calls the driver,
// cuBLASLt and NCCL through these tables: filled from the real libraries
// (dlopen, CudaApi.cpp), or by the CUDA emulator (EmulatedDevice.cpp),
// which implements them on the CPU so that the backend itself runs and is
// tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CUDA_CUDAAPI_H
#define MLC_RUNTIME_BACKEND_CUDA_CUDAAPI_H

#include <cublasLt.h>
#include <cuda.h>
#if __has_include(<nccl.h>)
#include <nccl.h>
#else
// A CUDA installation without NCCL's headers (NCCL may come with PyTorch's
// wheels only): the few declarations mlc uses, from NCCL 2's stable C ABI.
// The library itself is looked for at run time either way.
extern "C" {
typedef struct ncclComm *ncclComm_t;
typedef struct {
  char internal[128];
} ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclInvalidUsage = 5 } ncclResult_t;
typedef enum { ncclSum = 0, ncclMax = 2 } ncclRedOp_t;
typedef enum { ncclFloat32 = 7, ncclFloat64 = 8 } ncclDataType_t;
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclCommDestroy(ncclComm_t comm);
const char *ncclGetErrorString(ncclResult_t result);
}
#endif

#include <string>
#include <utility>

namespace mlc::rt {

// The driver entry points mlc calls.
struct Driver {
  decltype(&::cuInit) init;
  decltype(&::cuGetErrorString) errorString;
  decltype(&::cuDeviceGetCount) deviceCount;
  decltype(&::cuDeviceGet) deviceGet;
  decltype(&::cuDeviceGetName) deviceName;
  decltype(&::cuDeviceGetAttribute) attribute;
  decltype(&::cuDeviceTotalMem) totalMem;
  decltype(&::cuDevicePrimaryCtxRetain) retain;
  decltype(&::cuCtxSetCurrent) setCurrent;
  decltype(&::cuModuleLoadData) loadModule;
  decltype(&::cuModuleGetFunction) getFunction;
  decltype(&::cuMemAlloc) alloc;
  decltype(&::cuMemFree) free;
  decltype(&::cuMemcpyHtoD) htod;
  decltype(&::cuMemcpyDtoH) dtoh;
  decltype(&::cuMemsetD8) memset8;
  decltype(&::cuMemsetD8Async) memset8Async;
  decltype(&::cuMemcpyHtoDAsync) htodAsync;
  decltype(&::cuLaunchKernel) launch;
  decltype(&::cuStreamCreate) streamCreate;
  decltype(&::cuStreamSynchronize) streamSync;
  decltype(&::cuEventCreate) eventCreate;
  decltype(&::cuEventRecord) eventRecord;
  decltype(&::cuEventSynchronize) eventSync;
  decltype(&::cuEventElapsedTime) elapsed;
  decltype(&::cuStreamBeginCapture) beginCapture;
  decltype(&::cuStreamEndCapture) endCapture;
  decltype(&::cuGraphInstantiateWithFlags) instantiate;
  decltype(&::cuGraphLaunch) graphLaunch;
  decltype(&::cuGraphDestroy) graphDestroy;
  decltype(&::cuGraphExecDestroy) graphExecDestroy;
  decltype(&::cuFuncSetAttribute) funcSetAttribute;
  decltype(&::cuStreamWaitEvent) streamWaitEvent;
};

// The cuBLASLt entry points mlc calls.
struct BlasLt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtMatmulDescCreate) descCreate;
  decltype(&::cublasLtMatmulDescSetAttribute) descSet;
  decltype(&::cublasLtMatmulDescDestroy) descDestroy;
  decltype(&::cublasLtMatrixLayoutCreate) layoutCreate;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layoutSet;
  decltype(&::cublasLtMatrixLayoutDestroy) layoutDestroy;
  decltype(&::cublasLtMatmulPreferenceCreate) prefCreate;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) prefSet;
  decltype(&::cublasLtMatmulPreferenceDestroy) prefDestroy;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&::cublasLtMatmul) matmul;
};

// The NCCL entry points mlc calls.
struct Nccl {
  decltype(&::ncclGetUniqueId) uniqueId;
  decltype(&::ncclCommInitRank) initRank;
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclCommDestroy) destroy;
  decltype(&::ncclGetErrorString) errorString;
  // The distributed optimizer's collectives (CudaBackend::reduceScatterStart).
  decltype(&::ncclReduce) reduce;
  decltype(&::ncclBroadcast) broadcast;
  decltype(&::ncclGroupStart) groupStart;
  decltype(&::ncclGroupEnd) groupEnd;
  // Sequence parallelism's (CudaBackend::tpSlicesStep).
  decltype(&::ncclAllGather) allGather;
  decltype(&::ncclReduceScatter) reduceScatter;
};

/// How kernels.cu (and the runtime's own kernels) become a module: a cubin
/// from NVRTC, or on the emulator a host library.
struct ModuleLoader {
  /// The module of `source`; `name` for messages.
  virtual CUmodule load(const std::string &source, const std::string &name, bool verbose) = 0;
  virtual ~ModuleLoader() = default;
};

class Communicator;

/// The CUDA emulator's device: its driver, cuBLASLt, NCCL and module loader
/// (the host compiler behind CudaEmulation.h). Its NCCL runs a communicator
/// of several ranks (each an emulator in its own process) over the host
/// Communicator of the same ranks: `bindGroup` names it for the unique id
/// the group's ncclCommInitRank calls then pass.
struct EmulatedDevice {
  Driver *driver;
  BlasLt *blasLt;
  Nccl *nccl;
  ModuleLoader *loader;
  void (*bindGroup)(const ncclUniqueId &id, Communicator *group);
};
EmulatedDevice &emulatedDevice();

/// The real libraries, each loaded once (CudaApi.cpp). The driver is null
/// with the reason in `why` when it cannot be loaded or does not start;
/// cuBLASLt and NCCL missing are an Error that says so.
Driver *loadDriver(std::string *why);
BlasLt *loadBlasLt();
Nccl *loadNccl();

/// kernels.cu compiled by NVRTC for the device's architecture.
class NvrtcLoader final : public ModuleLoader {
public:
  NvrtcLoader(Driver *d, std::string arch) : d_(d), arch_(std::move(arch)) {}
  CUmodule load(const std::string &source, const std::string &name, bool verbose) override;

private:
  Driver *d_;
  std::string arch_;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CUDA_CUDAAPI_H
