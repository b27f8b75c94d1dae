//===- Autodiff.cpp - reverse-mode differentiation of the graph ------------===//
//
// Builds @train_step from @forward: the loss and every parameter's gradient.
// The pass walks the graph backwards and delegates each op's rule to its
// GradientOpInterface; it owns only activity analysis, the order of rules and
// the summing of adjoints.
//
// An op marked `mlc.stop_gradient` (a unit attribute) passes its values
// forward but no gradient back (torch's detach): its results are constants
// to the activity analysis, so nothing upstream of them is differentiated
// through them and no forward value is kept for their rules. The
// vocabulary-parallel loss marks its shift (the row maxima) so. The train
// step drops the marks once differentiated (@forward keeps them).
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlc {
#define GEN_PASS_DEF_MLCAUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

unsigned mlc::lossResultIndex(func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, "mlc.output"))
      if (name.getValue() == "loss")
        return i;
  return 0;
}

namespace {

/// The unit attribute that detaches an op's results (see the file comment).
constexpr llvm::StringLiteral kStopGradient = "mlc.stop_gradient";

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

class AutodiffPass : public mlc::impl::MlcAutodiffBase<AutodiffPass> {
public:
  using MlcAutodiffBase::MlcAutodiffBase;

  void runOnOperation() final {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(forwardName);
    if (!forward) {
      module.emitError("mlc-autodiff: no function @") << forwardName;
      return signalPassFailure();
    }
    if (module.lookupSymbol(stepName)) {
      forward.emitError("mlc-autodiff: @") << stepName << " already exists";
      return signalPassFailure();
    }
    if (!forward.getBody().hasOneBlock()) {
      forward.emitError("mlc-autodiff: expects a single-block function");
      return signalPassFailure();
    }
    OpBuilder moduleBuilder(module.getContext());
    moduleBuilder.setInsertionPointAfter(forward);
    auto step = cast<func::FuncOp>(moduleBuilder.clone(*forward));
    step.setSymName(stepName);
    if (failed(differentiate(step)))
      return signalPassFailure();
  }

private:
  LogicalResult differentiate(func::FuncOp fn) {
    Block &block = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());

    // The loss: the result marked mlc.output = "loss", else the first.
    unsigned lossIndex = lossResultIndex(fn);
    if (fn.getNumResults() == 0)
      return fn.emitError("mlc-autodiff: @") << fn.getSymName() << " returns no loss";
    Value loss = ret.getOperand(lossIndex);
    auto lossType = dyn_cast<RankedTensorType>(loss.getType());
    if (!lossType || lossType.getRank() != 0 || !isFloatTensor(loss))
      return fn.emitError("mlc-autodiff: the loss must be a 0-d float tensor, got ")
             << loss.getType();

    SmallVector<BlockArgument> params;
    for (BlockArgument arg : block.getArguments())
      if (fn.getArgAttr(arg.getArgNumber(), "mlc.param"))
        params.push_back(arg);

    // Activity: values that depend on a parameter and that the loss depends on.
    llvm::DenseSet<Value> varied(params.begin(), params.end());
    for (Operation &op : block.without_terminator())
      if (!op.hasAttr(kStopGradient) &&
          llvm::any_of(op.getOperands(), [&](Value v) { return varied.count(v); }))
        for (Value r : op.getResults())
          if (isFloatTensor(r))
            varied.insert(r);
    llvm::DenseSet<Value> useful{loss};
    for (Operation &op : llvm::reverse(block.without_terminator()))
      if (llvm::any_of(op.getResults(), [&](Value v) { return useful.count(v); }))
        for (Value v : op.getOperands())
          useful.insert(v);
    auto active = [&](Value v) { return varied.count(v) && useful.count(v); };

    // Collect the forward ops before emitting backward ops after them.
    SmallVector<Operation *> forwardOps;
    for (Operation &op : block.without_terminator())
      forwardOps.push_back(&op);

    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> adjoint;
    auto accumulate = [&](Value v, Value g) {
      auto [it, inserted] = adjoint.try_emplace(v, g);
      if (!inserted)
        it->second = b.create<AddOp>(v.getLoc(), it->second, g);
    };
    Type lossEl = lossType.getElementType();
    accumulate(loss, b.create<ConstantOp>(
                         loss.getLoc(),
                         DenseElementsAttr::get(lossType, b.getFloatAttr(lossEl, 1.0))));

    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        Value g = active(r) ? adjoint.lookup(r) : Value();
        resultGrads.push_back(g);
        any |= bool(g);
      }
      if (!any)
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule)
        return op->emitOpError("has no gradient rule, but it lies between the "
                               "parameters and the loss");
      SmallVector<Value> operandGrads;
      if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
        return failure();
      assert(operandGrads.size() == op->getNumOperands() &&
             "a gradient rule must return one entry per operand");
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!grad || !active(operand))
          continue;
        assert(grad.getType() == operand.getType() && "gradient type mismatch");
        accumulate(operand, grad);
      }
    }

    // Return the loss and one gradient per parameter (zeros if it has none).
    SmallVector<Value> results{loss};
    for (BlockArgument p : params) {
      Value g = adjoint.lookup(p);
      if (!g) {
        auto t = cast<RankedTensorType>(p.getType());
        g = b.create<ConstantOp>(p.getLoc(), DenseElementsAttr::get(
                                                 t, b.getFloatAttr(t.getElementType(), 0.0)));
      }
      results.push_back(g);
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    fn.setFunctionType(b.getFunctionType(block.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    SmallVector<DictionaryAttr> resultAttrs;
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr("mlc.output", b.getStringAttr("loss"))));
    for (BlockArgument p : params)
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          "mlc.grad", fn.getArgAttr(p.getArgNumber(), "mlc.param"))));
    fn.setAllResultAttrs(resultAttrs);

    // Forward values that fed only the dropped outputs (logits) die here.
    // (A vector, not a reverse iterator: std::reverse_iterator keeps the
    // position of the element after the one it yields, which erasing frees.)
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (op->use_empty() && isPure(op))
        op->erase();
    // The marks are spent: the train step prints as if they were never there.
    for (Operation &op : block)
      op.removeAttr(kStopGradient);
    return success();
  }
};

} // namespace
