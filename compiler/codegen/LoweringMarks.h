//===- LoweringMarks.h - the lowering's choices on graph ops ----*- C++ -*-===//
//
// The passes at the head of the lowering pipeline (mlc-gemm-epilogues,
// mlc-in-place) decide how some ops are emitted and record the decision as
// a unit attribute on the op; mlc-lower-to-plan only reads the marks, and
// refuses, on the marked op, one it cannot obey.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_LOWERINGMARKS_H
#define MLC_COMPILER_CODEGEN_LOWERINGMARKS_H

#include "dialects/mlc/MlcDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

namespace mlc {

/// On a tanh GELU of a matmul's product (mlc.gelu, or under --dtype bf16
/// the pointwise fusion cast-GELU-cast of a bf16 product): the GEMM computes
/// it as its epilogue, writing the product to its own buffer (the GELU's
/// gradient reads it) and the GELU to the GELU's. mlc-gemm-epilogues.
inline constexpr llvm::StringLiteral kGemmEpilogueAttr = "mlc.gemm_epilogue";

/// On a cross_entropy_grad marked mlc.with_loss: its gradient overwrites
/// the logits, which nothing else reads (each row's x[label] is read
/// before the row's gradient is written). mlc-in-place.
inline constexpr llvm::StringLiteral kInPlaceAttr = "mlc.in_place";

/// On an op whose kernel writes some results in their one reader's layout
/// (an attention's outputs through the transposes and reshapes to the
/// layout their consumers read; a pointwise result into its slice of a
/// concatenation; a concatenation in its transpose's layout): the results'
/// numbers, `array<i64: ...>`. Those readers then cost nothing. mlc-in-place.
inline constexpr llvm::StringLiteral kReaderLayoutAttr = "mlc.in_reader_layout";

/// Whether result `i` of `op` is marked mlc.in_reader_layout.
inline bool inReaderLayout(mlir::Operation *op, unsigned i) {
  auto marked = op->getAttrOfType<mlir::DenseI64ArrayAttr>(kReaderLayoutAttr);
  return marked && llvm::is_contained(marked.asArrayRef(), int64_t(i));
}

/// A pointwise fusion of one bf16 input and one bf16 result that is exactly
/// cast to f32, tanh GELU, cast back: the GELU of a bf16 product.
bool isBf16TanhGelu(FusionOp f);

} // namespace mlc

#endif // MLC_COMPILER_CODEGEN_LOWERINGMARKS_H
