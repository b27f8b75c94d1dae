//===- FoldRotary.cpp - rotary embeddings read inside attention -----------===//
//
// mlc.rotary of Q and of K that only attention reads (through the views
// that split the heads) becomes mlc.attention's `rotary %cos, %sin`: the
// attention kernels rotate Q and K rows where they read them, and the
// backward kernel writes the gradients of the unrotated inputs, so the four
// standalone rotary passes of a layer (Q and K forward, dQ and dK backward)
// and the rotated Q and K in memory are gone.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace mlc {
#define GEN_PASS_DEF_MLCFOLDROTARY
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

using Shape = SmallVector<int64_t>;

Shape shapeOfValue(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

/// A view that keeps the head dim last and whole: a transpose that leaves
/// it in place, or a static reshape that keeps it.
bool isHeadView(Operation *op) {
  if (auto t = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> p = t.getPermutation();
    return !p.empty() && p.back() == int64_t(p.size()) - 1;
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    auto in = cast<RankedTensorType>(r.getInput().getType());
    auto out = cast<RankedTensorType>(r.getType());
    return in.hasStaticShape() && out.hasStaticShape() && in.getRank() > 0 &&
           out.getRank() > 0 && in.getShape().back() == out.getShape().back();
  }
  return false;
}

/// A rotated operand of attention: the (not transposed) rotary op and the
/// views from its result to the operand, in order.
struct Rotated {
  RotaryOp rotary;
  SmallVector<Operation *> views;
};

std::optional<Rotated> rotatedSource(Value v) {
  Rotated r;
  while (Operation *def = v.getDefiningOp()) {
    if (auto rot = dyn_cast<RotaryOp>(def)) {
      if (rot.getTranspose())
        return std::nullopt;
      r.rotary = rot;
      std::reverse(r.views.begin(), r.views.end());
      return r;
    }
    if (!isHeadView(def))
      return std::nullopt;
    r.views.push_back(def);
    v = def->getOperand(0);
  }
  return std::nullopt;
}

/// The table shape t (broadcast against the reshape's input `in`) over the
/// reshape's result `out`: a group of input dims merged or split keeps the
/// table's dims when they are all whole, becomes 1s when all broadcast;
/// a mixed group has no strided form (nullopt).
std::optional<Shape> reshapeTable(const Shape &t, const Shape &in, const Shape &out) {
  Shape r;
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    size_t i1 = i, j1 = j;
    int64_t pi = 1, po = 1;
    do {
      if (pi <= po && i1 < in.size())
        pi *= in[i1++];
      else if (j1 < out.size())
        po *= out[j1++];
      else
        return std::nullopt;
    } while (pi != po || (i1 < in.size() && in[i1] == 1 && j1 == out.size()));
    bool whole = true, broadcast = true;
    for (size_t d = i; d < i1; ++d) {
      whole &= t[d] == in[d];
      broadcast &= t[d] == 1;
    }
    if (!whole && !broadcast)
      return std::nullopt;
    for (size_t d = j; d < j1; ++d)
      r.push_back(broadcast ? 1 : out[d]);
    i = i1, j = j1;
  }
  return r;
}

/// The shape of the rotary tables in the attention operand's index space
/// (the views applied to them), the last dim R; nullopt where a view mixes
/// broadcast and whole dims or moves the tables' dims out of order.
std::optional<Shape> mappedTables(const Rotated &r) {
  RotaryOp rot = r.rotary;
  Shape x = shapeOfValue(rot.getInput()), t = shapeOfValue(rot.getCos());
  const int64_t R = t.back();
  t.insert(t.begin(), x.size() - t.size(), 1);
  t.back() = x.back(); // mapped as the whole head dim, restored below
  for (Operation *view : r.views) {
    Shape out = shapeOfValue(view->getResult(0));
    if (auto tr = dyn_cast<TransposeOp>(view)) {
      // Only unit dims may move: the tables' elements keep their order,
      // so that the mapped tables are a reshape of theirs.
      Shape n;
      int64_t last = -1;
      for (int64_t p : tr.getPermutation()) {
        n.push_back(t[p]);
        if (t[p] != 1 && p < last)
          return std::nullopt;
        if (t[p] != 1)
          last = p;
      }
      t = n;
    } else {
      std::optional<Shape> n = reshapeTable(t, x, out);
      if (!n)
        return std::nullopt;
      t = *n;
    }
    x = out;
  }
  t.back() = R;
  return t;
}

/// The attention ops that read a rotary's result (through head views), by
/// the operand they read it as; false when anything else reads it.
bool attentionReaders(Value v, unsigned operand, SmallVectorImpl<Operation *> &readers) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isHeadView(user)) {
      if (!attentionReaders(user->getResult(0), operand, readers))
        return false;
      continue;
    }
    const unsigned offset = isa<AttentionGradOp>(user) ? 1 : 0;
    if (!isa<AttentionOp, AttentionGradOp>(user) || use.getOperandNumber() != operand + offset)
      return false;
    readers.push_back(user);
  }
  return true;
}

/// The backward half of a rotated operand: the gradient `g` of the rotated
/// attention operand flows through the views of `fwd` in reverse (one use
/// each) into the transposed rotary of the same tables. The views in order
/// and that rotary, or nullopt.
std::optional<Rotated> gradientSink(Value g, const Rotated &fwd) {
  Rotated r;
  Value v = g;
  for (size_t n = fwd.views.size(); n-- > 0;) {
    if (!v.hasOneUse())
      return std::nullopt;
    Operation *user = *v.getUsers().begin();
    Operation *f = fwd.views[n];
    if (user->getName() != f->getName() || user->getResult(0).getType() != f->getOperand(0).getType())
      return std::nullopt;
    if (auto t = dyn_cast<TransposeOp>(user)) {
      ArrayRef<int64_t> p = t.getPermutation(), q = cast<TransposeOp>(f).getPermutation();
      for (size_t i = 0; i < p.size(); ++i)
        if (q[p[i]] != int64_t(i))
          return std::nullopt;
    }
    r.views.push_back(user);
    v = user->getResult(0);
  }
  if (!v.hasOneUse())
    return std::nullopt;
  auto rot = dyn_cast<RotaryOp>(*v.getUsers().begin());
  RotaryOp f = fwd.rotary;
  if (!rot || !rot.getTranspose() || rot.getInput() != v || rot.getCos() != f.getCos() ||
      rot.getSin() != f.getSin() || rot.getInterleaved() != f.getInterleaved())
    return std::nullopt;
  r.rotary = rot;
  return r;
}

/// One fold: the rotaries of Q and K, the attention ops reading them, and
/// the tables in the attention's index space.
struct Fold {
  Rotated q, k;
  SmallVector<Operation *> readers;
  Shape tables;
};

/// The fold that attention op `op` starts, when every condition holds: Q
/// and K rotated by the same tables (broadcast over the heads, strided
/// views of them) and read by nothing but attention ops in their slots,
/// each reading that same pair through views that map the tables to the
/// same shape; the gradient op's dQ and dK going straight to the
/// transposed rotaries.
std::optional<Fold> foldOf(Operation *op) {
  const unsigned base = isa<AttentionGradOp>(op) ? 1 : 0;
  Fold f;
  auto q = rotatedSource(op->getOperand(base)), k = rotatedSource(op->getOperand(base + 1));
  if (!q || !k || q->rotary == k->rotary)
    return std::nullopt;
  f.q = *q, f.k = *k;
  RotaryOp rq = q->rotary, rk = k->rotary;
  if (rq.getCos() != rk.getCos() || rq.getSin() != rk.getSin() ||
      rq.getInterleaved() != rk.getInterleaved())
    return std::nullopt;
  std::optional<Shape> tq = mappedTables(*q), tk = mappedTables(*k);
  if (!tq || !tk || *tq != *tk || tq->size() < 3 || (*tq)[1] != 1)
    return std::nullopt;
  // Q and K share the tables' rows (as many queries as keys).
  Shape qs = shapeOfValue(op->getOperand(base)), ksh = shapeOfValue(op->getOperand(base + 1));
  const size_t seq = qs.size() == 3 ? 0 : 2;
  if (qs.size() != ksh.size() || qs[seq] != ksh[seq] || ShapedType::isDynamic(qs[seq]))
    return std::nullopt;
  f.tables = *tq;
  SmallVector<Operation *> kReaders;
  if (!attentionReaders(rq.getResult(), 0, f.readers) ||
      !attentionReaders(rk.getResult(), 1, kReaders))
    return std::nullopt;
  llvm::SetVector<Operation *> qReaders(f.readers.begin(), f.readers.end()),
      kSet(kReaders.begin(), kReaders.end());
  if (qReaders.size() != kSet.size() ||
      !llvm::all_of(qReaders, [&](Operation *r) { return kSet.contains(r); }))
    return std::nullopt;
  f.readers.assign(qReaders.begin(), qReaders.end());
  for (Operation *reader : f.readers) {
    const unsigned b = isa<AttentionGradOp>(reader) ? 1 : 0;
    auto rq2 = rotatedSource(reader->getOperand(b)), rk2 = rotatedSource(reader->getOperand(b + 1));
    // The same rotaries, and through views that map their tables as the
    // starting op's do (the one pair of tables every reader is given).
    if (!rq2 || !rk2 || rq2->rotary != rq || rk2->rotary != rk ||
        mappedTables(*rq2) != f.tables || mappedTables(*rk2) != f.tables)
      return std::nullopt;
    auto g = dyn_cast<AttentionGradOp>(reader);
    if (g && (g.getCos() || !gradientSink(g.getQueryGrad(), *rq2) ||
              !gradientSink(g.getKeyGrad(), *rk2)))
      return std::nullopt;
    if (auto a = dyn_cast<AttentionOp>(reader); a && a.getCos())
      return std::nullopt;
  }
  return f;
}

/// `v` through clones of `views` (each cloned once per mapping, after the
/// original), starting from `from` in place of the views' first operand.
Value replay(OpBuilder &b, ArrayRef<Operation *> views, IRMapping &map) {
  Value v;
  for (Operation *view : views) {
    if (!map.contains(view->getResult(0))) {
      b.setInsertionPointAfter(view);
      b.clone(*view, map);
    }
    v = map.lookup(view->getResult(0));
  }
  return v;
}

/// The attention operand `operand` of `reader` rebuilt from the unrotated
/// input (its rotary's views replayed on it).
Value unrotated(OpBuilder &b, Operation *reader, unsigned operand, IRMapping &map) {
  Rotated r = *rotatedSource(reader->getOperand(operand));
  map.map(r.rotary.getResult(), r.rotary.getInput());
  return r.views.empty() ? r.rotary.getInput() : replay(b, r.views, map);
}

/// The gradient `g` of a rotated operand replaced by the new one's `ng`:
/// the transposed rotary's result becomes ng through the views.
void redirectGradient(OpBuilder &b, Value g, Value ng, const Rotated &fwd,
                      SmallVectorImpl<Operation *> &dead) {
  Rotated sink = *gradientSink(g, fwd);
  IRMapping map;
  map.map(g, ng);
  Value v = sink.views.empty() ? ng : replay(b, sink.views, map);
  sink.rotary.getResult().replaceAllUsesWith(v);
  dead.push_back(sink.rotary);
  for (Operation *view : llvm::reverse(sink.views))
    dead.push_back(view);
}

/// Erases the head views and rotaries that nothing reads any more, from
/// the producers in `work` up (each op once).
void eraseDeadViews(SmallVector<Operation *> work) {
  llvm::DenseSet<Operation *> erased;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (erased.contains(op) || !op->use_empty() || !(isHeadView(op) || isa<RotaryOp>(op)))
      continue;
    for (Value o : op->getOperands())
      if (Operation *def = o.getDefiningOp())
        work.push_back(def);
    erased.insert(op);
    op->erase();
  }
}

void applyFold(const Fold &f) {
  OpBuilder b(f.q.rotary);
  RotaryOp rq = f.q.rotary;
  auto table = [&](Value t) -> Value {
    auto type = RankedTensorType::get(f.tables, cast<RankedTensorType>(t.getType()).getElementType());
    return t.getType() == type ? t : b.create<ReshapeOp>(rq.getLoc(), type, t).getResult();
  };
  Value cos = table(rq.getCos()), sin = table(rq.getSin());
  UnitAttr interleaved = rq.getInterleaved() ? b.getUnitAttr() : UnitAttr();
  SmallVector<Operation *> dead;
  IRMapping map;
  for (Operation *reader : f.readers) {
    if (auto a = dyn_cast<AttentionOp>(reader)) {
      Value q = unrotated(b, a, 0, map), k = unrotated(b, a, 1, map);
      b.setInsertionPoint(a);
      auto n = b.create<AttentionOp>(a.getLoc(), q, k, a.getValue(), a.getMask(),
                                     a.getCuSeqlens(), cos, sin, a.getRank(),
                                     a.getCausalAttr(), a.getScaleAttr(), a.getDropoutAttr(),
                                     a.getSeedAttr(), interleaved, a.getSoftcapAttr(),
                                     a.getWindowAttr(), a.getBlocksAttr(), a.getAxisAttr());
      a.getResult().replaceAllUsesWith(n.getResult());
      dead.push_back(a);
      continue;
    }
    auto g = cast<AttentionGradOp>(reader);
    Rotated fq = *rotatedSource(g.getQuery()), fk = *rotatedSource(g.getKey());
    Value q = unrotated(b, g, 1, map), k = unrotated(b, g, 2, map);
    b.setInsertionPoint(g);
    auto n = b.create<AttentionGradOp>(g.getLoc(), g.getGrad(), q, k, g.getValue(), g.getMask(),
                                       g.getCuSeqlens(), cos, sin, g.getRank(),
                                       g.getCausalAttr(), g.getScaleAttr(), g.getDropoutAttr(),
                                       g.getSeedAttr(), interleaved, g.getSoftcapAttr(),
                                       g.getWindowAttr(), g.getBlocksAttr(), g.getAxisAttr());
    redirectGradient(b, g.getQueryGrad(), n.getQueryGrad(), fq, dead);
    redirectGradient(b, g.getKeyGrad(), n.getKeyGrad(), fk, dead);
    g.getValueGrad().replaceAllUsesWith(n.getValueGrad());
    dead.push_back(g); // after the gradient's views, which it feeds
  }
  llvm::SetVector<Operation *> producers;
  for (Operation *op : dead)
    for (Value o : op->getOperands())
      if (Operation *def = o.getDefiningOp(); def && !llvm::is_contained(dead, def))
        producers.insert(def);
  for (Operation *op : dead)
    op->erase();
  // The forward views and the rotaries, now unread.
  eraseDeadViews(SmallVector<Operation *>(producers.begin(), producers.end()));
}

struct FoldRotaryPass : mlc::impl::MlcFoldRotaryBase<FoldRotaryPass> {
  void runOnOperation() final {
    bool changed = true;
    while (changed) {
      changed = false;
      std::optional<Fold> fold;
      getOperation().walk([&](Operation *op) {
        if (!isa<AttentionOp, AttentionGradOp>(op))
          return WalkResult::advance();
        fold = foldOf(op);
        return fold ? WalkResult::interrupt() : WalkResult::advance();
      });
      if (fold) {
        applyFold(*fold);
        ++folded;
        changed = true;
      }
    }
  }
};

} // namespace
