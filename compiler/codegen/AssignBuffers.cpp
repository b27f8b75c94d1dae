//===- AssignBuffers.cpp - where every graph value lives -------------------===//
//
// mlc-assign-buffers: a pass of the lowering pipeline, after mlc-in-place.
// It decides, for every result of every op of the graph functions, the
// buffer it lives in and records it as `mlc.buffers` (LoweringMarks.h):
// its own arena slice, its slice of a flat buffer (a gradient or an
// optimizer's update written in place), a view of its input, its
// accumulator's buffer, its reader's layout, its logits (a loss gradient
// in place), or its partial sums' buffer (a tensor-parallel reduce).
// mlc-lower-to-plan reads the decisions; mlc-plan-memory places the arena
// slices.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringMarks.h"
#include "compiler/codegen/Passes.h"
#include "contract/StepFunctions.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlc {
#define GEN_PASS_DEF_MLCASSIGNBUFFERS
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

/// The function results that a producing op may write straight into its
/// slice of a flat buffer, and that buffer.
static const std::pair<const char *, const char *> kResultSlices[] = {
    {"mlc.grad", "grad"},
    {"mlc.param_update", "param"},
    {"mlc.moment1_update", "moment1"},
    {"mlc.moment2_update", "moment2"},
    {"mlc.grad_sum_update", "grad_sum"},
    {"mlc.grad_update", "grad"}};

std::optional<std::string> mlc::resultSlice(func::FuncOp fn, unsigned i) {
  for (auto [role, kind] : kResultSlices)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, role))
      return std::string(kind) + ":" + name.str();
  return std::nullopt;
}

bool mlc::isViewOp(Operation *op) {
  return isa<ReshapeOp, TransposeOp, SplitOp, SliceOp, TpCopyOp>(op);
}

Value mlc::productAccumulator(Operation *op) {
  Value acc;
  if (auto m = dyn_cast<MatmulOp>(op))
    acc = m.getAcc();
  else if (auto e = dyn_cast<EmbeddingGradOp>(op))
    acc = e.getAcc();
  return acc && acc.getDefiningOp<MatmulOp>() && acc.hasOneUse() ? acc : Value();
}

Value mlc::accumulatorOf(Operation *op) {
  if (auto m = dyn_cast_or_null<MatmulOp>(op))
    return m.getAcc();
  if (auto e = dyn_cast_or_null<EmbeddingGradOp>(op))
    return e.getAcc();
  return Value();
}

/// The value whose buffer `v` lives in, by mlc.buffers: through views and
/// widenings read at their load (their input's), a product added to its
/// accumulator (the accumulator's), a tensor-parallel reduce over its
/// partial sums and a loss gradient over its logits (that operand's).
static Value bufferHome(Value v) {
  for (int depth = 0; depth < 1024; ++depth) {
    Operation *def = v.getDefiningOp();
    StringRef kind = assignedBuffer(v);
    if (!def)
      return v;
    if (kind == buffers::view || kind == buffers::readerLoad || kind == buffers::input)
      v = def->getOperand(0);
    else if (kind == buffers::accumulator && accumulatorOf(def))
      v = accumulatorOf(def);
    else if (auto g = dyn_cast<CrossEntropyGradOp>(def); g && kind == buffers::logits)
      v = g.getLogits();
    else
      return v;
  }
  return v;
}

std::optional<std::string> mlc::whyNotInAccumulator(Operation *op) {
  Value acc = accumulatorOf(op);
  if (!acc)
    return std::string("it has no accumulator");
  if (productAccumulator(op))
    return std::nullopt; // a product that only it reads: its buffer holds exactly it
  Operation *def = acc.getDefiningOp();
  if (!isa_and_nonnull<MatmulOp, RmsNormGradOp, LayerNormGradOp>(def))
    return std::string("its accumulator is neither a product nor a norm gradient");
  Value home = bufferHome(acc);
  if (assignedBuffer(home) != buffers::arena)
    return std::string("its accumulator does not live in an arena slice of its own");
  auto inAccBuffer = [&](Value x) { return bufferHome(x) == home; };
  for (Operation *u : acc.getUsers()) {
    std::string reader = "'" + u->getName().getStringRef().str() + "'";
    if (u == op) {
      // The product reads none of its other inputs (acc is its last
      // operand) from acc's buffer.
      for (OpOperand &in : op->getOpOperands().drop_back())
        if (inAccBuffer(in.get()))
          return "it reads operand #" + std::to_string(in.getOperandNumber()) +
                 " from its accumulator's buffer (the accumulator or a view of it)";
      continue;
    }
    // Each other reader comes before it, none of its results in acc's buffer.
    if (u->getBlock() != op->getBlock() || !u->isBeforeInBlock(op))
      return "its accumulator is read after it, by " + reader;
    if (llvm::any_of(u->getResults(), inAccBuffer))
      return "its accumulator's buffer is read after it, through " + reader;
  }
  return std::nullopt;
}

bool mlc::gradientReadAsBf16Copy(CrossEntropyGradOp grad) {
  Value g = grad.getResult();
  if (!g.hasOneUse() || !cast<ShapedType>(g.getType()).getElementType().isF32())
    return false;
  Operation *reader = *g.getUsers().begin();
  if (auto rs = dyn_cast<ReshapeOp>(reader); rs && rs.getResult().hasOneUse())
    reader = *rs.getResult().getUsers().begin();
  auto c = dyn_cast<CastOp>(reader);
  return c && cast<ShapedType>(c.getResult().getType()).getElementType().isBF16();
}

namespace {

/// The values written straight into their slice of a flat buffer: a
/// gradient (or an optimizer's update) that an op produces (not a view, a
/// constant, an argument or an optimizer fusion) and that only the return
/// reads, once; and the first product of a chain of accumulating products
/// that ends in one (the others add to it).
llvm::DenseMap<Value, std::string> flatSlices(func::FuncOp fn) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  llvm::DenseMap<Value, int> returnUses;
  for (Value v : ret.getOperands())
    ++returnUses[v];
  llvm::DenseMap<Value, std::string> slices;
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    std::optional<std::string> slice = resultSlice(fn, i);
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    auto fusion = dyn_cast_or_null<FusionOp>(def);
    if (!slice || !def || isViewOp(def) || isa<ConstantOp>(def) ||
        (fusion && fusion.getKind() == FusionKind::optimizer) || !v.hasOneUse() ||
        returnUses[v] != 1)
      continue;
    slices[v] = *slice;
    Value first = v;
    while (Value acc = productAccumulator(first.getDefiningOp()))
      first = acc;
    slices[first] = *slice;
  }
  return slices;
}

/// Whether a tensor-parallel reduce may sum over its partial sums' own
/// buffer: only it reads them, and they are a fresh arena slice (a kernel's
/// or a constant's, or that of the chain of products that add to it),
/// directly or through reshapes that are their input's only reader.
bool overwritesInput(TpReduceOp r) {
  Value v = r.getInput();
  for (Operation *user : v.getUsers())
    if (user != r.getOperation())
      return false;
  while (auto rs = v.getDefiningOp<ReshapeOp>()) {
    if (!rs.getInput().hasOneUse())
      break;
    v = rs.getInput();
  }
  // A product added to its accumulator's buffer owns what the first
  // product of its chain owns.
  while (assignedBuffer(v) == buffers::accumulator)
    v = accumulatorOf(v.getDefiningOp());
  StringRef at = assignedBuffer(v);
  return at == buffers::arena || at == buffers::constant;
}

/// Where result `r` lives (LoweringMarks.h's kinds), its operands' already
/// decided.
std::string decide(OpResult r, const llvm::DenseMap<Value, std::string> &slices) {
  Operation *op = r.getOwner();
  if (op->hasAttr(kConsumerLoadAttr))
    return buffers::readerLoad.str();
  if (isViewOp(op))
    return buffers::view.str();
  if (isa<ConstantOp>(op))
    return buffers::constant.str();
  if (auto f = dyn_cast<FusionOp>(op)) {
    if (f.getKind() == FusionKind::optimizer)
      return buffers::flatBuffers.str();
    if (f.getKind() == FusionKind::params)
      return buffers::paramLayout.str();
  }
  if (productAccumulator(op))
    return buffers::accumulator.str();
  if (auto g = dyn_cast<CrossEntropyGradOp>(op)) {
    if (g->hasAttr(kInPlaceAttr) && g->hasAttr(kWithLossAttr))
      return buffers::logits.str();
    if (g->hasAttr(kWithLossAttr) && gradientReadAsBf16Copy(g))
      return buffers::bf16Copy.str();
  }
  if (markedInReaderLayout(op, r.getResultNumber()))
    return buffers::readerLayout.str();
  if (auto it = slices.find(r); it != slices.end())
    return it->second;
  // Onto a norm gradient's dx or a product that others read too, where
  // they all come first (mlc-accumulate-gemms): in its buffer.
  if (accumulatorOf(op) && !whyNotInAccumulator(op))
    return buffers::accumulator.str();
  if (auto t = dyn_cast<TpReduceOp>(op); t && overwritesInput(t))
    return buffers::input.str();
  return buffers::arena.str();
}

/// mlc-in-place's marks name results the op has, on an op that has them.
LogicalResult checkMarks(Operation &op) {
  if (auto marked = op.getAttrOfType<DenseI64ArrayAttr>(kReaderLayoutAttr))
    for (int64_t i : marked.asArrayRef())
      if (i < 0 || i >= int64_t(op.getNumResults()))
        return op.emitError("mlc-assign-buffers: marked mlc.in_reader_layout for result ")
               << i << ", but it has " << op.getNumResults() << " result(s)";
  if (op.hasAttr(kInPlaceAttr) && !isa<CrossEntropyGradOp>(op))
    return op.emitError("mlc-assign-buffers: marked mlc.in_place, but only a cross_entropy_grad "
                        "overwrites an operand (its logits)");
  return success();
}

class AssignBuffersPass : public mlc::impl::MlcAssignBuffersBase<AssignBuffersPass> {
public:
  void runOnOperation() final {
    ModuleOp module = getOperation();
    for (const char *name : {kForwardFn, kEvaluateFn, kTrainStepFn, kGradNormFn, kOptimizerFn,
                             kAccumulateFn, kMergeFn}) {
      auto fn = module.lookupSymbol<func::FuncOp>(name);
      if (!fn || !fn.getBody().hasOneBlock())
        continue; // mlc-lower-to-plan refuses a function of several blocks
      llvm::DenseMap<Value, std::string> slices = flatSlices(fn);
      for (Operation &op : fn.getBody().front().without_terminator()) {
        if (failed(checkMarks(op)))
          return signalPassFailure();
        if (op.getNumResults() == 0)
          continue;
        SmallVector<Attribute> at;
        for (OpResult r : op.getResults())
          at.push_back(StringAttr::get(&getContext(), decide(r, slices)));
        op.setAttr(kBuffersAttr, ArrayAttr::get(&getContext(), at));
      }
    }
  }
};

} // namespace
