//===- FuseElementwise.cpp - pointwise fusion groups -----------------------===//
//
// Forms mlc.fusion regions from chains of pointwise ops of one shape. The
// grouping is consumer-driven: ops are visited from the last to the first,
// and a producer joins the group of its consumers when that computes it
// exactly once and keeps the graph acyclic.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"
#include "passes/ProducerCopy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace mlc {
#define GEN_PASS_DEF_MLCFUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

/// Elementwise ops: those with a per-element expression, and mlc.rotary,
/// whose element also reads its pair partner (see memoryOperand).
bool isPointwise(Operation *op) {
  // A cast its producer's kernel stores, or its reader's loads (--dtype bf16).
  if (op->hasAttr(kProducerCopyAttr) || op->hasAttr(kConsumerLoadAttr))
    return false;
  if (auto r = dyn_cast<RotaryOp>(op)) // a partial rotation is two nests
    return cast<RankedTensorType>(r.getCos().getType()).getShape().back() ==
           cast<RankedTensorType>(r.getType()).getShape().back();
  return isa<ScalarOpInterface>(op);
}

/// An operand that a kernel must read from memory because it is read at
/// two places (the element and its pair partner): a rotary op's input, and
/// the sin table of a transposed one. Its producer never joins the group.
bool isMemoryOperand(OpOperand &use) {
  auto r = dyn_cast<RotaryOp>(use.getOwner());
  return r && (use.getOperandNumber() == 0 || (r.getTranspose() && use.getOperandNumber() == 2));
}

/// A sum over the leading dimensions (a bias gradient): it can close a
/// pointwise group, whose kernel then also accumulates the column sums.
bool isColumnReduction(Operation *op) {
  auto r = dyn_cast<ReduceSumOp>(op);
  if (!r)
    return false;
  int64_t rank = cast<RankedTensorType>(r.getInput().getType()).getRank();
  SmallVector<int64_t> axes;
  for (int64_t a : r.getAxes())
    axes.push_back(a < 0 ? a + rank : a);
  llvm::sort(axes);
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != int64_t(i))
      return false;
  return !axes.empty() && int64_t(axes.size()) < rank &&
         isa<FloatType>(cast<RankedTensorType>(r.getType()).getElementType());
}

/// LayerNorm and RMSNorm close a group as a row root: its kernel computes the pointwise
/// prologue of each row (bias, dropout, residual add), writes what others
/// still need, and normalizes the row while it is in registers or cache.
bool isRowRoot(Operation *op) { return isa<LayerNormOp, RmsNormOp>(op); }

bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  return dense && dense.isSplat();
}

struct Group {
  SmallVector<Operation *> ops; // in reverse program order while growing
  Operation *root;              // the last op in program order
  SmallVector<int64_t> shape;   // the iteration shape
  bool rotary = false;          // holds a rotary op (at most one: its split nest)
};

/// Where an op that absorbs others came from: their locations, each once
/// (MLIR's fused location, `loc(fused["gpt2.h.0.attn", "gpt2.h.0.mlp"])`);
/// ops of one location leave it plain. Verifier and lowering errors on the
/// fused op, and the plan steps lowered from it, name them all.
Location absorbedLoc(ArrayRef<Location> locs) {
  return FusedLoc::get(locs, Attribute(), locs.front()->getContext());
}

/// The adjoint sum `dx + r` of a LayerNorm's or RMSNorm's input gradient and
/// the residual stream's (autodiff's sum where the stream forks into the
/// norm) joins the gradient's row kernel: `rms_norm_grad ... plus %r` (or
/// `layer_norm_grad`'s) writes dx + r in the pass that writes dx, so the sum
/// reads and writes nothing of its own. Only when the add is dx's one
/// reader, adds no broadcast, and r exists before the gradient (the fused op
/// takes the gradient's place, before the readers of its weight gradient).
template <typename GradOp>
void absorbResidualGradients(Block &block) {
  SmallVector<GradOp> grads;
  for (Operation &op : block)
    if (auto g = dyn_cast<GradOp>(op); g && !g.getResidual())
      grads.push_back(g);
  for (GradOp g : grads) {
    Value dx = g.getInputGrad();
    if (!dx.hasOneUse())
      continue;
    auto add = dyn_cast<AddOp>(*dx.getUsers().begin());
    if (!add || add.getLhs() == add.getRhs())
      continue;
    Value r = add.getLhs() == dx ? add.getRhs() : add.getLhs();
    if (r.getType() != dx.getType() || add.getResult().getType() != dx.getType())
      continue;
    if (Operation *def = r.getDefiningOp()) {
      if (def->getBlock() != &block || !def->isBeforeInBlock(g))
        continue;
    } else if (cast<BlockArgument>(r).getOwner() != &block) {
      continue;
    }
    OpBuilder b(g);
    auto fused = b.create<GradOp>(absorbedLoc({g.getLoc(), add.getLoc()}), g.getGrad(),
                                  g.getInput(), g.getWeight(), r,
                                  g.getEpsilonAttr());
    add.getResult().replaceAllUsesWith(fused.getInputGrad());
    for (unsigned i = 1; i < g->getNumResults(); ++i)
      g->getResult(i).replaceAllUsesWith(fused->getResult(i));
    add.erase();
    g.erase();
  }
}

/// A column sum returned more than once (GPT-NeoX's parallel residual: the
/// attention's and the MLP's output biases both have the column sum of the
/// stream's gradient as theirs) is computed once per result: each sum is
/// then a kernel that writes its gradient's buffer, where the one sum would
/// be a kernel of its own and a copy into each of the buffers.
void splitReturnedSums(Block &block) {
  auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
  if (!ret)
    return;
  llvm::DenseSet<Value> seen;
  for (OpOperand &use : ret->getOpOperands()) {
    Operation *def = use.get().getDefiningOp();
    if (seen.insert(use.get()).second || !def || !isColumnReduction(def))
      continue;
    OpBuilder b(def);
    b.setInsertionPointAfter(def);
    use.set(b.clone(*def)->getResult(0));
  }
}

/// The non-constant operand of `add(w, c)` with c the splat constant 1, of
/// w's type and rank 1 (Gemma's RMSNorm weight 1 + w): w.
Value plusOneOf(Operation *op) {
  auto add = dyn_cast_or_null<AddOp>(op);
  if (!add)
    return Value();
  for (auto [w, c] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
    auto k = c.getDefiningOp<ConstantOp>();
    auto dense = k ? dyn_cast<DenseElementsAttr>(k.getValue()) : nullptr;
    if (dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
        dense.getSplatValue<APFloat>().convertToDouble() == 1.0 && w.getType() == add.getType() &&
        cast<RankedTensorType>(w.getType()).getRank() == 1)
      return w;
  }
  return Value();
}

/// An RMSNorm weight `1 + w` (Gemma's) read by norms and their gradients
/// alone is no kernel: each norm computes it in its own row kernel (a copy of
/// the add joins the norm's rows fusion), and each gradient's row kernel
/// reads w and adds 1 at the load (the add, marked `mlc.consumer_load`, is
/// lowered with it).
void foldNormWeightOffsets(Block &block) {
  SmallVector<Operation *> adds;
  for (Operation &op : block)
    if (plusOneOf(&op) && !op.use_empty() && llvm::all_of(op.getUses(), [](OpOperand &u) {
          return (isa<RmsNormOp>(u.getOwner()) && u.getOperandNumber() == 1) ||
                 (isa<RmsNormGradOp>(u.getOwner()) && u.getOperandNumber() == 2);
        }))
      adds.push_back(&op);
  for (Operation *add : adds) {
    for (OpOperand &use : llvm::make_early_inc_range(add->getUses()))
      if (isa<RmsNormOp>(use.getOwner())) {
        OpBuilder b(use.getOwner());
        use.set(b.clone(*add)->getResult(0));
      }
    if (add->use_empty())
      add->erase();
    else
      add->setAttr(kConsumerLoadAttr, UnitAttr::get(add->getContext()));
  }
}

/// The first cast of `dx` (a norm gradient's input gradient, f32) to bf16
/// of its shape, marked for the gradient's kernel to store.
void markProducerCopy(Value dx) {
  if (!cast<RankedTensorType>(dx.getType()).getElementType().isF32())
    return;
  for (Operation *user : dx.getUsers())
    if (auto c = dyn_cast<CastOp>(user);
        c && cast<RankedTensorType>(c.getType()).getElementType().isBF16() && c->getBlock() == dx.getParentBlock()) {
      c->setAttr(kProducerCopyAttr, UnitAttr::get(c->getContext()));
      return;
    }
}

class FuseElementwisePass : public mlc::impl::MlcFuseElementwiseBase<FuseElementwisePass> {
public:
  void runOnOperation() final {
    for (Block &block : getOperation().getBody()) {
      splitReturnedSums(block);
      foldNormWeightOffsets(block);
      absorbResidualGradients<RmsNormGradOp>(block);
      absorbResidualGradients<LayerNormGradOp>(block);
      // --dtype bf16: a norm gradient's dx goes on in f32 along the residual
      // stream and as a bf16 copy to the next products (Llama: no dropout
      // or bias-gradient kernel reads dx to take the cast). The cast is
      // marked `mlc.producer_copy`: the gradient's kernel writes it as a
      // second store of dx, so it joins no fusion and is no kernel of its
      // own. (After the residual sums joined the gradients: the cast reads
      // the sum, which is then the gradient's dx.)
      for (Operation &op : block)
        if (isa<LayerNormGradOp, RmsNormGradOp>(op))
          markProducerCopy(op.getResult(0));
      fuseBlock(block);
    }
  }

private:
  static ArrayRef<int64_t> shapeOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

  void fuseBlock(Block &block) {
    llvm::DenseMap<Operation *, int> position;
    int i = 0;
    for (Operation &op : block)
      position[&op] = i++;

    std::vector<Group> groups;
    llvm::DenseMap<Operation *, int> groupOf;
    SmallVector<Operation *> reversed;
    for (Operation &op : block)
      reversed.push_back(&op);
    std::reverse(reversed.begin(), reversed.end());

    for (Operation *op : reversed) {
      if (isColumnReduction(op) || isRowRoot(op)) {
        // Only as a group's root, iterating over its input's shape.
        auto in = shapeOf(op->getOperand(0));
        groups.push_back({{op}, op, SmallVector<int64_t>(in.begin(), in.end())});
        groupOf[op] = groups.size() - 1;
        continue;
      }
      if (!isPointwise(op) || op->getNumResults() != 1)
        continue;
      Value result = op->getResult(0);
      // An RMSNorm's own 1 + w (foldNormWeightOffsets) joins its row kernel,
      // which computes it as it loads w.
      if (auto norm = result.hasOneUse() ? dyn_cast<RmsNormOp>(*result.getUsers().begin())
                                         : RmsNormOp();
          norm && norm.getWeight() == result && plusOneOf(op) && groupOf.count(norm)) {
        groups[groupOf[norm]].ops.push_back(op);
        groupOf[op] = groupOf[norm];
        continue;
      }
      // The consumer group to join: the group of the earliest-placed user
      // that is in a group of this shape.
      int target = -1;
      for (OpOperand &use : result.getUses()) {
        Operation *user = use.getOwner();
        auto it = groupOf.find(user);
        if (it == groupOf.end())
          continue;
        if (isRowRoot(user) && use.getOperandNumber() != 0)
          continue; // weight and bias stay inputs of the row kernel
        if (isMemoryOperand(use))
          continue;
        Group &g = groups[it->second];
        if (ArrayRef<int64_t>(g.shape) != shapeOf(result))
          continue;
        // A rotary op splits the group's nest: only a plain pointwise
        // group takes one, and only one.
        if (isa<RotaryOp>(op) && (g.rotary || isRowRoot(g.root) || isColumnReduction(g.root)))
          continue;
        if (target < 0 || position[g.root] < position[groups[target].root])
          target = it->second;
      }
      bool joined = false;
      if (target >= 0) {
        Group &g = groups[target];
        // Users outside the group must come after its root: they then read
        // the value the fusion writes out, and no cycle can form.
        bool ok = true;
        for (OpOperand &use : result.getUses()) {
          Operation *user = use.getOwner();
          auto it = groupOf.find(user);
          bool member = it != groupOf.end() && it->second == target;
          bool inside = member && !(isRowRoot(user) && use.getOperandNumber() != 0);
          if ((!inside && position[user] < position[g.root]) || (member && isMemoryOperand(use)))
            ok = false;
        }
        if (ok) {
          g.ops.push_back(op);
          g.rotary |= isa<RotaryOp>(op);
          groupOf[op] = target;
          joined = true;
        }
      }
      if (!joined) {
        auto shape = shapeOf(result);
        groups.push_back({{op}, op, SmallVector<int64_t>(shape.begin(), shape.end()),
                          isa<RotaryOp>(op)});
        groupOf[op] = groups.size() - 1;
      }
    }
    mergeSiblings(groups, groupOf, position);
    for (Group &g : groups)
      if (g.ops.size() >= 2 || normReadAsCopy(g))
        buildFusion(g);
    (void)position;
    absorbNormEpilogues(block);
    for (auto fusion : llvm::make_early_inc_range(block.getOps<FusionOp>()))
      absorbCasts(fusion);
    for (auto fusion : llvm::make_early_inc_range(block.getOps<FusionOp>()))
      addNormCopy(fusion);
    fuseSumAndCast(block);
  }

  /// The values a group reads from outside (splat constants are literals).
  static llvm::SetVector<Value> groupInputs(const Group &g,
                                            const llvm::DenseMap<Operation *, int> &groupOf,
                                            int id) {
    llvm::SetVector<Value> in;
    for (Operation *op : g.ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        auto it = def ? groupOf.find(def) : groupOf.end();
        if ((it == groupOf.end() || it->second != id) && !isSplatConstant(v))
          in.insert(v);
      }
    return in;
  }

  static bool plainPointwise(const Group &g) {
    return !g.ops.empty() && !g.rotary && !isRowRoot(g.root) && !isColumnReduction(g.root);
  }

  /// Sibling groups over one shape whose inputs are all inputs of the
  /// other (SwiGLU's backward: d up = g * silu(gate) and d gate from g, gate
  /// and up) become one kernel: it reads the shared inputs once, and the
  /// smaller group reads nothing the larger does not. The merged group sits
  /// at the later root, so every reader of the earlier group's results
  /// outside both must come after that root; or else at the earlier root,
  /// so every input of the later group must exist before it.
  void mergeSiblings(std::vector<Group> &groups, llvm::DenseMap<Operation *, int> &groupOf,
                     llvm::DenseMap<Operation *, int> &position) {
    // Candidates by iteration shape, each group's inputs computed once.
    std::map<SmallVector<int64_t>, SmallVector<int>> byShape;
    std::vector<llvm::SetVector<Value>> inputs(groups.size());
    for (size_t i = 0; i < groups.size(); ++i)
      if (plainPointwise(groups[i])) {
        byShape[groups[i].shape].push_back(i);
        inputs[i] = groupInputs(groups[i], groupOf, i);
      }
    auto subset = [&](int a, int b) {
      return inputs[a].size() <= inputs[b].size() &&
             llvm::all_of(inputs[a], [&](Value v) { return inputs[b].contains(v); });
    };
    for (auto &[shape, ids] : byShape)
      for (int a : ids)
        for (int b : ids) {
          if (a == b || groups[a].ops.empty() || groups[b].ops.empty() || inputs[a].empty())
            continue;
          // What a reads beyond b's inputs, each a unary pointwise op of one
          // of them (GeGLU's backward: d up = g * gelu(gate), the forward's
          // gelu, beside d gate from g, gate and up), a computes again:
          // then it reads nothing b does not, and they merge.
          SmallVector<Operation *> recompute;
          if (!subset(a, b) && !recomputable(inputs[a], inputs[b], groupOf, b, recompute))
            continue;
          llvm::SetVector<Value> aInputs = inputs[a];
          for (Operation *def : recompute) {
            aInputs.remove(def->getResult(0));
            for (Value o : def->getOperands())
              if (!isSplatConstant(o))
                aInputs.insert(o);
          }
          bool aFirst = position[groups[a].root] < position[groups[b].root];
          int early = aFirst ? a : b, late = aFirst ? b : a;
          const llvm::SetVector<Value> &lateInputs = late == a ? aInputs : inputs[late];
          bool ok = true;
          for (Operation *op : groups[early].ops)
            for (Operation *user : op->getUsers()) {
              auto it = groupOf.find(user);
              bool inside = it != groupOf.end() && (it->second == a || it->second == b);
              if (!inside && position[user] < position[groups[late].root])
                ok = false;
            }
          // Else the merged group sits at the earlier root, when the later
          // group's inputs all exist there (--dtype bf16: each gradient's
          // bf16 copy is read by its GEMMs before the other is computed).
          // A value recomputed in backward (mlc-recompute) is never moved
          // to a sibling in forward, where it would be kept again.
          Operation *root = groups[late].root;
          if (!ok && llvm::none_of(groups[late].ops, [](Operation *op) {
                return op->hasAttr(kRecomputedAttr);
              })) {
            ok = llvm::all_of(lateInputs, [&](Value v) {
              Operation *def = v.getDefiningOp();
              return !def || position[def] < position[groups[early].root];
            });
            root = groups[early].root;
          }
          if (!ok)
            continue;
          for (Operation *def : recompute)
            recomputeIn(groups[a], a, def, groupOf, position);
          Group &into = groups[late];
          into.root = root;
          for (Operation *op : groups[early].ops)
            groupOf[op] = late;
          into.ops.append(groups[early].ops.begin(), groups[early].ops.end());
          llvm::sort(into.ops, [&](Operation *x, Operation *y) { return position[x] > position[y]; });
          groups[early].ops.clear();
          inputs[late] = groupInputs(into, groupOf, late);
          if (early == a)
            break;
        }
  }

  /// The ops that compute the values of `in` that `other` (group `otherId`)
  /// does not read, when each is a unary pointwise op (one operand that is
  /// not a splat constant, one result; no cast, no rotary) of a value
  /// `other` reads, computed in no group of the two.
  static bool recomputable(const llvm::SetVector<Value> &in, const llvm::SetVector<Value> &other,
                           const llvm::DenseMap<Operation *, int> &groupOf, int otherId,
                           SmallVectorImpl<Operation *> &defs) {
    for (Value v : in) {
      if (other.contains(v))
        continue;
      Operation *def = v.getDefiningOp();
      if (!def || !isPointwise(def) || def->getNumResults() != 1 || isa<CastOp, RotaryOp>(def))
        return false;
      auto it = groupOf.find(def);
      if (it != groupOf.end() && it->second == otherId)
        return false;
      int reads = 0;
      for (Value o : def->getOperands()) {
        if (isSplatConstant(o))
          continue;
        if (!other.contains(o))
          return false;
        ++reads;
      }
      if (reads != 1)
        return false;
      defs.push_back(def);
    }
    return !defs.empty();
  }

  /// A copy of `def` joins group `g` (number `id`) before its first op, and
  /// the group's ops read the copy instead of `def`'s result.
  static void recomputeIn(Group &g, int id, Operation *def,
                          llvm::DenseMap<Operation *, int> &groupOf,
                          llvm::DenseMap<Operation *, int> &position) {
    Operation *first = *llvm::min_element(
        g.ops, [&](Operation *x, Operation *y) { return position[x] < position[y]; });
    OpBuilder b(first);
    Operation *copy = b.clone(*def);
    for (Operation *op : g.ops)
      op->replaceUsesOfWith(def->getResult(0), copy->getResult(0));
    g.ops.push_back(copy);
    groupOf[copy] = id;
    int i = 0;
    for (Operation &op : *first->getBlock())
      position[&op] = i++;
  }

  /// A LayerNorm or RMSNorm with no prologue whose result is read only by
  /// a cast (--dtype bf16: a model's first norm, read by the products as
  /// bf16) is a row kernel of its own, so the cast can join it as the
  /// conversion at its store (absorbCasts) instead of reading the f32 rows
  /// back in a kernel of its own.
  static bool normReadAsCopy(const Group &g) {
    if (g.ops.size() != 1 || !isRowRoot(g.root) || !g.root->getResult(0).hasOneUse())
      return false;
    auto c = dyn_cast<CastOp>(*g.root->getResult(0).getUsers().begin());
    return c && isa<FloatType>(cast<RankedTensorType>(c.getType()).getElementType());
  }

  /// A post-norm's residual add `h + norm(y)` (OLMo2's after the attention
  /// and the MLP) joins the norm's row kernel, which adds h to each
  /// normalized element as it stores it: norm(y) is never stored for a
  /// pointwise kernel of its own to read back. Only an add left a kernel of
  /// its own, of the norm's type (no broadcast), the norm's one reader,
  /// where the norm's kernel can sit (h exists before it, or nothing reads
  /// its other results before the add, where it then moves).
  void absorbNormEpilogues(Block &block) {
    SmallVector<AddOp> adds(block.getOps<AddOp>());
    for (AddOp add : adds)
      for (unsigned side : {0u, 1u}) {
        Value n = add->getOperand(side), h = add->getOperand(1 - side);
        Operation *def = n.getDefiningOp();
        if (!def || def->getBlock() != &block || !n.hasOneUse() || n == h ||
            n.getType() != add.getType() || h.getType() != add.getType())
          continue;
        auto f = dyn_cast<FusionOp>(def);
        if (!f && isRowRoot(def)) {
          def->moveBefore(add); // its one reader
          auto shape = shapeOf(def->getOperand(0));
          Group g{{def}, def, SmallVector<int64_t>(shape.begin(), shape.end())};
          buildFusion(g);
          f = add->getOperand(side).getDefiningOp<FusionOp>();
        }
        if (!f || f.getKind() != FusionKind::rows || !absorbEpilogue(f, add, side))
          continue;
        break;
      }
  }

  /// `add` (operand `side` a result of the rows fusion `f`, its norm's)
  /// joins `f`, which then reads the other operand; false where it cannot.
  static bool absorbEpilogue(FusionOp f, AddOp add, unsigned side) {
    Value n = add->getOperand(side), h = add->getOperand(1 - side);
    unsigned i = cast<OpResult>(n).getResultNumber();
    auto yield = cast<YieldOp>(f.getBody().front().getTerminator());
    Value inner = yield.getValues()[i];
    if (!isa_and_nonnull<LayerNormOp, RmsNormOp>(inner.getDefiningOp()) || !inner.hasOneUse())
      return false;
    Operation *hDef = h.getDefiningOp();
    // (h defined in an enclosing block dominates f already.)
    if (hDef && hDef->getBlock() == f->getBlock() && !hDef->isBeforeInBlock(f)) {
      for (Value r : f.getResults())
        for (Operation *user : r.getUsers())
          if (user != add && (user->getBlock() != add->getBlock() || user->isBeforeInBlock(add)))
            return false;
      f->moveBefore(add);
    }
    OpBuilder b(f);
    SmallVector<Value> inputs(f.getInputs().begin(), f.getInputs().end());
    inputs.push_back(h);
    auto grown = b.create<FusionOp>(absorbedLoc({f.getLoc(), add.getLoc()}), f.getKind(),
                                    f.getResultTypes(), inputs);
    grown.getBody().takeBody(f.getBody());
    Block &body = grown.getBody().front();
    IRMapping map;
    map.map(n, inner);
    map.map(h, body.addArgument(h.getType(), h.getLoc()));
    OpBuilder inside(yield);
    yield->setOperand(i, inside.clone(*add, map)->getResult(0));
    for (auto [old, now] : llvm::zip(f.getResults(), grown.getResults()))
      old.replaceAllUsesWith(now);
    add.getResult().replaceAllUsesWith(grown.getResult(i));
    add.erase();
    f.erase();
    return true;
  }

  /// A column sum and a cast of one value, each left a kernel of its own
  /// (--dtype bf16: the QKV bias gradient and the bf16 copy of the same
  /// gradient for the next products), become one kernel that reads the
  /// value once, when nothing reads the earlier one's result before the
  /// later one.
  void fuseSumAndCast(Block &block) {
    SmallVector<std::pair<Operation *, Operation *>> pairs;
    for (Operation &op : block) {
      if (!isColumnReduction(&op))
        continue;
      Value x = op.getOperand(0);
      for (Operation *user : x.getUsers()) {
        auto c = dyn_cast<CastOp>(user);
        if (c && !c->hasAttr(kProducerCopyAttr) && c->getBlock() == &block &&
            shapeOf(c.getResult()) == shapeOf(x) &&
            isa<FloatType>(cast<RankedTensorType>(c.getType()).getElementType())) {
          pairs.push_back({&op, c});
          break;
        }
      }
    }
    for (auto [sum, cast] : pairs) {
      Operation *first = sum->isBeforeInBlock(cast) ? sum : cast;
      Operation *last = first == sum ? cast : sum;
      bool early = llvm::any_of(first->getResult(0).getUsers(), [&](Operation *u) {
        return u->getBlock() != &block || u->isBeforeInBlock(last);
      });
      if (early)
        continue;
      auto shape = shapeOf(sum->getOperand(0));
      Group g{{last, first}, last, SmallVector<int64_t>(shape.begin(), shape.end())};
      buildFusion(g);
    }
  }

  /// A cast that is a fusion result's only reader becomes the fusion's last
  /// op, so the kernel stores the converted value (--dtype bf16: a
  /// LayerNorm's or a gradient's bf16 copy for the next product) instead of
  /// a kernel of its own reading the f32 value back. A column sum's result
  /// keeps its type (it is not computed per element).
  void absorbCasts(FusionOp fusion) {
    if (fusion.getKind() != FusionKind::pointwise && fusion.getKind() != FusionKind::rows)
      return;
    auto yield = cast<YieldOp>(fusion.getBody().front().getTerminator());
    for (auto [i, result] : llvm::enumerate(fusion.getResults())) {
      if (!result.hasOneUse())
        continue;
      auto c = dyn_cast<CastOp>(*result.getUsers().begin());
      Value inner = yield.getValues()[i];
      if (!c || inner.getDefiningOp<ReduceSumOp>() ||
          !isa<FloatType>(cast<RankedTensorType>(c.getType()).getElementType()) ||
          !isa<FloatType>(cast<RankedTensorType>(inner.getType()).getElementType()))
        continue;
      OpBuilder b(yield);
      auto type = RankedTensorType::get(cast<RankedTensorType>(inner.getType()).getShape(),
                                        cast<RankedTensorType>(c.getType()).getElementType());
      Value converted = b.create<CastOp>(c.getLoc(), type, inner);
      yield->setOperand(i, converted);
      fusion->setLoc(absorbedLoc({fusion.getLoc(), c.getLoc()}));
      result.setType(c.getType());
      c.getResult().replaceAllUsesWith(result);
      c.erase();
    }
  }

  /// A norm's result that a rows fusion yields and that is read both as
  /// it is and by a cast (--dtype bf16, BERT's post-LN stream: the next
  /// residual add reads f32, the next products the bf16 copy): the fusion
  /// also yields the cast, a second store of the normalized row, and the
  /// cast, otherwise a kernel of its own reading the f32 rows back, is gone.
  void addNormCopy(FusionOp fusion) {
    if (fusion.getKind() != FusionKind::rows)
      return;
    auto yield = cast<YieldOp>(fusion.getBody().front().getTerminator());
    for (auto [i, result] : llvm::enumerate(fusion.getResults())) {
      Value inner = yield.getValues()[i];
      if (!isa_and_nonnull<LayerNormOp, RmsNormOp>(inner.getDefiningOp()) || result.hasOneUse())
        continue;
      CastOp copy;
      for (Operation *user : result.getUsers())
        if (auto c = dyn_cast<CastOp>(user);
            c && !copy && isa<FloatType>(cast<RankedTensorType>(c.getType()).getElementType()))
          copy = c;
      if (!copy)
        continue;
      OpBuilder b(yield);
      auto type = RankedTensorType::get(cast<RankedTensorType>(inner.getType()).getShape(),
                                        cast<RankedTensorType>(copy.getType()).getElementType());
      Value converted = b.create<CastOp>(copy.getLoc(), type, inner);
      yield->insertOperands(yield->getNumOperands(), converted);
      SmallVector<Type> types(fusion.getResultTypes());
      types.push_back(copy.getType());
      b.setInsertionPoint(fusion);
      auto grown = b.create<FusionOp>(absorbedLoc({fusion.getLoc(), copy.getLoc()}),
                                      fusion.getKind(), types,
                                      fusion.getInputs());
      grown.getBody().takeBody(fusion.getBody());
      for (auto [old, now] : llvm::zip(fusion.getResults(), grown.getResults()))
        old.replaceAllUsesWith(now);
      copy.getResult().replaceAllUsesWith(grown.getResults().back());
      copy.erase();
      fusion.erase();
      return; // one copy per fusion (its norm's)
    }
  }

  void buildFusion(Group &g) {
    std::reverse(g.ops.begin(), g.ops.end()); // program order
    llvm::SmallPtrSet<Operation *, 16> members(g.ops.begin(), g.ops.end());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> outputs;
    for (Operation *op : g.ops) {
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if ((def && members.count(def)) || isSplatConstant(v))
          continue;
        inputs.insert(v);
      }
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !members.count(u); }))
          outputs.push_back(r);
    }
    OpBuilder b(g.root);
    SmallVector<Type> resultTypes;
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    SmallVector<Location> locs;
    for (Operation *op : g.ops)
      locs.push_back(op->getLoc());
    auto fusion = b.create<FusionOp>(absorbedLoc(locs), isRowRoot(g.root) ? FusionKind::rows : FusionKind::pointwise,
                                     resultTypes, inputs.getArrayRef());
    Block &body = fusion.getBody().front();
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    IRMapping map;
    for (auto [v, arg] : llvm::zip(inputs, body.getArguments()))
      map.map(v, arg);
    for (Operation *op : g.ops) {
      for (Value v : op->getOperands())
        if (!map.contains(v) && isSplatConstant(v))
          map.map(v, inner.clone(*v.getDefiningOp())->getResult(0));
      inner.clone(*op, map);
    }
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(map.lookup(v));
    inner.create<YieldOp>(g.root->getLoc(), yielded);
    for (auto [old, result] : llvm::zip(outputs, fusion.getResults()))
      old.replaceUsesWithIf(result, [&](OpOperand &use) {
        return !members.count(use.getOwner());
      });
    for (Operation *op : llvm::reverse(g.ops))
      op->erase();
  }
};

} // namespace
