//===- mlc.cpp - the mlc command-line tool ---------------------------------===//
//
//   mlc compile MODEL [--config ...] [--emit=mlir] [-o FILE]
//   mlc train   MODEL [--config ...] [--steps N] ...
//   mlc run     MODEL --input NAME=FILE.npy ... --output-dir DIR
//   mlc preprocess --input FILE.jsonl ... --output-prefix P
//
// MODEL is `gpt2`, `bert`, an ONNX file or a compiled package directory.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcDialect.h"
#include "compiler/Pipeline.h"
#include "frontend/Models.h"
#include "frontend/onnx/OnnxImporter.h"
#include "runtime/data/Balance.h"
#include "runtime/backend/Backend.h"
#include "runtime/backend/Comm.h"
#include "runtime/backend/KernelCache.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/Nvrtc.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/core/Json.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/core/Error.h"
#include "runtime/core/Hash.h"
#include "runtime/data/Preprocess.h"
#include "runtime/core/TensorIO.h"
#include "runtime/core/Threads.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Generate.h"
#include "runtime/train/Plot.h"
#include "runtime/train/Trainer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;

namespace {

cl::OptionCategory category("mlc options");

cl::SubCommand compileCmd("compile",
                          "Build a model's training step and write a package");
cl::SubCommand trainCmd("train", "Compile (if needed) and train a model");
cl::SubCommand runCmd("run", "Run a model's forward pass on given inputs");
cl::SubCommand preprocessCmd(
    "preprocess", "Tokenize a JSONL corpus into a Megatron .bin/.idx dataset");
cl::SubCommand tokenizerCmd("tokenizer",
                            "'train': learn a byte-level BPE (vocab.json, merges.txt) from "
                            "a JSONL corpus");
cl::SubCommand dataCmd("data", "Inspect an indexed dataset: 'stats PREFIX' (length "
                                "balancing across ranks) or 'dump PREFIX' (token ids)");
cl::SubCommand generateCmd("generate", "Sample text from a GPT-style model");
cl::SubCommand plotCmd("plot", "Draw a --log-json file's loss and tokens/s as a PNG");
cl::SubCommand importCmd("import", "Import an ONNX model and print its mlc graph");

// Options that every model-taking subcommand shares.
cl::opt<std::string> model(cl::Positional, cl::desc("<gpt2 | bert | model.onnx | package-dir>"),
                           cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd), cl::sub(generateCmd),
                           cl::sub(importCmd),
                           cl::cat(category));
cl::opt<std::string> config("config",
                            cl::desc("PRESET[,key=value...] with HF config keys "
                                     "(gpt2: tiny, small, medium; bert: tiny, base, large)"),
                            cl::value_desc("spec"), cl::init(""), cl::sub(compileCmd),
                            cl::sub(trainCmd), cl::sub(runCmd), cl::sub(generateCmd), cl::cat(category));
cl::opt<int64_t> microBatch("micro-batch", cl::desc("Sequences per micro-batch"),
                            cl::init(8), cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(importCmd),
                            cl::sub(runCmd), cl::sub(generateCmd), cl::cat(category));
cl::opt<int64_t> seqLen("seq-len", cl::desc("Tokens per sequence"), cl::init(128),
                        cl::sub(compileCmd), cl::sub(importCmd), cl::sub(trainCmd), cl::sub(runCmd), cl::sub(generateCmd),
                        cl::sub(dataCmd), cl::cat(category));
cl::opt<std::string> dtype("dtype",
                           cl::desc("Element type: f32, f64, or bf16 (mixed precision: matrix "
                                    "products in bf16, everything else and the parameters in "
                                    "f32)"),
                           cl::init("f32"), cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(importCmd),
                           cl::sub(runCmd), cl::sub(generateCmd), cl::cat(category));

cl::opt<bool> varlen("varlen",
                     cl::desc("BERT: unpadded batches (packed tokens and cu_seqlens; up to "
                              "micro-batch sequences and micro-batch x seq-len tokens)"),
                     cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd),
                     cl::cat(category));
cl::opt<bool> fuse("fuse",
                   cl::desc("Fuse pointwise chains into single kernels (--fuse=false or "
                            "--no-fuse turns it off)"),
                   cl::init(true), cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd), cl::sub(generateCmd),
                   cl::cat(category));
cl::opt<bool> noFuse("no-fuse", cl::desc("Run every op as its own kernel"),
                     cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd), cl::sub(generateCmd),
                     cl::cat(category));

// ONNX models
cl::opt<std::string> lossSpec(
    "loss",
    cl::desc("ONNX: the training loss: the name of a scalar output, or causal-lm / "
             "masked-lm to compute it from the logits against --labels"),
    cl::value_desc("name|causal-lm|masked-lm"), cl::init("loss"), cl::sub(compileCmd),
    cl::sub(trainCmd), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> labelsName("labels",
                                cl::desc("ONNX with --loss causal-lm|masked-lm: the name of "
                                         "the labels input it adds"),
                                cl::init("labels"), cl::sub(compileCmd), cl::sub(trainCmd),
                                cl::sub(runCmd), cl::cat(category));
cl::list<std::string> dimSpecs("dim",
                               cl::desc("ONNX: NAME=SIZE for a symbolic dim (by default a dim "
                                        "first seen at position 0 of an input is the "
                                        "micro-batch, at position 1 the sequence length)"),
                               cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd),
                               cl::sub(importCmd), cl::cat(category));

// Data parallelism (mlc-bucket-gradients)
cl::opt<int64_t> ranksFlag("ranks",
                           cl::desc("Data-parallel ranks the package runs on: their "
                                    "gradients are summed in buckets that overlap backward"),
                           cl::init(1), cl::sub(compileCmd), cl::sub(trainCmd),
                           cl::cat(category));
cl::opt<double> bucketCapMb("bucket-cap-mb", cl::desc("Gradient bucket size cap in MB"),
                            cl::init(25.0), cl::sub(compileCmd), cl::sub(trainCmd),
                            cl::cat(category));
cl::opt<double> firstBucketMb("first-bucket-mb",
                              cl::desc("Cap of the first gradient bucket in MB (it starts "
                                       "earliest)"),
                              cl::init(1.0), cl::sub(compileCmd), cl::sub(trainCmd),
                              cl::cat(category));

cl::opt<std::string> compileClip("clip",
                                  cl::desc("global, bucket or none: how the training step "
                                           "clips gradients (bucket: each gradient bucket "
                                           "by its own norm before its all-reduce)"),
                                  cl::init("global"), cl::sub(compileCmd), cl::cat(category));

// compile
enum class Emit { Package, Graph, Mlir, Plan, Kernels, Cuda, Ptx };
cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"),
    cl::values(clEnumValN(Emit::Package, "package", "a package directory (default)"),
               clEnumValN(Emit::Graph, "graph", "the forward graph as built, in the mlc dialect"),
               clEnumValN(Emit::Mlir, "mlir", "the final MLIR: @forward and @train_step"),
               clEnumValN(Emit::Plan, "plan", "the plan dialect: buffers, kernels and steps"),
               clEnumValN(Emit::Kernels, "kernels", "the generated C++ kernels"),
               clEnumValN(Emit::Cuda, "cuda", "the generated CUDA kernels (kernels.cu)"),
               clEnumValN(Emit::Ptx, "ptx",
                          "kernels.cu compiled to PTX by NVRTC, for the first --cuda-arch")),
    cl::init(Emit::Package), cl::sub(compileCmd), cl::cat(category));
cl::opt<std::string> output("o",
                            cl::desc("Package directory (default MODEL.mlcpkg), or the "
                                     "output file of --emit ('-' for stdout)"),
                            cl::value_desc("path"), cl::init(""), cl::sub(compileCmd), cl::sub(importCmd),
                            cl::cat(category));
cl::opt<bool> report("report",
                     cl::desc("Print kernel counts and bytes moved per step, unfused and "
                              "fused"),
                     cl::sub(compileCmd), cl::cat(category));
cl::opt<std::string> cudaArch("cuda-arch",
                              cl::desc("--report: the GPU architectures whose ptxas statistics "
                                       "it prints (NVRTC, comma-separated); --emit=ptx: "
                                       "the first one's PTX"),
                              cl::value_desc("sm_XX,..."), cl::init("sm_90"), cl::sub(compileCmd),
                              cl::cat(category));
cl::opt<std::string> reportJson("report-json", cl::desc("Write the report as JSON"),
                                cl::value_desc("file"), cl::sub(compileCmd),
                                cl::cat(category));
cl::opt<bool> inferenceOnly("inference", cl::desc("Compile @forward only (no training step)"),
                            cl::sub(compileCmd), cl::cat(category));

// train and run
cl::opt<std::string> packageDir("package-dir",
                                cl::desc("Where to write the compiled package (default: "
                                         "the cache, keyed by model and options)"),
                                cl::sub(trainCmd), cl::sub(runCmd), cl::sub(generateCmd), cl::cat(category));
// The training flags (--steps, --lr, ..., --seed, --init) are the runtime's
// one table (runtime/train/Options.h): main() registers them for train, and
// those that apply to run for run too.
std::map<std::string, std::unique_ptr<cl::opt<std::string>>> &trainFlagOptions() {
  static std::map<std::string, std::unique_ptr<cl::opt<std::string>>> options;
  return options;
}
void registerTrainFlags() {
  mlc::rt::TrainOptions defaults;
  for (const mlc::rt::TrainFlag &f : mlc::rt::trainFlags()) {
    std::string def = f.value(defaults);
    auto *help = new std::string(f.help + (def.empty() ? "" : " (default " + def + ")"));
    auto *name = new std::string(f.name), *valueName = new std::string(f.valueName);
    if (f.forRun)
      trainFlagOptions()[f.name] = std::make_unique<cl::opt<std::string>>(
          StringRef(*name), cl::desc(*help), cl::value_desc(*valueName), cl::sub(trainCmd),
          cl::sub(runCmd), cl::sub(generateCmd), cl::cat(category));
    else
      trainFlagOptions()[f.name] = std::make_unique<cl::opt<std::string>>(
          StringRef(*name), cl::desc(*help), cl::value_desc(*valueName), cl::sub(trainCmd),
          cl::cat(category));
  }
}
/// The options the command line gave, over the table's defaults.
mlc::rt::TrainOptions trainOptions() {
  mlc::rt::TrainOptions o;
  for (const mlc::rt::TrainFlag &f : mlc::rt::trainFlags()) {
    auto &opt = trainFlagOptions().at(f.name);
    if (opt->getNumOccurrences())
      f.set(o, *opt);
  }
  return o;
}
/// The value of a table flag as given, or "" (for checks before compiling).
std::string givenFlag(const std::string &name) {
  auto &opt = trainFlagOptions().at(name);
  return opt->getNumOccurrences() ? std::string(*opt) : std::string();
}

cl::list<std::string> inputs("input", cl::desc("NAME=FILE.npy, one per model input"),
                             cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> outputDir("output-dir", cl::desc("Where NAME.npy outputs go"),
                               cl::sub(runCmd), cl::cat(category));

// preprocess
cl::opt<std::string> ppInput("input", cl::desc("JSONL corpus"), cl::sub(preprocessCmd),
                             cl::cat(category));
cl::opt<std::string> ppOutputPrefix("output-prefix",
                                    cl::desc("Writes PREFIX_KEY_document.{bin,idx} per JSON key"),
                                    cl::sub(preprocessCmd), cl::cat(category));
cl::list<std::string> ppJsonKeys("json-keys", cl::desc("JSON fields to tokenize (default text)"),
                                 cl::CommaSeparated, cl::sub(preprocessCmd), cl::cat(category));
cl::opt<std::string> ppTokenizer("tokenizer-type",
                                 cl::desc("ByteLevelTokenizer, GPT2BPETokenizer, "
                                          "BertWordPieceLowerCase, BertWordPieceCase "
                                          "(Megatron's names) or ByteTokenizer"),
                                 cl::init("ByteTokenizer"), cl::sub(preprocessCmd),
                                 cl::cat(category));
cl::opt<std::string> ppVocab("vocab-file", cl::desc("Vocabulary (vocab.json or vocab.txt)"),
                             cl::sub(preprocessCmd), cl::cat(category));
cl::opt<std::string> ppMerges("merge-file", cl::desc("BPE merges (merges.txt)"),
                              cl::sub(preprocessCmd), cl::cat(category));
cl::opt<bool> ppAppendEod("append-eod", cl::desc("End every document with the EOD token"),
                          cl::sub(preprocessCmd), cl::cat(category));
cl::opt<int> ppWorkers("workers", cl::desc("Tokenizing threads"), cl::init(1),
                       cl::sub(preprocessCmd), cl::cat(category));
// tokenizer
cl::list<std::string> tokArgs(cl::Positional, cl::desc("train"), cl::sub(tokenizerCmd),
                              cl::cat(category));
cl::opt<std::string> tokInput("input", cl::desc("JSONL corpus"), cl::sub(tokenizerCmd),
                              cl::cat(category));
cl::list<std::string> tokKeys("json-keys", cl::desc("JSON fields to learn from (default text)"),
                              cl::CommaSeparated, cl::sub(tokenizerCmd), cl::cat(category));
cl::opt<int64_t> tokVocab("vocab-size", cl::desc("Entries of the vocabulary"), cl::init(8192),
                          cl::sub(tokenizerCmd), cl::cat(category));
cl::opt<std::string> tokOut("output-dir", cl::desc("Where vocab.json and merges.txt go"),
                            cl::sub(tokenizerCmd), cl::cat(category));

// data
cl::list<std::string> dataArgs(cl::Positional, cl::desc("stats|dump PREFIX"),
                               cl::sub(dataCmd), cl::cat(category));
cl::opt<int> ranks("ranks", cl::desc("Data-parallel ranks"), cl::init(8), cl::sub(dataCmd),
                   cl::cat(category));
cl::opt<int64_t> tokensPerRank("tokens-per-rank",
                               cl::desc("Token budget of one rank's micro-batch"),
                               cl::init(4096), cl::sub(dataCmd), cl::cat(category));
cl::opt<std::string> policy("policy",
                            cl::desc("presort, zigzag or random (default: all, side by side)"),
                            cl::sub(dataCmd), cl::cat(category));
cl::opt<bool> json("json", cl::desc("Print one JSON object keyed by policy"),
                   cl::sub(dataCmd), cl::cat(category));
cl::opt<uint64_t> dataSeed("seed", cl::desc("Seed of the sample order"), cl::init(1234),
                           cl::sub(dataCmd), cl::cat(category));
cl::opt<int64_t> dumpCount("count", cl::desc("Documents to dump"), cl::init(10),
                           cl::sub(dataCmd), cl::cat(category));

// plot
cl::opt<std::string> plotLogFile(cl::Positional, cl::desc("<LOG.jsonl>"), cl::sub(plotCmd),
                                 cl::cat(category));
cl::opt<std::string> plotOut("o", cl::desc("The PNG to write (default loss.png)"),
                             cl::init("loss.png"), cl::value_desc("file"), cl::sub(plotCmd),
                             cl::cat(category));
cl::opt<int> plotWidth("width", cl::desc("Pixels"), cl::init(960), cl::sub(plotCmd),
                       cl::cat(category));
cl::opt<int> plotHeight("height", cl::desc("Pixels"), cl::init(600), cl::sub(plotCmd),
                        cl::cat(category));

// generate
cl::opt<std::string> genPrompt("prompt", cl::desc("The text to continue"), cl::init(""),
                               cl::sub(generateCmd), cl::cat(category));
// The numbers are read as text and parsed by the runtime's generate flags,
// strictly (cl::opt<double> takes '' for 0 and 'nan' for a temperature).
cl::opt<std::string> genTokens("max-tokens", cl::desc("Tokens to generate at most (default 64)"),
                               cl::value_desc("n"), cl::sub(generateCmd), cl::cat(category));
cl::opt<std::string> genTemperature("temperature",
                                    cl::desc("Sampling temperature (0: the most likely token; "
                                             "default 1)"),
                                    cl::value_desc("x"), cl::sub(generateCmd), cl::cat(category));
cl::opt<std::string> genTopK("top-k",
                             cl::desc("Sample from the k most likely tokens (0, the default: all)"),
                             cl::value_desc("k"), cl::sub(generateCmd), cl::cat(category));
cl::opt<std::string> genTokenizer("tokenizer-type",
                                  cl::desc("The data's: ByteTokenizer, ByteLevelTokenizer or "
                                           "GPT2BPETokenizer"),
                                  cl::init("ByteTokenizer"), cl::sub(generateCmd),
                                  cl::cat(category));
cl::opt<std::string> genVocab("vocab-file", cl::desc("GPT2BPETokenizer: vocab.json"),
                              cl::sub(generateCmd), cl::cat(category));
cl::opt<std::string> genMerges("merge-file", cl::desc("GPT2BPETokenizer: merges.txt"),
                               cl::sub(generateCmd), cl::cat(category));

cl::opt<bool> ppStrict("strict", cl::desc("Fail on the first malformed line"),
                       cl::sub(preprocessCmd), cl::cat(category));

int fail(const Twine &msg) {
  WithColor::error(errs(), "mlc") << msg << "\n";
  return 1;
}

bool isPackage(const std::string &path) {
  return sys::fs::exists(path + "/manifest.json");
}

/// Resolves MODEL + --config into a builtin model, or explains what is wrong.
Expected<mlc::ModelConfig> builtinConfig() {
  if (model.empty())
    return createStringError(inconvertibleErrorCode(),
                             "no model given (gpt2, bert, an ONNX file or a package)");
  if (model != "gpt2" && model != "bert") {
    if (!sys::fs::exists(model))
      return createStringError(inconvertibleErrorCode(),
                               "'" + model + "': no such file, and not a builtin "
                                             "model (gpt2, bert)");
    return createStringError(inconvertibleErrorCode(),
                             "'" + model + "' is neither a builtin model (gpt2, bert), an "
                                           "ONNX file (.onnx) nor a package directory");
  }
  return mlc::parseModelConfig(model, config);
}

/// The graph's element type: bf16 builds an f32 graph whose matrix
/// products mlc-autocast narrows.
std::string graphDtype() { return dtype == "bf16" ? "f32" : std::string(dtype); }

bool isOnnxModel() { return mlc::isOnnxPath(model) && !isPackage(model); }

mlc::BuildOptions buildOptions() {
  mlc::BuildOptions options;
  options.microBatch = microBatch;
  options.seqLen = seqLen;
  // bf16 builds the f32 graph; mlc-autocast narrows its products.
  options.dtype = graphDtype();
  options.varlen = varlen;
  return options;
}

/// What the manifest records: the options, with the dtype asked for (bf16
/// where the graph was built in f32).
mlc::BuildOptions manifestOptions() {
  mlc::BuildOptions options = buildOptions();
  options.dtype = dtype;
  return options;
}

/// MODEL's forward graph (the builtin builder or the ONNX importer) and what
/// the package manifest says about it. `layers` > 0 overrides a builtin
/// model's layer count (for reports).
struct Graph {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlc::PackageDescription description;
};
Expected<Graph> buildGraph(mlir::MLIRContext &ctx, int64_t layers = 0) {
  Graph g;
  if (dtype != "f32" && dtype != "f64" && dtype != "bf16")
    return createStringError(inconvertibleErrorCode(),
                             "--dtype must be f32, f64 or bf16 (mixed precision), got '" +
                                 std::string(dtype) + "'");
  if (isOnnxModel()) {
    if (!config.empty())
      return createStringError(inconvertibleErrorCode(),
                               "--config sets a builtin model's hyper-parameters; an ONNX "
                               "model brings its own");
    if (varlen)
      return createStringError(inconvertibleErrorCode(),
                               "--varlen is for the builtin BERT; ONNX models run padded");
    mlc::OnnxImportOptions o;
    o.microBatch = microBatch;
    o.seqLen = seqLen;
    o.dtype = graphDtype();
    o.loss = lossSpec;
    o.labels = labelsName;
    for (const std::string &spec : dimSpecs) {
      auto [name, value] = StringRef(spec).split('=');
      int64_t size;
      if (name.empty() || value.getAsInteger(10, size) || size < 1)
        return createStringError(inconvertibleErrorCode(),
                                 "--dim expects NAME=SIZE with SIZE >= 1, got '" + spec + "'");
      o.dims[name.str()] = size;
    }
    if (microBatch < 1 || seqLen < 1)
      return createStringError(inconvertibleErrorCode(),
                               "--micro-batch and --seq-len must be >= 1");
    auto imported = mlc::importOnnxFile(ctx, model, o);
    if (!imported)
      return imported.takeError();
    g.module = std::move(imported->module);
    std::string file = sys::path::filename(model).str();
    std::string loss = lossSpec == "loss" ? "" : ", loss " + lossSpec;
    g.description = {"onnx", file + ": " + imported->summary + loss, manifestOptions(),
                     std::move(imported->weights)};
    return std::move(g);
  }
  if (lossSpec.getNumOccurrences() || labelsName.getNumOccurrences() ||
      !dimSpecs.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--loss, --labels and --dim apply to ONNX models");
  auto cfg = builtinConfig();
  if (!cfg)
    return cfg.takeError();
  if (layers > 0)
    cfg->values[cfg->family == "gpt2" ? "n_layer" : "num_hidden_layers"] = layers;
  auto module = mlc::buildModel(ctx, *cfg, buildOptions());
  if (!module)
    return module.takeError();
  g.module = std::move(*module);
  g.description = {cfg->family, cfg->preset + ": " + cfg->describe(), manifestOptions(), {}};
  return std::move(g);
}

Expected<mlc::DataParallelOptions> dataParallelOptions() {
  mlc::DataParallelOptions dp;
  if (ranksFlag < 1 || ranksFlag > 65536)
    return createStringError(inconvertibleErrorCode(),
                             "--ranks must be in [1, 65536], got " + std::to_string(ranksFlag));
  if (!(bucketCapMb > 0) || !(firstBucketMb > 0))
    return createStringError(inconvertibleErrorCode(),
                             "--bucket-cap-mb and --first-bucket-mb must be positive");
  dp.ranks = ranksFlag;
  dp.bucketCapMb = bucketCapMb;
  dp.firstBucketMb = firstBucketMb;
  dp.clip = compileCmd ? std::string(compileClip) : givenFlag("clip");
  if (dp.clip.empty())
    dp.clip = "global";
  if (dp.clip != "global" && dp.clip != "bucket" && dp.clip != "none")
    return createStringError(inconvertibleErrorCode(),
                             "--clip must be global, bucket or none, got '" + dp.clip + "'");
  return dp;
}

/// Builds MODEL's graph and runs the pipeline.
Expected<Graph> compileModel(mlir::MLIRContext &ctx, bool training, int64_t layers = 0,
                             std::optional<bool> fused = std::nullopt) {
  auto g = buildGraph(ctx, layers);
  if (!g)
    return g.takeError();
  if (training && g->description.family == "onnx") {
    auto forward = g->module->lookupSymbol<mlir::func::FuncOp>(mlc::kForwardFn);
    bool hasLoss = false;
    for (unsigned i = 0; forward && i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<mlir::StringAttr>(i, "mlc.output"))
        hasLoss |= name.getValue() == "loss";
    if (!hasLoss)
      return createStringError(inconvertibleErrorCode(),
                               model + " has no output named 'loss' to train on; a "
                                       "logits-only export trains with --loss causal-lm "
                                       "(GPT) or --loss masked-lm (BERT)");
  }
  if (auto err = mlc::runPipeline(*g->module, training, fused.value_or(fuse && !noFuse),
                                  dtype == "bf16" ? "bf16" : ""))
    return std::move(err);
  auto dp = dataParallelOptions();
  if (!dp)
    return dp.takeError();
  g->description.dataParallel = *dp;
  return g;
}

/// Writes `text` to `path`: a file by a temporary and a rename (a failure,
/// a full disk, leaves the previous one as it was); "-" and the names of an
/// open descriptor (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N)
/// through that descriptor, so that whatever it is (a file opened for
/// appending, a pipe) keeps its contents; a device or FIFO as a stream,
/// opened as it is. Either way a failed write is an error that names it.
int writeTextTo(const std::string &path, const std::string &text) {
  int fd = -1;
  StringRef p(path);
  if (p == "-" || p == "/dev/stdout")
    fd = 1;
  else if (p == "/dev/stderr")
    fd = 2;
  else if ((p.consume_front("/dev/fd/") || p.consume_front("/proc/self/fd/")) &&
           p.getAsInteger(10, fd))
    fd = -1;
  struct stat st;
  const bool device = fd < 0 && stat(path.c_str(), &st) == 0 &&
                      (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
  if (fd < 0 && !device) {
    try {
      mlc::rt::writeFileAtomically(path, text);
    } catch (const mlc::rt::Error &e) {
      return fail(e.what());
    }
    return 0;
  }
  std::error_code ec;
  std::optional<raw_fd_ostream> file;
  if (fd > 2)
    file.emplace(fd, /*shouldClose=*/false);
  else if (fd < 0)
    file.emplace(path, ec, sys::fs::CD_OpenExisting, sys::fs::FA_Write, sys::fs::OF_Append);
  if (ec)
    return fail(path + ": " + ec.message());
  raw_fd_ostream &os = file ? *file : fd == 2 ? errs() : outs();
  os << text;
  os.flush();
  if (os.has_error()) {
    std::string why = os.error().message();
    os.clear_error();
    return fail((path == "-" ? std::string("standard output") : path) + ": write failed: " +
                why);
  }
  return 0;
}

int writeText(const std::string &text) {
  return writeTextTo(output.empty() ? std::string("-") : std::string(output), text);
}

/// Lowers the model with and without fusion (and with one and two layers, to
/// count per layer) and reports kernels and bytes per training step.
/// An ONNX model has one layer count, its own: its per-layer figure is left out.
/// The report's CUDA part: kernels.cu compiled by NVRTC for each of
/// --cuda-arch, and what ptxas made of every kernel. Spills in the
/// pointwise, row and optimizer kernels are the ones that cost bandwidth;
/// their total is its last line per architecture.
int cudaReport(const std::string &source) {
  std::string why;
  mlc::rt::Nvrtc *nvrtc = mlc::rt::Nvrtc::get(&why);
  if (!nvrtc) {
    outs() << "  CUDA kernels: not compiled (" << why << ")\n";
    return 0;
  }
  try {
    auto kernels = mlc::rt::parseCudaKernels(source, "kernels.cu");
    SmallVector<StringRef> arches;
    StringRef(cudaArch).split(arches, ',', -1, false);
    for (StringRef arch : arches) {
      auto t0 = std::chrono::steady_clock::now();
      auto out = nvrtc->compile(source, "kernels.cu", arch.trim().str(), /*verbose=*/true);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      auto stats = mlc::rt::parsePtxasLog(out.log);
      outs() << formatv("  CUDA kernels for {0} (NVRTC {1}, {2:f1} s, {3} KB cubin): {4}\n",
                        arch.trim(), nvrtc->version(), seconds, out.image.size() / 1024,
                        kernels.size());
      outs() << formatv("    {0,-8} {1,-17} {2,5} {3,12} {4,8} {5,7} {6}\n", "kernel",
                        "template", "regs", "spill st/ld", "smem", "stack", "launches");
      int64_t hotSpills = 0, otherSpills = 0;
      std::vector<const mlc::rt::CudaKernelInfo *> order; // k0, k1, ..., k10
      for (auto &[name, k] : kernels)
        order.push_back(&k);
      std::stable_sort(order.begin(), order.end(), [](auto *a, auto *b) {
        return a->name.size() != b->name.size() ? a->name.size() < b->name.size()
                                                : a->name < b->name;
      });
      for (const mlc::rt::CudaKernelInfo *kp : order) {
        const mlc::rt::CudaKernelInfo &k = *kp;
        const std::string &name = k.name;
        auto it = stats.find(name);
        if (it == stats.end())
          return fail("ptxas reported nothing for kernel " + name + " (" + arch.str() + ")");
        const mlc::rt::PtxasStats &st = it->second;
        std::string launches;
        for (auto &l : k.launches)
          launches += (launches.empty() ? "" : ",") + std::to_string(l.grid) + "x" +
                      std::to_string(l.block);
        outs() << formatv("    {0,-8} {1,-17} {2,5} {3,12} {4,8} {5,7} {6}\n", name, k.kind,
                          st.registers,
                          std::to_string(st.spillStores) + "/" + std::to_string(st.spillLoads),
                          st.sharedBytes, st.stackBytes, launches);
        bool hot = k.kind == "pointwise" || k.kind == "rows" || k.kind == "optimizer";
        (hot ? hotSpills : otherSpills) += st.spillStores + st.spillLoads;
      }
      outs() << formatv("  {0}: spill bytes in pointwise, rows and optimizer kernels: {1}; in "
                        "the others: {2}\n",
                        arch.trim(), hotSpills, otherSpills);
    }
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

int runReport() {
  const bool onnx = isOnnxModel();
  std::string title;
  auto countsFor = [&](int64_t layers, bool fused) -> Expected<mlc::LoweredPackage::Counts> {
    mlir::MLIRContext ctx;
    auto g = compileModel(ctx, /*training=*/true, layers, fused);
    if (!g)
      return g.takeError();
    const std::string &text = g->description.configText;
    title = g->description.family + " (" + text.substr(0, text.find(": ")) + ")";
    auto lowered = mlc::lowerModule(*g->module);
    if (!lowered)
      return lowered.takeError();
    mlc::LoweredPackage::Counts counts = lowered->counts[mlc::kTrainStepFn];
    // The optimizer's kernels (AdamW and the gradient norm), counted from the plan.
    counts.optimizerKernels =
        lowered->counts[mlc::kOptimizerFn].kernels + lowered->counts[mlc::kGradNormFn].kernels;
    return counts;
  };
  struct Side {
    mlc::LoweredPackage::Counts full, one, two;
  } sides[2];
  for (int fused = 0; fused < 2; ++fused) {
    for (auto [layers, out] : {std::pair<int64_t, mlc::LoweredPackage::Counts *>{0, &sides[fused].full},
                               {1, &sides[fused].one},
                               {2, &sides[fused].two}}) {
      if (onnx && layers > 0)
        continue;
      auto c = countsFor(layers, fused);
      if (!c)
        return fail(toString(c.takeError()));
      *out = *c;
    }
  }
  auto perLayer = [&](const Side &s) { return onnx ? int64_t(-1) : s.two.kernels - s.one.kernels; };
  const Side &u = sides[0], &f = sides[1];
  outs() << "mlc report: " << title << ", micro-batch " << microBatch << ", seq-len " << seqLen
         << ", " << dtype << "\n";
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "per training step", "unfused", "fused");
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "kernel launches (GEMMs excluded)",
                    u.full.kernels, f.full.kernels);
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "GEMMs", u.full.gemms, f.full.gemms);
  if (!onnx)
    outs() << formatv("  {0,-38} {1,12} {2,12}\n", "non-GEMM kernels per layer (fwd+bwd)",
                      perLayer(u), perLayer(f));
  outs() << formatv("  {0,-38} {1,12:f1} {2,12:f1}\n", "MB moved (estimate)",
                    u.full.bytes / 1e6, f.full.bytes / 1e6);
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "optimizer kernels (AdamW + norm)",
                    u.full.optimizerKernels, f.full.optimizerKernels);
  {
    // The CUDA kernels of the package these flags compile.
    mlir::MLIRContext ctx;
    auto g = compileModel(ctx, /*training=*/true);
    if (!g)
      return fail(toString(g.takeError()));
    auto lowered = mlc::lowerModule(*g->module, g->description.dataParallel);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    if (int rc = cudaReport(lowered->kernelsCu))
      return rc;
  }
  if (!reportJson.empty()) {
    std::string json = formatv("{{\"kernels_unfused\": {0}, \"kernels_fused\": {1}, "
                               "\"gemms\": {2}, \"nongemm_per_layer\": {3}, "
                               "\"nongemm_per_layer_unfused\": {4}, "
                               "\"optimizer_kernels\": {5}, \"bytes_unfused\": {6}, "
                               "\"bytes_fused\": {7}}\n",
                               u.full.kernels, f.full.kernels, f.full.gemms, perLayer(f),
                               perLayer(u), f.full.optimizerKernels, u.full.bytes, f.full.bytes)
                           .str();
    if (int rc = writeTextTo(reportJson, json))
      return rc;
  }
  return 0;
}

int printGraph() {
  mlir::MLIRContext ctx;
  auto g = buildGraph(ctx);
  if (!g)
    return fail(toString(g.takeError()));
  std::string text;
  raw_string_ostream os(text);
  g->module->print(os);
  return writeText(text + "\n");
}

int runCompile() {
  // What is compiled is never overwritten by what it compiles to: -o (a
  // file, or a package directory that holds the model) or --report-json.
  try {
    mlc::rt::refuseOutputsOverInputs({{"the model", model}},
                                     {{"-o", output}, {"--report-json", reportJson}});
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  if (report || !reportJson.empty())
    return runReport();
  if (emit == Emit::Graph)
    return printGraph();
  mlir::MLIRContext ctx;
  auto g = compileModel(ctx, !inferenceOnly);
  if (!g)
    return fail(toString(g.takeError()));
  mlir::ModuleOp module = *g->module;
  if (emit == Emit::Mlir) {
    std::string text;
    raw_string_ostream os(text);
    module->print(os);
    return writeText(text + "\n");
  }
  if (emit == Emit::Plan) {
    if (auto err = mlc::lowerToPlanPipeline(module, g->description.dataParallel))
      return fail(toString(std::move(err)));
    std::string text;
    raw_string_ostream os(text);
    module->print(os);
    return writeText(text + "\n");
  }
  if (emit == Emit::Kernels || emit == Emit::Cuda) {
    auto lowered = mlc::lowerModule(module, g->description.dataParallel);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    return writeText(emit == Emit::Cuda ? lowered->kernelsCu : lowered->kernelsCpp);
  }
  if (emit == Emit::Ptx) {
    auto lowered = mlc::lowerModule(module, g->description.dataParallel);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    std::string why;
    mlc::rt::Nvrtc *nvrtc = mlc::rt::Nvrtc::get(&why);
    if (!nvrtc)
      return fail("--emit=ptx needs NVRTC: " + why);
    StringRef arch = StringRef(cudaArch).split(',').first.trim();
    if (!arch.starts_with("sm_"))
      return fail("--cuda-arch: expected sm_XX, got '" + arch.str() + "'");
    try {
      std::string ptx = nvrtc->compile(lowered->kernelsCu, "kernels.cu",
                                       ("compute_" + arch.drop_front(3)).str(), false)
                            .image;
      while (!ptx.empty() && ptx.back() == '\0') // NVRTC's PTX ends in its terminator
        ptx.pop_back();
      return writeText(ptx);
    } catch (const mlc::rt::Error &e) {
      return fail(e.what());
    }
  }
  std::string dir = output.empty() ? model + ".mlcpkg" : std::string(output);
  auto lowered = mlc::writePackage(module, dir, g->description);
  if (!lowered)
    return fail(toString(lowered.takeError()));
  for (auto &[fn, c] : lowered->counts)
    outs() << "mlc: @" << fn << ": " << c.kernels << " kernel launches, " << c.gemms
           << " GEMMs\n";
  outs() << "mlc: wrote " << dir << "\n";
  return 0;
}

/// Under mpirun: the world, and the rank that errors are prefixed with.
std::shared_ptr<mlc::rt::Communicator> world;
int worldRanks() { return world ? world->size() : 1; }

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
    int64_t share = microBatch.getNumOccurrences() ? microBatch * worldRanks() : worldRanks();
    if (share <= 0 || shape[0] % share != 0)
      return createStringError(
          inconvertibleErrorCode(),
          ids->second + ": a step's " + std::to_string(shape[0]) + " rows (its global batch) " +
              "do not split evenly over " + std::to_string(worldRanks()) + " ranks" +
              (microBatch.getNumOccurrences()
                   ? " x micro-batches of " + std::to_string(microBatch) : std::string()));
    shape[0] = microBatch.getNumOccurrences() ? int64_t(microBatch) : shape[0] / worldRanks();
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
    return Error::success();
  };
  if (auto err = agree(microBatch, b, "micro-batch"))
    return err;
  return agree(seqLen, s, "sequence length");
}

/// MODEL as a package directory, or compiled into one (cached by content).
Expected<std::string> packageFor(bool training) {
  if (isPackage(model))
    return std::string(model);
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
    text += formatv("\nranks {0} buckets {1} {2} clip {3}", dp.ranks, dp.bucketCapMb,
                    dp.firstBucketMb, dp.clip)
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
  for (auto &entry : trainCmd.OptionsMap) {
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

int runTrain() {
  mlc::rt::TrainOptions o;
  try {
    o = trainOptions();
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
    if (ranksFlag.getNumOccurrences() && ranksFlag != worldRanks())
      return failAll("--ranks " + Twine(int64_t(ranksFlag)) + " but mpirun started " +
                     Twine(worldRanks()) + " ranks");
    ranksFlag = worldRanks();
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
    auto backend = mlc::rt::createBackend(o.device, pkg, /*verbose=*/!world || world->rank() == 0);
    backend->setCommunicator(world);
    if (backend->rank() == 0)
      errs() << "mlc: training " << pkg.paramCount << " parameters ("
             << (pkg.computeDtype == "bf16" ? "bf16 products, f32 parameters" : pkg.dtype) << ") on "
             << backend->name()
             << (worldRanks() > 1 ? " x " + std::to_string(worldRanks()) + " ranks (" +
                                        world->name() + ")"
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
    for (cl::opt<std::string> *flag : {&genPrompt, &genTokens, &genTemperature, &genTopK,
                                       &genTokenizer, &genVocab, &genMerges})
      if (flag->getNumOccurrences())
        mlc::rt::setGenerateFlag(g, flag->ArgStr.str(), *flag);
    g.seed = weights.seed;
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  if (!microBatch.getNumOccurrences())
    microBatch = 1; // one sequence is all generation needs
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

int runPlot() {
  if (plotLogFile.empty())
    return fail("usage: mlc plot LOG.jsonl [-o loss.png]");
  try {
    std::string summary = mlc::rt::plotLog(plotLogFile, plotOut, plotWidth, plotHeight);
    outs() << "mlc plot: " << summary << "\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

int runTokenizer() {
  if (tokArgs.size() != 1 || tokArgs[0] != "train" || tokInput.empty() || tokOut.empty())
    return fail("usage: mlc tokenizer train --input FILE.jsonl [--json-keys text] "
                "--vocab-size N --output-dir DIR");
  std::vector<std::string> keys(tokKeys.begin(), tokKeys.end());
  if (keys.empty())
    keys = {"text"};
  try {
    mlc::rt::refuseOutputsOverInputs({{"--input", tokInput}},
                                     {{"--output-dir", tokOut + "/vocab.json"},
                                      {"--output-dir", tokOut + "/merges.txt"}});
    std::ifstream in(tokInput);
    if (!in)
      return fail(tokInput + ": cannot open");
    std::vector<std::string> texts;
    std::string line;
    int64_t lineNo = 0;
    while (std::getline(in, line)) {
      ++lineNo;
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      try {
        mlc::rt::Json doc = mlc::rt::Json::parse(line, "document");
        for (const std::string &k : keys)
          if (const mlc::rt::Json *t = doc.find(k); t && t->kind == mlc::rt::Json::String)
            texts.push_back(t->string);
      } catch (const mlc::rt::Error &e) {
        errs() << "mlc tokenizer: " << tokInput << ":" << lineNo << ": " << e.what()
               << "; line skipped\n";
      }
    }
    int64_t written = mlc::rt::trainBpe(texts, tokVocab, tokOut);
    outs() << "mlc tokenizer: learned " << written << " entries from " << texts.size()
           << " documents; wrote " << tokOut << "/vocab.json and merges.txt\n";
    if (written < tokVocab)
      errs() << "mlc tokenizer: note: the corpus ran out of pairs to merge before "
             << tokVocab << " entries\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

/// The numeric flags of `mlc data`, each within what it can mean.
int checkDataFlags() {
  struct Range {
    const char *flag;
    int64_t value, lo, hi;
  } ranges[] = {{"--seq-len", seqLen, 1, int64_t(1) << 24},
                {"--ranks", ranks, 1, 1 << 16},
                {"--tokens-per-rank", tokensPerRank, 1, int64_t(1) << 40},
                {"--count", dumpCount, 1, int64_t(1) << 40}};
  for (const Range &r : ranges)
    if (r.value < r.lo || r.value > r.hi)
      return fail(formatv("{0} must be in [{1}, {2}], got {3}", r.flag, r.lo, r.hi, r.value));
  return 0;
}

int runData() {
  if (int rc = checkDataFlags())
    return rc;
  if (dataArgs.size() != 2 ||
      (dataArgs[0] != "stats" && dataArgs[0] != "dump" && dataArgs[0] != "loader"))
    return fail("usage: mlc data stats PREFIX [--seq-len S --ranks R --tokens-per-rank T "
                "--policy P --json] | mlc data dump PREFIX [--count N] | mlc data loader "
                "PREFIX [--seq-len S --count SAMPLES]");
  try {
    if (dataArgs[0] == "loader") {
      // The GPT sample loader alone: tokens per second it can deliver.
      mlc::rt::GptSamples samples(mlc::rt::parseBlend(dataArgs[1]), "969,30,1", 0, seqLen,
                                  dataSeed);
      std::vector<int64_t> buffer(seqLen);
      auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < dumpCount; ++i)
        samples.sample(i, buffer.data());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      outs() << formatv("mlc data loader: {0} samples of {1} tokens in {2:f3} s: {3:f0} "
                        "tokens/s\n",
                        int64_t(dumpCount), int64_t(seqLen), s, dumpCount * seqLen / s);
      return 0;
    }
    mlc::rt::IndexedDataset data(dataArgs[1]);
    if (dataArgs[0] == "dump") {
      std::vector<int64_t> ids;
      for (int64_t d = 0; d < std::min<int64_t>(dumpCount, data.documents()); ++d) {
        for (int64_t q = data.documentStart(d); q < data.documentStart(d + 1); ++q) {
          data.read(q, ids);
          for (size_t i = 0; i < ids.size(); ++i)
            outs() << (i ? " " : "") << ids[i];
          outs() << "\n";
        }
      }
      return 0;
    }
    std::vector<int64_t> lengths;
    for (int64_t d = 0; d < data.documents(); ++d) {
      int64_t n = 0;
      for (int64_t q = data.documentStart(d); q < data.documentStart(d + 1); ++q)
        n += data.length(q);
      lengths.push_back(n);
    }
    std::vector<mlc::rt::BalancePolicy> policies;
    if (policy.empty())
      policies = {mlc::rt::BalancePolicy::Presort, mlc::rt::BalancePolicy::ZigZag,
                  mlc::rt::BalancePolicy::Random};
    else
      policies = {mlc::rt::parseBalancePolicy(policy)};
    if (!json)
      outs() << formatv("{0}: {1} documents; one sample per document, truncated at {2} "
                        "tokens; {3} ranks x {4} tokens\n",
                        dataArgs[1], data.documents(), seqLen, ranks, tokensPerRank);
    std::string object = "{";
    for (auto p : policies) {
      auto st = mlc::rt::balanceStats(lengths, seqLen, ranks, tokensPerRank, p, dataSeed);
      if (json)
        object += formatv("{0}\"{1}\": {{\"imbalance\": {2:f6}, \"padding\": {3:f6}, "
                          "\"padding_to_seq_len\": {4:f6}, \"unpadded_padding\": 0, "
                          "\"steps\": {5}, \"tokens\": {6}}",
                          object.size() > 1 ? ", " : "", policyName(p), st.imbalance,
                          st.padding, st.paddingFixed, st.steps, st.tokens)
                      .str();
      else
        outs() << formatv("  {0,-8} imbalance (max/mean tokens per rank) {1:f4}; padding: "
                          "{2:f1}% padded to each rank's longest, {3:f1}% padded to seq-len, "
                          "0% packed; {4} steps\n",
                          policyName(p), st.imbalance, 100 * st.padding,
                          100 * st.paddingFixed, st.steps);
    }
    if (json)
      outs() << object << "}\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

int runPreprocess() {
  mlc::rt::PreprocessOptions o;
  if (ppInput.empty() || ppOutputPrefix.empty())
    return fail("mlc preprocess needs --input FILE.jsonl and --output-prefix PREFIX");
  o.input = ppInput;
  o.outputPrefix = ppOutputPrefix;
  if (!ppJsonKeys.empty())
    o.jsonKeys.assign(ppJsonKeys.begin(), ppJsonKeys.end());
  o.tokenizerType = ppTokenizer;
  o.vocabFile = ppVocab;
  o.mergeFile = ppMerges;
  o.appendEod = ppAppendEod;
  if (ppWorkers < 1 || ppWorkers > 1024)
    return fail("--workers must be in [1, 1024], got " + std::to_string(ppWorkers));
  o.workers = ppWorkers;
  o.strict = ppStrict;
  try {
    mlc::rt::PreprocessStats s = mlc::rt::preprocess(o);
    outs() << formatv("mlc preprocess: {0} documents ({1} lines skipped), {2} tokens, "
                      "{3:f1} MB in {4:f2} s: {5:f1} MB/s\n",
                      s.documents, s.skipped, s.tokens, s.bytes / 1e6, s.seconds,
                      s.bytes / 1e6 / std::max(s.seconds, 1e-9));
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

} // namespace

/// train, run and preprocess use the CPU runtime's threads.
static void configureThreadsAndReexec(int argc, char **argv) {
  if (argc < 2)
    return;
  std::string sub = argv[1];
  if (sub == "train" || sub == "run" || sub == "preprocess" || sub == "generate")
    mlc::rt::configureThreadsAndReexec(argv);
}

/// The subcommand the command line names.
static int runSubcommand() {
  // Every subcommand reports its own errors; anything else that escapes is
  // still an error message and an exit status, never an abort.
  try {
    if (compileCmd)
      return runCompile();
    if (trainCmd)
      return runTrain();
    if (runCmd)
      return runForward();
    if (preprocessCmd)
      return runPreprocess();
    if (dataCmd)
      return runData();
    if (tokenizerCmd)
      return runTokenizer();
    if (generateCmd)
      return runGenerate();
    if (plotCmd)
      return runPlot();
    if (importCmd) {
      if (!isOnnxModel())
        return fail("mlc import reads an ONNX model (MODEL.onnx)");
      return printGraph();
    }
  } catch (const std::bad_alloc &) {
    return fail("out of memory (the model, batch or data is larger than this machine holds)");
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  errs() << "mlc: no subcommand given; see 'mlc --help'\n";
  return 2;
}

int main(int argc, char **argv) {
  configureThreadsAndReexec(argc, argv);
  InitLLVM init(argc, argv);
  // Past a file size limit (ulimit -f) a write fails with EFBIG, which the
  // writers report naming the file, instead of SIGXFSZ ending mlc with a
  // stack dump. After InitLLVM, whose handlers would catch it.
  std::signal(SIGXFSZ, SIG_IGN);
  registerTrainFlags();
  for (cl::SubCommand *sub :
       {&cl::SubCommand::getTopLevel(), &compileCmd, &trainCmd, &runCmd, &preprocessCmd,
        &dataCmd, &tokenizerCmd, &generateCmd, &plotCmd, &importCmd})
    cl::HideUnrelatedOptions(category, *sub);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "mlc: compile a language model's training step into fused kernels\n\n"
          "  mlc compile gpt2 --config tiny --emit=graph\n"
          "  mlc compile model.onnx -o model.mlcpkg\n"
          "  mlc <subcommand> --help\n",
          &errs()))
    return 2;
  int rc = runSubcommand();
  // Standard output that cannot be written (a full disk) is an error that
  // says so, not LLVM's report at exit.
  outs().flush();
  if (outs().has_error()) {
    std::string why = outs().error().message();
    outs().clear_error();
    return rc ? rc : fail("standard output: write failed: " + why);
  }
  return rc;
}
