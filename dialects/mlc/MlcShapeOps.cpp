//===- MlcShapeOps.cpp - data movement and reductions of the graph ops ----===//
//
// Type inference, verifiers and folds of the ops that move data (reshape,
// transpose, broadcast, slice, concat, split) and of the reductions. As in
// MlcDialect.cpp, inference doubles as verification and every rule a model
// can break is reported with the sizes involved.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcOpHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlc;
using namespace mlc::ophelpers;

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type; use mlc.cast");
  if (in.hasStaticShape() && out.hasStaticShape()) {
    if (in.getNumElements() != out.getNumElements())
      return emitOpError("changes the element count from ")
             << in.getNumElements() << " to " << out.getNumElements();
    return success();
  }
  // Leading dynamic dimensions carried over unchanged are known at run time;
  // beyond them, one dynamic dimension can be solved from the element count.
  int64_t prefix = 0;
  while (prefix < in.getRank() && prefix < out.getRank() &&
         in.isDynamicDim(prefix) && out.isDynamicDim(prefix))
    ++prefix;
  int64_t unresolved = 0;
  for (int64_t i = prefix; i < out.getRank(); ++i)
    unresolved += out.isDynamicDim(i);
  if (unresolved > 1)
    return emitOpError("result ") << str(shapeOf(out))
                                  << " has more than one dynamic dimension that "
                                     "the element count must determine";
  if (unresolved == 0) {
    bool inDynamicAfterPrefix = false;
    for (int64_t i = prefix; i < in.getRank(); ++i)
      inDynamicAfterPrefix |= in.isDynamicDim(i);
    if (inDynamicAfterPrefix)
      return emitOpError("maps a dynamic input dimension of ")
             << str(shapeOf(in)) << " to the static shape " << str(shapeOf(out));
  }
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType() && getType().hasStaticShape())
    return getInput();
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Shape in = shapeOf(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (perm.size() != in.size())
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries for a rank-", in.size(), " tensor");
  Shape out(in.size());
  llvm::SmallSet<int64_t, 8> seen;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= int64_t(in.size()) || !seen.insert(perm[i]).second)
      return emitOptionalError(loc, "permutation is not a permutation of 0..",
                               in.size() - 1);
    out[i] = in[perm[i]];
  }
  types.push_back(tensorOf(out, elementOf(adaptor.getInput().getType())));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  // transpose(transpose(x, inner), outer) = transpose(x, inner[outer[i]]).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> outer = getPermutation(), first = inner.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : outer)
      composed.push_back(first[p]);
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    return getResult();
  }
  ArrayRef<int64_t> perm = getPermutation();
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return {};
  return getInput();
}

LogicalResult BroadcastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type; use mlc.cast");
  if (in.getRank() > out.getRank())
    return emitOpError("cannot broadcast rank ")
           << in.getRank() << " to the lower rank " << out.getRank();
  int64_t offset = out.getRank() - in.getRank();
  for (int64_t i = 0; i < in.getRank(); ++i) {
    int64_t d = in.getDimSize(i), r = out.getDimSize(i + offset);
    if (d != 1 && sizesConflict(d, r))
      return emitOpError("dimension ")
             << i << " of " << str(shapeOf(in)) << " does not broadcast to "
             << str(shapeOf(out));
  }
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  return getInput().getType() == getType() && getType().hasStaticShape()
             ? getInput()
             : Value();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  Shape in = shapeOf(adaptor.getInput().getType());
  ArrayRef<int64_t> starts = adaptor.getStarts(), ends = adaptor.getEnds(),
                    steps = adaptor.getSteps();
  if (starts.size() != in.size() || ends.size() != in.size() ||
      steps.size() != in.size())
    return emitOptionalError(loc, "starts, ends and steps need one entry per "
                                  "dimension of ",
                             str(in));
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (steps[i] < 1)
      return emitOptionalError(loc, "step ", steps[i], " in dimension ", i,
                               " must be >= 1");
    out[i] = in[i] == kDynamic ? kDynamic
                               : sliceExtent(in[i], starts[i], ends[i], steps[i]);
  }
  types.push_back(tensorOf(out, elementOf(adaptor.getInput().getType())));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() != getType() || !getType().hasStaticShape())
    return {};
  for (auto [start, step] : llvm::zip(getStarts(), getSteps()))
    if (sliceStart(1, start) != 0 || step != 1)
      return {};
  return getInput();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "needs at least one input");
  Shape out = shapeOf(inputs[0].getType());
  Type element = elementOf(inputs[0].getType());
  auto axis = normalizeAxis(adaptor.getAxis(), out.size());
  if (!axis)
    return emitOptionalError(loc, "axis ", int64_t(adaptor.getAxis()),
                             " out of range for rank ", out.size());
  for (Value v : inputs.drop_front()) {
    Shape s = shapeOf(v.getType());
    if (s.size() != out.size())
      return emitOptionalError(loc, "inputs differ in rank: ", str(out), " vs ",
                               str(s));
    if (elementOf(v.getType()) != element)
      return emitOptionalError(loc, "inputs differ in element type");
    for (size_t d = 0; d < s.size(); ++d) {
      if (int64_t(d) == *axis) {
        out[d] = (out[d] == kDynamic || s[d] == kDynamic) ? kDynamic : out[d] + s[d];
      } else if (sizesConflict(out[d], s[d])) {
        return emitOptionalError(loc, "inputs differ in dimension ", d,
                                 " outside the concatenation axis");
      } else if (out[d] == kDynamic) {
        out[d] = s[d];
      }
    }
  }
  types.push_back(tensorOf(out, element));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  return {};
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  Shape in = shapeOf(adaptor.getInput().getType());
  auto axis = normalizeAxis(adaptor.getAxis(), in.size());
  if (!axis)
    return emitOptionalError(loc, "axis ", int64_t(adaptor.getAxis()),
                             " out of range for rank ", in.size());
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 1)
      return emitOptionalError(loc, "split sizes must be positive, got ", size);
    total += size;
  }
  if (in[*axis] != kDynamic && total != in[*axis])
    return emitOptionalError(loc, "split sizes sum to ", total, " but dimension ",
                             *axis, " has ", in[*axis]);
  for (int64_t size : adaptor.getSizes()) {
    Shape s = in;
    s[*axis] = size;
    types.push_back(tensorOf(s, elementOf(adaptor.getInput().getType())));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(std::optional<Location> loc, Type input,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 SmallVectorImpl<Type> &types) {
  Shape in = shapeOf(input);
  SmallVector<bool> reduced(in.size(), false);
  for (int64_t a : axes) {
    auto axis = normalizeAxis(a, in.size());
    if (!axis)
      return emitOptionalError(loc, "axis ", a, " out of range for rank ", in.size());
    if (reduced[*axis])
      return emitOptionalError(loc, "axis ", a, " appears twice");
    reduced[*axis] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i])
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(1);
  }
  types.push_back(tensorOf(out, elementOf(input)));
  return success();
}

#define MLC_REDUCE_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferReduce(loc, adaptor.getInput().getType(), adaptor.getAxes(),   \
                       adaptor.getKeepdims(), types);                          \
  }
MLC_REDUCE_INFER(ReduceSumOp)
MLC_REDUCE_INFER(ReduceMeanOp)
MLC_REDUCE_INFER(ReduceMaxOp)
#undef MLC_REDUCE_INFER
