//===- FuseOptimizer.cpp - one AdamW kernel and one norm reduction ---------===//
//
// mlc-optimizer writes AdamW as one chain of pointwise ops per parameter
// and the gradient norm as one reduction per gradient. Both are the same
// computation for every element of the flat buffers, so each function
// becomes one fusion: its region is the chain of one parameter rebuilt over
// rank-0 values (one element), and the lowering runs it across the flat
// buffers (KernelEmitters: emitOptimizerFusion, emitNormFusion).
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"
#include "contract/OptimizerScalars.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlc {
#define GEN_PASS_DEF_MLCFUSEOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

/// The ops of `fn` that depend on `roots`, in program order.
SmallVector<Operation *> chainOf(func::FuncOp fn, ArrayRef<Value> roots) {
  llvm::SetVector<Operation *> ops;
  llvm::DenseSet<Value> reached(roots.begin(), roots.end());
  for (Operation &op : fn.getBody().front().without_terminator())
    if (llvm::any_of(op.getOperands(), [&](Value v) { return reached.count(v); })) {
      ops.insert(&op);
      for (Value r : op.getResults())
        reached.insert(r);
    }
  return SmallVector<Operation *>(ops.begin(), ops.end());
}

/// Op names of a chain, for comparing parameters' chains.
SmallVector<StringRef> signature(ArrayRef<Operation *> chain) {
  SmallVector<StringRef> names;
  for (Operation *op : chain)
    names.push_back(op->getName().getStringRef());
  return names;
}

/// Rebuilds `chain` inside `block` over rank-0 values: every op keeps its
/// name and attributes, its results become rank-0 tensors of their element
/// types. `map` holds the block's stand-ins for the chain's inputs.
LogicalResult rebuild(OpBuilder &b, ArrayRef<Operation *> chain, IRMapping &map) {
  for (Operation *op : chain) {
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      if (!map.contains(v))
        return op->emitError("mlc-fuse-optimizer: an operand comes from outside the update");
      operands.push_back(map.lookup(v));
    }
    SmallVector<Type> types;
    for (Type t : op->getResultTypes())
      types.push_back(RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType()));
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(operands);
    state.addTypes(types);
    state.addAttributes(op->getAttrs());
    Operation *copy = b.create(state);
    for (auto [from, to] : llvm::zip(op->getResults(), copy->getResults()))
      map.map(from, to);
  }
  return success();
}

/// Erases the ops the fusion replaced (users before producers).
void eraseDeadOps(func::FuncOp fn) {
  SmallVector<Operation *> ops;
  for (Operation &op : fn.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && !isa<FusionOp>(op))
      op->erase();
}

LogicalResult fuseNorm(func::FuncOp fn) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  if (fn.getNumArguments() == 0 || ret.getNumOperands() != 1)
    return fn.emitError("mlc-fuse-optimizer: @grad_norm must take gradients and return the norm");
  // The element chain: from the first gradient to (not including) its sum.
  BlockArgument g0 = fn.getArgument(0);
  SmallVector<Operation *> chain;
  for (Operation *op : chainOf(fn, {g0})) {
    if (isa<ReduceSumOp>(op))
      break;
    chain.push_back(op);
  }
  if (chain.empty())
    return fn.emitError("mlc-fuse-optimizer: @grad_norm has no element chain");
  OpBuilder b(ret);
  Type el = cast<RankedTensorType>(g0.getType()).getElementType();
  auto f64 = RankedTensorType::get({}, b.getF64Type());
  auto fusion = b.create<FusionOp>(fn.getLoc(), FusionKind::norm, TypeRange{f64},
                                   ValueRange(fn.getArguments()));
  Block &block = fusion.getBody().front();
  while (block.getNumArguments())
    block.eraseArgument(0);
  block.addArgument(RankedTensorType::get({}, el), fn.getLoc());
  IRMapping map;
  map.map(g0, block.getArgument(0));
  OpBuilder inner = OpBuilder::atBlockEnd(&block);
  if (failed(rebuild(inner, chain, map)))
    return failure();
  inner.create<YieldOp>(fn.getLoc(), ValueRange{map.lookup(chain.back()->getResult(0))});
  ret->setOperand(0, fusion.getResult(0));
  eraseDeadOps(fn);
  return success();
}

LogicalResult fuseAdamW(func::FuncOp fn) {
  unsigned args = fn.getNumArguments();
  if (args < 5 || (args - 1) % 4)
    return fn.emitError("mlc-fuse-optimizer: @optimizer must take 4 tensors per parameter and "
                        "the scalars");
  size_t n = (args - 1) / 4;
  Value h = fn.getArgument(4 * n);
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  if (ret.getNumOperands() != 3 * n)
    return fn.emitError("mlc-fuse-optimizer: @optimizer must return 3 tensors per parameter");
  // The scalars, as mlc-optimizer extracts them: slice -> reshape (-> cast).
  SmallVector<Value> scalars(kAdamWScalarCount);
  for (Operation *slice : h.getUsers()) {
    auto s = dyn_cast<SliceOp>(slice);
    if (!s || !s->hasOneUse())
      return slice->emitError("mlc-fuse-optimizer: unexpected use of the optimizer scalars");
    auto reshape = dyn_cast<ReshapeOp>(*s->getUsers().begin());
    if (!reshape)
      return slice->emitError("mlc-fuse-optimizer: unexpected use of the optimizer scalars");
    int64_t k = s.getStarts()[0];
    if (k < 0 || k >= kAdamWScalarCount)
      return slice->emitError("mlc-fuse-optimizer: scalar index out of range");
    // Cast to the parameters' type (an f64 model has no cast: it folded).
    scalars[k] = reshape.getResult();
    if (reshape->hasOneUse())
      if (auto cast = dyn_cast<CastOp>(*reshape->getUsers().begin()))
        scalars[k] = cast.getResult();
  }
  // Each parameter's chain; the template is one that decays (it holds the
  // decay multiply), else the first.
  auto paramChain = [&](size_t i) {
    return chainOf(fn, {fn.getArgument(i), fn.getArgument(n + i), fn.getArgument(2 * n + i),
                        fn.getArgument(3 * n + i)});
  };
  auto decays = [&](ArrayRef<Operation *> chain) {
    return scalars[kDecay] && llvm::any_of(chain, [&](Operation *op) {
             return llvm::is_contained(op->getOperands(), scalars[kDecay]);
           });
  };
  size_t templ = 0;
  SmallVector<bool> decay(n);
  for (size_t i = 0; i < n; ++i) {
    decay[i] = decays(paramChain(i));
    if (decay[i] && !decay[templ])
      templ = i;
  }
  SmallVector<Operation *> chain = paramChain(templ);
  SmallVector<StringRef> full = signature(chain), bare;
  for (Operation *op : chain)
    if (!(decays({op}) && isa<MulOp>(op)))
      bare.push_back(op->getName().getStringRef());
  for (size_t i = 0; i < n; ++i) {
    SmallVector<StringRef> sig = signature(paramChain(i));
    if (sig != (decay[i] ? full : bare))
      return fn.emitError("mlc-fuse-optimizer: the update of parameter #")
             << i << " differs from the others";
  }

  OpBuilder b(ret);
  Type el = cast<RankedTensorType>(fn.getArgument(0).getType()).getElementType();
  auto scalar = RankedTensorType::get({}, el);
  SmallVector<Value> inputs{h};
  for (unsigned i = 0; i < 4 * n; ++i)
    inputs.push_back(fn.getArgument(i));
  auto fusion = b.create<FusionOp>(fn.getLoc(), FusionKind::optimizer,
                                   TypeRange(ret.getOperandTypes()), inputs);
  fusion->setAttr("mlc.decay", b.getDenseBoolArrayAttr(decay));
  Block &block = fusion.getBody().front();
  while (block.getNumArguments())
    block.eraseArgument(0);
  // p, g, m, v, the decay factor, then the scalars before kDecay.
  for (int k = 0; k < 5 + kDecay; ++k)
    block.addArgument(scalar, fn.getLoc());
  IRMapping map;
  for (int k = 0; k < 4; ++k)
    map.map(fn.getArgument(k * n + templ), block.getArgument(k));
  if (scalars[kDecay])
    map.map(scalars[kDecay], block.getArgument(4));
  for (int k = 0; k < kDecay; ++k)
    if (scalars[k])
      map.map(scalars[k], block.getArgument(5 + k));
  OpBuilder inner = OpBuilder::atBlockEnd(&block);
  if (failed(rebuild(inner, chain, map)))
    return failure();
  SmallVector<Value> yields;
  for (int k = 0; k < 3; ++k) {
    Value result = ret.getOperand(k * n + templ);
    if (!map.contains(result))
      return fn.emitError("mlc-fuse-optimizer: a result of the update is not computed by it");
    yields.push_back(map.lookup(result));
  }
  inner.create<YieldOp>(fn.getLoc(), yields);
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    ret->setOperand(i, fusion.getResult(i));
  eraseDeadOps(fn);
  return success();
}

class FuseOptimizerPass : public mlc::impl::MlcFuseOptimizerBase<FuseOptimizerPass> {
public:
  void runOnOperation() final {
    for (auto fn : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      if (!fn->hasAttr("mlc.optimizer"))
        continue;
      LogicalResult done = fn.getSymName() == mlc::kGradNormFn   ? fuseNorm(fn)
                           : fn.getSymName() == mlc::kOptimizerFn ? fuseAdamW(fn)
                                                             : success();
      if (failed(done))
        return signalPassFailure();
    }
  }
};

} // namespace
