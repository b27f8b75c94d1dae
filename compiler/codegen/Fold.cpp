//===- Fold.cpp - mlc-fold: the graph at its folds' fixpoint ---------------===//
//
// The first pass of the lowering pipeline. mlc-lower-to-plan is a dialect
// conversion, and MLIR's conversion folds an op before it tries the op's
// pattern: a reshape of a reshape becomes a reshape of the first one's
// input, a product by ones its other operand. The decisions the passes
// between recorded on the graph (a result written in its one reader's
// layout, where each value lives) would then be about a graph that no
// longer exists. So the graph is folded here, before those decisions, with
// the same rule the conversion applies (in place, or into existing values
// or constants the op's dialect materializes), until nothing folds; the
// conversion then folds nothing, and mlc-lower-to-plan refuses, on the op,
// a graph that still folds.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlc {
#define GEN_PASS_DEF_MLCFOLD
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;

namespace {

/// Folds `op` once, as MLIR's conversion would; whether the graph changed.
/// An op that returns its own results folded in place (its operands or
/// attributes changed); other results replace the op and erase it.
bool foldOnce(Operation &op, OpBuilder &b) {
  if (matchPattern(&op, m_Constant()))
    return false; // a constant folds to itself
  SmallVector<OpFoldResult> folded;
  if (failed(op.fold(folded)))
    return false;
  if (folded.empty() || llvm::all_of(llvm::zip(folded, op.getResults()), [](auto pair) {
        return dyn_cast<Value>(std::get<0>(pair)) == std::get<1>(pair);
      }))
    return true;
  b.setInsertionPoint(&op);
  SmallVector<Value> values;
  SmallVector<Operation *> constants;
  for (auto [result, f] : llvm::zip(op.getResults(), folded)) {
    if (auto v = dyn_cast<Value>(f)) {
      values.push_back(v);
      continue;
    }
    Operation *c = op.getDialect()->materializeConstant(b, cast<Attribute>(f), result.getType(),
                                                          op.getLoc());
    if (!c) { // as the conversion: no constant, no fold
      for (Operation *made : constants)
        made->erase();
      return false;
    }
    constants.push_back(c);
    values.push_back(c->getResult(0));
  }
  op.replaceAllUsesWith(values);
  op.erase();
  return true;
}

class FoldPass : public mlc::impl::MlcFoldBase<FoldPass> {
public:
  void runOnOperation() final {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      Block &body = fn.getBody().front();
      OpBuilder b(&getContext());
      // Each round folds every op in order; a fold can enable another (a
      // reshape of a reshape of a reshape), so again until none does. A
      // fold that claims a change every round (an in-place fold that changes
      // nothing) would never end: refused after as many rounds as ops.
      int64_t rounds = 0, limit = 1 + std::distance(body.begin(), body.end());
      for (bool changed = true; changed; ++rounds) {
        if (rounds > limit) {
          fn.emitError("mlc-fold: @") << fn.getSymName() << " still folds after " << limit
                                      << " rounds (a fold that reports a change it did not make)";
          return signalPassFailure();
        }
        changed = false;
        for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
          changed |= foldOnce(op, b);
      }
      // What the folds left unread (the inner reshape) costs no kernel.
      // Last to first, so that a chain goes in one sweep.
      SmallVector<Operation *> ops;
      for (Operation &op : body.without_terminator())
        ops.push_back(&op);
      for (Operation *op : llvm::reverse(ops))
        if (isOpTriviallyDead(op))
          op->erase();
    }
  }
};

} // namespace
