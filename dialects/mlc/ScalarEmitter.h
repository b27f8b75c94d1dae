//===- ScalarEmitter.h - the target's words for scalar code ----*- C++ -*-===//
//
// Every elementwise op of the mlc dialect writes its per-element expression
// once (ScalarOpInterface::scalarExpr, MlcScalar.cpp), in terms of this
// interface: a kernel target says how a literal, a math function, a type
// name and dropout's random number are spelled in its language. The CPU
// target spells them in C++ (compiler/codegen); a CUDA target spells them
// in CUDA C, and the same op rules serve both.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_DIALECTS_MLC_SCALAREMITTER_H
#define MLC_DIALECTS_MLC_SCALAREMITTER_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlc {

class ScalarEmitter {
public:
  virtual ~ScalarEmitter() = default;
  /// A constant of element type `el` (infinities included).
  virtual std::string literal(double value, mlir::Type el) = 0;
  /// The target's math function `fn` (exp, log, tanh, erf, sqrt, pow) on
  /// arguments of element type `el`.
  virtual std::string call(llvm::StringRef fn, mlir::Type el,
                           llvm::ArrayRef<std::string> args) = 0;
  /// The target's name of element type `el` (for casts and temporaries).
  virtual std::string typeName(mlir::Type el) = 0;
  /// The current element's flat index (dropout's counter; an unsigned or
  /// signed 64-bit integer expression).
  virtual std::string elementIndex() = 0;
  /// A uniform number in [0, 1) drawn for dropout `seed` at counter
  /// `counter` (an integer expression: the element's flat index, or its
  /// index in the whole tensor when the op holds a block of it) and the
  /// training step. Counter-based, so every target and every kernel that
  /// recomputes it draws the same.
  virtual std::string uniform(int64_t seed, const std::string &counter) = 0;
};

} // namespace mlc

#endif // MLC_DIALECTS_MLC_SCALAREMITTER_H
