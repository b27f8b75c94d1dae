//===- GemmEpilogues.cpp - a product's tanh GELU as its GEMM's epilogue ---===//
//
// mlc-gemm-epilogues: the first pass of the lowering pipeline. A tanh GELU
// of a matmul's product (the MLP's first product) costs no kernel of its
// own: the GEMM computes it as its epilogue, storing the product (the
// pre-activation, which the GELU's gradient reads) and the GELU. This pass
// decides where and marks the GELU `mlc.gemm_epilogue`; mlc-lower-to-plan
// emits a marked GELU with its product's GEMM.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringMarks.h"
#include "compiler/codegen/Passes.h"

namespace mlc {
#define GEN_PASS_DEF_MLCGEMMEPILOGUES
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

/// A pointwise fusion of one bf16 input and one bf16 result that is exactly
/// cast to f32, tanh GELU, cast back: the GELU of a bf16 product.
bool mlc::isBf16TanhGelu(FusionOp f) {
  if (f.getKind() != FusionKind::pointwise || f.getInputs().size() != 1 ||
      f.getNumResults() != 1)
    return false;
  Block &body = f.getBody().front();
  auto ops = body.without_terminator();
  if (std::distance(ops.begin(), ops.end()) != 3)
    return false;
  auto it = ops.begin();
  auto widen = dyn_cast<CastOp>(*it++);
  auto g = dyn_cast<GeluOp>(*it++);
  auto narrow = dyn_cast<CastOp>(*it);
  auto yield = cast<YieldOp>(body.getTerminator());
  auto elementOf = [](Value v) { return cast<ShapedType>(v.getType()).getElementType(); };
  return widen && g && narrow && widen.getInput() == body.getArgument(0) &&
         elementOf(widen.getInput()).isBF16() && elementOf(widen.getResult()).isF32() &&
         g.getInput() == widen.getResult() &&
         g.getApproximate() == GeluApproximation::tanh && narrow.getInput() == g.getResult() &&
         elementOf(narrow.getResult()).isBF16() && yield.getValues().size() == 1 &&
         yield.getValues()[0] == narrow.getResult() &&
         f.getResult(0).getType() == f.getInputs()[0].getType();
}

namespace {

/// The GELU `product`'s GEMM computes as its epilogue, or null:
/// - f32 or f64: the product's one mlc.gelu, when it is tanh. Several GELUs
///   of one product (the forward's and its recomputation in backward,
///   mlc-recompute) are all pointwise kernels, since a GPU's epilogue
///   (cuBLASLt's) does not round as mlc's GELU kernel does and a recomputed
///   value must be the forward's, bit for bit. An erf GELU is a kernel.
/// - bf16 (--dtype bf16, mlc-fold-casts' MLP product): a product with no
///   mlc.gelu whose one bf16 tanh GELU fusion (widening at its load,
///   rounding at its store) is the same epilogue with a bf16 pre-activation.
/// - Not with an accumulator: the GELU epilogue would not see it.
Operation *epilogueOf(MatmulOp product) {
  if (product.getAcc())
    return nullptr;
  Type el = cast<ShapedType>(product.getResult().getType()).getElementType();
  GeluOp gelu;
  int gelus = 0;
  for (Operation *user : product.getResult().getUsers())
    if (auto g = dyn_cast<GeluOp>(user)) {
      gelu = g;
      ++gelus;
    }
  if (gelus == 1 && gelu.getApproximate() == GeluApproximation::tanh &&
      (el.isF32() || el.isF64()))
    return gelu;
  if (!el.isBF16() || gelus != 0)
    return nullptr;
  Operation *epilogue = nullptr;
  int found = 0;
  for (Operation *user : product.getResult().getUsers())
    if (auto f = dyn_cast<FusionOp>(user); f && isBf16TanhGelu(f))
      epilogue = f, ++found;
  return found == 1 ? epilogue : nullptr;
}

class GemmEpiloguesPass : public mlc::impl::MlcGemmEpiloguesBase<GemmEpiloguesPass> {
public:
  void runOnOperation() final {
    UnitAttr unit = UnitAttr::get(&getContext());
    getOperation().walk([&](MatmulOp product) {
      if (Operation *gelu = epilogueOf(product)) {
        gelu->setAttr(kGemmEpilogueAttr, unit);
        // The GEMM's step computes the GELU too: located at both.
        product->setLoc(FusedLoc::get({product.getLoc(), gelu->getLoc()}, Attribute(),
                                      &getContext()));
      }
    });
  }
};

} // namespace
