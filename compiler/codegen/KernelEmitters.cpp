//===- KernelEmitters.cpp - the plan.kernel ops of pointwise graph ops ----===//
//
// Each emitter builds one kernel as IR; no target is involved, the targets
// print them (KernelPrinter.cpp). This file: pointwise ops and pointwise
// fusion regions, bodies of loads, scalar ops and stores over strided views
// (rotary embeddings included). The others: RowEmitters.cpp (row fusions,
// reductions, row kernels), AttentionEmitter.cpp (attention and its
// gradient), FlatBufferEmitters.cpp (the optimizer's update, the gradient
// norm and the parameters' copies over the flat buffers).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

#include "llvm/ADT/TypeSwitch.h"


namespace mlc::lowering {

llvm::Error FunctionLowering::addBodyStep(const Shape &shape, const std::vector<Access> &accs,
                                          bool dynamic, BodyBuilder build, std::vector<Value> bufs,
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
  addLaunch(kernels.add(std::move(k)), bufs);
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
                                                               std::vector<Value> &bufs, int x,
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
  std::vector<Value> bufs{Value()};
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
  Value outBuf = arenaFor(result);
  valueBuffers[result] = outBuf;
  bufs[0] = outBuf;
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
      {outBuf, bufs[whole[accessOf[0]].slot]});
}

/// The arguments of a fusion kernel over `iter`: its results (contiguous,
/// written in the arena), then its inputs read through their views. Access k
/// belongs to argument k.
llvm::Expected<FunctionLowering::KernelArgs>
FunctionLowering::bindFusion(FusionOp fusion, const Shape &iter) {
  KernelArgs a;
  for (Value r : fusion.getResults()) {
    // A result marked mlc.in_reader_layout (mlc-in-place: read only by a
    // concatenation, the gradient of a split such as Phi3's fused gate/up
    // projection's) is stored straight into its slice of the concatenation:
    // no copy gathers it there.
    if (inReaderLayout(fusion, cast<OpResult>(r).getResultNumber())) {
      std::optional<View> into;
      if (fusion.getKind() == FusionKind::pointwise && shapeOf(r) == iter)
        into = outputView(r);
      if (!into)
        return failure(fusion, "marked mlc.in_reader_layout, but result " +
                                   llvm::Twine(cast<OpResult>(r).getResultNumber()) +
                                   " is not a pointwise result of the iteration's shape that "
                                   "its reader's layout can hold");
      views[r] = *into;
      valueBuffers[r] = into->buffer;
      a.accs.push_back({int(a.slots.size()), into->offset, into->strides,
                        typeOf(r).getElementType()});
      a.slots.push_back({typeOf(r).getElementType(), true});
      a.bufs.push_back(into->buffer);
      continue;
    }
    Value buf = arenaFor(r);
    valueBuffers[r] = buf;
    a.accs.push_back({int(a.slots.size()), 0, rowMajorStrides(iter), typeOf(r).getElementType()});
    a.slots.push_back({typeOf(r).getElementType(), true});
    a.bufs.push_back(buf);
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
  if (fusion.getKind() == FusionKind::optimizer)
    return emitOptimizerFusion(fusion);
  if (fusion.getKind() == FusionKind::norm)
    return emitNormFusion(fusion);
  if (fusion.getKind() == FusionKind::params)
    return emitParamsFusion(fusion);
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  // A column reduction closing the region iterates over its input's shape;
  // a rows fusion (its results all of its norm's shape) and a pointwise one
  // over their results'.
  ReduceSumOp columns;
  for (Operation &op : block.without_terminator())
    if (auto r = dyn_cast<ReduceSumOp>(op))
      columns = r;
  Shape iter = columns ? shapeOf(columns.getInput()) : shapeOf(fusion.getResult(0));
  auto boundOr = bindFusion(fusion, iter);
  if (!boundOr)
    return boundOr.takeError();
  KernelArgs &bound = *boundOr;
  if (fusion.getKind() == FusionKind::rows)
    return emitRowFusion(fusion, bound);
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

} // namespace mlc::lowering
