//===- Progress.cpp - what a training run reports --------------------------===//
//
// MFU and throughput (each step's model FLOPs against the peak, the time
// blocked on gradient sums, MLC_PROFILE's time per kernel), and the
// console: the progress line and the lines around it. The log of every
// step (--log-json, TensorBoard) is RunLog.cpp's.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "runtime/train/TrainerParts.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace mlc::rt {

/// FLOPs of one @train_step's GEMMs (2 m n k per product; the token count
/// where a dimension is dynamic): the numerator of MFU.
double stepFlops(const Package &pkg, int64_t tokens) {
  double flops = 0;
  for (const StepDecl &s : pkg.function(kTrainStepFn).steps) {
    if (s.kind != StepDecl::Gemm)
      continue;
    double batches = 1;
    for (int64_t d : s.batch)
      batches *= double(d);
    double m = s.m < 0 ? double(tokens) : double(s.m), k = s.k < 0 ? double(tokens) : double(s.k);
    flops += 2.0 * m * double(s.n) * k * batches;
  }
  return flops;
}

MfuMeter::MfuMeter(Backend &backend, const TrainOptions &o) {
  peak_ = o.peakTflops > 0 ? PeakRate{o.peakTflops * 1e12, "given by --peak-tflops"}
                           : backend.peakRate();
  if (o.quiet)
    return;
  if (peak_.flops > 0)
    fprintf(stderr, "mlc: MFU against a peak of %.4g TFLOP/s (%s%s)\n", peak_.flops / 1e12,
            peak_.basis.c_str(), o.peakTflops > 0 ? "" : "; --peak-tflops to override");
  else
    fprintf(stderr, "mlc: no MFU: the %s device does not tell its peak (give --peak-tflops)\n",
            backend.name().c_str());
}

double MfuMeter::measure(int64_t step, double flops, double seconds, std::string &warning) {
  if (!(peak_.flops > 0))
    return NAN;
  const double rate = flops / seconds, mfu = rate / peak_.flops;
  if (mfu > 1 && !warned_) {
    warned_ = true;
    char text[400];
    std::snprintf(text, sizeof text,
                  "mlc: warning: step %lld ran %.4g TFLOP/s of model FLOPs, above the peak "
                  "of %.4g TFLOP/s (%s): that peak is too low; MFU is reported as "
                  "measured (%.2f)\n",
                  (long long)step, rate / 1e12, peak_.flops / 1e12, peak_.basis.c_str(), mfu);
    warning = text;
  }
  return mfu;
}

void Throughput::startMfu(Backend &backend, const TrainOptions &o) {
  mfu_ = std::make_unique<MfuMeter>(backend, o);
  for (const InputInfo &in : backend.package().inputs)
    if (in.name == "input_ids")
      tokenInput_ = in.dynamic() ? -1 : in.numel;
}

double Throughput::waitedSinceLast(const Backend &backend) {
  const double waited = backend.profile.commWaitSeconds - waitedBefore_;
  waitedBefore_ = backend.profile.commWaitSeconds;
  return waited;
}

double Throughput::measure(const Package &pkg, int64_t t, int64_t first, int64_t micro,
                           const StepTotals &step, double ms, std::string &warning) {
  // This rank's model FLOPs: its micro-batches' tokens (unpadded batches vary).
  double flops = 0;
  for (int64_t j = 0; j < micro; ++j)
    flops += stepFlops(pkg, tokenInput_ < 0 ? step.localTokens / micro : tokenInput_);
  const double mfu = mfu_->measure(t, flops, ms / 1000.0, warning);
  if (t > first) { // the first step warms caches up
    waitedTotal_ += step.waited;
    stepSecondsTotal_ += ms / 1000.0;
    ++timedSteps_;
  }
  return mfu;
}

/// MLC_PROFILE: the training inputs drawn (each micro-batch's once a
/// step) and the host time spent drawing them.
void Throughput::countDraws(BatchFn &train) {
  train = [this, draw = train](const InputInfo &in, int64_t block) {
    const auto start = std::chrono::steady_clock::now();
    HostTensor tensor = draw(in, block);
    drawSeconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++tensorsDrawn_;
    return tensor;
  };
}

void Throughput::printCommunication(int ranks, int buckets) const {
  if (timedSteps_ > 0)
    fprintf(stderr, "mlc: %d ranks, %d gradient buckets: %.2f ms/step blocked waiting for "
                    "gradient sums (exposed communication %.1f%% of the step)\n",
            ranks, buckets, 1e3 * waitedTotal_ / double(timedSteps_),
            100.0 * waitedTotal_ / std::max(stepSecondsTotal_, 1e-12));
}

void Throughput::printProfile(const BackendProfile &prof, int64_t steps) const {
  if (!prof.enabled)
    return;
  fprintf(stderr, "mlc profile: %lld steps, GEMMs %.1f ms/step, kernels %.1f ms/step\n",
          (long long)steps, 1e3 * prof.gemmSeconds / steps, 1e3 * prof.kernelSeconds / steps);
  fprintf(stderr, "mlc profile: batches %.2f ms/step, %lld input tensors drawn\n",
          1e3 * drawSeconds_ / steps, (long long)tensorsDrawn_);
  std::vector<std::pair<double, std::string>> top;
  for (auto &[name, sec] : prof.secondsByKernel)
    top.push_back({sec, name});
  std::sort(top.rbegin(), top.rend());
  const char *mode = std::getenv("MLC_PROFILE");
  const size_t rows = mode && std::string(mode) == "all" ? top.size() : 12;
  for (size_t i = 0; i < top.size() && i < rows; ++i)
    fprintf(stderr, "mlc profile:   %-24s %8.2f ms/step\n", top[i].second.c_str(),
            1e3 * top[i].first / steps);
}

namespace {

/// "1h02m", "3m05s", "12s".
std::string duration(double seconds) {
  char buf[32];
  int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  return buf;
}

} // namespace

Console::Console(const TrainOptions &o) {
  live = o.progress == "live" || (o.progress == "auto" && isatty(2));
  clear = live ? "\r\033[K" : "";
}

void Console::announceBatch(const TrainOptions &o, const TrainOptions &given,
                            const BatchLayout &layout, int ranks) const {
  if (o.quiet || layout.global == 0 ||
      !(layout.micro > 1 || ranks > 1 || given.globalBatch > 0))
    return;
  if (ranks > 1)
    fprintf(stderr, "mlc: global batch %lld = %d ranks x %lld micro-batches x %lld sequences\n",
            (long long)layout.global, ranks, (long long)layout.micro,
            (long long)layout.sequences);
  else
    fprintf(stderr, "mlc: global batch %lld = %lld micro-batches of %lld sequences\n",
            (long long)layout.global, (long long)layout.micro, (long long)layout.sequences);
}

/// The step's progress line: one updating line on a terminal (--progress
/// live), a line per --log-every steps otherwise.
void Console::printProgress(const TrainOptions &o, int64_t t, int64_t first,
                            const StepTotals &step, double norm, double lr, double ms,
                            double mfu) {
  const double tps = step.tokens / (ms / 1000.0);
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - runStart_).count();
  double eta = elapsed / double(t - first + 1) * double(o.steps - t);
  char mfuText[64] = "";
  if (std::isfinite(mfu))
    std::snprintf(mfuText, sizeof mfuText, " | MFU %4.1f%%", 100 * mfu);
  if (step.imbalance > 0) // unpadded BERT over ranks: max / mean tokens
    std::snprintf(mfuText + std::strlen(mfuText), sizeof mfuText - std::strlen(mfuText),
                  " | imbalance %.3f", step.imbalance);
  line.open = false;
  fprintf(stderr,
          "%sstep %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %7.1f ms | %8.0f "
          "tok/s%s | %s elapsed, ETA %s%s",
          clear, (long long)t, (long long)o.steps, step.loss, lr, norm, ms, tps, mfuText,
          duration(elapsed).c_str(), duration(eta).c_str(), live && t < o.steps ? "" : "\n");
  std::fflush(stderr);
  line.open = live && t < o.steps;
}

} // namespace mlc::rt
