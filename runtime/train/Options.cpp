//===- Options.cpp - the table of training flags ----------------------------===//

#include "runtime/train/Options.h"
#include "runtime/train/ModelDirectory.h"
#include "runtime/data/Balance.h"
#include "support/Error.h"
#include "support/TensorIO.h"
#include "runtime/data/GptDataset.h"
#include "runtime/train/RunLog.h"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace mlc::rt {

namespace {

double parseNumber(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || errno == ERANGE)
    fail("--" + flag + " expects a number, got '" + v + "'");
  return x;
}

int64_t parseInteger(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno == ERANGE)
    fail("--" + flag + " expects an integer, got '" + v + "'");
  return x;
}

std::string text(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

TrainFlag number(const char *name, const char *help, double TrainOptions::*field) {
  return {name, "x", help, [field](const TrainOptions &o) { return text(o.*field); },
          [field, name](TrainOptions &o, const std::string &v) {
            o.*field = parseNumber(name, v);
          }};
}

TrainFlag integer(const char *name, const char *help, int64_t TrainOptions::*field) {
  return {name, "n", help,
          [field](const TrainOptions &o) { return std::to_string(o.*field); },
          [field, name](TrainOptions &o, const std::string &v) {
            o.*field = parseInteger(name, v);
          }};
}

TrainFlag string(const char *name, const char *valueName, const char *help,
                 std::string TrainOptions::*field) {
  return {name, valueName, help, [field](const TrainOptions &o) { return o.*field; },
          [field](TrainOptions &o, const std::string &v) { o.*field = v; }};
}

TrainFlag boolean(const char *name, const char *help, bool TrainOptions::*field) {
  TrainFlag f{name, "true|false", help,
              [field](const TrainOptions &o) { return std::string(o.*field ? "true" : "false"); },
              [field, name](TrainOptions &o, const std::string &v) {
                if (v.empty() || v == "true" || v == "1")
                  o.*field = true;
                else if (v == "false" || v == "0")
                  o.*field = false;
                else
                  fail(std::string("--") + name + " takes true or false, got '" + v + "'");
              }};
  f.isSwitch = true;
  return f;
}

/// The optimizer: AdamW and its learning rate schedule, clipping.
std::vector<TrainFlag> optimizerFlags() {
  return {
    integer("steps", "Optimizer steps", &TrainOptions::steps),
    number("lr", "Peak learning rate", &TrainOptions::lr),
    number("min-lr", "Learning rate at the end of the cosine decay (at most --lr)",
           &TrainOptions::minLr),
    integer("warmup", "Linear warmup steps", &TrainOptions::warmup),
    string("lr-schedule", "name", "constant or cosine (after warmup)",
           &TrainOptions::schedule),
    number("weight-decay", "AdamW decoupled weight decay (matrices only)",
           &TrainOptions::weightDecay),
    number("beta1", "AdamW beta1", &TrainOptions::beta1),
    number("beta2", "AdamW beta2", &TrainOptions::beta2),
    number("eps", "AdamW epsilon", &TrainOptions::eps),
    number("clip-grad", "Clip the global gradient norm (0 = off)", &TrainOptions::clipGrad),
    string("clip", "mode",
           "global (the whole averaged gradient's norm), bucket (each gradient bucket by "
           "its own norm before its all-reduce, threshold clip-grad x sqrt(bucket share); "
           "needs a package compiled with --clip bucket) or none",
           &TrainOptions::clip),
  };
}

/// Where the weights start (the seed, --init) and where they go.
std::vector<TrainFlag> weightFlags() {
  return {
    {"seed", "n", "Seed of initialization, data order and dropout",
     [](const TrainOptions &o) { return std::to_string(o.seed); },
     [](TrainOptions &o, const std::string &v) {
       int64_t x = parseInteger("seed", v);
       if (x < 0)
         fail("--seed must be >= 0, got " + v);
       o.seed = uint64_t(x);
     },
     /*forRun=*/true},
    string("init", "path", "Initial weights, HF names: a safetensors file, or a Hugging "
                           "Face model directory (sharded through "
                           "model.safetensors.index.json)",
           &TrainOptions::init),
    string("save", "path", "Write the trained weights: a safetensors file, or (a path "
                           "ending in '/' or an existing directory) a Hugging Face model "
                           "directory with config.json, sharded weights and the tokenizer",
           &TrainOptions::save),
    string("max-shard-size", "size", "--save DIR: the largest safetensors shard (as "
                                     "save_pretrained: 500KB, 5MB, 2GB, 1GiB)",
           &TrainOptions::maxShardSize),
    string("tokenizer-model", "path", "--save DIR: the tokenizer (tokenizer.json, "
                                      "tokenizer.model or their directory) copied into "
                                      "the model directory (default: the one beside "
                                      "--init DIR or --config DIR)",
           &TrainOptions::tokenizerModel),
  };
}

/// The data: arrays of batches, or an indexed dataset and its split.
std::vector<TrainFlag> dataFlags() {
  return {
    string("batches", "dir", "Directory with NAME.npy per model input, leading dimension "
                             "= step", &TrainOptions::batchesDir),
    string("data", "data", "Indexed dataset PREFIX (PREFIX.bin/.idx from mlc preprocess or "
                           "Megatron), a blend \"W1 P1 W2 P2\", or a plain file read as bytes",
           &TrainOptions::data),
    string("bind", "name=role,...",
           "Which --data field feeds each model input when the names differ: tokens "
           "(GPT samples; input_ids and labels by default), or BERT's input_ids, "
           "token_type_ids, attention_mask, labels",
           &TrainOptions::bind),
    string("split", "weights", "Train/validation/test weights over documents",
           &TrainOptions::split),
    string("vocab-file", "file", "BERT on --data: the WordPiece vocab.txt of the dataset "
                                 "(ids of [CLS], [SEP], [MASK], [PAD])",
           &TrainOptions::vocabFile),
  };
}

/// What the run measures and writes as it goes: evaluation, logs, samples.
std::vector<TrainFlag> reportFlags() {
  return {
    integer("eval-interval", "Validation loss every N steps (0 = never)",
            &TrainOptions::evalInterval),
    integer("eval-iters", "Validation batches per evaluation", &TrainOptions::evalIters),
    string("log-json", "file", "One JSON object per step", &TrainOptions::logJson),
    string("memory-report", "file",
           "Write the bytes the backend allocated, by item (parameters, gradients, "
           "moments, arena, ...), as JSON when the run ends: what `mlc compile --report` "
           "states in advance",
           &TrainOptions::memoryReport),
    string("dump-batches", "dir",
           "Write every training input this rank fed as DIR/NAME.npy, [micro-batches, "
           "...] in the order they ran (what the data became: packed documents' "
           "cu_seqlens, position_ids, masked labels); each batch is written as it is "
           "drawn, the files named when the run ends",
           &TrainOptions::dumpBatches),
    string("tensorboard-dir", "dir", "Write TensorBoard event files here: loss, lr, "
                                     "grad_norm, tokens_per_s, mfu, val_loss ... per step",
           &TrainOptions::tensorboardDir),
    {"peak-tflops", "x", "The peak MFU is measured against, in TFLOP/s; without it the "
                         "device's own: on a CPU its cores x FMA units x vector lanes x 2 "
                         "FLOPs x clock (/proc/cpuinfo), on a GPU its dense rate for the "
                         "GEMMs' type",
     [](const TrainOptions &o) { return o.peakTflops > 0 ? text(o.peakTflops) : ""; },
     [](TrainOptions &o, const std::string &v) {
       o.peakTflops = parseNumber("peak-tflops", v);
       if (!(o.peakTflops > 0) || !std::isfinite(o.peakTflops))
         fail("--peak-tflops must be a positive number of TFLOP/s, got '" + v + "'");
     }},
    integer("log-every", "Print progress every N steps", &TrainOptions::logEvery),
    integer("sample-every", "Print a short generated sample every N steps (0 = never)",
            &TrainOptions::sampleEvery),
    string("merge-file", "file", "Samples of GPT-2 BPE data: merges.txt (with --vocab-file "
                                 "vocab.json); bytes otherwise",
           &TrainOptions::mergeFile),
  };
}

/// The loss over GPT data: EOD masking, per-token weighing.
std::vector<TrainFlag> lossFlags() {
  return {
    boolean("eod-mask-loss", "GPT data (Megatron-LM's --eod-mask-loss): no loss on the "
                             "prediction made from an EOD token (of the next document's "
                             "first token)",
            &TrainOptions::eodMaskLoss),
    boolean("calculate-per-token-loss",
            "Megatron-LM's --calculate-per-token-loss: the step's loss is the mean over "
            "all its labels not ignored (each micro-batch of every rank weighs by its "
            "count of them); without it each micro-batch's mean weighs the same. In both, "
            "a step with no label not ignored (all -100, or all masked by --eod-mask-loss) "
            "stops the run with an error naming it, before its update",
            &TrainOptions::perTokenLoss),
    integer("eod-token", "GPT data: the end-of-document id that --eod-mask-loss and a "
                         "package compiled with --reset-attention-mask or "
                         "--reset-position-ids split samples at (-1: the tokenizer's: "
                         "<|endoftext|> of --vocab-file with --merge-file, else the "
                         "byte tokenizer's 0); an id of the data's vocabulary (a plain "
                         "file's bytes: 0..255) and the model's",
            &TrainOptions::eodToken),
  };
}

/// The console: how the progress is printed.
std::vector<TrainFlag> consoleFlags() {
  return {
    string("progress", "mode", "auto, live (one updating line) or plain (a line per "
                               "step); auto is live on a terminal",
           &TrainOptions::progress),
  };
}

/// Checkpoints: writing, keeping and resuming them.
std::vector<TrainFlag> checkpointFlags() {
  return {
    string("save-dir", "dir", "Write checkpoints (weights, AdamW moments, step) here",
           &TrainOptions::saveDir),
    boolean("save-dir-hf", "Each --save-dir checkpoint also holds hf/, a Hugging Face "
                           "model directory (config.json, safetensors sharded past "
                           "--max-shard-size, the tokenizer files) that from_pretrained "
                           "loads; resuming reads the checkpoint's own files",
            &TrainOptions::saveDirHf),
    integer("save-interval", "A checkpoint every N steps (0: at the end only)",
            &TrainOptions::saveInterval),
    integer("keep", "Checkpoints kept in --save-dir (0: all)", &TrainOptions::keep),
    string("resume", "dir", "Continue from a checkpoint directory, or 'latest' in --save-dir; "
                            "a checkpoint at or past --steps leaves nothing to train (an error)",
           &TrainOptions::resume),
    string("resume-with-changes", "names",
           "Settings a resumed run may change from its checkpoint's, comma-separated "
           "(lr,clip,ranks,package,micro_batch,...), or 'all'; the differences are printed. "
           "Without it a checkpoint of other settings is refused",
           &TrainOptions::resumeWithChanges),
  };
}

/// The step: its global batch, the learning rate scaled to it, bad steps.
std::vector<TrainFlag> batchFlags() {
  return {
    integer("global-batch", "Sequences per optimizer step: a multiple of the micro-batch, "
                            "its gradients accumulated over micro-batches (0: one)",
            &TrainOptions::globalBatch),
    string("lr-scaling", "rule", "none, linear or sqrt: scale --lr and --min-lr from "
                                 "--base-batch to the global batch",
           &TrainOptions::lrScaling),
    integer("base-batch", "The global batch --lr was tuned for (with --lr-scaling)",
            &TrainOptions::baseBatch),
    integer("max-bad-steps", "Steps with a non-finite loss or gradient norm skipped "
                             "(no update) before the run stops",
            &TrainOptions::maxBadSteps),
  };
}

/// The device and the ranks.
std::vector<TrainFlag> deviceFlags() {
  return {
    string("device", "name", "Where to run: auto (CUDA when a GPU is there, else the CPU), cpu, cuda, or cuda-emulator (the CUDA kernels run on the CPU, for testing)", &TrainOptions::device),
    string("tf32", "on|off",
           "CUDA: f32 GEMMs on tensor cores in TF32 (10-bit mantissas in, f32 "
           "accumulation); off keeps them exact f32",
           &TrainOptions::tf32),
    string("balance", "policy",
           "Unpadded BERT over several ranks: how each step's window of samples is "
           "dealt to the ranks (presort: longest first to the lightest rank; zigzag; "
           "random), with no communication",
           &TrainOptions::balance),
    number("comm-timeout", "Seconds a rank waits for the others before it stops with an "
                           "error (mpirun)",
           &TrainOptions::commTimeout),
  };
}

} // namespace

const std::vector<TrainFlag> &trainFlags() {
  static const std::vector<TrainFlag> flags = [] {
    std::vector<TrainFlag> f; // in the order --help lists them
    for (const std::vector<TrainFlag> &group :
         {optimizerFlags(), weightFlags(), dataFlags(), reportFlags(), lossFlags(),
          consoleFlags(), checkpointFlags(), batchFlags(), deviceFlags()})
      f.insert(f.end(), group.begin(), group.end());
    for (TrainFlag &flag : f)
      if (flag.name == "init" || flag.name == "device" || flag.name == "tf32")
        flag.forRun = true;
    return f;
  }();
  return flags;
}

/// The files a run reads: each dataset of --data (PREFIX, PREFIX.bin and
/// PREFIX.idx, or a token file), --init, the tokenizer's files and the
/// arrays of --batches.
static std::vector<NamedPath> inputFiles(const TrainOptions &o) {
  std::vector<NamedPath> inputs = {
      {"--init", o.init}, {"--vocab-file", o.vocabFile}, {"--merge-file", o.mergeFile},
      {"--tokenizer-model", o.tokenizerModel}};
  if (!o.data.empty())
    for (auto &[weight, prefix] : parseBlend(o.data))
      for (const char *suffix : {"", ".bin", ".idx"})
        inputs.push_back({"--data", prefix + suffix});
  // --batches reads NAME.npy per input; other files there (a log, a
  // checkpoint, one rank's output written while another still checks) are
  // not inputs.
  for (const std::string &f : filesIn(o.batchesDir))
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".npy") == 0)
      inputs.push_back({"--batches", f});
  return inputs;
}

/// Refuses, before anything runs, an output that would overwrite an input:
/// --save or --log-json that is (a link to) one of its files. (--save-dir
/// may hold inputs: the run writes only step-* directories there, never over
/// another run's, and rotates only its own; --tensorboard-dir only adds
/// event files of new names.)
static void refuseOverwritingInputs(const TrainOptions &o) {
  std::vector<NamedPath> inputs = inputFiles(o);
  if (o.resume != "latest")
    for (const std::string &f : filesIn(o.resume))
      inputs.push_back({"--resume", f});
  refuseOutputsOverInputs(inputs, {{"--save", o.save}, {"--log-json", o.logJson},
                                   {"--memory-report", o.memoryReport}});
}

void validate(const TrainOptions &o) {
  if (o.schedule != "constant" && o.schedule != "cosine")
    fail("--lr-schedule must be constant or cosine, got '" + o.schedule + "'");
  if (o.steps < 1)
    fail("--steps must be at least 1, got " + std::to_string(o.steps));
  if (o.warmup < 0)
    fail("--warmup must be >= 0, got " + std::to_string(o.warmup));
  if (o.logEvery < 1)
    fail("--log-every must be at least 1, got " + std::to_string(o.logEvery));
  if (o.evalInterval < 0 || o.evalIters < 1)
    fail("--eval-interval must be >= 0 and --eval-iters >= 1");
  auto finiteAtLeast = [](const char *flag, double x, double lo) {
    if (!std::isfinite(x) || x < lo)
      fail(std::string("--") + flag + " must be a finite number >= " + text(lo) +
           ", got " + std::to_string(x));
  };
  finiteAtLeast("lr", o.lr, 0);
  finiteAtLeast("min-lr", o.minLr, 0);
  // The schedule decays from --lr down to --min-lr: a floor above the peak
  // would make it climb (Megatron-LM refuses it too).
  if (o.minLr > o.lr)
    fail("--min-lr " + text(o.minLr) + " is above --lr " + text(o.lr) +
         ": the schedule decays from --lr down to --min-lr");
  finiteAtLeast("weight-decay", o.weightDecay, 0);
  finiteAtLeast("clip-grad", o.clipGrad, 0);
  parseBalancePolicy(o.balance); // an unknown policy is an error that lists them
  if (o.clip != "global" && o.clip != "bucket" && o.clip != "none")
    fail("--clip must be global, bucket or none, got '" + o.clip + "'");
  if (!(o.commTimeout > 0) || !std::isfinite(o.commTimeout))
    fail("--comm-timeout must be a positive number of seconds");
  if (!std::isfinite(o.eps) || o.eps <= 0)
    fail("--eps must be a finite number > 0, got " + text(o.eps));
  for (auto [flag, beta] : {std::pair<const char *, double>{"beta1", o.beta1}, {"beta2", o.beta2}})
    if (!(beta >= 0 && beta < 1))
      fail(std::string("--") + flag + " must be in [0, 1), got " + text(beta));
  if (o.evalIters > 1000000)
    fail("--eval-iters must be at most 1000000, got " + std::to_string(o.evalIters));
  parseSplit(o.split);
  if (o.lrScaling != "none" && o.lrScaling != "linear" && o.lrScaling != "sqrt")
    fail("--lr-scaling must be none, linear or sqrt, got '" + o.lrScaling + "'");
  if (o.baseBatch < 0)
    fail("--base-batch must be >= 0, got " + std::to_string(o.baseBatch));
  if (o.lrScaling != "none" && o.baseBatch < 1)
    fail("--lr-scaling " + o.lrScaling + " needs --base-batch N (the global batch --lr was "
         "tuned for)");
  if (o.sampleEvery < 0)
    fail("--sample-every must be >= 0, got " + std::to_string(o.sampleEvery));
  if (o.progress != "auto" && o.progress != "live" && o.progress != "plain")
    fail("--progress must be auto, live or plain, got '" + o.progress + "'");
  if (o.globalBatch < 0)
    fail("--global-batch must be >= 0, got " + std::to_string(o.globalBatch));
  if (o.eodToken < -1 || o.eodToken > INT32_MAX)
    fail("--eod-token must be a token id >= 0 (or -1: the tokenizer's), got " +
         std::to_string(o.eodToken));
  if (o.maxBadSteps < 0)
    fail("--max-bad-steps must be >= 0, got " + std::to_string(o.maxBadSteps));
  if (o.saveInterval < 0 || o.keep < 0)
    fail("--save-interval and --keep must be >= 0");
  if (!o.resumeWithChanges.empty() && o.resume.empty())
    fail("--resume-with-changes needs --resume (the checkpoint whose settings may change)");
  if (o.saveInterval > 0 && o.saveDir.empty())
    fail("--save-interval needs --save-dir (where the checkpoints go)");
  if (o.saveDirHf && o.saveDir.empty())
    fail("--save-dir-hf needs --save-dir (whose checkpoints hold the model directories)");
  // A flag that only shapes another's output is refused without it, not
  // dropped in silence.
  if (o.keep > 0 && o.saveDir.empty())
    fail("--keep " + std::to_string(o.keep) +
         " needs --save-dir (the checkpoints it keeps are there)");
  if (o.baseBatch > 0 && o.lrScaling == "none")
    fail("--base-batch " + std::to_string(o.baseBatch) +
         " scales --lr only with --lr-scaling linear or sqrt");
  const bool saveDirectory = (!o.save.empty() && isDirectoryPath(o.save)) || o.saveDirHf;
  if (o.maxShardSize != TrainOptions().maxShardSize && !saveDirectory)
    fail("--max-shard-size " + o.maxShardSize + " shards a model directory: it needs --save "
         "DIR/ (a path ending in '/' or an existing directory) or --save-dir-hf" +
         (o.save.empty() ? std::string() : ", not the file " + o.save));
  if (!o.tokenizerModel.empty() && !saveDirectory)
    fail("--tokenizer-model " + o.tokenizerModel + " is copied into a model directory: it "
         "needs --save DIR/ (a path ending in '/' or an existing directory) or --save-dir-hf" +
         (o.save.empty() ? std::string() : ", not the file " + o.save));
  if (o.tf32 != "on" && o.tf32 != "off")
    fail("--tf32 must be on or off, got '" + o.tf32 + "'");
  if (o.device != "auto" && o.device != "cpu" && o.device != "cuda" &&
      o.device != "cuda-emulator")
    fail("--device must be auto, cpu, cuda or cuda-emulator, got '" + o.device + "'");
  // Where results go is checked before any work is done.
  if (!o.save.empty() && isDirectoryPath(o.save)) {
    checkModelDirectory(o.save, "--save");
    parseShardSize(o.maxShardSize);
  } else if (!o.save.empty()) {
    checkWritableFile(o.save, "--save");
  }
  if (!o.logJson.empty())
    checkWritableFile(o.logJson, "--log-json");
  if (!o.memoryReport.empty())
    checkWritableFile(o.memoryReport, "--memory-report");
  if (!o.tensorboardDir.empty())
    checkTensorBoardDir(o.tensorboardDir);
  refuseOverwritingInputs(o);
}

} // namespace mlc::rt
