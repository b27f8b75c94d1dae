//===- MlcShapes.h - shape arithmetic shared by mlc ------------*- C++ -*-===//
//
// Pure shape rules (broadcasting, axes, slices) used by the dialect's type
// inference and by the runtime's size resolution. No MLIR types: dimensions
// are int64_t with kDynamic (the same value as mlir::ShapedType::kDynamic)
// for a size known only at run time.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_MLC_MLCSHAPES_H
#define MLC_DIALECTS_MLC_MLCSHAPES_H

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mlc {

constexpr int64_t kDynamic = std::numeric_limits<int64_t>::min();

/// Numpy broadcasting of two shapes, aligned on the right. A static 1
/// stretches; a dynamic dimension against a static one > 1 takes the static
/// size (it must equal it at run time). Returns std::nullopt when two static
/// sizes differ and neither is 1.
std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b);

/// Maps a possibly negative axis into [0, rank); std::nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Number of elements Python's `x[start:end:step]` selects from a dimension
/// of size `dim` (step >= 1).
int64_t sliceExtent(int64_t dim, int64_t start, int64_t end, int64_t step);

/// Clamped start index of Python's `x[start:end:step]` for a dimension of `dim`.
int64_t sliceStart(int64_t dim, int64_t start);

/// "[8, ?, 768]" for diagnostics.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace mlc

#endif // MLC_DIALECTS_MLC_MLCSHAPES_H
