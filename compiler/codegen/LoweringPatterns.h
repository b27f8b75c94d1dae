//===- LoweringPatterns.h - one conversion pattern per graph op -*- C++ -*-===//
//
// mlc-lower-to-plan is a dialect conversion: every op of a graph function is
// illegal, and one OpConversionPattern per op type (GraphOpLowering) lowers
// it through FunctionLowering::convert into plan steps and replaces it with
// the buffers its results live in. A new graph op is one `p.add<Op>(...)`
// in FunctionLowering::addOpPatterns (LowerToPlan.cpp).
//
// The emitters read their operands through the lowering's views (viewOf,
// bufferOf), which look through transposes, reshapes and slices in the
// graph as it was: the conversion keeps the original IR in place until it
// commits, so a view's reader still sees the view's producer. The
// conversion folds an op before its pattern, which would change the graph
// under the decisions recorded on it: mlc-fold (Fold.cpp) folds the graph
// before those decisions, and the lowering refuses one that still folds
// (refuseFolds, LowerToPlan.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_LOWERINGPATTERNS_H
#define MLC_COMPILER_CODEGEN_LOWERINGPATTERNS_H

#include "compiler/codegen/LoweringImpl.h"

#include "mlir/Transforms/DialectConversion.h"

#include <functional>

namespace mlc::lowering {

/// The pattern of one graph op type: its emitter `lower`, run through
/// FunctionLowering::convert (the op's location on its steps, its errors
/// on it, its results replaced by their buffers).
template <typename OpT> class GraphOpLowering : public OpConversionPattern<OpT> {
public:
  using Lower = std::function<llvm::Error(OpT)>;
  GraphOpLowering(MLIRContext *context, FunctionLowering &lowering, Lower lower)
      : OpConversionPattern<OpT>(context, /*benefit=*/2), lowering(lowering),
        lower(std::move(lower)) {}
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    return lowering.convert(op, rewriter, [&] { return lower(op); });
  }

private:
  FunctionLowering &lowering;
  Lower lower;
};

/// The pattern of every op of an interface (the scalar ops' pointwise
/// kernels), below the patterns of single op types.
template <typename Interface>
class InterfaceLowering : public OpInterfaceConversionPattern<Interface> {
public:
  using Lower = std::function<llvm::Error(Operation *)>;
  InterfaceLowering(MLIRContext *context, FunctionLowering &lowering, Lower lower)
      : OpInterfaceConversionPattern<Interface>(context, /*benefit=*/1), lowering(lowering),
        lower(std::move(lower)) {}
  LogicalResult matchAndRewrite(Interface op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    return lowering.convert(op, rewriter, [&] { return lower(op); });
  }

private:
  FunctionLowering &lowering;
  Lower lower;
};

/// The patterns FunctionLowering::addOpPatterns registers.
class OpPatterns {
public:
  OpPatterns(RewritePatternSet &set, FunctionLowering &lowering) : set(set), lowering(lowering) {}
  /// `lower` for each op type OpTs (a generic lambda serves several).
  template <typename... OpTs, typename F> void add(F lower) {
    (set.add<GraphOpLowering<OpTs>>(set.getContext(), lowering,
                                    typename GraphOpLowering<OpTs>::Lower(lower)),
     ...);
  }
  template <typename Interface> void addInterface(std::function<llvm::Error(Operation *)> lower) {
    set.add<InterfaceLowering<Interface>>(set.getContext(), lowering, std::move(lower));
  }

private:
  RewritePatternSet &set;
  FunctionLowering &lowering;
};

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_LOWERINGPATTERNS_H
