//===- MlcScalar.cpp - each elementwise op's per-element expression --------===//
//
// ScalarOpInterface: the one place where an elementwise op says what it
// computes per element. Kernel emitters of every target call these through
// their ScalarEmitter; mlc-fuse-elementwise fuses exactly these ops.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"

#include <cmath>

using namespace mlir;

namespace mlc {

namespace {

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

std::string binary(ArrayRef<std::string> a, const char *op) {
  return "(" + a[0] + " " + op + " " + a[1] + ")";
}

} // namespace

std::string AddOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) { return binary(a, "+"); }
std::string SubOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) { return binary(a, "-"); }
std::string MulOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) { return binary(a, "*"); }
std::string DivOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) { return binary(a, "/"); }
std::string PowOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return e.call("pow", elementOf(getResult()), a);
}
std::string NegOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) {
  return "(-" + a[0] + ")";
}
std::string ExpOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return e.call("exp", elementOf(getResult()), a);
}
std::string LogOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return e.call("log", elementOf(getResult()), a);
}
std::string TanhOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return e.call("tanh", elementOf(getResult()), a);
}
std::string ErfOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return e.call("erf", elementOf(getResult()), a);
}
std::string SqrtOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return e.call("sqrt", elementOf(getResult()), a);
}
std::string RsqrtOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  Type el = elementOf(getResult());
  return "(" + e.literal(1.0, el) + " / " + e.call("sqrt", el, a) + ")";
}

// SiLU: x / (1 + exp(-x)); exp's overflow for very negative x gives 0.
std::string SiluOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  Type el = elementOf(getResult());
  return "(" + a[0] + " / (" + e.literal(1.0, el) + " + " + e.call("exp", el, {"-" + a[0]}) +
         "))";
}

std::string SwigluOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  Type el = elementOf(getResult());
  return "(" + a[0] + " / (" + e.literal(1.0, el) + " + " + e.call("exp", el, {"-" + a[0]}) +
         ") * " + a[1] + ")";
}

// GELU: erf form 0.5 x (1 + erf(x / sqrt 2)); tanh form the preludes'
// mlc_gelu_tanh and mlc_gelu_tanh_grad (mlc_shared.h: the formula's one
// copy), in f64 for f64 and in f32 otherwise.
static std::string geluTanhCall(const char *fn, Type el, const std::string &x) {
  return std::string(fn) + (el.isF64() ? "<double>(" : "<float>(") + x + ")";
}

std::string GeluOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  Type el = elementOf(getResult());
  auto lit = [&](double v) { return e.literal(v, el); };
  const std::string &x = a[0];
  if (getApproximate() == GeluApproximation::tanh)
    return geluTanhCall("mlc_gelu_tanh", el, x);
  return "(" + lit(0.5) + " * " + x + " * (" + lit(1.0) + " + " +
         e.call("erf", el, {x + " * " + lit(M_SQRT1_2)}) + "))";
}

std::string GeluGradOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  Type el = elementOf(getResult());
  auto lit = [&](double v) { return e.literal(v, el); };
  const std::string &gr = a[0], &x = a[1];
  if (getApproximate() == GeluApproximation::tanh)
    return "(" + gr + " * " + geluTanhCall("mlc_gelu_tanh_grad", el, x) + ")";
  // Phi(x) + x phi(x)
  return "(" + gr + " * (" + lit(0.5) + " * (" + lit(1.0) + " + " +
         e.call("erf", el, {x + " * " + lit(M_SQRT1_2)}) + ") + " + x + " * " +
         e.call("exp", el, {lit(-0.5) + " * " + x + " * " + x}) + " * " +
         lit(0.3989422804014327) + "))";
}

std::string CompareOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
  return "(" + e.typeName(elementOf(getResult())) + ")" + binary(a, ops[int(getPredicate())]);
}

std::string SelectOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) {
  return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
}

std::string CastOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  return "(" + e.typeName(elementOf(getResult())) + ")" + a[0];
}

// Broadcasting is in the strides the kernel reads its operand with.
std::string BroadcastOp::scalarExpr(ScalarEmitter &, ArrayRef<std::string> a) { return a[0]; }

std::string DropoutOp::scalarExpr(ScalarEmitter &e, ArrayRef<std::string> a) {
  Type el = elementOf(getResult());
  double ratio = getRatio().convertToDouble();
  // A block of a whole tensor draws at the whole tensor's index of the
  // element (prelude's mlc_block_index), r being the rank operand a[1].
  std::string counter = e.elementIndex();
  if (getRank()) {
    counter = "mlc_block_index((uint64_t)" + counter + ", " + std::to_string(*getSpan()) + "ull, " +
              std::to_string(*getBlocks()) + "ull, (uint64_t)" + a[1] + ")";
  }
  return "(" + e.uniform(int64_t(getSeed()), counter) + " >= " + std::to_string(ratio) + " ? " + a[0] +
         " * " + e.literal(1.0 / (1.0 - ratio), el) + " : " + e.literal(0.0, el) + ")";
}

} // namespace mlc
