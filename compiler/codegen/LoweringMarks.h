//===- LoweringMarks.h - the lowering's choices on graph ops ----*- C++ -*-===//
//
// The passes at the head of the lowering pipeline (mlc-gemm-epilogues,
// mlc-in-place) decide how some ops are emitted and record the decision as
// a unit attribute on the op; mlc-assign-buffers records where every
// result lives (mlc.buffers). mlc-lower-to-plan only reads them, and
// refuses, on the op, one it cannot obey.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_LOWERINGMARKS_H
#define MLC_COMPILER_CODEGEN_LOWERINGMARKS_H

#include "dialects/mlc/MlcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

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
inline bool markedInReaderLayout(mlir::Operation *op, unsigned i) {
  auto marked = op->getAttrOfType<mlir::DenseI64ArrayAttr>(kReaderLayoutAttr);
  return marked && llvm::is_contained(marked.asArrayRef(), int64_t(i));
}

/// mlc-assign-buffers' decision, on every op of a graph function, of where
/// each result lives: `mlc.buffers = ["...", ...]`, one entry per result.
/// mlc-lower-to-plan reads it and refuses, on the op, one it cannot obey.
inline constexpr llvm::StringLiteral kBuffersAttr = "mlc.buffers";
namespace buffers {
/// An arena slice of its own (placed by mlc-plan-memory).
inline constexpr llvm::StringLiteral arena = "arena";
/// A strided view of its input (a transpose, reshape, split, slice or
/// tp_copy): no kernel; copied only for a reader that needs it contiguous.
inline constexpr llvm::StringLiteral view = "view";
/// A constant, filled into an arena slice where a reader first needs it.
inline constexpr llvm::StringLiteral constant = "constant";
/// The buffer of its accumulator (`acc`), which it adds itself to in
/// place: a product that only it reads, or (mlc-accumulate-gemms' sum onto
/// a norm gradient's dx or a product read elsewhere too) a product's or
/// norm gradient's arena slice whose other readers all come first, none
/// of them a view of it, the op reading none of its other inputs from it
/// (whyNotInAccumulator). Otherwise an accumulating op gets a buffer of its
/// own, first a copy of its accumulator.
inline constexpr llvm::StringLiteral accumulator = "accumulator";
/// Written in the layout of its one reader, a view or a concatenation
/// (mlc.in_reader_layout): the reader costs nothing.
inline constexpr llvm::StringLiteral readerLayout = "reader_layout";
/// A loss gradient over its logits (mlc.in_place).
inline constexpr llvm::StringLiteral logits = "logits";
/// A loss gradient read only as a bf16 copy: its kernel writes that copy
/// (the cast's buffer), the gradient has none.
inline constexpr llvm::StringLiteral bf16Copy = "bf16_copy";
/// A tensor-parallel reduce over the buffer of its partial sums, which
/// nothing else reads.
inline constexpr llvm::StringLiteral input = "input";
/// A `params` fusion's result: its parameter's place in the fusion's copy
/// of the flat parameter buffer.
inline constexpr llvm::StringLiteral paramLayout = "param_layout";
/// An optimizer fusion's result: written by its kernel into the flat
/// parameter and moment buffers.
inline constexpr llvm::StringLiteral flatBuffers = "flat_buffers";
/// A widening its readers' kernels convert at the load (mlc-fold-casts): no
/// buffer.
inline constexpr llvm::StringLiteral readerLoad = "reader_load";
/// The prefixes of a slice of a flat buffer, `grad:NAME` and the like: a
/// gradient (or an optimizer's update) written straight into its slice.
inline constexpr llvm::StringLiteral flatKinds[] = {"grad", "param", "moment1", "moment2",
                                                     "grad_sum"};
} // namespace buffers

/// Result `r`'s entry in mlc.buffers; "" where it has none (a function
/// argument, an op mlc-assign-buffers did not see).
inline llvm::StringRef assignedBuffer(mlir::Value r) {
  auto result = llvm::dyn_cast<mlir::OpResult>(r);
  if (!result)
    return "";
  auto all = result.getOwner()->getAttrOfType<mlir::ArrayAttr>(kBuffersAttr);
  if (!all || all.size() <= result.getResultNumber())
    return "";
  auto s = llvm::dyn_cast<mlir::StringAttr>(all[result.getResultNumber()]);
  return s ? s.getValue() : "";
}

/// `grad:NAME` (or param, moment1, moment2, grad_sum) where result `i` of
/// `fn` is a gradient or an optimizer's update of a flat buffer's slice.
std::optional<std::string> resultSlice(mlir::func::FuncOp fn, unsigned i);
/// A transpose, reshape, split, slice or tp_copy: a view of its input.
bool isViewOp(mlir::Operation *op);
/// The accumulator a matmul or embedding gradient adds itself to in its
/// own buffer: a product that only it reads; null where none.
mlir::Value productAccumulator(mlir::Operation *op);
/// The accumulator a matmul or embedding gradient adds itself to (`acc`);
/// null where it has none.
mlir::Value accumulatorOf(mlir::Operation *op);
/// Why `op` may not add itself to its accumulator in the accumulator's
/// buffer (`accumulator`), by the mlc.buffers of the ops before it; none
/// where it may.
std::optional<std::string> whyNotInAccumulator(mlir::Operation *op);
/// Whether an f32 loss gradient is read only as a bf16 copy (a cast,
/// possibly through a reshape): the loss kernel writes that copy.
bool gradientReadAsBf16Copy(CrossEntropyGradOp grad);

/// Whether result `i` of `op` is written in its reader's layout
/// (mlc-assign-buffers' `reader_layout`).
inline bool inReaderLayout(mlir::Operation *op, unsigned i) {
  return assignedBuffer(op->getResult(i)) == buffers::readerLayout;
}

/// A pointwise fusion of one bf16 input and one bf16 result that is exactly
/// cast to f32, tanh GELU, cast back: the GELU of a bf16 product.
bool isBf16TanhGelu(FusionOp f);

} // namespace mlc

#endif // MLC_COMPILER_CODEGEN_LOWERINGMARKS_H
