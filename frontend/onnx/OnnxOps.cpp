//===- OnnxOps.cpp - ONNX elementwise, logic and constant operators
//---------===//
//
// Elementwise arithmetic, comparisons and logic, casts, and the operators
// that compute or rearrange shapes and masks (Shape, Constant, Range,
// Reshape, Slice, Gather, Concat, ...). Each handler evaluates its node when
// every input is a constant (the exporter's shape arithmetic) and otherwise
// emits mlc ops; see OnnxNode.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxNode.h"

#include <cmath>
#include <type_traits>

using namespace mlir;

namespace mlc::onnximport {
namespace {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// One binary op on two numbers. Integers wrap (two's complement) and
/// divide toward zero (the caller rules out x / 0).
template <typename T> T binaryOp(const std::string &op, T x, T y) {
  constexpr bool integral = std::is_integral_v<T>;
  auto wrap = [](uint64_t v) { return T(int64_t(v)); };
  if (op == "Add")
    return integral ? wrap(uint64_t(x) + uint64_t(y)) : T(x + y);
  if (op == "Sub")
    return integral ? wrap(uint64_t(x) - uint64_t(y)) : T(x - y);
  if (op == "Mul")
    return integral ? wrap(uint64_t(x) * uint64_t(y)) : T(x * y);
  if (op == "Div")
    return x / y;
  if (op == "Pow")
    return integral ? T(toInt(std::pow(double(x), double(y)))) : T(std::pow(x, y));
  if (op == "Max")
    return std::max(x, y);
  if (op == "Min")
    return std::min(x, y);
  if (op == "Equal")
    return x == y;
  if (op == "Less")
    return x < y;
  if (op == "Greater")
    return x > y;
  if (op == "LessOrEqual")
    return x <= y;
  if (op == "GreaterOrEqual")
    return x >= y;
  if (op == "And")
    return x != 0 && y != 0;
  if (op == "Or")
    return x != 0 || y != 0;
  return 0;
}

bool isBooleanResult(const std::string &op) {
  return op == "Equal" || op == "Less" || op == "Greater" || op == "And" || op == "Or" ||
         op == "LessOrEqual" || op == "GreaterOrEqual";
}

/// A binary op of constants, broadcast to `s`.
llvm::Error evalBinary(Node &nd, const Shape &s, const std::string &op) {
  if (auto err = nd.checkFoldSize(s))
    return err;
  const Const &a = nd.c(0), &bb = nd.c(1);
  Const r;
  r.kind = isBooleanResult(op) ? Kind::Bool : a.kind;
  r.shape = s;
  int64_t total = product(s);
  r.resize(total);
  bool ints = a.kind != Kind::Float && bb.kind != Kind::Float;
  for (int64_t k = 0; k < total; ++k) {
    int64_t ia = broadcastIndex(k, s, a.shape), ib = broadcastIndex(k, s, bb.shape);
    if (ints) {
      int64_t x = a.intAt(ia), y = bb.intAt(ib);
      if (op == "Div" && (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)))
        return nd.error("divides integers by zero");
      r.i[k] = binaryOp(op, x, y);
    } else {
      r.set(k, binaryOp(op, a.at(ia), bb.at(ib)));
    }
  }
  // Float results are rounded to the model's float type, as a kernel would.
  if (r.kind == Kind::Float && nd.im.options.dtype == "f32")
    for (double &v : r.f)
      v = double(float(v));
  return nd.result(std::move(r));
}

Value boolConstant(Node &nd, bool v) {
  Const c;
  c.kind = Kind::Bool;
  c.i = {int64_t(v)};
  return nd.im.materialize(c);
}

/// Add, Sub, Mul, Div, Pow, Max, Min of the node's two inputs (`op`: the
/// node's op type, or the binary step of a variadic one).
llvm::Error binary(Node &nd, const std::string &op) {
  if (auto err = nd.need(2))
    return err;
  auto s = nd.broadcast(2);
  if (!s)
    return s.takeError();
  if (nd.allConst())
    return evalBinary(nd, *s, op);
  if (nd.kind(0) != nd.kind(1) || nd.kind(0) == Kind::Bool)
    return nd.error("takes two inputs of one numeric element type");
  Value x = nd.v(0), y = nd.v(1);
  if (op == "Max" || op == "Min") {
    auto pred = op == "Max" ? ComparePredicate::gt : ComparePredicate::lt;
    Value pick = nd.b.create<CompareOp>(nd.loc, pred, x, y);
    return nd.result(nd.b.create<SelectOp>(nd.loc, pick, x, y));
  }
  // Run-time integers (position ids, mask arithmetic): add, subtract and
  // multiply wrap like the folder's; division and powers stay floating.
  if (nd.kind(0) == Kind::Int && (op == "Div" || op == "Pow"))
    return nd.error("of run-time integers is not supported (only Add, Sub, Mul, Max, Min)");
  if (op == "Add")
    return nd.result(nd.b.create<AddOp>(nd.loc, x, y));
  if (op == "Sub")
    return nd.result(nd.b.create<SubOp>(nd.loc, x, y));
  if (op == "Mul")
    return nd.result(nd.b.create<MulOp>(nd.loc, x, y));
  if (op == "Div")
    return nd.result(nd.b.create<DivOp>(nd.loc, x, y));
  return nd.result(nd.b.create<PowOp>(nd.loc, x, y));
}

llvm::Error arithmetic(Node &nd) { return binary(nd, nd.op()); }

/// Max, Min, Sum and Mean take 1 to N inputs that broadcast together: a
/// left fold of the binary op (Mean: the sum divided by N). One input is
/// the input itself (the optimize=False export's `Max(x)`).
llvm::Error variadic(Node &nd) {
  const std::string &op = nd.op();
  if (nd.in.empty())
    return nd.error("needs at least 1 input");
  if (auto err = nd.need(nd.in.size()))
    return err;
  if (op == "Mean")
    for (size_t k = 0; k < nd.in.size(); ++k)
      if (nd.kind(k) != Kind::Float)
        return nd.error("takes floating-point inputs");
  const std::string step = op == "Sum" || op == "Mean" ? "Add" : op;
  // Each step's result feeds the next (entries kept alive until the end).
  std::vector<std::unique_ptr<Entry>> partial;
  const Entry *acc = nd.in[0];
  for (size_t k = 1; k < nd.in.size(); ++k) {
    Node pair(nd.im, nd.n, {acc, nd.in[k]});
    if (auto err = binary(pair, step))
      return err;
    partial.push_back(std::make_unique<Entry>(pair.out.front()));
    acc = partial.back().get();
  }
  if (op == "Mean" && nd.in.size() > 1) {
    Const n;
    n.kind = Kind::Float;
    n.f = {double(nd.in.size())};
    Entry count{Value(), std::make_shared<const Const>(std::move(n)), nullptr};
    Node mean(nd.im, nd.n, {acc, &count});
    if (auto err = binary(mean, "Div"))
      return err;
    nd.out.push_back(mean.out.front());
    return llvm::Error::success();
  }
  nd.out.push_back(*acc);
  return llvm::Error::success();
}

/// Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or.
llvm::Error comparison(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(2))
    return err;
  auto s = nd.broadcast(2);
  if (!s)
    return s.takeError();
  if (nd.allConst())
    return evalBinary(nd, *s, op);
  if (nd.kind(0) != nd.kind(1))
    return nd.error("compares tensors of different element types");
  if (op == "And" || op == "Or") {
    if (nd.kind(0) != Kind::Bool)
      return nd.error("needs boolean inputs");
    // a and b = a ? b : false; a or b = a ? true : b.
    Value other = boolConstant(nd, op == "Or");
    return nd.result(op == "And" ? nd.b.create<SelectOp>(nd.loc, nd.v(0), nd.v(1), other)
                                 : nd.b.create<SelectOp>(nd.loc, nd.v(0), other, nd.v(1)));
  }
  if (nd.kind(0) == Kind::Bool) {
    if (op != "Equal")
      return nd.error("orders booleans, which is not supported");
    // a == b on booleans: a ? b : !b.
    Value notB =
        nd.b.create<SelectOp>(nd.loc, nd.v(1), boolConstant(nd, false), boolConstant(nd, true));
    return nd.result(nd.b.create<SelectOp>(nd.loc, nd.v(0), nd.v(1), notB));
  }
  auto pred = op == "Equal"         ? ComparePredicate::eq
              : op == "Less"        ? ComparePredicate::lt
              : op == "Greater"     ? ComparePredicate::gt
              : op == "LessOrEqual" ? ComparePredicate::le
                                    : ComparePredicate::ge;
  return nd.result(nd.b.create<CompareOp>(nd.loc, pred, nd.v(0), nd.v(1)));
}

/// A unary op of a constant.
llvm::Error evalUnary(Node &nd) {
  const std::string &op = nd.op();
  Const r = nd.c(0);
  if (op == "Not") {
    for (int64_t &v : r.i)
      v = !v;
    return nd.result(std::move(r));
  }
  if (r.kind != Kind::Float) {
    if (op == "Neg" || op == "Abs") {
      for (int64_t &v : r.i)
        v = op == "Neg" ? int64_t(0 - uint64_t(v)) : (v < 0 ? int64_t(0 - uint64_t(v)) : v);
      return nd.result(std::move(r));
    }
    return nd.error("of integers is not supported");
  }
  for (double &v : r.f) {
    if (op == "Sqrt")
      v = std::sqrt(v);
    else if (op == "Neg")
      v = -v;
    else if (op == "Erf")
      v = std::erf(v);
    else if (op == "Tanh")
      v = std::tanh(v);
    else if (op == "Exp")
      v = std::exp(v);
    else if (op == "Log")
      v = std::log(v);
    else if (op == "Reciprocal")
      v = 1 / v;
    else if (op == "Abs")
      v = std::fabs(v);
    else if (op == "Floor")
      v = std::floor(v);
    else if (op == "Ceil")
      v = std::ceil(v);
    else if (op == "Sin")
      v = std::sin(v);
    else if (op == "Cos")
      v = std::cos(v);
    else if (op == "Sigmoid")
      v = 1 / (1 + std::exp(-v));
  }
  // Rotary tables (cos and sin of positions x inverse frequencies) are
  // rounded to the model's float type, as torch computes them.
  if ((op == "Sin" || op == "Cos") && nd.im.options.dtype == "f32")
    for (double &v : r.f)
      v = double(float(v));
  return nd.result(std::move(r));
}

/// Sqrt, Neg, Erf, Tanh, Exp, Log, Reciprocal, Abs, Floor, Ceil, Not,
/// Sigmoid; Sin and Cos (evaluated only: mlc has no trigonometric kernel, and
/// the exporters' Sin/Cos are the rotary tables, computed from a buffer and
/// positions that are constants once the shapes are fixed).
llvm::Error unary(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(1))
    return err;
  if (nd.allConst())
    return evalUnary(nd);
  Value x = nd.v(0);
  if (op == "Not") {
    if (nd.kind(0) != Kind::Bool)
      return nd.error("needs a boolean input");
    return nd.result(
        nd.b.create<SelectOp>(nd.loc, x, boolConstant(nd, false), boolConstant(nd, true)));
  }
  if (op == "Neg" && nd.kind(0) == Kind::Int)
    return nd.result(nd.b.create<NegOp>(nd.loc, x));
  if (op == "Floor" || op == "Ceil" || op == "Sin" || op == "Cos")
    return nd.error("is only supported on inputs the importer can evaluate (constants and "
                    "shapes: rotary tables of a buffer such as inv_freq and positions), not on "
                    "a value computed from the model's inputs or parameters");
  if (auto err = nd.floatOperands(1))
    return err;
  if (op == "Abs") {
    Value zero = nd.im.scalar(0.0);
    Value neg = nd.b.create<CompareOp>(nd.loc, ComparePredicate::lt, x, zero);
    return nd.result(nd.b.create<SelectOp>(nd.loc, neg, nd.b.create<NegOp>(nd.loc, x), x));
  }
  if (op == "Sqrt")
    return nd.result(nd.b.create<SqrtOp>(nd.loc, x));
  if (op == "Erf")
    return nd.result(nd.b.create<ErfOp>(nd.loc, x));
  if (op == "Tanh")
    return nd.result(nd.b.create<TanhOp>(nd.loc, x));
  if (op == "Exp")
    return nd.result(nd.b.create<ExpOp>(nd.loc, x));
  if (op == "Log")
    return nd.result(nd.b.create<LogOp>(nd.loc, x));
  if (op == "Neg")
    return nd.result(nd.b.create<NegOp>(nd.loc, x));
  if (op == "Sigmoid") {
    // sigmoid(x) = (1 + tanh(x/2)) / 2: no overflow at either end, in value
    // or gradient (1 / (1 + exp(-x)) has exp(-x) = inf below x ~ -88 and
    // its gradient inf/inf). SiLU x * sigmoid(x) stays a pointwise chain.
    Value half = nd.im.scalar(0.5);
    Value t = nd.b.create<TanhOp>(nd.loc, nd.b.create<MulOp>(nd.loc, x, half));
    return nd.result(
        nd.b.create<MulOp>(nd.loc, nd.b.create<AddOp>(nd.loc, t, nd.im.scalar(1.0)), half));
  }
  return nd.result(nd.b.create<DivOp>(nd.loc, nd.im.scalar(1.0), x));
}

/// IsNaN and IsInf (detect_positive, detect_negative).
llvm::Error isSpecial(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  if (auto err = nd.floatOperands(1))
    return err;
  bool nan = nd.op() == "IsNaN";
  bool pos = nd.intAttr("detect_positive", 1), neg = nd.intAttr("detect_negative", 1);
  if (nd.allConst()) {
    Const r;
    r.kind = Kind::Bool;
    r.shape = nd.c(0).shape;
    for (double v : nd.c(0).f)
      r.i.push_back(nan ? std::isnan(v) : std::isinf(v) && (v > 0 ? pos : neg));
    return nd.result(std::move(r));
  }
  if (!nan)
    return nd.error("is only supported on inputs the importer can evaluate");
  // x != x exactly when x is NaN.
  return nd.result(nd.b.create<CompareOp>(nd.loc, ComparePredicate::ne, nd.v(0), nd.v(0)));
}

/// `x` of kind `to`: floats truncate toward zero into integers.
Const castConst(const Const &x, Kind to) {
  Const c;
  c.kind = to;
  c.shape = x.shape;
  c.resize(x.numel());
  for (int64_t k = 0; k < x.numel(); ++k)
    c.set(k, to == Kind::Float ? x.at(k) : double(x.intAt(k)));
  if (to != Kind::Float && x.kind == Kind::Float)
    for (int64_t k = 0; k < x.numel(); ++k)
      c.i[k] = to == Kind::Bool ? x.f[k] != 0 : toInt(std::trunc(x.f[k]));
  return c;
}

llvm::Error castOp(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  auto kind = kindOfOnnx(int(nd.intAttr("to", 1)));
  if (!kind)
    return nd.error("casts to data type " + std::to_string(nd.intAttr("to", 1)) +
                    ", which mlc does not support");
  if (nd.allConst())
    return nd.result(castConst(nd.c(0), *kind));
  Value x = nd.v(0);
  if (nd.kind(0) == *kind)
    return nd.result(x);
  auto type = RankedTensorType::get(nd.shape(0), nd.im.elementFor(*kind));
  return nd.result(nd.b.create<CastOp>(nd.loc, type, x));
}

/// Opset 15's CastLike: a Cast to input 1's element type.
llvm::Error castLike(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  Kind to = nd.kind(1);
  if (nd.isConst(0))
    return nd.result(castConst(nd.c(0), to));
  if (nd.kind(0) == to)
    return nd.forward(0);
  auto type = RankedTensorType::get(nd.shape(0), nd.im.elementFor(to));
  return nd.result(nd.b.create<CastOp>(nd.loc, type, nd.v(0)));
}

llvm::Error identity(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  return nd.forward(0);
}

llvm::Error where(Node &nd) {
  if (auto err = nd.need(3))
    return err;
  auto s = nd.broadcast(3);
  if (!s)
    return s.takeError();
  if (nd.allConst()) {
    if (auto err = nd.checkFoldSize(*s))
      return err;
    Const r;
    r.kind = nd.c(1).kind;
    r.shape = *s;
    r.resize(product(*s));
    for (int64_t k = 0; k < product(*s); ++k) {
      bool cond = nd.c(0).at(broadcastIndex(k, *s, nd.c(0).shape)) != 0;
      const Const &src = cond ? nd.c(1) : nd.c(2);
      r.copyFrom(k, src, broadcastIndex(k, *s, src.shape));
    }
    return nd.result(std::move(r));
  }
  if (nd.kind(0) != Kind::Bool)
    return nd.error("condition must be boolean");
  if (nd.kind(1) != nd.kind(2))
    return nd.error("chooses between tensors of different element types");
  return nd.result(nd.b.create<SelectOp>(nd.loc, nd.v(0), nd.v(1), nd.v(2)));
}

//===----------------------------------------------------------------------===//
// Constants, shapes and masks
//===----------------------------------------------------------------------===//

llvm::Error constantOp(Node &nd) {
  if (const auto *a = nd.attr("value", onnx::AttributeProto::TENSOR)) {
    auto t = nd.im.tensorFromProto(a->t(), "Constant node '" + Importer::nodeName(nd.n) + "'");
    if (!t)
      return t.takeError();
    return nd.result(std::move(*t));
  }
  Const c;
  if (const auto *a = nd.attr("value_float", onnx::AttributeProto::FLOAT)) {
    c.f = {a->f()};
  } else if (const auto *a = nd.attr("value_int", onnx::AttributeProto::INT)) {
    c.kind = Kind::Int;
    c.i = {a->i()};
  } else if (const auto *a = nd.attr("value_ints", onnx::AttributeProto::INTS)) {
    c.kind = Kind::Int;
    c.i.assign(a->ints().begin(), a->ints().end());
    c.shape = {int64_t(c.i.size())};
  } else if (const auto *a = nd.attr("value_floats", onnx::AttributeProto::FLOATS)) {
    c.f.assign(a->floats().begin(), a->floats().end());
    c.shape = {int64_t(c.f.size())};
  } else {
    return nd.error("has no value attribute mlc supports (value, value_float, "
                    "value_int, value_floats, value_ints)");
  }
  return nd.result(std::move(c));
}

/// Shape needs only its input's shape: always a constant.
llvm::Error shapeOp(Node &nd) {
  if (!nd.has(0))
    return nd.error("needs one input");
  Shape s = nd.shape(0);
  int64_t rank = s.size();
  int64_t start = nd.intAttr("start", 0), end = nd.intAttr("end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
  Const c;
  c.kind = Kind::Int;
  for (int64_t k = start; k < end; ++k)
    c.i.push_back(s[k]);
  c.shape = {int64_t(c.i.size())};
  return nd.result(std::move(c));
}

/// Range, ConstantOfShape and Trilu build masks and shapes: constants only.
llvm::Error constantsOnly(Node &nd) {
  return nd.error("is only supported on inputs the importer can evaluate (it builds "
                  "masks and shapes)");
}

llvm::Error range(Node &nd) {
  if (!nd.allConst())
    return constantsOnly(nd);
  if (auto err = nd.need(3))
    return err;
  if (nd.c(0).numel() != 1 || nd.c(1).numel() != 1 || nd.c(2).numel() != 1)
    return nd.error("needs scalar start, limit and a non-zero delta");
  double start = nd.c(0).at(0), limit = nd.c(1).at(0), delta = nd.c(2).at(0);
  if (delta == 0)
    return nd.error("needs scalar start, limit and a non-zero delta");
  double count = std::ceil((limit - start) / delta);
  if (!(count <= double(nd.im.options.foldLimit)))
    return nd.error("would count past the size limit");
  int64_t len = std::max<int64_t>(0, toInt(count));
  Const r;
  r.kind = nd.c(0).kind;
  r.shape = {len};
  r.resize(len);
  for (int64_t k = 0; k < len; ++k)
    r.set(k, start + double(k) * delta);
  return nd.result(std::move(r));
}

llvm::Error constantOfShape(Node &nd) {
  if (!nd.allConst())
    return constantsOnly(nd);
  if (auto err = nd.need(1))
    return err;
  Const r;
  r.shape = nd.c(0).i;
  if (nd.c(0).kind == Kind::Float)
    return nd.error("shape must be integers");
  if (auto err = nd.checkFoldSize(r.shape))
    return err;
  Const value;
  value.f = {0.0};
  if (const auto *a = nd.attr("value", onnx::AttributeProto::TENSOR)) {
    auto v = nd.im.tensorFromProto(a->t(), "node '" + Importer::nodeName(nd.n) + "' value");
    if (!v)
      return v.takeError();
    if (v->numel() != 1)
      return nd.error("value must hold one element");
    value = *v;
  }
  r.kind = value.kind;
  r.resize(r.numel());
  for (int64_t k = 0; k < r.numel(); ++k)
    r.copyFrom(k, value, 0);
  return nd.result(std::move(r));
}

llvm::Error trilu(Node &nd) {
  if (!nd.allConst())
    return constantsOnly(nd);
  if (auto err = nd.need(1))
    return err;
  Const r = nd.c(0);
  if (r.shape.size() < 2)
    return nd.error("needs a tensor of rank >= 2");
  if (nd.has(1) && nd.c(1).numel() != 1)
    return nd.error("needs a scalar k");
  int64_t k = nd.has(1) ? nd.c(1).intAt(0) : 0;
  bool upper = nd.intAttr("upper", 1);
  int64_t rows = r.shape[r.shape.size() - 2], cols = r.shape.back();
  for (int64_t e = 0; e < r.numel(); ++e) {
    int64_t i = (e / cols) % rows, j = e % cols;
    if (upper ? j - i < k : j - i > k)
      r.set(e, 0);
  }
  return nd.result(std::move(r));
}

constexpr int kAll = kMaxOpset;

const OpSchema kSchemas[] = {
    {"Add", kMinOpset, kAll, arithmetic},
    {"Sub", kMinOpset, kAll, arithmetic},
    {"Mul", kMinOpset, kAll, arithmetic},
    {"Div", kMinOpset, kAll, arithmetic},
    {"Pow", kMinOpset, kAll, arithmetic},
    {"Max", kMinOpset, kAll, variadic},
    {"Min", kMinOpset, kAll, variadic},
    {"Sum", kMinOpset, kAll, variadic},
    {"Mean", kMinOpset, kAll, variadic},
    {"Equal", kMinOpset, kAll, comparison},
    {"Less", kMinOpset, kAll, comparison},
    {"Greater", kMinOpset, kAll, comparison},
    {"LessOrEqual", kMinOpset, kAll, comparison},
    {"GreaterOrEqual", kMinOpset, kAll, comparison},
    {"And", kMinOpset, kAll, comparison},
    {"Or", kMinOpset, kAll, comparison},
    {"Sqrt", kMinOpset, kAll, unary},
    {"Neg", kMinOpset, kAll, unary},
    {"Erf", kMinOpset, kAll, unary},
    {"Tanh", kMinOpset, kAll, unary},
    {"Exp", kMinOpset, kAll, unary},
    {"Log", kMinOpset, kAll, unary},
    {"Reciprocal", kMinOpset, kAll, unary},
    {"Abs", kMinOpset, kAll, unary},
    {"Floor", kMinOpset, kAll, unary},
    {"Ceil", kMinOpset, kAll, unary},
    {"Not", kMinOpset, kAll, unary},
    {"Sigmoid", kMinOpset, kAll, unary},
    {"Sin", kMinOpset, kAll, unary},
    {"Cos", kMinOpset, kAll, unary},
    {"IsNaN", kMinOpset, kAll, isSpecial},
    {"IsInf", kMinOpset, kAll, isSpecial},
    {"Cast", kMinOpset, kAll, castOp},
    {"CastLike", 15, kAll, castLike},
    {"Identity", kMinOpset, kAll, identity},
    {"Where", kMinOpset, kAll, where},
    {"Constant", kMinOpset, kAll, constantOp},
    {"Shape", kMinOpset, kAll, shapeOp},
    {"Range", kMinOpset, kAll, range},
    {"ConstantOfShape", kMinOpset, kAll, constantOfShape},
    {"Trilu", 14, kAll, trilu},
};

} // namespace

llvm::ArrayRef<OpSchema> tensorOpSchemas() { return kSchemas; }

} // namespace mlc::onnximport
