//===- MlcLosses.cpp - the language-model losses as graph ops -------------===//

#include "dialects/mlc/MlcLosses.h"
#include "dialects/mlc/MlcDialect.h"

using namespace mlir;

namespace mlc {

Value buildLanguageModelLoss(OpBuilder &b, Location loc, Value logits, Value labels,
                             LanguageModelLoss kind) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(logits.getType()).getShape();
  int64_t B = s[0], S = s[1], V = s[2];
  Value x = logits, y = labels;
  int64_t rows = B * S;
  if (kind == LanguageModelLoss::Causal) {
    x = b.create<SliceOp>(loc, x, b.getDenseI64ArrayAttr({0, 0, 0}),
                          b.getDenseI64ArrayAttr({B, S - 1, V}), b.getDenseI64ArrayAttr({1, 1, 1}));
    y = b.create<SliceOp>(loc, y, b.getDenseI64ArrayAttr({0, 1}), b.getDenseI64ArrayAttr({B, S}),
                          b.getDenseI64ArrayAttr({1, 1}));
    rows = B * (S - 1);
  }
  auto flat = [&](Value v, ArrayRef<int64_t> shape) -> Value {
    auto t = cast<RankedTensorType>(v.getType());
    return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, t.getElementType()), v);
  };
  // Labels first: the order every frontend has always built them in.
  Value targets = flat(y, {rows});
  Value scores = flat(x, {rows, V});
  return b.create<CrossEntropyOp>(loc, scores, targets, b.getI64IntegerAttr(-100));
}

const char *lossName(LanguageModelLoss kind) {
  return kind == LanguageModelLoss::Causal ? "causal-lm" : "masked-lm";
}

} // namespace mlc
