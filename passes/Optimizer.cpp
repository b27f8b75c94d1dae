//===- Optimizer.cpp - AdamW and the gradient norm as graph functions ------===//
//
// mlc-optimizer reads @train_step's parameters and gradients and adds two
// functions of graph ops:
//
//   @grad_norm(g...) -> grad_norm      the L2 norm of every gradient, in f64
//   @optimizer(p..., g..., m..., v..., adamw) -> p', m', v'
//                                      torch.optim.AdamW per parameter
//
// The trainer runs @train_step, then @grad_norm (it logs the norm and stops
// before a non-finite update), computes the step's scalars on the host
// (contract/OptimizerScalars.h: the clipping scale folded into one
// multiplier, the scheduled learning rate, bias corrections) and runs
// @optimizer. Results marked mlc.param_update / mlc.moment1_update /
// mlc.moment2_update are written back into the flat buffers in place.
// Separate functions (instead of ops appended to @train_step) let gradient
// accumulation run several train steps per update and let collectives and
// the norm check sit between backward and the update.
//
// Unfused, every op is a kernel; with `fuse`, each function is one kernel
// over the flat buffers (one mlc.fusion, built from the same element rules).
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"
#include "contract/OptimizerScalars.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

struct Param {
  std::string name;
  RankedTensorType type;
  bool decay;
};

NamedAttrList named(OpBuilder &b, StringRef key, StringRef value) {
  NamedAttrList attrs;
  attrs.append(key, b.getStringAttr(value));
  return attrs;
}

/// Where the ops of the function `name` sit: loc("optimizer"), what a
/// diagnostic on one of them names.
Location functionLoc(OpBuilder &b, StringRef name) { return NameLoc::get(b.getStringAttr(name)); }

func::FuncOp createFunction(OpBuilder &b, Location loc, StringRef name,
                            ArrayRef<Type> args, ArrayRef<Type> results,
                            ArrayRef<NamedAttrList> argAttrs,
                            ArrayRef<NamedAttrList> resultAttrs) {
  auto fn = b.create<func::FuncOp>(loc, name, b.getFunctionType(args, results));
  for (size_t i = 0; i < argAttrs.size(); ++i)
    fn.setArgAttrs(i, argAttrs[i].getDictionary(b.getContext()));
  for (size_t i = 0; i < resultAttrs.size(); ++i)
    fn.setResultAttrs(i, resultAttrs[i].getDictionary(b.getContext()));
  fn->setAttr("mlc.optimizer", b.getStringAttr("adamw"));
  fn.addEntryBlock();
  return fn;
}

// The element rules: what one gradient element adds to the norm, and one
// element's AdamW update (contract/OptimizerScalars.h). Both forms of each
// function are built from them: per parameter over whole tensors
// (unfused), or once over rank-0 values inside one mlc.fusion that the
// lowering runs across the flat buffers (fuse=true). The optimizer's
// structure has one home: nothing reads it back out of the IR.

/// g^2 in f64, of one element or of a whole tensor.
Value normTerm(OpBuilder &b, Location loc, Value g) {
  auto t = cast<RankedTensorType>(g.getType());
  Value wide = b.create<CastOp>(loc, RankedTensorType::get(t.getShape(), b.getF64Type()), g);
  return b.create<MulOp>(loc, wide, wide);
}

struct Update {
  Value p, m, v;
};

/// torch.optim.AdamW's update of p given g, m, v; `decay` multiplies p
/// first where it is set (s[kDecay] unfused, the per-segment factor fused).
/// `s` holds the scalars before kDecay, each a rank-0 value of p's type.
Update adamWUpdate(OpBuilder &b, Location loc, Value p, Value g, Value m, Value v, Value decay,
                   ArrayRef<Value> s) {
  Value gs = b.create<MulOp>(loc, g, s[kScale]);
  Value m1 = b.create<AddOp>(loc, b.create<MulOp>(loc, s[kBeta1], m),
                             b.create<MulOp>(loc, s[kOneMinusBeta1], gs));
  Value v1 = b.create<AddOp>(
      loc, b.create<MulOp>(loc, s[kBeta2], v),
      b.create<MulOp>(loc, b.create<MulOp>(loc, s[kOneMinusBeta2], gs), gs));
  Value decayed = decay ? Value(b.create<MulOp>(loc, p, decay)) : p;
  Value denom = b.create<AddOp>(
      loc, b.create<MulOp>(loc, b.create<SqrtOp>(loc, v1), s[kInvSqrtBc2]), s[kEps]);
  Value step = b.create<DivOp>(loc, b.create<MulOp>(loc, s[kStepSize], m1), denom);
  return {b.create<SubOp>(loc, decayed, step), m1, v1};
}

/// A fusion of `kind` over `inputs` whose region takes `blockArgs` rank-0
/// values of `el`; the builder is left at the region's end.
FusionOp createFusion(OpBuilder &b, Location loc, FusionKind kind, TypeRange results,
                      ValueRange inputs, int blockArgs, Type el) {
  auto fusion = b.create<FusionOp>(loc, kind, results, inputs);
  Block &block = fusion.getBody().front();
  while (block.getNumArguments())
    block.eraseArgument(0);
  for (int k = 0; k < blockArgs; ++k)
    block.addArgument(RankedTensorType::get({}, el), loc);
  b.setInsertionPointToEnd(&block);
  return fusion;
}

/// @grad_norm: sqrt of the sum over every gradient element of g^2, in f64;
/// fused, the sum is one mlc.fusion norm whose region is one element's term.
void buildGradNorm(OpBuilder &b, Location loc, ArrayRef<Param> params, bool fuse) {
  SmallVector<Type> args;
  SmallVector<NamedAttrList> argAttrs;
  for (const Param &p : params) {
    args.push_back(p.type);
    argAttrs.push_back(named(b, "mlc.grad", p.name));
  }
  auto f64 = RankedTensorType::get({}, b.getF64Type());
  func::FuncOp fn = createFunction(b, loc, mlc::kGradNormFn, args, {f64}, argAttrs,
                                   {named(b, "mlc.output", "grad_norm")});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&fn.getBody().front());
  if (fuse) {
    Block *body = b.getInsertionBlock();
    FusionOp fusion = createFusion(b, loc, FusionKind::norm, {f64}, fn.getArguments(), 1,
                                   params[0].type.getElementType());
    Block &block = fusion.getBody().front();
    b.create<YieldOp>(loc, ValueRange{normTerm(b, loc, block.getArgument(0))});
    b.setInsertionPointToEnd(body);
    b.create<func::ReturnOp>(loc, fusion->getResults());
    return;
  }
  Value total;
  for (BlockArgument g : fn.getArguments()) {
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < cast<RankedTensorType>(g.getType()).getRank(); ++d)
      axes.push_back(d);
    Value sum = b.create<ReduceSumOp>(loc, normTerm(b, loc, g), b.getDenseI64ArrayAttr(axes),
                                      false);
    total = total ? Value(b.create<AddOp>(loc, total, sum)) : sum;
  }
  b.create<func::ReturnOp>(loc, ValueRange{b.create<SqrtOp>(loc, total)});
}

/// The fused update: one mlc.fusion optimizer over the scalars, then the
/// parameters, gradients, first and second moments. Its region is one
/// element's update over block arguments p, g, m, v, the decay factor (the
/// lowering binds it to s[kDecay] or 1 per segment, as mlc.decay says) and
/// the scalars before kDecay; the factor is applied only where some
/// parameter decays.
void buildFusedAdamW(OpBuilder &b, Location loc, func::FuncOp fn, ArrayRef<Param> params) {
  size_t n = params.size();
  Type el = params[0].type.getElementType();
  SmallVector<Value> inputs{fn.getArgument(4 * n)};
  for (unsigned i = 0; i < 4 * n; ++i)
    inputs.push_back(fn.getArgument(i));
  Block *body = b.getInsertionBlock();
  FusionOp fusion = createFusion(b, loc, FusionKind::optimizer,
                                 TypeRange(fn.getResultTypes()), inputs, 5 + kDecay, el);
  SmallVector<bool> decay;
  for (const Param &p : params)
    decay.push_back(p.decay);
  fusion->setAttr("mlc.decay", b.getDenseBoolArrayAttr(decay));
  Block &block = fusion.getBody().front();
  SmallVector<Value> a(block.getArguments());
  bool anyDecay = llvm::is_contained(decay, true);
  Update u = adamWUpdate(b, loc, a[0], a[1], a[2], a[3], anyDecay ? a[4] : Value(),
                         ArrayRef<Value>(a).drop_front(5));
  b.create<YieldOp>(loc, ValueRange{u.p, u.m, u.v});
  b.setInsertionPointToEnd(body);
  b.create<func::ReturnOp>(loc, fusion->getResults());
}

/// @optimizer: one AdamW update per parameter, or (fuse) one fusion of all.
void buildAdamW(OpBuilder &b, Location loc, ArrayRef<Param> params, bool fuse) {
  SmallVector<Type> args, results;
  SmallVector<NamedAttrList> argAttrs, resultAttrs;
  const char *roles[] = {"mlc.param", "mlc.grad", "mlc.moment1", "mlc.moment2"};
  for (const char *role : roles)
    for (const Param &p : params) {
      args.push_back(p.type);
      argAttrs.push_back(named(b, role, p.name));
    }
  args.push_back(RankedTensorType::get({kAdamWScalarCount}, b.getF64Type()));
  argAttrs.push_back(named(b, "mlc.scalars", kAdamWScalarsName));
  for (const char *role : {"mlc.param_update", "mlc.moment1_update", "mlc.moment2_update"})
    for (const Param &p : params) {
      results.push_back(p.type);
      resultAttrs.push_back(named(b, role, p.name));
    }
  func::FuncOp fn = createFunction(b, loc, mlc::kOptimizerFn, args, results, argAttrs, resultAttrs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&fn.getBody().front());
  if (fuse)
    return buildFusedAdamW(b, loc, fn, params);
  size_t n = params.size();
  Value h = fn.getArgument(4 * n);
  Type el = params[0].type.getElementType();
  // Each scalar once, as a rank-0 tensor of the parameters' type.
  SmallVector<Value> s;
  for (int64_t k = 0; k < kAdamWScalarCount; ++k) {
    Value one = b.create<SliceOp>(loc, h, b.getDenseI64ArrayAttr({k}),
                                  b.getDenseI64ArrayAttr({k + 1}), b.getDenseI64ArrayAttr({1}));
    Value r = b.create<ReshapeOp>(loc, RankedTensorType::get({}, b.getF64Type()), one);
    s.push_back(b.create<CastOp>(loc, RankedTensorType::get({}, el), r));
  }
  SmallVector<Value> newP, newM, newV;
  for (size_t i = 0; i < n; ++i) {
    Update u = adamWUpdate(b, loc, fn.getArgument(i), fn.getArgument(n + i),
                           fn.getArgument(2 * n + i), fn.getArgument(3 * n + i),
                           params[i].decay ? s[kDecay] : Value(), s);
    newP.push_back(u.p);
    newM.push_back(u.m);
    newV.push_back(u.v);
  }
  SmallVector<Value> all(newP);
  all.append(newM);
  all.append(newV);
  b.create<func::ReturnOp>(loc, all);
}

/// Gradient accumulation over micro-batches: @accumulate adds this
/// micro-batch's gradients into the running sum (mlc.grad_sum, a flat buffer
/// of its own); @merge makes the last micro-batch's gradients the mean,
/// g = (g + sum) * scale with scale = 1 / micro-batches (its f64 scalar
/// input), in place, for @grad_norm and @optimizer to read as usual.
void buildAccumulation(OpBuilder &b, ArrayRef<Param> params) {
  Location loc = functionLoc(b, mlc::kAccumulateFn);
  SmallVector<Type> args, results;
  SmallVector<NamedAttrList> argAttrs, resultAttrs;
  for (const char *role : {"mlc.grad", "mlc.grad_sum"})
    for (const Param &p : params) {
      args.push_back(p.type);
      argAttrs.push_back(named(b, role, p.name));
    }
  for (const Param &p : params) {
    results.push_back(p.type);
    resultAttrs.push_back(named(b, "mlc.grad_sum_update", p.name));
  }
  func::FuncOp acc = createFunction(b, loc, mlc::kAccumulateFn, args, results, argAttrs, resultAttrs);
  size_t n = params.size();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&acc.getBody().front());
    SmallVector<Value> sums;
    for (size_t i = 0; i < n; ++i)
      sums.push_back(b.create<AddOp>(loc, acc.getArgument(n + i), acc.getArgument(i)));
    b.create<func::ReturnOp>(loc, sums);
  }
  args.push_back(RankedTensorType::get({1}, b.getF64Type()));
  argAttrs.push_back(named(b, "mlc.scalars", "accumulation"));
  resultAttrs.clear();
  for (const Param &p : params)
    resultAttrs.push_back(named(b, "mlc.grad_update", p.name));
  loc = functionLoc(b, mlc::kMergeFn);
  func::FuncOp merge = createFunction(b, loc, mlc::kMergeFn, args, results, argAttrs, resultAttrs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&merge.getBody().front());
  Type el = params[0].type.getElementType();
  Value one = b.create<ReshapeOp>(loc, RankedTensorType::get({}, b.getF64Type()),
                                  merge.getArgument(2 * n));
  Value scale = b.create<CastOp>(loc, RankedTensorType::get({}, el), one);
  SmallVector<Value> means;
  for (size_t i = 0; i < n; ++i)
    means.push_back(b.create<MulOp>(
        loc, b.create<AddOp>(loc, merge.getArgument(i), merge.getArgument(n + i)), scale));
  b.create<func::ReturnOp>(loc, means);
}

class OptimizerPass : public mlc::impl::MlcOptimizerBase<OptimizerPass> {
public:
  using MlcOptimizerBase::MlcOptimizerBase;
  void runOnOperation() final {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(mlc::kTrainStepFn);
    if (!step) {
      module.emitError("mlc-optimizer: no function @train_step (run mlc-autodiff first)");
      return signalPassFailure();
    }
    if (module.lookupSymbol(mlc::kOptimizerFn) || module.lookupSymbol(mlc::kGradNormFn))
      return; // already there
    // The parameters that have gradients, in @train_step's result order.
    std::vector<Param> params;
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (auto g = step.getResultAttrOfType<StringAttr>(i, "mlc.grad")) {
        auto t = cast<RankedTensorType>(step.getResultTypes()[i]);
        if (!isa<FloatType>(t.getElementType()) || !t.hasStaticShape()) {
          step.emitError("mlc-optimizer: the gradient of '")
              << g.getValue() << "' must be a statically shaped float tensor, got " << t;
          return signalPassFailure();
        }
        // Weight decay applies to matrices (rank >= 2), never to biases or norms.
        params.push_back({g.str(), t, t.getRank() >= 2});
      }
    if (params.empty())
      return; // nothing trains
    for (const Param &p : params)
      if (p.type.getElementType() != params[0].type.getElementType()) {
        step.emitError("mlc-optimizer: parameters mix element types");
        return signalPassFailure();
      }
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    buildGradNorm(b, functionLoc(b, mlc::kGradNormFn), params, fuse);
    buildAdamW(b, functionLoc(b, mlc::kOptimizerFn), params, fuse);
    buildAccumulation(b, params);
  }
};

} // namespace
