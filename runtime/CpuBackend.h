//===- CpuBackend.h - runs a package's plan on the host --------*- C++ -*-===//
//
// Owns the flat parameter, gradient and AdamW moment buffers, the inputs and
// one arena; compiles kernels.cpp through a content-hashed cache of shared
// libraries; runs a function's steps in order (kernels via function pointers,
// GEMMs via OpenBLAS).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_CPUBACKEND_H
#define MLC_RUNTIME_CPUBACKEND_H

#include "runtime/Package.h"
#include "runtime/TensorIO.h"

#include <memory>

namespace mlc::rt {

/// Compiles `source` with the host C++ compiler, or reuses the library that
/// an earlier run built from the same source and flags. Returns a dlopen
/// handle. The cache lives in $MLC_CACHE_DIR, else ~/.cache/mlc.
void *loadKernelLibrary(const std::string &source, bool verbose);

class CpuBackend {
public:
  CpuBackend(const Package &pkg, bool verbose = false);
  ~CpuBackend();

  const Package &package() const { return pkg; }
  /// Flat buffers, `paramCount` elements of the package dtype each.
  char *params() { return params_.data(); }
  char *grads() { return grads_.data(); }
  int64_t elementSize() const { return elementSize_; }

  /// Copies a batch tensor into the named input (converting integer dtypes);
  /// the shape must match the compiled one, except that a dynamic token
  /// dimension takes any size up to the package's capacity.
  void setInput(const std::string &name, const HostTensor &t);
  /// Runs every step of a function. `step` keys the dropout masks.
  void run(const std::string &function, int64_t step);
  /// Seconds spent in GEMMs and in generated kernels since construction
  /// (measured only when MLC_PROFILE is set, to keep clocks off the hot path).
  double gemmSeconds = 0, kernelSeconds = 0;
  std::map<std::string, double> secondsByKernel;
  bool profile = false;

  /// A function output after run().
  HostTensor output(const std::string &function, const std::string &name);

private:
  char *resolve(const FunctionPlan &fn, int id);
  int64_t rows_ = 0; // tokens of the current batch (dynamic token dimension)
  std::map<std::string, int64_t> inputRows_;

  const Package &pkg;
  int64_t elementSize_;
  std::vector<char> params_, grads_;
  std::map<std::string, std::vector<char>> inputs_;
  char *arena_ = nullptr;
  void *library_ = nullptr;
  struct Bound {
    std::vector<char *> pointers;                 // per buffer
    std::vector<void (*)(char **, void *)> calls; // per step (null for gemm)
    std::vector<std::vector<char *>> args;        // per step
  };
  std::map<std::string, Bound> bound_;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_CPUBACKEND_H
