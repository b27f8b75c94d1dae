//===- Autocast.cpp - matrix products in bf16 -------------------------------===//
//
// Mixed precision the way bf16 autocast does it: the products, which hold
// nearly all of a step's FLOPs, read and write bf16 (tensor cores on the
// GPU, f32 accumulation); every other op keeps f32, so do the parameters,
// their gradients and the optimizer. The casts are pointwise ops: the one
// after a product fuses into its consumers, the one before it into its
// producer.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCAUTOCAST
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

class AutocastPass : public mlc::impl::MlcAutocastBase<AutocastPass> {
public:
  using MlcAutocastBase::MlcAutocastBase;

  void runOnOperation() final {
    ModuleOp module = getOperation();
    if (dtype != "bf16") {
      module.emitError("mlc-autocast: dtype must be bf16, got '") << dtype << "'";
      return signalPassFailure();
    }
    module->setAttr("mlc.autocast", StringAttr::get(&getContext(), dtype));
    for (auto fn : module.getOps<func::FuncOp>())
      narrowProducts(fn);
  }

private:
  void narrowProducts(func::FuncOp fn) {
    Type narrow = BFloat16Type::get(&getContext());
    SmallVector<MatmulOp> products;
    fn.walk([&](MatmulOp op) {
      if (cast<RankedTensorType>(op.getType()).getElementType().isF32())
        products.push_back(op);
    });
    OpBuilder b(&getContext());
    for (MatmulOp op : products) {
      b.setInsertionPoint(op);
      auto to = [&](Value v, Type el) {
        auto t = cast<RankedTensorType>(v.getType());
        return b.create<CastOp>(op.getLoc(), RankedTensorType::get(t.getShape(), el), v)
            .getResult();
      };
      Value lhs = to(op.getLhs(), narrow), rhs = to(op.getRhs(), narrow);
      Value wide;
      // The f32 bias (and accumulator) added to the f32 sums, as
      // add(cast(product), bias).
      if (op.getBias() || op.getAcc())
        wide = b.create<MatmulOp>(op.getLoc(), lhs, rhs, op.getTransposeLhs(),
                                  op.getTransposeRhs(), /*f32_result=*/true, op.getBias(),
                                  op.getAcc());
      else
        wide = to(b.create<MatmulOp>(op.getLoc(), lhs, rhs, op.getTransposeLhs(),
                                     op.getTransposeRhs())
                      .getResult(),
                  b.getF32Type());
      op.getResult().replaceAllUsesWith(wide);
      op.erase();
    }
  }
};

} // namespace
