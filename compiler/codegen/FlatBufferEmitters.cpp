//===- FlatBufferEmitters.cpp - kernels over the flat buffers -------------===//
//
// The kernels that run over the flat parameter, gradient and moment
// buffers rather than one value: the AdamW update (an `optimizer` fusion),
// the gradient's L2 norm (a `norm` fusion) and the parameters' element-wise
// copies (a `params` fusion, --dtype bf16's weights), with the parameter
// views that the layout places.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "contract/OptimizerScalars.h"

#include <array>

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
  Value pBuf = bind(plan::BufferKind::param, el, total, "*");
  Value mBuf = bind(plan::BufferKind::moment1, el, total, "*");
  Value vBuf = bind(plan::BufferKind::moment2, el, total, "*");
  Value gBuf = bind(plan::BufferKind::grad, el, total, "*");
  Value hBuf = bufferOf(fusion.getInputs()[0]);

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
  Value gBuf = bind(plan::BufferKind::grad, el, layout->at("*").numel, "*");
  Value outBuf = arenaFor(fusion.getResult(0));
  valueBuffers[fusion.getResult(0)] = outBuf;
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
        auto value = flatElement(b, block, el);
        if (!value)
          return value.takeError();
        b.create<plan::AccumulateOp>(fn.getLoc(), *value, 0);
        return llvm::Error::success();
      },
      {outBuf, gBuf}, KernelTemplate::reduction, /*merge=*/false,
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
  Type el = typeOf(fusion.getInputs()[0]).getElementType();
  Type out = typeOf(fusion.getResult(0)).getElementType();
  int64_t total = 0;
  for (BlockArgument arg : fn.getArguments())
    if (fn.getArgAttr(arg.getArgNumber(), "mlc.param")) {
      if (typeOf(arg).getElementType() != el)
        return failure(fusion, "a params fusion needs every parameter of one element type");
      total += numel(arg);
    }
  Value src = bind(plan::BufferKind::param, el, total, "*");
  Value dst = arena(out, total);
  for (auto [in, r] : llvm::zip(fusion.getInputs(), fusion.getResults())) {
    auto name = fn.getArgAttrOfType<StringAttr>(cast<BlockArgument>(in).getArgNumber(),
                                                "mlc.param");
    Value view = alias(dst, 0, out, numel(r)); // placed by placeParameterViews
    paramViews.push_back({view.getDefiningOp<plan::ViewOp>(), name.str(), fusion});
    valueBuffers[r] = view;
  }
  paramsFusions.push_back({fusion, total});
  return addBodyStep(
      {total}, {}, false,
      [&](OpBuilder &b, llvm::ArrayRef<Shape>) -> llvm::Error {
        auto value = flatElement(b, block, el);
        if (!value)
          return value.takeError();
        store(b, *value, {0, 0, {1}, out}, {1});
        return llvm::Error::success();
      },
      {dst, src}, KernelTemplate::pointwise, /*merge=*/false);
}

llvm::Expected<Value> FunctionLowering::flatElement(OpBuilder &b, Block &block, Type el) {
  IRMapping map;
  map.map(block.getArgument(0), load(b, {1, 0, {1}, el}, {1}));
  for (Operation &op : block.without_terminator())
    if (auto err = scalarClone(b, &op, map))
      return std::move(err);
  return map.lookup(cast<YieldOp>(block.getTerminator()).getValues()[0]);
}

llvm::Error FunctionLowering::placeParameterViews(const Layout &flat) {
  auto all = flat.find("*");
  for (auto [fusion, count] : paramsFusions)
    if (all == flat.end() || all->second.numel != count)
      return failure(fusion, "a params fusion in @" + fn.getSymName().str() +
                                 " maps a parameter set other than the flat buffer's");
  for (ParamView &p : paramViews) {
    auto it = flat.find(p.param);
    if (it == flat.end())
      return failure(p.fusion, "parameter '" + p.param + "' has no place in the flat buffers");
    Type el = p.view.getType().getElementType();
    p.view.setOffset(it->second.offset * dtypeBytes(el));
  }
  return llvm::Error::success();
}

} // namespace mlc::lowering
