//===- Frontend.cpp - the contract between frontends and the compiler ------===//

#include "contract/StepFunctions.h"
#include "frontend/Frontend.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace mlc {

static llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Error verifyFrontendModule(ModuleOp module, bool training) {
  auto forward = module.lookupSymbol<func::FuncOp>(mlc::kForwardFn);
  if (!forward)
    return error("the model has no @forward function");
  if (forward.isExternal() || !forward.getBody().hasOneBlock())
    return error("@forward must have a body of one block");
  llvm::StringSet<> params, inputs;
  for (BlockArgument arg : forward.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto p = forward.getArgAttrOfType<StringAttr>(i, "mlc.param");
    auto in = forward.getArgAttrOfType<StringAttr>(i, "mlc.input");
    std::string where = "@forward argument #" + std::to_string(i);
    if (bool(p) == bool(in))
      return error(where + " must be marked either mlc.param or mlc.input");
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return error(where + " is not a ranked tensor");
    if (p) {
      if (p.getValue().empty() || !params.insert(p.getValue()).second)
        return error(where + ": parameter name '" + p.getValue() +
                     "' is empty or used twice");
      if (!isa<FloatType>(type.getElementType()) || !type.hasStaticShape())
        return error("parameter '" + p.getValue() +
                     "' must be a statically shaped float tensor");
      if (auto init = forward.getArgAttrOfType<StringAttr>(i, "mlc.init")) {
        StringRef s = init.getValue();
        double std;
        if (s != "zeros" && s != "ones" && s != "package" &&
            !(s.consume_front("normal:") && !s.getAsDouble(std) && std >= 0))
          return error("parameter '" + p.getValue() + "' has init '" + init.getValue() +
                       "' (normal:STD, zeros, ones or package)");
      }
    } else {
      if (in.getValue().empty() || !inputs.insert(in.getValue()).second)
        return error(where + ": input name '" + in.getValue() + "' is empty or used twice");
      for (int64_t d = 1; d < type.getRank(); ++d)
        if (type.isDynamicDim(d))
          return error("input '" + in.getValue() + "' has a dynamic dimension " +
                       std::to_string(d) + "; only the leading (token) dimension may be");
    }
  }
  bool loss = false;
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, "mlc.output");
    if (!name)
      continue;
    auto type = dyn_cast<RankedTensorType>(forward.getResultTypes()[i]);
    if (name.getValue() == "loss")
      loss = type && type.getRank() == 0 && isa<FloatType>(type.getElementType());
  }
  // A logits-only import leaves the loss to mlc-infer-loss.
  if (training && !loss && !forward->hasAttr("mlc.infer_loss"))
    return error("training needs @forward to return a scalar float result marked "
                 "mlc.output = \"loss\"");
  return llvm::Error::success();
}

} // namespace mlc
