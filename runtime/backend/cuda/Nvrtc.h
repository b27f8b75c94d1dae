//===- Nvrtc.h - NVRTC, loaded at run time ----------------------*- C++ -*-===//
//
// NVRTC compiles kernels.cu for the device's own architecture at load. It
// is loaded with dlopen (libnvrtc.so.13, then .12), so every mlc binary
// starts on machines without the CUDA toolkit; only compiling CUDA needs it.
// The compiler's `--report` uses it too, to show what ptxas made of every
// kernel (registers, spills, shared memory).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CUDA_NVRTC_H
#define MLC_RUNTIME_BACKEND_CUDA_NVRTC_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlc::rt {

class Nvrtc {
public:
  /// The process's NVRTC, or null with the reason in `why` (no library,
  /// missing symbols).
  static Nvrtc *get(std::string *why);

  /// "13.0".
  std::string version() const;

  struct Output {
    std::string image; // a cubin for sm_XX, PTX for compute_XX
    std::string log;   // warnings and, with verbose, ptxas's statistics
  };
  /// Compiles `source` for `arch` (sm_90: a cubin; compute_90: PTX). With
  /// `verbose`, ptxas reports every kernel's resources in the log. A
  /// compile error is an Error quoting NVRTC's log.
  Output compile(const std::string &source, const std::string &name, const std::string &arch,
                 bool verbose) const;

private:
  Nvrtc() = default;
  struct Api;
  Api *api_ = nullptr;
};

/// What ptxas reports per kernel (from a verbose compile's log).
struct PtxasStats {
  int64_t registers = 0, spillStores = 0, spillLoads = 0, sharedBytes = 0, stackBytes = 0;
};
std::map<std::string, PtxasStats> parsePtxasLog(const std::string &log);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CUDA_NVRTC_H
