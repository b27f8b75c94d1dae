//===- RowEmitters.cpp - the plan.kernel ops of row ops -------------------===//
//
// Row fusions (a norm and the pointwise prologue of its input), reductions
// and row kernels (softmax, LayerNorm, RMSNorm and their gradients):
// templates with their parameters, or a row fusion's bodies. The pointwise
// emitters are in KernelEmitters.cpp, cross-entropy's in
// CrossEntropyKernel.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/LoweringMarks.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace mlc::lowering {

/// A "rows" fusion (its arguments bound by emitFusion over its results'
/// shape): a LayerNorm or an RMSNorm and the pointwise prologue of its
/// input. Each row's prologue is computed once into a row buffer (values
/// needed elsewhere are stored on the way), then normalized from that buffer.
/// A norm whose one reader is an add of a fusion input (a post-norm's
/// residual add `h + norm(y)`, mlc-fuse-elementwise) stores the sum: the
/// normalize's `plus` operand.
llvm::Error FunctionLowering::emitRowFusion(FusionOp fusion, KernelArgs &bound) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  // The norm's input, weight, bias (none for RMSNorm) and epsilon.
  Operation *normOp = nullptr;
  Value input, weight, bias;
  double eps = 0;
  for (Operation &op : block.without_terminator()) {
    if (auto n = dyn_cast<LayerNormOp>(op)) {
      normOp = n;
      input = n.getInput(), weight = n.getWeight(), bias = n.getBias();
      eps = n.getEpsilon().convertToDouble();
    } else if (auto n = dyn_cast<RmsNormOp>(op)) {
      normOp = n;
      input = n.getInput(), weight = n.getWeight(), bias = Value();
      eps = n.getEpsilon().convertToDouble();
    }
  }
  if (!normOp)
    return failure(fusion, "a \"rows\" fusion without a layer_norm or rms_norm");
  Value normResult = normOp->getResult(0);
  AddOp epilogue = normResult.hasOneUse() ? dyn_cast<AddOp>(*normResult.getUsers().begin())
                                          : AddOp();
  Value residual;
  if (epilogue) {
    residual = epilogue.getLhs() == normResult ? epilogue.getRhs() : epilogue.getLhs();
    if (!isa<BlockArgument>(residual) || residual == normResult)
      return failure(epilogue, "a \"rows\" fusion adds to its norm a value it computes (only "
                               "an input is added after the norm)");
  }
  Value stored = epilogue ? epilogue.getResult() : normResult;
  Shape iter = shapeOf(input);
  Shape rowDims(iter.begin(), iter.end() - 1);
  const int64_t R = product(rowDims);
  if (iter != shapeOf(fusion.getResult(0)))
    return failure(fusion, "a \"rows\" fusion whose first result is not of its norm's shape");
  auto &bufs = bound.bufs;
  auto &accs = bound.accs;
  // The normalized row is stored in the result's type (a cast of it that
  // the fusion absorbed converts on the store); yielded both as it is and
  // cast (a second copy, mlc-fuse-elementwise), it is stored twice.
  SmallVector<int, 2> normSlots;
  llvm::SmallPtrSet<Operation *, 2> normCasts;
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    auto c = v.getDefiningOp<CastOp>();
    if (c && c.getInput() == stored)
      normCasts.insert(c);
    if (v == stored || (c && c.getInput() == stored))
      normSlots.push_back(i);
  }
  if (normSlots.empty())
    return failure(normOp, "a \"rows\" fusion that does not return its norm");
  for (Operation *user : stored.getUsers())
    if (!normCasts.count(user) && !isa<YieldOp>(user))
      return failure(user, "a \"rows\" fusion computes with its norm's result");
  SmallVector<Operation *, 4> skipped(normCasts.begin(), normCasts.end());
  skipped.push_back(normOp);
  if (epilogue)
    skipped.push_back(epilogue);
  Rows rows = rowsOf(R, dynamicRows(input));
  return addBodyStep(
      iter, accs, false,
      [&](OpBuilder &b, llvm::ArrayRef<Shape> strides) -> llvm::Error {
        IRMapping map;
        if (auto err = cloneFusionRegion(b, fusion, accs, strides, map, skipped))
          return err;
        for (auto [i, v] : llvm::enumerate(yield.getValues()))
          if (!llvm::is_contained(normSlots, int(i)))
            store(b, map.lookup(v), accs[i], strides[i]);
        for (int slot : normSlots)
          b.create<plan::NormalizeOp>(fn.getLoc(), map.lookup(input), map.lookup(weight),
                                      bias ? map.lookup(bias) : Value(),
                                      residual ? map.lookup(residual) : Value(), slot,
                                      accs[slot].base, strides[slot],
                                      typeOf(yield.getValues()[slot]).getElementType(),
                                      /*rms=*/!bias);
        return llvm::Error::success();
      },
      bufs, KernelTemplate::rows, /*merge=*/false,
      [&](ParamsBuilder &p) { p.rows(rows).f64("eps", eps); });
}

llvm::Error FunctionLowering::emitReduce(Operation *op, Value input, ArrayRef<int64_t> axes,
                                         const std::string &kind) {
  Value result = op->getResult(0);
  Shape in = shapeOf(input);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes)
    reduced[*normalizeAxis(a, in.size())] = true;
  // Merge neighbouring dimensions of the same kind: [kept..., reduced...] is
  // a row reduction, [reduced..., kept...] a column reduction (bias grads).
  std::vector<std::pair<bool, int64_t>> groups;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1)
      continue;
    if (!groups.empty() && groups.back().first == reduced[d])
      groups.back().second *= in[d];
    else
      groups.push_back({reduced[d], in[d]});
  }
  int64_t count = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (reduced[d])
      count *= in[d];
  ReductionKernel r;
  r.element = typeOf(result).getElementType();
  r.kind = kind == "max" ? ReductionKernel::Max : kind == "mean" ? ReductionKernel::Mean
                                                                 : ReductionKernel::Sum;
  r.count = count;
  int64_t outN = numel(result);
  const bool dyn = dynamicRows(input);
  bool rows = groups.size() == 2 && !groups[0].first && groups[1].first;
  bool full = groups.size() == 1 && groups[0].first;
  bool columns = groups.size() == 2 && groups[0].first && !groups[1].first;
  if (rows || full || groups.empty()) {
    if (dyn && !rows)
      return failure(op, "a full reduction over the dynamic token dimension is not supported");
    r.shape = ReductionKernel::Rows;
    r.outputs = outN;
    r.rows = rowsOf(outN, dyn);
    r.length = rows ? groups[1].second : full ? groups[0].second : 1;
  } else if (columns && kind != "max") {
    r.shape = ReductionKernel::Columns;
    r.rows = rowsOf(groups[0].second, dyn);
    r.length = groups[1].second;
  } else {
    // General axes: one output element per iteration, indices decomposed.
    if (dyn)
      return failure(op, "this reduction over the dynamic token dimension is not supported");
    r.shape = ReductionKernel::General;
    r.outputs = outN;
    Shape inStrides = rowMajorStrides(in);
    for (size_t d = 0; d < in.size(); ++d) {
      (reduced[d] ? r.reducedDims : r.keptDims).push_back(in[d]);
      (reduced[d] ? r.reducedStrides : r.keptStrides).push_back(inStrides[d]);
    }
  }
  Value outBuf = arenaFor(result);
  valueBuffers[result] = outBuf;
  addStep(encodeReduction(r, op->getContext()), DictionaryAttr(), {outBuf, bufferOf(input)},
          KernelTemplate::reduction);
  return llvm::Error::success();
}

/// Gemma's RMSNorm weight 1 + w, an add mlc-fuse-elementwise marked
/// mlc.consumer_load for a norm's gradient: w, which the gradient's row
/// kernel reads, adding 1 at the load (its plus_one flag); null otherwise.
static Value plusOneOperand(Value weight, bool grad) {
  auto add = weight.getDefiningOp<AddOp>();
  if (!grad || !add || !add->hasAttr(kConsumerLoadAttr))
    return Value();
  auto c = add.getLhs().getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  const bool lhsOne = dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
                      dense.getSplatValue<APFloat>().convertToDouble() == 1.0;
  return lhsOne ? add.getRhs() : add.getLhs();
}

/// LayerNorm, RMSNorm and their gradients: one typed template pair for
/// both norms (#plan.layer_norm<...>, #plan.layer_norm_grad<...>), the
/// operands in order (input, weight[, bias]; grad, input, weight[,
/// residual]), the results out.
llvm::Error FunctionLowering::emitNormRows(Operation *op) {
  Value x = op->getOperand(0);
  Type el = typeOf(op->getResult(0)).getElementType();
  std::vector<Value> bufs;
  const bool grad = isa<LayerNormGradOp, RmsNormGradOp>(op);
  const bool rms = isa<RmsNormOp, RmsNormGradOp>(op);
  for (Value r : op->getResults())
    bindResult(r, bufs);
  // A norm without an affine transform (torch's elementwise_affine=False,
  // OLMo's: its weight the constant 1, its bias 0) reads neither: they
  // are no arguments and no buffers filled each step.
  auto splatIs = [](Value v, double value) {
    auto c = v.getDefiningOp<ConstantOp>();
    auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
    return dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
           dense.getSplatValue<APFloat>().convertToDouble() == value;
  };
  Value weight = op->getOperand(grad ? 2 : 1);
  const bool unit = splatIs(weight, 1.0) && (grad || rms || splatIs(op->getOperand(2), 0.0));
  const Value plusOne = plusOneOperand(weight, grad);
  Type gradElement, copy; // the incoming gradient's type where not el; dx's copy's
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    if (unit && (v == weight || (!grad && !rms && i == 2)))
      continue;
    if (plusOne && v == weight) {
      bufs.push_back(bufferOf(plusOne));
      continue;
    }
    // --dtype bf16: a bf16 product's widening marked mlc.consumer_load
    // (the incoming gradient): the kernel loads the product and widens it.
    auto widen = v.getDefiningOp<CastOp>();
    if (grad && i == 0 && widen && widen->hasAttr(kConsumerLoadAttr)) {
      bufs.push_back(bufferOf(widen.getInput()));
      gradElement = typeOf(widen.getInput()).getElementType();
      continue;
    }
    bufs.push_back(bufferOf(v));
  }
  const APFloat eps(op->getAttrOfType<FloatAttr>("epsilon").getValue().convertToDouble());
  bool residual = false;
  if (auto rg = dyn_cast<RmsNormGradOp>(op))
    residual = bool(rg.getResidual());
  if (auto lg = dyn_cast<LayerNormGradOp>(op))
    residual = bool(lg.getResidual());
  // --dtype bf16: dx's bf16 copy for the next products (a cast that
  // mlc-fold-casts marked `mlc.producer_copy`) is written by this kernel,
  // the last argument, at a second store.
  if (grad)
    for (Operation *user : op->getResult(0).getUsers())
      if (auto c = dyn_cast<CastOp>(user); c && c->hasAttr(kProducerCopyAttr)) {
        bindResult(c.getResult(), bufs);
        lowersToo(c);
        copy = typeOf(c.getResult()).getElementType();
        break;
      }
  // The rows (dynamic token rows at the capacity, per token); the
  // gradient's scratch holds `capacity` rows.
  Shape shape = shapeOf(x);
  const int64_t columns = shape.back(), capacity = product(shape) / columns;
  Rows rows = rowsOf(capacity, dynamicRows(x));
  Attribute templ =
      grad ? Attribute(plan::LayerNormGradTemplateAttr::get(
                 op->getContext(), el, rows.count, rows.perToken, capacity, columns, eps, rms,
                 residual, unit, copy, gradElement, bool(plusOne)))
           : Attribute(plan::LayerNormTemplateAttr::get(op->getContext(), el, rows.count,
                                                        rows.perToken, columns, eps, rms, unit));
  addStep(templ, DictionaryAttr(), bufs, KernelTemplate::rows);
  return llvm::Error::success();
}

/// Softmax and its gradient over the last axis: typed templates
/// (#plan.softmax<...>), their rows and columns from the input's shape.
llvm::Error FunctionLowering::emitRows(Operation *op) {
  if (isa<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp>(op))
    return emitNormRows(op);
  auto lastAxis = [&](int64_t axis, Value v) {
    return *normalizeAxis(axis, typeOf(v).getRank()) == typeOf(v).getRank() - 1;
  };
  Value x = op->getOperand(0);
  Type el = typeOf(op->getResult(0)).getElementType();
  std::vector<Value> bufs;
  const Shape shape = shapeOf(x);
  const Rows rows = rowsOf(product(shape) / shape.back(), dynamicRows(x));
  Attribute templ;
  if (auto sm = dyn_cast<SoftmaxOp>(op); sm || isa<LogSoftmaxOp>(op)) {
    int64_t axis = sm ? int64_t(sm.getAxis()) : int64_t(cast<LogSoftmaxOp>(op).getAxis());
    if (!lastAxis(axis, x))
      return failure(op, "softmax over a dimension other than the last is not supported yet");
    bindResult(op->getResult(0), bufs);
    bufs.push_back(bufferOf(x));
    templ = plan::SoftmaxTemplateAttr::get(op->getContext(), el, rows.count, rows.perToken,
                                           shape.back(), !sm);
  } else if (auto sg = dyn_cast<SoftmaxGradOp>(op)) {
    if (!lastAxis(sg.getAxis(), x))
      return failure(op, "softmax over a dimension other than the last is not supported yet");
    bindResult(sg.getResult(), bufs);
    bufs.push_back(bufferOf(sg.getGrad()));
    bufs.push_back(bufferOf(sg.getOutput()));
    templ = plan::SoftmaxGradTemplateAttr::get(op->getContext(), el, rows.count, rows.perToken,
                                               shape.back());
  } else {
    return failure(op, "internal error: not a row op");
  }
  addStep(templ, DictionaryAttr(), bufs, KernelTemplate::rows);
  return llvm::Error::success();
}

} // namespace mlc::lowering
