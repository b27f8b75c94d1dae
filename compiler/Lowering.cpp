//===- Lowering.cpp - graph to plan ----------------------------------------===//
//
// Every graph op becomes one plan step: a GEMM call (matmul) or the launch of
// a generated C++ kernel (KernelEmitters.cpp). Kernels have their shapes
// baked in as constants, so the host compiler unrolls and vectorizes index
// arithmetic; identical kernels (the same op and shape in every layer) are
// emitted once.
//
// Buffers: parameters and gradients are slices of flat buffers named by
// parameter; gradients that an op produces directly are written in place
// (no copy); transposes, reshapes, splits and slices are strided views; every
// other value lives in an arena whose offsets come from first-fit planning
// over the values' live ranges.
//
//===----------------------------------------------------------------------===//

#include "compiler/LoweringImpl.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

namespace mlc {
namespace lowering {

void FunctionLowering::emitConstant(ConstantOp c, int id) {
  auto dense = cast<DenseElementsAttr>(c.getValue());
  Type el = dense.getElementType();
  int64_t n = numel(c.getResult());
  std::ostringstream body;
  body << args({{el, true}});
  if (dense.isSplat()) {
    body << "  for (int64_t i = 0; i < " << n << "; ++i) p0[i] = " << splatLiteral(c)
         << ";\n";
  } else {
    body << "  static const " << cType(el) << " data[" << n << "] = {";
    int64_t i = 0;
    if (isa<FloatType>(el))
      for (APFloat v : dense.getValues<APFloat>())
        body << (i++ ? ", " : "") << literal(v.convertToDouble(), el);
    else
      for (APInt v : dense.getValues<APInt>())
        body << (i++ ? ", " : "") << v.getSExtValue();
    body << "};\n  std::memcpy(p0, data, sizeof(data));\n";
  }
  addStep(body.str(), {id});
}

/// One kernel that copies each source (read through its view) into a region
/// of the destination buffer: element (i...) of source k lands at
/// dstBases[k] + sum i * dstStrides. Concatenation and padding.
void FunctionLowering::emitCopies(int dstId, Type el, int64_t dstNumel, bool zeroFirst,
                                  const std::vector<Value> &sources,
                                  const std::vector<int64_t> &dstBases,
                                  const Shape &dstStrides) {
  std::vector<std::pair<Type, bool>> slots{{el, true}};
  std::vector<int> bufs{dstId};
  std::string loops;
  for (size_t k = 0; k < sources.size(); ++k) {
    View view = viewOf(sources[k]);
    int slot = slots.size();
    slots.push_back({el, false});
    bufs.push_back(view.buffer);
    loops += loopNest(view.shape, {{0, dstBases[k], dstStrides}, {slot, view.offset, view.strides}},
                      "    p0[o0] = p" + std::to_string(slot) + "[o1];\n", true,
                      dynamicRows(sources[k]));
  }
  std::string body = args(slots);
  if (zeroFirst)
    body += "  std::memset(p0, 0, " + std::to_string(dstNumel * dtypeBytes(el)) + ");\n";
  addStep(body + loops, bufs);
}

llvm::Error FunctionLowering::emitGemm(MatmulOp op) {
  Shape l = shapeOf(op.getLhs()), r = shapeOf(op.getRhs()), o = shapeOf(op.getResult());
  bool tA = op.getTransposeLhs(), tB = op.getTransposeRhs();
  int64_t M = o[o.size() - 2], N = o.back();
  int64_t K = tA ? l[l.size() - 2] : l.back();
  Shape batch(o.begin(), o.end() - 2);
  auto batchStrides = [&](const Shape &s) {
    Shape b(s.begin(), s.end() - 2);
    Shape st = broadcastStrides(b, batch);
    int64_t mat = s[s.size() - 2] * s.back();
    for (int64_t &x : st)
      x *= mat;
    return st;
  };
  Shape ls = batchStrides(l), rs = batchStrides(r);
  // A dynamic token dimension can only be a rank-2 operand's rows: it makes M
  // (result rows) or K (contraction over tokens), written "T" in the plan.
  bool dynM = dynamicRows(op.getResult()), dynK = false;
  if (dynamicRows(op.getLhs()) || dynamicRows(op.getRhs())) {
    if (typeOf(op.getLhs()).getRank() != 2 || typeOf(op.getRhs()).getRank() != 2)
      return failure("a batched matmul over the dynamic token dimension is not supported");
    dynK = (tA && dynamicRows(op.getLhs())) || (!tB && dynamicRows(op.getRhs()));
    if ((dynamicRows(op.getRhs()) && tB) || (dynamicRows(op.getLhs()) && !tA && !dynM))
      return failure("unsupported placement of the dynamic token dimension in a matmul");
  }
  auto extent = [](int64_t v, bool dyn) { return dyn ? std::string("T") : std::to_string(v); };
  int outId = arenaFor(op.getResult());
  valueBuffers[op.getResult()] = outId;
  int lhs = bufferOf(op.getLhs()), rhs = bufferOf(op.getRhs());
  std::ostringstream text;
  text << "gemm " << tA << " " << tB << " " << extent(M, dynM) << " " << N << " "
       << extent(K, dynK) << " " << batch.size();
  for (int64_t d : batch)
    text << " " << d;
  for (int64_t s : ls)
    text << " " << s;
  for (int64_t s : rs)
    text << " " << s;
  text << " %" << outId << " %" << lhs << " %" << rhs;
  steps.push_back({text.str(), {outId, lhs, rhs}});
  countBytes({outId, lhs, rhs});
  ++counts.gemms;
  return llvm::Error::success();
}

llvm::Error FunctionLowering::lowerOp(Operation *op) {
  if (emittedWith.count(op))
    return llvm::Error::success();
  Type el = op->getNumResults() ? typeOf(op->getResult(0)).getElementType() : Type();
  std::string T = el ? cType(el) : "";
  auto lit = [&](double v) { return literal(v, el); };

  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case<ConstantOp>([&](auto) { return llvm::Error::success(); }) // lazily
      // Views: resolved when a consumer reads them (viewOf), copied only
      // for consumers that need contiguous data (bufferOf).
      .Case<ReshapeOp, TransposeOp, SplitOp, SliceOp>(
          [&](auto) { return llvm::Error::success(); })
      .Case<IotaOp>([&](IotaOp i) {
        Shape s = shapeOf(i.getResult());
        int64_t dim = *normalizeAxis(i.getDim(), s.size());
        Shape st(s.size(), 0);
        st[dim] = 1;
        int id = arenaFor(i.getResult());
        valueBuffers[i.getResult()] = id;
        // Offset o1 of a zero-based access with stride 1 along dim is the index.
        addStep(args({{el, true}}) + loopNest(s, {{0, 0, rowMajorStrides(s)}, {0, 0, st}},
                                              "    p0[o0] = (" + T + ")o1;\n", true),
                {id});
        return llvm::Error::success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, ExpOp, LogOp, TanhOp, ErfOp, SqrtOp,
            RsqrtOp, GeluOp, GeluGradOp, CompareOp, SelectOp, CastOp, BroadcastOp, DropoutOp>(
          [&](auto) { return emitPointwise(op); })
      .Case<FusionOp>([&](FusionOp f) { return emitFusion(f); })
      .Case<PadOp>([&](PadOp p) {
        Shape in = shapeOf(p.getInput()), out = shapeOf(p.getResult());
        Shape outSt = rowMajorStrides(out);
        int64_t base = 0;
        for (size_t d = 0; d < in.size(); ++d)
          base += p.getLow()[d] * outSt[d];
        int id = arenaFor(p.getResult());
        valueBuffers[p.getResult()] = id;
        emitCopies(id, el, product(out), /*zeroFirst=*/true, {p.getInput()}, {base}, outSt);
        return llvm::Error::success();
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        Shape out = shapeOf(c.getResult());
        int64_t axis = *normalizeAxis(c.getAxis(), out.size());
        Shape outSt = rowMajorStrides(out);
        if (!valueBuffers.count(c.getResult()))
          valueBuffers[c.getResult()] = arenaFor(c.getResult());
        int id = valueBuffers[c.getResult()];
        std::vector<Value> sources;
        std::vector<int64_t> bases;
        int64_t offset = 0;
        for (Value v : c.getInputs()) {
          if (!writtenInPlace.count(v)) { // producers wrote the others in place
            sources.push_back(v);
            bases.push_back(offset * outSt[axis]);
          }
          offset += shapeOf(v)[axis];
        }
        if (!sources.empty())
          emitCopies(id, el, product(out), false, sources, bases, outSt);
        return llvm::Error::success();
      })
      .Case<ReduceSumOp>([&](ReduceSumOp r) {
        return emitReduce(op, r.getInput(), r.getAxes(), "sum");
      })
      .Case<ReduceMeanOp>([&](ReduceMeanOp r) {
        return emitReduce(op, r.getInput(), r.getAxes(), "mean");
      })
      .Case<ReduceMaxOp>([&](ReduceMaxOp r) {
        return emitReduce(op, r.getInput(), r.getAxes(), "max");
      })
      .Case<MatmulOp>([&](MatmulOp m) { return emitGemm(m); })
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LayerNormOp, LayerNormGradOp,
            CrossEntropyOp, CrossEntropyGradOp>([&](auto) { return emitRows(op); })
      .Case<AttentionOp>([&](auto) { return emitAttention(op, false); })
      .Case<AttentionGradOp>([&](auto) { return emitAttention(op, true); })
      .Case<EmbeddingOp>([&](EmbeddingOp e) {
        Shape w = shapeOf(e.getWeight());
        int64_t V = w[0], E = w[1];
        std::string rows = rowsExpr(numel(e.getIndices()), dynamicRows(e.getIndices()));
        Type it = typeOf(e.getIndices()).getElementType();
        int id = arenaFor(e.getResult());
        valueBuffers[e.getResult()] = id;
        std::ostringstream b;
        b << args({{el, true}, {el, false}, {it, false}}) << "#pragma omp parallel for\n"
          << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
          << "    int64_t t = p2[r];\n"
          << "    if (t < 0 || t >= " << V << ") { mlc_report(ctx, MLC_ERR_TOKEN_RANGE, r, t, "
          << V << "); t = 0; }\n"
          << "    std::memcpy(p0 + r * " << E << ", p1 + t * " << E << ", " << E
          << " * sizeof(*p0));\n  }\n";
        addStep(b.str(), {id, bufferOf(e.getWeight()), bufferOf(e.getIndices())});
        return llvm::Error::success();
      })
      .Case<EmbeddingGradOp>([&](EmbeddingGradOp e) {
        Shape t = shapeOf(e.getResult());
        int64_t V = t[0], E = t[1];
        std::string rows = rowsExpr(numel(e.getIndices()), dynamicRows(e.getIndices()));
        Type it = typeOf(e.getIndices()).getElementType();
        int id = arenaFor(e.getResult());
        valueBuffers[e.getResult()] = id;
        std::ostringstream b;
        // Scatter-add, parallel over columns so that no two threads add to the
        // same element.
        b << args({{el, true}, {el, false}, {it, false}}) << "  std::memset(p0, 0, "
          << V * E << " * sizeof(*p0));\n"
          << "#pragma omp parallel for\n"
          << "  for (int64_t c0 = 0; c0 < " << E << "; c0 += 64) {\n"
          << "    const int64_t c1 = c0 + 64 < " << E << " ? c0 + 64 : " << E << ";\n"
          << "    for (int64_t r = 0; r < " << rows << "; ++r) {\n"
          << "      int64_t t = p2[r];\n      if (t < 0 || t >= " << V << ") continue;\n"
          << "      for (int64_t c = c0; c < c1; ++c) p0[t * " << E << " + c] += p1[r * " << E
          << " + c];\n    }\n  }\n";
        addStep(b.str(), {id, bufferOf(e.getGrad()), bufferOf(e.getIndices())});
        return llvm::Error::success();
      })
      .Default([&](Operation *o) {
        return failure("no CPU lowering for '" + o->getName().getStringRef() + "'");
      });
}

llvm::Error FunctionLowering::run() {
  Block &block = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // Arguments: parameters, inputs (and their gradients' destinations).
  for (BlockArgument arg : block.getArguments()) {
    unsigned i = arg.getArgNumber();
    Type el = typeOf(arg).getElementType();
    if (auto p = fn.getArgAttrOfType<StringAttr>(i, "mlc.param"))
      valueBuffers[arg] =
          newBuffer({Buffer::Param, el, numel(arg), p.str()});
    else if (auto in = fn.getArgAttrOfType<StringAttr>(i, "mlc.input"))
      valueBuffers[arg] =
          newBuffer({Buffer::Input, el, numel(arg), in.str()});
    else
      return failure("argument #" + llvm::Twine(i) + " of @" + fn.getSymName() +
                     " is neither an mlc.param nor an mlc.input");
  }
  // A gradient produced by an op (not a view, constant or argument) and used
  // only by the return is written straight into the flat gradient buffer.
  llvm::DenseMap<Value, int> returnUses;
  for (Value v : ret.getOperands())
    ++returnUses[v];
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto g = fn.getResultAttrOfType<StringAttr>(i, "mlc.grad");
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    if (g && def && !isa<ReshapeOp, TransposeOp, SplitOp, SliceOp, ConstantOp>(def) &&
        v.hasOneUse() && returnUses[v] == 1)
      gradTargets[v] = g.str();
  }
  for (Operation &op : block.without_terminator())
    if (auto err = lowerOp(&op))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "while lowering '" + op.getName().getStringRef().str() + "' in @" +
              fn.getSymName().str() + ": " + llvm::toString(std::move(err)));
  // Results: named outputs; gradients not written in place are copied.
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    Value v = ret.getOperand(i);
    if (auto g = fn.getResultAttrOfType<StringAttr>(i, "mlc.grad")) {
      if (gradTargets.count(v)) {
        gradReadyStep[g.str()] = steps.size() - 1;
        for (size_t s = 0; s < steps.size(); ++s)
          for (int b : steps[s].buffers)
            if (b == valueBuffers[v])
              gradReadyStep[g.str()] = std::min<int>(gradReadyStep[g.str()], s);
        continue;
      }
      int dst = newBuffer({Buffer::Grad, typeOf(v).getElementType(),
                           numel(v), g.str()});
      emitCopies(dst, typeOf(v).getElementType(), numel(v), false, {v},
                 {0}, rowMajorStrides(shapeOf(v)));
      gradReadyStep[g.str()] = steps.size() - 1;
      continue;
    }
    std::string name = "result" + std::to_string(i);
    if (auto o = fn.getResultAttrOfType<StringAttr>(i, "mlc.output"))
      name = o.str();
    auto shape = typeOf(v).getShape(); // "?" marks the token dimension
    outputs.push_back({name, bufferOf(v), shapeText(Shape(shape.begin(), shape.end()))});
  }

  // Liveness over steps; outputs stay live to the end.
  for (size_t s = 0; s < steps.size(); ++s)
    for (int b : steps[s].buffers) {
      Buffer &r = buffers[root(b)];
      r.first = std::min<int>(r.first, s);
      r.last = std::max<int>(r.last, s);
    }
  for (const Output &o : outputs)
    buffers[root(o.buffer)].last = steps.size();
  // First-fit placement, largest first.
  std::vector<int> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == Buffer::Arena && buffers[i].last >= 0)
      order.push_back(i);
  auto bytes = [&](int i) {
    return (buffers[i].numel * dtypeBytes(buffers[i].element) + 63) / 64 * 64;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return bytes(a) > bytes(b); });
  std::vector<int> placed;
  for (int i : order) {
    Buffer &buf = buffers[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed)
      if (buffers[j].first <= buf.last && buf.first <= buffers[j].last)
        busy.push_back({buffers[j].offset, buffers[j].offset + bytes(j)});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + bytes(i) <= lo)
        break;
      offset = std::max(offset, hi);
    }
    buf.offset = offset;
    arenaBytes = std::max(arenaBytes, offset + bytes(i));
    placed.push_back(i);
  }
  return llvm::Error::success();
}

std::string FunctionLowering::planText() const {
  std::ostringstream os;
  os << "func " << const_cast<func::FuncOp &>(fn).getSymName().str() << " " << arenaBytes << "\n";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    os << "buf %" << i << " ";
    switch (b.kind) {
    case Buffer::Param:
      os << "param " << b.name;
      break;
    case Buffer::Grad:
      os << "grad " << b.name;
      break;
    case Buffer::Input:
      os << "input " << b.name;
      break;
    case Buffer::Arena:
      os << "arena " << b.offset << " " << dtypeName(b.element) << " " << b.numel;
      break;
    case Buffer::Alias:
      os << "alias %" << b.alias;
      if (b.offset)
        os << " " << b.offset;
      break;
    }
    os << "\n";
  }
  for (const Step &s : steps)
    os << s.text << "\n";
  for (const Output &o : outputs)
    os << "output " << o.name << " %" << o.buffer << " " << o.shape << "\n";
  os << "end\n";
  return os.str();
}

} // namespace lowering

using namespace lowering;

llvm::Expected<LoweredPackage> lowerModule(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return failure("the module has no @forward function");
  // A dynamic dimension is the token count: only leading, sized at run time
  // up to the capacity the module declares.
  tokenCapacity() = 0;
  if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
    tokenCapacity() = cap.getInt();
  std::string dynamicError;
  module.walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t)
        continue;
      for (int64_t d = 0; d < t.getRank(); ++d)
        if (t.isDynamicDim(d) && (d != 0 || tokenCapacity() < 2) && dynamicError.empty())
          dynamicError = "'" + op->getName().getStringRef().str() + "' has a dynamic dimension " +
                         std::to_string(d) + (d ? " (only the leading token dimension may be" :
                                                  " but the module declares no mlc.token_capacity (") +
                         std::string(d ? " dynamic)" : "the most tokens a batch holds)");
    }
  });
  for (BlockArgument arg : forward.getArguments()) {
    auto t = typeOf(arg);
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (t.isDynamicDim(d) && (d != 0 || tokenCapacity() < 2) && dynamicError.empty())
        dynamicError = "argument #" + std::to_string(arg.getArgNumber()) +
                       " has a dynamic dimension the CPU plan cannot size";
  }
  if (!dynamicError.empty())
    return failure(dynamicError);
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  auto evaluate = module.lookupSymbol<func::FuncOp>("evaluate");
  KernelSet kernels;
  LoweredPackage out;
  std::vector<std::unique_ptr<FunctionLowering>> lowered;
  // train_step last: the parameter layout reads its gradient order.
  for (func::FuncOp fn : {forward, evaluate, step}) {
    if (!fn)
      continue;
    if (!fn.getBody().hasOneBlock())
      return failure("@" + fn.getSymName() + " must have a single block");
    lowered.push_back(std::make_unique<FunctionLowering>(fn, kernels));
    if (auto err = lowered.back()->run())
      return std::move(err);
    out.counts[fn.getSymName().str()] = lowered.back()->counts;
  }
  // Parameters in the order their gradients become ready in backward.
  struct Param {
    std::string name;
    RankedTensorType type;
    int ready;
    unsigned index;
  };
  std::vector<Param> params;
  std::vector<std::string> inputs;
  for (BlockArgument arg : forward.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto t = typeOf(arg);
    if (auto p = forward.getArgAttrOfType<StringAttr>(i, "mlc.param")) {
      int ready = INT_MAX;
      if (step) {
        auto it = lowered.back()->gradReadyStep.find(p.str());
        if (it != lowered.back()->gradReadyStep.end())
          ready = it->second;
      }
      params.push_back({p.str(), t, ready, i});
    } else if (auto in = forward.getArgAttrOfType<StringAttr>(i, "mlc.input")) {
      Shape s(t.getShape().begin(), t.getShape().end());
      inputs.push_back("input " + in.str() + " " + dtypeName(t.getElementType()) + " " +
                       shapeText(s));
    }
  }
  std::stable_sort(params.begin(), params.end(),
                   [](const Param &a, const Param &b) { return a.ready < b.ready; });
  std::ostringstream plan;
  plan << "mlc-plan 1\n";
  if (tokenCapacity())
    plan << "tokens " << tokenCapacity() << "\n";
  for (const Param &p : params) {
    Shape s(p.type.getShape().begin(), p.type.getShape().end());
    // Weight decay applies to matrices (rank >= 2), never to biases or norms.
    std::string init = s.size() >= 2 ? "normal:0.02" : "zeros";
    if (auto attr = forward.getArgAttrOfType<StringAttr>(p.index, "mlc.init"))
      init = attr.str();
    plan << "param " << p.name << " " << dtypeName(p.type.getElementType()) << " "
         << shapeText(s) << " " << (s.size() >= 2 ? 1 : 0) << " " << init << "\n";
  }
  for (const std::string &in : inputs)
    plan << in << "\n";
  for (auto &f : lowered)
    plan << f->planText();
  out.plan = plan.str();
  out.kernelsCpp = kernels.text();
  return out;
}

} // namespace mlc
