//===- FoldCasts.cpp - casts as conversions at a neighbour's load or store ===//
//
// --dtype bf16 (mlc-autocast) puts a cast on every edge between a product
// and the f32 ops around it. A cast must never be a pass over memory of its
// own: it is a conversion at a store or a load of the kernel beside it.
// Most casts get there by mlc-fuse-elementwise (a cast is pointwise, so it
// joins the fusion that computes or reads its value). This pass decides the
// cases where grouping cannot, before it runs, and records each decision in
// the IR:
//
//   A bf16 product widened to f32 for several readers: when every reader
//   is pointwise, each gets a widening cast of its own, which joins its
//   kernel as a conversion at the load, so the GEMM stores 2 bytes per
//   element and every reader loads 2 (SwiGLU's gate and up products, read
//   by the forward's SwiGLU and by its gradients). Otherwise the product
//   becomes an `f32_result` product, stored once in f32, and the readers
//   read it as they do in f32. A widening cast with several readers could
//   join at most one of their kernels, and would otherwise be a kernel of
//   its own that reads 2 bytes and writes 4 per element.
//
//   A biased product that a GELU reads (the MLP's first projection) is
//   stored in bf16 with its bias in bf16, the way bf16 autocast computes a
//   linear layer: the GELU and its gradient read the bf16 pre-activation
//   through a widening cast each (a conversion at their loads), where they
//   read an f32 one. Half the bytes of the GEMM's store and of both
//   readers' loads; the GELU still computes in f32.
//
//   An attention (or its gradient) whose every result reaches, through
//   views alone (transposes, reshapes, each read once), a cast to bf16 for
//   the next product becomes `bf16_result`: the kernel stores its results
//   in bf16, and the cast, otherwise a kernel of its own that reads the f32
//   result back, is gone (the output projection's input; Llama's dQ, dK,
//   dV for the projections' input-gradient GEMMs). Bit for bit the same
//   values: the kernel rounds where the cast did.
//
//   A cast of a LayerNorm's or RMSNorm's input gradient dx to bf16 (the
//   next products' copy, where dx itself goes on in f32 along the residual
//   stream) is marked `mlc.producer_copy`: the gradient's kernel writes it
//   as a second store of dx, converted (Llama: no dropout or bias gradient
//   kernel reads dx to take the cast, which was a kernel of its own).
//
//   The casts of parameters (the weights' bf16 copies for the products)
//   become one `mlc.fusion params`: a single kernel over the flat
//   parameter buffer writes every copy, instead of one cast kernel per
//   weight in every layer. Only when the cast parameters hold at least
//   half of the parameters' elements (the kernel maps all of them).
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCFOLDCASTS
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// cast(matmul(a, b) : bf16) : f32 read by more than one op, the product
/// read by the cast alone and free of epilogues (a bias or accumulator
/// already makes it f32_result).
bool isSharedWidening(CastOp c) {
  auto product = c.getInput().getDefiningOp<MatmulOp>();
  if (!product || product.getF32Result() || product.getBias() || product.getAcc() ||
      !product->hasOneUse() || !elementOf(product.getResult()).isBF16() ||
      !elementOf(c.getResult()).isF32())
    return false;
  llvm::SmallPtrSet<Operation *, 4> readers(c->getUsers().begin(), c->getUsers().end());
  return readers.size() >= 2;
}

/// Every reader of `v` computes per element (its kernel can convert at the
/// load).
bool pointwiseReaders(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *u) { return isa<ScalarOpInterface>(u); });
}

/// Each use of `wide` but the first reads a widening cast of its own,
/// inserted before its reader, of the same bf16 value.
void castPerReader(CastOp wide) {
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : wide.getResult().getUses())
    uses.push_back(&use);
  for (OpOperand *use : llvm::drop_begin(uses)) {
    OpBuilder b(use->getOwner());
    use->set(b.create<CastOp>(wide.getLoc(), wide.getType(), wide.getInput()));
  }
}

/// matmul(a, b) f32_result bias(c) (bf16 operands, f32 bias, no
/// accumulator) read by a GELU and otherwise by pointwise ops alone.
bool isGeluProduct(MatmulOp p) {
  return p.getF32Result() && p.getBias() && !p.getAcc() &&
         elementOf(p.getLhs()).isBF16() && elementOf(p.getBias()).isF32() &&
         pointwiseReaders(p.getResult()) &&
         llvm::any_of(p.getResult().getUsers(), [](Operation *u) { return isa<GeluOp>(u); });
}

/// The product in bf16 with a bf16 copy of its bias, each reader reading
/// it through a widening cast of its own.
void narrowGeluProduct(MatmulOp p) {
  OpBuilder b(p);
  Location loc = p.getLoc();
  auto bias = cast<RankedTensorType>(p.getBias().getType());
  Type bf16 = b.getBF16Type();
  Value narrowBias = b.create<CastOp>(loc, RankedTensorType::get(bias.getShape(), bf16),
                                      p.getBias());
  auto narrow = b.create<MatmulOp>(loc, p.getLhs(), p.getRhs(), p.getTransposeLhs(),
                                   p.getTransposeRhs(), /*f32_result=*/false, narrowBias,
                                   /*acc=*/Value());
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : p.getResult().getUses())
    uses.push_back(&use);
  for (OpOperand *use : uses) {
    OpBuilder at(use->getOwner());
    use->set(at.create<CastOp>(loc, p.getType(), narrow.getResult()));
  }
  p.erase();
}

/// The views (transposes and reshapes, each value read once) from `v` to
/// its one reader, a cast of f32 to bf16, in `chain`, and that cast; null
/// if `v` does not end there.
CastOp narrowingReader(Value v, SmallVectorImpl<Operation *> &chain) {
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    if (isa<TransposeOp, ReshapeOp>(user)) {
      chain.push_back(user);
      v = user->getResult(0);
      continue;
    }
    auto c = dyn_cast<CastOp>(user);
    if (c && elementOf(c.getInput()).isF32() && elementOf(c.getResult()).isBF16())
      return c;
    return nullptr;
  }
  return nullptr;
}

RankedTensorType bf16Like(Type t) {
  auto r = cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), BFloat16Type::get(t.getContext()));
}

/// An attention or attention gradient with f32 results, each read only by
/// a cast to bf16 through views: marked `bf16_result`, its results and
/// their views retyped, the casts gone.
template <typename AttentionLike>
void narrowAttention(AttentionLike op) {
  if (op.getBf16Result())
    return;
  SmallVector<Operation *> chain;
  SmallVector<CastOp> casts;
  for (Value r : op->getResults()) {
    CastOp c = elementOf(r).isF32() ? narrowingReader(r, chain) : nullptr;
    if (!c)
      return;
    casts.push_back(c);
  }
  op.setBf16Result(true);
  for (Value r : op->getResults())
    r.setType(bf16Like(r.getType()));
  for (Operation *view : chain)
    view->getResult(0).setType(bf16Like(view->getResult(0).getType()));
  for (CastOp c : casts) {
    c.getResult().replaceAllUsesWith(c.getInput());
    c.erase();
  }
}

/// The first cast of `dx` (a norm gradient's input gradient, f32) to bf16
/// of its shape, marked for the gradient's kernel to store.
void markProducerCopy(Value dx) {
  if (!elementOf(dx).isF32())
    return;
  for (Operation *user : dx.getUsers())
    if (auto c = dyn_cast<CastOp>(user);
        c && elementOf(c.getResult()).isBF16() && c->getBlock() == dx.getParentBlock()) {
      c->setAttr(kProducerCopyAttr, UnitAttr::get(c->getContext()));
      return;
    }
}

/// The casts of parameters (function arguments marked mlc.param) in `fn`
/// as one params fusion at the top of its body, when they all cast one
/// element type to another and their parameters hold at least half of the
/// parameters' elements.
void gatherParameterCasts(func::FuncOp fn) {
  SmallVector<CastOp> casts;
  int64_t all = 0, narrowed = 0;
  for (BlockArgument arg : fn.getArguments()) {
    if (!fn.getArgAttr(arg.getArgNumber(), "mlc.param"))
      continue;
    all += mlir::cast<RankedTensorType>(arg.getType()).getNumElements();
    for (Operation *user : arg.getUsers())
      if (auto c = dyn_cast<CastOp>(user)) {
        casts.push_back(c);
        narrowed += mlir::cast<RankedTensorType>(arg.getType()).getNumElements();
        break; // (after CSE, one cast of an argument to one type)
      }
  }
  if (casts.empty() || 2 * narrowed < all)
    return;
  Type from = elementOf(casts[0].getInput()), to = elementOf(casts[0].getResult());
  if (!isa<FloatType>(from) || !isa<FloatType>(to) || from == to ||
      llvm::any_of(casts, [&](CastOp c) {
        return elementOf(c.getInput()) != from || elementOf(c.getResult()) != to;
      }))
    return;
  SmallVector<Value> inputs;
  SmallVector<Type> results;
  for (CastOp c : casts) {
    inputs.push_back(c.getInput());
    results.push_back(c.getType());
  }
  Block &body = fn.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  Location loc = casts[0].getLoc();
  auto fusion = b.create<FusionOp>(loc, FusionKind::params, results, inputs);
  Block &block = fusion.getBody().front();
  while (block.getNumArguments())
    block.eraseArgument(0);
  Value x = block.addArgument(RankedTensorType::get({}, from), loc);
  b.setInsertionPointToEnd(&block);
  Value y = b.create<CastOp>(loc, RankedTensorType::get({}, to), x);
  b.create<YieldOp>(loc, ValueRange{y});
  for (auto [c, r] : llvm::zip(casts, fusion.getResults())) {
    c.getResult().replaceAllUsesWith(r);
    c.erase();
  }
}

class FoldCastsPass : public mlc::impl::MlcFoldCastsBase<FoldCastsPass> {
public:
  void runOnOperation() final {
    SmallVector<MatmulOp> geluProducts;
    getOperation().walk([&](MatmulOp p) {
      if (isGeluProduct(p))
        geluProducts.push_back(p);
    });
    for (MatmulOp p : geluProducts)
      narrowGeluProduct(p);
    SmallVector<CastOp> widenings;
    getOperation().walk([&](CastOp c) {
      if (!isSharedWidening(c))
        return;
      if (pointwiseReaders(c.getResult()))
        castPerReader(c);
      else
        widenings.push_back(c);
    });
    for (CastOp c : widenings) {
      auto product = c.getInput().getDefiningOp<MatmulOp>();
      OpBuilder b(c);
      auto wide = b.create<MatmulOp>(product.getLoc(), product.getLhs(), product.getRhs(),
                                     product.getTransposeLhs(), product.getTransposeRhs(),
                                     /*f32_result=*/true, /*bias=*/Value(), /*acc=*/Value());
      c.getResult().replaceAllUsesWith(wide.getResult());
      c.erase();
      product.erase();
    }
    getOperation().walk([&](Operation *g) {
      if (isa<LayerNormGradOp, RmsNormGradOp>(g))
        markProducerCopy(g->getResult(0));
    });
    SmallVector<AttentionOp> attentions;
    SmallVector<AttentionGradOp> attentionGrads;
    getOperation().walk([&](AttentionOp a) { attentions.push_back(a); });
    getOperation().walk([&](AttentionGradOp a) { attentionGrads.push_back(a); });
    for (AttentionOp a : attentions)
      narrowAttention(a);
    for (AttentionGradOp a : attentionGrads)
      narrowAttention(a);
    gatherParameterCasts(getOperation());
  }
};

} // namespace
