//===- MlcGradients.cpp - reverse-mode rules of the graph ops --------------===//
//
// GradientOpInterface implementations. Each rule emits graph ops that map
// the adjoints of an op's results to the adjoints of its operands. Rules undo
// broadcasting by summing over the broadcast dimensions (sumToShape), so every
// operand gradient has exactly its operand's type.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

using namespace mlir;
using namespace mlc;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

bool isFloatTensor(Value v) {
  return isa<FloatType>(tensorType(v).getElementType());
}

/// A 0-d constant of `like`'s element type.
Value scalar(OpBuilder &b, Location loc, Value like, double value) {
  Type el = tensorType(like).getElementType();
  auto type = RankedTensorType::get({}, el);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getFloatAttr(el, value)));
}

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  Type el = t.getElementType();
  Attribute zero = isa<FloatType>(el) ? Attribute(b.getFloatAttr(el, 0.0))
                                      : Attribute(b.getIntegerAttr(el, 0));
  if (t.hasStaticShape())
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, zero));
  // A dynamic shape: broadcast a 0-d zero.
  Value z = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({}, el), zero));
  return b.create<BroadcastOp>(loc, t, z);
}

/// Sums `grad` over the dimensions that broadcasting added or stretched, so
/// that the result has `target`'s type.
Value sumToShape(OpBuilder &b, Location loc, Value grad, Type target) {
  if (grad.getType() == target)
    return grad;
  auto g = tensorType(grad);
  auto t = cast<RankedTensorType>(target);
  int64_t offset = g.getRank() - t.getRank();
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < offset; ++i)
    axes.push_back(i);
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.getDimSize(i) == 1 && g.getDimSize(i + offset) != 1)
      axes.push_back(i + offset);
  Value r = grad;
  if (!axes.empty())
    r = b.create<ReduceSumOp>(loc, grad, b.getDenseI64ArrayAttr(axes), false);
  if (r.getType() != target)
    r = b.create<ReshapeOp>(loc, target, r);
  return r;
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return b.create<MulOp>(loc, x, y);
}

} // namespace

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  og.push_back(sumToShape(b, getLoc(), rg[0], getLhs().getType()));
  og.push_back(sumToShape(b, getLoc(), rg[0], getRhs().getType()));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  og.push_back(sumToShape(b, getLoc(), rg[0], getLhs().getType()));
  Value neg = b.create<NegOp>(getLoc(), rg[0]);
  og.push_back(sumToShape(b, getLoc(), neg, getRhs().getType()));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  og.push_back(sumToShape(b, loc, mul(b, loc, rg[0], getRhs()), getLhs().getType()));
  og.push_back(sumToShape(b, loc, mul(b, loc, rg[0], getLhs()), getRhs().getType()));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // d/dl = g / r;  d/dr = -g * l / r^2 = -(g / r) * result
  Value gOverR = b.create<DivOp>(loc, rg[0], getRhs());
  og.push_back(sumToShape(b, loc, gOverR, getLhs().getType()));
  Value dr = b.create<NegOp>(loc, mul(b, loc, gOverR, getResult()));
  og.push_back(sumToShape(b, loc, dr, getRhs().getType()));
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // d/dl = g * r * l^(r - 1);  d/dr = g * result * log(l)
  Value rMinus1 = b.create<SubOp>(loc, getRhs(), scalar(b, loc, getRhs(), 1.0));
  Value dl = mul(b, loc, mul(b, loc, rg[0], getRhs()),
                 b.create<PowOp>(loc, getLhs(), rMinus1));
  og.push_back(sumToShape(b, loc, dl, getLhs().getType()));
  Value dr = mul(b, loc, mul(b, loc, rg[0], getResult()),
                 b.create<LogOp>(loc, getLhs()));
  og.push_back(sumToShape(b, loc, dr, getRhs().getType()));
  return success();
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  og.push_back(b.create<NegOp>(getLoc(), rg[0]));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  og.push_back(mul(b, getLoc(), rg[0], getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  og.push_back(b.create<DivOp>(getLoc(), rg[0], getInput()));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // g * (1 - y^2)
  Value y2 = mul(b, loc, getResult(), getResult());
  Value d = b.create<SubOp>(loc, scalar(b, loc, y2, 1.0), y2);
  og.push_back(mul(b, loc, rg[0], d));
  return success();
}

LogicalResult ErfOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // g * 2/sqrt(pi) * exp(-x^2)
  Value x = getInput();
  Value e = b.create<ExpOp>(loc, b.create<NegOp>(loc, mul(b, loc, x, x)));
  Value d = mul(b, loc, e, scalar(b, loc, x, 2.0 / std::sqrt(M_PI)));
  og.push_back(mul(b, loc, rg[0], d));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // g * 0.5 / y
  Value half = mul(b, loc, rg[0], scalar(b, loc, rg[0], 0.5));
  og.push_back(b.create<DivOp>(loc, half, getResult()));
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // d/dx x^(-1/2) = -0.5 * y / x
  Value d = b.create<DivOp>(loc, getResult(), getInput());
  d = mul(b, loc, d, scalar(b, loc, d, -0.5));
  og.push_back(mul(b, loc, rg[0], d));
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  og.push_back(b.create<GeluGradOp>(getLoc(), rg[0], getInput(), getApproximate()));
  return success();
}

/// sigmoid(x) = 1 / (1 + exp(-x)) as pointwise ops, with the constant 1 it uses.
static std::pair<Value, Value> sigmoid(OpBuilder &b, Location loc, Value x) {
  Value one = scalar(b, loc, x, 1.0);
  Value s = b.create<DivOp>(
      loc, one, b.create<AddOp>(loc, one, b.create<ExpOp>(loc, b.create<NegOp>(loc, x))));
  return {s, one};
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // y = x s with s = sigmoid(x) = 1 / (1 + exp(-x)):  dy/dx = s + y (1 - s).
  // Composed of pointwise ops, so that it fuses with its neighbours.
  Value y = getResult();
  auto [s, one] = sigmoid(b, loc, getInput());
  Value d = b.create<AddOp>(loc, s, mul(b, loc, y, b.create<SubOp>(loc, one, s)));
  og.push_back(mul(b, loc, rg[0], d));
  return success();
}

LogicalResult SwigluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // y = silu(a) u:  dy/du = silu(a),  dy/da = u s (1 + a (1 - s)), s = sigmoid(a).
  // Both from a and u only (nothing of the forward is saved), so that the
  // two gradients fuse into one kernel over the same inputs.
  Value a = getGate(), u = getUp();
  auto [s, one] = sigmoid(b, loc, a);
  Value ds = mul(b, loc, s, b.create<AddOp>(loc, one, mul(b, loc, a, b.create<SubOp>(loc, one, s))));
  og.push_back(mul(b, loc, mul(b, loc, rg[0], u), ds));
  og.push_back(mul(b, loc, rg[0], b.create<SiluOp>(loc, a)));
  return success();
}

LogicalResult RotaryOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  // y = C x + S P x (P the pair permutation, C and S diagonal): dx = C dy +
  // P S dy, the same op reading sin at the partner (the rotation by -theta);
  // a transposed op's transpose is the plain op. The tables are constants
  // of the step (from the positions): no gradient.
  og.push_back(b.create<RotaryOp>(getLoc(), rg[0], getCos(), getSin(), getInterleaved(),
                                  !getTranspose()));
  og.append({Value(), Value()});
  return success();
}

LogicalResult SelectOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  og.push_back(Value()); // the condition has no gradient
  if (!isFloatTensor(getTrueValue())) {
    og.append({Value(), Value()});
    return success();
  }
  Value zero = scalar(b, loc, rg[0], 0.0);
  Value t = b.create<SelectOp>(loc, getCondition(), rg[0], zero);
  Value f = b.create<SelectOp>(loc, getCondition(), zero, rg[0]);
  og.push_back(sumToShape(b, loc, t, getTrueValue().getType()));
  og.push_back(sumToShape(b, loc, f, getFalseValue().getType()));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  if (!isFloatTensor(getInput()) || !isFloatTensor(getResult())) {
    og.push_back(Value());
    return success();
  }
  og.push_back(b.create<CastOp>(getLoc(), getInput().getType(), rg[0]));
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  // Dropout is linear in its input: the same seed regenerates the same mask.
  // A block of a whole tensor keeps its block: the same rank, count and axis.
  og.push_back(b.create<DropoutOp>(getLoc(), rg[0].getType(), rg[0], getRatioAttr(),
                                   getSeedAttr(), getRank(), getBlocksAttr(), getSpanAttr()));
  if (getRank())
    og.push_back(Value()); // the rank is data
  return success();
}

//===----------------------------------------------------------------------===//
// Tensor-parallel collectives: Megatron's conjugate pair
//===----------------------------------------------------------------------===//

LogicalResult TpCopyOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  // Each rank's adjoint is its shard's part: the all-reduce makes it whole.
  og.push_back(b.create<TpReduceOp>(getLoc(), rg[0].getType(), TpReduceKind::sum, rg[0]));
  return success();
}

LogicalResult TpReduceOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                         SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  if (getKind() == TpReduceKind::sum) {
    // The consumers are replicated: every rank already holds the whole
    // adjoint, which is each partial sum's adjoint.
    og.push_back(b.create<TpCopyOp>(loc, rg[0]));
    return success();
  }
  // max: the gradient flows to the elements that attain the group's maximum.
  Value hit = b.create<CompareOp>(loc, ComparePredicate::eq, getInput(), getResult());
  og.push_back(b.create<SelectOp>(loc, hit, rg[0], scalar(b, loc, rg[0], 0.0)));
  return success();
}

//===----------------------------------------------------------------------===//
// Lookups and products
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  Value grad = rg[0];
  // torch's padding_idx: the lookups of that row scatter nothing, so the
  // table's gradient of that row is exactly 0 (the scatter kernel skips them).
  og.push_back(b.create<EmbeddingGradOp>(loc, getWeight().getType(), grad, getIndices(),
                                         getPaddingIdxAttr(), /*acc=*/Value()));
  og.push_back(Value());
  return success();
}

/// Rows of a [..., M, K] tensor folded into one dimension: [N, K].
static Value flattenRows(OpBuilder &b, Location loc, Value v) {
  auto t = tensorType(v);
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < t.getRank(); ++i)
    rows = (rows == kDynamic || t.isDynamicDim(i)) ? kDynamic : rows * t.getDimSize(i);
  auto type = RankedTensorType::get({rows, t.getShape().back()}, t.getElementType());
  return b.create<ReshapeOp>(loc, type, v);
}

/// With C = op(A) op(B):
///   dA = g op(B)^T   and   dB = op(A)^T g   (transposed back where an operand
/// was used transposed), summed over broadcast batch dimensions. A shared
/// rank-2 weight B against a batched A (every linear layer) takes one GEMM
/// over all rows instead of a batched product and a sum. A bias's gradient
/// is g summed over every row; an accumulator's is g itself.
LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  if (failed(productGradients(b, rg, og)))
    return failure();
  if (getBias())
    og.push_back(sumToShape(b, loc, rg[0], getBias().getType()));
  if (getAcc())
    og.push_back(rg[0]);
  return success();
}

LogicalResult MatmulOp::productGradients(OpBuilder &b, ArrayRef<Value> rg,
                                         SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  Value g = rg[0], A = getLhs(), B = getRhs();
  bool tA = getTransposeLhs(), tB = getTransposeRhs();
  if (getF32Result()) // as for cast(matmul): the gradient narrowed first
    g = b.create<CastOp>(loc, RankedTensorType::get(tensorType(g).getShape(),
                                                    tensorType(A).getElementType()),
                         g);
  Value dA = tA ? b.create<MatmulOp>(loc, B, g, /*tl=*/tB, /*tr=*/true)
                : b.create<MatmulOp>(loc, g, B, /*tl=*/false, /*tr=*/!tB);
  og.push_back(sumToShape(b, loc, dA, A.getType()));

  auto aType = tensorType(A);
  bool dynamicBatch = false;
  for (int64_t i = 1; i + 2 < aType.getRank(); ++i)
    dynamicBatch |= aType.isDynamicDim(i);
  if (tensorType(B).getRank() == 2 && aType.getRank() > 2 && !tA && !dynamicBatch) {
    Value a2 = flattenRows(b, loc, A), g2 = flattenRows(b, loc, g);
    og.push_back(tB ? b.create<MatmulOp>(loc, g2, a2, true, false)   // [N, K]
                    : b.create<MatmulOp>(loc, a2, g2, true, false)); // [K, N]
    return success();
  }
  Value dB = tB ? b.create<MatmulOp>(loc, g, A, /*tl=*/true, /*tr=*/tA)
                : b.create<MatmulOp>(loc, A, g, /*tl=*/!tA, /*tr=*/false);
  og.push_back(sumToShape(b, loc, dB, B.getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  og.push_back(isFloatTensor(getInput())
                   ? b.create<ReshapeOp>(getLoc(), getInput().getType(), rg[0])
                   : Value());
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  og.push_back(isFloatTensor(getInput())
                   ? b.create<TransposeOp>(getLoc(), rg[0],
                                           b.getDenseI64ArrayAttr(inverse))
                   : Value());
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  og.push_back(isFloatTensor(getInput())
                   ? sumToShape(b, getLoc(), rg[0], getInput().getType())
                   : Value());
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  if (!isFloatTensor(getInput())) {
    og.push_back(Value());
    return success();
  }
  auto in = tensorType(getInput());
  SmallVector<int64_t> low, high;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (in.isDynamicDim(d) || getSteps()[d] != 1)
      return emitOpError("has no gradient rule for a strided slice or a slice of "
                         "a dynamic dimension");
    int64_t size = in.getDimSize(d);
    int64_t start = sliceStart(size, getStarts()[d]);
    int64_t extent = sliceExtent(size, getStarts()[d], getEnds()[d], 1);
    low.push_back(start);
    high.push_back(size - start - extent);
  }
  og.push_back(b.create<PadOp>(getLoc(), rg[0], b.getDenseI64ArrayAttr(low),
                               b.getDenseI64ArrayAttr(high)));
  return success();
}

LogicalResult PadOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  auto in = tensorType(getInput());
  SmallVector<int64_t> starts, ends, steps;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (in.isDynamicDim(d))
      return emitOpError("has no gradient rule for a dynamic dimension");
    starts.push_back(getLow()[d]);
    ends.push_back(getLow()[d] + in.getDimSize(d));
    steps.push_back(1);
  }
  og.push_back(b.create<SliceOp>(getLoc(), rg[0], b.getDenseI64ArrayAttr(starts),
                                 b.getDenseI64ArrayAttr(ends),
                                 b.getDenseI64ArrayAttr(steps)));
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  int64_t rank = tensorType(getResult()).getRank();
  int64_t axis = *normalizeAxis(getAxis(), rank);
  SmallVector<int64_t> sizes;
  for (Value v : getInputs()) {
    if (tensorType(v).isDynamicDim(axis))
      return emitOpError("has no gradient rule along a dynamic dimension");
    sizes.push_back(tensorType(v).getDimSize(axis));
  }
  if (!isFloatTensor(getResult())) {
    og.append(getInputs().size(), Value());
    return success();
  }
  auto split = b.create<SplitOp>(getLoc(), rg[0], b.getI64IntegerAttr(axis),
                                 b.getDenseI64ArrayAttr(sizes));
  og.append(split.getResults().begin(), split.getResults().end());
  return success();
}

LogicalResult SplitOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  if (!isFloatTensor(getInput())) {
    og.push_back(Value());
    return success();
  }
  SmallVector<Value> pieces;
  for (auto [result, grad] : llvm::zip(getResults(), rg))
    pieces.push_back(grad ? grad : zerosLike(b, getLoc(), result.getType()));
  og.push_back(b.create<ConcatOp>(getLoc(), pieces, getAxisAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Broadcasts a reduction's gradient back over the reduced axes.
static Value expandReduced(OpBuilder &b, Location loc, Value grad, Value input,
                           ArrayRef<int64_t> axes) {
  auto in = tensorType(input);
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t a : axes)
    kept[*normalizeAxis(a, in.getRank())] = 1;
  auto keptType = RankedTensorType::get(kept, in.getElementType());
  Value g = grad;
  if (g.getType() != keptType)
    g = b.create<ReshapeOp>(loc, keptType, g);
  return b.create<BroadcastOp>(loc, in, g);
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  og.push_back(isFloatTensor(getInput())
                   ? expandReduced(b, getLoc(), rg[0], getInput(), getAxes())
                   : Value());
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &og) {
  auto in = tensorType(getInput());
  int64_t count = 1;
  for (int64_t a : getAxes()) {
    int64_t size = in.getDimSize(*normalizeAxis(a, in.getRank()));
    if (size == kDynamic)
      return emitOpError("has no gradient rule over a dynamic dimension");
    count *= size;
  }
  Value g = expandReduced(b, getLoc(), rg[0], getInput(), getAxes());
  og.push_back(b.create<DivOp>(getLoc(), g, scalar(b, getLoc(), g, double(count))));
  return success();
}

/// y_i = sum of x_j, j <= i: dx_j = sum of dy_i, i >= j, the running sum
/// the other way (exclusive stays exclusive). Integers (positions) have none.
LogicalResult CumSumOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!isFloatTensor(getInput())) {
    og.push_back(Value());
    return success();
  }
  og.push_back(b.create<CumSumOp>(getLoc(), rg[0], getAxisAttr(), getExclusiveAttr(),
                                  getReverse() ? UnitAttr() : b.getUnitAttr()));
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!isFloatTensor(getInput())) {
    og.push_back(Value());
    return success();
  }
  Location loc = getLoc();
  // The gradient flows to every element equal to the maximum.
  Value g = expandReduced(b, loc, rg[0], getInput(), getAxes());
  Value m = expandReduced(b, loc, getResult(), getInput(), getAxes());
  Value hit = b.create<CompareOp>(loc, ComparePredicate::eq, getInput(), m);
  og.push_back(b.create<SelectOp>(loc, hit, g, scalar(b, loc, g, 0.0)));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations, losses, attention
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  og.push_back(b.create<SoftmaxGradOp>(getLoc(), rg[0], getResult(), getAxisAttr()));
  return success();
}

LogicalResult LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &og) {
  Location loc = getLoc();
  // g - exp(y) * sum(g)
  Value sum = b.create<ReduceSumOp>(loc, rg[0], b.getDenseI64ArrayAttr({getAxis()}),
                                    /*keepdims=*/true);
  Value p = b.create<ExpOp>(loc, getResult());
  og.push_back(b.create<SubOp>(loc, rg[0], mul(b, loc, p, sum)));
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  auto grads = b.create<LayerNormGradOp>(getLoc(), rg[0], getInput(), getWeight(),
                                         /*residual=*/Value(), getEpsilonAttr());
  og.append({grads.getInputGrad(), grads.getWeightGrad(), grads.getBiasGrad()});
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  auto grads = b.create<RmsNormGradOp>(getLoc(), rg[0], getInput(), getWeight(),
                                       /*residual=*/Value(), getEpsilonAttr());
  og.append({grads.getInputGrad(), grads.getWeightGrad()});
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                             SmallVectorImpl<Value> &og) {
  og.push_back(b.create<CrossEntropyGradOp>(getLoc(), rg[0], getLogits(), getLabels(),
                                            getIgnoreIndexAttr()));
  og.push_back(Value());
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  // With rotary tables the gradient op reads Q and K rotated too and
  // returns the gradients of the unrotated inputs.
  auto grads = b.create<AttentionGradOp>(
      getLoc(), rg[0], getQuery(), getKey(), getValue(), getMask(), getCuSeqlens(), getCos(),
      getSin(), getRank(), getCausalAttr(), getScaleAttr(), getDropoutAttr(), getSeedAttr(),
      getInterleavedAttr(), getSoftcapAttr(), getWindowAttr(), getBlocksAttr(), getAxisAttr());
  og.append({grads.getQueryGrad(), grads.getKeyGrad(), grads.getValueGrad()});
  if (getMask())
    og.push_back(Value()); // masks are data, not parameters
  if (getCuSeqlens())
    og.push_back(Value());
  if (getCos())
    og.append({Value(), Value()}); // the tables come from the positions
  if (getRank())
    og.push_back(Value()); // the dropout block's rank is data
  return success();
}
