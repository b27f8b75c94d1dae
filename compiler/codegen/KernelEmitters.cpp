//===- KernelEmitters.cpp - the C++ text of generated kernels --------------===//
//
// Each emitter writes one kernel: pointwise ops and fusion regions (loop
// nests over strided views), row kernels (softmax, LayerNorm, cross-entropy
// and their gradients), reductions and attention. Loops keep their innermost
// dimension contiguous and carry `omp simd` reductions, so the host compiler
// vectorizes them without -ffast-math.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "contract/OptimizerScalars.h"

#include "llvm/ADT/TypeSwitch.h"

#include <array>
#include <cmath>

namespace mlc::lowering {

std::string FunctionLowering::pointwiseExpr(Operation *op, const std::vector<std::string> &a,
                                            const std::string &index, std::string &prologue) {
  std::unique_ptr<ScalarEmitter> emitter = target().scalarEmitter(index, prologue);
  return cast<ScalarOpInterface>(op).scalarExpr(*emitter, a);
}

llvm::Error FunctionLowering::emitPointwise(Operation *op) {
  Value result = op->getResult(0);
  Shape out = shapeOf(result);
  std::vector<std::pair<Type, bool>> slots{{typeOf(result).getElementType(), true}};
  std::vector<int> bufs{-1};
  std::vector<Access> accs{{0, 0, rowMajorStrides(out), typeOf(result).getElementType()}};
  std::vector<std::string> operands;
  for (Value v : op->getOperands()) {
    std::string lit = splatLiteral(v);
    if (!lit.empty()) {
      operands.push_back(lit);
      continue;
    }
    int slot = slots.size();
    slots.push_back({typeOf(v).getElementType(), false});
    accs.push_back(readAccess(slot, v, out, bufs));
    operands.push_back("p" + std::to_string(slot) + "[o" + std::to_string(accs.size() - 1) +
                       "]");
  }
  int outId = arenaFor(result);
  valueBuffers[result] = outId;
  bufs[0] = outId;
  return addTextStep(
      [&]() -> llvm::Expected<std::string> {
        std::string prologue;
        std::string body = "    p0[o0] = " + pointwiseExpr(op, operands, "o0", prologue) + ";\n";
        return args(slots) + prologue + target().pointwise(out, accs, body, dynamicRows(result));
      },
      bufs);
}

/// The per-element code of a fusion region: splat constants become literals,
/// every pointwise op a scalar temporary; `roots` (the region's reduction or
/// LayerNorm and the cast of its result, if any) are left to the caller.
llvm::Error FunctionLowering::scalarOps(Block &block, llvm::ArrayRef<Operation *> roots,
                                        const std::string &index, const std::string &indent,
                                        llvm::DenseMap<Value, std::string> &scalar,
                                        std::string &body, std::string &prologue) {
  int tmp = 0;
  for (Operation &op : block.without_terminator()) {
    if (auto c = dyn_cast<ConstantOp>(op)) {
      std::string lit = splatLiteral(c.getResult());
      if (lit.empty())
        return failure("a fusion region holds a non-splat constant");
      scalar[c.getResult()] = lit;
      continue;
    }
    if (llvm::is_contained(roots, &op))
      continue;
    std::vector<std::string> operands;
    for (Value v : op.getOperands())
      operands.push_back(scalar.lookup(v));
    std::string name = "t" + std::to_string(tmp++);
    body += indent + "const " + cType(typeOf(op.getResult(0)).getElementType()) + " " + name +
            " = " + pointwiseExpr(&op, operands, index, prologue) + ";\n";
    scalar[op.getResult(0)] = name;
  }
  return llvm::Error::success();
}

/// The arguments of a fusion kernel over `iter`: its results (contiguous,
/// written in the arena), then its inputs read through their views. Access k
/// belongs to argument k.
FunctionLowering::KernelArgs FunctionLowering::bindFusion(FusionOp fusion, const Shape &iter) {
  KernelArgs a;
  for (Value r : fusion.getResults()) {
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
llvm::Error FunctionLowering::emitFusion(FusionOp fusion) {
  if (fusion.getKind() == FusionKind::rows)
    return emitRowFusion(fusion);
  if (fusion.getKind() == FusionKind::optimizer)
    return emitOptimizerFusion(fusion);
  if (fusion.getKind() == FusionKind::norm)
    return emitNormFusion(fusion);
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  // A column reduction closing the region iterates over its input's shape.
  ReduceSumOp columns;
  for (Operation &op : block.without_terminator())
    if (auto r = dyn_cast<ReduceSumOp>(op))
      columns = r;
  Shape iter = columns ? shapeOf(columns.getInput()) : shapeOf(fusion.getResult(0));
  KernelArgs bound = bindFusion(fusion, iter);
  auto &slots = bound.slots;
  auto &bufs = bound.bufs;
  auto &accs = bound.accs;
  int reduceSlot = -1;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (columns && v == columns.getResult()) {
      reduceSlot = i;
      accs[i].strides.assign(iter.size(), 0); // accumulated, not indexed per element
    }
  // The element's code, then its loop: the text of each target in turn.
  auto text = [&]() -> llvm::Expected<std::string> {
    llvm::DenseMap<Value, std::string> scalar;
    std::string body;
    for (auto [k, arg] : llvm::enumerate(block.getArguments())) {
      int slot = fusion.getNumResults() + k;
      std::string name = "x" + std::to_string(slot);
      body += "    const " + cType(typeOf(arg).getElementType()) + " " + name + " = p" +
              std::to_string(slot) + "[o" + std::to_string(slot) + "];\n";
      scalar[arg] = name;
    }
    std::string prologue;
    if (auto err = scalarOps(block, {columns.getOperation()}, "flat", "    ", scalar, body,
                             prologue))
      return std::move(err);
    if (columns)
      body += "    sum += " + scalar.lookup(columns.getInput()) + ";\n";
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (int(i) != reduceSlot)
        body += "    p" + std::to_string(i) + "[o" + std::to_string(i) + "] = " +
                scalar.lookup(v) + ";\n";
    if (!columns) {
      body = "    const int64_t flat = o0;\n" + body;
      return args(slots) + prologue +
             target().pointwise(iter, accs, body, dynamicRows(fusion.getResult(0)));
    }
    // Rows are the reduced leading dimensions; each element's offsets are
    // decomposed from its (row, column).
    size_t lead = columns.getAxes().size();
    Shape rowDims(iter.begin(), iter.begin() + lead), colDims(iter.begin() + lead, iter.end());
    int64_t R = product(rowDims), C = product(colDims);
    auto decompose = [](const std::string &var, const Shape &dims, const Shape &strides) {
      std::string e = "0";
      std::string rem = var;
      for (size_t d = dims.size(); d-- > 0;) {
        std::string idx = d == 0 ? rem : "(" + rem + " % " + std::to_string(dims[d]) + ")";
        if (strides[d])
          e += " + " + idx + " * " + std::to_string(strides[d]);
        rem = "(" + rem + " / " + std::to_string(dims[d]) + ")";
      }
      return e;
    };
    std::string offsets;
    for (size_t k = 0; k < accs.size(); ++k) {
      if (int(k) == reduceSlot)
        continue;
      Shape rs(accs[k].strides.begin(), accs[k].strides.begin() + lead);
      Shape cs(accs[k].strides.begin() + lead, accs[k].strides.end());
      offsets += "      const int64_t o" + std::to_string(k) + " = " +
                 std::to_string(accs[k].base) + " + " + decompose("r", rowDims, rs) + " + " +
                 decompose("c", colDims, cs) + ";\n";
    }
    std::string T = cType(typeOf(columns.getResult()).getElementType());
    return args(slots) + prologue +
           target().columnReduction(rowsOf(R, dynamicRows(columns.getInput())), C, offsets,
                                    body, reduceSlot, T);
  };
  return addTextStep(text, bufs,
                     columns ? KernelTemplate::column_reduction : KernelTemplate::pointwise);
}

/// A "rows" fusion: a LayerNorm and the pointwise prologue of its input.
/// Each row's prologue is computed once into a row buffer (values needed
/// elsewhere are stored on the way), then normalized from that buffer.
llvm::Error FunctionLowering::emitRowFusion(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  LayerNormOp norm;
  for (Operation &op : block.without_terminator())
    if (auto n = dyn_cast<LayerNormOp>(op))
      norm = n;
  if (!norm)
    return failure("a \"rows\" fusion without a layer_norm");
  Shape iter = shapeOf(norm.getInput());
  Shape rowDims(iter.begin(), iter.end() - 1);
  const int64_t E = iter.back(), R = product(rowDims);
  KernelArgs bound = bindFusion(fusion, iter);
  auto &slots = bound.slots;
  auto &bufs = bound.bufs;
  auto &accs = bound.accs;
  // The normalized row is stored in the result's type (a cast of it that
  // the fusion absorbed converts on the store).
  int normSlot = -1;
  Operation *normCast = nullptr;
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    auto c = v.getDefiningOp<CastOp>();
    if (c && c.getInput() == norm.getResult())
      normCast = c;
    if (v == norm.getResult() || (c && c.getInput() == norm.getResult()))
      normSlot = i;
  }
  llvm::DenseMap<Value, int> accessOf; // block argument -> its access
  for (auto [k, arg] : llvm::enumerate(block.getArguments()))
    accessOf[arg] = fusion.getNumResults() + k;
  auto load = [&](Value arg) {
    int k = accessOf.lookup(arg);
    return "p" + std::to_string(accs[k].slot) + "[o" + std::to_string(k) + "]";
  };
  // Row bases (decomposed once per row) and the stride along the row.
  auto decompose = [&](const Access &a) {
    std::string e = std::to_string(a.base);
    std::string rem = "r";
    for (size_t d = rowDims.size(); d-- > 0;) {
      std::string idx = d == 0 ? rem : "(" + rem + " % " + std::to_string(rowDims[d]) + ")";
      if (a.strides[d])
        e += " + " + idx + " * " + std::to_string(a.strides[d]);
      rem = "(" + rem + " / " + std::to_string(rowDims[d]) + ")";
    }
    return e;
  };
  auto offsets = [&](const std::string &indent) {
    std::string o;
    for (size_t k = 0; k < accs.size(); ++k)
      o += indent + "const int64_t o" + std::to_string(k) + " = b" + std::to_string(k) +
           " + c * " + std::to_string(accs[k].strides.back()) + ";\n";
    return o;
  };
  Type el = typeOf(norm.getResult()).getElementType();
  std::string eps = literal(norm.getEpsilon().convertToDouble(), Float64Type::get(fusion.getContext()));
  std::string bases;
  for (size_t a = 0; a < accs.size(); ++a)
    bases += "    const int64_t b" + std::to_string(a) + " = " + decompose(accs[a]) + ";\n";
  auto text = [&]() -> llvm::Expected<std::string> {
    llvm::DenseMap<Value, std::string> scalar;
    std::string prologue, body;
    for (auto [arg, in] : llvm::zip(block.getArguments(), fusion.getInputs()))
      scalar[arg] = load(arg);
    if (auto err = scalarOps(block, {norm, normCast}, "(r * " + std::to_string(E) + " + c)",
                             "      ", scalar, body, prologue))
      return std::move(err);
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (int(i) != normSlot)
        body += "      p" + std::to_string(i) + "[o" + std::to_string(i) + "] = " +
                scalar.lookup(v) + ";\n";
    return args(slots) + prologue +
           target().layerNormFusion(el, rowsOf(R, dynamicRows(norm.getInput())), E, eps, bases,
                                    offsets("      "), body, scalar.lookup(norm.getInput()),
                                    normSlot, scalar.lookup(norm.getWeight()),
                                    scalar.lookup(norm.getBias()));
  };
  return addTextStep(text, bufs, KernelTemplate::rows);
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
      return failure("a full reduction over the dynamic token dimension is not supported");
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
      return failure("this reduction over the dynamic token dimension is not supported");
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
  addStep("reduction", encodeReduction(r, op->getContext()), {outId, bufferOf(input)},
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
  std::string k;
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
      return failure("softmax over a dimension other than the last is not supported yet");
    rowsAndColumns(x);
    bindOut(op->getResult(0));
    bufs.push_back(bufferOf(x));
    params.flag("log", !sm);
    k = "softmax";
  } else if (auto sg = dyn_cast<SoftmaxGradOp>(op)) {
    if (!lastAxis(sg.getAxis(), x))
      return failure("softmax over a dimension other than the last is not supported yet");
    rowsAndColumns(x);
    bindOut(sg.getResult());
    bufs.push_back(bufferOf(sg.getGrad()));
    bufs.push_back(bufferOf(sg.getOutput()));
    k = "softmax_grad";
  } else if (auto ln = dyn_cast<LayerNormOp>(op)) {
    rowsAndColumns(x);
    bindOut(ln.getResult());
    for (Value v : {ln.getInput(), ln.getWeight(), ln.getBias()})
      bufs.push_back(bufferOf(v));
    eps(ln.getEpsilon());
    k = "layer_norm";
  } else if (auto lg = dyn_cast<LayerNormGradOp>(op)) {
    rowsAndColumns(x);
    bindOut(lg.getInputGrad());
    bindOut(lg.getWeightGrad());
    bindOut(lg.getBiasGrad());
    for (Value v : {lg.getGrad(), lg.getInput(), lg.getWeight()})
      bufs.push_back(bufferOf(v));
    params.i64("capacity", capacityRows(x));
    eps(lg.getEpsilon());
    k = "layer_norm_grad";
  } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    rowsAndColumns(ce.getLogits());
    Type lt = typeOf(ce.getLabels()).getElementType();
    params.type("labels", lt).i64("ignore", ce.getIgnoreIndex());
    // The training step also needs the loss's gradient: one kernel reads each
    // row of logits once for both (log-softmax, loss and its gradient).
    for (Operation *user : ce.getLogits().getUsers()) {
      auto cg = dyn_cast<CrossEntropyGradOp>(user);
      if (!cg || cg.getLabels() != ce.getLabels() ||
          cg.getIgnoreIndex() != ce.getIgnoreIndex() || splatLiteral(cg.getGrad()).empty())
        continue;
      bindOut(ce.getResult());
      // --dtype bf16: a gradient read only as a bf16 copy (by a cast,
      // through a reshape) is written as that copy.
      CastOp narrow;
      if (cg.getResult().hasOneUse()) {
        Operation *reader = *cg.getResult().getUsers().begin();
        if (auto rs = dyn_cast<ReshapeOp>(reader); rs && rs.getResult().hasOneUse())
          reader = *rs.getResult().getUsers().begin();
        auto c = dyn_cast<CastOp>(reader);
        if (c && el.isF32() && typeOf(c.getResult()).getElementType().isBF16())
          narrow = c;
      }
      // Otherwise the gradient overwrites the logits when nothing else reads
      // them (each row's x[label] is read before its gradient is written):
      // one logits-sized slice less, and no second stream through memory.
      const int logits = bufferOf(ce.getLogits());
      Type gradType = el;
      if (narrow) {
        gradType = typeOf(narrow.getResult()).getElementType();
        bindOut(narrow.getResult());
        emittedWith.insert(narrow.getOperation());
      } else if (overwritable(ce.getLogits(), {ce.getOperation(), cg.getOperation()})) {
        int id = newBuffer({Buffer::Alias, el, numel(cg.getResult())});
        buffers[id].alias = logits;
        valueBuffers[cg.getResult()] = id;
        bufs.push_back(id);
      } else {
        bindOut(cg.getResult());
      }
      bufs.push_back(logits);
      bufs.push_back(bufferOf(ce.getLabels()));
      emittedWith.insert(cg.getOperation());
      params.type("grad", gradType);
      scale(cg.getGrad());
      addStep("cross_entropy_with_grad", params.get(), bufs, KernelTemplate::rows);
      return llvm::Error::success();
    }
    bindOut(ce.getResult());
    bufs.push_back(bufferOf(ce.getLogits()));
    bufs.push_back(bufferOf(ce.getLabels()));
    k = "cross_entropy";
  } else if (auto cg = dyn_cast<CrossEntropyGradOp>(op)) {
    rowsAndColumns(cg.getLogits());
    Type lt = typeOf(cg.getLabels()).getElementType();
    params.type("labels", lt).i64("ignore", cg.getIgnoreIndex());
    bindOut(cg.getResult());
    bufs.push_back(bufferOf(cg.getLogits()));
    bufs.push_back(bufferOf(cg.getLabels()));
    if (!scale(cg.getGrad()))
      bufs.push_back(bufferOf(cg.getGrad()));
    k = "cross_entropy_grad";
  } else {
    return failure("internal error: not a row op");
  }
  addStep(k, params.get(), bufs, KernelTemplate::rows);
  return llvm::Error::success();
}

llvm::Error FunctionLowering::emitAttention(Operation *op, bool backward) {
  Value q, k, v, mask, cu;
  FloatAttr scaleAttr;
  bool causal;
  double dropout;
  int64_t seed;
  if (auto a = dyn_cast<AttentionOp>(op)) {
    q = a.getQuery(), k = a.getKey(), v = a.getValue(), mask = a.getMask(),
    cu = a.getCuSeqlens(), scaleAttr = a.getScaleAttr(), causal = a.getCausal();
    dropout = a.getDropout().convertToDouble(), seed = a.getSeed();
  } else {
    auto g = cast<AttentionGradOp>(op);
    q = g.getQuery(), k = g.getKey(), v = g.getValue(), mask = g.getMask(),
    cu = g.getCuSeqlens(), scaleAttr = g.getScaleAttr(), causal = g.getCausal();
    dropout = g.getDropout().convertToDouble(), seed = g.getSeed();
  }
  // Padded: [B, H, S, D], one (batch, head) per iteration. Variable-length:
  // [T, H, D] packed tokens, one (sequence, head) per iteration, the sequence
  // being tokens cu_seqlens[n] .. cu_seqlens[n + 1] (L of them).
  const bool varlen = bool(cu);
  Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t B = 0, H, Sq = 0, D, Sk = 0, Dv;
  if (varlen) {
    H = qs[1], D = qs[2], Dv = vs[2];
    B = shapeOf(cu)[0] - 1; // sequences (trailing empty ones allowed)
  } else {
    B = qs[0], H = qs[1], Sq = qs[2], D = qs[3], Sk = ks[2], Dv = vs[3];
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
  std::vector<std::pair<Type, bool>> slots(nOut, {el, true});
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
  desc.element = el;
  desc.backward = backward;
  desc.varlen = varlen;
  desc.causal = causal;
  desc.batch = B, desc.heads = H, desc.seqQ = Sq, desc.seqK = Sk, desc.headDim = D,
  desc.valueDim = Dv, desc.tokenCapacity = kernels.tokenCapacity;
  desc.scale = scale, desc.dropout = dropout, desc.seed = seed;
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
  addStep("attention", encodeAttention(desc, op->getContext()), bufs,
          KernelTemplate::attention);
  return llvm::Error::success();
}

} // namespace mlc::lowering

namespace mlc::lowering {

llvm::Expected<std::vector<std::pair<FunctionLowering::Slot, std::vector<size_t>>>>
FunctionLowering::segments(ValueRange args, llvm::StringRef role) {
  if (!layout)
    return failure("the optimizer's kernels need the flat-buffer layout");
  std::vector<std::pair<Slot, size_t>> slots;
  for (auto [i, v] : llvm::enumerate(args)) {
    auto arg = dyn_cast<BlockArgument>(v);
    StringAttr name = arg ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), role) : nullptr;
    if (!name)
      return failure("an optimizer kernel's operand is not a function argument marked " + role);
    auto it = layout->find(name.str());
    if (it == layout->end())
      return failure("parameter '" + name.str() + "' has no place in the flat buffers");
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
    return failure("an optimizer fusion needs its mlc.decay flags (one per parameter)");
  auto segs = segments(params, "mlc.param");
  if (!segs)
    return segs.takeError();
  // The gradients and moments must sit where their parameters do.
  for (int k = 1; k < 4; ++k) {
    static const char *roles[] = {"", "mlc.grad", "mlc.moment1", "mlc.moment2"};
    auto others = segments(fusion.getInputs().slice(1 + k * n, n), roles[k]);
    if (!others)
      return others.takeError();
    for (size_t i = 0; i < segs->size(); ++i)
      if ((*others)[i].first.offset != (*segs)[i].first.offset)
        return failure("an optimizer fusion's gradients and moments are not in parameter order");
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
  std::string T = cType(el);
  int64_t total = layout->at("*").numel;
  int pBuf = newBuffer({Buffer::Param, el, total, "*"});
  int mBuf = newBuffer({Buffer::Moment1, el, total, "*"});
  int vBuf = newBuffer({Buffer::Moment2, el, total, "*"});
  int gBuf = newBuffer({Buffer::Grad, el, total, "*"});
  int hBuf = bufferOf(fusion.getInputs()[0]);

  std::vector<Segment> table;
  for (auto &[off, n, decay] : merged)
    table.push_back({off, n, decay != 0});
  auto text = [&]() -> llvm::Expected<std::string> {
    llvm::DenseMap<Value, std::string> scalar;
    for (auto [k, arg] : llvm::enumerate(block.getArguments()))
      scalar[arg] = "x" + std::to_string(k);
    std::string body, prologue;
    for (int k = 0; k < 4; ++k) {
      static const char *ptr[] = {"pp", "gg", "mm", "vv"};
      body += "      const " + T + " x" + std::to_string(k) + " = " + ptr[k] + "[i];\n";
    }
    if (auto err = scalarOps(block, {}, "i", "      ", scalar, body, prologue))
      return std::move(err);
    const char *out[] = {"pp", "mm", "vv"};
    for (int k = 0; k < 3; ++k)
      body += std::string("      ") + out[k] + "[i] = " + scalar.lookup(yield.getValues()[k]) +
              ";\n";
    // Scalars: block arguments 5.. are the scalars before the decay factor.
    std::string setup;
    for (int j = 0; j < kDecay; ++j)
      setup += "  const " + T + " x" + std::to_string(5 + j) + " = (" + T + ")h[" +
               std::to_string(j) + "];\n";
    setup += "  const " + T + " decayOn = (" + T + ")h[" + std::to_string(int(kDecay)) +
             "];\n" + prologue;
    return target().optimizer(el, table, setup, body);
  };
  return addTextStep(text, {pBuf, mBuf, vBuf, gBuf, hBuf}, KernelTemplate::optimizer);
}

/// The L2 norm over the flat gradient buffer (a `norm` fusion): each
/// element through the region's scalar code (its square, in f64), summed in
/// double by per-thread partials, then the square root.
llvm::Error FunctionLowering::emitNormFusion(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  auto segs = segments(fusion.getInputs(), "mlc.grad");
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
  std::string T = cType(el);
  int gBuf = newBuffer({Buffer::Grad, el, layout->at("*").numel, "*"});
  int outId = arenaFor(fusion.getResult(0));
  valueBuffers[fusion.getResult(0)] = outId;
  std::vector<Segment> segments;
  for (auto &[off, n] : table)
    segments.push_back({off, n, false});
  auto text = [&]() -> llvm::Expected<std::string> {
    llvm::DenseMap<Value, std::string> scalar;
    scalar[block.getArgument(0)] = "x0";
    std::string body = "      const " + T + " x0 = gg[i];\n", prologue;
    if (auto err = scalarOps(block, {}, "i", "      ", scalar, body, prologue))
      return std::move(err);
    return prologue + target().norm(el, segments, body, scalar.lookup(yield.getValues()[0]));
  };
  return addTextStep(text, {outId, gBuf}, KernelTemplate::reduction);
}

} // namespace mlc::lowering