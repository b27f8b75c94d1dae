//===- MlcDialect.cpp - the mlc graph dialect ------------------------------===//
//
// Type inference, verifiers and folds of the graph ops. Inference functions
// double as verifiers: InferTypeOpInterface checks that an op's result types
// equal the inferred ones, and every rule a model can break is reported here
// with the sizes involved.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcShapes.h"
#include "contract/OptimizerScalars.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlc;

#include "dialects/mlc/MlcDialect.cpp.inc"
#include "dialects/mlc/MlcEnums.cpp.inc"
#include "dialects/mlc/MlcInterfaces.cpp.inc"

void MlcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/mlc/MlcOps.cpp.inc"
      >();
}

Operation *MlcDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
using Shape = std::vector<int64_t>;

Shape shapeOf(Type t) {
  auto ranked = cast<RankedTensorType>(t);
  return Shape(ranked.getShape().begin(), ranked.getShape().end());
}

Type elementOf(Type t) { return cast<RankedTensorType>(t).getElementType(); }

std::string str(const Shape &s) { return formatShape(s); }

RankedTensorType tensorOf(const Shape &shape, Type element) {
  return RankedTensorType::get(shape, element);
}

bool sizesConflict(int64_t a, int64_t b) {
  return a != kDynamic && b != kDynamic && a != b;
}

/// True when `attr` is a splat constant equal to `value` (int or float).
bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type el = dense.getElementType();
  if (isa<FloatType>(el))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  if (isa<IntegerType>(el))
    return dense.getSplatValue<APInt>().getSExtValue() == int64_t(value);
  return false;
}

LogicalResult inferBroadcast(std::optional<Location> loc, Type lhs, Type rhs,
                             Type resultElement, SmallVectorImpl<Type> &out) {
  if (elementOf(lhs) != elementOf(rhs))
    return emitOptionalError(loc, "operand element types differ: ",
                             elementOf(lhs), " vs ", elementOf(rhs));
  auto shape = broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  if (!shape)
    return emitOptionalError(loc, "shapes ", str(shapeOf(lhs)), " and ",
                             str(shapeOf(rhs)), " do not broadcast");
  out.push_back(tensorOf(*shape, resultElement ? resultElement : elementOf(lhs)));
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// ConstantOp, IotaOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto value = adaptor.getValueAttr();
  if (!value || !isa<RankedTensorType>(value.getType()))
    return emitOptionalError(loc, "value must be a ranked tensor literal");
  types.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

LogicalResult IotaOp::verify() {
  auto type = getType();
  if (!normalizeAxis(getDim(), type.getRank()))
    return emitOpError("dim ") << int64_t(getDim()) << " out of range for rank "
                               << type.getRank();
  return success();
}

LogicalResult RotaryTableOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (!type.hasStaticShape() || type.getRank() < 2)
    return emitOpError("result must be a static [positions, 1..., head_dim] tensor, got ")
           << type;
  Shape s = shapeOf(type);
  const int64_t D = s.back();
  if (llvm::any_of(ArrayRef<int64_t>(s).slice(1, s.size() - 2), [](int64_t d) { return d != 1; }))
    return emitOpError("result's middle dims must be 1, got ") << type;
  if (D != 2 * int64_t(getInvFreq().size()))
    return emitOpError("head_dim ") << D << " must be twice the " << getInvFreq().size()
                                    << " inv_freq values";
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp, MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Shape table = shapeOf(adaptor.getWeight().getType());
  if (table.size() != 2)
    return emitOptionalError(loc, "weight must be a [rows, dim] table, got ",
                             str(table));
  Shape shape = shapeOf(adaptor.getIndices().getType());
  shape.push_back(table[1]);
  types.push_back(tensorOf(shape, elementOf(adaptor.getWeight().getType())));
  return success();
}

LogicalResult EmbeddingOp::verify() {
  IntegerAttr pad = getPaddingIdxAttr();
  int64_t rows = shapeOf(getWeight().getType())[0];
  if (pad && (pad.getInt() < 0 || (rows != ShapedType::kDynamic && pad.getInt() >= rows)))
    return emitOpError("padding_idx ") << pad.getInt() << " is not a row of the " << rows
                                       << "-row table";
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Type lt = adaptor.getLhs().getType(), rt = adaptor.getRhs().getType();
  Shape l = shapeOf(lt), r = shapeOf(rt);
  if (l.size() < 2 || r.size() < 2)
    return emitOptionalError(loc, "operands must have rank >= 2, got ", str(l),
                             " and ", str(r));
  if (elementOf(lt) != elementOf(rt))
    return emitOptionalError(loc, "operand element types differ: ",
                             elementOf(lt), " vs ", elementOf(rt));
  int64_t m = l[l.size() - 2], k1 = l.back();
  if (adaptor.getTransposeLhs())
    std::swap(m, k1);
  int64_t k2 = r[r.size() - 2], n = r.back();
  if (adaptor.getTransposeRhs())
    std::swap(k2, n);
  if (sizesConflict(k1, k2))
    return emitOptionalError(loc, "contraction dimensions differ: ", k1, " vs ", k2);
  auto batch = broadcastShapes(Shape(l.begin(), l.end() - 2),
                               Shape(r.begin(), r.end() - 2));
  if (!batch)
    return emitOptionalError(loc, "batch dimensions of ", str(l), " and ", str(r),
                             " do not broadcast");
  batch->push_back(m);
  batch->push_back(n);
  Type el = elementOf(lt);
  if (adaptor.getF32Result()) {
    if (!el.isBF16())
      return emitOptionalError(loc, "f32_result takes bf16 operands, got ", el);
    el = Float32Type::get(lt.getContext());
  }
  types.push_back(tensorOf(*batch, el));
  return success();
}

//===----------------------------------------------------------------------===//
// Pointwise ops
//===----------------------------------------------------------------------===//

#define MLC_BINARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferBroadcast(loc, adaptor.getLhs().getType(),                     \
                          adaptor.getRhs().getType(), Type(), types);          \
  }
MLC_BINARY_INFER(AddOp)
MLC_BINARY_INFER(SubOp)
MLC_BINARY_INFER(MulOp)
MLC_BINARY_INFER(DivOp)
MLC_BINARY_INFER(PowOp)
#undef MLC_BINARY_INFER

/// x op c -> x when c is a splat identity and broadcasting changes nothing.
static OpFoldResult foldRightIdentity(Value lhs, Attribute rhs, Type result,
                                      double identity) {
  if (lhs.getType() == result && isSplatOf(rhs, identity))
    return lhs;
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor a) {
  if (auto r = foldRightIdentity(getLhs(), a.getRhs(), getType(), 0.0))
    return r;
  return foldRightIdentity(getRhs(), a.getLhs(), getType(), 0.0);
}
OpFoldResult SubOp::fold(FoldAdaptor a) {
  return foldRightIdentity(getLhs(), a.getRhs(), getType(), 0.0);
}
OpFoldResult MulOp::fold(FoldAdaptor a) {
  if (auto r = foldRightIdentity(getLhs(), a.getRhs(), getType(), 1.0))
    return r;
  return foldRightIdentity(getRhs(), a.getLhs(), getType(), 1.0);
}
OpFoldResult DivOp::fold(FoldAdaptor a) {
  return foldRightIdentity(getLhs(), a.getRhs(), getType(), 1.0);
}
OpFoldResult PowOp::fold(FoldAdaptor a) {
  return foldRightIdentity(getLhs(), a.getRhs(), getType(), 1.0);
}

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferBroadcast(loc, adaptor.getLhs().getType(), adaptor.getRhs().getType(),
                        IntegerType::get(ctx, 1), types);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Type t = adaptor.getTrueValue().getType(), f = adaptor.getFalseValue().getType();
  SmallVector<Type, 1> values;
  if (failed(inferBroadcast(loc, t, f, Type(), values)))
    return failure();
  auto shape = broadcastShapes(shapeOf(adaptor.getCondition().getType()),
                               shapeOf(values[0]));
  if (!shape)
    return emitOptionalError(loc, "condition ",
                             str(shapeOf(adaptor.getCondition().getType())),
                             " does not broadcast with values ",
                             str(shapeOf(values[0])));
  types.push_back(tensorOf(*shape, elementOf(t)));
  return success();
}

LogicalResult CastOp::verify() {
  if (failed(verifyCompatibleShape(getInput().getType(), getType())))
    return emitOpError("changes the shape from ")
           << str(shapeOf(getInput().getType())) << " to " << str(shapeOf(getType()))
           << "; cast only converts the element type";
  return success();
}

/// The tables broadcast to the input with the head dim unbroadcast; the
/// head dim (the pairs) is static and even.
LogicalResult RotaryOp::verify() {
  Shape x = shapeOf(getInput().getType()), t = shapeOf(getCos().getType());
  if (x.size() < 2)
    return emitOpError("input must be [..., S, D], got ") << str(x);
  const int64_t D = x.back();
  if (D == kDynamic || D % 2 != 0)
    return emitOpError("head dim of ") << str(x) << " must be static and even (pairs rotate)";
  if (t.empty() || t.size() > x.size() || t.back() > D || t.back() % 2 != 0 || t.back() < 2)
    return emitOpError("tables ") << str(t) << " must end in an even rotary dim of at most the head dim "
                                  << D << " of the input " << str(x);
  if (getSin().getType() != getCos().getType())
    return emitOpError("sin table ") << getSin().getType() << " differs from the cos table "
                                     << getCos().getType();
  if (getElementTypeOrSelf(getCos().getType()) != getElementTypeOrSelf(getInput().getType()))
    return emitOpError("tables of ") << getElementTypeOrSelf(getCos().getType())
                                     << " rotate an input of "
                                     << getElementTypeOrSelf(getInput().getType());
  Shape rotated = x;
  rotated.back() = t.back();
  auto b = broadcastShapes(rotated, t);
  if (!b || *b != rotated)
    return emitOpError("tables ") << str(t) << " do not broadcast to the input " << str(x);
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  return getInput().getType() == getType() ? getInput() : Value();
}

namespace {
/// cast(matmul(a, b) : bf16) : f32 -> matmul(a, b) f32_result, when the
/// cast could not fuse into a consumer (no user is pointwise: a weight
/// gradient, the logits of the loss, a LayerNorm gradient's input). The
/// product is then stored once, in f32, instead of rounded to bf16 and
/// widened by a kernel of its own.
struct WidenProduct : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp cast, PatternRewriter &rewriter) const override {
    auto product = cast.getInput().getDefiningOp<MatmulOp>();
    if (!product || product.getF32Result() || product.getBias() || product.getAcc() ||
        !product->hasOneUse() ||
        !elementOf(product.getType()).isBF16() || !elementOf(cast.getType()).isF32())
      return failure();
    for (Operation *user : cast->getUsers())
      if (isa<ScalarOpInterface>(user))
        return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(cast, product.getLhs(), product.getRhs(),
                                          product.getTransposeLhs(),
                                          product.getTransposeRhs(), /*f32_result=*/true,
                                          /*bias=*/Value(), /*acc=*/Value());
    rewriter.eraseOp(product);
    return success();
  }
};
} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &patterns, MLIRContext *context) {
  patterns.add<WidenProduct>(context);
}

namespace {
/// add(matmul, b) -> matmul bias(b), when b is a row of the product's
/// columns (rank 1, its element type) and the add reads the product alone:
/// the bias becomes the GEMM's epilogue instead of a pointwise kernel. A
/// bf16 product widened for the add (add(cast(matmul), b), b in f32) becomes
/// an f32_result product with an f32 bias.
struct BiasIntoProduct : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (int side : {0, 1}) {
      Value x = add->getOperand(side), bias = add->getOperand(1 - side);
      auto product = x.getDefiningOp<MatmulOp>();
      CastOp widen;
      if (!product && (widen = x.getDefiningOp<CastOp>())) {
        product = widen.getInput().getDefiningOp<MatmulOp>();
        if (!product || product.getF32Result() || !widen->hasOneUse() ||
            !elementOf(product.getType()).isBF16() || !elementOf(widen.getType()).isF32())
          continue;
      }
      // (An accumulating product's acc is of its own type: not one widened.)
      if (!product || product.getBias() || !product->hasOneUse() ||
          (widen && product.getAcc()))
        continue;
      auto bt = cast<RankedTensorType>(bias.getType());
      auto xt = cast<RankedTensorType>(x.getType());
      if (bt.getRank() != 1 || add.getType() != xt || bt.getElementType() != xt.getElementType() ||
          bt.isDynamicDim(0) || xt.isDynamicDim(xt.getRank() - 1) ||
          bt.getDimSize(0) != xt.getDimSize(xt.getRank() - 1))
        continue;
      rewriter.replaceOpWithNewOp<MatmulOp>(add, product.getLhs(), product.getRhs(),
                                            product.getTransposeLhs(),
                                            product.getTransposeRhs(),
                                            /*f32_result=*/bool(widen), bias,
                                            product.getAcc());
      if (widen)
        rewriter.eraseOp(widen);
      rewriter.eraseOp(product);
      return success();
    }
    return failure();
  }
};
} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &patterns, MLIRContext *context) {
  patterns.add<BiasIntoProduct>(context);
}

LogicalResult MatmulOp::verify() {
  auto rt = getType();
  if (getAcc() && getAcc().getType() != rt)
    return emitOpError("acc must have the result's type ") << rt << ", got "
                                                           << getAcc().getType();
  if (!getBias())
    return success();
  auto bt = cast<RankedTensorType>(getBias().getType());
  if (bt.getRank() != 1 || bt.getElementType() != rt.getElementType() ||
      sizesConflict(bt.getDimSize(0), rt.getDimSize(rt.getRank() - 1)))
    return emitOpError("bias must be a row of the result's ")
           << rt.getDimSize(rt.getRank() - 1) << " columns of " << rt.getElementType()
           << ", got " << bt;
  return success();
}

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

//===----------------------------------------------------------------------===//
// Normalizations, losses, dropout
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  if (!normalizeAxis(getAxis(), getType().getRank()))
    return emitOpError("axis ") << int64_t(getAxis()) << " out of range for rank "
                                << getType().getRank();
  return success();
}

LogicalResult LogSoftmaxOp::verify() {
  if (!normalizeAxis(getAxis(), getType().getRank()))
    return emitOpError("axis ") << int64_t(getAxis()) << " out of range for rank "
                                << getType().getRank();
  return success();
}

/// A normalization over the last dimension: `params` (weight, bias) are
/// vectors of that dimension's size in the input's element type, epsilon is
/// positive; `what` names them in the diagnostics.
static LogicalResult verifyLastAxisNorm(std::optional<Location> loc, Type input,
                                        ValueRange params, FloatAttr epsilon,
                                        StringRef what) {
  Shape in = shapeOf(input);
  if (in.empty())
    return emitOptionalError(loc, "input must have rank >= 1");
  for (Value param : params) {
    Shape p = shapeOf(param.getType());
    if (p.size() != 1 || sizesConflict(p[0], in.back()))
      return emitOptionalError(loc, what, " must be [", in.back(),
                               "] like the normalized dimension, got ", str(p));
    if (elementOf(param.getType()) != elementOf(input))
      return emitOptionalError(loc, what, " must have the input's element type");
  }
  if (!epsilon || !(epsilon.getValueAsDouble() > 0.0))
    return emitOptionalError(loc, "epsilon must be positive");
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Type input = adaptor.getInput().getType();
  if (failed(verifyLastAxisNorm(loc, input, {adaptor.getWeight(), adaptor.getBias()},
                                adaptor.getEpsilonAttr(), "weight and bias")))
    return failure();
  types.push_back(input);
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Type input = adaptor.getInput().getType();
  if (failed(verifyLastAxisNorm(loc, input, {adaptor.getWeight()}, adaptor.getEpsilonAttr(),
                                "weight")))
    return failure();
  types.push_back(input);
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  Shape logits = shapeOf(adaptor.getLogits().getType());
  Shape labels = shapeOf(adaptor.getLabels().getType());
  if (logits.size() != 2)
    return emitOptionalError(loc, "logits must be [rows, classes], got ",
                             str(logits));
  if (labels.size() != 1)
    return emitOptionalError(loc, "labels must be [rows], got ", str(labels));
  if (sizesConflict(logits[0], labels[0]))
    return emitOptionalError(loc, "logits have ", logits[0], " rows but labels have ",
                             labels[0]);
  types.push_back(tensorOf({}, elementOf(adaptor.getLogits().getType())));
  return success();
}

LogicalResult DropoutOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  return success();
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  return getRatio().isZero() ? getInput() : Value();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// Checks the operands of attention and attention_grad; pushes the output type.
static LogicalResult inferAttention(std::optional<Location> loc, Value query,
                                    Value key, Value value, Value maskValue,
                                    Value cuSeqlens, FloatAttr scaleAttr,
                                    SmallVectorImpl<Type> &types) {
  Type qt = query.getType();
  Shape q = shapeOf(qt), k = shapeOf(key.getType()),
        v = shapeOf(value.getType());
  for (Value operand : {key, value})
    if (elementOf(operand.getType()) != elementOf(qt))
      return emitOptionalError(loc, "query, key and value must share an element type");
  bool varlen = cuSeqlens != nullptr;
  size_t rank = varlen ? 3 : 4;
  const char *layout = varlen ? "[tokens, heads, head_dim]" : "[batch, heads, seq, head_dim]";
  if (q.size() != rank || k.size() != rank || v.size() != rank)
    return emitOptionalError(loc, "query, key and value must be ", layout, ", got ",
                             str(q), ", ", str(k), ", ", str(v));
  if (sizesConflict(q.back(), k.back()))
    return emitOptionalError(loc, "query and key head sizes differ: ", q.back(),
                             " vs ", k.back());
  // The key/value sequence (or token) dimension is rank-2; heads precede it.
  size_t seq = rank - 3 + (varlen ? 0 : 1);
  if (sizesConflict(k[seq], v[seq]))
    return emitOptionalError(loc, "key and value lengths differ: ", k[seq], " vs ",
                             v[seq]);
  // The batch (padded; varlen token counts of query and key may differ).
  if (!varlen && (sizesConflict(q[0], k[0]) || sizesConflict(q[0], v[0])))
    return emitOptionalError(loc, "query, key and value differ in dimension 0");
  // Heads (dimension 1): key and value share theirs, H_kv, which divides
  // the query's H (grouped-query attention: query head h reads kv head
  // h / (H / H_kv)).
  if (sizesConflict(k[1], v[1]))
    return emitOptionalError(loc, "key and value head counts differ: ", k[1], " vs ", v[1]);
  if (q[1] != kDynamic && k[1] != kDynamic && (k[1] <= 0 || q[1] % k[1] != 0))
    return emitOptionalError(loc, "the key/value heads (", k[1],
                             ") must divide the query heads (", q[1], ")");
  if (varlen) {
    if (maskValue)
      return emitOptionalError(loc, "a mask cannot be combined with cu_seqlens: "
                                    "sequence boundaries already confine attention");
    if (shapeOf(cuSeqlens.getType()).size() != 1)
      return emitOptionalError(loc, "cu_seqlens must be a vector of offsets");
  }
  if (Value mask = maskValue) {
    Shape m = shapeOf(mask.getType());
    Shape scores = {q[0], q[1], q[2], k[2]};
    auto b = broadcastShapes(m, scores);
    if (m.size() > 4 || !b || *b != scores)
      return emitOptionalError(loc, "mask ", str(m), " does not broadcast to the "
                                    "scores ", str(scores));
    if (elementOf(mask.getType()) != elementOf(qt))
      return emitOptionalError(loc, "mask must have the query's element type");
  }
  if (auto scale = scaleAttr; scale && !(scale.getValueAsDouble() > 0.0))
    return emitOptionalError(loc, "scale must be positive");
  Shape out = q;
  out.back() = v.back();
  types.push_back(tensorOf(out, elementOf(qt)));
  return success();
}


/// The rotary tables of attention (`rotary %cos, %sin`): one type, the
/// query's element type, [B | 1, 1, S | 1, R] (varlen [T | 1, 1, R]) with R
/// even and at most the head dim; Q and K share the rows (Sq = Sk).
static LogicalResult checkAttentionRotary(std::optional<Location> loc, Value query, Value key,
                                          Value cos, Value sin, bool interleaved,
                                          bool varlen) {
  if (!cos && !sin) {
    if (interleaved)
      return emitOptionalError(loc, "interleaved needs the rotary tables");
    return success();
  }
  if (!cos || !sin)
    return emitOptionalError(loc, "rotary needs both tables, cos and sin");
  if (cos.getType() != sin.getType())
    return emitOptionalError(loc, "rotary sin table ", sin.getType(),
                             " differs from the cos table ", cos.getType());
  if (elementOf(cos.getType()) != elementOf(query.getType()))
    return emitOptionalError(loc, "rotary tables must have the query's element type");
  Shape q = shapeOf(query.getType()), k = shapeOf(key.getType()), t = shapeOf(cos.getType());
  const size_t rank = q.size();
  const int64_t R = t.empty() ? 0 : t.back(), D = q.back();
  if (t.size() != rank || R == kDynamic || R < 2 || R % 2 != 0 || (D != kDynamic && R > D))
    return emitOptionalError(loc, "rotary tables ", str(t), " must be ",
                             varlen ? "[T | 1, 1, R]" : "[B | 1, 1, S | 1, R]",
                             " with R even and at most the head dim ", D);
  auto fits = [](int64_t td, int64_t qd) { return td == 1 || !sizesConflict(td, qd); };
  const size_t seq = varlen ? 0 : 2;
  if (t[rank - 3 + (varlen ? 1 : 0)] != 1 || !fits(t[seq], q[seq]) ||
      (!varlen && !fits(t[0], q[0])))
    return emitOptionalError(loc, "rotary tables ", str(t),
                             " must broadcast over the heads to the query's rows ", str(q));
  if (sizesConflict(q[seq], k[seq]))
    return emitOptionalError(loc, "rotary attention needs as many queries as keys (the "
                                  "tables' rows are shared), got ",
                             q[seq], " and ", k[seq]);
  return success();
}

static LogicalResult checkAttentionDropout(std::optional<Location> loc, FloatAttr d,
                                           FloatAttr softcap, IntegerAttr window,
                                           bool causal) {
  // A sliding window narrows causal attention: query i sees keys i - W + 1 .. i.
  if (window && window.getInt() < 1)
    return emitOptionalError(loc, "window must be at least 1, got ", window.getInt());
  if (window && !causal)
    return emitOptionalError(loc, "a sliding window (window = ", window.getInt(),
                             ") needs causal attention");
  if (d && !(d.getValueAsDouble() >= 0.0 && d.getValueAsDouble() < 1.0))
    return emitOptionalError(loc, "dropout must be in [0, 1), got ", d.getValueAsDouble());
  // c * tanh(s / c): a cap of 0, below or not finite caps nothing mlc can compute.
  if (softcap && !(softcap.getValueAsDouble() > 0.0 &&
                   softcap.getValueAsDouble() < std::numeric_limits<double>::infinity()))
    return emitOptionalError(loc, "softcap must be positive and finite, got ",
                             softcap.getValueAsDouble());
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  if (failed(checkAttentionDropout(loc, adaptor.getDropoutAttr(), adaptor.getSoftcapAttr(),
                                   adaptor.getWindowAttr(), bool(adaptor.getCausal()))) ||
      failed(checkAttentionRotary(loc, adaptor.getQuery(), adaptor.getKey(), adaptor.getCos(),
                                  adaptor.getSin(), adaptor.getInterleaved(),
                                  bool(adaptor.getCuSeqlens()))))
    return failure();
  return inferAttention(loc, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
                        adaptor.getMask(), adaptor.getCuSeqlens(),
                        adaptor.getScaleAttr(), types);
}

//===----------------------------------------------------------------------===//
// PadOp and backward ops
//===----------------------------------------------------------------------===//

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Shape in = shapeOf(adaptor.getInput().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (low.size() != in.size() || high.size() != in.size())
    return emitOptionalError(loc, "low and high need one entry per dimension of ",
                             str(in));
  for (size_t i = 0; i < in.size(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      return emitOptionalError(loc, "padding must be non-negative");
    if (in[i] != kDynamic)
      in[i] += low[i] + high[i];
  }
  types.push_back(tensorOf(in, elementOf(adaptor.getInput().getType())));
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  if (!normalizeAxis(getAxis(), getType().getRank()))
    return emitOpError("axis ") << int64_t(getAxis()) << " out of range for rank "
                                << getType().getRank();
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  Type input = adaptor.getInput().getType();
  if (adaptor.getGrad().getType() != input)
    return emitOptionalError(loc, "grad and input types differ");
  if (adaptor.getResidual() && adaptor.getResidual().getType() != input)
    return emitOptionalError(loc, "the residual gradient (plus) and input types differ");
  Shape in = shapeOf(input), w = shapeOf(adaptor.getWeight().getType());
  if (in.empty() || w.size() != 1 || sizesConflict(w[0], in.back()))
    return emitOptionalError(loc, "weight must be [", in.empty() ? 0 : in.back(),
                             "] like the normalized dimension, got ", str(w));
  types.push_back(input);
  types.push_back(adaptor.getWeight().getType());
  types.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  Type input = adaptor.getInput().getType();
  if (adaptor.getGrad().getType() != input)
    return emitOptionalError(loc, "grad and input types differ");
  if (adaptor.getResidual() && adaptor.getResidual().getType() != input)
    return emitOptionalError(loc, "the residual gradient (plus) and input types differ");
  if (failed(verifyLastAxisNorm(loc, input, {adaptor.getWeight()}, adaptor.getEpsilonAttr(),
                                "weight")))
    return failure();
  types.push_back(input);
  types.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *ctx,
                                                   std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  if (!shapeOf(adaptor.getGrad().getType()).empty())
    return emitOptionalError(loc, "grad of the loss must be 0-d");
  SmallVector<Type, 1> loss;
  if (failed(CrossEntropyOp::inferReturnTypes(
          ctx, loc,
          CrossEntropyOp::Adaptor(ValueRange{adaptor.getLogits(), adaptor.getLabels()}),
          loss)))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  Shape g = shapeOf(getGrad().getType()), i = shapeOf(getIndices().getType()),
        t = shapeOf(getType());
  if (t.size() != 2)
    return emitOpError("result must be a [rows, dim] table, got ") << str(t);
  Shape expected = i;
  expected.push_back(t[1]);
  if (failed(verifyCompatibleShape(g, expected)))
    return emitOpError("grad ") << str(g) << " must be the indices' shape "
                                << "followed by the row size: " << str(expected);
  if (auto pad = getPaddingIdx(); pad && (*pad < 0 || (t[0] != kDynamic && *pad >= t[0])))
    return emitOpError("padding_idx ") << *pad << " is not a row of the " << t[0] << "-row table";
  if (getAcc() && getAcc().getType() != getType())
    return emitOpError("acc must have the result's type");
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  SmallVector<Type, 1> out;
  if (failed(checkAttentionDropout(loc, adaptor.getDropoutAttr(), adaptor.getSoftcapAttr(),
                                   adaptor.getWindowAttr(), bool(adaptor.getCausal()))) ||
      failed(checkAttentionRotary(loc, adaptor.getQuery(), adaptor.getKey(), adaptor.getCos(),
                                  adaptor.getSin(), adaptor.getInterleaved(),
                                  bool(adaptor.getCuSeqlens()))))
    return failure();
  if (failed(inferAttention(loc, adaptor.getQuery(), adaptor.getKey(),
                            adaptor.getValue(), adaptor.getMask(),
                            adaptor.getCuSeqlens(), adaptor.getScaleAttr(), out)))
    return failure();
  if (adaptor.getGrad().getType() != out[0])
    return emitOptionalError(loc, "grad must have the attention output's type ",
                             out[0]);
  types.push_back(adaptor.getQuery().getType());
  types.push_back(adaptor.getKey().getType());
  types.push_back(adaptor.getValue().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

void FusionOp::build(OpBuilder &b, OperationState &state, FusionKind kind,
                     TypeRange results, ValueRange inputs) {
  state.addAttribute(getKindAttrName(state.name), FusionKindAttr::get(b.getContext(), kind));
  state.addOperands(inputs);
  state.addTypes(results);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value v : inputs)
    block->addArgument(v.getType(), v.getLoc());
}

/// The `optimizer` kind: scalars, then N parameters, gradients, first and
/// second moments; 3N results; a region over one element.
static LogicalResult verifyOptimizerFusion(FusionOp op, YieldOp yield) {
  auto inputs = op.getInputs();
  auto scalars = cast<RankedTensorType>(inputs[0].getType());
  if (inputs.empty() || scalars.getRank() != 1 || !scalars.getElementType().isF64() ||
      scalars.getDimSize(0) < kAdamWScalarCount)
    return op.emitOpError("an optimizer fusion's first input must be its ")
           << int(kAdamWScalarCount) << " f64 scalars";
  size_t rest = inputs.size() - 1;
  if (rest == 0 || rest % 4)
    return op.emitOpError("an optimizer fusion takes 4 tensors per parameter (parameter, "
                          "gradient, two moments), got ")
           << rest;
  size_t n = rest / 4;
  Type el = cast<RankedTensorType>(inputs[1].getType()).getElementType();
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < 4; ++k)
      if (inputs[1 + k * n + i].getType() != inputs[1 + i].getType())
        return op.emitOpError("parameter #")
               << i << ": its gradient and moments must have the parameter's type";
  if (op.getNumResults() != 3 * n)
    return op.emitOpError("an optimizer fusion of ")
           << n << " parameters has " << 3 * n << " results, not " << op.getNumResults();
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < 3; ++k)
      if (op.getResult(k * n + i).getType() != inputs[1 + i].getType())
        return op.emitOpError("result #") << k * n + i << " must have its parameter's type";
  Block &block = op.getBody().front();
  auto scalar = RankedTensorType::get({}, el);
  // p, g, m, v, decay, then the scalars before kDecay.
  unsigned args = 5 + kDecay;
  if (block.getNumArguments() != args ||
      llvm::any_of(block.getArgumentTypes(), [&](Type t) { return t != scalar; }))
    return op.emitOpError("an optimizer region takes ") << args << " arguments of type " << scalar;
  if (yield.getValues().size() != 3 ||
      llvm::any_of(yield.getValues().getTypes(), [&](Type t) { return t != scalar; }))
    return op.emitOpError("an optimizer region yields the new parameter and moments (3 x ")
           << scalar << ")";
  return success();
}

/// The `norm` kind: the L2 norm over all elements of its inputs.
static LogicalResult verifyNormFusion(FusionOp op, YieldOp yield) {
  if (op.getInputs().empty())
    return op.emitOpError("a norm fusion needs inputs");
  Type el = cast<RankedTensorType>(op.getInputs()[0].getType()).getElementType();
  for (Value v : op.getInputs())
    if (cast<RankedTensorType>(v.getType()).getElementType() != el)
      return op.emitOpError("a norm fusion's inputs must share one element type");
  auto f64 = RankedTensorType::get({}, Float64Type::get(op.getContext()));
  if (op.getNumResults() != 1 || op.getResult(0).getType() != f64)
    return op.emitOpError("a norm fusion has one result of type ") << f64;
  Block &block = op.getBody().front();
  if (block.getNumArguments() != 1 ||
      block.getArgument(0).getType() != RankedTensorType::get({}, el))
    return op.emitOpError("a norm region takes one element (a rank-0 tensor)");
  if (yield.getValues().size() != 1 || yield.getValues()[0].getType() != f64)
    return op.emitOpError("a norm region yields the element's square as ") << f64;
  return success();
}

/// The `params` kind: one map of each parameter, element by element.
static LogicalResult verifyParamsFusion(FusionOp op, YieldOp yield) {
  if (op.getInputs().empty() || op.getNumResults() != op.getInputs().size())
    return op.emitOpError("a params fusion maps each of its inputs to one result");
  Type el = cast<RankedTensorType>(op.getInputs()[0].getType()).getElementType();
  Type out = cast<RankedTensorType>(op.getResult(0).getType()).getElementType();
  for (auto [in, r] : llvm::zip(op.getInputs(), op.getResults())) {
    auto it = cast<RankedTensorType>(in.getType()), rt = cast<RankedTensorType>(r.getType());
    if (it.getElementType() != el || rt.getElementType() != out)
      return op.emitOpError("a params fusion's inputs share one element type, its results another");
    if (it.getShape() != rt.getShape())
      return op.emitOpError("a params fusion's result has its input's shape");
    auto arg = dyn_cast<BlockArgument>(in);
    auto fn = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()) : nullptr;
    if (!fn || !fn.getArgAttr(arg.getArgNumber(), "mlc.param"))
      return op.emitOpError("a params fusion reads function arguments marked mlc.param");
  }
  Block &block = op.getBody().front();
  if (block.getNumArguments() != 1 ||
      block.getArgument(0).getType() != RankedTensorType::get({}, el))
    return op.emitOpError("a params region takes one element (a rank-0 tensor)");
  if (yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != RankedTensorType::get({}, out))
    return op.emitOpError("a params region yields one element of its results' type");
  return success();
}

LogicalResult FusionOp::verify() {
  Block &block = getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (getKind() == FusionKind::optimizer)
    return verifyOptimizerFusion(*this, yield);
  if (getKind() == FusionKind::norm)
    return verifyNormFusion(*this, yield);
  if (getKind() == FusionKind::params)
    return verifyParamsFusion(*this, yield);
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but its block takes "
                               << block.getNumArguments() << " arguments";
  for (auto [arg, in] : llvm::zip(block.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("block argument types must match the input types");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ") << yield.getValues().size()
                                  << " values whose types differ from its results";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/mlc/MlcOps.cpp.inc"
