//===- CudaBackend.h - runs a package's plan on an NVIDIA GPU ---*- C++ -*-===//
//
// The CUDA backend: the flat buffers, inputs and activation arena in device
// memory; kernels.cu compiled by NVRTC for the device's own architecture
// (cached on disk as a cubin keyed by source, architecture and NVRTC
// version, so a warm start compiles nothing); GEMMs through cuBLASLt; one
// stream. After a warm-up step, a function's whole step is captured once
// as a CUDA graph per token count and replayed as one launch (the kernels
// read the step and token count from device memory, so the graph holds
// across steps); MLC_CUDA_GRAPH=0 launches step by step, and MLC_PROFILE
// times each step with events instead.
//
// The driver (libcuda.so.1), NVRTC and cuBLASLt are all loaded with dlopen:
// every mlc binary starts on machines without them, and asking for this
// backend there is an Error that says what is missing.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CUDA_CUDABACKEND_H
#define MLC_RUNTIME_BACKEND_CUDA_CUDABACKEND_H

#include "runtime/backend/Backend.h"

#include <memory>
#include <string>

namespace mlc::rt {

/// Whether a CUDA device can be used, and if not why (no driver, no device).
bool cudaAvailable(std::string *why);

/// The CUDA backend on device 0 (CUDA_VISIBLE_DEVICES selects it); an Error
/// when there is no driver or device. `emulated`: on the CUDA emulator's
/// device instead (`--device cuda-emulator`: the same backend, its kernels
/// run on the CPU), which every machine has.
std::unique_ptr<Backend> createCudaBackend(const Package &pkg, bool verbose,
                                           bool emulated = false);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CUDA_CUDABACKEND_H
