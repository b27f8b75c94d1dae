//===- Update.cpp - the update: its schedule, scalars and guard ------------===//
//
// Each step's update is AdamW at the scheduled learning rate (warmup, then
// constant or cosine; scaled to the global batch with --lr-scaling), its
// scalars computed here for the compiled @optimizer, which runs under a
// guard that never lets it make the parameters non-finite.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"
#include "contract/OptimizerScalars.h"
#include "contract/StepFunctions.h"
#include "runtime/train/RunLog.h"
#include "runtime/train/TrainerParts.h"
#include "support/Error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace mlc::rt {

double learningRate(const TrainOptions &o, int64_t step) {
  if (o.warmup > 0 && step <= o.warmup)
    return o.lr * double(step) / double(o.warmup);
  if (o.schedule == "constant")
    return o.lr;
  // The first step after warmup runs at the peak; the decay reaches min-lr
  // one step after the last, so no step is wasted at the floor.
  double span = double(std::max<int64_t>(1, o.steps - o.warmup));
  double progress = std::min(1.0, double(step - o.warmup - 1) / span);
  return o.minLr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (o.lr - o.minLr);
}

std::vector<double> adamwScalars(const TrainOptions &o, double lr, int64_t t, double scale) {
  std::vector<double> h(kAdamWScalarCount);
  const double bc1 = 1 - std::pow(o.beta1, double(t)), bc2 = 1 - std::pow(o.beta2, double(t));
  h[kScale] = scale;
  h[kStepSize] = lr / bc1;
  h[kInvSqrtBc2] = 1.0 / std::sqrt(bc2);
  h[kBeta1] = o.beta1;
  h[kOneMinusBeta1] = 1 - o.beta1;
  h[kBeta2] = o.beta2;
  h[kOneMinusBeta2] = 1 - o.beta2;
  h[kEps] = o.eps;
  h[kDecay] = 1.0 - lr * o.weightDecay;
  return h;
}

TrainOptions scaledSchedule(const TrainOptions &o, int64_t globalBatch) {
  TrainOptions sched = o;
  if (o.lrScaling == "none")
    return sched;
  if (globalBatch == 0)
    fail("--lr-scaling needs a model with input_ids [batch, ...] (its global batch)");
  double ratio = double(globalBatch) / double(o.baseBatch);
  double factor = o.lrScaling == "linear" ? ratio : std::sqrt(ratio);
  sched.lr = o.lr * factor;
  sched.minLr = o.minLr * factor;
  if (!o.quiet)
    fprintf(stderr, "mlc: learning rate %g (--lr %g x %g, %s scaling from batch %lld to "
                    "%lld)\n",
            sched.lr, o.lr, factor, o.lrScaling.c_str(), (long long)o.baseBatch,
            (long long)globalBatch);
  return sched;
}

UpdateGuard::UpdateGuard(Backend &backend) {
  limit = 0.25 * (backend.elementSize() == 4 ? double(std::numeric_limits<float>::max())
                                             : std::numeric_limits<double>::max());
  double bounds[] = {maxAbs(backend, FlatBuffer::Params),
                     maxAbs(backend, FlatBuffer::AdamM)}; // nonzero after a resume
  maxOverRanks(backend, bounds, 2);
  pBound = bounds[0];
  mBound = bounds[1];
}

void UpdateGuard::update(Backend &backend, const std::vector<double> &h, double gradBound,
                         int64_t t, const TrainOptions &o) {
  double m = std::max(mBound, gradBound) * 1.01;
  double p = pBound * std::fabs(h[kDecay]) + h[kStepSize] * m / h[kEps] * 1.01;
  if (std::isfinite(p) && p < limit && m < limit) {
    backend.run(kOptimizerFn, t);
    pBound = p;
    mBound = m;
    return;
  }
  std::vector<char> params = downloadAll(backend, FlatBuffer::Params),
                    m1 = downloadAll(backend, FlatBuffer::AdamM),
                    m2 = downloadAll(backend, FlatBuffer::AdamV);
  backend.run(kOptimizerFn, t);
  double bounds[] = {maxAbs(backend, FlatBuffer::Params), maxAbs(backend, FlatBuffer::AdamM),
                     maxAbs(backend, FlatBuffer::AdamV)};
  maxOverRanks(backend, bounds, 3);
  pBound = bounds[0];
  mBound = bounds[1];
  if (std::isfinite(pBound) && std::isfinite(mBound) && std::isfinite(bounds[2]))
    return;
  uploadAll(backend, FlatBuffer::Params, params);
  uploadAll(backend, FlatBuffer::AdamM, m1);
  uploadAll(backend, FlatBuffer::AdamV, m2);
  std::string kept = keepParameters(backend, o);
  // Every rank stops here (the bounds above are every rank's): none ends
  // the run, and the others with it, while the one that writes --save
  // (the first rank of the first tensor-parallel group) still writes.
  for (Communicator *group : {backend.tensorParallel(), backend.communicator()}) {
    if (!group || group->size() <= 1)
      continue;
    try {
      group->barrier();
    } catch (const Error &) {
    }
  }
  fail("the update at step " + std::to_string(t) + " would make the parameters or the AdamW "
       "moments non-finite (learning rate " +
       jsonNumber(h[kStepSize] * (1 - std::pow(o.beta1, double(t)))) + "); it was not applied" +
       kept);
}

void UpdateGuard::maxOverRanks(Backend &backend, double *values, int n) {
  // The ranks of a tensor-parallel group hold other slices: their bounds,
  // and so their paths through update(), agree by the group's maxima (a
  // rank that stops writes --save, which the whole group gathers).
  if (Communicator *tp = backend.tensorParallel(); tp && tp->size() > 1)
    tp->allReduce(values, n, /*f64=*/true, /*max=*/true);
  Communicator *comm = backend.communicator();
  if (!backend.sharded() || !comm || comm->size() <= 1)
    return;
  const int ranks = comm->size();
  std::vector<double> slots(size_t(n) * size_t(ranks), 0.0);
  for (int i = 0; i < n; ++i)
    slots[size_t(comm->rank()) * size_t(n) + size_t(i)] = values[i];
  comm->sum(slots.data(), int(slots.size()));
  for (int i = 0; i < n; ++i) {
    values[i] = 0;
    for (int r = 0; r < ranks; ++r)
      values[i] = std::max(values[i], slots[size_t(r) * size_t(n) + size_t(i)]);
  }
}

double UpdateGuard::maxAbs(Backend &backend, FlatBuffer which) {
  std::vector<char> flat = downloadAll(backend, which);
  double m = 0;
  if (backend.elementSize() == 4) {
    const float *x = reinterpret_cast<const float *>(flat.data());
    for (size_t i = 0; i < flat.size() / 4; ++i)
      m = std::isfinite(x[i]) ? std::max(m, double(std::fabs(x[i])))
                              : std::numeric_limits<double>::infinity();
  } else {
    const double *x = reinterpret_cast<const double *>(flat.data());
    for (size_t i = 0; i < flat.size() / 8; ++i)
      m = std::isfinite(x[i]) ? std::max(m, std::fabs(x[i]))
                              : std::numeric_limits<double>::infinity();
  }
  return m;
}

} // namespace mlc::rt
