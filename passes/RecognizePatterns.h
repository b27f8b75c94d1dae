//===- RecognizePatterns.h - the mlc-recognize patterns' pieces -*- C++ -*-===//
//
// Private to passes/: the matchers the mlc-recognize patterns share (splat
// constants, products and sums with a constant, shapes), defined in
// Recognize.cpp, and the pattern families each file adds to the pass's
// pattern sets:
//   Recognize.cpp                  the pass; flattened linear layers, the
//                                  shifted next-token loss, slices as a split
//   RecognizeNormsActivations.cpp  LayerNorm, RMSNorm, GELU, SwiGLU
//   RecognizeRotary.cpp            rotate-half and partial rotary embeddings
//   RecognizeAttention.cpp         attention and its masks, grouped K/V
//
//===----------------------------------------------------------------------===//

#ifndef MLC_PASSES_RECOGNIZEPATTERNS_H
#define MLC_PASSES_RECOGNIZEPATTERNS_H

#include "dialects/mlc/MlcDialect.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <utility>

namespace mlc {
namespace recognize {

using mlir::Value;

/// The value of a constant whose elements are all equal.
/// f32 constants come back as the shortest decimal that rounds to them
/// (1e-5f as 1e-5), so recognized attributes read as the model wrote them.
std::optional<double> splat(Value v);

bool near(std::optional<double> v, double want, double tol = 1e-6);

/// For a commutative binary op: the operand that is not `a` (or null).
template <typename Op>
Value other(Op op, Value a) {
  if (op.getLhs() == a)
    return op.getRhs();
  if (op.getRhs() == a)
    return op.getLhs();
  return Value();
}

/// `v = op(x, c)` or `op(c, x)` for a commutative op and a splat constant c:
/// x and c.
template <typename Op>
std::optional<std::pair<Value, double>> withConstant(Value v) {
  if (!v)
    return std::nullopt;
  auto op = v.getDefiningOp<Op>();
  if (!op)
    return std::nullopt;
  if (auto c = splat(op.getRhs()))
    return std::make_pair(op.getLhs(), *c);
  if (auto c = splat(op.getLhs()))
    return std::make_pair(op.getRhs(), *c);
  return std::nullopt;
}
std::optional<std::pair<Value, double>> mulByConstant(Value v);
std::optional<std::pair<Value, double>> plusConstant(Value v);

/// `v = x * c` or `x / (1/c)`: x and c.
std::optional<std::pair<Value, double>> scaled(Value v);

int64_t rankOf(Value v);
llvm::ArrayRef<int64_t> shapeOf(Value v);

/// Adds LayerNorm, RMSNorm, GELU and SwiGLU (RecognizeNormsActivations.cpp).
void populateNormActivationPatterns(mlir::RewritePatternSet &patterns);
/// Adds the rotary embeddings (RecognizeRotary.cpp).
void populateRotaryPatterns(mlir::RewritePatternSet &patterns);
/// Adds attention and its masks (RecognizeAttention.cpp).
void populateAttentionPatterns(mlir::RewritePatternSet &patterns);
/// Adds attention over K/V repeated to the query heads (RecognizeAttention.cpp).
void populateGroupedKVPatterns(mlir::RewritePatternSet &patterns);

} // namespace recognize
} // namespace mlc

#endif // MLC_PASSES_RECOGNIZEPATTERNS_H
