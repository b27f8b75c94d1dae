//===- CpuBackend.h - runs a package's plan on the host --------*- C++ -*-===//
//
// The CPU backend: the flat buffers, inputs and arena in host memory;
// kernels.cpp built by the host compiler through the kernel cache and called
// through function pointers; GEMMs through oneDNN or OpenBLAS.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CPU_CPUBACKEND_H
#define MLC_RUNTIME_BACKEND_CPU_CPUBACKEND_H

#include "runtime/backend/Backend.h"

#include <vector>

namespace mlc::rt {

class CpuBackend final : public Backend {
public:
  CpuBackend(const Package &pkg, bool verbose = false);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  void upload(FlatBuffer which, int64_t offset, const void *src, int64_t bytes) override;
  void download(FlatBuffer which, int64_t offset, void *dst, int64_t bytes) override;
  void zero(FlatBuffer which) override;
  void setInput(const std::string &name, const HostTensor &t) override;
  void run(const std::string &function, int64_t step) override;
  HostTensor output(const std::string &function, const std::string &name) override;
  void setScalars(const std::string &name, const std::vector<double> &values) override;
  PeakRate peakRate() override;
  void allReduceStart(FlatBuffer which, int64_t offset, int64_t count, int tag) override;
  void allReduceWait(int tag) override;
  void reduceScatterStart(FlatBuffer which, int64_t offset, int64_t count, int tag) override;
  void reduceScatterWait(int tag) override;
  void allGatherStart(FlatBuffer which, int64_t offset, int64_t count, int tag) override;
  void allGatherWait(int tag) override;

protected:
  void shardsLaidOut() override;
  void prepareBucket(int64_t offset, int64_t count, bool clip) override;

private:
  std::vector<char> &flat(FlatBuffer which);
  void runGemm(const StepDecl &s, char *const *args, const std::string &dtype);
  char *resolve(const FunctionPlan &fn, int id);
  /// Every step's buffer pointers (again, after the moments moved).
  void bindPointers();
  /// The slice a collective step covers, checked against the flat buffer.
  char *bucket(FlatBuffer which, int64_t offset, int64_t count, const char *what);

  FlatBuffers<std::vector<char>> flats_; // the gradient sums empty until a run accumulates
  std::map<std::string, std::vector<char>> inputs_;
  std::map<std::string, std::vector<double>> scalars_;
  char *arena_ = nullptr;
  void *library_ = nullptr;
  /// kernels.cpp's GELU for GEMMs with a gelu epilogue (f32, f64).
  void (*geluF32_)(float *, const float *, int64_t) = nullptr;
  void (*geluF64_)(double *, const double *, int64_t) = nullptr;
  struct Bound {
    std::vector<char *> pointers;                 // per buffer
    std::vector<void (*)(char **, void *)> calls; // per step (null for gemm)
    std::vector<std::vector<char *>> args;        // per step
    std::vector<std::string> labels;              // per step, for the profile
    std::vector<std::string> gemmTypes;           // per step: a GEMM's dtype
    bool usesGradSums = false; // its gradient-sum pointers are null until allocateGradSums
  };
  /// The gradient-sum buffer, allocated by the first run that accumulates
  /// micro-batches (none without --global-batch accumulation); binds the
  /// functions' pointers again.
  void allocateGradSums();

  std::map<std::string, Bound> bound_;
  int outstanding_ = 0; // all-reduces started and not yet waited for
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CPU_CPUBACKEND_H
