//===- OnnxNnOps.cpp - ONNX neural-network operators
//------------------------===//
//
// Matmuls, activations, softmax, reductions and running sums (CumSum),
// normalizations, dropout and losses: the operators that compute on the
// model's activations, emitted as mlc graph ops (see OnnxNode.h).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxNode.h"

#include <cmath>

using namespace mlir;

namespace mlc::onnximport {
namespace {

/// MatMul and Gemm (transA, transB, alpha, beta).
llvm::Error matmul(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(2))
    return err;
  if (auto err = nd.floatOperands(2))
    return err;
  Shape l = nd.shape(0), r = nd.shape(1);
  bool tA = op == "Gemm" && nd.intAttr("transA", 0), tB = op == "Gemm" && nd.intAttr("transB", 0);
  if (op == "Gemm" && (l.size() != 2 || r.size() != 2))
    return nd.error("Gemm takes matrices; got " + shapeText(l) + " and " + shapeText(r));
  if (l.size() < 2 || r.size() < 2)
    return nd.error("multiplies " + shapeText(l) + " by " + shapeText(r) +
                    "; mlc's matmul needs both operands of rank >= 2");
  int64_t kl = tA ? l[l.size() - 2] : l.back(), kr = tB ? r.back() : r[r.size() - 2];
  if (kl != kr)
    return nd.error("multiplies " + shapeText(l) + " by " + shapeText(r) +
                    ": the inner dims differ");
  if (!broadcastShapes(Shape(l.begin(), l.end() - 2), Shape(r.begin(), r.end() - 2)))
    return nd.error("batch dims of " + shapeText(l) + " and " + shapeText(r) + " do not broadcast");
  Value y = nd.b.create<MatmulOp>(nd.loc, nd.v(0), nd.v(1), tA, tB);
  if (op == "Gemm") {
    double alpha = nd.floatAttr("alpha", 1.0), beta = nd.floatAttr("beta", 1.0);
    if (alpha != 1.0)
      y = nd.b.create<MulOp>(nd.loc, y, nd.im.scalar(alpha));
    if (nd.in.size() > 2 && nd.in[2]) {
      if (!broadcastShapes(shapeOf(y), nd.shape(2)))
        return nd.error("C of shape " + shapeText(nd.shape(2)) + " does not broadcast to " +
                        shapeText(shapeOf(y)));
      Value c = nd.v(2);
      if (beta != 1.0)
        c = nd.b.create<MulOp>(nd.loc, c, nd.im.scalar(beta));
      y = nd.b.create<AddOp>(nd.loc, y, c);
    }
  }
  return nd.result(y);
}

llvm::Error relu(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  if (auto err = nd.floatOperands(1))
    return err;
  Value x = nd.v(0), zero = nd.im.scalar(0.0);
  Value positive = nd.b.create<CompareOp>(nd.loc, ComparePredicate::gt, x, zero);
  return nd.result(nd.b.create<SelectOp>(nd.loc, positive, x, zero));
}

/// Softmax and LogSoftmax.
llvm::Error softmax(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(1))
    return err;
  if (auto err = nd.floatOperands(1))
    return err;
  int64_t rank = nd.shape(0).size();
  if (rank == 0)
    return nd.error("needs a tensor of rank >= 1");
  auto axis = nd.axis(nd.intAttr("axis", nd.opset >= 13 ? -1 : 1), rank);
  if (!axis)
    return axis.takeError();
  if (nd.opset < 13 && *axis != rank - 1)
    return nd.error("before nd.opset 13 softmax flattens from its axis; only the last "
                    "axis is supported");
  if (op == "Softmax")
    return nd.result(nd.b.create<SoftmaxOp>(nd.loc, nd.v(0), nd.b.getI64IntegerAttr(*axis)));
  return nd.result(nd.b.create<LogSoftmaxOp>(nd.loc, nd.v(0), nd.b.getI64IntegerAttr(*axis)));
}

/// ReduceMean, ReduceSum, ReduceMax, ReduceMin (axes an input from opset 13
/// for ReduceSum, 18 for the others).
llvm::Error reduce(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(1))
    return err;
  int64_t rank = nd.shape(0).size();
  // ReduceSum takes axes as an input from nd.opset 13, the others from 18.
  size_t axesInput = (op == "ReduceSum" ? nd.opset >= 13 : nd.opset >= 18) ? 1 : size_t(-1);
  auto axesOr = nd.intsInputOrAttr(axesInput, "axes");
  if (!axesOr)
    return axesOr.takeError();
  Shape axes;
  if (!*axesOr || (*axesOr)->empty()) {
    if (nd.intAttr("noop_with_empty_axes", 0))
      return nd.result(nd.v(0));
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  } else {
    for (int64_t a : **axesOr) {
      auto ax = nd.axis(a, rank);
      if (!ax)
        return ax.takeError();
      axes.push_back(*ax);
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  }
  bool keep = nd.intAttr("keepdims", 1);
  auto axesAttr = nd.b.getDenseI64ArrayAttr(axes);
  UnitAttr keepAttr = keep ? nd.b.getUnitAttr() : UnitAttr();
  if (op == "ReduceMean") {
    if (auto err = nd.floatOperands(1))
      return err;
    return nd.result(nd.b.create<ReduceMeanOp>(nd.loc, nd.v(0), axesAttr, keepAttr));
  }
  if (op == "ReduceSum")
    return nd.result(nd.b.create<ReduceSumOp>(nd.loc, nd.v(0), axesAttr, keepAttr));
  if (op == "ReduceMin") { // min(x) = -max(-x): mlc has no reduce_min
    if (nd.kind(0) == Kind::Bool)
      return nd.error("reduces booleans, which is not supported");
    Value neg = nd.b.create<NegOp>(nd.loc, nd.v(0));
    Value max = nd.b.create<ReduceMaxOp>(nd.loc, neg, axesAttr, keepAttr);
    return nd.result(nd.b.create<NegOp>(nd.loc, max));
  }
  return nd.result(nd.b.create<ReduceMaxOp>(nd.loc, nd.v(0), axesAttr, keepAttr));
}

/// CumSum of a run-time value (position ids from attention_mask): the
/// graph's running sum, in the input's type (integers exactly).
llvm::Error runtimeCumSum(Node &nd, int64_t axis, bool exclusive, bool reverse) {
  if (nd.kind(0) == Kind::Bool)
    return nd.error("sums booleans; cast them first");
  return nd.result(nd.b.create<CumSumOp>(nd.loc, nd.v(0), nd.b.getI64IntegerAttr(axis),
                                         exclusive ? nd.b.getUnitAttr() : UnitAttr(),
                                         reverse ? nd.b.getUnitAttr() : UnitAttr()));
}

/// CumSum along a constant axis (exclusive, reverse).
llvm::Error cumSum(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  if (!nd.isConst(1) || nd.c(1).numel() != 1 || nd.c(1).kind == Kind::Float)
    return nd.error("axis must be a constant integer");
  Shape s = nd.shape(0);
  auto axis = nd.axis(nd.c(1).i[0], s.size());
  if (!axis)
    return axis.takeError();
  bool exclusive = nd.intAttr("exclusive", 0), reverse = nd.intAttr("reverse", 0);
  if (!nd.isConst(0))
    return runtimeCumSum(nd, *axis, exclusive, reverse);
  Const r = nd.c(0);
  Shape st = stridesOf(s);
  int64_t n = s[*axis], stride = st[*axis];
  for (int64_t base = 0; base < r.numel(); ++base) {
    if ((base / stride) % n != 0)
      continue; // one pass per line along the axis, from its first element
    double acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = base + (reverse ? n - 1 - j : j) * stride;
      double v = r.at(k);
      if (exclusive) {
        r.set(k, acc);
        acc += v;
      } else {
        acc += v;
        r.set(k, acc);
      }
    }
  }
  return nd.result(std::move(r));
}

/// A normalization's epsilon (positive, finite) after checking that it
/// normalizes over the last axis of `s`, the only one mlc normalizes over.
llvm::Expected<double> lastAxisEpsilon(Node &nd, const Shape &s) {
  double eps = floatDecimal(nd.floatAttr("epsilon", 1e-5));
  if (!(eps > 0) || !std::isfinite(eps))
    return nd.error("epsilon " + std::to_string(eps) + " must be positive");
  auto axis = nd.axis(nd.intAttr("axis", -1), s.size());
  if (!axis)
    return axis.takeError();
  if (*axis != int64_t(s.size()) - 1)
    return nd.error("normalizes from axis " + std::to_string(*axis) +
                    "; mlc normalizes over the last axis only");
  return eps;
}

llvm::Error layerNorm(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  if (auto err = nd.floatOperands(nd.in.size() > 2 && nd.in[2] ? 3 : 2))
    return err;
  Shape s = nd.shape(0);
  if (s.empty())
    return nd.error("normalizes a scalar");
  auto eps = lastAxisEpsilon(nd, s);
  if (!eps)
    return eps.takeError();
  if (nd.outputUsed(1) || nd.outputUsed(2))
    return nd.error("its mean and inverse-deviation outputs are not supported");
  Shape w = {s.back()};
  if (nd.shape(1) != w || (nd.in.size() > 2 && nd.in[2] && nd.shape(2) != w))
    return nd.error("scale and bias must be of shape " + shapeText(w));
  Value bias;
  if (nd.in.size() > 2 && nd.in[2]) {
    bias = nd.v(2);
  } else {
    Const zero;
    zero.shape = w;
    zero.f.assign(s.back(), 0.0);
    bias = nd.im.materialize(zero);
  }
  return nd.result(
      nd.b.create<LayerNormOp>(nd.loc, nd.v(0), nd.v(1), bias, nd.b.getF64FloatAttr(*eps)));
}

llvm::Error dropout(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  if (nd.outputUsed(1))
    return nd.error("its mask output is not supported");
  double ratio = nd.opset >= 12 ? 0.5 : nd.floatAttr("ratio", 0.5);
  if (nd.opset >= 12 && nd.in.size() > 1 && nd.in[1]) {
    if (!nd.in[1]->constant || nd.in[1]->constant->numel() != 1)
      return nd.error("ratio must be a constant scalar");
    ratio = nd.in[1]->constant->at(0);
  }
  bool training = false;
  if (nd.in.size() > 2 && nd.in[2]) {
    if (!nd.in[2]->constant || nd.in[2]->constant->numel() != 1)
      return nd.error("training_mode must be a constant scalar");
    training = nd.in[2]->constant->at(0) != 0;
  }
  if (!(ratio >= 0 && ratio < 1))
    return nd.error("ratio " + std::to_string(ratio) + " is not in [0, 1)");
  if (!training || ratio == 0) {
    nd.out.push_back(*nd.in[0]);
    return llvm::Error::success();
  }
  if (auto err = nd.floatOperands(1))
    return err;
  return nd.result(nd.b.create<DropoutOp>(nd.loc, nd.v(0),
                                          nd.b.getF64FloatAttr(floatDecimal(ratio)),
                                          nd.b.getI64IntegerAttr(nd.im.nextSeed++)));
}

/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (of a LogSoftmax).
llvm::Error crossEntropy(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(2))
    return err;
  if (nd.in.size() > 2 && nd.in[2])
    return nd.error("class weights are not supported");
  if (nd.outputUsed(1))
    return nd.error("its log-probability output is not supported");
  const onnx::AttributeProto *red = nd.attr("reduction", onnx::AttributeProto::STRING);
  std::string reduction = red ? red->s() : "mean";
  if (reduction != "mean")
    return nd.error("reduction '" + reduction + "' is not supported (mean only)");
  Value scores = nd.v(0);
  if (op == "NegativeLogLikelihoodLoss") {
    // NLL of a LogSoftmax is the cross-entropy of its input.
    auto ls = scores.getDefiningOp<LogSoftmaxOp>();
    if (!ls || ls.getAxis() != 1)
      return nd.error("mlc imports NegativeLogLikelihoodLoss only of a "
                      "LogSoftmax over axis 1 (cross-entropy)");
    scores = ls.getInput();
  }
  Shape s = shapeOf(scores), l = nd.shape(1);
  if (s.size() < 2 || l.size() != s.size() - 1 || l[0] != s[0] ||
      !std::equal(l.begin() + 1, l.end(), s.begin() + 2))
    return nd.error("scores " + shapeText(s) + " and labels " + shapeText(l) +
                    " do not match ([N, C, ...] and [N, ...])");
  if (nd.kind(1) != Kind::Int)
    return nd.error("labels must be integers");
  if (!isa<FloatType>(cast<RankedTensorType>(scores.getType()).getElementType()))
    return nd.error("scores must be floating point");
  int64_t classes = s[1];
  if (s.size() > 2) { // [N, C, d...] -> [N * d..., C]
    Shape perm = {0};
    for (size_t d = 2; d < s.size(); ++d)
      perm.push_back(d);
    perm.push_back(1);
    scores = nd.b.create<TransposeOp>(nd.loc, scores, nd.b.getDenseI64ArrayAttr(perm));
    scores = nd.im.reshape(scores, {product(s) / classes, classes});
  }
  Value labels = nd.im.reshape(nd.v(1), {product(l)});
  int64_t ignore = nd.intAttr("ignore_index", std::numeric_limits<int64_t>::min());
  return nd.result(
      nd.b.create<CrossEntropyOp>(nd.loc, scores, labels, nd.b.getI64IntegerAttr(ignore)));
}


/// Opset 20's Gelu: the graph op, with its approximation.
llvm::Error gelu(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  if (auto err = nd.floatOperands(1))
    return err;
  std::string approximate = nd.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return nd.error("approximate '" + approximate + "' is not one of none, tanh");
  auto mode = approximate == "tanh" ? GeluApproximation::tanh : GeluApproximation::none;
  return nd.result(nd.b.create<GeluOp>(nd.loc, nd.v(0), mode));
}

/// Opset 23's RMSNormalization, `x * rsqrt(mean(x^2) + epsilon) * scale`
/// over the last axis, as mlc.rms_norm (stash_type is read and ignored like
/// LayerNormalization's: the statistic is computed in double).
llvm::Error rmsNorm(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  if (auto err = nd.floatOperands(2))
    return err;
  Shape s = nd.shape(0);
  if (s.empty())
    return nd.error("normalizes a scalar");
  auto eps = lastAxisEpsilon(nd, s);
  if (!eps)
    return eps.takeError();
  if (nd.shape(1) != Shape{s.back()})
    return nd.error("scale must be of shape " + shapeText({s.back()}));
  return nd.result(nd.b.create<RmsNormOp>(nd.loc, nd.v(0), nd.v(1), nd.b.getF64FloatAttr(*eps)));
}

/// [B, S, H * D] as [B, H, S, D], the layout mlc.attention takes.
Value splitHeads(Node &nd, Value x, int64_t heads) {
  Shape s = shapeOf(x);
  Value r = nd.im.reshape(x, {s[0], s[1], heads, s[2] / heads});
  return nd.b.create<TransposeOp>(nd.loc, r, nd.b.getDenseI64ArrayAttr({0, 2, 1, 3}));
}

/// An Attention mask as mlc.attention's additive float mask of rank 4:
/// a boolean mask (true attends) becomes 0 or the lowest float (not -inf,
/// so a row with every key masked is uniform rather than NaN).
llvm::Expected<Value> attentionMask(Node &nd, const Shape &scores) {
  Shape m = nd.shape(3);
  auto b = broadcastShapes(m, scores);
  if (m.size() > 4 || !b || *b != scores)
    return nd.error("attn_mask " + shapeText(m) + " does not broadcast to the scores " +
                    shapeText(scores));
  Value mask = nd.v(3);
  if (nd.kind(3) == Kind::Int)
    return nd.error("attn_mask must be boolean or floating point");
  if (nd.kind(3) == Kind::Bool)
    mask = nd.b.create<SelectOp>(nd.loc, mask, nd.im.scalar(0.0),
                                 nd.im.scalar(nd.im.options.dtype == "f64"
                                                  ? std::numeric_limits<double>::lowest()
                                                  : double(std::numeric_limits<float>::lowest())));
  while (m.size() < 4)
    m.insert(m.begin(), 1);
  return nd.im.reshape(mask, m);
}

/// Opset 23's Attention: mlc.attention, for inputs of rank 4 [B, H, S, D] or
/// rank 3 [B, S, H * D] (with q_num_heads / kv_num_heads), an optional
/// boolean or additive mask, is_causal and scale. Grouped-query heads (K/V
/// with kv heads that divide the query heads) stay at their kv heads: query
/// head h reads kv head h / (H / H_kv) in mlc.attention, nothing repeats
/// K/V. Refused: a KV cache (past_key / past_value and the present
/// outputs), softcap and the qk_matmul_output output.
llvm::Error attention(Node &nd) {
  if (auto err = nd.need(3))
    return err;
  if (auto err = nd.floatOperands(3))
    return err;
  if (nd.has(4) || nd.has(5) || nd.outputUsed(1) || nd.outputUsed(2))
    return nd.error("a KV cache (past_key, past_value, present_key, present_value) is not "
                    "supported; mlc trains on whole sequences");
  if (nd.outputUsed(3))
    return nd.error("its qk_matmul_output output is not supported");
  if (nd.floatAttr("softcap", 0.0) != 0.0)
    return nd.error("softcap is not supported");
  Shape q = nd.shape(0), k = nd.shape(1), v = nd.shape(2);
  size_t rank = q.size();
  if ((rank != 3 && rank != 4) || k.size() != rank || v.size() != rank)
    return nd.error("takes Q, K, V of rank 3 or 4; got " + shapeText(q) + ", " + shapeText(k) +
                    ", " + shapeText(v));
  Value qv = nd.v(0), kv = nd.v(1), vv = nd.v(2);
  int64_t heads = 0;
  if (rank == 3) {
    heads = nd.intAttr("q_num_heads", 0);
    int64_t kvHeads = nd.intAttr("kv_num_heads", 0);
    if (heads < 1 || kvHeads < 1 || q[2] % heads || k[2] % kvHeads || v[2] % kvHeads)
      return nd.error("rank-3 inputs need q_num_heads and kv_num_heads that divide their "
                      "hidden sizes");
    if (heads % kvHeads)
      return nd.error("grouped-query attention needs kv_num_heads " + std::to_string(kvHeads) +
                      " to divide q_num_heads " + std::to_string(heads));
    qv = splitHeads(nd, qv, heads);
    kv = splitHeads(nd, kv, kvHeads);
    vv = splitHeads(nd, vv, kvHeads);
  } else if (k[1] < 1 || k[1] != v[1] || q[1] % k[1]) {
    return nd.error("grouped-query attention needs K and V of the same heads, which divide "
                    "Q's; got " + shapeText(q) + ", " + shapeText(k) + ", " + shapeText(v));
  }
  Shape qs = shapeOf(qv), ks = shapeOf(kv), vs = shapeOf(vv);
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[3] != qs[3] || vs[2] != ks[2] || vs[1] != ks[1])
    return nd.error("Q, K, V of shapes " + shapeText(q) + ", " + shapeText(k) + ", " +
                    shapeText(v) + " do not fit together");
  bool causal = nd.intAttr("is_causal", 0);
  if (causal && qs[2] != ks[2])
    return nd.error("is_causal with query and key lengths that differ is not supported");
  Value mask;
  if (nd.has(3)) {
    auto m = attentionMask(nd, {qs[0], qs[1], qs[2], ks[2]});
    if (!m)
      return m.takeError();
    mask = *m;
  }
  FloatAttr scale;
  if (const auto *a = nd.attr("scale", onnx::AttributeProto::FLOAT)) {
    // softmax(scale * Q K^T): a scale <= 0 (or NaN) is no attention mlc's
    // op can hold, which would abort in the op's builder.
    if (!(a->f() > 0.0f))
      return nd.error("scale must be positive; got " + std::to_string(a->f()));
    scale = nd.b.getF64FloatAttr(floatDecimal(a->f()));
  }
  Value y = nd.b.create<AttentionOp>(nd.loc, qv, kv, vv, mask, Value(),
                                     causal ? nd.b.getUnitAttr() : UnitAttr(), scale,
                                     nd.b.getF64FloatAttr(0.0), nd.b.getI64IntegerAttr(0));
  if (rank == 3) {
    y = nd.b.create<TransposeOp>(nd.loc, y, nd.b.getDenseI64ArrayAttr({0, 2, 1, 3}));
    y = nd.im.reshape(y, {qs[0], qs[2], qs[1] * vs[3]});
  }
  return nd.result(y);
}

constexpr int kAll = kMaxOpset;

const OpSchema kSchemas[] = {
    {"MatMul", kMinOpset, kAll, matmul},
    {"Gemm", kMinOpset, kAll, matmul},
    {"Relu", kMinOpset, kAll, relu},
    {"Softmax", kMinOpset, kAll, softmax},
    {"LogSoftmax", kMinOpset, kAll, softmax},
    {"ReduceMean", kMinOpset, kAll, reduce},
    {"ReduceSum", kMinOpset, kAll, reduce},
    {"ReduceMax", kMinOpset, kAll, reduce},
    {"ReduceMin", kMinOpset, kAll, reduce},
    {"CumSum", kMinOpset, kAll, cumSum},
    {"LayerNormalization", 17, kAll, layerNorm},
    {"Gelu", 20, kAll, gelu},
    {"RMSNormalization", 23, kAll, rmsNorm},
    {"Attention", 23, kAll, attention},
    {"Dropout", kMinOpset, kAll, dropout},
    {"SoftmaxCrossEntropyLoss", kMinOpset, kAll, crossEntropy},
    {"NegativeLogLikelihoodLoss", kMinOpset, kAll, crossEntropy},
};

} // namespace

llvm::ArrayRef<OpSchema> nnOpSchemas() { return kSchemas; }

} // namespace mlc::onnximport
