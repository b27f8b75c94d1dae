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

#include "dialects/mlc/MlcDialect.h"
#include "frontend/Models.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace {

cl::OptionCategory category("mlc options");

cl::SubCommand compileCmd("compile",
                          "Build a model's training step and write a package");
cl::SubCommand trainCmd("train", "Compile (if needed) and train a model");
cl::SubCommand runCmd("run", "Run a model's forward pass on given inputs");
cl::SubCommand preprocessCmd(
    "preprocess", "Tokenize a JSONL corpus into a Megatron .bin/.idx dataset");

// Options that every model-taking subcommand shares.
cl::opt<std::string> model(cl::Positional, cl::desc("<gpt2 | bert | model.onnx | package-dir>"),
                           cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd),
                           cl::cat(category));
cl::opt<std::string> config("config",
                            cl::desc("PRESET[,key=value...] with HF config keys "
                                     "(gpt2: tiny, small, medium; bert: tiny, base, large)"),
                            cl::value_desc("spec"), cl::init(""), cl::sub(compileCmd),
                            cl::sub(trainCmd), cl::sub(runCmd), cl::cat(category));
cl::opt<int64_t> microBatch("micro-batch", cl::desc("Sequences per micro-batch"),
                            cl::init(8), cl::sub(compileCmd), cl::sub(trainCmd),
                            cl::sub(runCmd), cl::cat(category));
cl::opt<int64_t> seqLen("seq-len", cl::desc("Tokens per sequence"), cl::init(128),
                        cl::sub(compileCmd), cl::sub(trainCmd), cl::sub(runCmd),
                        cl::cat(category));
cl::opt<std::string> dtype("dtype", cl::desc("Element type: f32 or f64"),
                           cl::init("f32"), cl::sub(compileCmd), cl::sub(trainCmd),
                           cl::sub(runCmd), cl::cat(category));

// compile
enum class Emit { Graph };
cl::opt<Emit> emit("emit", cl::desc("What to print instead of writing a package"),
                   cl::values(clEnumValN(Emit::Graph, "graph",
                                         "the forward graph in the mlc dialect")),
                   cl::init(Emit::Graph), cl::sub(compileCmd), cl::cat(category));
cl::opt<std::string> output("o", cl::desc("Output file ('-' for stdout)"),
                            cl::value_desc("path"), cl::init("-"),
                            cl::sub(compileCmd), cl::cat(category));

// train
cl::opt<int64_t> steps("steps", cl::desc("Optimizer steps"), cl::init(100),
                       cl::sub(trainCmd), cl::cat(category));

// run
cl::list<std::string> inputs("input", cl::desc("NAME=FILE.npy, one per model input"),
                             cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> outputDir("output-dir", cl::desc("Where NAME.npy outputs go"),
                               cl::sub(runCmd), cl::cat(category));

// preprocess
cl::opt<std::string> ppInput("input", cl::desc("JSONL corpus"), cl::sub(preprocessCmd),
                             cl::cat(category));
cl::opt<std::string> ppOutputPrefix("output-prefix",
                                    cl::desc("Writes PREFIX_text_document.{bin,idx}"),
                                    cl::sub(preprocessCmd), cl::cat(category));

int fail(const Twine &msg) {
  WithColor::error(errs(), "mlc") << msg << "\n";
  return 1;
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
                             "'" + model + "': ONNX import and packages are not "
                                           "supported by this build yet");
  }
  return mlc::parseModelConfig(model, config);
}

int runCompile() {
  auto cfg = builtinConfig();
  if (!cfg)
    return fail(toString(cfg.takeError()));
  mlir::MLIRContext ctx;
  mlc::BuildOptions options;
  options.microBatch = microBatch;
  options.seqLen = seqLen;
  options.dtype = dtype;
  auto module = mlc::buildModel(ctx, *cfg, options);
  if (!module)
    return fail(toString(module.takeError()));
  std::string error;
  auto out = mlir::openOutputFile(output, &error);
  if (!out)
    return fail(error);
  (**module)->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}

int notYet(StringRef what) {
  return fail("'mlc " + what + "' is not available in this build yet");
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  for (cl::SubCommand *sub :
       {&cl::SubCommand::getTopLevel(), &compileCmd, &trainCmd, &runCmd, &preprocessCmd})
    cl::HideUnrelatedOptions(category, *sub);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "mlc: compile a language model's training step into fused kernels\n\n"
          "  mlc compile gpt2 --config tiny --emit=graph\n"
          "  mlc <subcommand> --help\n",
          &errs()))
    return 2;
  if (compileCmd)
    return runCompile();
  if (trainCmd)
    return notYet("train");
  if (runCmd)
    return notYet("run");
  if (preprocessCmd)
    return notYet("preprocess");
  errs() << "mlc: no subcommand given; see 'mlc --help'\n";
  return 2;
}
