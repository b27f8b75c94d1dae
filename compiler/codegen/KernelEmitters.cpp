//===- KernelEmitters.cpp - the plan.kernel ops of graph ops ---------------===//
//
// Each emitter builds one kernel as IR: pointwise ops and fusion regions
// (bodies of loads, scalar ops and stores over strided views), fused bias
// gradients, fused LayerNorms, the optimizer's update and the gradient norm
// (bodies too), row kernels (softmax, LayerNorm, cross-entropy and their
// gradients), reductions and attention (templates with their parameters).
// No target is involved; the targets print them (KernelPrinter.cpp).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "contract/OptimizerScalars.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <array>
#include <cmath>

namespace mlc::lowering {

llvm::Error FunctionLowering::addBodyStep(const Shape &shape, const std::vector<Access> &accs,
                                          bool dynamic, BodyBuilder build, std::vector<int> bufs,
                                          KernelTemplate kind, bool merge,
                                          llvm::function_ref<void(ParamsBuilder &)> more) {
  Shape dims = shape;
  std::vector<Shape> strides;
  for (const Access &a : accs)
    strides.push_back(a.strides);
  if (merge)
    std::tie(dims, strides) = mergeDims(shape, accs);
  MLIRContext *context = fn.getContext();
  OpBuilder b(context);
  b.setInsertionPointToEnd(kernels.scratch->getBody());
  ParamsBuilder params(context);
  params.i64s("dims", dims).flag("dynamic", dynamic && !dims.empty());
  if (more)
    more(params);
  auto kernel = b.create<plan::KernelOp>(
      fn.getLoc(), b.getStringAttr("k"), plan::KernelTemplateAttr::get(context, kind),
      plan::TemplateAttrInterface(), b.getI64IntegerAttr(bufs.size()), params.get());
  b.setInsertionPointToStart(&kernel.getBody().emplaceBlock());
  if (auto err = build(b, strides)) {
    kernel->erase();
    return err;
  }
  KernelSet::Kernel k;
  k.kind = kind;
  k.numArgs = bufs.size();
  k.body = kernel;
  addLaunch(kernels.add(std::move(k)), std::move(bufs));
  return llvm::Error::success();
}

llvm::Error FunctionLowering::scalarClone(OpBuilder &b, Operation *op, IRMapping &map) {
  if (auto c = dyn_cast<ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense || !dense.isSplat())
      return failure(op, "a fusion region holds a non-splat constant");
  }
  Operation *clone = b.clone(*op, map);
  for (Value r : clone->getResults())
    r.setType(RankedTensorType::get({}, typeOf(r).getElementType()));
  if (auto c = dyn_cast<ConstantOp>(clone)) {
    auto dense = cast<DenseElementsAttr>(c.getValue());
    c->setAttr("value", dense.resizeSplat(cast<ShapedType>(c.getResult().getType())));
  }
  return llvm::Error::success();
}

/// `iter` ends in the rotary dim R (the head dim, or its first R elements
/// for a partial rotation). Rotate-half: element d = j * R/2 + i is (j, i)
/// of [2, R/2], its partner (1 - j, i) is at offset R/2 and stride -R/2
/// along j. Interleaved: d = 2 i + j is (i, j) of [R/2, 2], its partner
/// (i, 1 - j) at offset 1 and stride -1 along j. Every other access walks the split dims
/// with its own last stride, so the nest is still one pass over memory: the
/// partner read touches the cache lines of the element reads.
FunctionLowering::RotaryReads FunctionLowering::splitForRotary(RotaryOp rotary, Shape &iter,
                                                               std::vector<Access> &accs,
                                                               std::vector<int> &bufs, int x,
                                                               int sin) {
  const bool interleaved = rotary.getInterleaved();
  const int64_t half = iter.back() / 2;
  iter.back() = interleaved ? half : 2;
  iter.push_back(interleaved ? 2 : half);
  for (Access &a : accs) {
    int64_t s = a.strides.back();
    a.strides.back() = interleaved ? 2 * s : half * s;
    a.strides.push_back(s);
  }
  // A partner read is an argument of its own bound to the same buffer (a
  // kernel accesses each argument at one place); the arena never gives a
  // kernel's output the bytes of its inputs, so reading it twice is safe.
  auto partnerOf = [&](int k) {
    Access p = accs[k];
    size_t j = p.strides.size() - (interleaved ? 1 : 2);
    p.base += p.strides[j];
    p.strides[j] = -p.strides[j];
    p.slot = bufs.size();
    bufs.push_back(bufs[accs[k].slot]);
    accs.push_back(p);
    return int(accs.size()) - 1;
  };
  RotaryReads r;
  r.op = rotary;
  r.partner = partnerOf(x);
  if (rotary.getTranspose())
    r.sinPartner = partnerOf(sin);
  return r;
}

void FunctionLowering::rotaryScalar(OpBuilder &b, const RotaryReads &r,
                                    const std::vector<Access> &accs,
                                    llvm::ArrayRef<Shape> strides, IRMapping &map) {
  auto rotary = cast<RotaryOp>(r.op);
  Location loc = rotary.getLoc();
  Value partner = load(b, accs[r.partner], strides[r.partner]);
  Value sin = r.sinPartner >= 0 ? load(b, accs[r.sinPartner], strides[r.sinPartner])
                                : map.lookup(rotary.getSin());
  Value direct = b.create<MulOp>(loc, map.lookup(rotary.getInput()), map.lookup(rotary.getCos()));
  map.map(rotary.getResult(),
          b.create<AddOp>(loc, direct, b.create<MulOp>(loc, partner, sin)).getResult());
}

/// One op over elements: its result and each operand read through its view
/// (broadcast by strides); a splat constant operand is a constant of the body.
/// A rotary op splits the head dim into its pairs (splitForRotary).
llvm::Error FunctionLowering::emitPointwise(Operation *op) {
  Value result = op->getResult(0);
  Shape out = shapeOf(result);
  std::vector<int> bufs{-1};
  std::vector<Access> accs{{0, 0, rowMajorStrides(out), typeOf(result).getElementType()}};
  std::vector<int> accessOf; // operand -> its access (-1: a splat constant)
  for (Value v : op->getOperands()) {
    if (!splatLiteral(v).empty()) {
      accessOf.push_back(-1);
      continue;
    }
    accessOf.push_back(accs.size());
    accs.push_back(readAccess(accs.size(), v, out, bufs));
  }
  int outId = arenaFor(result);
  valueBuffers[result] = outId;
  bufs[0] = outId;
  RotaryReads rotary;
  Shape iter = out;
  std::vector<Access> whole = accs; // before the split: the pass-through's views
  auto r = dyn_cast<RotaryOp>(op);
  if (r) {
    if (accessOf[0] < 0 || accessOf[2] < 0)
      return failure(op, "mlc.rotary's input and sin must be tensors in memory, not splats");
    iter.back() = shapeOf(r.getCos()).back(); // the rotary dim
    rotary = splitForRotary(r, iter, accs, bufs, accessOf[0], accessOf[2]);
  }
  if (auto err = addBodyStep(
      iter, accs, dynamicRows(result),
      [&](OpBuilder &b, llvm::ArrayRef<Shape> strides) -> llvm::Error {
        IRMapping map;
        for (auto [v, k] : llvm::zip(op->getOperands(), accessOf)) {
          if (k >= 0) {
            map.map(v, load(b, accs[k], strides[k]));
            continue;
          }
          if (auto err = scalarClone(b, v.getDefiningOp(), map))
            return err;
        }
        if (rotary.op)
          rotaryScalar(b, rotary, accs, strides, map);
        else if (auto err = scalarClone(b, op, map))
          return err;
        store(b, map.lookup(result), accs[0], strides[0]);
        return llvm::Error::success();
      },
      bufs))
    return err;
  if (!r || shapeOf(r.getCos()).back() == out.back())
    return llvm::Error::success();
  // A partial rotation: the head dim's last D - R elements pass through.
  const int64_t R = shapeOf(r.getCos()).back();
  Shape rest = out;
  rest.back() -= R;
  Access dst = whole[0], src = whole[accessOf[0]];
  dst.base += R * dst.strides.back();
  src.base += R * src.strides.back();
  src.slot = 1;
  return addBodyStep(
      rest, {dst, src}, dynamicRows(result),
      [&](OpBuilder &b, llvm::ArrayRef<Shape> strides) -> llvm::Error {
        store(b, load(b, src, strides[1]), dst, strides[0]);
        return llvm::Error::success();
      },
      {outId, bufs[whole[accessOf[0]].slot]});
}

/// The arguments of a fusion kernel over `iter`: its results (contiguous,
/// written in the arena), then its inputs read through their views. Access k
/// belongs to argument k.
FunctionLowering::KernelArgs FunctionLowering::bindFusion(FusionOp fusion, const Shape &iter) {
  KernelArgs a;
  for (Value r : fusion.getResults()) {
    // A result read only by a concatenation (the gradient of a split, such
    // as Phi3's fused gate/up projection's) is stored straight into its
    // slice of the concatenation: no copy gathers it there.
    if (fusion.getKind() == FusionKind::pointwise && r.hasOneUse() &&
        isa<ConcatOp>(*r.getUsers().begin()) && shapeOf(r) == iter) {
      if (std::optional<View> into = outputView(r)) {
        views[r] = *into;
        valueBuffers[r] = into->buffer;
        a.accs.push_back({int(a.slots.size()), into->offset, into->strides,
                          typeOf(r).getElementType()});
        a.slots.push_back({typeOf(r).getElementType(), true});
        a.bufs.push_back(into->buffer);
        continue;
      }
    }
    int id = arenaFor(r);
    valueBuffers[r] = id;
    a.accs.push_back({int(a.slots.size()), 0, rowMajorStrides(iter), typeOf(r).getElementType()});
    a.slots.push_back({typeOf(r).getElementType(), true});
    a.bufs.push_back(id);
  }
  for (Value in : fusion.getInputs()) {
    int slot = a.slots.size();
    a.slots.push_back({typeOf(in).getElementType(), false});
    a.accs.push_back(readAccess(slot, in, iter, a.bufs));
  }
  return a;
}

/// A pointwise fusion: one loop nest over the iteration shape; each input is
/// loaded once per element (broadcast by strides), every op becomes a scalar
/// temporary, and only the yielded values are stored.
llvm::Error FunctionLowering::cloneFusionRegion(OpBuilder &b, FusionOp fusion,
                                                const std::vector<Access> &accs,
                                                llvm::ArrayRef<Shape> strides, IRMapping &map,
                                                llvm::ArrayRef<Operation *> skip,
                                                const RotaryReads *rotary) {
  Block &block = fusion.getBody().front();
  for (auto [k, arg] : llvm::enumerate(block.getArguments())) {
    size_t a = fusion.getNumResults() + k;
    map.map(arg, load(b, accs[a], strides[a]));
  }
  for (Operation &op : block.without_terminator()) {
    if (llvm::is_contained(skip, &op))
      continue;
    if (rotary && rotary->op == &op)
      rotaryScalar(b, *rotary, accs, strides, map);
    else if (auto err = scalarClone(b, &op, map))
      return err;
  }
  return llvm::Error::success();
}

/// The nest of a pointwise fusion that holds a rotary op (at most one, as
/// mlc-fuse-elementwise forms them): its input and sin are block arguments,
/// read through accesses of their own, so the partner is one more read.
llvm::Expected<FunctionLowering::RotaryReads>
FunctionLowering::splitFusionForRotary(FusionOp fusion, Shape &iter, KernelArgs &bound) {
  RotaryReads none;
  RotaryOp rotary;
  for (Operation &op : fusion.getBody().front().without_terminator())
    if (auto r = dyn_cast<RotaryOp>(op)) {
      if (rotary)
        return failure(r, "a second mlc.rotary in one fusion");
      rotary = r;
    }
  if (!rotary)
    return none;
  auto argOf = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg ? int(fusion.getNumResults() + arg.getArgNumber()) : -1;
  };
  int x = argOf(rotary.getInput()), sin = argOf(rotary.getSin());
  if (x < 0 || (rotary.getTranspose() && sin < 0))
    return failure(rotary, "mlc.rotary's input (and a transposed op's sin) must be inputs of "
                           "the fusion");
  RotaryReads r = splitForRotary(rotary, iter, bound.accs, bound.bufs, x, sin);
  while (bound.slots.size() < bound.bufs.size())
    bound.slots.push_back({bound.slots[bound.accs[x].slot].first, false});
  return r;
}

llvm::Error FunctionLowering::emitFusion(FusionOp fusion) {
  if (fusion.getKind() == FusionKind::rows)
    return emitRowFusion(fusion);
  if (fusion.getKind() == FusionKind::optimizer)
    return emitOptimizerFusion(fusion);
  if (fusion.getKind() == FusionKind::norm)
    return emitNormFusion(fusion);
  if (fusion.getKind() == FusionKind::params)
    return emitParamsFusion(fusion);
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  // A column reduction closing the region iterates over its input's shape.
  ReduceSumOp columns;
  for (Operation &op : block.without_terminator())
    if (auto r = dyn_cast<ReduceSumOp>(op))
      columns = r;
  Shape iter = columns ? shapeOf(columns.getInput()) : shapeOf(fusion.getResult(0));
  KernelArgs bound = bindFusion(fusion, iter);
  auto &bufs = bound.bufs;
  auto &accs = bound.accs;
  int reduceSlot = -1;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (columns && v == columns.getResult()) {
      reduceSlot = i;
      accs[i].strides.assign(iter.size(), 0); // accumulated, not indexed per element
    }
  auto rotary = splitFusionForRotary(fusion, iter, bound);
  if (!rotary)
    return rotary.takeError();
  if (columns && rotary->op)
    return failure(columns, "a fusion with a rotary op cannot close into a column reduction");
  if (!columns)
    return addBodyStep(
        iter, accs, dynamicRows(fusion.getResult(0)),
        [&](OpBuilder &b, llvm::ArrayRef<Shape> strides) -> llvm::Error {
          IRMapping map;
          if (auto err = cloneFusionRegion(b, fusion, accs, strides, map, {}, &*rotary))
            return err;
          for (auto [i, v] : llvm::enumerate(yield.getValues()))
            store(b, map.lookup(v), accs[i], strides[i]);
          return llvm::Error::success();
        },
        bufs);
  // A column reduction: rows are the reduced leading dimensions, each
  // element's offsets decomposed from its (row, column); the reduction's
  // input is accumulated into its column's sum.
  size_t lead = columns.getAxes().size();
  int64_t R = product(Shape(iter.begin(), iter.begin() + lead));
  int64_t C = product(Shape(iter.begin() + lead, iter.end()));
  Rows rows = rowsOf(R, dynamicRows(columns.getInput()));
  return addBodyStep(
      iter, accs, false,
      [&](OpBuilder &b, llvm::ArrayRef<Shape> strides) -> llvm::Error {
        IRMapping map;
        if (auto err = cloneFusionRegion(b, fusion, accs, strides, map, {columns.getOperation()}))
          return err;
        b.create<plan::AccumulateOp>(fn.getLoc(), map.lookup(columns.getInput()), reduceSlot);
        for (auto [i, v] : llvm::enumerate(yield.getValues()))
          if (int(i) != reduceSlot)
            store(b, map.lookup(v), accs[i], strides[i]);
        return llvm::Error::success();
      },
      bufs, KernelTemplate::column_reduction, /*merge=*/false,
      [&](ParamsBuilder &p) { p.i64("lead", lead).rows(rows).i64("columns", C); });
}

/// A "rows" fusion: a LayerNorm or an RMSNorm and the pointwise prologue of
/// its input. Each row's prologue is computed once into a row buffer (values
/// needed elsewhere are stored on the way), then normalized from that buffer.
llvm::Error FunctionLowering::emitRowFusion(FusionOp fusion) {
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
  Shape iter = shapeOf(input);
  Shape rowDims(iter.begin(), iter.end() - 1);
  const int64_t R = product(rowDims);
  KernelArgs bound = bindFusion(fusion, iter);
  auto &bufs = bound.bufs;
  auto &accs = bound.accs;
  // The normalized row is stored in the result's type (a cast of it that
  // the fusion absorbed converts on the store); yielded both as it is and
  // cast (a second copy, mlc-fuse-elementwise), it is stored twice.
  SmallVector<int, 2> normSlots;
  llvm::SmallPtrSet<Operation *, 2> normCasts;
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    auto c = v.getDefiningOp<CastOp>();
    if (c && c.getInput() == normResult)
      normCasts.insert(c);
    if (v == normResult || (c && c.getInput() == normResult))
      normSlots.push_back(i);
  }
  if (normSlots.empty())
    return failure(normOp, "a \"rows\" fusion that does not return its norm");
  for (Operation *user : normResult.getUsers())
    if (!normCasts.count(user) && !isa<YieldOp>(user))
      return failure(user, "a \"rows\" fusion computes with its norm's result");
  SmallVector<Operation *, 3> skipped(normCasts.begin(), normCasts.end());
  skipped.push_back(normOp);
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
                                      bias ? map.lookup(bias) : Value(), slot,
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
  int outId = arenaFor(result);
  valueBuffers[result] = outId;
  addStep(plan::ReductionTemplateAttr::get(op->getContext()),
          encodeReduction(r, op->getContext()), {outId, bufferOf(input)},
          KernelTemplate::reduction);
  return llvm::Error::success();
}

/// Row-wise kernels: the reduction axis is the last one.
llvm::Error FunctionLowering::emitRows(Operation *op) {
  auto lastAxis = [&](int64_t axis, Value v) {
    return *normalizeAxis(axis, typeOf(v).getRank()) == typeOf(v).getRank() - 1;
  };
  Value x = op->getOperand(0);
  Type el = typeOf(op->getResult(0)).getElementType();
  Attribute k; // the template
  std::vector<int> bufs;
  // The template's parameters: element type, rows (dynamic token rows at
  // the capacity, per token) and the row's length.
  ParamsBuilder params(op->getContext());
  params.type("element", el);
  auto rowsAndColumns = [&](Value v) {
    Shape s = shapeOf(v);
    params.rows(rowsOf(product(s) / s.back(), dynamicRows(v))).i64("columns", s.back());
  };
  auto capacityRows = [&](Value v) {
    Shape s = shapeOf(v);
    return product(s) / s.back();
  };
  auto bindOut = [&](Value v) {
    int id = arenaFor(v);
    valueBuffers[v] = id;
    bufs.push_back(id);
  };
  auto eps = [&](llvm::APFloat e) { params.f64("eps", e.convertToDouble()); };
  // The splat incoming gradient of a loss, in its own type.
  auto scale = [&](Value grad) {
    auto c = grad.getDefiningOp<ConstantOp>();
    auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
    if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
      return false;
    params.attr("scale", FloatAttr::get(dense.getElementType(),
                                        dense.getSplatValue<APFloat>().convertToDouble()));
    return true;
  };

  if (auto sm = dyn_cast<SoftmaxOp>(op); sm || isa<LogSoftmaxOp>(op)) {
    int64_t axis = sm ? int64_t(sm.getAxis()) : int64_t(cast<LogSoftmaxOp>(op).getAxis());
    if (!lastAxis(axis, x))
      return failure(op, "softmax over a dimension other than the last is not supported yet");
    rowsAndColumns(x);
    bindOut(op->getResult(0));
    bufs.push_back(bufferOf(x));
    params.flag("log", !sm);
    k = plan::SoftmaxTemplateAttr::get(op->getContext());
  } else if (auto sg = dyn_cast<SoftmaxGradOp>(op)) {
    if (!lastAxis(sg.getAxis(), x))
      return failure(op, "softmax over a dimension other than the last is not supported yet");
    rowsAndColumns(x);
    bindOut(sg.getResult());
    bufs.push_back(bufferOf(sg.getGrad()));
    bufs.push_back(bufferOf(sg.getOutput()));
    k = plan::SoftmaxGradTemplateAttr::get(op->getContext());
  } else if (isa<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp>(op)) {
    // One template pair for both norms: the operands in order (input,
    // weight[, bias]; grad, input, weight[, residual]), the results out.
    const bool grad = isa<LayerNormGradOp, RmsNormGradOp>(op);
    const bool rms = isa<RmsNormOp, RmsNormGradOp>(op);
    rowsAndColumns(x);
    for (Value r : op->getResults())
      bindOut(r);
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
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      if (unit && (v == weight || (!grad && !rms && i == 2)))
        continue;
      // --dtype bf16: a bf16 product's widening marked mlc.consumer_load
      // (the incoming gradient): the kernel loads the product and widens it.
      auto widen = v.getDefiningOp<CastOp>();
      if (grad && i == 0 && widen && widen->hasAttr(kConsumerLoadAttr)) {
        bufs.push_back(bufferOf(widen.getInput()));
        params.type("grad_element", typeOf(widen.getInput()).getElementType());
        continue;
      }
      bufs.push_back(bufferOf(v));
    }
    params.flag("unit", unit);
    if (grad)
      params.i64("capacity", capacityRows(x));
    eps(op->getAttrOfType<FloatAttr>("epsilon").getValue());
    params.flag("rms", rms);
    if (auto rg = dyn_cast<RmsNormGradOp>(op))
      params.flag("residual", bool(rg.getResidual()));
    if (auto lg = dyn_cast<LayerNormGradOp>(op))
      params.flag("residual", bool(lg.getResidual()));
    // --dtype bf16: dx's bf16 copy for the next products (a cast that
    // mlc-fold-casts marked `mlc.producer_copy`) is written by this kernel,
    // the last argument, at a second store.
    if (grad)
      for (Operation *user : op->getResult(0).getUsers())
        if (auto c = dyn_cast<CastOp>(user); c && c->hasAttr(kProducerCopyAttr)) {
          bindOut(c.getResult());
          emittedWith.insert(c.getOperation());
          params.type("copy", typeOf(c.getResult()).getElementType());
          break;
        }
    k = grad ? Attribute(plan::LayerNormGradTemplateAttr::get(op->getContext()))
             : Attribute(plan::LayerNormTemplateAttr::get(op->getContext()));
  } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    rowsAndColumns(ce.getLogits());
    Type lt = typeOf(ce.getLabels()).getElementType();
    params.type("labels", lt).i64("ignore", ce.getIgnoreIndex());
    // With the gradient mlc-fuse-cross-entropy marked: one kernel for both.
    for (Operation *user : ce.getLogits().getUsers())
      if (auto cg = dyn_cast<CrossEntropyGradOp>(user);
          cg && cg->hasAttr(kWithLossAttr) && !emittedWith.count(cg))
        return emitCrossEntropyWithGrad(ce, cg, params);
    bindOut(ce.getResult());
    bufs.push_back(bufferOf(ce.getLogits()));
    bufs.push_back(bufferOf(ce.getLabels()));
    k = plan::CrossEntropyTemplateAttr::get(op->getContext());
  } else if (auto cg = dyn_cast<CrossEntropyGradOp>(op)) {
    if (cg->hasAttr(kWithLossAttr))
      return failure(op, "marked mlc.with_loss, but no mlc.cross_entropy before it reads its "
                         "logits");
    rowsAndColumns(cg.getLogits());
    Type lt = typeOf(cg.getLabels()).getElementType();
    params.type("labels", lt).i64("ignore", cg.getIgnoreIndex());
    bindOut(cg.getResult());
    bufs.push_back(bufferOf(cg.getLogits()));
    bufs.push_back(bufferOf(cg.getLabels()));
    if (!scale(cg.getGrad()))
      bufs.push_back(bufferOf(cg.getGrad()));
    k = plan::CrossEntropyGradTemplateAttr::get(op->getContext());
  } else {
    return failure(op, "internal error: not a row op");
  }
  addStep(k, params.get(), bufs, KernelTemplate::rows);
  return llvm::Error::success();
}

/// The rotary tables of an attention kernel, [B | 1, 1, S | 1, R] (varlen
/// [T | 1, 1, R]): their buffers, R and the batch and row strides that
/// MlcAttentionRotary holds. The kernel reads both tables at those strides
/// from their first element, so a view with an offset, a strided last dim
/// or strides other than the other table's is copied first.
void FunctionLowering::rotaryTables(Value cos, Value sin, bool varlen, AttentionKernel &desc,
                                    std::vector<int> &bufs) {
  View c = viewOf(cos), s = viewOf(sin);
  auto plain = [](const View &w) { return w.offset == 0 && w.strides.back() == 1; };
  if (!plain(c) || !plain(s) || c.strides != s.strides) {
    c = own(cos);
    s = own(sin);
  }
  auto stride = [&](size_t d) { return c.shape[d] == 1 ? 0 : c.strides[d]; };
  desc.rotaryDim = c.shape.back();
  desc.rotaryBatch = varlen ? 0 : stride(0);
  desc.rotaryRow = stride(varlen ? 0 : 2);
  bufs.push_back(c.buffer);
  bufs.push_back(s.buffer);
}

llvm::Error FunctionLowering::emitAttention(Operation *op, bool backward) {
  Value q, k, v, mask, cu, cos, sin, rank;
  FloatAttr scaleAttr, softcapAttr;
  IntegerAttr windowAttr, blocksAttr, axisAttr;
  bool causal, interleaved;
  double dropout;
  int64_t seed;
  if (auto a = dyn_cast<AttentionOp>(op)) {
    q = a.getQuery(), k = a.getKey(), v = a.getValue(), mask = a.getMask(),
    cu = a.getCuSeqlens(), scaleAttr = a.getScaleAttr(), causal = a.getCausal();
    dropout = a.getDropout().convertToDouble(), seed = a.getSeed();
    cos = a.getCos(), sin = a.getSin(), interleaved = a.getInterleaved();
    softcapAttr = a.getSoftcapAttr(), windowAttr = a.getWindowAttr();
    rank = a.getRank(), blocksAttr = a.getBlocksAttr(), axisAttr = a.getAxisAttr();
  } else {
    auto g = cast<AttentionGradOp>(op);
    q = g.getQuery(), k = g.getKey(), v = g.getValue(), mask = g.getMask(),
    cu = g.getCuSeqlens(), scaleAttr = g.getScaleAttr(), causal = g.getCausal();
    dropout = g.getDropout().convertToDouble(), seed = g.getSeed();
    cos = g.getCos(), sin = g.getSin(), interleaved = g.getInterleaved();
    softcapAttr = g.getSoftcapAttr(), windowAttr = g.getWindowAttr();
    rank = g.getRank(), blocksAttr = g.getBlocksAttr(), axisAttr = g.getAxisAttr();
  }
  // Padded: [B, H, S, D], one (batch, head) per iteration. Variable-length:
  // [T, H, D] packed tokens, one (sequence, head) per iteration, the sequence
  // being tokens cu_seqlens[n] .. cu_seqlens[n + 1] (L of them).
  const bool varlen = bool(cu);
  Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t B = 0, H, Hkv, Sq = 0, D, Sk = 0, Dv;
  if (varlen) {
    H = qs[1], Hkv = ks[1], D = qs[2], Dv = vs[2];
    B = shapeOf(cu)[0] - 1; // sequences (trailing empty ones allowed)
  } else {
    B = qs[0], H = qs[1], Hkv = ks[1], Sq = qs[2], D = qs[3], Sk = ks[2], Dv = vs[3];
  }
  double scale = scaleAttr ? scaleAttr.getValueAsDouble() : 1.0 / std::sqrt(double(D));
  Type el = typeOf(q).getElementType();
  Shape maskStrides(4, 0);
  if (mask)
    maskStrides = broadcastStrides(shapeOf(mask), {B, H, Sq, Sk});
  // Every [B, H, S, D] operand and result is a strided view whose innermost
  // dimension is contiguous: q, k, v read through the transposes and the
  // split of the fused QKV projection, and results written straight into
  // the layout their consumers want.
  std::vector<int> bufs;
  std::vector<View> tensors; // outputs, [grad], q, k, v
  for (Value r : op->getResults()) {
    std::optional<View> w = outputView(r);
    if (!w) {
      valueBuffers[r] = arenaFor(r);
      w = own(r);
    }
    tensors.push_back(*w);
    bufs.push_back(w->buffer);
  }
  int nOut = op->getNumResults();
  Value grad = backward ? op->getOperand(0) : Value();
  // Argument order: outputs, [grad], q, k, v, [mask].
  // (The outputs in their own type: bf16 with `bf16_result`, mlc-fold-casts.)
  std::vector<std::pair<Type, bool>> slots;
  for (Value r : op->getResults())
    slots.push_back({typeOf(r).getElementType(), true});
  std::vector<Value> reads;
  if (backward)
    reads.push_back(grad);
  int qi = nOut + (backward ? 1 : 0);
  reads.insert(reads.end(), {q, k, v});
  for (Value x : reads) {
    View w = viewOf(x);
    if (w.strides.back() != 1)
      w = own(x);
    tensors.push_back(w);
    bufs.push_back(w.buffer);
    slots.push_back({el, false});
  }
  if (mask) {
    bufs.push_back(bufferOf(mask));
    slots.push_back({el, false});
  }
  int cuSlot = -1;
  if (varlen) {
    cuSlot = slots.size();
    bufs.push_back(bufferOf(cu));
    slots.push_back({typeOf(cu).getElementType(), false});
  }
  // The kernel's description: sizes, flags and each tensor's strides.
  AttentionKernel desc;
  if (cos) {
    desc.rotarySlot = slots.size();
    rotaryTables(cos, sin, varlen, desc, bufs);
    slots.push_back({el, false});
    slots.push_back({el, false});
    desc.interleaved = interleaved;
  }
  // Dropout on a block of one process's probabilities: the rank's buffer.
  if (rank && dropout > 0) {
    desc.blockSlot = slots.size();
    desc.blocks = blocksAttr.getInt(), desc.blockAxis = axisAttr.getInt();
    bufs.push_back(bufferOf(rank));
    slots.push_back({typeOf(rank).getElementType(), false});
  }
  desc.element = el;
  desc.backward = backward;
  desc.varlen = varlen;
  desc.causal = causal;
  desc.batch = B, desc.heads = H, desc.kvHeads = Hkv, desc.seqQ = Sq, desc.seqK = Sk,
  desc.headDim = D, desc.valueDim = Dv, desc.tokenCapacity = kernels.tokenCapacity;
  desc.scale = scale, desc.dropout = dropout, desc.seed = seed;
  desc.softcap = softcapAttr ? softcapAttr.getValueAsDouble() : 0.0;
  // A window as long as the keys (padded) hides nothing causal attention
  // shows; varlen sequences may be longer than any static bound.
  desc.window = windowAttr && (varlen || windowAttr.getInt() < Sk) ? windowAttr.getInt() : 0;
  // A static token dimension (packed documents of a fixed-size micro-batch)
  // is its own capacity: the CUDA grid's query tiles and the backward's
  // per-row statistics cover its tokens.
  if (varlen && !ShapedType::isDynamic(qs[0]))
    desc.tokenCapacity = std::max(desc.tokenCapacity, qs[0]);
  for (const View &w : tensors)
    desc.tensors.push_back({w.offset, w.strides[0], w.strides[1], w.strides[varlen ? 0 : 2]});
  for (auto [t, written] : slots)
    desc.args.push_back({t, written});
  desc.query = qi;
  desc.mask = bool(mask);
  desc.maskStrides = maskStrides;
  desc.cuSlot = cuSlot;
  if (auto module = fn->getParentOfType<ModuleOp>())
    if (auto products = module->getAttrOfType<StringAttr>("mlc.autocast"))
      desc.bf16Products = products.getValue() == "bf16";
  addStep(plan::AttentionTemplateAttr::get(op->getContext()),
          encodeAttention(desc, op->getContext()), bufs, KernelTemplate::attention);
  return llvm::Error::success();
}

} // namespace mlc::lowering

namespace mlc::lowering {

llvm::Expected<std::vector<std::pair<FunctionLowering::Slot, std::vector<size_t>>>>
FunctionLowering::segments(Operation *user, ValueRange args, llvm::StringRef role) {
  if (!layout)
    return failure(user, "the optimizer's kernels need the flat-buffer layout");
  std::vector<std::pair<Slot, size_t>> slots;
  for (auto [i, v] : llvm::enumerate(args)) {
    auto arg = dyn_cast<BlockArgument>(v);
    StringAttr name = arg ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), role) : nullptr;
    if (!name)
      return failure(user, "an optimizer kernel's operand is not a function argument marked " + role);
    auto it = layout->find(name.str());
    if (it == layout->end())
      return failure(user, "parameter '" + name.str() + "' has no place in the flat buffers");
    slots.push_back({it->second, i});
  }
  std::stable_sort(slots.begin(), slots.end(),
                   [](auto &a, auto &b) { return a.first.offset < b.first.offset; });
  std::vector<std::pair<Slot, std::vector<size_t>>> out;
  for (auto &[slot, i] : slots)
    out.push_back({slot, {i}});
  return out;
}

/// One AdamW update over the flat buffers (an `optimizer` fusion). The
/// element body is the region's scalar code, as for every fusion; the CPU
/// wrapper runs it over each parameter's segment (contiguous segments of
/// the same decay merged) in one parallel region, the segments work-shared
/// without barriers between them, so the kernel is one pass over memory:
/// it reads p, g, m, v and writes p, m, v (28 bytes per f32 parameter).
llvm::Error FunctionLowering::emitOptimizerFusion(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  size_t n = (fusion.getInputs().size() - 1) / 4;
  auto params = fusion.getInputs().slice(1, n);
  auto decayAttr = fusion->getAttrOfType<DenseBoolArrayAttr>("mlc.decay");
  if (!decayAttr || decayAttr.size() != int64_t(n))
    return failure(fusion, "an optimizer fusion needs its mlc.decay flags (one per parameter)");
  auto segs = segments(fusion, params, "mlc.param");
  if (!segs)
    return segs.takeError();
  // The gradients and moments must sit where their parameters do.
  for (int k = 1; k < 4; ++k) {
    static const char *roles[] = {"", "mlc.grad", "mlc.moment1", "mlc.moment2"};
    auto others = segments(fusion, fusion.getInputs().slice(1 + k * n, n), roles[k]);
    if (!others)
      return others.takeError();
    for (size_t i = 0; i < segs->size(); ++i)
      if ((*others)[i].first.offset != (*segs)[i].first.offset)
        return failure(fusion, "an optimizer fusion's gradients and moments are not in parameter order");
  }
  // Merge contiguous segments of the same decay.
  std::vector<std::array<int64_t, 3>> merged;
  for (auto &[slot, idx] : *segs) {
    int64_t decay = decayAttr[idx[0]] ? 1 : 0;
    if (!merged.empty() && merged.back()[0] + merged.back()[1] == slot.offset &&
        merged.back()[2] == decay)
      merged.back()[1] += slot.numel;
    else
      merged.push_back({slot.offset, slot.numel, decay});
  }
  Type el = typeOf(params[0]).getElementType();
  int64_t total = layout->at("*").numel;
  int pBuf = newBuffer({Buffer::Param, el, total, "*"});
  int mBuf = newBuffer({Buffer::Moment1, el, total, "*"});
  int vBuf = newBuffer({Buffer::Moment2, el, total, "*"});
  int gBuf = newBuffer({Buffer::Grad, el, total, "*"});
  int hBuf = bufferOf(fusion.getInputs()[0]);

  // The body over the segments' elements: p, g, m, v loaded (arguments
  // P, G, M, V in the launch's order P, M, V, G), the decay factor and the
  // step's scalars (block arguments 4 and 5..), the update, p, m, v stored.
  Shape table;
  int64_t count = 0;
  for (auto &[off, n, decay] : merged) {
    table.insert(table.end(), {off, n, decay});
    count += n;
  }
  return addBodyStep(
      {count}, {}, false,
      [&](OpBuilder &b, llvm::ArrayRef<Shape>) -> llvm::Error {
        static const int argOf[] = {0, 3, 1, 2}; // p, g, m, v
        IRMapping map;
        auto scalarType = RankedTensorType::get({}, el);
        for (int k = 0; k < 4; ++k)
          map.map(block.getArgument(k), load(b, {argOf[k], 0, {1}, el}, {1}));
        map.map(block.getArgument(4),
                b.create<plan::DecayFactorOp>(fn.getLoc(), scalarType, 4, int64_t(kDecay)));
        for (unsigned k = 5; k < block.getNumArguments(); ++k)
          map.map(block.getArgument(k),
                  b.create<plan::ScalarOp>(fn.getLoc(), scalarType, 4, int64_t(k - 5)));
        for (Operation &op : block.without_terminator())
          if (auto err = scalarClone(b, &op, map))
            return err;
        for (int k = 0; k < 3; ++k)
          store(b, map.lookup(yield.getValues()[k]), {k, 0, {1}, el}, {1});
        return llvm::Error::success();
      },
      {pBuf, mBuf, vBuf, gBuf, hBuf}, KernelTemplate::optimizer, /*merge=*/false,
      [&](ParamsBuilder &p) { p.i64s("segments", table); });
}

/// The L2 norm over the flat gradient buffer (a `norm` fusion): each
/// element through the region's scalar code (its square, in f64), summed in
/// double by per-thread partials, then the square root.
llvm::Error FunctionLowering::emitNormFusion(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  auto segs = segments(fusion, fusion.getInputs(), "mlc.grad");
  if (!segs)
    return segs.takeError();
  std::vector<std::array<int64_t, 2>> table;
  for (auto &[slot, idx] : *segs) {
    if (!table.empty() && table.back()[0] + table.back()[1] == slot.offset)
      table.back()[1] += slot.numel;
    else
      table.push_back({slot.offset, slot.numel});
  }
  Type el = typeOf(fusion.getInputs()[0]).getElementType();
  int gBuf = newBuffer({Buffer::Grad, el, layout->at("*").numel, "*"});
  int outId = arenaFor(fusion.getResult(0));
  valueBuffers[fusion.getResult(0)] = outId;
  // The body over the segments' elements: g loaded, the region's value
  // (its square, in f64) summed into the norm.
  Shape flat;
  int64_t count = 0;
  for (auto &[off, n] : table) {
    flat.insert(flat.end(), {off, n});
    count += n;
  }
  return addBodyStep(
      {count}, {}, false,
      [&](OpBuilder &b, llvm::ArrayRef<Shape>) -> llvm::Error {
        IRMapping map;
        map.map(block.getArgument(0), load(b, {1, 0, {1}, el}, {1}));
        for (Operation &op : block.without_terminator())
          if (auto err = scalarClone(b, &op, map))
            return err;
        b.create<plan::AccumulateOp>(fn.getLoc(), map.lookup(yield.getValues()[0]), 0);
        return llvm::Error::success();
      },
      {outId, gBuf}, KernelTemplate::reduction, /*merge=*/false,
      [&](ParamsBuilder &p) { p.i64s("segments", flat); });
}

/// The parameters mapped element by element (a `params` fusion: under
/// --dtype bf16 the weights' bf16 copies), as one kernel over the whole
/// flat parameter buffer (parameters the fusion does not read ride along:
/// biases and norms, a few elements). Its output is one arena slice laid
/// out as the flat buffer; each result is a view of it at its parameter's
/// place, which the layout fixes only after @train_step is lowered
/// (placeParameterViews). 4 + 2 bytes per element for f32 -> bf16.
llvm::Error FunctionLowering::emitParamsFusion(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  Type el = typeOf(fusion.getInputs()[0]).getElementType();
  Type out = typeOf(fusion.getResult(0)).getElementType();
  int64_t total = 0;
  for (BlockArgument arg : fn.getArguments())
    if (fn.getArgAttr(arg.getArgNumber(), "mlc.param")) {
      if (typeOf(arg).getElementType() != el)
        return failure(fusion, "a params fusion needs every parameter of one element type");
      total += numel(arg);
    }
  int src = newBuffer({Buffer::Param, el, total, "*"});
  int dst = newBuffer({Buffer::Arena, out, total});
  for (auto [in, r] : llvm::zip(fusion.getInputs(), fusion.getResults())) {
    auto name = fn.getArgAttrOfType<StringAttr>(cast<BlockArgument>(in).getArgNumber(),
                                                "mlc.param");
    Buffer view{Buffer::Alias, out, numel(r)};
    view.alias = dst;
    view.atParam = name.str();
    view.source = fusion;
    valueBuffers[r] = newBuffer(view);
  }
  paramsFusions.push_back({fusion, total});
  return addBodyStep(
      {total}, {}, false,
      [&](OpBuilder &b, llvm::ArrayRef<Shape>) -> llvm::Error {
        IRMapping map;
        map.map(block.getArgument(0), load(b, {1, 0, {1}, el}, {1}));
        for (Operation &op : block.without_terminator())
          if (auto err = scalarClone(b, &op, map))
            return err;
        store(b, map.lookup(yield.getValues()[0]), {0, 0, {1}, out}, {1});
        return llvm::Error::success();
      },
      {dst, src}, KernelTemplate::pointwise, /*merge=*/false);
}

llvm::Error FunctionLowering::placeParameterViews(const Layout &flat) {
  auto all = flat.find("*");
  for (auto [fusion, count] : paramsFusions)
    if (all == flat.end() || all->second.numel != count)
      return failure(fusion, "a params fusion in @" + fn.getSymName().str() +
                                 " maps a parameter set other than the flat buffer's");
  for (Buffer &b : buffers) {
    if (b.atParam.empty())
      continue;
    auto it = flat.find(b.atParam);
    if (it == flat.end())
      return failure(b.source, "parameter '" + b.atParam + "' has no place in the flat buffers");
    b.offset = it->second.offset * dtypeBytes(b.element);
  }
  return llvm::Error::success();
}

} // namespace mlc::lowering
