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
    if (!step.getBody().front().getOps<AllReduceStartOp>().empty())
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
      if (!isa<LaunchOp, GemmOp>(op))
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
    for (size_t t = buckets.size(); t-- > 0;) {
      const Bucket &b = buckets[t];
      if (b.after)
        builder.setInsertionPointAfter(b.after);
      else
        builder.setInsertionPointAfter(grads.getDefiningOp());
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
    for (size_t t = 0; t < buckets.size(); ++t)
      builder.create<AllReduceWaitOp>(step.getLoc(), int64_t(t));
    numBuckets = buckets.size();
  }

private:
  llvm::DenseMap<Operation *, int64_t> positions;
};

} // namespace
