//===- ShardTensorParallel.cpp - Megatron's tensor-parallel layout ---------===//
//
// Rewrites @forward into the program one rank of a tensor-parallel group of
// `size` ranks runs (Megatron-LM's layout), before autodiff:
//
//   1. Seeds. Every mlc.attention's query, key and value are traced back
//      (through reshape, transpose, rotary, split, bias add, cast) to the
//      projection whose weight is a parameter; every MLP activation (gelu,
//      silu, swiglu) likewise to its up/gate projections. These matmuls are
//      column-parallel: their weights and biases keep 1/size of the output
//      units. Heads and KV heads must divide by size, else the pass refuses.
//   2. Propagation. Each value that holds a shard records its split axis,
//      forward in program order: a reshape maps the axis to the outermost
//      dimension of its group (heads, not head_dim), a transpose permutes
//      it, elementwise ops keep it (a bias parameter on it is split too),
//      attention takes Q/K/V split on the heads axis. A matmul that
//      contracts the split axis against a parameter is row-parallel and
//      ends the region: its weight keeps 1/size of the input units and its
//      result is a partial sum. Any other reader of a shard is refused,
//      named, before anything is rewritten.
//   3. Rewrite. An mlc.tp_copy (Megatron's `f`) enters each region, an
//      mlc.tp_reduce sum (`g`) follows each row-parallel product, with the
//      bias it carried added after the reduce; the shards' types, the
//      splits' sizes and the parameters' types shrink by size; each split
//      parameter records `mlc.tp_split = {dim, blocks}`: HF tensor dim `dim`
//      is cut into the blocks `blocks` (one for a plain projection; Q, K, V
//      for GPT-2's fused c_attn) and rank r holds the r-th of `size` equal
//      slices of each block. Autodiff then places the backward collectives
//      from the ops' own rules.
//
// Vocabulary parallelism (vocab-parallel, on by default as in Megatron):
// before propagation, every lookup of input_ids in a parameter table keeps
// this rank's rows (dim 0), and the LM head of every loss over that many
// classes becomes a column-parallel seed over the vocabulary; propagation
// carries the vocabulary split through reshapes and slices to the
// cross-entropy, and the rewrite replaces the lookups and the losses by
// their vocabulary-parallel forms (VocabParallel.cpp), with the offset from
// the "tp_rank" scalars argument it adds, and drops the logits output.
//
// Everything else outside the regions (positions, token types, norms, a
// classifier's head) stays replicated and computes the same values on every
// rank; the adjoints that reach it have been summed by the tp_copy's
// all-reduce, so the replicated parameters' gradients agree on every rank
// with no collective.
//
// Sequence parallelism (sequence-parallel=true, Megatron's
// --sequence-parallel): after the rewrite, SequenceParallel.cpp splits the
// residual stream between the regions over the tokens, from the regions'
// entries and exits this pass records.
//
//===----------------------------------------------------------------------===//

#include "dialects/mlc/MlcDialect.h"
#include "passes/Passes.h"
#include "passes/SequenceParallel.h"
#include "passes/ShardDropout.h"
#include "passes/VocabParallel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlc {
#define GEN_PASS_DEF_MLCSHARDTENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc;

namespace {

RankedTensorType tensorType(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// The parameter a value is, if it is an argument marked mlc.param.
BlockArgument asParam(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &fn.getBody().front() ||
      !fn.getArgAttr(arg.getArgNumber(), "mlc.param"))
    return {};
  return arg;
}

StringRef paramName(func::FuncOp fn, BlockArgument p) {
  return fn.getArgAttrOfType<StringAttr>(p.getArgNumber(), "mlc.param").getValue();
}

class ShardTensorParallelPass
    : public mlc::impl::MlcShardTensorParallelBase<ShardTensorParallelPass> {
public:
  using MlcShardTensorParallelBase::MlcShardTensorParallelBase;

  void runOnOperation() final {
    ModuleOp module = getOperation();
    if (size < 1) {
      module.emitError("mlc-shard-tensor-parallel: size must be at least 1, got ") << static_cast<int64_t>(size);
      return signalPassFailure();
    }
    if (sequenceParallel && size < 2) {
      module.emitError("mlc-shard-tensor-parallel: sequence-parallel splits the residual "
                       "stream over a tensor-parallel group; it needs size > 1, got ")
          << static_cast<int64_t>(size);
      return signalPassFailure();
    }
    if (size == 1)
      return; // One rank holds everything: the graph is already its program.
    fn = module.lookupSymbol<func::FuncOp>(forwardName);
    if (!fn) {
      module.emitError("mlc-shard-tensor-parallel: no function @") << forwardName;
      return signalPassFailure();
    }
    if (failed(findSeeds()) || failed(findVocab()) || failed(propagate()) ||
        failed(checkParams()))
      return signalPassFailure();
    rewrite();
    // Dropouts of split values draw one process's masks (ShardDropout.cpp).
    if (failed(shardDropouts(fn, axis, size)))
      return signalPassFailure();
    module->setAttr("mlc.tensor_parallel",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64), size));
    if (sequenceParallel) {
      if (failed(applySequenceParallel(fn, size, regionEntries, regionExits,
                                       [&] { return rankArgument(); })))
        return signalPassFailure();
      module->setAttr("mlc.sequence_parallel", UnitAttr::get(&getContext()));
    }
  }

private:
  func::FuncOp fn;
  /// Column-parallel projections, in program order.
  llvm::SetVector<MatmulOp> seeds;
  /// Row-parallel projections: they end a region.
  SmallVector<MatmulOp> rows;
  /// The split axis of every value that holds a shard.
  llvm::DenseMap<Value, int64_t> axis;
  /// Split parameters: the dim of the tensor that is split.
  llvm::MapVector<BlockArgument, int64_t> paramDim;
  /// The operands (owner, index) through which each split parameter is read.
  llvm::DenseSet<OpOperand *> shardedUses;
  /// Vocabulary-parallel: the LM heads (among the seeds), the token
  /// lookups and the losses, each with its whole vocabulary.
  llvm::DenseSet<Operation *> heads;
  SmallVector<std::pair<EmbeddingOp, int64_t>> lookups;
  SmallVector<std::pair<CrossEntropyOp, int64_t>> losses;
  /// @forward's results that hold a vocabulary shard (the logits): kept as
  /// "vocab_parallel_logits" when the vocabulary is their last dim (what
  /// sampling gathers over the group, runtime/train/Generate.cpp), else
  /// dropped.
  SmallVector<unsigned> droppedResults, vocabShardResults;
  /// The regions' entries (f) and exits (g), for sequence parallelism.
  SmallVector<TpCopyOp> regionEntries;
  SmallVector<TpReduceOp> regionExits;
  /// The "tp_rank" scalars argument, once added.
  Value rankArg;

  Value rankArgument() {
    if (rankArg)
      return rankArg;
    Builder ab(&getContext());
    unsigned at = fn.getNumArguments();
    fn.insertArgument(at, RankedTensorType::get({1}, ab.getF64Type()),
                      ab.getDictionaryAttr(ab.getNamedAttr("mlc.scalars",
                                                           ab.getStringAttr(kTpRankScalars))),
                      fn.getLoc());
    rankArg = fn.getArgument(at);
    return rankArg;
  }

  /// Walks back from an attention operand or an activation's input to the
  /// matmul with a parameter weight that produced it.
  MatmulOp traceProjection(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (auto mm = dyn_cast<MatmulOp>(def))
        return asParam(fn, mm.getRhs()) && !mm.getTransposeLhs() ? mm : MatmulOp();
      if (isa<ReshapeOp, TransposeOp, CastOp, SplitOp>(def))
        v = def->getOperand(0);
      else if (auto rot = dyn_cast<RotaryOp>(def))
        v = rot.getInput();
      else if (isa<RmsNormOp, LayerNormOp>(def))
        v = def->getOperand(0); // Qwen3's per-head QK norm.
      else if (auto add = dyn_cast<AddOp>(def))
        v = asParam(fn, add.getRhs()) ? add.getLhs() : add.getRhs();
      else
        return {};
    }
    return {};
  }

  /// Whether an activation's result reaches, through elementwise ops, the
  /// input of a matmul by a parameter: an MLP's down projection.
  bool feedsDownProjection(Value v) {
    while (v.hasOneUse()) {
      Operation *user = *v.getUsers().begin();
      if (auto mm = dyn_cast<MatmulOp>(user))
        return mm.getLhs() == v && asParam(fn, mm.getRhs());
      if (!isa<ScalarOpInterface, DropoutOp, CastOp>(user) || user->getNumResults() != 1)
        return false;
      v = user->getResult(0);
    }
    return false;
  }

  LogicalResult addSeed(Operation *user, Value v, StringRef what) {
    MatmulOp mm = traceProjection(v);
    if (!mm)
      return user->emitOpError("mlc-shard-tensor-parallel: cannot find the projection "
                               "(a matmul by a parameter) that computes its ")
             << what;
    if (mm.getAcc())
      return mm.emitOpError("mlc-shard-tensor-parallel: a column-parallel projection "
                            "with an accumulator is not supported");
    seeds.insert(mm);
    return success();
  }

  LogicalResult findSeeds() {
    Block &block = fn.getBody().front();
    for (Operation &op : block) {
      if (auto att = dyn_cast<AttentionOp>(op)) {
        int64_t heads = tensorType(att.getQuery()).getDimSize(1);
        int64_t kvHeads = tensorType(att.getKey()).getDimSize(1);
        if (heads % size)
          return att.emitOpError("mlc-shard-tensor-parallel: num_attention_heads = ")
                 << heads << " is not divisible by the tensor-parallel size " << static_cast<int64_t>(size)
                 << "; use a size that divides it";
        if (kvHeads % size)
          return att.emitOpError("mlc-shard-tensor-parallel: num_key_value_heads = ")
                 << kvHeads << " is not divisible by the tensor-parallel size " << static_cast<int64_t>(size)
                 << " (replicating KV heads across the group is not supported yet); "
                    "use a size that divides it";
        if (failed(addSeed(att, att.getQuery(), "query")) ||
            failed(addSeed(att, att.getKey(), "key")) ||
            failed(addSeed(att, att.getValue(), "value")))
          return failure();
        continue;
      }
      if (!isa<GeluOp, SiluOp, SwigluOp>(op) || !feedsDownProjection(op.getResult(0)))
        continue; // Not an MLP (BERT's MLM transform ends in a norm): replicated.
      for (Value in : op.getOperands()) {
        MatmulOp mm = traceProjection(in);
        if (!mm)
          continue; // Not an MLP's activation: it stays replicated.
        int64_t units = tensorType(mm.getResult()).getShape().back();
        if (units % size)
          return mm.emitOpError("mlc-shard-tensor-parallel: the MLP's intermediate_size = ")
                 << units << " is not divisible by the tensor-parallel size " << static_cast<int64_t>(size);
        if (failed(addSeed(&op, in, "input")))
          return failure();
      }
      // A gated MLP spelled out (Gemma's GeGLU: mul(gelu(gate), up)): the
      // other factor's projection is column-parallel too.
      Value act = op.getResult(0);
      if (auto mul = dyn_cast<MulOp>(*act.getUsers().begin())) {
        Value other = mul.getLhs() == act ? mul.getRhs() : mul.getLhs();
        if (traceProjection(other) && failed(addSeed(mul, other, "gated factor")))
          return failure();
      }
    }
    if (seeds.empty())
      return fn.emitError("mlc-shard-tensor-parallel: @")
             << fn.getSymName()
             << " has no attention and no MLP to split (run mlc-recognize first)";
    return success();
  }

  /// A vocabulary that does not divide by size is refused with the rows it
  /// would need.
  LogicalResult vocabDivides(Operation *op, int64_t v, StringRef what) {
    if (v % size == 0)
      return success();
    int64_t t = size, padded = (v + t - 1) / t * t, megatron = (v + 128 * t - 1) / (128 * t) * 128 * t;
    return op->emitOpError("mlc-shard-tensor-parallel: vocab_size = ")
           << v << " (" << what << ") is not divisible by the tensor-parallel size " << t
           << ": pad the vocabulary to " << padded
           << " rows (Megatron's --make-vocab-size-divisible-by 128 pads it to " << megatron
           << "), or pass vocab-parallel=false to keep the embedding, the LM head and the "
              "loss replicated";
  }

  /// The matmul by a parameter whose product the loss reads as logits,
  /// through reshapes, slices, casts and a bias add.
  MatmulOp traceHead(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (auto mm = dyn_cast<MatmulOp>(def))
        return asParam(fn, mm.getRhs()) && !mm.getTransposeLhs() ? mm : MatmulOp();
      if (isa<ReshapeOp, CastOp, SliceOp>(def))
        v = def->getOperand(0);
      else if (auto add = dyn_cast<AddOp>(def); add && asParam(fn, add.getRhs()))
        v = add.getLhs();
      else
        return {};
    }
    return {};
  }

  /// Whether integer `v` is the input "input_ids" (through reshapes and casts).
  bool isTokenIds(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<ReshapeOp, CastOp>(def))
        return false;
      v = def->getOperand(0);
    }
    auto arg = dyn_cast<BlockArgument>(v);
    auto name = arg ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "mlc.input") : StringAttr();
    return name && name.getValue() == "input_ids";
  }

  /// Vocabulary parallelism (Megatron's default under tensor parallelism):
  /// every lookup of input_ids in a parameter table keeps this rank's rows
  /// of it, and every loss over that many classes (the language-model loss,
  /// not a classifier's: BERT's next-sentence head stays replicated) makes
  /// its LM head a column-parallel seed over the vocabulary.
  LogicalResult findVocab() {
    if (!vocabParallel)
      return success();
    llvm::SmallDenseSet<int64_t> vocabs;
    for (auto lookup : fn.getBody().front().getOps<EmbeddingOp>()) {
      if (!asParam(fn, lookup.getWeight()) || !isTokenIds(lookup.getIndices()))
        continue; // Positions and token types stay replicated.
      int64_t v = tensorType(lookup.getWeight()).getDimSize(0);
      if (failed(vocabDivides(lookup, v, "the rows of '" +
                                             paramName(fn, asParam(fn, lookup.getWeight())).str() +
                                             "'")) ||
          failed(shardParam(lookup->getOpOperand(0), 0)))
        return failure();
      lookups.push_back({lookup, v});
      vocabs.insert(v);
    }
    for (auto ce : fn.getBody().front().getOps<CrossEntropyOp>()) {
      int64_t classes = tensorType(ce.getLogits()).getDimSize(1);
      if (!vocabs.contains(classes))
        continue; // A classifier's loss: replicated.
      MatmulOp head = traceHead(ce.getLogits());
      if (!head)
        return ce.emitOpError("mlc-shard-tensor-parallel: cannot find the LM head (a matmul "
                              "by a parameter) that computes its logits; pass "
                              "vocab-parallel=false to keep the head and the loss replicated");
      if (tensorType(head.getResult()).getShape().back() != classes)
        return ce.emitOpError("mlc-shard-tensor-parallel: its logits' ")
               << classes << " classes are not the LM head's "
               << tensorType(head.getResult()).getShape().back() << " outputs";
      if (head.getAcc())
        return head.emitOpError("mlc-shard-tensor-parallel: an LM head with an accumulator "
                                "is not supported");
      seeds.insert(head);
      heads.insert(head);
      losses.push_back({ce, classes});
    }
    return success();
  }

  LogicalResult shardParam(OpOperand &use, int64_t dim) {
    BlockArgument p = asParam(fn, use.get());
    auto [it, inserted] = paramDim.try_emplace(p, dim);
    if (!inserted && it->second != dim)
      return use.getOwner()->emitOpError("mlc-shard-tensor-parallel: parameter '")
             << paramName(fn, p) << "' would be split on two different dims";
    int64_t n = tensorType(p).getDimSize(dim);
    if (ShapedType::isDynamic(n) || n % size)
      return use.getOwner()->emitOpError("mlc-shard-tensor-parallel: dim ")
             << dim << " of parameter '" << paramName(fn, p) << "' (" << n
             << ") is not divisible by the tensor-parallel size " << static_cast<int64_t>(size);
    shardedUses.insert(&use);
    return success();
  }

  /// The axis of a reshape's result that holds input axis `a`'s shard: the
  /// outermost dim of its group, which must divide by size.
  FailureOr<int64_t> reshapeAxis(ReshapeOp op, int64_t a) {
    ArrayRef<int64_t> in = tensorType(op.getInput()).getShape();
    ArrayRef<int64_t> out = tensorType(op.getResult()).getShape();
    auto fail = [&] {
      return op.emitOpError("mlc-shard-tensor-parallel: this reshape moves split dim ")
             << a << " where its shard is not a contiguous block of one dim";
    };
    // Find the output dim that starts where input dim `a` starts.
    for (int64_t b = 0; b < (int64_t)out.size(); ++b) {
      bool same = true;
      if (llvm::is_contained(in.take_front(a), ShapedType::kDynamic) ||
          llvm::is_contained(out.take_front(b), ShapedType::kDynamic)) {
        same = in.take_front(a) == out.take_front(b);
      } else {
        int64_t pi = 1, po = 1;
        for (int64_t d : in.take_front(a))
          pi *= d;
        for (int64_t d : out.take_front(b))
          po *= d;
        same = pi == po;
      }
      if (!same || ShapedType::isDynamic(out[b]) || ShapedType::isDynamic(in[a]))
        continue;
      bool nests = out[b] >= in[a] ? out[b] % in[a] == 0 : in[a] % out[b] == 0;
      if (!nests || out[b] % size)
        return fail();
      return b;
    }
    return fail();
  }

  /// Elementwise ops (and swiglu): the shard keeps its place; a parameter
  /// operand that spans the split dim (a bias) is split with it.
  LogicalResult elementwise(Operation *op) {
    auto rt = tensorType(op->getResult(0));
    int64_t r = rt.getRank(), res = -1;
    for (Value v : op->getOperands())
      if (auto it = axis.find(v); it != axis.end()) {
        int64_t aligned = it->second + r - tensorType(v).getRank();
        if (res >= 0 && res != aligned)
          return op->emitOpError("mlc-shard-tensor-parallel: operands split on different dims");
        res = aligned;
      }
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      if (axis.count(v))
        continue;
      auto t = tensorType(v);
      int64_t d = res - (r - t.getRank());
      if (d < 0 || t.getDimSize(d) == 1)
        continue; // Broadcast along the split dim: every rank reads it whole.
      if (!asParam(fn, v) || failed(shardParam(use, d)))
        return op->emitOpError("mlc-shard-tensor-parallel: operand #")
               << use.getOperandNumber()
               << " spans the split dim but is not a parameter that can be split with it";
    }
    for (Value v : op->getResults())
      axis[v] = res;
    return success();
  }

  LogicalResult propagate() {
    Block &block = fn.getBody().front();
    for (Operation &op : block) {
      if (auto mm = dyn_cast<MatmulOp>(op); mm && seeds.contains(mm)) {
        int64_t dim = mm.getTransposeRhs() ? 0 : 1;
        if (tensorType(mm.getRhs()).getRank() != 2)
          return mm.emitOpError("mlc-shard-tensor-parallel: a projection's weight must be 2-d");
        if (failed(shardParam(mm->getOpOperand(1), dim)))
          return failure();
        if (Value bias = mm.getBias()) {
          OpOperand &use = *llvm::find_if(mm->getOpOperands(),
                                          [&](OpOperand &u) { return u.get() == bias; });
          if (!asParam(fn, bias) || failed(shardParam(use, 0)))
            return mm.emitOpError("mlc-shard-tensor-parallel: the bias of a "
                                  "column-parallel projection must be a parameter");
        }
        axis[mm.getResult()] = tensorType(mm.getResult()).getRank() - 1;
        continue;
      }
      if (llvm::none_of(op.getOperands(), [&](Value v) { return axis.count(v); }))
        continue;
      auto fail = [&](const Twine &why) {
        return op.emitOpError("mlc-shard-tensor-parallel: ") << why;
      };
      if (auto mm = dyn_cast<MatmulOp>(op)) {
        auto it = axis.find(mm.getLhs());
        if (it == axis.end() || axis.count(mm.getRhs()) || !asParam(fn, mm.getRhs()) ||
            mm.getTransposeLhs() || mm.getAcc() ||
            it->second != tensorType(mm.getLhs()).getRank() - 1 ||
            tensorType(mm.getRhs()).getRank() != 2)
          return fail("reads a shard but is not a row-parallel projection (a split "
                      "activation times a 2-d parameter over the split dim)");
        if (failed(shardParam(mm->getOpOperand(1), mm.getTransposeRhs() ? 1 : 0)))
          return failure();
        rows.push_back(mm);
        continue;
      }
      if (auto rs = dyn_cast<ReshapeOp>(op)) {
        FailureOr<int64_t> b = reshapeAxis(rs, axis.lookup(rs.getInput()));
        if (failed(b))
          return failure();
        axis[rs.getResult()] = *b;
        continue;
      }
      if (auto tr = dyn_cast<TransposeOp>(op)) {
        int64_t a = axis.lookup(tr.getInput());
        ArrayRef<int64_t> perm = tr.getPermutation();
        axis[tr.getResult()] = llvm::find(perm, a) - perm.begin();
        continue;
      }
      if (auto sp = dyn_cast<SplitOp>(op)) {
        int64_t a = axis.lookup(sp.getInput());
        if (a == sp.getAxis())
          for (int64_t n : sp.getSizes())
            if (n % size)
              return fail("a piece of " + Twine(n) + " along the split dim is not "
                          "divisible by the tensor-parallel size " + Twine(static_cast<int64_t>(size)));
        for (Value r : sp.getResults())
          axis[r] = a;
        continue;
      }
      if (auto rot = dyn_cast<RotaryOp>(op)) {
        int64_t a = axis.lookup(rot.getInput());
        if (axis.count(rot.getCos()) || axis.count(rot.getSin()))
          return fail("rotary tables cannot be split");
        auto ct = tensorType(rot.getCos());
        int64_t d = a - (tensorType(rot.getInput()).getRank() - ct.getRank());
        if (a == tensorType(rot.getInput()).getRank() - 1 || (d >= 0 && ct.getDimSize(d) != 1))
          return fail("rotates along the split dim");
        axis[rot.getResult()] = a;
        continue;
      }
      if (isa<RmsNormOp, LayerNormOp>(op)) {
        // A norm over each head's dims (Qwen3's QK norm) runs on every rank's
        // own heads; one over the whole split dim (OLMo 2's) needs every rank's.
        int64_t a = axis.lookup(op.getOperand(0));
        if (!axis.count(op.getOperand(0)) ||
            llvm::any_of(op.getOperands().drop_front(), [&](Value w) { return axis.count(w); }))
          return fail("a norm's parameters cannot be split");
        if (a == tensorType(op.getOperand(0)).getRank() - 1)
          return fail("normalizes over the split dim (a QK norm over all heads): every "
                      "rank would need the whole row");
        axis[op.getResult(0)] = a;
        continue;
      }
      if (auto att = dyn_cast<AttentionOp>(op)) {
        for (Value v : {att.getQuery(), att.getKey(), att.getValue()})
          if (axis.lookup(v) != 1 || !axis.count(v))
            return fail("query, key and value must all be split on the heads dim");
        if (Value m = att.getMask()) {
          auto mt = tensorType(m);
          int64_t d = 1 - (4 - mt.getRank());
          if (axis.count(m) || (d >= 0 && mt.getDimSize(d) != 1))
            return fail("a per-head mask cannot follow the heads' split");
        }
        axis[att.getResult()] = 1;
        continue;
      }
      if (isa<ScalarOpInterface, SwigluOp, DropoutOp, CastOp>(op) && op.getNumResults() == 1) {
        if (failed(elementwise(&op)))
          return failure();
        continue;
      }
      if (auto sl = dyn_cast<SliceOp>(op)) {
        // The shifted loss's logits[:, :-1]: a slice that keeps the split dim whole.
        int64_t a = axis.lookup(sl.getInput());
        int64_t n = tensorType(sl.getInput()).getDimSize(a);
        if (sl.getStarts()[a] != 0 || sl.getSteps()[a] != 1 || sl.getEnds()[a] < n)
          return fail("slices the split dim");
        axis[sl.getResult()] = a;
        continue;
      }
      if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
        if (llvm::none_of(losses, [&](auto &l) { return l.first == ce; }) ||
            axis.count(ce.getLabels()) || axis.lookup(ce.getLogits()) != 1)
          return fail("reads logits split over the tensor-parallel group, but not as the "
                      "vocabulary-parallel loss of its LM head");
        continue; // Rewritten into the vocabulary-parallel loss.
      }
      if (isa<func::ReturnOp>(op)) {
        // The logits output of a vocabulary-parallel head is never gathered
        // (that would cost each rank the whole [tokens, vocab] tensor the
        // layout exists to avoid): each rank returns its own columns as
        // "vocab_parallel_logits", which sampling gathers for one position;
        // logits split on another dim are dropped.
        for (OpOperand &r : op.getOpOperands()) {
          if (!axis.count(r.get()))
            continue;
          auto name = fn.getResultAttrOfType<StringAttr>(r.getOperandNumber(), "mlc.output");
          if (heads.empty() || !name || name.getValue() != "logits")
            return fail("returns a value that only part of the tensor-parallel group holds");
          if (axis.lookup(r.get()) == tensorType(r.get()).getRank() - 1)
            vocabShardResults.push_back(r.getOperandNumber());
          else
            droppedResults.push_back(r.getOperandNumber());
        }
        continue;
      }
      return fail("reads a value split over the tensor-parallel group, and mlc "
                  "cannot split or gather it here");
    }
    return success();
  }

  /// A split parameter must be read only where its shard is meant (a tied
  /// projection elsewhere would read a shard as if it were whole).
  LogicalResult checkParams() {
    for (auto [p, dim] : paramDim)
      for (OpOperand &use : p.getUses())
        if (!shardedUses.count(&use))
          return use.getOwner()->emitOpError("mlc-shard-tensor-parallel: reads parameter '")
                 << paramName(fn, p)
                 << "' whole, but a tensor-parallel projection splits it (dim " << dim << ")";
    return success();
  }

  static RankedTensorType shrink(RankedTensorType t, int64_t dim, int64_t by) {
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] /= by;
    return RankedTensorType::get(shape, t.getElementType(), t.getEncoding());
  }

  /// The blocks of a column-parallel weight's output dim: the pieces of a
  /// split of its (bias-added) result along that dim, else the whole dim.
  SmallVector<int64_t> blocks(MatmulOp mm) {
    Value v = mm.getResult();
    int64_t last = tensorType(v).getRank() - 1;
    while (v.hasOneUse()) {
      Operation *user = *v.getUsers().begin();
      if (auto sp = dyn_cast<SplitOp>(user))
        return sp.getAxis() == last ? SmallVector<int64_t>(sp.getSizes())
                                    : SmallVector<int64_t>{tensorType(v).getShape().back()};
      if (!isa<AddOp, CastOp>(user))
        break;
      v = user->getResult(0);
    }
    return {tensorType(mm.getResult()).getShape().back()};
  }

  void rewrite() {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    // Which blocks each split parameter is cut into (before sizes change).
    llvm::DenseMap<BlockArgument, SmallVector<int64_t>> paramBlocks;
    for (MatmulOp mm : seeds) {
      SmallVector<int64_t> bl = blocks(mm);
      paramBlocks[cast<BlockArgument>(mm.getRhs())] = bl;
      Value v = mm.getResult();
      if (Value bias = mm.getBias())
        paramBlocks[cast<BlockArgument>(bias)] = bl;
      // A bias added by mlc.add on the way to the split has the same blocks.
      while (v.hasOneUse() && isa<AddOp, CastOp>(*v.getUsers().begin())) {
        Operation *user = *v.getUsers().begin();
        for (Value o : user->getOperands())
          if (BlockArgument p = asParam(fn, o); p && paramDim.count(p))
            paramBlocks[p] = bl;
        v = user->getResult(0);
      }
    }
    for (auto [p, dim] : paramDim)
      if (!paramBlocks.count(p))
        paramBlocks[p] = {tensorType(p).getDimSize(dim)};

    // f: one tp_copy per replicated input of the column-parallel projections.
    llvm::DenseMap<Value, Value> copies;
    for (MatmulOp mm : seeds) {
      Value x = mm.getLhs();
      Value &copy = copies[x];
      if (!copy) {
        if (Operation *def = x.getDefiningOp())
          b.setInsertionPointAfter(def);
        else
          b.setInsertionPointToStart(&fn.getBody().front());
        copy = b.create<TpCopyOp>(mm.getLoc(), x);
        regionEntries.push_back(cast<TpCopyOp>(copy.getDefiningOp()));
      }
      mm.getLhsMutable().assign(copy);
    }

    // g: the row-parallel partial sums are reduced, then the bias is added once.
    for (MatmulOp mm : rows) {
      b.setInsertionPointAfter(mm);
      Value bias = mm.getBias();
      if (bias)
        mm.getBiasMutable().clear();
      auto reduce = b.create<TpReduceOp>(mm.getLoc(), mm.getType(), TpReduceKind::sum,
                                         mm.getResult());
      regionExits.push_back(reduce);
      Value sum = reduce;
      Value out = bias ? b.create<AddOp>(mm.getLoc(), sum, bias).getResult() : sum;
      mm.getResult().replaceAllUsesExcept(out, sum.getDefiningOp());
    }

    // The shards' types, the splits' sizes, the parameters.
    for (auto [v, a] : axis)
      v.setType(shrink(tensorType(v), a, size));
    fn.walk([&](SplitOp sp) {
      if (axis.count(sp.getInput()) && axis.lookup(sp.getInput()) == sp.getAxis()) {
        SmallVector<int64_t> sizes(sp.getSizes());
        for (int64_t &n : sizes)
          n /= size;
        sp.setSizes(sizes);
      }
    });
    fn.walk([&](SliceOp sl) {
      if (!axis.count(sl.getInput()))
        return;
      int64_t a = axis.lookup(sl.getInput());
      SmallVector<int64_t> ends(sl.getEnds());
      ends[a] = tensorType(sl.getInput()).getDimSize(a);
      sl.setEnds(ends);
    });
    Builder ab(ctx);
    for (auto [p, dim] : paramDim) {
      p.setType(shrink(tensorType(p), dim, size));
      fn.setArgAttr(p.getArgNumber(), "mlc.tp_split",
                    ab.getDictionaryAttr({ab.getNamedAttr("dim", ab.getI64IntegerAttr(dim)),
                                          ab.getNamedAttr("blocks", ab.getDenseI64ArrayAttr(
                                                                        paramBlocks[p]))}));
    }

    // The vocabulary-parallel lookups and losses, from this rank's offset.
    if (!lookups.empty() || !losses.empty()) {
      Value rank = rankArgument();
      llvm::DenseMap<std::pair<Type, int64_t>, Value> offsets;
      auto offsetFor = [&](Value ids, int64_t vocab) {
        Value &offset = offsets[{tensorType(ids).getElementType(), vocab / size}];
        if (!offset) {
          b.setInsertionPointToStart(&fn.getBody().front());
          offset = vocabOffset(b, fn.getLoc(), rank, vocab / size, tensorType(ids).getElementType());
        }
        return offset;
      };
      for (auto [lookup, v] : lookups)
        buildVocabParallelEmbedding(b, lookup, offsetFor(lookup.getIndices(), v), v);
      for (auto [ce, v] : losses)
        buildVocabParallelCrossEntropy(b, ce, offsetFor(ce.getLabels(), v), v);
    }
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    for (unsigned i : vocabShardResults)
      fn.setResultAttr(i, "mlc.output", StringAttr::get(ctx, "vocab_parallel_logits"));
    for (unsigned i : llvm::reverse(droppedResults)) {
      ret->eraseOperand(i);
      fn.eraseResult(i);
    }
    // The kept shards' types shrank with their values.
    fn.setFunctionType(FunctionType::get(ctx, fn.getBody().front().getArgumentTypes(),
                                         ret->getOperandTypes()));
  }
};

} // namespace
