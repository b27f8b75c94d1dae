//===- MlcCollectives.cpp - sequence-parallel collectives -----------------===//
//
// Verifiers and gradient rules of mlc.tp_all_gather and
// mlc.tp_reduce_scatter (MlcOps.td). The two are conjugate: the gradient of
// a gather of the ranks' slices is the sum over the group of the adjoints,
// scattered back to the slices; the gradient of a reduce-scatter is the
// gather of the slices' adjoints. The group's size is the ratio of the
// gathered to the sliced dim, and where the module records it
// (mlc.tensor_parallel) the ratio must be it.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlc;

namespace {

/// `whole` is `slice` with dim `axis` times the group's size.
LogicalResult verifySlices(Operation *op, int64_t axis, RankedTensorType slice,
                           RankedTensorType whole) {
  if (slice.getElementType() != whole.getElementType())
    return op->emitOpError("changes the element type");
  if (slice.getRank() != whole.getRank())
    return op->emitOpError("changes the rank");
  if (axis < 0 || axis >= slice.getRank())
    return op->emitOpError("axis ") << axis << " is outside the rank " << slice.getRank();
  for (int64_t d = 0; d < slice.getRank(); ++d) {
    int64_t s = slice.getDimSize(d), w = whole.getDimSize(d);
    if (d != axis) {
      if (s != w)
        return op->emitOpError("dim ") << d << " differs (" << s << " and " << w
                                       << "); only the axis " << axis << " is sliced";
      continue;
    }
    if (ShapedType::isDynamic(s) || ShapedType::isDynamic(w)) {
      if (ShapedType::isDynamic(s) != ShapedType::isDynamic(w))
        return op->emitOpError("the axis is dynamic on one side only");
      continue;
    }
    if (s == 0 || w % s != 0)
      return op->emitOpError("the whole axis (") << w << ") is not a multiple of a slice (" << s
                                                 << ")";
    auto module = op->getParentOfType<ModuleOp>();
    auto size = module ? module->getAttrOfType<IntegerAttr>("mlc.tensor_parallel") : IntegerAttr();
    if (size && w / s != size.getInt())
      return op->emitOpError("joins ")
             << w / s << " slices, but the tensor-parallel group has " << size.getInt()
             << " ranks";
  }
  return success();
}

} // namespace

LogicalResult TpAllGatherOp::verify() {
  return verifySlices(*this, getAxis(), getInput().getType(), getType());
}

LogicalResult TpReduceScatterOp::verify() {
  return verifySlices(*this, getAxis(), getType(), getInput().getType());
}

LogicalResult TpAllGatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                            SmallVectorImpl<Value> &og) {
  og.push_back(b.create<TpReduceScatterOp>(getLoc(), getInput().getType(), rg[0], getAxis()));
  return success();
}

LogicalResult TpReduceScatterOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                                SmallVectorImpl<Value> &og) {
  og.push_back(b.create<TpAllGatherOp>(getLoc(), getInput().getType(), rg[0], getAxis()));
  return success();
}
