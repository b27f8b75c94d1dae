//===- mlc.cpp - the mlc command-line tool ---------------------------------===//
//
//   mlc compile MODEL [--config ...] [--emit=mlir] [-o FILE]
//   mlc train   MODEL [--config ...] [--steps N] ...
//   mlc run     MODEL --input NAME=FILE.npy ... --output-dir DIR
//   mlc preprocess --input FILE.jsonl ... --output-prefix P
//
// MODEL is `gpt2`, `bert`, an ONNX file or a compiled package directory.
// This file is the main: it parses the command line and runs the named
// subcommand, whose body is in compiler/tools/ (Tool.h says which file).
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Tool.h"

#include "runtime/core/Threads.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

#include <csignal>
#include <new>

using namespace llvm;
using namespace mlc::tool;

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
    if (compileCmd())
      return runCompile();
    if (trainCmd())
      return runTrain();
    if (runCmd())
      return runForward();
    if (preprocessCmd())
      return runPreprocess();
    if (dataCmd())
      return runData();
    if (tokenizerCmd())
      return runTokenizer();
    if (generateCmd())
      return runGenerate();
    if (plotCmd())
      return runPlot();
    if (importCmd())
      return runImport();
    if (exportOnnxCmd())
      return runExportOnnx();
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
       {&cl::SubCommand::getTopLevel(), &compileCmd(), &trainCmd(), &runCmd(),
        &preprocessCmd(), &dataCmd(), &tokenizerCmd(), &generateCmd(), &plotCmd(),
        &importCmd(), &exportOnnxCmd()})
    cl::HideUnrelatedOptions(category(), *sub);
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
