//===- CpuBackend.h - runs a package's plan on the host --------*- C++ -*-===//
//
// The CPU backend: the flat buffers, inputs and arena in host memory;
// kernels.cpp built by the host compiler through the kernel cache and called
// through function pointers; GEMMs through OpenBLAS; AdamW as one
// multi-tensor parallel region over the flat buffers.
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
  double gradientNorm() override;
  void adamw(const AdamWStep &step) override;

private:
  std::vector<char> &flat(FlatBuffer which);
  char *resolve(const FunctionPlan &fn, int id);
  int64_t rows_ = 0; // tokens of the current batch (dynamic token dimension)
  std::map<std::string, int64_t> inputRows_;

  std::vector<char> params_, grads_, adamM_, adamV_;
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

/// AdamW over host flat buffers of `elementSize`-byte floats laid out as
/// `params` says (the CPU backend's optimizer; also benchmarked alone by
/// bench/adamw_bandwidth against the machine's memory bandwidth).
void adamwHost(const std::vector<ParamInfo> &params, int64_t elementSize, char *p,
               const char *g, char *m, char *v, const AdamWStep &step);

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CPU_CPUBACKEND_H
