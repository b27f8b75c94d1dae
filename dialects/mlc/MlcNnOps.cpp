//===- MlcNnOps.cpp - normalizations, losses, attention and their backward ===//
//
// Type inference and verifiers of the ops a layer is built of beyond
// pointwise and data movement: softmax, the norms, cross-entropy, dropout,
// attention (with its rotary and dropout forms), padding, and the backward
// ops autodiff emits for them. As in MlcDialect.cpp, inference doubles as
// verification and every rule a model can break is reported with the sizes
// involved.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcOpHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"

#include <limits>

using namespace mlir;
using namespace mlc;
using namespace mlc::ophelpers;

//===----------------------------------------------------------------------===//
// Normalizations, losses, dropout
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  if (!normalizeAxis(getAxis(), getType().getRank()))
    return emitOpError("axis ") << int64_t(getAxis()) << " out of range for rank "
                                << getType().getRank();
  return success();
}

LogicalResult CumSumOp::verify() {
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

/// A dropout block's rank (one f64: a tensor<1xf64>, or a kernel body's
/// rank-0 load of it) and count.
static LogicalResult checkBlockRank(std::optional<Location> loc, Value rank,
                                    IntegerAttr blocks) {
  auto rt = cast<RankedTensorType>(rank.getType());
  if (rt.getNumElements() != 1 || rt.getRank() > 1)
    return emitOptionalError(loc, "a dropout block's rank must be a tensor<1xf64>, got ",
                             rank.getType());
  if (blocks.getInt() < 1)
    return emitOptionalError(loc, "a dropout block's count must be at least 1, got ",
                             blocks.getInt());
  return success();
}

LogicalResult DropoutOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  if (!getRank() && !getBlocks() && !getSpan())
    return success();
  if (!getRank() || !getBlocks() || !getSpan())
    return emitOpError("a dropout block needs its rank, count and span together "
                       "(`block %rank of N span S`)");
  if (failed(checkBlockRank(getLoc(), getRank(), getBlocksAttr())))
    return failure();
  // The span is the product of the input's dims from the split one on (a
  // kernel body's rank-0 copy keeps it without the shape).
  auto shape = cast<RankedTensorType>(getInput().getType()).getShape();
  int64_t span = *getSpan(), suffix = 1;
  if (shape.empty()) {
    if (span < 1)
      return emitOpError("a dropout block's span must be at least 1, got ") << span;
    return success();
  }
  for (int64_t d : llvm::reverse(shape)) {
    if (ShapedType::isDynamic(d))
      break;
    suffix *= d;
    if (suffix == span)
      return success();
  }
  return emitOpError("a dropout block's span ")
         << span << " is not the product of the input's static dims from one dim on";
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

/// Attention's dropout block: its counter space is the probabilities'
/// [B, H, Sq, Sk] (varlen: [H, C, C], C fixed at lowering); the keys' dim
/// cannot be split (the kernels draw a row's counters from its first), and
/// the dims from the split one on must be static.
template <typename Adaptor>
static LogicalResult checkAttentionBlock(std::optional<Location> loc, Adaptor a) {
  Value rank = a.getRank();
  IntegerAttr blocks = a.getBlocksAttr(), axis = a.getAxisAttr();
  if (!rank && !blocks && !axis)
    return success();
  if (!rank || !blocks || !axis)
    return emitOptionalError(loc, "a dropout block needs its rank, count and axis together "
                                  "(`block %rank of N along A`)");
  if (failed(checkBlockRank(loc, rank, blocks)))
    return failure();
  auto q = cast<RankedTensorType>(a.getQuery().getType()).getShape();
  auto k = cast<RankedTensorType>(a.getKey().getType()).getShape();
  SmallVector<int64_t> space;
  if (a.getCuSeqlens())
    space = {q.size() > 1 ? q[1] : 0, 0, 0};
  else if (q.size() == 4 && k.size() == 4)
    space = {q[0], q[1], q[2], k[2]};
  else
    return success(); // inferAttention reports the shapes
  int64_t ax = axis.getInt();
  if (ax < 0 || ax + 1 >= int64_t(space.size()))
    return emitOptionalError(loc, "a dropout block's axis ", ax,
                             " is not a dim of the probabilities but the keys' (0 .. ",
                             space.size() - 2, ")");
  for (int64_t d : ArrayRef<int64_t>(space).drop_front(ax))
    if (ShapedType::isDynamic(d))
      return emitOptionalError(loc, "a dropout block along ", ax,
                               " needs static dims from it on");
  return success();
}

/// `t` with bf16 elements (an attention's `bf16_result`).
static Type bf16Like(Type t) {
  auto r = cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), BFloat16Type::get(r.getContext()));
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  if (failed(checkAttentionDropout(loc, adaptor.getDropoutAttr(), adaptor.getSoftcapAttr(),
                                   adaptor.getWindowAttr(), bool(adaptor.getCausal()))) ||
      failed(checkAttentionBlock(loc, adaptor)) ||
      failed(checkAttentionRotary(loc, adaptor.getQuery(), adaptor.getKey(), adaptor.getCos(),
                                  adaptor.getSin(), adaptor.getInterleaved(),
                                  bool(adaptor.getCuSeqlens()))))
    return failure();
  if (failed(inferAttention(loc, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
                            adaptor.getMask(), adaptor.getCuSeqlens(), adaptor.getScaleAttr(),
                            types)))
    return failure();
  if (adaptor.getBf16Result())
    types[0] = bf16Like(types[0]);
  return success();
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
      failed(checkAttentionBlock(loc, adaptor)) ||
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
  for (Value v : {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()})
    types.push_back(adaptor.getBf16Result() ? bf16Like(v.getType()) : v.getType());
  return success();
}
