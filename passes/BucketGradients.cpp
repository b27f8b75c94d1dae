//===- BucketGradients.cpp - the mlc-bucket-gradients pass -------------------===//
//
// Data parallelism over the plan: @train_step's gradients are summed over the
// ranks in buckets, each bucket's all-reduce starting as soon as backward has
// written the last of its gradients, so that communication overlaps the rest
// of backward (PyTorch DDP's buckets, Megatron's overlapped grad reduce).
//
// The flat gradient buffer is laid out in the order backward finishes the
// gradients (plan.param order), so a bucket is a contiguous slice of it:
// parameters are taken in layout order until the bucket would pass its cap
// (`first-bucket-mb` for the first, which starts the earliest, `cap-mb` for
// the others; a parameter larger than the cap is a bucket of its own). A
// bucket's `plan.all_reduce_start` goes right after the last step that reads
// or writes any of its gradients (a tied weight's gradient is complete only
// after its last use); every `plan.all_reduce_wait` goes at the end of
// @train_step, as late as they can be: the first reads of the summed
// gradients are @grad_norm's and @optimizer's, which run after it.
//
// The distributed optimizer (`distributed-optimizer`, Megatron's
// --use-distributed-optimizer, ZeRO-1) keeps the same buckets and places,
// but each bucket is reduce-scattered: rank r of R keeps the sum of
// elements [floor(r c / R), floor((r + 1) c / R)) of a bucket of c (the
// layout rule: shards of a bucket differ by at most one element, so the
// flat buffers need no padding; the runtime holds the AdamW moments of its
// shards only, bucket after bucket). Then:
//   - @grad_norm's norm kernel runs over this rank's shards (`shard = -1`)
//     and plan.all_reduce_norm sums the squares over the ranks;
//   - @optimizer's fused AdamW runs once per bucket over this rank's shard
//     (`shard = tag`), and right after it the bucket's updated parameters
//     start their all-gather (Megatron's overlapped param gather: bucket b's
//     gather runs while the later buckets are updated); the waits close
//     @optimizer, before anything reads the parameters again.
// Bucket-wise clipping is unchanged: it scales this rank's whole bucket by
// its own norm before the collective starts, which needs no other rank.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace mlc {
#define GEN_PASS_DEF_MLCBUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace mlc

using namespace mlir;
using namespace mlc::plan;

namespace {

struct Param {
  std::string name;
  int64_t offset = 0, numel = 0;
};

/// The plan.bind a buffer is (a view of), or null.
BindOp rootBind(Value buffer) {
  while (auto view = buffer.getDefiningOp<ViewOp>())
    buffer = view.getSource();
  return buffer.getDefiningOp<BindOp>();
}

class BucketGradientsPass : public mlc::impl::MlcBucketGradientsBase<BucketGradientsPass> {
public:
  using MlcBucketGradientsBase::MlcBucketGradientsBase;

  void runOnOperation() final {
    ModuleOp module = getOperation();
    if (clip != "global" && clip != "bucket" && clip != "none") {
      module.emitError("mlc-bucket-gradients: clip must be global, bucket or none, got '")
          << clip << "'";
      return signalPassFailure();
    }
    const bool clipBuckets = clip == "bucket";
    if (ranks <= 1 && !clipBuckets)
      return; // one rank: nothing to sum
    if (!(capMb > 0) || !(firstBucketMb > 0)) {
      module.emitError("mlc-bucket-gradients: cap-mb and first-bucket-mb must be positive");
      return signalPassFailure();
    }
    FuncOp step;
    for (FuncOp fn : module.getOps<FuncOp>())
      if (fn.getSymName() == mlc::kTrainStepFn)
        step = fn;
    if (!step)
      return; // an inference package has no gradients
    if (!step.getBody().front().getOps<AllReduceStartOp>().empty() ||
        !step.getBody().front().getOps<ReduceScatterStartOp>().empty())
      return; // already bucketed

    std::vector<Param> params;
    std::map<std::string, size_t> index;
    int64_t total = 0, elementBytes = 4;
    Type element;
    for (ParamOp p : module.getOps<ParamOp>()) {
      int64_t n = 1;
      for (int64_t d : p.getShape())
        n *= d;
      index[p.getSymName().str()] = params.size();
      params.push_back({p.getSymName().str(), total, n});
      total += n;
      element = p.getElement();
      elementBytes = mlc::plan::elementBytes(element);
    }
    if (params.empty())
      return;

    // The last step that touches each parameter's gradient.
    Block &body = step.getBody().front();
    std::vector<Operation *> lastTouch(params.size(), nullptr);
    for (Operation &op : body) {
      // The tensor-parallel collectives write gradients too: a replicated
      // parameter read in the sequence-parallel stream has its gradient
      // summed over the group by a plan.tp_all_reduce, in place.
      if (!isa<LaunchOp, GemmOp, TpAllReduceOp, TpAllGatherOp, TpReduceScatterOp>(op))
        continue;
      for (Value v : op.getOperands()) {
        BindOp bind = rootBind(v);
        if (!bind || bind.getKind() != BufferKind::grad)
          continue;
        if (bind.getName() == "*") {
          std::fill(lastTouch.begin(), lastTouch.end(), &op);
        } else if (auto it = index.find(bind.getName().str()); it != index.end()) {
          lastTouch[it->second] = &op;
        }
      }
    }

    // Buckets in layout order.
    struct Bucket {
      int64_t offset = 0, count = 0;
      Operation *after = nullptr; // the last step touching it (null: none)
    };
    std::vector<Bucket> buckets;
    auto position = [&](Operation *op) { return op ? int64_t(positions.lookup(op)) : -1; };
    positions.clear();
    int64_t pos = 0;
    for (Operation &op : body)
      positions[&op] = pos++;
    for (size_t i = 0; i < params.size(); ++i) {
      double cap = (buckets.size() <= 1 ? firstBucketMb : capMb) * 1e6;
      if (buckets.empty())
        buckets.push_back({params[i].offset, 0, nullptr});
      Bucket *b = &buckets.back();
      if (b->count > 0 && double(b->count + params[i].numel) * elementBytes > cap) {
        buckets.push_back({params[i].offset, 0, nullptr});
        b = &buckets.back();
      }
      b->count += params[i].numel;
      if (position(lastTouch[i]) > position(b->after))
        b->after = lastTouch[i];
    }

    OpBuilder builder(step.getContext());
    builder.setInsertionPointToStart(&body);
    auto gradType = MemRefType::get({total}, element);
    Value grads = builder.create<BindOp>(step.getLoc(), gradType, BufferKind::grad,
                                         builder.getStringAttr("*"));
    // Starts after their buckets' last steps (buckets that end at the same
    // step start in layout order); a bucket no step touches starts first.
    const bool shard = distributedOptimizer && ranks > 1;
    for (size_t t = buckets.size(); t-- > 0;) {
      const Bucket &b = buckets[t];
      if (b.after)
        builder.setInsertionPointAfter(b.after);
      else
        builder.setInsertionPointAfter(grads.getDefiningOp());
      if (shard) {
        auto start = builder.create<ReduceScatterStartOp>(step.getLoc(), grads, b.offset,
                                                          b.count, int64_t(t));
        if (clipBuckets)
          start.setClip(true);
        continue;
      }
      auto start =
          builder.create<AllReduceStartOp>(step.getLoc(), grads, b.offset, b.count, int64_t(t));
      if (clipBuckets)
        start.setClip(true);
    }
    // Waits at the end, before the outputs.
    Operation *end = nullptr;
    for (Operation &op : body)
      if (isa<OutputOp>(op) && !end)
        end = &op;
    if (end)
      builder.setInsertionPoint(end);
    else
      builder.setInsertionPointToEnd(&body);
    for (size_t t = 0; t < buckets.size(); ++t) {
      if (shard)
        builder.create<ReduceScatterWaitOp>(step.getLoc(), int64_t(t));
      else
        builder.create<AllReduceWaitOp>(step.getLoc(), int64_t(t));
    }
    numBuckets = buckets.size();
    if (!shard)
      return;
    std::vector<std::pair<int64_t, int64_t>> slices;
    for (const Bucket &b : buckets)
      slices.push_back({b.offset, b.count});
    if (failed(shardNorm(module)) || failed(shardOptimizer(module, slices)))
      return signalPassFailure();
  }

  /// @grad_norm: its norm kernel over this rank's shards, then the sum of
  /// the squares over the ranks.
  LogicalResult shardNorm(ModuleOp module) {
    FuncOp fn = lookup(module, mlc::kGradNormFn);
    if (!fn)
      return success(); // no gradient norm (no clipping asked for it)
    LaunchOp norm;
    for (LaunchOp launch : fn.getBody().front().getOps<LaunchOp>()) {
      if (norm)
        return launch.emitOpError("mlc-bucket-gradients: @grad_norm has more than one launch; "
                                  "the distributed optimizer shards one norm kernel");
      norm = launch;
    }
    if (!norm || norm.getOperands().size() != 2 || !isWholeGrad(norm.getOperand(1)))
      return fn.emitOpError("mlc-bucket-gradients: @grad_norm is not one norm kernel over "
                            "the whole gradient buffer; cannot shard it");
    norm.setShardAttr(IntegerAttr::get(IntegerType::get(module.getContext(), 64), -1));
    OpBuilder builder(norm);
    builder.setInsertionPointAfter(norm);
    builder.create<AllReduceNormOp>(norm.getLoc(), norm.getOperand(0));
    return success();
  }

  /// @optimizer: one launch of the fused AdamW per bucket, over this
  /// rank's shard of it, each followed by the bucket's all-gather; the
  /// waits at the end.
  LogicalResult shardOptimizer(ModuleOp module,
                               const std::vector<std::pair<int64_t, int64_t>> &buckets) {
    FuncOp fn = lookup(module, mlc::kOptimizerFn);
    if (!fn)
      return module.emitError("mlc-bucket-gradients: the distributed optimizer needs an "
                              "@optimizer function");
    LaunchOp update;
    for (LaunchOp launch : fn.getBody().front().getOps<LaunchOp>()) {
      if (update)
        return launch.emitOpError("mlc-bucket-gradients: @optimizer has more than one launch; "
                                  "the distributed optimizer shards one fused update");
      update = launch;
    }
    if (!update || update.getOperands().empty())
      return fn.emitOpError("mlc-bucket-gradients: @optimizer launches no update");
    Value params = update.getOperand(0);
    auto bind = params.getDefiningOp<BindOp>();
    if (!bind || bind.getKind() != BufferKind::param || bind.getName() != "*")
      return update.emitOpError("mlc-bucket-gradients: the update's first buffer is not the "
                                "whole parameter buffer");
    OpBuilder builder(update);
    auto i64 = IntegerType::get(module.getContext(), 64);
    for (size_t t = 0; t < buckets.size(); ++t) {
      auto launch = cast<LaunchOp>(builder.clone(*update));
      launch.setShardAttr(IntegerAttr::get(i64, int64_t(t)));
      builder.create<AllGatherStartOp>(update.getLoc(), params, buckets[t].first,
                                       buckets[t].second, int64_t(t));
    }
    for (size_t t = 0; t < buckets.size(); ++t)
      builder.create<AllGatherWaitOp>(update.getLoc(), int64_t(t));
    update.erase();
    return success();
  }

  static FuncOp lookup(ModuleOp module, StringRef name) {
    for (FuncOp fn : module.getOps<FuncOp>())
      if (fn.getSymName() == name)
        return fn;
    return {};
  }
  static bool isWholeGrad(Value v) {
    auto bind = v.getDefiningOp<BindOp>();
    return bind && bind.getKind() == BufferKind::grad && bind.getName() == "*";
  }

private:
  llvm::DenseMap<Operation *, int64_t> positions;
};

} // namespace
