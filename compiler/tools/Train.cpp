//===- Train.cpp - mlc train, mlc run and mlc generate ---------------------===//
//
//   mlc train    MODEL [--config ...] [--steps N] ... (mpirun -n R for data parallelism)
//   mlc run      MODEL --input NAME=FILE.npy ... --output-dir DIR
//   mlc generate MODEL --init W.safetensors --prompt TEXT
//   mlc generate MODEL --config DIR --init DIR --prompt TEXT (the directory's
//                tokenizer and generation_config.json)
//
// Each compiles MODEL into a package (cached by content) unless it is one,
// then hands it to the runtime.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Model.h"
#include "compiler/tools/Tool.h"
#include "runtime/train/TensorParallel.h"
#include "frontend/Models.h"

#include "contract/StepFunctions.h"
#include "runtime/backend/Backend.h"
#include "runtime/backend/Comm.h"
#include "runtime/backend/KernelCache.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "support/TensorIO.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Generate.h"
#include "runtime/train/Trainer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <sys/stat.h>

using namespace llvm;

namespace mlc::tool {
namespace {

// run
cl::list<std::string> inputs("input", cl::desc("NAME=FILE.npy, one per model input"),
                             cl::sub(runCmd()), cl::cat(category()));
cl::opt<std::string> outputDir("output-dir", cl::desc("Where NAME.npy outputs go"),
                               cl::sub(runCmd()), cl::cat(category()));

// generate
cl::opt<std::string> genPrompt("prompt", cl::desc("The text to continue"), cl::init(""),
                               cl::sub(generateCmd()), cl::cat(category()));
// The numbers are read as text and parsed by the runtime's generate flags,
// strictly (cl::opt<double> takes '' for 0 and 'nan' for a temperature).
cl::opt<std::string> genTokens("max-tokens", cl::desc("Tokens to generate at most (default 64)"),
                               cl::value_desc("n"), cl::sub(generateCmd()), cl::cat(category()));
cl::opt<std::string> genTemperature("temperature",
                                    cl::desc("Sampling temperature (0: the most likely token; "
                                             "default 1)"),
                                    cl::value_desc("x"), cl::sub(generateCmd()),
                                    cl::cat(category()));
cl::opt<std::string> genTopK("top-k",
                             cl::desc("Sample from the k most likely tokens (0, the default: all)"),
                             cl::value_desc("k"), cl::sub(generateCmd()), cl::cat(category()));
cl::opt<std::string> genTopP("top-p",
                             cl::desc("Sample from the most likely tokens that hold this share "
                                      "of the probability (1, the default: all)"),
                             cl::value_desc("p"), cl::sub(generateCmd()), cl::cat(category()));
cl::opt<std::string> genPenalty("repetition-penalty",
                                cl::desc("transformers' repetition penalty on tokens already in "
                                         "the text (1, the default: none)"),
                                cl::value_desc("x"), cl::sub(generateCmd()), cl::cat(category()));
cl::opt<std::string> genOutputIds("output-ids",
                                  cl::desc("Write the token ids (the prompt's, then the "
                                           "generated) to this file, as mlc tokenizer decode "
                                           "reads them"),
                                  cl::value_desc("file"), cl::sub(generateCmd()),
                                  cl::cat(category()));
cl::opt<std::string> genTokenizer("tokenizer-type",
                                  cl::desc("The data's: ByteTokenizer, ByteLevelTokenizer, "
                                           "GPT2BPETokenizer, HuggingFaceTokenizer, "
                                           "SentencePieceTokenizer or Llama2Tokenizer"),
                                  cl::init("ByteTokenizer"), cl::sub(generateCmd()),
                                  cl::cat(category()));
cl::opt<std::string> genVocab("vocab-file", cl::desc("GPT2BPETokenizer: vocab.json"),
                              cl::sub(generateCmd()), cl::cat(category()));
cl::opt<std::string> genModel("tokenizer-model",
                              cl::desc("HuggingFaceTokenizer: tokenizer.json or its directory; "
                                       "SentencePieceTokenizer, Llama2Tokenizer: tokenizer.model"),
                              cl::sub(generateCmd()), cl::cat(category()));
cl::opt<std::string> genMerges("merge-file", cl::desc("GPT2BPETokenizer: merges.txt"),
                               cl::sub(generateCmd()), cl::cat(category()));

/// Under mpirun: the world, and the rank that errors are prefixed with.
std::shared_ptr<mlc::rt::Communicator> world;
int worldRanks() { return world ? world->size() : 1; }
/// --tensor-parallel T: this rank's tensor- and data-parallel groups
/// (runtime/train/TensorParallel.h); empty when T is 1.
mlc::rt::ParallelGroups groups;
/// The ranks that share the batches: the world over its tensor-parallel
/// groups (each group reads the same batches).
int dataRanks() { return groups.data ? groups.data->size() : worldRanks(); }

/// `mlc run` and `mlc train --batches` compile for the arrays they are given:
/// the micro-batch and sequence length come from input_ids ([B, S] for run;
/// unpadded BERT: B from cu_seqlens). A batches directory holds [steps, G, S],
/// each entry a step's global batch over all ranks: its micro-batch is
/// --micro-batch, which must divide G / ranks, or else G / ranks (one
/// micro-batch per rank). A --seq-len given explicitly must agree.
Error takeBatchShapeFromInputs(bool training) {
  if (isPackage(model))
    return Error::success();
  std::map<std::string, std::string> files;
  if (training) {
    std::string batchesDir = givenFlag("batches");
    if (batchesDir.empty())
      return Error::success();
    for (const char *name : {"input_ids", "cu_seqlens"}) {
      std::string path = batchesDir + "/" + name + ".npy";
      if (sys::fs::exists(path))
        files[name] = path;
    }
  } else {
    for (const std::string &spec : inputs) {
      auto [name, file] = StringRef(spec).split('=');
      files[name.str()] = file.str();
    }
  }
  auto ids = files.find("input_ids");
  if (ids == files.end())
    return Error::success();
  std::vector<int64_t> shape;
  try {
    shape = mlc::rt::readNpy(ids->second).shape;
  } catch (const mlc::rt::Error &e) {
    return createStringError(inconvertibleErrorCode(), e.what());
  }
  if (training && !shape.empty())
    shape.erase(shape.begin()); // the leading dimension is the step
  // Each rank takes an even share of every step's rows, in micro-batches.
  if (training && shape.size() == 2 && !varlen) {
    int64_t share = microBatch.getNumOccurrences() ? microBatch * dataRanks() : dataRanks();
    if (share <= 0 || shape[0] % share != 0)
      return createStringError(
          inconvertibleErrorCode(),
          ids->second + ": a step's " + std::to_string(shape[0]) + " rows (its global batch) " +
              "do not split evenly over " + std::to_string(dataRanks()) + " data-parallel ranks" +
              (microBatch.getNumOccurrences()
                   ? " x micro-batches of " + std::to_string(microBatch) : std::string()));
    shape[0] = microBatch.getNumOccurrences() ? int64_t(microBatch) : shape[0] / dataRanks();
  }
  int64_t b = -1, s = -1;
  if (varlen) {
    auto cu = files.find("cu_seqlens");
    if (cu == files.end())
      return Error::success();
    std::vector<int64_t> cuShape;
    try {
      cuShape = mlc::rt::readNpy(cu->second).shape;
    } catch (const mlc::rt::Error &e) {
      return createStringError(inconvertibleErrorCode(), e.what());
    }
    if (training && !cuShape.empty())
      cuShape.erase(cuShape.begin());
    if (cuShape.size() == 1 && cuShape[0] >= 2)
      b = cuShape[0] - 1; // the sequence length stays --seq-len: it sizes the capacity
  } else {
    if (shape.size() != 2)
      return createStringError(inconvertibleErrorCode(),
                               ids->second + ": input_ids has shape " +
                                   mlc::rt::shapeString(shape) + (training ? " per step" : "") +
                                   "; the model takes [micro-batch, seq-len]");
    b = shape[0];
    s = shape[1];
  }
  auto agree = [&](cl::opt<int64_t> &flag, int64_t fromArray, const char *what) -> Error {
    if (fromArray < 0)
      return Error::success();
    if (flag.getNumOccurrences() && flag != fromArray)
      return createStringError(inconvertibleErrorCode(),
                               "--" + flag.ArgStr.str() + " " + std::to_string(flag) +
                                   " disagrees with " + ids->second + ", whose " + what +
                                   " is " + std::to_string(fromArray));
    flag = fromArray;
    seqLenFromInputs |= &flag == &seqLen;
    return Error::success();
  };
  if (auto err = agree(microBatch, b, "micro-batch"))
    return err;
  return agree(seqLen, s, "sequence length");
}

/// A number as the manifest and a user write it: 2, 25, 0.5.
std::string numberText(double x) {
  std::ostringstream os;
  os << std::setprecision(15) << x;
  return os.str();
}

/// MODEL is a package: compiled already, under the flags its manifest
/// records. A compile flag given with it must say what the package holds:
/// one that differs is refused, naming both values (a flag it would not
/// apply is no flag to ignore in silence). The ONNX import's flags, which
/// the manifest does not record, are refused outright.
Error checkFlagsAgainstPackage(const std::string &dir) {
  const std::string path = dir + "/manifest.json";
  mlc::rt::Json m;
  try {
    m = mlc::rt::Json::parse(mlc::rt::readFile(path), path, /*uniqueKeys=*/true);
  } catch (const mlc::rt::Error &e) {
    return createStringError(inconvertibleErrorCode(), e.what());
  }
  // The manifest's value of `key` as text ("" where it has none: a package
  // written before it recorded the flag).
  auto recorded = [&](const char *key) -> std::string {
    const mlc::rt::Json *v = m.find(key);
    if (!v)
      return "";
    if (v->kind == mlc::rt::Json::String)
      return v->string;
    if (v->kind == mlc::rt::Json::Bool)
      return v->boolean ? "true" : "false";
    if (v->kind == mlc::rt::Json::Number)
      return numberText(v->number);
    return "";
  };
  auto differs = [&](const std::string &flag, const std::string &given,
                     const std::string &held) -> Error {
    return createStringError(
        inconvertibleErrorCode(),
        flag + " " + given + " disagrees with the package " + dir + ", compiled with " +
            (held.empty() ? std::string("no record of it (an older mlc)") : flag + " " + held) +
            ": a package's compile flags are fixed; compile the model again with " + flag +
            " " + given + ", or leave the flag out");
  };
  auto check = [&](bool given, const char *flag, const std::string &value,
                   const char *key) -> Error {
    if (!given)
      return Error::success();
    std::string held = recorded(key);
    return held == value ? Error::success() : differs(flag, value, held);
  };
  auto text = [](bool b) { return std::string(b ? "true" : "false"); };
  if (auto err = check(microBatch.getNumOccurrences(), "--micro-batch",
                       std::to_string(microBatch), "micro_batch"))
    return err;
  if (auto err = check(seqLen.getNumOccurrences(), "--seq-len", std::to_string(seqLen),
                       "seq_len"))
    return err;
  if (auto err = check(dtype.getNumOccurrences(), "--dtype", dtype, "dtype"))
    return err;
  if (auto err = check(ranksFlag.getNumOccurrences(), "--ranks", std::to_string(ranksFlag),
                       "ranks"))
    return err;
  if (auto err = check(fuse.getNumOccurrences() || noFuse.getNumOccurrences(), "--fuse",
                       text(fuse && !noFuse), "fuse"))
    return err;
  if (auto err = check(varlen.getNumOccurrences(), "--varlen", text(varlen), "varlen"))
    return err;
  if (auto err = check(recompute.getNumOccurrences(), "--recompute", recompute, "recompute"))
    return err;
  if (auto err = check(recomputeNumLayers.getNumOccurrences(), "--recompute-num-layers",
                       std::to_string(recomputeNumLayers), "recompute_num_layers"))
    return err;
  if (auto err = check(resetAttentionMask.getNumOccurrences(), "--reset-attention-mask",
                       text(resetAttentionMask), "reset_attention_mask"))
    return err;
  if (auto err = check(resetPositionIds.getNumOccurrences(), "--reset-position-ids",
                       text(resetPositionIds), "reset_position_ids"))
    return err;
  if (auto err = check(bucketCapMb.getNumOccurrences(), "--bucket-cap-mb", numberText(bucketCapMb),
                       "bucket_cap_mb"))
    return err;
  if (auto err = check(firstBucketMb.getNumOccurrences(), "--first-bucket-mb",
                       numberText(firstBucketMb), "first_bucket_mb"))
    return err;
  if (auto err = check(useDistributedOptimizer.getNumOccurrences(),
                       "--use-distributed-optimizer", text(useDistributedOptimizer),
                       "distributed_optimizer"))
    return err;
  if (config.getNumOccurrences()) {
    // The model the flag builds against the one compiled: their
    // descriptions (preset and every key), as the manifest's config holds.
    const std::string family = recorded("model");
    if (family == "onnx")
      return createStringError(inconvertibleErrorCode(),
                               "--config sets a builtin model's hyper-parameters; the package " +
                                   dir + " was compiled from an ONNX model, which brings its own");
    auto cfg = mlc::parseModelConfig(family, config);
    if (!cfg)
      return cfg.takeError();
    std::string held = recorded("config");
    held = held.substr(0, held.find(", packed documents:"));
    std::string built = cfg->preset + ": " + cfg->describe();
    if (built != held) {
      // "PRESET: k=v, k=v, ...": the preset and the entries that differ,
      // each side's, in the description's order.
      auto entries = [](StringRef d) {
        auto [preset, rest] = d.split(": ");
        SmallVector<StringRef> items;
        rest.split(items, ", ");
        std::vector<std::string> out{"preset " + preset.str()};
        out.insert(out.end(), items.begin(), items.end());
        return out;
      };
      std::vector<std::string> mine = entries(built), theirs = entries(held);
      auto notIn = [](const std::vector<std::string> &a, const std::vector<std::string> &b) {
        std::string out;
        for (const std::string &e : a)
          if (std::find(b.begin(), b.end(), e) == b.end())
            out += (out.empty() ? "" : ", ") + e;
        return out;
      };
      std::string given = notIn(mine, theirs), compiled = notIn(theirs, mine);
      return createStringError(inconvertibleErrorCode(),
                               "--config " + config + " disagrees with the package " + dir +
                                   ": it gives " + given + "; the package was compiled with " +
                                   compiled + " (compile the model again with this --config, "
                                   "or leave the flag out)");
    }
  }
  if (packageDir.getNumOccurrences())
    return createStringError(inconvertibleErrorCode(),
                             "--package-dir " + packageDir + " is where a model compiled here "
                             "is written; " + dir + " is a package, compiled already");
  for (cl::Option *onnxFlag : {static_cast<cl::Option *>(&lossSpec),
                               static_cast<cl::Option *>(&labelsName),
                               static_cast<cl::Option *>(std::addressof(dimSpecs))})
    if (onnxFlag->getNumOccurrences())
      return createStringError(inconvertibleErrorCode(),
                               "--" + onnxFlag->ArgStr.str() + " applies when an ONNX model is "
                               "compiled; " + dir + " is a package, compiled already "
                               "(compile the .onnx file again with it)");
  return Error::success();
}

/// MODEL as a package directory, or compiled into one (cached by content).
Expected<std::string> packageFor(bool training) {
  if (isPackage(model)) {
    if (auto err = checkFlagsAgainstPackage(model))
      return std::move(err);
    return std::string(model);
  }
  mlir::MLIRContext ctx;
  auto g = compileModel(ctx, training);
  if (!g)
    return g.takeError();
  std::string dir = packageDir;
  if (dir.empty()) {
    std::string text;
    raw_string_ostream os(text);
    g->module->print(os);
    // Imported weights are part of what the package holds.
    for (auto &[name, t] : g->description.weights)
      text += name + std::string(t.data.begin(), t.data.end());
    std::string root;
    try {
      root = mlc::rt::cacheRoot();
    } catch (const mlc::rt::Error &e) {
      return createStringError(inconvertibleErrorCode(), e.what());
    }
    const mlc::DataParallelOptions &dp = g->description.dataParallel;
    text += formatv("\nranks {0} buckets {1} {2} clip {3} distributed-optimizer {4}", dp.ranks,
                    dp.bucketCapMb, dp.firstBucketMb, dp.clip, dp.distributedOptimizer)
                .str();
    // And the compiler that lowers it: a rebuilt or upgraded mlc writes new
    // kernels, so its executable's size and time are part of the key.
    struct stat self;
    if (stat("/proc/self/exe", &self) == 0)
      text += formatv("\nmlc {0} {1}", int64_t(self.st_size), int64_t(self.st_mtime)).str();
    dir = root + "/packages/" + sys::path::filename(model).str() + "-" +
          mlc::contentHash(text + std::string(dtype));
    // The key covers everything the package holds: one written whole (its
    // manifest goes last) is reused, by another rank too.
    if (isPackage(dir))
      return dir;
  }
  auto lowered = mlc::writePackage(*g->module, dir, g->description);
  if (!lowered)
    return lowered.takeError();
  return dir;
}

/// Every option of `mlc train` as text, given or default, and the model:
/// the ranks of one run must agree on all of them.
std::map<std::string, std::string> trainSettings(const mlc::rt::TrainOptions &o) {
  std::map<std::string, std::string> out{{"model", model}};
  for (const mlc::rt::TrainFlag &f : mlc::rt::trainFlags())
    out["--" + f.name] = f.value(o);
  for (auto &entry : trainCmd().OptionsMap) {
    cl::Option *opt = entry.getValue();
    std::string v;
    if (auto *s = dynamic_cast<cl::opt<std::string> *>(opt))
      v = *s;
    else if (auto *i = dynamic_cast<cl::opt<int64_t> *>(opt))
      v = std::to_string(*i);
    else if (auto *n = dynamic_cast<cl::opt<int> *>(opt))
      v = std::to_string(*n);
    else if (auto *d = dynamic_cast<cl::opt<double> *>(opt))
      v = formatv("{0}", double(*d)).str();
    else if (auto *b = dynamic_cast<cl::opt<bool> *>(opt))
      v = *b ? "true" : "false";
    else if (auto *l = dynamic_cast<cl::list<std::string> *>(opt))
      v = llvm::join(l->begin(), l->end(), ",");
    else
      continue;
    out.insert({"--" + entry.getKey().str(), v}); // the table's flags as parsed
  }
  return out;
}

} // namespace

int runTrain() {
  mlc::rt::TrainOptions o;
  try {
    o = trainOptions();
    // --config DIR: its tokenizer files go into a --save directory.
    if (std::string preset = StringRef(config).split(',').first.trim().str();
        !preset.empty() && sys::fs::is_directory(preset))
      o.configDir = preset;
    mlc::rt::validate(o);
    world = mlc::rt::openWorld(o.commTimeout);
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  // An error on one rank ends the run on all of them, at once.
  auto failAll = [&](const Twine &msg) {
    if (worldRanks() == 1)
      return fail(msg);
    fail("rank " + Twine(world->rank()) + ": " + msg);
    errs().flush();
    world->abort(1);
    return 1;
  };
  // Ranks that disagree on their settings or package all stop (no abort
  // needed: each one knows); rank 0 says why.
  auto agree = [&](const std::map<std::string, std::string> &settings, const char *what) {
    try {
      mlc::rt::requireSameAsRank0(*world, settings, what);
      return true;
    } catch (const mlc::rt::Error &e) {
      if (world->rank() == 0)
        fail(e.what());
      return false;
    }
  };
  if (worldRanks() > 1) {
    // Ranks started with other settings (mpirun's A : B form) stop here,
    // before any of them compiles.
    if (!agree(trainSettings(o), "settings"))
      return 1;
    if (tensorParallelFlag > 1) {
      try {
        groups = mlc::rt::splitWorld(*world, tensorParallelFlag);
      } catch (const mlc::rt::Error &e) {
        if (world->rank() == 0)
          fail(e.what());
        return 1; // every rank knows
      }
    }
    if (ranksFlag.getNumOccurrences() && ranksFlag != dataRanks())
      return failAll("--ranks " + Twine(int64_t(ranksFlag)) + " but mpirun started " +
                     Twine(dataRanks()) + " data-parallel ranks" +
                     (groups.tensor ? " (" + Twine(worldRanks()) + " ranks over --tensor-parallel " +
                                          Twine(int64_t(tensorParallelFlag)) + ")"
                                    : Twine()));
    ranksFlag = dataRanks();
  }
  if (tensorParallelFlag > 1) {
    if (!groups.tensor)
      return failAll("--tensor-parallel " + Twine(int64_t(tensorParallelFlag)) + " needs " +
                     Twine(int64_t(tensorParallelFlag)) +
                     " ranks per group: start it with mpirun -np " +
                     Twine(int64_t(tensorParallelFlag)) + " (or a multiple)");
    // The group's first rank speaks for it (its other ranks still sample
    // with it: --sample-every runs the group's forward passes together).
    if (groups.tensor->rank() != 0) {
      o.quiet = true;
      o.logJson.clear();
      o.memoryReport.clear();
      o.tensorboardDir.clear();
    }
  }
  if (auto err = takeBatchShapeFromInputs(/*training=*/true))
    return failAll(toString(std::move(err)));
  // Rank 0 compiles (or finds the package in the cache) before the others
  // look for it there.
  Expected<std::string> dir = std::string();
  try {
    if (world && world->rank() != 0)
      world->barrier();
    dir = packageFor(/*training=*/true);
    if (world && world->rank() == 0)
      world->barrier();
  } catch (const mlc::rt::Error &e) {
    return failAll(e.what());
  }
  if (!dir)
    return failAll(toString(dir.takeError()));
  try {
    mlc::rt::Package pkg = mlc::rt::Package::load(*dir);
    if (worldRanks() > 1 && !agree({{"package", mlc::rt::packageHash(pkg)}}, "a package"))
      return 1;
    const int64_t groupRanks = groups.tensor ? groups.tensor->size() : 1;
    if (pkg.tensorParallel != groupRanks)
      return failAll(*dir + " is one rank of a tensor-parallel group of " +
                     Twine(pkg.tensorParallel) + "; this run has groups of " + Twine(groupRanks) +
                     " (--tensor-parallel)");
    if (sequenceParallelFlag && !pkg.sequenceParallel)
      return failAll(*dir + " was compiled without --sequence-parallel (compile it again with "
                            "the flag, or leave it out)");
    auto backend = mlc::rt::createBackend(o.device, pkg, /*verbose=*/!world || world->rank() == 0);
    backend->setCommunicator(groups.data ? groups.data : world);
    backend->setTensorParallel(groups.tensor);
    if (!world || world->rank() == 0)
      errs() << "mlc: training " << pkg.paramCount
             << (groups.tensor ? " parameters per tensor-parallel rank (" : " parameters (")
             << (pkg.computeDtype == "bf16" ? "bf16 products, f32 parameters" : pkg.dtype) << ") on "
             << backend->name()
             << (worldRanks() > 1 ? " x " + std::to_string(worldRanks()) + " ranks (" +
                                        world->name() + ")"
                                  : std::string())
             << (groups.tensor ? ", tensor-parallel groups of " +
                                     std::to_string(groups.tensor->size()) +
                                     (pkg.sequenceParallel ? " (sequence-parallel)" : "")
                               : std::string())
             << " from " << *dir << "\n";
    mlc::rt::train(*backend, o);
  } catch (const mlc::rt::Error &e) {
    return failAll(e.what());
  }
  return 0;
}

int runForward() {
  mlc::rt::TrainOptions o;
  mlc::rt::RunOptions run;
  try {
    o = trainOptions();
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  run.outputDir = outputDir;
  if (run.outputDir.empty())
    return fail("--output-dir is required");
  for (const std::string &spec : inputs) {
    auto [name, file] = StringRef(spec).split('=');
    if (file.empty())
      return fail("--input expects NAME=FILE.npy, got '" + spec + "'");
    run.inputs.push_back({name.str(), file.str()});
  }
  if (auto err = takeBatchShapeFromInputs(/*training=*/false))
    return fail(toString(std::move(err)));
  auto dir = packageFor(/*training=*/false);
  if (!dir)
    return fail(toString(dir.takeError()));
  try {
    mlc::rt::Package pkg = mlc::rt::Package::load(*dir);
    auto backend = mlc::rt::createBackend(o.device, pkg, /*verbose=*/false);
    mlc::rt::runForward(*backend, o, run);
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

int runGenerate() {
  mlc::rt::TrainOptions weights;
  mlc::rt::GenerateOptions g;
  try {
    weights = trainOptions();
    for (cl::opt<std::string> *flag :
         {&genPrompt, &genTokens, &genTemperature, &genTopK, &genTopP, &genPenalty, &genOutputIds, &genTokenizer,
          &genVocab, &genMerges, &genModel})
      if (flag->getNumOccurrences())
        mlc::rt::setGenerateFlag(g, flag->ArgStr.str(), *flag);
    g.seed = weights.seed;
    // --config DIR: its tokenizer and generation_config.json, unless --init
    // is a model directory of its own.
    if (std::string preset = StringRef(config).split(',').first.trim().str();
        !preset.empty() && sys::fs::is_directory(preset))
      g.modelDirectory = preset;
    // An ONNX export beside its model directory (optimum's model.onnx with
    // tokenizer.json and generation_config.json) takes them from there.
    if (isOnnxModel() && g.modelDirectory.empty()) {
      std::string dir = sys::path::parent_path(model.getValue()).str();
      if (dir.empty())
        dir = ".";
      if (sys::fs::exists(dir + "/tokenizer.json") ||
          sys::fs::exists(dir + "/generation_config.json"))
        g.modelDirectory = dir;
    }
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  if (!microBatch.getNumOccurrences())
    microBatch = 1; // one sequence is all generation needs
  // The context is the last --seq-len tokens: by default 128, or all the
  // positions of a builtin model that has fewer.
  if (!seqLen.getNumOccurrences() && (model == "gpt2" || model == "llama")) {
    if (auto cfg = mlc::parseModelConfig(model, config)) {
      int64_t positions = cfg->get(model == "gpt2" ? "n_positions" : "max_position_embeddings");
      if (positions >= 2 && positions < seqLen)
        seqLen = positions;
    } else {
      return fail(toString(cfg.takeError()));
    }
  }
  auto dir = packageFor(/*training=*/false);
  if (!dir)
    return fail(toString(dir.takeError()));
  try {
    mlc::rt::Package pkg = mlc::rt::Package::load(*dir);
    auto backend = mlc::rt::createBackend(weights.device, pkg, /*verbose=*/false);
    mlc::rt::generateText(*backend, weights, g, [](const std::string &piece) {
      outs() << piece;
      outs().flush(); // each token as it comes
    });
    outs() << "\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

} // namespace mlc::tool
