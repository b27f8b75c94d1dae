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
//   A biased product read by pointwise ops alone (the MLP's first
//   projection, read by its GELU; the attention's and the MLP's output
//   projections, read by the dropout or residual add that a LayerNorm's
//   row kernel computes) is stored in bf16 with its bias in bf16, the way
//   bf16 autocast computes a linear layer: its readers read the bf16
//   product through a widening cast each (a conversion at their loads),
//   where they read an f32 one. Half the bytes of the GEMM's store and of
//   the readers' loads; the GELU, the residual stream and the norm still
//   compute in f32.
//
//   An attention (or its gradient) whose every result reaches, through
//   views alone (transposes, reshapes, a concatenation of its own results,
//   each read once), a cast to bf16 for the next product becomes
//   `bf16_result`: the kernel stores its results in bf16, and the cast,
//   otherwise a kernel of its own that reads the f32 result back, is gone
//   (the output projection's input; Llama's dQ, dK, dV for the
//   projections' input-gradient GEMMs: bit for bit the same values, the
//   kernel rounds where the cast did). A column sum beside the cast (the
//   Q, K, V biases' gradients of GPT-2 and BERT) reads the bf16 gradient
//   through a widening cast at its load, the gradient bf16 autocast's
//   linear layer sums: the gradient is stored once, in bf16, instead of
//   in f32 and again as its bf16 copy.
//
//   A norm gradient's incoming gradient, an f32_result product that the
//   gradient alone reads (the input gradient of the products after a
//   LayerNorm), is stored in bf16, as bf16 autocast's linear layer returns
//   it, and widened by the gradient's kernel at its loads: the widening is
//   marked `mlc.consumer_load`, no kernel of its own.
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
#include "llvm/ADT/SetVector.h"

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
/// accumulator) read by pointwise ops alone (a GELU; a dropout or the
/// residual add before a LayerNorm, whose row kernel takes them).
bool isNarrowableProduct(MatmulOp p) {
  return p.getF32Result() && p.getBias() && !p.getAcc() &&
         elementOf(p.getLhs()).isBF16() && elementOf(p.getBias()).isF32() &&
         !p.getResult().use_empty() && pointwiseReaders(p.getResult());
}

/// The product in bf16 with a bf16 copy of its bias, each reader reading
/// it through a widening cast of its own.
void narrowProduct(MatmulOp p) {
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

/// Where a result of an attention (or its gradient) ends: through views
/// (transposes, reshapes) and concatenations of the op's own results, each
/// value read once, to a value that a cast to bf16 reads, and otherwise
/// only column sums (bias gradients). The views in `chain`; the cast and
/// the sums in `casts` and `sums`. False if `v` does not end so.
bool narrowableEnd(Value v, Operation *op, llvm::SetVector<Operation *> &chain,
                   SmallVectorImpl<CastOp> &casts, SmallVectorImpl<ReduceSumOp> &sums) {
  while (v.hasOneUse() && isa<TransposeOp, ReshapeOp, ConcatOp>(*v.getUsers().begin())) {
    Operation *view = *v.getUsers().begin();
    if (!chain.insert(view))
      return true; // a concatenation met before: its end is checked once
    v = view->getResult(0);
  }
  CastOp cast;
  for (Operation *user : v.getUsers()) {
    if (auto c = dyn_cast<CastOp>(user); c && !cast && elementOf(c.getResult()).isBF16()) {
      cast = c;
      continue;
    }
    auto sum = dyn_cast<ReduceSumOp>(user);
    if (!sum)
      return false;
    sums.push_back(sum);
  }
  if (!cast || !elementOf(v).isF32())
    return false;
  casts.push_back(cast);
  return true;
}

RankedTensorType withElement(Type t, Type el) {
  return RankedTensorType::get(cast<RankedTensorType>(t).getShape(), el);
}

/// An attention or attention gradient with f32 results, each ending in a
/// cast to bf16 (narrowableEnd): marked `bf16_result`, its results, their
/// views and concatenations retyped, the casts gone; a column sum of an
/// end reads it through a widening cast of its own (a conversion at its
/// kernel's load: the bias gradient sums the bf16 gradient the products
/// read, as bf16 autocast's linear layer does).
template <typename AttentionLike>
void narrowAttention(AttentionLike op) {
  if (op.getBf16Result())
    return;
  llvm::SetVector<Operation *> chain;
  SmallVector<CastOp> casts;
  SmallVector<ReduceSumOp> sums;
  for (Value r : op->getResults())
    if (!elementOf(r).isF32() || !narrowableEnd(r, op, chain, casts, sums))
      return;
  // A concatenation joins this op's results only.
  for (Operation *view : chain)
    if (isa<ConcatOp>(view) && llvm::any_of(view->getOperands(), [&](Value x) {
          Operation *def = x.getDefiningOp();
          return def != op.getOperation() && !chain.contains(def);
        }))
      return;
  Type bf16 = BFloat16Type::get(op->getContext());
  op.setBf16Result(true);
  // The casts it absorbs: located where they were too (one location plain).
  SmallVector<Location> locs{op.getLoc()};
  for (CastOp c : casts)
    locs.push_back(c.getLoc());
  op->setLoc(FusedLoc::get(locs, Attribute(), op->getContext()));
  for (Value r : op->getResults())
    r.setType(withElement(r.getType(), bf16));
  for (Operation *view : chain)
    view->getResult(0).setType(withElement(view->getResult(0).getType(), bf16));
  for (ReduceSumOp sum : sums) {
    OpBuilder b(sum);
    Value narrow = sum.getInput();
    sum->setOperand(0, b.create<CastOp>(sum.getLoc(),
                                        withElement(narrow.getType(), b.getF32Type()), narrow));
  }
  for (CastOp c : casts) {
    c.getResult().replaceAllUsesWith(c.getInput());
    c.erase();
  }
}

/// A norm gradient's incoming gradient, an f32_result product (bf16
/// operands, no bias or accumulator) that it alone reads: the product in
/// bf16, read through a widening marked `mlc.consumer_load` (the gradient's
/// kernel loads 2 bytes an element, twice, where it loaded 4).
void narrowNormGradient(Operation *g) {
  auto p = g->getOperand(0).getDefiningOp<MatmulOp>();
  if (!p || !p.getF32Result() || p.getBias() || p.getAcc() || !p->hasOneUse() ||
      !elementOf(p.getLhs()).isBF16())
    return;
  OpBuilder b(p);
  auto narrow = b.create<MatmulOp>(p.getLoc(), p.getLhs(), p.getRhs(), p.getTransposeLhs(),
                                   p.getTransposeRhs(), /*f32_result=*/false, Value(), Value());
  auto widen = b.create<CastOp>(p.getLoc(), p.getType(), narrow.getResult());
  widen->setAttr(kConsumerLoadAttr, b.getUnitAttr());
  p.getResult().replaceAllUsesWith(widen.getResult());
  p.erase();
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
  SmallVector<Location> locs;
  for (CastOp c : casts)
    locs.push_back(c.getLoc());
  // Located at every cast it gathers, each location once.
  auto fusion = b.create<FusionOp>(FusedLoc::get(locs, Attribute(), fn.getContext()),
                                   FusionKind::params, results, inputs);
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
    SmallVector<MatmulOp> narrowable;
    getOperation().walk([&](MatmulOp p) {
      if (isNarrowableProduct(p))
        narrowable.push_back(p);
    });
    for (MatmulOp p : narrowable)
      narrowProduct(p);
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
      Location loc = FusedLoc::get({product.getLoc(), c.getLoc()}, Attribute(), c.getContext());
      auto wide = b.create<MatmulOp>(loc, product.getLhs(), product.getRhs(),
                                     product.getTransposeLhs(), product.getTransposeRhs(),
                                     /*f32_result=*/true, /*bias=*/Value(), /*acc=*/Value());
      c.getResult().replaceAllUsesWith(wide.getResult());
      c.erase();
      product.erase();
    }
    SmallVector<Operation *> normGrads;
    getOperation().walk([&](Operation *g) {
      if (isa<LayerNormGradOp, RmsNormGradOp>(g))
        normGrads.push_back(g);
    });
    for (Operation *g : normGrads)
      narrowNormGradient(g);
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
