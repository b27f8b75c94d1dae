//===- MlcShapes.cpp - shape arithmetic shared by mlc ---------------------===//

#include "dialects/mlc/MlcShapes.h"

#include <algorithm>

namespace mlc {

std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Walk from the right; a missing leading dimension acts as 1.
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    int64_t r;
    if (x == 1)
      r = y;
    else if (y == 1)
      r = x;
    else if (x == kDynamic)
      r = y;
    else if (y == kDynamic)
      r = x;
    else if (x == y)
      r = x;
    else
      return std::nullopt;
    out[rank - 1 - i] = r;
  }
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

static int64_t clampIndex(int64_t dim, int64_t index) {
  if (index < 0)
    index = index < -dim ? 0 : index + dim;
  return std::min(index, dim);
}

int64_t sliceStart(int64_t dim, int64_t start) { return clampIndex(dim, start); }

int64_t sliceExtent(int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t s = clampIndex(dim, start), e = clampIndex(dim, end);
  if (e <= s)
    return 0;
  return (e - s + step - 1) / step;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += shape[i] == kDynamic ? "?" : std::to_string(shape[i]);
  }
  return s + "]";
}

} // namespace mlc
