//===- LowerToPlan.cpp - graph to plan, one pattern per op ---------------===//
//
// Each graph function is converted (applyPartialConversion) into a plan.func:
// every op of its body is illegal, and its op type's conversion pattern
// (addOpPatterns; LoweringPatterns.h) emits its plan steps, a GEMM call
// (matmul) or the launch of a plan.kernel (KernelEmitters.cpp and the other
// emitters): a template with its parameters or a body of scalar ops over
// strided accesses, target-neutral IR that the package writer prints per
// target. Kernels have their shapes baked in as constants, so the compilers
// unroll and vectorize index arithmetic; identical kernels (the same op and
// shape in every layer) are emitted once.
//
// Buffers: parameters and gradients are slices of flat buffers named by
// parameter; gradients that an op produces directly are written in place
// (no copy); transposes, reshapes, splits and slices are strided views; every
// other value lives in an arena slice, placed later by mlc-plan-memory.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/LoweringMarks.h"
#include "compiler/codegen/LoweringPatterns.h"
#include "contract/OptimizerScalars.h"
#include "passes/ProducerCopy.h"


#include <algorithm>

namespace mlc {
namespace lowering {

void FunctionLowering::emitConstant(ConstantOp c, Value buf) {
  auto dense = cast<DenseElementsAttr>(c.getValue());
  Type el = dense.getElementType();
  if (dense.isSplat()) {
    OpBuilder b(c.getContext());
    Attribute value =
        isa<FloatType>(el)
            ? Attribute(b.getF64FloatAttr(dense.getSplatValue<APFloat>().convertToDouble()))
            : Attribute(b.getI64IntegerAttr(dense.getSplatValue<APInt>().getSExtValue()));
    addStep(plan::FillTemplateAttr::get(context(), el, numel(c.getResult()), value),
            DictionaryAttr(), {buf}, KernelTemplate::fill);
    return;
  }
  addStep(plan::ConstantTemplateAttr::get(context(), el, dense), DictionaryAttr(), {buf},
          KernelTemplate::fill);
}

/// One kernel that copies each source (read through its view) into a region
/// of the destination buffer: element (i...) of source k lands at
/// dstBases[k] + sum i * dstStrides. Concatenation and padding.
void FunctionLowering::emitCopies(Value dst, Type el, int64_t dstNumel, bool zeroFirst,
                                  const std::vector<Value> &sources,
                                  const std::vector<int64_t> &dstBases,
                                  const Shape &dstStrides) {
  std::vector<Value> bufs{dst};
  SmallVector<plan::NestAttr> nests;
  for (size_t k = 0; k < sources.size(); ++k) {
    View view = viewOf(sources[k]);
    bufs.push_back(view.buffer);
    nests.push_back(copyNest(view.shape,
                             {{0, dstBases[k], dstStrides, el}, {int(k) + 1, view.offset,
                                                                 view.strides, el}},
                             dynamicRows(sources[k])));
  }
  const int64_t zeroBytes = zeroFirst ? dstNumel * dtypeBytes(el) : 0;
  addStep(plan::CopiesTemplateAttr::get(context(), el, nests, zeroBytes), DictionaryAttr(), bufs,
          KernelTemplate::copy);
}

/// One nest of a copy kernel (or iota's), merged as every pointwise nest:
/// its dims and the destination's and the source's (or the index's)
/// offset and strides along them.
plan::NestAttr FunctionLowering::copyNest(const Shape &shape, const std::vector<Access> &accs,
                                          bool dynamic) {
  auto [dims, strides] = mergeDims(shape, accs);
  MLIRContext *c = fn.getContext();
  return plan::NestAttr::get(c, DenseI64ArrayAttr::get(c, dims), dynamic && !dims.empty(),
                             accs[0].base, DenseI64ArrayAttr::get(c, strides[0]), accs[1].slot,
                             accs[1].base, DenseI64ArrayAttr::get(c, strides[1]),
                             /*vector_lanes=*/0, /*dst_vector=*/false, /*src_vector=*/false);
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
  // A product of a stack of matrices with one shared right operand (x W over
  // [batch, seq, E] activations) is one product over the stacked rows when
  // the left matrices lie back to back: one large GEMM instead of a batch.
  // (Dimensions of one matrix stack trivially.)
  bool stacked = !batch.empty() && !tA;
  for (int64_t d = int64_t(batch.size()) - 1, next = M * K; stacked && d >= 0; --d) {
    if (batch[d] == 1)
      continue;
    stacked = rs[d] == 0 && ls[d] == next;
    next *= batch[d];
  }
  if (stacked) {
    M *= product(batch);
    batch.clear(), ls.clear(), rs.clear();
  }
  // A dynamic token dimension can only be a rank-2 operand's rows: it makes M
  // (result rows) or K (contraction over tokens), written "T" in the plan.
  bool dynM = dynamicRows(op.getResult()), dynK = false;
  if (dynamicRows(op.getLhs()) || dynamicRows(op.getRhs())) {
    if (typeOf(op.getLhs()).getRank() != 2 || typeOf(op.getRhs()).getRank() != 2)
      return failure(op, "a batched matmul over the dynamic token dimension is not supported");
    dynK = (tA && dynamicRows(op.getLhs())) || (!tB && dynamicRows(op.getRhs()));
    if ((dynamicRows(op.getRhs()) && tB) || (dynamicRows(op.getLhs()) && !tA && !dynM))
      return failure(op, "unsupported placement of the dynamic token dimension in a matmul");
  }
  Value lhs = bufferOf(op.getLhs()), rhs = bufferOf(op.getRhs());
  Value out = op.getAcc() ? accumulatorBuffer(op.getAcc(), op.getResult())
                          : arenaFor(op.getResult());
  valueBuffers[op.getResult()] = out;
  Value bias = op.getBias() ? bufferOf(op.getBias()) : Value();
  // The GELU mlc-gemm-epilogues marked is the GEMM's epilogue: the product
  // goes to the pre-activation buffer, read by whatever else reads it (the
  // GELU's gradient), the GELU to its own.
  Operation *epilogue = nullptr;
  for (Operation *user : op.getResult().getUsers()) {
    if (!user->hasAttr(kGemmEpilogueAttr))
      continue;
    if (epilogue && epilogue != user)
      return failure(user, "marked mlc.gemm_epilogue, but another reader of its product is "
                           "marked too: a GEMM has one epilogue");
    epilogue = user;
  }
  Value preActivation;
  if (epilogue) {
    Type el = typeOf(op.getResult()).getElementType();
    auto g = dyn_cast<GeluOp>(epilogue);
    auto f = dyn_cast<FusionOp>(epilogue);
    if (!(g && g.getApproximate() == GeluApproximation::tanh && (el.isF32() || el.isF64())) &&
        !(f && el.isBF16() && isBf16TanhGelu(f)))
      return failure(epilogue, "marked mlc.gemm_epilogue, but it is not a tanh GELU of an "
                               "f32, f64 or bf16 product");
    if (op.getAcc())
      return failure(epilogue, "marked mlc.gemm_epilogue, but its product adds an "
                               "accumulator, which a GELU epilogue would not see");
    Value result = epilogue->getResult(0);
    preActivation = out;
    out = arenaFor(result);
    valueBuffers[result] = out;
    lowersToo(epilogue);
  }
  OpBuilder b(context());
  auto unit = [&](bool on) { return on ? b.getUnitAttr() : UnitAttr(); };
  addPlanStep<plan::GemmOp>(out, lhs, rhs, unit(tA), unit(tB), b.getI64IntegerAttr(dynM ? -1 : M),
                            b.getI64IntegerAttr(N), b.getI64IntegerAttr(dynK ? -1 : K),
                            b.getDenseI64ArrayAttr(batch), b.getDenseI64ArrayAttr(ls),
                            b.getDenseI64ArrayAttr(rs), bias, preActivation,
                            unit(bool(op.getAcc())));
  return llvm::Error::success();
}

/// The buffer an accumulating product (or embedding scatter) adds itself
/// to: its accumulator's own where mlc.buffers assigns it `accumulator`
/// (mlc-assign-buffers decides; BufferAssignment.cpp refused a mark it
/// cannot obey), else a copy of the accumulator, in the result's arena
/// slice or flat buffer.
Value FunctionLowering::accumulatorBuffer(Value acc, Value result) {
  auto it = valueBuffers.find(acc);
  if (assignedBuffer(result) == buffers::accumulator && it != valueBuffers.end())
    return it->second;
  Value buf = arenaFor(result);
  Type el = typeOf(acc).getElementType();
  emitCopies(buf, el, numel(acc), false, {acc}, {0}, rowMajorStrides(shapeOf(acc)));
  return buf;
}

/// The element type of `op`'s first result.
static Type elementOf(Operation *op) { return typeOf(op->getResult(0)).getElementType(); }

void FunctionLowering::addOpPatterns(OpPatterns &p) {
  auto none = [](auto) { return llvm::Error::success(); };
  p.add<ConstantOp>(none); // filled where first read (bufferOf)
  // Views: resolved when a consumer reads them (viewOf), copied only
  // for consumers that need contiguous data (bufferOf).
  p.add<ReshapeOp, TransposeOp, SplitOp, SliceOp, TpCopyOp>(none);
  p.add<TpReduceOp, TpAllGatherOp, TpReduceScatterOp>(
      [this](auto op) { return lowerTpCollective(op); });
  p.add<RotaryTableOp>([this](RotaryTableOp t) -> llvm::Error {
    Type el = elementOf(t);
    Shape s = shapeOf(t.getResult());
    Value buf = arenaFor(t.getResult());
    valueBuffers[t.getResult()] = buf;
    addStep(plan::RotaryTableTemplateAttr::get(context(), el, s.front(),
                                               DenseF64ArrayAttr::get(context(), t.getInvFreq()),
                                               t.getSine()),
            DictionaryAttr(), {buf}, KernelTemplate::fill);
    return llvm::Error::success();
  });
  p.add<IotaOp>([this](IotaOp i) -> llvm::Error {
    Type el = elementOf(i);
    Shape s = shapeOf(i.getResult());
    int64_t dim = *normalizeAxis(i.getDim(), s.size());
    Shape st(s.size(), 0);
    st[dim] = 1;
    Value buf = arenaFor(i.getResult());
    valueBuffers[i.getResult()] = buf;
    // The offset of a zero-based access with stride 1 along dim is the
    // index: the nest's source is that access (it reads no argument).
    plan::NestAttr nest = copyNest(s, {{0, 0, rowMajorStrides(s), el}, {-1, 0, st, Type()}}, false);
    addStep(plan::IotaTemplateAttr::get(context(), el, {nest}), DictionaryAttr(), {buf},
            KernelTemplate::pointwise);
    return llvm::Error::success();
  });
  p.addInterface<ScalarOpInterface>([this](Operation *op) { return emitPointwise(op); });
  p.add<RotaryOp>([this](RotaryOp op) { return emitPointwise(op); });
  p.add<FusionOp>([this](FusionOp f) { return emitFusion(f); });
  p.add<PadOp>([this](PadOp pad) -> llvm::Error {
    Type el = elementOf(pad);
    Shape in = shapeOf(pad.getInput()), out = shapeOf(pad.getResult());
    Shape outSt = rowMajorStrides(out);
    int64_t base = 0;
    for (size_t d = 0; d < in.size(); ++d)
      base += pad.getLow()[d] * outSt[d];
    Value buf = arenaFor(pad.getResult());
    valueBuffers[pad.getResult()] = buf;
    emitCopies(buf, el, product(out), /*zeroFirst=*/true, {pad.getInput()}, {base}, outSt);
    return llvm::Error::success();
  });
  p.add<ConcatOp>([this](ConcatOp c) -> llvm::Error {
    Type el = elementOf(c);
    Shape out = shapeOf(c.getResult());
    int64_t axis = *normalizeAxis(c.getAxis(), out.size());
    View dst = concatDestination(c); // its own buffer, or its reader's layout
    if (unplaced.count(c))
      return failure(c, "marked mlc.in_reader_layout, but its reader's layout cannot hold "
                        "it (its only reader is no transpose that keeps the innermost "
                        "dimension)");
    std::vector<Value> sources;
    std::vector<int64_t> bases;
    int64_t offset = 0;
    for (Value v : c.getInputs()) {
      if (!writtenInPlace.count(v)) { // producers wrote the others in place
        sources.push_back(v);
        bases.push_back(dst.offset + offset * dst.strides[axis]);
      }
      offset += shapeOf(v)[axis];
    }
    if (!sources.empty())
      emitCopies(dst.buffer, el, product(out), false, sources, bases, dst.strides);
    return llvm::Error::success();
  });
  p.add<ReduceSumOp>(
      [this](ReduceSumOp r) { return emitReduce(r, r.getInput(), r.getAxes(), "sum"); });
  p.add<ReduceMeanOp>(
      [this](ReduceMeanOp r) { return emitReduce(r, r.getInput(), r.getAxes(), "mean"); });
  p.add<ReduceMaxOp>(
      [this](ReduceMaxOp r) { return emitReduce(r, r.getInput(), r.getAxes(), "max"); });
  p.add<CumSumOp>([this](CumSumOp c) -> llvm::Error {
    Type el = elementOf(c);
    Shape s = shapeOf(c.getResult());
    int64_t axis = *normalizeAxis(c.getAxis(), s.size());
    if (axis == 0 && dynamicRows(c.getInput()))
      return failure(c, "a running sum along the dynamic token dimension is not supported");
    Value buf = arenaFor(c.getResult());
    valueBuffers[c.getResult()] = buf;
    Shape outer(s.begin(), s.begin() + axis), inner(s.begin() + axis + 1, s.end());
    Rows rows = rowsOf(product(outer), dynamicRows(c.getInput()));
    addStep(plan::ScanTemplateAttr::get(context(), el, rows.count, rows.perToken, s[axis],
                                        product(inner), c.getExclusive(), c.getReverse()),
            DictionaryAttr(), {buf, bufferOf(c.getInput())}, KernelTemplate::pointwise);
    return llvm::Error::success();
  });
  p.add<MatmulOp>([this](MatmulOp m) { return emitGemm(m); });
  // The return: the function's outputs, gradients and updates.
  p.add<func::ReturnOp>([this](func::ReturnOp ret) { return lowerResults(ret); });
  p.add<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LayerNormOp, LayerNormGradOp, RmsNormOp,
        RmsNormGradOp>([this](auto op) { return emitRows(op); });
  p.add<CrossEntropyOp, CrossEntropyGradOp>([this](auto op) { return emitCrossEntropy(op); });
  p.add<AttentionOp>([this](AttentionOp op) { return emitAttention(op, false); });
  p.add<AttentionGradOp>([this](AttentionGradOp op) { return emitAttention(op, true); });
  p.add<EmbeddingOp>([this](EmbeddingOp e) -> llvm::Error {
    Type el = elementOf(e);
    Shape w = shapeOf(e.getWeight());
    Value buf = arenaFor(e.getResult());
    valueBuffers[e.getResult()] = buf;
    Rows rows = rowsOf(numel(e.getIndices()), dynamicRows(e.getIndices()));
    addStep(plan::EmbeddingTemplateAttr::get(context(), el, typeOf(e.getIndices()).getElementType(),
                                             rows.count, rows.perToken, w[0], w[1]),
            DictionaryAttr(), {buf, bufferOf(e.getWeight()), bufferOf(e.getIndices())},
            KernelTemplate::gather);
    return llvm::Error::success();
  });
  p.add<EmbeddingGradOp>([this](EmbeddingGradOp e) -> llvm::Error {
    Type el = elementOf(e);
    Shape t = shapeOf(e.getResult());
    // With an accumulator (a tied head's product) the rows are added to
    // it in its buffer, not to zeros.
    Value buf = e.getAcc() ? accumulatorBuffer(e.getAcc(), e.getResult()) : arenaFor(e.getResult());
    valueBuffers[e.getResult()] = buf;
    Rows rows = rowsOf(numel(e.getIndices()), dynamicRows(e.getIndices()));
    addStep(plan::EmbeddingGradTemplateAttr::get(
                context(), el, typeOf(e.getIndices()).getElementType(), rows.count, rows.perToken,
                t[0], t[1], std::optional<int64_t>(e.getPaddingIdx()), bool(e.getAcc())),
            DictionaryAttr(), {buf, bufferOf(e.getGrad()), bufferOf(e.getIndices())},
            KernelTemplate::scatter);
    return llvm::Error::success();
  });
}

/// `err`, from lowering `op` of `fn`, on the op that failed: `op`, or the
/// op of its region that the error names (a fusion's rotary op).
static llvm::Error whileLowering(func::FuncOp fn, Operation *op, llvm::Error err) {
  Operation *at = op;
  std::string why;
  llvm::handleAllErrors(
      std::move(err),
      [&](const LoweringError &e) {
        if (e.op)
          at = e.op;
        why = e.message;
      },
      [&](const llvm::ErrorInfoBase &e) { why = e.message(); });
  return failure(at, "while lowering '" + op->getName().getStringRef() + "' in @" +
                         fn.getSymName() + ": " + why);
}

/// Refuses, on the op, a graph that still folds: MLIR's conversion folds an
/// op before its pattern, which would change the graph under the decisions
/// mlc-in-place and mlc-assign-buffers recorded (mlc-fold runs first).
static llvm::Error refuseFolds(Block &block) {
  for (Operation &op : block.without_terminator()) {
    if (op.getNumResults() == 0 || op.hasTrait<OpTrait::ConstantLike>())
      continue;
    Operation *copy = op.clone();
    SmallVector<OpFoldResult> folded;
    const bool folds = succeeded(copy->fold(folded));
    copy->destroy();
    if (folds)
      return failure(&op, "folds, and the conversion would fold it after the lowering's "
                          "decisions about it (run mlc-fold first)");
  }
  return llvm::Error::success();
}

namespace {

/// Below every op's pattern: an op no pattern lowers is the error.
class NoLowering : public ConversionPattern {
public:
  NoLowering(MLIRContext *context, FunctionLowering &lowering)
      : ConversionPattern(MatchAnyOpTypeTag(), /*benefit=*/0, context), lowering(lowering) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    return lowering.convert(op, rewriter, [&] {
      return failure(op, "no CPU lowering for '" + op->getName().getStringRef() + "'");
    });
  }

private:
  FunctionLowering &lowering;
};

} // namespace

llvm::Error FunctionLowering::run() {
  Block &block = fn.getBody().front();
  using plan::BufferKind;
  // Arguments: parameters, inputs, and the optimizer's gradients, moments
  // and scalars.
  static const std::pair<const char *, BufferKind> argRoles[] = {
      {"mlc.param", BufferKind::param},     {"mlc.input", BufferKind::input},
      {"mlc.grad", BufferKind::grad},       {"mlc.moment1", BufferKind::moment1},
      {"mlc.moment2", BufferKind::moment2}, {"mlc.scalars", BufferKind::scalars},
      {"mlc.grad_sum", BufferKind::grad_sum}};
  for (BlockArgument arg : block.getArguments()) {
    unsigned i = arg.getArgNumber();
    Type el = typeOf(arg).getElementType();
    for (auto [role, kind] : argRoles)
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, role)) {
        valueBuffers[arg] = bind(kind, el, numel(arg), name.getValue());
        break;
      }
    if (!valueBuffers.count(arg))
      return failure(isa<UnknownLoc>(arg.getLoc()) ? fn.getLoc() : arg.getLoc(),
                     "argument #" + llvm::Twine(i) + " of @" + fn.getSymName() +
                         " is neither an mlc.param nor an mlc.input");
  }
  if (auto err = refuseFolds(block))
    return err;
  // Where each value lives: mlc-assign-buffers' decisions (a gradient or
  // an update an op produces is written straight into its flat buffer).
  if (auto err = readAssignment(block))
    return err;
  // Every op of the body through its conversion pattern, the return last.
  ConversionTarget target(*context());
  target.markUnknownOpDynamicallyLegal([&](Operation *op) { return op->getParentOp() != fn; });
  RewritePatternSet patterns(context());
  OpPatterns ops(patterns, *this);
  addOpPatterns(ops);
  patterns.add<NoLowering>(context(), *this);
  LogicalResult converted = success();
  {
    // The conversion's own "failed to legalize" follows a pattern's error,
    // which names the op and why: that error is the diagnostic.
    ScopedDiagnosticHandler quiet(context(), [&](Diagnostic &d) {
      if (!error)
        error = {nullptr, d.str()};
      return success();
    });
    converted = applyPartialConversion(fn, target, std::move(patterns));
  }
  if (error)
    return error->first ? failure(error->first, error->second) : failure(fn, error->second);
  if (failed(converted))
    return failure(fn, "the lowering of @" + fn.getSymName() + " did not convert every op");
  return llvm::Error::success();
}

LogicalResult FunctionLowering::convert(Operation *op, ConversionPatternRewriter &rewriter,
                                        llvm::function_ref<llvm::Error()> lower) {
  if (error)
    return mlir::failure();
  stepLoc = op->getLoc();
  // (A widening its reader's kernel converts at the load: mlc-fold-casts.)
  llvm::Error err = op->hasAttr(kGemmEpilogueAttr)
                        ? lowering::failure(op, "marked mlc.gemm_epilogue, but its input is "
                                                "not a matmul's product")
                    : op->hasAttr(kConsumerLoadAttr) ? llvm::Error::success()
                                                     : lower();
  if (err) {
    llvm::handleAllErrors(whileLowering(fn, op, std::move(err)),
                          [&](const LoweringError &e) { error = {e.op, e.message}; });
    return mlir::failure();
  }
  // Each op by its results' buffers, where all have one (views, constants
  // and widenings at a load are read through the graph: erased).
  auto replace = [&](Operation *lowered) {
    SmallVector<Value> bufs;
    for (Value r : lowered->getResults())
      if (Value buf = valueBuffers.lookup(r))
        bufs.push_back(buf);
    if (bufs.size() == lowered->getNumResults())
      rewriter.replaceOp(lowered, bufs);
    else
      rewriter.eraseOp(lowered);
  };
  replace(op);
  for (Operation *with : pendingWith)
    replace(with);
  pendingWith.clear();
  return success();
}

llvm::Error FunctionLowering::lowerResults(func::ReturnOp ret) {
  using plan::BufferKind;
  stepLoc = fn.getLoc();
  static const std::pair<const char *, BufferKind> resultRoles[] = {
      {"mlc.grad", BufferKind::grad},
      {"mlc.param_update", BufferKind::param},
      {"mlc.moment1_update", BufferKind::moment1},
      {"mlc.moment2_update", BufferKind::moment2},
      {"mlc.grad_sum_update", BufferKind::grad_sum},
      {"mlc.grad_update", BufferKind::grad}};
  auto resultRole = [&](unsigned i) -> std::optional<std::pair<BufferKind, std::string>> {
    for (auto [role, kind] : resultRoles)
      if (auto name = fn.getResultAttrOfType<StringAttr>(i, role))
        return std::make_pair(kind, name.str());
    return std::nullopt;
  };
  // The index of the last step that writes `buf` (an accumulating chain
  // has several), or of the last step.
  auto lastStepOn = [&](Value buf) {
    int ready = -1, index = 0;
    for (Operation &op : body()) {
      if (plan::isBufferDecl(op))
        continue;
      if (llvm::is_contained(op.getOperands(), buf))
        ready = index;
      ++index;
    }
    return ready < 0 ? index - 1 : ready;
  };
  // Results: named outputs; gradients and updates not written in place are
  // copied (an optimizer fusion writes its results itself).
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    Value v = ret.getOperand(i);
    Type el = typeOf(v).getElementType();
    auto role = resultRole(i);
    if (auto fusion = v.getDefiningOp<FusionOp>();
        role && fusion && fusion.getKind() == FusionKind::optimizer)
      continue;
    if (role && (role->first != BufferKind::grad ||
                 fn.getResultAttrOfType<StringAttr>(i, "mlc.grad_update"))) {
      if (targets.count(v))
        continue;
      Value dst = bind(role->first, el, numel(v), role->second);
      emitCopies(dst, el, numel(v), false, {v}, {0}, rowMajorStrides(shapeOf(v)));
      continue;
    }
    if (auto g = fn.getResultAttrOfType<StringAttr>(i, "mlc.grad")) {
      if (targets.count(v)) {
        gradReadyStep[g.str()] = lastStepOn(valueBuffers[v]);
        continue;
      }
      Value dst = bind(BufferKind::grad, el, numel(v), g.getValue());
      emitCopies(dst, el, numel(v), false, {v}, {0}, rowMajorStrides(shapeOf(v)));
      gradReadyStep[g.str()] = lastStepOn(Value());
      continue;
    }
    std::string name = "result" + std::to_string(i);
    if (auto o = fn.getResultAttrOfType<StringAttr>(i, "mlc.output"))
      name = o.str();
    Shape shape;
    for (int64_t d : typeOf(v).getShape())
      shape.push_back(d == kDynamic ? -1 : d);
    outputs.push_back({name, bufferOf(v), shape});
  }
  return llvm::Error::success();
}

OwningOpRef<plan::FuncOp> FunctionLowering::finish() {
  auto b = OpBuilder::atBlockEnd(&body());
  for (const Output &o : outputs)
    b.create<plan::OutputOp>(fn.getLoc(), b.getStringAttr(o.name), o.buffer,
                             b.getDenseI64ArrayAttr(o.shape));
  // Buffers no step or output uses (a view only a dead consumer read).
  SmallVector<Operation *> dead;
  for (Operation &op : llvm::reverse(body()))
    if (plan::isBufferDecl(op) && op.use_empty())
      dead.push_back(&op);
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
  return std::move(planFn);
}

} // namespace lowering

using namespace lowering;

namespace {

/// A parameter of @forward and the step at which backward finishes its
/// gradient (the flat buffers are laid out in that order).
struct Param {
  std::string name;
  RankedTensorType type;
  int ready;
  unsigned index;
};

/// A dynamic dimension is the token count: only leading, sized at run time
/// up to the capacity the module declares. The first op (or argument of
/// @forward) with another is the error.
llvm::Error checkDynamicDims(ModuleOp module, func::FuncOp forward, int64_t tokenCapacity) {
  auto badDim = [&](RankedTensorType t) -> std::optional<int64_t> {
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (t.isDynamicDim(d) && (d != 0 || tokenCapacity < 2))
        return d;
    return std::nullopt;
  };
  Operation *bad = nullptr;
  int64_t dim = 0;
  module.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (auto t = dyn_cast<RankedTensorType>(v.getType()))
        if (std::optional<int64_t> d = badDim(t)) {
          bad = op, dim = *d;
          return WalkResult::interrupt();
        }
    return WalkResult::advance();
  });
  if (bad)
    return failure(bad, "'" + bad->getName().getStringRef() + "' has a dynamic dimension " +
                            llvm::Twine(dim) +
                            (dim ? " (only the leading token dimension may be dynamic)"
                                 : " but the module declares no mlc.token_capacity (the most "
                                   "tokens a batch holds)"));
  for (BlockArgument arg : forward.getArguments())
    if (badDim(typeOf(arg)))
      return failure(isa<UnknownLoc>(arg.getLoc()) ? forward.getLoc() : arg.getLoc(),
                     "argument #" + llvm::Twine(arg.getArgNumber()) +
                         " has a dynamic dimension the CPU plan cannot size");
  return llvm::Error::success();
}

/// plan.param per parameter (in layout order) and plan.input per input.
void declareParamsAndInputs(OpBuilder &b, Location loc, func::FuncOp forward,
                            ArrayRef<Param> params) {
  for (const Param &p : params) {
    ArrayRef<int64_t> s = p.type.getShape();
    // Weight decay applies to matrices (rank >= 2), never to biases or norms.
    std::string init = s.size() >= 2 ? "normal:0.02" : "zeros";
    if (auto attr = forward.getArgAttrOfType<StringAttr>(p.index, "mlc.init"))
      init = attr.str();
    auto param = b.create<plan::ParamOp>(
        loc, b.getStringAttr(p.name), TypeAttr::get(p.type.getElementType()),
        b.getDenseI64ArrayAttr(s), s.size() >= 2 ? b.getUnitAttr() : UnitAttr(),
        b.getStringAttr(init));
    // A tensor-parallel rank's slice of the HF tensor: the package writer
    // records how to slice and gather it.
    if (auto split = forward.getArgAttrOfType<DictionaryAttr>(p.index, "mlc.tp_split"))
      param->setAttr("mlc.tp_split", split);
  }
  for (BlockArgument arg : forward.getArguments())
    if (auto in = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "mlc.input")) {
      Shape shape;
      for (int64_t d : typeOf(arg).getShape())
        shape.push_back(d == kDynamic ? -1 : d);
      b.create<plan::InputOp>(loc, b.getStringAttr(in.str()),
                              TypeAttr::get(typeOf(arg).getElementType()),
                              b.getDenseI64ArrayAttr(shape));
    }
  // Scalars the graph itself reads (mlc-shard-tensor-parallel's "tp_rank",
  // this rank's index in its tensor-parallel group), filled by the runtime.
  for (BlockArgument arg : forward.getArguments())
    if (auto sc = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "mlc.scalars"))
      b.create<plan::ScalarsOp>(loc, b.getStringAttr(sc.str()),
                                TypeAttr::get(typeOf(arg).getElementType()),
                                b.getI64IntegerAttr(typeOf(arg).getNumElements()));
}

} // namespace

llvm::Error lowerToPlan(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>(mlc::kForwardFn);
  if (!forward)
    return failure(module, "the module has no @forward function");
  int64_t tokenCapacity = 0;
  if (auto cap = module->getAttrOfType<IntegerAttr>("mlc.token_capacity"))
    tokenCapacity = cap.getInt();
  if (auto err = checkDynamicDims(module, forward, tokenCapacity))
    return err;
  auto step = module.lookupSymbol<func::FuncOp>(mlc::kTrainStepFn);
  auto evaluate = module.lookupSymbol<func::FuncOp>(mlc::kEvaluateFn);
  auto gradNorm = module.lookupSymbol<func::FuncOp>(mlc::kGradNormFn);
  auto optimizer = module.lookupSymbol<func::FuncOp>(mlc::kOptimizerFn);
  auto accumulate = module.lookupSymbol<func::FuncOp>(mlc::kAccumulateFn);
  auto merge = module.lookupSymbol<func::FuncOp>(mlc::kMergeFn);
  if ((gradNorm || optimizer) && !step)
    return failure(gradNorm ? gradNorm : optimizer,
                   "@grad_norm and @optimizer need @train_step (its gradient order lays out "
                   "the flat buffers)");
  // Parameters in the order their gradients become ready in backward.
  std::vector<Param> params;
  std::vector<std::unique_ptr<FunctionLowering>> lowered;
  FunctionLowering::Layout layout; // the optimizer functions keep a pointer to it
  // Every function lowered once, its kernels collected in `kernels`.
  KernelSet kernels(module.getContext(), tokenCapacity);
  auto lowerAll = [&]() -> llvm::Error {
    lowered.clear();
    params.clear();
    // train_step last: the parameter layout reads its gradient order.
    for (func::FuncOp fn : {forward, evaluate, step}) {
      if (!fn)
        continue;
      if (!fn.getBody().hasOneBlock())
        return failure(fn, "@" + fn.getSymName() + " must have a single block");
      lowered.push_back(std::make_unique<FunctionLowering>(fn, kernels));
      if (auto err = lowered.back()->run())
        return err;
    }
    FunctionLowering *stepLowering = step ? lowered.back().get() : nullptr;
    for (BlockArgument arg : forward.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (auto p = forward.getArgAttrOfType<StringAttr>(i, "mlc.param")) {
        int ready = INT_MAX;
        if (step) {
          auto it = stepLowering->gradReadyStep.find(p.str());
          if (it != stepLowering->gradReadyStep.end())
            ready = it->second;
        }
        params.push_back({p.str(), typeOf(arg), ready, i});
      }
    }
    std::stable_sort(params.begin(), params.end(),
                     [](const Param &a, const Param &b) { return a.ready < b.ready; });
    // The optimizer's functions run over the flat buffers in this layout.
    layout.clear();
    int64_t offset = 0;
    for (const Param &p : params) {
      layout[p.name] = {offset, p.type.getNumElements()};
      offset += p.type.getNumElements();
    }
    layout["*"] = {0, offset};
    for (auto &f : lowered)
      if (auto err = f->placeParameterViews(layout))
        return err;
    for (func::FuncOp fn : {gradNorm, optimizer, accumulate, merge}) {
      if (!fn)
        continue;
      if (!fn.getBody().hasOneBlock())
        return failure(fn, "@" + fn.getSymName() + " must have a single block");
      lowered.push_back(std::make_unique<FunctionLowering>(fn, kernels, &layout));
      if (auto err = lowered.back()->run())
        return err;
    }
    return llvm::Error::success();
  };
  if (auto err = lowerAll())
    return err;

  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  declareParamsAndInputs(b, loc, forward, params);
  if (optimizer)
    b.create<plan::ScalarsOp>(loc, b.getStringAttr(kAdamWScalarsName),
                              TypeAttr::get(b.getF64Type()),
                              b.getI64IntegerAttr(kAdamWScalarCount));
  if (merge)
    b.create<plan::ScalarsOp>(loc, b.getStringAttr("accumulation"),
                              TypeAttr::get(b.getF64Type()), b.getI64IntegerAttr(1));
  for (const KernelSet::Kernel &k : kernels.kernels) {
    if (k.body) {
      k.body->remove();
      module.getBody()->push_back(k.body);
      continue;
    }
    b.create<plan::KernelOp>(loc, b.getStringAttr(k.name),
                             plan::KernelTemplateAttr::get(b.getContext(), k.kind),
                             cast<plan::TemplateAttrInterface>(k.templ),
                             b.getI64IntegerAttr(k.numArgs),
                             k.params);
  }
  for (auto &f : lowered)
    b.insert(f->finish().release());
  // The graph functions are now the plan.
  for (func::FuncOp fn : {forward, evaluate, step, gradNorm, optimizer, accumulate, merge})
    if (fn)
      fn.erase();
  return llvm::Error::success();
}

} // namespace mlc
