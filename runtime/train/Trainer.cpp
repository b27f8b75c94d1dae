//===- Trainer.cpp - the training loop -------------------------------------===//

#include "runtime/train/Trainer.h"
#include "support/Error.h"
#include "contract/DeviceMemory.h"
#include "contract/OptimizerScalars.h"
#include "contract/StepFunctions.h"
#include "runtime/train/BatchDump.h"
#include "runtime/train/BatchSources.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Generate.h"
#include "runtime/train/ModelDirectory.h"
#include "runtime/train/RunLog.h"
#include "runtime/train/TensorParallel.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <map>
#include <set>
#include <sstream>

namespace mlc::rt {

namespace {

template <typename T> T *as(char *p) { return reinterpret_cast<T *>(p); }

/// Writes `x` as element i of a flat buffer of `elementSize`-byte floats.
void store(std::vector<char> &flat, int64_t elementSize, int64_t i, double x) {
  if (elementSize == 4)
    as<float>(flat.data())[i] = float(x);
  else
    as<double>(flat.data())[i] = x;
}

} // namespace

void initializeParameters(Backend &backend, uint64_t seed) {
  if (backend.package().tensorParallel > 1)
    return initializeSlicedParameters(backend, seed); // drawn whole, then sliced
  const Package &pkg = backend.package();
  const int64_t es = backend.elementSize();
  std::vector<char> flat(pkg.paramCount * es);
  // An imported model's parameters start from its initializers, which the
  // compiler stored in the package.
  std::map<std::string, HostTensor> packaged;
  for (const ParamInfo &p : pkg.params)
    if (p.init == "package" && packaged.empty()) {
      packaged = readSafetensors(pkg.dir + "/weights.safetensors");
      break;
    }
  for (const ParamInfo &p : pkg.params) {
    std::mt19937_64 rng(nameSeed(seed, p.name));
    double std = 0, fill = 0;
    bool normal = false;
    if (p.init == "package") {
      auto it = packaged.find(p.name);
      if (it == packaged.end() || it->second.shape != p.shape)
        fail(pkg.dir + "/weights.safetensors: no tensor " + p.name + " " +
             shapeString(p.shape) + " (the package is damaged; compile it again)");
      for (int64_t i = 0; i < p.numel; ++i)
        store(flat, es, p.offset + i, it->second.getDouble(i));
      continue;
    }
    if (p.init.rfind("normal:", 0) == 0) {
      normal = true;
      std = std::stod(p.init.substr(7));
    } else if (p.init == "ones") {
      fill = 1;
    } else if (p.init != "zeros") {
      fail(pkg.dir + ": parameter " + p.name + " has unknown init '" + p.init + "'");
    }
    std::normal_distribution<double> dist(0.0, std);
    for (int64_t i = 0; i < p.numel; ++i)
      store(flat, es, p.offset + i, normal ? dist(rng) : fill);
  }
  uploadAll(backend, FlatBuffer::Params, flat);
}

static bool sameValues(const HostTensor &a, const HostTensor &b, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i)
    if (a.getDouble(i) != b.getDouble(i))
      return false;
  return true;
}

/// A value as a message shows it: -0.5, 1e-09, nan, inf.
static std::string valueText(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

void loadParameters(Backend &backend, const std::string &path) {
  const Package &pkg = backend.package();
  auto tensors = readModelWeights(path);
  sliceLoadedWeights(backend, tensors, path); // whole HF tensors -> this rank's slices
  std::string problems;
  // A tied parameter may be stored under any of its names (HF's own files
  // keep one of them); where several are stored, they must agree.
  auto aliasesOf = [&](const std::string &name) {
    auto a = pkg.aliases.find(name);
    return a == pkg.aliases.end() ? std::vector<std::string>{} : a->second;
  };
  auto isAlias = [&](const std::string &name) {
    for (auto &[param, names] : pkg.aliases)
      if (std::find(names.begin(), names.end(), name) != names.end())
        return true;
    return false;
  };
  std::map<std::string, const HostTensor *> source; // parameter -> its stored values
  for (const ParamInfo &p : pkg.params) {
    auto it = tensors.find(p.name);
    for (const std::string &alias : aliasesOf(p.name)) {
      auto other = tensors.find(alias);
      if (other == tensors.end())
        continue;
      if (it == tensors.end())
        it = other;
      else if (other->second.shape != it->second.shape ||
               !sameValues(other->second, it->second, it->second.numel()))
        problems += "\n  disagreeing: " + alias + " and " + it->first +
                    " (one tied parameter) hold different values";
    }
    if (it == tensors.end()) {
      problems += "\n  missing: " + p.name + " " + shapeString(p.shape);
      continue;
    }
    if (it->second.shape != p.shape)
      problems += "\n  mis-shaped: " + it->first + " is " + shapeString(it->second.shape) +
                  ", the model needs " + shapeString(p.shape);
    source[p.name] = &it->second;
  }
  for (auto &[name, t] : tensors)
    if (!pkg.param(name) && !isAlias(name))
      problems += "\n  unexpected: " + name + " " + shapeString(t.shape);
  if (!problems.empty())
    fail(path + ": weights do not match the model:" + problems);
  const int64_t es = backend.elementSize();
  std::vector<char> flat(pkg.paramCount * es);
  for (const ParamInfo &p : pkg.params) {
    const HostTensor &t = *source.at(p.name);
    for (int64_t i = 0; i < p.numel; ++i) {
      store(flat, es, p.offset + i, t.getDouble(i));
      // A NaN or infinity (or a value past the package's f32) would make
      // the first step's loss non-finite: refused where it comes from.
      if (!std::isfinite(es == 4 ? double(as<float>(flat.data())[p.offset + i])
                                 : as<double>(flat.data())[p.offset + i]))
        fail(path + ": " + p.name + " holds " + valueText(t.getDouble(i)) + " at index " +
             std::to_string(i) + (std::isfinite(t.getDouble(i)) ? ", past the package's " +
                                                                     pkg.dtype
                                                               : std::string()) +
             ": parameters must be finite");
    }
  }
  uploadAll(backend, FlatBuffer::Params, flat);
}

/// --memory-report: what the backend allocated, by item (contract/
/// DeviceMemory.h), and the total, as one JSON object.
void writeMemoryReport(const Backend &backend, const std::string &path) {
  std::string json = "{\"device\": " + jsonQuote(backend.name());
  int64_t total = 0;
  for (const char *item : memory::kItems) {
    auto it = backend.allocated().find(item);
    int64_t bytes = it == backend.allocated().end() ? 0 : it->second;
    json += ", \"" + std::string(item) + "\": " + std::to_string(bytes);
    total += bytes;
  }
  for (auto &[item, bytes] : backend.allocated())
    if (std::find_if(std::begin(memory::kItems), std::end(memory::kItems),
                     [&](const char *k) { return item == k; }) == std::end(memory::kItems))
      fail("internal: the backend allocated under an unknown item '" + item + "'");
  writeFileAtomically(path, json + ", \"total\": " + std::to_string(total) + "}\n");
}

void saveParameters(Backend &backend, const std::string &path) {
  // Whole HF tensors, gathered from the tensor-parallel group's slices.
  std::vector<char> flats = groupParameterFlats(backend);
  std::vector<std::pair<std::string, HostTensor>> out;
  for (const ParamInfo &p : backend.package().params) {
    HostTensor t = wholeParameter(backend, p, flats);
    // No file of weights that are not finite is written, under any label.
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.getDouble(i)))
        fail(path + " was not written: parameter " + p.name + " holds " +
             valueText(t.getDouble(i)) + " at index " + std::to_string(i));
    // Each alias of a tied parameter gets its own copy: safetensors files
    // hold no shared storage, and load_state_dict(strict=True) wants every
    // name the model has.
    if (auto a = backend.package().aliases.find(p.name); a != backend.package().aliases.end())
      for (const std::string &alias : a->second)
        out.push_back({alias, t});
    out.push_back({p.name, std::move(t)});
  }
  if (backend.tpRank() == 0) // the group's first rank writes the whole model
    writeSafetensors(path, out, {{"format", "pt"}});
}

/// --save: a safetensors file, or a Hugging Face model directory.
static void saveWeights(Backend &backend, const TrainOptions &o) {
  if (isDirectoryPath(o.save))
    saveModelDirectory(backend, o, o.save);
  else
    saveParameters(backend, o.save);
}

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

namespace {

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

/// Model FLOPs utilization: a step's model FLOPs per second over the
/// hardware's peak (--peak-tflops, else the device's own, printed once at
/// the start). It is never clamped: a step measured above the peak is
/// reported as measured, with a warning (once) that the peak is too low.
class MfuMeter {
public:
  MfuMeter(Backend &backend, const TrainOptions &o) {
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

  /// The step's MFU (NaN without a peak); `warning` gets the text to print
  /// the first time a step exceeds the peak.
  double measure(int64_t step, double flops, double seconds, std::string &warning) {
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

private:
  PeakRate peak_;
  bool warned_ = false;
};

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

/// Set by SIGINT/SIGTERM: the loop finishes the current step, keeps it (a
/// checkpoint with --save-dir, the weights with --save) and returns. A second
/// signal ends the process at once.
volatile std::sig_atomic_t interrupted = 0;

extern "C" void onInterrupt(int) {
  if (interrupted)
    _exit(130);
  interrupted = 1;
}

/// Installs the handlers for the training loop and restores the previous ones.
class InterruptHandler {
public:
  InterruptHandler() {
    interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
  }
  ~InterruptHandler() {
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
  }

private:
  struct sigaction oldInt {}, oldTerm {};
};

/// A run that stops on a non-finite step writes --save with the parameters
/// before it, when they are finite (saveParameters writes no others); the
/// end of its error message says which.
static std::string keepParameters(Backend &backend, const TrainOptions &o) {
  if (o.save.empty())
    return "";
  try {
    saveWeights(backend, o);
  } catch (const Error &e) {
    return std::string("; ") + e.what();
  }
  return "; the parameters before this step are saved in " + o.save;
}

/// Runs @optimizer so that no update makes the parameters non-finite. It
/// keeps upper bounds on max |p| and max |m| (from the previous bounds, the
/// gradient norm and the step's scalars: |m'| <= max(|m|, |g'|), |update| <=
/// step_size * |m'| / eps); while they prove the update finite, which is
/// every step of a sane run, the update just runs. Otherwise the parameters
/// and moments are copied first and checked after; a non-finite result is
/// undone (the previous values restored) and the run stops, saving the
/// parameters of the last good step.
///
/// Under --use-distributed-optimizer each rank holds only its shard of the
/// moments, so its own max |m| bounds nothing on the others' shards, and a
/// moment that goes non-finite on one rank's shard (its parameters staying
/// finite) is seen by that rank alone. The bounds are therefore taken over
/// all the ranks (maxOverRanks): every rank holds the same ones, takes the
/// same path, and stops at the same step with the same message.
class UpdateGuard {
public:
  explicit UpdateGuard(Backend &backend) {
    limit = 0.25 * (backend.elementSize() == 4 ? double(std::numeric_limits<float>::max())
                                               : std::numeric_limits<double>::max());
    double bounds[] = {maxAbs(backend, FlatBuffer::Params),
                       maxAbs(backend, FlatBuffer::AdamM)}; // nonzero after a resume
    maxOverRanks(backend, bounds, 2);
    pBound = bounds[0];
    mBound = bounds[1];
  }

  void update(Backend &backend, const std::vector<double> &h, double gradBound, int64_t t,
              const TrainOptions &o) {
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
    if (backend.sharded() && backend.communicator() && backend.communicator()->size() > 1) {
      // Every rank stops here: none ends the run (and the others with it)
      // while another still writes --save.
      try {
        backend.communicator()->barrier();
      } catch (const Error &) {
      }
    }
    fail("the update at step " + std::to_string(t) + " would make the parameters or the AdamW "
         "moments non-finite (learning rate " + jsonNumber(h[kStepSize] * (1 - std::pow(o.beta1, double(t)))) +
         "); it was not applied" + kept);
  }

private:
  /// A sharded run: each of @values (n of them, none negative) becomes its
  /// largest over the ranks. Exact: each rank sums its values into its own
  /// slots, zeros elsewhere (an infinity stays one). Other runs hold the
  /// same buffers on every rank: nothing to combine.
  static void maxOverRanks(Backend &backend, double *values, int n) {
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

  /// max |x| over a flat buffer (infinity if any element is not finite).
  static double maxAbs(Backend &backend, FlatBuffer which) {
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

  double limit, pBound = 0, mBound = 0;
};

} // namespace

namespace {

/// A step's numbers before the update: the global batch's mean loss and
/// tokens, this rank's tokens, the ranks' token imbalance, and the seconds
/// this rank waited for gradient sums.
struct StepTotals {
  double loss = 0;
  int64_t tokens = 0, localTokens = 0;
  double imbalance = 0, waited = 0;
  /// Several ranks: SIGINT/SIGTERM reached one of them by the step's sums;
  /// every rank then stops after the same step.
  bool stop = false;
  /// The step's labels not ignored, over all its micro-batches and ranks
  /// (-1: the package has no input 'labels' to count them in).
  double terms = -1;
};

/// One training run, top to bottom: set-up (the constructor), then per step
/// the micro-batches (runMicroBatches), the update (update), the log row
/// (logStep), evaluation, a sample, a checkpoint and the progress line, and
/// at the end the test split, the summaries and the final checkpoint
/// (finish).
class TrainingRun {
public:
  TrainingRun(Backend &backend, const TrainOptions &given)
      : backend(backend), pkg(backend.package()), o(given), ranks(backend.worldSize()),
        lead(backend.rank() == 0) {
    setUpRanks(given);
    checkPlan();
    if (lead && !o.save.empty() && isDirectoryPath(o.save))
      checkModelDirectorySource(pkg, o, "--save " + o.save); // before any step, not after the last
    if (lead && o.saveDirHf)
      checkModelDirectorySource(pkg, o, "--save-dir-hf");
    sources = openBatchSources(pkg, o);
    layout = batchLayout(pkg, o, sources);
    if (backend.profile.enabled)
      profileDraws();
    o.globalBatch = layout.global; // what the checkpoints record
    if (layout.micro > 1) {
      pkg.function(kAccumulateFn);
      pkg.function(kMergeFn);
    }
    announceBatch(given);
    start();
    if (lead && !o.saveDir.empty()) {
      makeDirectories(o.saveDir);
      checkSaveDir(o, first);
    }
    log = std::make_unique<RunLog>(o, first);
    scaleLearningRate();
    live = o.progress == "live" || (o.progress == "auto" && isatty(2));
    clear = live ? "\r\033[K" : "";
    mfuMeter = std::make_unique<MfuMeter>(backend, o);
    for (const InputInfo &in : pkg.inputs)
      if (in.name == "input_ids")
        tokenInput = in.dynamic() ? -1 : in.numel;
    guard = std::make_unique<UpdateGuard>(backend);
    for (size_t i = 0; i < pkg.inputs.size(); ++i)
      if (pkg.inputs[i].name == "labels")
        labelsInput = int64_t(i);
    if (o.perTokenLoss) {
      if (labelsInput < 0)
        fail("--calculate-per-token-loss weighs the micro-batches by their labels not "
             "ignored; " + pkg.dir + " has no input 'labels'");
    }
    if (!o.dumpBatches.empty())
      dump = std::make_unique<BatchDump>(o.dumpBatches, pkg.inputs);
    stoppedAt = o.steps;
    saved = first - 1;
  }

  std::vector<double> run() {
    runStart = std::chrono::steady_clock::now();
    InterruptHandler interruptHandler;
    for (int64_t t = first; t <= o.steps; ++t) {
      auto start = std::chrono::steady_clock::now();
      StepTotals step = runMicroBatches(t);
      if (step.terms == 0)
        failWithoutLabels(t);
      double norm = 0, lr = 0;
      if (!update(t, step, norm, lr))
        continue; // skipped: no update
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start)
                      .count();
      losses.push_back(step.loss);
      const double mfu = logStep(t, step, norm, lr, ms);
      if (o.evalInterval > 0 && (t % o.evalInterval == 0 || t == o.steps))
        evaluateValidation(t);
      if (o.sampleEvery > 0 && t % o.sampleEvery == 0 && !o.quiet)
        sample(t);
      if (!o.saveDir.empty() && o.saveInterval > 0 && t % o.saveInterval == 0) {
        checkpoint(t);
        saved = t;
      }
      if (!o.quiet && (live || t % o.logEvery == 0 || t == 1 || t == o.steps))
        printProgress(t, step, norm, lr, ms, mfu);
      if (step.stop || (ranks == 1 && interrupted)) {
        stopOnSignal(t);
        break;
      }
    }
    finish();
    return losses;
  }

private:
  /// Rank 0 alone prints, logs and saves; every rank trains its share of
  /// each global batch (the plan sums the gradients, so the updates agree).
  void setUpRanks(const TrainOptions &given) {
    validate(given);
    // The optimizer computes in the parameters' type: an --eps that is 0 or
    // subnormal there divides AdamW's update by (almost) nothing.
    const double smallest = backend.elementSize() == 4 ? double(std::numeric_limits<float>::min())
                                                       : std::numeric_limits<double>::min();
    if (given.eps < smallest)
      fail("--eps " + valueText(given.eps) + " is below the smallest normal " + pkg.dtype +
           " number (" + valueText(smallest) + ") that the package's optimizer computes in");
    backend.setTf32(given.tf32 == "on");
    o.rank = backend.rank();
    o.ranks = ranks;
    if (!lead) {
      o.quiet = true;
      o.logJson.clear();
      o.memoryReport.clear();
      o.tensorboardDir.clear();
      o.save.clear();
    }
  }

  /// The plan's all-reduces (its buckets, and whether it clips them) against
  /// the run's ranks and --clip; the functions the loop runs.
  void checkPlan() {
    bool clipsBuckets = false;
    for (const StepDecl &s : pkg.function(kTrainStepFn).steps)
      if (s.kind == StepDecl::AllReduceStart || s.kind == StepDecl::ReduceScatterStart) {
        ++buckets;
        clipsBuckets |= s.clip;
      }
    if (clipsBuckets != (o.clip == "bucket"))
      fail(clipsBuckets ? pkg.dir + " clips each gradient bucket: train it with --clip bucket"
                        : "--clip bucket needs a package compiled with --clip bucket (" +
                              pkg.dir + " was not)");
    backend.setBucketClip(o.clip == "bucket" ? o.clipGrad : 0.0);
    if (ranks > 1 && buckets == 0)
      fail(pkg.dir + " was compiled for one rank (no gradient all-reduce); compile it with "
                     "--ranks " + std::to_string(ranks) + " for this run");
    if (o.sampleEvery > 0)
      for (const InputInfo &in : pkg.inputs)
        if (in.name != "input_ids" && in.name != "labels" && in.name != "position_ids" &&
            in.name != "cu_seqlens")
          fail("--sample-every samples GPT-style models (inputs input_ids and labels, and "
               "position_ids, cu_seqlens of packed documents); this one also takes '" +
               in.name + "'");
    // Samples decode with the tokenizer that made the data (its record beside
    // the dataset), else GPT-2's BPE of --vocab-file/--merge-file, else bytes.
    if (o.sampleEvery > 0) {
      sampler = datasetTokenizer(o);
      if (!sampler)
        sampler = o.mergeFile.empty()
                      ? makeTokenizer("ByteTokenizer", "", "")
                      : makeTokenizer("GPT2BPETokenizer", o.vocabFile, o.mergeFile);
    }
    pkg.function(kTrainStepFn);
    pkg.function(kGradNormFn);
    pkg.function(kOptimizerFn);
  }

  void announceBatch(const TrainOptions &given) const {
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

  /// Where the run starts: a checkpoint (parameters, moments, step, run id),
  /// given weights, or the seeded initialization.
  void start() {
    setTensorParallelRank(backend);
    backend.zero(FlatBuffer::AdamM);
    backend.zero(FlatBuffer::AdamV);
    if (!o.resume.empty()) {
      std::string dir = resolveCheckpoint(o.resume, o.saveDir);
      Resumed resumed = loadCheckpoint(backend, o, dir);
      first = resumed.step + 1;
      o.runId = resumed.runId; // the same run, continued
      if (!o.quiet)
        fprintf(stderr, "mlc: resuming from %s at step %lld\n", dir.c_str(), (long long)first);
      return;
    }
    o.runId = newRunId();
    if (!o.init.empty())
      loadParameters(backend, o.init);
    else
      initializeParameters(backend, o.seed);
  }

  /// The learning rate scaled to the global batch (--lr-scaling): linear
  /// (Goyal et al.) or square-root, from the batch --lr was tuned for.
  void scaleLearningRate() {
    sched = o;
    if (o.lrScaling == "none")
      return;
    if (layout.global == 0)
      fail("--lr-scaling needs a model with input_ids [batch, ...] (its global batch)");
    double ratio = double(layout.global) / double(o.baseBatch);
    double factor = o.lrScaling == "linear" ? ratio : std::sqrt(ratio);
    sched.lr = o.lr * factor;
    sched.minLr = o.minLr * factor;
    if (!o.quiet)
      fprintf(stderr, "mlc: learning rate %g (--lr %g x %g, %s scaling from batch %lld to "
                      "%lld)\n",
              sched.lr, o.lr, factor, o.lrScaling.c_str(), (long long)o.baseBatch,
              (long long)layout.global);
  }

  [[noreturn]] static void failAtStep(int64_t t, const Error &e) {
    fail(std::string("step ") + std::to_string(t) + ": " + e.what());
  }

  /// A step none of whose micro-batches (on any rank) holds a label not
  /// ignored has no loss to learn from: each micro-batch's mean is 0 / 0.
  /// With or without --calculate-per-token-loss the run stops here, before
  /// any update (no weight decay, no change to AdamW's moments), naming the
  /// step, as Megatron-LM stops on the NaN such a step's loss is. --save
  /// keeps the parameters of the steps before.
  [[noreturn]] void failWithoutLabels(int64_t t) {
    fail("step " + std::to_string(t) + ": no micro-batch of the step holds a label to learn "
         "from (every label is -100, the ignore index" +
         (o.eodMaskLoss ? std::string(", or follows an EOD under --eod-mask-loss") : "") +
         "): its loss is 0 / 0, so the run stops before its update" +
         keepParameters(backend, o));
  }

  /// Step t's micro-batches: this rank's share of the step's global batch,
  /// their gradients summed (@accumulate) and averaged into the last one's
  /// (@merge). Block b of the run's sequence of micro-batches is rank b % R's:
  /// step t's are blocks (t - 1) R M .. t R M - 1, so the step's sequences are
  /// the same however it is split. Dropout is keyed by the block.
  ///
  /// Each micro-batch's loss is the mean over its labels not ignored. As in
  /// Megatron-LM, the step's loss (and gradient) is by default the mean of
  /// its R M micro-batches' losses, each weighing the same; with
  /// --calculate-per-token-loss it is the mean over all the step's terms:
  /// micro-batch j with n_j of the N terms of every rank weighs n_j / N
  /// (its gradient scaled by n_j R M / N before @merge's 1 / M and the
  /// optimizer's 1 / R).
  StepTotals runMicroBatches(int64_t t) {
    const int64_t micro = layout.micro;
    auto blockOf = [&](int64_t j) { return ((t - 1) * micro + j) * ranks + o.rank; };
    StepTotals step;
    std::vector<double> terms(size_t(micro), 1.0);
    double allTerms = double(micro * ranks);
    // --calculate-per-token-loss weighs each micro-batch by its labels before
    // the first runs: the step's micro-batches are drawn once, up front (and
    // only this step's are held); otherwise each is drawn as it runs.
    std::vector<std::vector<HostTensor>> drawn;
    if (o.perTokenLoss) {
      for (int64_t j = 0; j < micro; ++j)
        drawn.push_back(drawMicroBatch(blockOf(j)));
      allTerms = countTerms(t, drawn, terms);
    }
    double lossSum = 0; // the micro-batches' losses (per token: each times its terms)
    double localTerms = 0; // without --calculate-per-token-loss: counted as they run
    if (micro > 1)
      backend.zero(FlatBuffer::GradSum);
    for (int64_t j = 0; j < micro; ++j) {
      const int64_t block = blockOf(j);
      std::vector<HostTensor> inputs =
          drawn.empty() ? drawMicroBatch(block) : std::move(drawn[size_t(j)]);
      for (size_t i = 0; i < pkg.inputs.size(); ++i) {
        const InputInfo &in = pkg.inputs[i];
        const HostTensor &tensor = inputs[i];
        if (dump)
          dump->append(in.name, tensor);
        if (in.name == "input_ids")
          step.tokens += tensor.numel(); // unpadded batches vary
        if (int64_t(i) == labelsInput && !o.perTokenLoss)
          localTerms += countLabels(tensor);
        try {
          backend.setInput(in.name, tensor);
        } catch (const Error &e) {
          failAtStep(t, e);
        }
      }
      if (o.perTokenLoss)
        backend.setGradWeight(allTerms > 0 ? terms[j] * double(micro * ranks) / allTerms : 1.0);
      try {
        // Dropout masks are keyed by this number: each rank draws its own.
        backend.run(kTrainStepFn, block + 1);
      } catch (const Error &e) {
        failAtStep(t, e);
      }
      const double loss = backend.output(kTrainStepFn, "loss").getDouble(0);
      if (terms[j] > 0) // a micro-batch with no terms adds none (its mean is 0 / 0)
        lossSum += loss * terms[j];
      if (j + 1 < micro)
        backend.run(kAccumulateFn, t);
    }
    if (micro > 1) {
      backend.setScalars("accumulation", {1.0 / double(micro)});
      backend.run(kMergeFn, t);
    }
    step.localTokens = step.tokens; // this rank's, before the sum below
    step.waited = backend.profile.commWaitSeconds - waitedBefore;
    waitedBefore = backend.profile.commWaitSeconds;
    double sums[4] = {lossSum, double(step.tokens), interrupted ? 1.0 : 0.0, localTerms};
    if (ranks > 1) {
      // The logged loss and the tokens are the whole global batch's, and
      // with them whether any rank was interrupted: all stop together.
      try {
        backend.communicator()->sum(sums, 4);
      } catch (const Error &e) {
        failAtStep(t, e);
      }
      step.tokens = int64_t(sums[1]);
      step.imbalance = *sources.imbalance;
      step.stop = sums[2] > 0;
    }
    step.loss = sums[0] / allTerms;
    if (labelsInput >= 0)
      step.terms = o.perTokenLoss ? allTerms : sums[3];
    return step;
  }

  /// Block `block`'s inputs, in pkg.inputs' order.
  std::vector<HostTensor> drawMicroBatch(int64_t block) {
    std::vector<HostTensor> inputs;
    for (const InputInfo &in : pkg.inputs)
      inputs.push_back(sources.train(in, block));
    return inputs;
  }

  /// The labels not ignored (-100) of a micro-batch: its loss's terms.
  static double countLabels(const HostTensor &labels) {
    double n = 0;
    for (int64_t i = 0; i < labels.numel(); ++i)
      n += labels.getInt(i) != -100;
    return n;
  }

  /// --calculate-per-token-loss: the loss's terms (labels not ignored) of
  /// this rank's micro-batches of step t (`drawn`) into `terms`; returns the
  /// step's over all ranks (one sum per step, before any gradient).
  double countTerms(int64_t t, const std::vector<std::vector<HostTensor>> &drawn,
                    std::vector<double> &terms) {
    double local = 0;
    for (size_t j = 0; j < terms.size(); ++j) {
      terms[j] = countLabels(drawn[j][size_t(labelsInput)]);
      local += terms[j];
    }
    if (ranks > 1) {
      try {
        backend.communicator()->sum(&local, 1);
      } catch (const Error &e) {
        failAtStep(t, e);
      }
    }
    return local;
  }

  /// The gradient norm, then the AdamW update (clipped, scheduled, guarded);
  /// false for a step skipped for a non-finite loss or norm (--max-bad-steps),
  /// an error past them.
  bool update(int64_t t, const StepTotals &step, double &norm, double &lr) {
    backend.run(kGradNormFn, t);
    // The gradients are summed over the ranks: their mean's norm is 1/R of it.
    norm = tensorParallelGradNorm(backend, backend.output(kGradNormFn, "grad_norm").getDouble(0)) /
           ranks;
    const double loss = step.loss;
    if ((!std::isfinite(loss) || !std::isfinite(norm)) && ++badSteps <= o.maxBadSteps) {
      // Skipped: no update; the parameters stay those of the last good step.
      LogRow row(t);
      row.add("loss", loss).add("grad_norm", norm).skipped = true;
      log->write(row);
      line.close();
      if (!o.quiet)
        fprintf(stderr, "step %5lld/%lld | loss %g, gradient norm %g: update skipped (%lld of "
                        "at most %lld)\n",
                (long long)t, (long long)o.steps, loss, norm, (long long)badSteps,
                (long long)o.maxBadSteps);
      return false;
    }
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      std::string kept = keepParameters(backend, o);
      fail("the loss became " + std::to_string(loss) + " (gradient norm " +
           std::to_string(norm) + ") at step " + std::to_string(t) + kept);
    }
    double scale = 1.0;
    if (o.clip == "global" && o.clipGrad > 0)
      scale = std::min(1.0, o.clipGrad / (norm + 1e-6));
    lr = learningRate(sched, t);
    std::vector<double> h = adamwScalars(o, lr, t, scale / ranks);
    backend.setScalars(kAdamWScalarsName, h);
    guard->update(backend, h, norm * scale, t, o);
    return true;
  }

  /// The step's row of the log (loss, rate, norm, time, tokens/s, MFU);
  /// returns its MFU.
  double logStep(int64_t t, const StepTotals &step, double norm, double lr, double ms) {
    const double tps = step.tokens / (ms / 1000.0);
    // This rank's model FLOPs: its micro-batches' tokens (unpadded batches vary).
    double flops = 0;
    for (int64_t j = 0; j < layout.micro; ++j)
      flops += stepFlops(pkg, tokenInput < 0 ? step.localTokens / layout.micro : tokenInput);
    std::string aboveThePeak;
    const double mfu = mfuMeter->measure(t, flops, ms / 1000.0, aboveThePeak);
    if (!aboveThePeak.empty() && lead) {
      line.close();
      std::fputs(aboveThePeak.c_str(), stderr);
    }
    if (t > first) { // the first step warms caches up
      waitedTotal += step.waited;
      stepSecondsTotal += ms / 1000.0;
      ++timedSteps;
    }
    LogRow row(t);
    row.add("loss", step.loss).add("lr", lr).add("grad_norm", norm).add("ms", ms);
    row.add("tokens_per_s", tps).add("mfu", mfu);
    if (ranks > 1) // rank 0's time blocked waiting for gradient sums
      row.add("comm_wait_ms", step.waited * 1000.0);
    if (step.imbalance > 0) // max / mean tokens over the ranks
      row.add("imbalance", step.imbalance);
    log->write(row);
    return mfu;
  }

  /// The step's progress line: one updating line on a terminal (--progress
  /// live), a line per --log-every steps otherwise.
  void printProgress(int64_t t, const StepTotals &step, double norm, double lr, double ms,
                     double mfu) {
    const double tps = step.tokens / (ms / 1000.0);
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - runStart).count();
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

  /// Mean loss of the first eval-iters batches of a split, without dropout.
  double evaluate(BatchFn &split) {
    double sum = 0;
    for (int64_t i = 0; i < o.evalIters; ++i) {
      for (const InputInfo &in : pkg.inputs)
        backend.setInput(in.name, split(in, i * ranks + o.rank));
      backend.run(kEvaluateFn, 0);
      sum += backend.output(kEvaluateFn, "loss").getDouble(0);
    }
    if (ranks > 1) // each rank evaluated its share of the batches
      backend.communicator()->sum(&sum, 1);
    return sum / double(std::max<int64_t>(1, o.evalIters) * ranks);
  }

  void evaluateValidation(int64_t t) {
    double val = evaluate(sources.validation);
    log->write(LogRow(t).add("val_loss", val).add("val_ppl", std::exp(val)));
    if (!o.quiet)
      fprintf(stderr, "%seval  %5lld/%lld | validation loss %.4f | perplexity %.2f (%lld batches)\n",
              clear, (long long)t, (long long)o.steps, val, std::exp(val), (long long)o.evalIters);
  }

  /// A short sample, as a person watching the run would like to see.
  void sample(int64_t t) {
    GenerateOptions g;
    g.maxTokens = 64;
    g.temperature = 0.8;
    g.topK = 40;
    g.seed = o.seed + uint64_t(t);
    g.weights = "the parameters after step " + std::to_string(t);
    std::string text = sampler->decode(generate(backend, *sampler, g));
    for (char &c : text)
      if (c == '\n' || c == '\r')
        c = ' ';
    line.close();
    fprintf(stderr, "sample %4lld/%lld | %s\n", (long long)t, (long long)o.steps, text.c_str());
  }

  /// Step t's checkpoint, written by rank 0 (its directory; "" elsewhere).
  /// Every rank calls it: a sharded run's moments are gathered whole first.
  std::string checkpoint(int64_t t) {
    if (!backend.sharded())
      return lead ? saveCheckpoint(backend, o, t) : std::string();
    WholeMoments whole = gatherMoments(backend);
    return lead ? saveCheckpoint(backend, o, t, &whole) : std::string();
  }

  /// SIGINT/SIGTERM: step t is done; keep it and stop cleanly. A checkpoint
  /// that cannot be written (--save-dir holds another run's of this step)
  /// is a warning: finish() still writes --save.
  void stopOnSignal(int64_t t) {
    line.close();
    stoppedAt = t;
    if (!(!o.saveDir.empty() && saved < t)) {
      if (lead)
        fprintf(stderr, "mlc: interrupted after step %lld\n", (long long)t);
      return;
    }
    try {
      std::string dir = checkpoint(t);
      if (!lead)
        return;
      fprintf(stderr, "mlc: interrupted after step %lld; checkpoint %s (resume with "
                      "--resume latest)\n",
              (long long)t, dir.c_str());
    } catch (const Error &e) {
      fprintf(stderr, "mlc: interrupted after step %lld; warning: no checkpoint: %s\n",
              (long long)t, e.what());
    }
    saved = t; // nothing more to save of this step
  }

  /// The test split (a run that reached its last step), the communication
  /// and profile summaries, the last checkpoint and --save.
  void finish() {
    if (sources.test && stoppedAt == o.steps) {
      double test = evaluate(sources.test);
      log->write(LogRow(o.steps).add("test_loss", test).add("test_ppl", std::exp(test)));
      if (!o.quiet)
        fprintf(stderr, "test  %5lld/%lld | test loss %.4f | perplexity %.2f (%lld batches)\n",
                (long long)o.steps, (long long)o.steps, test, std::exp(test),
                (long long)o.evalIters);
    }
    if (ranks > 1 && !o.quiet && timedSteps > 0)
      fprintf(stderr, "mlc: %d ranks, %d gradient buckets: %.2f ms/step blocked waiting for "
                      "gradient sums (exposed communication %.1f%% of the step)\n",
              ranks, buckets, 1e3 * waitedTotal / double(timedSteps),
              100.0 * waitedTotal / std::max(stepSecondsTotal, 1e-12));
    printProfile();
    if (!o.saveDir.empty() && saved < stoppedAt && first <= stoppedAt) {
      std::string dir = checkpoint(stoppedAt);
      if (lead && !o.quiet)
        fprintf(stderr, "mlc: checkpoint %s\n", dir.c_str());
    }
    if (!o.save.empty())
      saveWeights(backend, o);
    if (!o.memoryReport.empty())
      writeMemoryReport(backend, o.memoryReport);
    if (dump)
      dump->commit();
    log->close();
  }

  /// MLC_PROFILE: the training inputs drawn (each micro-batch's once a
  /// step) and the host time spent drawing them.
  void profileDraws() {
    sources.train = [this, draw = sources.train](const InputInfo &in, int64_t block) {
      const auto start = std::chrono::steady_clock::now();
      HostTensor tensor = draw(in, block);
      drawSeconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++tensorsDrawn;
      return tensor;
    };
  }

  /// MLC_PROFILE: GEMM and kernel time per step, and the 12 slowest kernels
  /// (every kernel with MLC_PROFILE=all), then the training inputs drawn.
  void printProfile() const {
    const BackendProfile &prof = backend.profile;
    if (!prof.enabled)
      return;
    const int64_t steps = std::max<int64_t>(1, stoppedAt - first + 1); // this run's
    fprintf(stderr, "mlc profile: %lld steps, GEMMs %.1f ms/step, kernels %.1f ms/step\n",
            (long long)steps, 1e3 * prof.gemmSeconds / steps, 1e3 * prof.kernelSeconds / steps);
    fprintf(stderr, "mlc profile: batches %.2f ms/step, %lld input tensors drawn\n",
            1e3 * drawSeconds / steps, (long long)tensorsDrawn);
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

  /// A live progress line left open (no newline yet) is closed before
  /// anything else is printed, and when the run ends, by an error too.
  struct OpenLine {
    bool open = false;
    void close() {
      if (open)
        std::fputc('\n', stderr);
      open = false;
    }
    ~OpenLine() { close(); }
  };

  Backend &backend;
  const Package &pkg;
  TrainOptions o, sched; // sched: o with the learning rate scaled to the batch
  const int ranks;
  const bool lead;
  int buckets = 0;
  BatchSources sources;
  BatchLayout layout;
  int64_t first = 1, saved = 0, stoppedAt = 0, badSteps = 0, tokenInput = 0;
  std::unique_ptr<RunLog> log;
  bool live = false;
  const char *clear = "";
  OpenLine line;
  std::unique_ptr<MfuMeter> mfuMeter;
  std::unique_ptr<UpdateGuard> guard;
  std::unique_ptr<Tokenizer> sampler;
  std::unique_ptr<BatchDump> dump; // --dump-batches
  int64_t tensorsDrawn = 0; // MLC_PROFILE: training inputs drawn, and the time drawing them
  double drawSeconds = 0;
  int64_t labelsInput = -1; // the index of 'labels' in pkg.inputs (-1: none)
  std::vector<double> losses;
  std::chrono::steady_clock::time_point runStart;
  double waitedBefore = 0, waitedTotal = 0, stepSecondsTotal = 0;
  int64_t timedSteps = 0;
};

} // namespace

std::vector<double> train(Backend &backend, const TrainOptions &given) {
  return TrainingRun(backend, given).run();
}

void runForward(Backend &backend, const TrainOptions &weights, const RunOptions &run) {
  const Package &pkg = backend.package();
  backend.setTf32(weights.tf32 == "on");
  if (run.outputDir.empty())
    fail("run needs --output-dir");
  // Nothing the run reads is overwritten by an output (a NAME.npy that is a
  // link to an input, to --init or to a file of the package).
  std::vector<NamedPath> inputs = {{"--init", weights.init}};
  for (auto &[name, file] : run.inputs)
    inputs.push_back({"--input " + name, file});
  for (const std::string &f : filesIn(pkg.dir))
    inputs.push_back({"the package", f});
  std::vector<NamedPath> outputs;
  for (const auto &out : pkg.function(kEvaluateFn).outputs) {
    // Each output is NAME.npy inside --output-dir, never a path elsewhere.
    if (out.name.empty() || out.name == "." || out.name == ".." ||
        out.name.find('/') != std::string::npos)
      fail(pkg.dir + ": the model's output '" + out.name + "' is not a file name; --output-dir "
           "holds NAME.npy per output");
    outputs.push_back({"--output-dir", run.outputDir + "/" + out.name + ".npy"});
  }
  refuseOutputsOverInputs(inputs, outputs);
  setTensorParallelRank(backend);
  if (!weights.init.empty())
    loadParameters(backend, weights.init);
  else
    initializeParameters(backend, weights.seed);
  std::set<std::string> given;
  for (auto &[name, file] : run.inputs) {
    if (name.empty() || file.empty())
      fail("--input expects NAME=FILE.npy, got '" + name + "=" + file + "'");
    HostTensor t = readNpy(file); // its errors name the file
    try {
      backend.setInput(name, t);
    } catch (const Error &e) {
      fail(file + ": " + e.what());
    }
    given.insert(name);
  }
  for (const InputInfo &in : pkg.inputs)
    if (!given.count(in.name))
      fail("missing --input " + in.name + "=FILE.npy (shape " + shapeString(in.shape) + ", " +
           in.dtype + ")");
  // Inference: the dropout-free copy of the forward graph. A bad value in an
  // input (a token id outside the vocabulary) is reported with the inputs.
  try {
    backend.run(kEvaluateFn, 0);
  } catch (const Error &e) {
    std::string given;
    for (auto &[name, file] : run.inputs)
      given += (given.empty() ? "" : ", ") + name + "=" + file;
    fail(std::string(e.what()) + " (inputs " + given + ")");
  }
  // All outputs or none: a failed write leaves every previous NAME.npy.
  makeDirectories(run.outputDir);
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto &out : pkg.function(kEvaluateFn).outputs)
    files.push_back({run.outputDir + "/" + out.name + ".npy",
                     encodeNpy(backend.output(kEvaluateFn, out.name))});
  writeFilesAtomically(files);
}

} // namespace mlc::rt
