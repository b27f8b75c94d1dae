//===- CudaKernels.h - what kernels.cu declares about its kernels -*- C++ -*-===//
//
// Each kernel of a package's kernels.cu is announced by one line (the ABI is
// documented in compiler/codegen/CudaPrelude.h):
//
//   // mlc.kernel k7 rows args=4 scratch=8200 launch=1x256,1024x128,1x256
//
// Both the CUDA backend and the CUDA emulator read these lines, so that a
// package's launches are the same wherever it runs. A kernel CUDA cannot run
// (its attention block needs more shared memory than a block may declare)
// is announced before its line as
//
//   // mlc.refuse k7 kernel @k7: attention backward (f64, D = 128, ...) ...
//
// and reading the file fails with that message. The error words that
// kernels report through are decoded here too.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_BACKEND_CUDA_CUDAKERNELS_H
#define MLC_RUNTIME_BACKEND_CUDA_CUDAKERNELS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlc::rt {

struct CudaKernelInfo {
  std::string name, kind;
  int64_t args = 0, scratch = 0;
  /// Per phase, in launch order: blocks and threads per block.
  struct Launch {
    int64_t grid, block;
  };
  std::vector<Launch> launches;
};

/// The kernels a kernels.cu announces, by name; a malformed line is an
/// Error naming `path` and the line.
std::map<std::string, CudaKernelInfo> parseCudaKernels(const std::string &source,
                                                       const std::string &path);

/// The kernels' context in device memory, as kernels.cu declares it.
struct CudaKernelCtx {
  int64_t step;
  int64_t *error;
  int64_t rows;
  char *scratch;
  const int64_t *win; // a sharded launch's windows (prelude/cuda.cuh)
  int64_t nwin;
};

/// The runtime's own CUDA kernels (compiled beside each package's):
/// mlc_sumsq_{f32,f64}(g, n, partials) and mlc_scale_{f32,f64}(g, n,
/// partials, count, weight, threshold), which scale a gradient bucket before
/// its all-reduce; mlc_bias_{f32,f64,bf16}(c, bias, rows, n) and
/// mlc_gelu_{f32,f64}(out, x, n), a GEMM's bias and tanh GELU where cuBLASLt
/// has no epilogue for them.
const char *cudaBucketKernels();

/// The error words' state before a step: {code 0, key ~0, limit 0}.
void resetCudaErrorWords(int64_t words[3]);
/// Fails with the message of a kernel's report, if there is one (`ids`: the
/// batch's id inputs, Backend.h's failKernelReport).
void checkCudaErrorWords(const int64_t words[3],
                         const std::map<std::string, std::vector<int64_t>> &ids = {});

} // namespace mlc::rt

#endif // MLC_RUNTIME_BACKEND_CUDA_CUDAKERNELS_H
