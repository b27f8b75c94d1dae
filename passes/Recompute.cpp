//===- Recompute.cpp - activation recomputation on the training step ------===//
//
// Trades compute for memory: forward values that backward reads are either
// kept from forward to backward (saved activations, the bulk of a training
// step's memory) or computed again in backward from values that are kept.
// The pass decides which, by `mode`, and writes the decision into the IR
// as clones of forward ops placed in backward, so the memory planner, the
// fusions and every report see it. Passes.td describes the modes.
//
// 1. Split @train_step at the loss's op: forward before and at it,
//    backward after it (mlc-autodiff's order, which canonicalization and CSE
//    keep).
// 2. Give every forward op its layer, from its parameters' names, else its
//    operands' layers.
// 3. Decide per forward value whether backward reads a clone of it
//    (`cloned`): full: every value of a layer but its output; selective:
//    values of cheap ops computable from kept values; full+selective: full
//    on layers 0 to num-layers - 1, selective on every other value (what
//    `mlc compile --recompute auto` chooses between, compiler/tools/
//    RecomputeAuto.cpp).
// 4. Walk backward in order; each operand that is a cloned value is
//    replaced by its clone, built (with the clones it needs, recursively)
//    right before the first backward op that reads it.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

#include <cctype>

namespace mlc {
#define GEN_PASS_DEF_MLCRECOMPUTE
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

int64_t mlc::layerOfParameterName(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (StringRef p : parts) {
    int64_t n;
    if (!p.empty() && llvm::all_of(p, ::isdigit) && !p.getAsInteger(10, n))
      return n;
  }
  return -1;
}

namespace {

/// A tanh GELU of a product is that GEMM's epilogue (mlc-lower-to-plan;
/// cuBLASLt's on a GPU, which rounds its own way): only the GEMM could
/// compute the same bits again.
bool isGemmEpilogue(Operation *op) {
  auto gelu = dyn_cast<GeluOp>(op);
  if (!gelu || gelu.getApproximate() != GeluApproximation::tanh)
    return false;
  auto product = gelu.getInput().getDefiningOp<MatmulOp>();
  Type el = cast<RankedTensorType>(gelu.getType()).getElementType();
  return product && !product.getAcc() && (el.isF32() || el.isF64());
}

/// Ops whose values selective recomputation computes again: pointwise ops
/// (those with a scalar rule, as mlc-fuse-elementwise groups them), rotary
/// embeddings, the norms and reshapes. No GEMM, attention, reduction,
/// gather or copy, and no GEMM's epilogue.
bool isCheap(Operation *op) {
  return isa<ScalarOpInterface, RotaryOp, LayerNormOp, RmsNormOp, ReshapeOp, TpCopyOp>(
             op) &&
         !isa<ConstantOp>(op) && !isGemmEpilogue(op);
}

/// One function's recomputation, step by step (the file's comment numbers
/// the steps): each step is a method, their shared facts are members.
class RecomputeWalk {
public:
  struct Options {
    bool full, selective, regather;
    int64_t numLayers;
  };
  RecomputeWalk(func::FuncOp fn, Options options)
      : fn(fn), block(fn.getBody().front()),
        ret(cast<func::ReturnOp>(block.getTerminator())), options(options) {}

  /// Rewrites the function; counts the values recomputed and ops cloned.
  LogicalResult run(int64_t &recomputedValues, int64_t &clonedOps) {
    if (fn.getNumResults() == 0)
      return fn.emitError("mlc-recompute: @") << fn.getSymName() << " returns no loss";
    lossOp = ret.getOperand(lossResultIndex(fn)).getDefiningOp();
    if (!lossOp)
      return success(); // the loss is an argument: there is no forward
    divide();
    if (!assignLayers() && options.full)
      return fn.emitError("mlc-recompute: full recomputation keeps each "
                          "layer's input, but no parameter of @")
             << fn.getSymName()
             << " names a layer (a numbered component, like h.3. or layers.3.)";
    // 3. Decided before any reader changes.
    for (Operation &op : block.without_terminator()) {
      if (position.lookup(&op) > lossPos)
        break;
      for (Value r : op.getResults())
        isCloned(r);
    }
    placeClones(recomputedValues, clonedOps);
    return success();
  }

private:
  /// 1. Forward and backward, divided at the loss's op; the values backward
  /// reads (saved: the return's loss is no such read).
  void divide() {
    bool afterLoss = false;
    for (Operation &op : block.without_terminator()) {
      position[&op] = position.size();
      if (afterLoss)
        backward.push_back(&op);
      afterLoss |= &op == lossOp;
    }
    lossPos = position.lookup(lossOp);
    for (Operation *op : backward)
      for (Value v : op->getOperands())
        if (isForward(v))
          saved.insert(v);
  }

  bool isForward(Value v) const {
    Operation *d = v.getDefiningOp();
    return d && d->getBlock() == &block && position.lookup(d) <= lossPos;
  }

  /// A view of an argument (a tensor-parallel norm's weight or bias read
  /// through its tp_copy) holds no bytes of its own: it is at hand.
  bool viewOfArgument(Value v) const {
    if (!isForward(v))
      return true;
    Operation *op = v.getDefiningOp();
    return isa<ReshapeOp, TpCopyOp>(op) && viewOfArgument(op->getOperand(0));
  }

  /// 2. Each forward op's layer: its parameters', else its operands'
  /// highest, else -1. Whether any op has a layer.
  bool assignLayers() {
    bool anyLayer = false;
    for (Operation &op : block.without_terminator()) {
      if (position.lookup(&op) > lossPos)
        break;
      int64_t fromParams = -2, fromOperands = -2;
      for (Value v : op.getOperands()) {
        if (auto arg = dyn_cast<BlockArgument>(v)) {
          if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "mlc.param"))
            fromParams = std::max(fromParams, layerOfParameterName(name.getValue()));
        } else if (isForward(v)) {
          fromOperands = std::max(fromOperands, layer.lookup(v.getDefiningOp()));
        }
      }
      int64_t l = fromParams != -2 ? fromParams : fromOperands != -2 ? fromOperands : -1;
      layer[&op] = l;
      anyLayer |= l >= 0;
    }
    return anyLayer;
  }

  /// Never a cross-entropy loss's operands (the logits, the labels and
  /// their reshapes): its gradient reads them right after it, and the
  /// lowering fuses the two (the gradient written over the logits in
  /// place, so the logits are not saved) only when both read the same
  /// values. A clone would free nothing and leave the loss and its
  /// gradient in two kernels that round their shared sums differently.
  bool readByLoss(Value v) const {
    return isa<CrossEntropyOp>(lossOp) && llvm::is_contained(lossOp->getOperands(), v);
  }

  /// 3. Whether backward reads a clone of forward value `v` (memoized).
  bool isCloned(Value v) {
    if (!isForward(v))
      return false;
    auto it = cloned.find(v);
    if (it != cloned.end())
      return it->second;
    Operation *op = v.getDefiningOp();
    bool yes = false;
    if (isPure(op) && op->getNumRegions() == 0 && op->getNumOperands() > 0 && op != lossOp &&
        !readByLoss(v)) {
      int64_t l = layer.lookup(op);
      if (options.full && l >= 0 && (options.numLayers < 0 || l < options.numLayers)) {
        // A value of layer L (of the first num-layers), unless a forward
        // op outside L reads it (the layer's output, the next one's
        // input, is kept, also under full+selective).
        yes = llvm::none_of(v.getUsers(), [&](Operation *u) {
          return u != ret && position.lookup(u) <= lossPos && layer.lookup(u) != l;
        });
      } else if (options.selective) {
        // A cheap op whose operands are all at hand in backward: kept
        // (saved, an argument) or cloned themselves.
        yes = isCheap(op) && llvm::all_of(op->getOperands(), [&](Value u) {
                return !isForward(u) || saved.contains(u) || isCloned(u) ||
                       isa<ConstantOp>(u.getDefiningOp()) || viewOfArgument(u);
              });
      }
    }
    // A reshape or tp_copy is a view of its operand (the plan aliases
    // it): cloning it frees bytes only when its operand is recomputed too.
    if (yes && isa<ReshapeOp, TpCopyOp>(op))
      yes = isCloned(op->getOperand(0));
    // regather: an all-gather's tokens are gathered again in backward
    // from the saved shard, and so are their views and casts.
    if (options.regather && !yes && op && op != lossOp && !readByLoss(v))
      yes = isa<TpAllGatherOp>(op) ||
            (isa<ReshapeOp, CastOp>(op) && isCloned(op->getOperand(0)));
    cloned[v] = yes;
    return yes;
  }

  /// The clone of `v` (with the clones it needs, recursively) at the
  /// builder's insertion point, or `v` when it is not cloned.
  Value materialize(Value v) {
    if (!isCloned(v))
      return v;
    if (Value c = clones.lookupOrNull(v))
      return c;
    Operation *op = v.getDefiningOp();
    for (Value operand : op->getOperands())
      if (!clones.contains(operand))
        if (Value c = materialize(operand); c != operand)
          clones.map(operand, c);
    // Marked, so that no fusion moves the clone back into forward (where
    // its value would be kept again): mlc-fuse-elementwise merges
    // siblings at the earlier one's place only when none is recomputed.
    builder.clone(*op, clones)->setAttr(kRecomputedAttr, builder.getUnitAttr());
    ++clonedOps_;
    return clones.lookup(v);
  }

  /// 4. Clones, right before their first backward reader.
  void placeClones(int64_t &recomputedValues, int64_t &clonedOps) {
    for (Operation *op : backward) {
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (!isForward(v) || !isCloned(v))
          continue;
        if (!clones.contains(v))
          ++recomputedValues;
        builder.setInsertionPoint(op);
        use.set(materialize(v));
      }
    }
    clonedOps += clonedOps_;
  }

  func::FuncOp fn;
  Block &block;
  func::ReturnOp ret;
  Options options;
  Operation *lossOp = nullptr;
  llvm::DenseMap<Operation *, int64_t> position;
  SmallVector<Operation *> backward;
  int64_t lossPos = 0;
  llvm::DenseSet<Value> saved;
  llvm::DenseMap<Operation *, int64_t> layer;
  llvm::DenseMap<Value, bool> cloned;
  IRMapping clones;
  OpBuilder builder{fn.getContext()};
  int64_t clonedOps_ = 0;
};

class RecomputePass : public mlc::impl::MlcRecomputeBase<RecomputePass> {
public:
  using MlcRecomputeBase::MlcRecomputeBase;

  void runOnOperation() final {
    if ((mode.empty() || mode == "none") && !regather)
      return;
    if (mode.empty())
      mode = "none";
    if (mode != "none" && mode != "full" && mode != "selective" && mode != "full+selective") {
      getOperation().emitError(
          "mlc-recompute: mode must be full, selective, full+selective or none, got '")
          << mode << "'";
      return signalPassFailure();
    }
    auto fn = getOperation().lookupSymbol<func::FuncOp>(stepName);
    if (!fn) // a forward-only module: nothing is saved for backward
      return;
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("mlc-recompute: expects a single-block function");
      return signalPassFailure();
    }
    RecomputeWalk::Options options{mode == "full" || mode == "full+selective",
                                   mode == "selective" || mode == "full+selective",
                                   regather, numLayers};
    int64_t values = 0, ops = 0;
    if (failed(RecomputeWalk(fn, options).run(values, ops)))
      return signalPassFailure();
    recomputedValues += values;
    clonedOps += ops;
  }
};

} // namespace
