//===- Vectorize.h - which accesses of a pointwise nest move as vectors -*- C++ -*-===//
//
// The CUDA target's rule, decided on the structure of a nest (the
// mlc-cuda-vectorize pass on a kernel's IR): an access is a vector when the
// kernel touches it, its element is 1, 2, 4 or 8 bytes, it is contiguous
// along the innermost dimension, and its offset and outer strides keep
// every vector aligned (given an aligned pointer). Lanes: 16 bytes of the
// widest such element, halved until they divide the innermost extent (a
// vector never spans two rows).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_VECTORIZE_H
#define MLC_COMPILER_CODEGEN_VECTORIZE_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mlc::lowering {

/// One access of a merged nest: its offset, strides along the nest's dims,
/// element bytes (0: unknown) and whether the kernel reads or writes it.
struct NestAccess {
  int64_t offset = 0;
  std::vector<int64_t> strides;
  int64_t bytes = 0;
  bool touched = false;
};

struct VectorChoice {
  int64_t lanes = 1;        // 1: no access is a vector
  std::vector<bool> vector; // per access
};

/// `dims` merged (no unit dimensions); with `dynamic`, a single dimension
/// is the token count times dims[0] / tokenCapacity.
inline VectorChoice chooseVectors(const std::vector<int64_t> &dims,
                                  const std::vector<NestAccess> &accs, bool dynamic,
                                  int64_t tokenCapacity) {
  VectorChoice out;
  const size_t n = accs.size();
  out.vector.assign(n, false);
  if (dims.empty())
    return out;
  const size_t L = dims.size() - 1;
  const int64_t extent = L == 0 && dynamic && tokenCapacity ? dims[0] / tokenCapacity : dims[L];
  std::vector<bool> candidate(n, false);
  for (size_t k = 0; k < n; ++k) {
    int64_t b = accs[k].bytes;
    candidate[k] = accs[k].touched && (b == 1 || b == 2 || b == 4 || b == 8) &&
                   accs[k].strides[L] == 1;
  }
  int64_t lanes = 1;
  for (bool changed = true; changed;) {
    changed = false;
    int64_t widest = 0;
    for (size_t k = 0; k < n; ++k)
      if (candidate[k])
        widest = std::max(widest, accs[k].bytes);
    if (!widest)
      return out;
    lanes = 16 / widest;
    for (size_t k = 0; k < n; ++k) {
      if (!candidate[k])
        continue;
      bool aligned = accs[k].offset % lanes == 0;
      for (size_t d = 0; d < L; ++d)
        aligned = aligned && accs[k].strides[d] % lanes == 0;
      if (!aligned)
        candidate[k] = false, changed = true;
    }
  }
  while (lanes > 1 && extent % lanes)
    lanes /= 2;
  if (lanes == 1)
    return out;
  out.lanes = lanes;
  out.vector = candidate;
  return out;
}

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_VECTORIZE_H
