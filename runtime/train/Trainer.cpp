//===- Trainer.cpp - the training loop -------------------------------------===//
//
// One training run, top to bottom (TrainingRun). What it calls lives by
// responsibility beside it (TrainerParts.h): the parameters in
// Parameters.cpp, the update in Update.cpp, what it reports in Progress.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"
#include "support/Error.h"
#include "contract/OptimizerScalars.h"
#include "contract/StepFunctions.h"
#include "runtime/train/BatchDump.h"
#include "runtime/train/BatchSources.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Generate.h"
#include "runtime/train/ModelDirectory.h"
#include "runtime/train/RunLog.h"
#include "runtime/train/TensorParallel.h"
#include "runtime/train/TrainerParts.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace mlc::rt {

namespace {

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

/// One training run, top to bottom: set-up (the constructor), then per step
/// the micro-batches (runMicroBatches), the update (update), the log row
/// (logStep), evaluation, a sample, a checkpoint and the progress line, and
/// at the end the test split, the summaries and the final checkpoint
/// (finish).
class TrainingRun {
public:
  TrainingRun(Backend &backend, const TrainOptions &given)
      : backend(backend), pkg(backend.package()), o(given), ranks(backend.worldSize()),
        lead(backend.rank() == 0), console(given) {
    setUpRanks(given);
    checkPlan();
    if (lead && !o.save.empty() && isDirectoryPath(o.save))
      checkModelDirectorySource(pkg, o, "--save " + o.save); // before any step, not after the last
    if (lead && o.saveDirHf)
      checkModelDirectorySource(pkg, o, "--save-dir-hf");
    sources = openBatchSources(pkg, o);
    layout = batchLayout(pkg, o, sources);
    if (backend.profile.enabled)
      throughput.countDraws(sources.train);
    o.globalBatch = layout.global; // what the checkpoints record
    if (layout.micro > 1) {
      pkg.function(kAccumulateFn);
      pkg.function(kMergeFn);
    }
    console.announceBatch(o, given, layout, ranks);
    start();
    if (lead && !o.saveDir.empty()) {
      makeDirectories(o.saveDir);
      checkSaveDir(o, first);
    }
    log = std::make_unique<RunLog>(o, first);
    sched = scaledSchedule(o, layout.global);
    throughput.startMfu(backend, o);
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
    console.startClock();
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
      if (o.sampleEvery > 0 && t % o.sampleEvery == 0 && samples)
        sample(t);
      if (!o.saveDir.empty() && o.saveInterval > 0 && t % o.saveInterval == 0) {
        checkpoint(t);
        saved = t;
      }
      if (!o.quiet && (console.live || t % o.logEvery == 0 || t == 1 || t == o.steps))
        console.printProgress(o, t, first, step, norm, lr, ms, mfu);
      if (step.stop || (ranks == 1 && backend.tpSize() == 1 && interrupted)) {
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
    // Past the largest number there it is infinite: an --eps that divides
    // every update to 0, a decay that makes the parameters non-finite. (A
    // rate that does is the update guard's: it names the learning rate.)
    const double largest = backend.elementSize() == 4 ? double(std::numeric_limits<float>::max())
                                                      : std::numeric_limits<double>::max();
    for (auto [flag, value] : {std::pair<const char *, double>{"--eps", given.eps},
                               {"--weight-decay", given.weightDecay}})
      if (value > largest)
        fail(std::string(flag) + " " + valueText(value) + " is above the largest " + pkg.dtype +
             " number (" + valueText(largest) + ") that the package's optimizer computes in");
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
    // Rank 0 samples (unless --quiet); under tensor parallelism every rank
    // of its group runs the forward passes with it, and the group's other
    // ranks (quiet, as they print nothing) take the decision of its first.
    samples = o.sampleEvery > 0 && lead && !o.quiet;
    if (Communicator *group = backend.tensorParallel(); group && lead && o.sampleEvery > 0) {
      char mine = samples;
      group->broadcast(&mine, 1, 0);
      samples = mine != 0;
    }
    if (samples) {
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
    step.waited = throughput.waitedSinceLast(backend);
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
    // The ranks of a tensor-parallel group hold the same batch but take
    // signals apart: whether any rank of the group (and so, after the sum
    // above, of the world) was interrupted, so that every rank stops after
    // the same step and enters the checkpoint's gathers together.
    if (Communicator *tp = backend.tensorParallel(); tp && tp->size() > 1) {
      double stop = (step.stop || interrupted) ? 1.0 : 0.0;
      try {
        tp->allReduce(&stop, 1, /*f64=*/true, /*max=*/true);
      } catch (const Error &e) {
        failAtStep(t, e);
      }
      step.stop = stop > 0;
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
      console.line.close();
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
      scale = mlcClipFactor(o.clipGrad, norm);
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
    std::string aboveThePeak;
    const double mfu = throughput.measure(pkg, t, first, layout.micro, step, ms, aboveThePeak);
    if (!aboveThePeak.empty() && speaks()) {
      console.line.close();
      std::fputs(aboveThePeak.c_str(), stderr);
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
              console.clear, (long long)t, (long long)o.steps, val, std::exp(val),
              (long long)o.evalIters);
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
    if (!speaks())
      return; // the group's first rank prints it
    console.line.close();
    fprintf(stderr, "sample %4lld/%lld | %s\n", (long long)t, (long long)o.steps, text.c_str());
  }

  /// Step t's checkpoint, written by rank 0 (its directory; "" off the
  /// first replica). Every rank calls it: the ranks that hold parts of the
  /// tensors send them to the writer, one tensor at a time.
  std::string checkpoint(int64_t t) { return saveCheckpoint(backend, o, t); }

  /// SIGINT/SIGTERM: step t is done; keep it and stop cleanly. A checkpoint
  /// that the writer refuses up front (--save-dir holds another run's of
  /// this step; no tensor moved) is a warning: finish() still writes
  /// --save. Any other failure (a gather that timed out) propagates and
  /// stops the run, as other communication failures do.
  void stopOnSignal(int64_t t) {
    console.line.close();
    stoppedAt = t;
    if (!(!o.saveDir.empty() && saved < t)) {
      if (speaks())
        fprintf(stderr, "mlc: interrupted after step %lld\n", (long long)t);
      return;
    }
    // Every rank counts step t as saved, the writer and the others alike:
    // finish() must not gather for it again on some ranks only.
    saved = t;
    try {
      std::string dir = checkpoint(t);
      if (speaks()) // the group's first rank wrote it
        fprintf(stderr, "mlc: interrupted after step %lld; checkpoint %s (resume with "
                        "--resume latest)\n",
                (long long)t, dir.c_str());
    } catch (const CheckpointRefused &e) {
      fprintf(stderr, "mlc: interrupted after step %lld; warning: no checkpoint: %s\n",
              (long long)t, e.what());
    }
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
    if (ranks > 1 && !o.quiet)
      throughput.printCommunication(ranks, buckets);
    throughput.printProfile(backend.profile, std::max<int64_t>(1, stoppedAt - first + 1));
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

  Backend &backend;
  const Package &pkg;
  TrainOptions o, sched; // sched: o with the learning rate scaled to the batch
  const int ranks;
  /// The first data-parallel replica: its ranks hold the parameters that
  /// --save and checkpoints keep, and send them to the writer (isWriter(),
  /// its tensor-parallel rank 0), which alone writes.
  const bool lead;
  /// The one rank that prints for the whole run: the first replica's
  /// tensor-parallel rank 0.
  bool speaks() const { return lead && backend.tpRank() == 0; }
  int buckets = 0;
  BatchSources sources;
  BatchLayout layout;
  int64_t first = 1, saved = 0, stoppedAt = 0, badSteps = 0;
  std::unique_ptr<RunLog> log;
  Console console;
  Throughput throughput;
  std::unique_ptr<UpdateGuard> guard;
  std::unique_ptr<Tokenizer> sampler;
  bool samples = false; // this rank runs --sample-every's generation
  std::unique_ptr<BatchDump> dump; // --dump-batches
  int64_t labelsInput = -1; // the index of 'labels' in pkg.inputs (-1: none)
  std::vector<double> losses;
};

} // namespace

std::vector<double> train(Backend &backend, const TrainOptions &given) {
  return TrainingRun(backend, given).run();
}

} // namespace mlc::rt
