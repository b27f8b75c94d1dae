//===- MlcDialect.cpp - the mlc graph dialect ------------------------------===//
//
// The dialect, and the type inference, verifiers, folds and canonicalization
// patterns of its sources, matmul, embedding, pointwise ops and casts, and of
// the fusion op. Data movement and reductions are in MlcShapeOps.cpp;
// normalizations, losses, attention and the backward ops in MlcNnOps.cpp.
// Inference functions double as verifiers: InferTypeOpInterface checks that
// an op's result types equal the inferred ones, and every rule a model can
// break is reported with the sizes involved.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcOpHelpers.h"
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
#include "llvm/ADT/TypeSwitch.h"

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

using namespace mlc::ophelpers;

namespace {

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
