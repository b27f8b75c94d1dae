//===- Options.cpp - the subcommands and the flags they share --------------===//
//
// One row per flag that several subcommands take; each row names the
// subcommands that take it. A subcommand's own flags are in its file.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Tool.h"

#include "llvm/Support/WithColor.h"

#include <map>
#include <memory>

using namespace llvm;

namespace mlc::tool {

cl::OptionCategory &category() {
  static cl::OptionCategory c("mlc options");
  return c;
}

cl::SubCommand &compileCmd() {
  static cl::SubCommand c("compile", "Build a model's training step and write a package");
  return c;
}
cl::SubCommand &trainCmd() {
  static cl::SubCommand c("train", "Compile (if needed) and train a model");
  return c;
}
cl::SubCommand &runCmd() {
  static cl::SubCommand c("run", "Run a model's forward pass on given inputs");
  return c;
}
cl::SubCommand &preprocessCmd() {
  static cl::SubCommand c("preprocess",
                          "Tokenize a JSONL corpus into a Megatron .bin/.idx dataset");
  return c;
}
cl::SubCommand &tokenizerCmd() {
  static cl::SubCommand c("tokenizer",
                          "'train': learn a byte-level BPE (vocab.json, merges.txt) from "
                          "a JSONL corpus");
  return c;
}
cl::SubCommand &dataCmd() {
  static cl::SubCommand c("data", "Inspect an indexed dataset: 'stats PREFIX' (length "
                                  "balancing across ranks) or 'dump PREFIX' (token ids)");
  return c;
}
cl::SubCommand &generateCmd() {
  static cl::SubCommand c("generate", "Sample text from a GPT-style model");
  return c;
}
cl::SubCommand &plotCmd() {
  static cl::SubCommand c("plot", "Draw a --log-json file's loss and tokens/s as a PNG");
  return c;
}
cl::SubCommand &importCmd() {
  static cl::SubCommand c("import", "Import an ONNX model and print its mlc graph");
  return c;
}
cl::SubCommand &exportOnnxCmd() {
  static cl::SubCommand c("export-onnx",
                          "Write an ONNX model with its initializers replaced by trained "
                          "weights (mlc train --save)");
  return c;
}

// MODEL and its shape.
cl::opt<std::string> model(cl::Positional, cl::desc("<gpt2 | bert | llama | model.onnx | package-dir>"),
                           cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()),
                           cl::sub(generateCmd()), cl::sub(importCmd()), cl::cat(category()));
cl::opt<std::string> config("config",
                            cl::desc("PRESET|config.json[,key=value...] with HF config keys "
                                     "(gpt2: tiny, small, medium, gpt2-xl; bert: tiny, base, large; "
                                     "llama: tiny, qwen2-tiny, tinyllama-1.1b, llama-3.2-1b, llama-3-8b, llama-3.1-8b, llama-3-70b, "
                                     "qwen2-0.5b)"),
                            cl::value_desc("spec"), cl::init(""), cl::sub(compileCmd()),
                            cl::sub(trainCmd()), cl::sub(runCmd()), cl::sub(generateCmd()),
                            cl::cat(category()));
cl::opt<int64_t> microBatch("micro-batch", cl::desc("Sequences per micro-batch"), cl::init(8),
                            cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(importCmd()),
                            cl::sub(runCmd()), cl::sub(generateCmd()), cl::cat(category()));
bool seqLenFromInputs = false;
cl::opt<int64_t> seqLen("seq-len", cl::desc("Tokens per sequence"), cl::init(128),
                        cl::sub(compileCmd()), cl::sub(importCmd()), cl::sub(trainCmd()),
                        cl::sub(runCmd()), cl::sub(generateCmd()), cl::sub(dataCmd()),
                        cl::cat(category()));
cl::opt<std::string> dtype("dtype",
                           cl::desc("Element type: f32, f64, or bf16 (mixed precision: matrix "
                                    "products in bf16, everything else and the parameters in "
                                    "f32)"),
                           cl::init("f32"), cl::sub(compileCmd()), cl::sub(trainCmd()),
                           cl::sub(importCmd()), cl::sub(runCmd()), cl::sub(generateCmd()),
                           cl::cat(category()));
cl::opt<bool> varlen("varlen",
                     cl::desc("BERT: unpadded batches (packed tokens and cu_seqlens; up to "
                              "micro-batch sequences and micro-batch x seq-len tokens)"),
                     cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()),
                     cl::cat(category()));
cl::opt<bool> resetAttentionMask(
    "reset-attention-mask",
    cl::desc("GPT-2 or Llama on packed documents (Megatron-LM's): a token attends only to "
             "its own document's earlier tokens; attention is variable-length causal over the "
             "micro-batch's tokens, the documents' boundaries (split at EOD) in the input "
             "cu_seqlens [micro-batch x seq-len + 1]"),
    cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()), cl::sub(generateCmd()),
    cl::cat(category()));
cl::opt<bool> resetPositionIds(
    "reset-position-ids",
    cl::desc("GPT-2 or Llama on packed documents (Megatron-LM's): positions restart at 0 "
             "after each EOD, from the input position_ids [micro-batch, seq-len]"),
    cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()), cl::sub(generateCmd()),
    cl::cat(category()));
cl::opt<bool> fuse("fuse",
                   cl::desc("Fuse pointwise chains into single kernels (--fuse=false or "
                            "--no-fuse turns it off)"),
                   cl::init(true), cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()),
                   cl::sub(generateCmd()), cl::cat(category()));
cl::opt<bool> noFuse("no-fuse", cl::desc("Run every op as its own kernel"),
                     cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()),
                     cl::sub(generateCmd()), cl::cat(category()));

// Activation recomputation (mlc-recompute): Megatron-LM's spelling is an
// alias.
cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Recompute activations in backward instead of keeping them from forward: full "
             "(each transformer layer keeps only its input and recomputes the rest, GEMMs "
             "included), selective (recompute the norms' and the pointwise ops' outputs, "
             "no GEMM), auto (with --device-memory: the least recomputation whose plan fits, "
             "selective then whole layers; mlc compile), or none"),
    cl::value_desc("full|selective|auto|none"), cl::init("none"), cl::sub(compileCmd()),
    cl::sub(trainCmd()), cl::cat(category()));
cl::opt<int64_t> recomputeNumLayers(
    "recompute-num-layers",
    cl::desc("With --recompute full: recompute only the first N layers, the others keep "
             "every activation (Megatron-LM's block method); -1: every layer"),
    cl::init(-1), cl::sub(compileCmd()), cl::sub(trainCmd()), cl::cat(category()));
cl::alias recomputeGranularity("recompute-granularity",
                               cl::desc("Alias for --recompute (Megatron-LM's name)"),
                               cl::aliasopt(recompute), cl::cat(category()));

// ONNX models.
cl::opt<std::string> lossSpec(
    "loss",
    cl::desc("ONNX: the training loss: auto (the output 'loss', else inferred from the "
             "recognized attention: causal -> causal-lm, bidirectional -> masked-lm), the "
             "name of a scalar output, causal-lm / masked-lm to compute it from the logits "
             "against --labels, or none (compile @forward only)"),
    cl::value_desc("auto|name|causal-lm|masked-lm|none"), cl::init("auto"), cl::sub(compileCmd()),
    cl::sub(trainCmd()), cl::sub(runCmd()), cl::cat(category()));
cl::opt<std::string> labelsName("labels",
                                cl::desc("ONNX with --loss causal-lm|masked-lm: the name of "
                                         "the labels input it adds"),
                                cl::init("labels"), cl::sub(compileCmd()), cl::sub(trainCmd()),
                                cl::sub(runCmd()), cl::cat(category()));
cl::list<std::string> dimSpecs("dim",
                               cl::desc("ONNX: NAME=SIZE for a symbolic dim (by default a dim "
                                        "first seen at position 0 of an input is the "
                                        "micro-batch, at position 1 the sequence length)"),
                               cl::sub(compileCmd()), cl::sub(trainCmd()), cl::sub(runCmd()),
                               cl::sub(importCmd()), cl::cat(category()));

// Data parallelism (mlc-bucket-gradients).
cl::opt<int64_t> ranksFlag("ranks",
                           cl::desc("Data-parallel ranks the package runs on: their "
                                    "gradients are summed in buckets that overlap backward"),
                           cl::init(1), cl::sub(compileCmd()), cl::sub(trainCmd()),
                           cl::cat(category()));
// Tensor parallelism (mlc-shard-tensor-parallel).
cl::opt<int64_t> tensorParallelFlag(
    "tensor-parallel",
    cl::desc("Tensor-parallel ranks T: each layer's attention heads and MLP units are split "
             "over T consecutive ranks (Megatron's layout); under mpirun -np R, R = T x the "
             "data-parallel ranks"),
    cl::init(1), cl::sub(compileCmd()), cl::sub(trainCmd()), cl::cat(category()));
cl::alias tensorModelParallelSize("tensor-model-parallel-size",
                                  cl::desc("Megatron's name for --tensor-parallel"),
                                  cl::aliasopt(tensorParallelFlag));
cl::opt<bool> sequenceParallelFlag(
    "sequence-parallel",
    cl::desc("With --tensor-parallel T > 1: the residual stream between the parallel regions "
             "(its norms, dropout, residual adds) runs on each rank's 1/T of the tokens, the "
             "regions' all-reduces become all-gathers and reduce-scatters (Megatron's "
             "--sequence-parallel)"),
    cl::init(false), cl::sub(compileCmd()), cl::sub(trainCmd()), cl::cat(category()));
cl::opt<double> bucketCapMb("bucket-cap-mb", cl::desc("Gradient bucket size cap in MB"),
                            cl::init(25.0), cl::sub(compileCmd()), cl::sub(trainCmd()),
                            cl::cat(category()));
cl::opt<double> firstBucketMb("first-bucket-mb",
                              cl::desc("Cap of the first gradient bucket in MB (it starts "
                                       "earliest)"),
                              cl::init(1.0), cl::sub(compileCmd()), cl::sub(trainCmd()),
                              cl::cat(category()));
cl::opt<bool> useDistributedOptimizer(
    "use-distributed-optimizer",
    cl::desc("Shard the AdamW moments and update over the data-parallel ranks (Megatron's "
             "flag, ZeRO-1): each bucket is reduce-scattered, each rank updates its shard "
             "and the updated parameters are all-gathered per bucket"),
    cl::init(false), cl::sub(compileCmd()), cl::sub(trainCmd()), cl::cat(category()));
cl::opt<std::string> compileClip("clip",
                                 cl::desc("global, bucket or none: how the training step "
                                          "clips gradients (bucket: each gradient bucket "
                                          "by its own norm before its all-reduce)"),
                                 cl::init("global"), cl::sub(compileCmd()),
                                 cl::cat(category()));

cl::opt<std::string> packageDir("package-dir",
                                cl::desc("Where to write the compiled package (default: "
                                         "the cache, keyed by model and options)"),
                                cl::sub(trainCmd()), cl::sub(runCmd()), cl::sub(generateCmd()),
                                cl::cat(category()));

// The training flags (--steps, --lr, ..., --seed, --init) are the runtime's
// one table (runtime/train/Options.h): train takes them all, run and
// generate those marked forRun.
namespace {
std::map<std::string, std::unique_ptr<cl::opt<std::string>>> &trainFlagOptions() {
  static std::map<std::string, std::unique_ptr<cl::opt<std::string>>> options;
  return options;
}
} // namespace

void registerTrainFlags() {
  mlc::rt::TrainOptions defaults;
  for (const mlc::rt::TrainFlag &f : mlc::rt::trainFlags()) {
    std::string def = f.value(defaults);
    // cl::opt keeps StringRefs: the strings live as long as the program.
    auto *help = new std::string(f.help + (def.empty() ? "" : " (default " + def + ")"));
    auto *name = new std::string(f.name), *valueName = new std::string(f.valueName);
    auto valueWanted = f.isSwitch ? cl::ValueOptional : cl::ValueRequired;
    if (f.forRun)
      trainFlagOptions()[f.name] = std::make_unique<cl::opt<std::string>>(
          StringRef(*name), cl::desc(*help), cl::value_desc(*valueName), cl::sub(trainCmd()),
          cl::sub(runCmd()), cl::sub(generateCmd()), cl::cat(category()));
    else
      trainFlagOptions()[f.name] = std::make_unique<cl::opt<std::string>>(
          StringRef(*name), cl::desc(*help), cl::value_desc(*valueName), cl::sub(trainCmd()),
          valueWanted, cl::cat(category()));
  }
}

mlc::rt::TrainOptions trainOptions() {
  mlc::rt::TrainOptions o;
  for (const mlc::rt::TrainFlag &f : mlc::rt::trainFlags()) {
    auto &opt = trainFlagOptions().at(f.name);
    if (opt->getNumOccurrences())
      f.set(o, *opt);
  }
  return o;
}

std::string givenFlag(const std::string &name) {
  auto &opt = trainFlagOptions().at(name);
  return opt->getNumOccurrences() ? std::string(*opt) : std::string();
}

int fail(const Twine &msg) {
  // One write of the whole line where stderr is not a terminal: under
  // mpirun every rank that fails writes to the same pipe, and a line
  // written in pieces would interleave with another rank's.
  if (errs().has_colors()) {
    WithColor::error(errs(), "mlc") << msg << "\n";
    return 1;
  }
  std::string line;
  raw_string_ostream os(line);
  os << "mlc: error: " << msg << "\n";
  errs() << os.str();
  return 1;
}

} // namespace mlc::tool
