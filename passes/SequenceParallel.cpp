//===- SequenceParallel.cpp - Megatron's --sequence-parallel --------------===//
//
// mlc-shard-tensor-parallel{sequence-parallel=true}, after the regions are
// split (SequenceParallel.h):
//
//   1. The stream. Starting from the regions' exits (their tp_reduce sum),
//      the stream grows through token-local ops whose result has the
//      exits' shape [tokens..., hidden]: elementwise ops whose other
//      operands do not vary over the tokens (a bias, a norm's weight),
//      norms over the hidden dim, dropout, casts. It grows forward to every
//      such reader and backward to such a producer when every reader of that
//      producer is token-local or a region's entry (the embedding's dropout,
//      the first layer's norm). A tp_reduce sum of that shape the stream
//      reaches (the vocabulary-parallel lookup's) becomes a reduce-scatter
//      too.
//   2. Checks. The tokens (the product of the leading dims) must divide by
//      the group's size; a stream value may be read only by the stream and
//      by the regions' entries (a value that leaves the stream for anything
//      else, a returned value, would need every token), else the reader is
//      named.
//   3. Rewrite. A stream value of shape [tokens..., hidden] becomes
//      [tokens / size, hidden], rank r's contiguous block of the flattened
//      rows. An exit tp_reduce sum becomes reshape + tp_reduce_scatter over
//      those rows, an entry tp_copy tp_all_gather + reshape. A replicated
//      operand with every token (GPT-2's token + position embeddings) enters
//      exactly: rank r keeps its rows (the others zeroed by a select on the
//      rows' index against r's block, from the "tp_rank" scalars) and a
//      reduce-scatter hands each rank its block (x + 0 + ... + 0 is x); a
//      tp_copy in front of it all-reduces the adjoint in backward, so the
//      replicated ops before the stream see every token's gradient. A
//      replicated operand that does not vary over the tokens and has a
//      gradient (a norm's weight, a bias) is read through a tp_copy, whose
//      dual sums its partial gradients over the ranks' tokens.
//
//===----------------------------------------------------------------------===//

#include "passes/SequenceParallel.h"
#include "passes/ShardDropout.h"

#include "passes/VocabParallel.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace mlc {
namespace {

RankedTensorType typeOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

class SequenceParallel {
public:
  SequenceParallel(func::FuncOp fn, int64_t size, ArrayRef<TpCopyOp> entries,
                   ArrayRef<TpReduceOp> exits, function_ref<Value()> rank)
      : fn(fn), size(size), rank(rank), b(fn.getContext()) {
    for (TpCopyOp c : entries)
      entrySet.insert(c);
    for (TpReduceOp r : exits)
      exitOps.push_back(r);
  }

  LogicalResult run() {
    if (exitOps.empty())
      return fn.emitError("mlc-shard-tensor-parallel: sequence-parallel found no "
                          "tensor-parallel region to join the residual stream to");
    if (failed(shape()))
      return failure();
    grow();
    if (failed(check()))
      return failure();
    rewrite();
    return markDropouts();
  }

private:
  func::FuncOp fn;
  int64_t size;
  function_ref<Value()> rank;
  OpBuilder b;
  llvm::DenseSet<Operation *> entrySet;
  SmallVector<TpReduceOp> exitOps;
  /// The stream's ops.
  llvm::SetVector<Operation *> stream;
  /// The stream's shape [tokens..., hidden] and its sizes.
  SmallVector<int64_t> full;
  int64_t tokens = 0, hidden = 0;
  Value mask;
  llvm::DenseMap<Value, Value> scattered, copied;

  bool isFull(Value v) {
    auto t = typeOf(v);
    return t && t.getShape() == ArrayRef<int64_t>(full);
  }

  /// Whether `v` is the same for every token: broadcast along every token dim.
  bool tokenFree(Value v) {
    auto t = typeOf(v);
    if (!t || t.getRank() > (int64_t)full.size())
      return false;
    int64_t lead = full.size() - t.getRank();
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d + lead < (int64_t)full.size() - 1 && t.getDimSize(d) != 1)
        return false;
    return true;
  }

  /// An op the stream can run on each rank's rows alone.
  bool tokenLocal(Operation *op) {
    if (op->getNumResults() != 1 || !isFull(op->getResult(0)))
      return false;
    if (auto r = dyn_cast<TpReduceOp>(op))
      return r.getKind() == TpReduceKind::sum;
    if (!isa<ScalarOpInterface, DropoutOp, CastOp, LayerNormOp, RmsNormOp>(op))
      return false;
    return llvm::all_of(op->getOperands(), [&](Value v) { return isFull(v) || tokenFree(v); });
  }

  LogicalResult shape() {
    auto t = typeOf(exitOps.front().getResult());
    full.assign(t.getShape().begin(), t.getShape().end());
    Operation *first = exitOps.front();
    if (full.size() < 2 || !t.hasStaticShape())
      return first->emitOpError("mlc-shard-tensor-parallel: sequence-parallel needs the residual "
                                "stream's tokens static, got ")
             << t;
    for (TpReduceOp r : exitOps)
      if (!isFull(r.getResult()))
        return r.emitOpError("mlc-shard-tensor-parallel: sequence-parallel: this region's "
                             "output ")
               << r.getType() << " is not the residual stream's " << t;
    tokens = 1;
    for (int64_t d : ArrayRef<int64_t>(full).drop_back())
      tokens *= d;
    hidden = full.back();
    if (tokens % size) {
      std::string dims;
      for (int64_t d : ArrayRef<int64_t>(full).drop_back())
        dims += (dims.empty() ? "" : " x ") + std::to_string(d);
      return first->emitOpError("mlc-shard-tensor-parallel: sequence-parallel splits the "
                                "residual stream's ")
             << tokens << " tokens (" << dims << ") over the tensor-parallel size " << size
             << ", which does not divide them; use a micro-batch and sequence length whose "
                "product is a multiple of "
             << size;
    }
    return success();
  }

  /// Whether every reader of `op`'s result can join the stream.
  bool readersJoin(Operation *op) {
    return llvm::all_of(op->getResult(0).getUsers(), [&](Operation *u) {
      return stream.contains(u) || entrySet.contains(u) || tokenLocal(u);
    });
  }

  void grow() {
    SmallVector<Operation *> work;
    for (TpReduceOp r : exitOps)
      if (stream.insert(r))
        work.push_back(r);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Operation *u : op->getResult(0).getUsers())
        if (!stream.contains(u) && !entrySet.contains(u) && tokenLocal(u) && stream.insert(u))
          work.push_back(u);
      if (isa<TpReduceOp>(op))
        continue; // It reads the partial sums whole.
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && !stream.contains(def) && tokenLocal(def) && readersJoin(def) &&
            stream.insert(def))
          work.push_back(def);
      }
    }
  }

  LogicalResult check() {
    for (Operation *op : stream)
      for (Operation *u : op->getResult(0).getUsers())
        if (!stream.contains(u) && !entrySet.contains(u))
          return u->emitOpError("mlc-shard-tensor-parallel: sequence-parallel splits the "
                                "residual stream over the tokens, and this op reads it but is "
                                "neither token-local (elementwise, a norm over the hidden dim, "
                                "dropout) nor a tensor-parallel region's entry: mlc cannot "
                                "gather the stream for it");
    for (Operation *op : stream) {
      if (isa<TpReduceOp>(op))
        continue;
      for (Value v : op->getOperands())
        if (!(v.getDefiningOp() && stream.contains(v.getDefiningOp())) && isFull(v) &&
            !isa<FloatType>(typeOf(v).getElementType()))
          return op->emitOpError("mlc-shard-tensor-parallel: sequence-parallel cannot split a "
                                 "non-float operand over the tokens");
    }
    return success();
  }

  RankedTensorType rows(Type el, int64_t n) { return RankedTensorType::get({n, hidden}, el); }

  void insertAfter(Value v) {
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&fn.getBody().front());
  }

  /// [tokens, 1]: whether each row is in this rank's block.
  Value rowMask() {
    if (mask)
      return mask;
    Value r = rank();
    Location loc = fn.getLoc();
    b.setInsertionPointToStart(&fn.getBody().front());
    Type i64 = b.getI64Type();
    Value lo = vocabOffset(b, loc, r, tokens / size, i64);
    auto zeroD = RankedTensorType::get({}, i64);
    Value per = b.create<ConstantOp>(loc, DenseElementsAttr::get(zeroD, b.getI64IntegerAttr(tokens / size)));
    Value hi = b.create<AddOp>(loc, lo, per);
    Value iota = b.create<IotaOp>(loc, RankedTensorType::get({tokens}, i64), 0);
    Value col = b.create<ReshapeOp>(loc, RankedTensorType::get({tokens, 1}, i64), iota);
    Value ge = b.create<CompareOp>(loc, ComparePredicate::ge, col, lo);
    Value lt = b.create<CompareOp>(loc, ComparePredicate::lt, col, hi);
    mask = b.create<SelectOp>(loc, ge, lt, ge);
    return mask;
  }

  /// A replicated value with every token, entering the stream: this rank's rows.
  Value scatter(Value v) {
    Value &out = scattered[v];
    if (out)
      return out;
    Value m = rowMask();
    insertAfter(v);
    Location loc = v.getLoc();
    Type el = typeOf(v).getElementType();
    Value flat = b.create<ReshapeOp>(loc, rows(el, tokens), v);
    Value copy = b.create<TpCopyOp>(loc, flat);
    Value zero = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({}, el), b.getFloatAttr(el, 0.0)));
    Value mine = b.create<SelectOp>(loc, m, copy, zero);
    out = b.create<TpReduceScatterOp>(loc, rows(el, tokens / size), mine, 0);
    return out;
  }

  /// A replicated value the same for every token, read by the stream: its
  /// gradient is a partial sum over this rank's tokens, summed by the dual.
  Value shared(Value v) {
    Value &out = copied[v];
    if (out)
      return out;
    insertAfter(v);
    Location loc = v.getLoc();
    auto t = typeOf(v);
    out = b.create<TpCopyOp>(loc, v);
    if (t.getRank() > 2)
      out = b.create<ReshapeOp>(loc, RankedTensorType::get({t.getShape().back()}, t.getElementType()),
                                out);
    return out;
  }

  /// The stream's dropouts act on this rank's block of the flattened token
  /// rows: each draws, for its elements, one process's numbers for those
  /// tokens (ShardDropout.h), so that T ranks drop what one process drops.
  LogicalResult markDropouts() {
    SmallVector<DropoutOp> dropouts;
    fn.walk([&](DropoutOp d) {
      if (stream.contains(d.getOperation()))
        dropouts.push_back(d);
    });
    for (DropoutOp d : dropouts)
      if (failed(markDropoutBlock(d, rank(), size, /*axis=*/0)))
        return failure();
    return success();
  }

  void rewrite() {
    // The regions entered from the stream (before its values change).
    SmallVector<TpCopyOp> gathers;
    for (Operation *e : entrySet)
      if (Operation *def = e->getOperand(0).getDefiningOp(); def && stream.contains(def))
        gathers.push_back(cast<TpCopyOp>(e));
    llvm::DenseSet<Value> mine; // the exits' reduce-scatters
    SmallVector<Operation *> dead;
    for (Operation &op : llvm::make_early_inc_range(fn.getBody().front())) {
      if (!stream.contains(&op))
        continue;
      Location loc = op.getLoc();
      if (auto r = dyn_cast<TpReduceOp>(op)) {
        b.setInsertionPoint(r);
        Type el = r.getType().getElementType();
        Value flat = b.create<ReshapeOp>(loc, rows(el, tokens), r.getInput());
        Value rs = b.create<TpReduceScatterOp>(loc, rows(el, tokens / size), flat, 0);
        r.getResult().replaceAllUsesWith(rs);
        mine.insert(rs);
        dead.push_back(r);
        continue;
      }
      for (OpOperand &use : op.getOpOperands()) {
        Value v = use.get();
        Operation *def = v.getDefiningOp();
        if ((def && stream.contains(def)) || mine.contains(v))
          continue; // already this rank's rows
        if (isFull(v))
          use.set(scatter(v));
        else if (isa<FloatType>(typeOf(v).getElementType()) && !isa_and_nonnull<ConstantOp>(def))
          use.set(shared(v));
        else if (typeOf(v).getRank() > 2)
          use.set(b.create<ReshapeOp>(loc,
                                      RankedTensorType::get({typeOf(v).getShape().back()},
                                                            typeOf(v).getElementType()),
                                      v));
      }
      Value res = op.getResult(0);
      res.setType(rows(typeOf(res).getElementType(), tokens / size));
    }
    for (Operation *op : dead)
      op->erase();
    for (TpCopyOp copy : gathers) {
      auto in = typeOf(copy.getInput());
      b.setInsertionPoint(copy);
      Location loc = copy.getLoc();
      Value all = b.create<TpAllGatherOp>(loc, rows(in.getElementType(), tokens), copy.getInput(), 0);
      Value back = b.create<ReshapeOp>(loc, copy.getType(), all);
      copy.getResult().replaceAllUsesWith(back);
      copy.erase();
    }
  }
};

} // namespace

LogicalResult applySequenceParallel(func::FuncOp fn, int64_t size, ArrayRef<TpCopyOp> entries,
                                    ArrayRef<TpReduceOp> exits, function_ref<Value()> rank) {
  return SequenceParallel(fn, size, entries, exits, rank).run();
}

} // namespace mlc
