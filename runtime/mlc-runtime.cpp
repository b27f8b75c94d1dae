//===- mlc-runtime.cpp - train or run a package without the compiler -------===//
//
//   mlc-runtime train PACKAGE [--steps N] [--lr X] ... (the flags of mlc train)
//   mlc-runtime run PACKAGE --input NAME=FILE.npy ... --output-dir DIR [--init W]
//   mlc-runtime generate PACKAGE --prompt TEXT [--max-tokens N --temperature T ...]
//
// Links only the runtime (no MLIR/LLVM): a machine that builds mlc with
// -DMLC_RUNTIME_ONLY=ON runs packages that `mlc compile` wrote elsewhere.
// The training flags and their defaults are the runtime's one table
// (train/Options.h), the same that `mlc train` reads.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "support/Error.h"
#include "runtime/core/Threads.h"
#include "runtime/train/Generate.h"
#include "runtime/train/Trainer.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace mlc::rt;

namespace {

int usage(FILE *out) {
  std::fprintf(out, "usage: mlc-runtime train PACKAGE [flags]\n"
                    "       mlc-runtime run PACKAGE --input NAME=FILE.npy ... --output-dir DIR\n"
                    "       mlc-runtime generate PACKAGE --prompt TEXT [--max-tokens N] "
                    "[--temperature T] [--top-k K] [--tokenizer-type ByteTokenizer|ByteLevelTokenizer|GPT2BPETokenizer "
                    "--vocab-file F --merge-file F]\n"
                    "flags (train; those marked run also apply to run):\n");
  TrainOptions defaults;
  for (const TrainFlag &f : trainFlags())
    std::fprintf(out, "  --%-14s %-6s %s (default: %s)%s\n", f.name.c_str(),
                 f.valueName.c_str(), f.help.c_str(),
                 f.value(defaults).empty() ? "none" : f.value(defaults).c_str(),
                 f.forRun ? " [run]" : "");
  std::fprintf(out, "  --%-14s %-6s %s\n", "input", "N=F", "run: NAME=FILE.npy, one per input");
  std::fprintf(out, "  --%-14s %-6s %s\n", "output-dir", "dir", "run: where NAME.npy outputs go");
  std::fprintf(out, "  generate: --prompt, --max-tokens (64), --temperature (1; 0 = argmax), "
                    "--top-k (0 = all), --tokenizer-type, --vocab-file, --merge-file\n");
  return out == stdout ? 0 : 2;
}

} // namespace

int main(int argc, char **argv) {
  // Past a file size limit (ulimit -f) a write fails with EFBIG, which the
  // writers report naming the file, instead of SIGXFSZ ending the process
  // with its temporary files left behind.
  std::signal(SIGXFSZ, SIG_IGN);
  configureThreadsAndReexec(argv);
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h"))
    return usage(stdout);
  if (argc < 3 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "run" &&
                    std::string(argv[1]) != "generate"))
    return usage(stderr);
  std::string command = argv[1], dir = argv[2];
  std::map<std::string, const TrainFlag *> flags;
  for (const TrainFlag &f : trainFlags())
    if (command == "train" || f.forRun)
      flags[f.name] = &f;
  TrainOptions o;
  RunOptions run;
  GenerateOptions gen;
  try {
    for (int i = 3; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0)
        fail("unexpected argument '" + arg + "'");
      std::string name = arg.substr(2), value;
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (auto sw = flags.find(name); sw != flags.end() && sw->second->isSwitch) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        fail("--" + name + " needs a value");
      }
      if (command == "run" && name == "input") {
        auto sep = value.find('=');
        if (sep == std::string::npos)
          fail("--input expects NAME=FILE.npy, got '" + value + "'");
        run.inputs.push_back({value.substr(0, sep), value.substr(sep + 1)});
      } else if (command == "run" && name == "output-dir") {
        run.outputDir = value;
      } else if (command == "generate" && setGenerateFlag(gen, name, value)) {
        // one of generate's own flags, now set
      } else if (auto flag = flags.find(name); flag != flags.end()) {
        flag->second->set(o, value);
      } else {
        fail("unknown flag --" + name + " (see mlc-runtime --help)");
      }
    }
    if (command == "train")
      validate(o);
    Package pkg = Package::load(dir);
    std::unique_ptr<Backend> backend = createBackend(o.device, pkg, /*verbose=*/true);
    if (command == "train") {
      train(*backend, o);
    } else if (command == "generate") {
      gen.seed = o.seed;
      generateText(*backend, o, gen, [](const std::string &piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout); // each token as it comes
      });
      std::fputs("\n", stdout);
    } else {
      runForward(*backend, o, run);
    }
  } catch (const Error &e) {
    std::fprintf(stderr, "mlc-runtime: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "mlc-runtime: error: out of memory (the package or its data is larger "
                         "than this machine holds)\n");
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mlc-runtime: error: %s\n", e.what());
    return 1;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "mlc-runtime: error: standard output: write failed: %s\n",
                 std::strerror(errno));
    return 1;
  }
  return 0;
}
