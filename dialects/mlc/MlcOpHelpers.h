//===- MlcOpHelpers.h - shape helpers of the ops' inference ----*- C++ -*-===//
//
// Private to dialects/mlc: what the type inference, verifiers and folds of
// the graph ops (MlcDialect.cpp, MlcShapeOps.cpp, MlcNnOps.cpp) share to
// read a tensor type's shape and element type and to report sizes.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_MLC_MLCOPHELPERS_H
#define MLC_DIALECTS_MLC_MLCOPHELPERS_H

#include "dialects/mlc/MlcShapes.h"

#include "mlir/IR/BuiltinTypes.h"

#include <string>
#include <vector>

namespace mlc {
namespace ophelpers {

using Shape = std::vector<int64_t>;

inline Shape shapeOf(mlir::Type t) {
  auto ranked = mlir::cast<mlir::RankedTensorType>(t);
  return Shape(ranked.getShape().begin(), ranked.getShape().end());
}

inline mlir::Type elementOf(mlir::Type t) {
  return mlir::cast<mlir::RankedTensorType>(t).getElementType();
}

/// "[8, ?, 768]" for diagnostics.
inline std::string str(const Shape &s) { return formatShape(s); }

inline mlir::RankedTensorType tensorOf(const Shape &shape, mlir::Type element) {
  return mlir::RankedTensorType::get(shape, element);
}

/// Two sizes that cannot be equal: both static and different.
inline bool sizesConflict(int64_t a, int64_t b) {
  return a != kDynamic && b != kDynamic && a != b;
}

} // namespace ophelpers
} // namespace mlc

#endif // MLC_DIALECTS_MLC_MLCOPHELPERS_H
