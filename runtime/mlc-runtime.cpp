//===- mlc-runtime.cpp - train or run a package without the compiler -------===//
//
//   mlc-runtime train PACKAGE [--steps N] [--lr X] ... (the flags of mlc train)
//   mlc-runtime run PACKAGE --input NAME=FILE.npy ... --output-dir DIR [--init W]
//
// Links only the runtime (no MLIR/LLVM): a machine that builds mlc with
// -DMLC_RUNTIME_ONLY=ON runs packages that `mlc compile` wrote elsewhere.
//
//===----------------------------------------------------------------------===//

#include "runtime/CpuBackend.h"
#include "runtime/Error.h"
#include "runtime/Threads.h"
#include "runtime/Trainer.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sys/stat.h>

using namespace mlc::rt;

namespace {

struct Flag {
  const char *help;
  std::function<void(const std::string &)> set;
};

int usage(const std::map<std::string, Flag> &flags, FILE *out) {
  std::fprintf(out, "usage: mlc-runtime train PACKAGE [flags]\n"
                    "       mlc-runtime run PACKAGE --input NAME=FILE.npy ... --output-dir DIR\n"
                    "flags:\n");
  for (auto &[name, flag] : flags)
    std::fprintf(out, "  --%-16s %s\n", name.c_str(), flag.help);
  return out == stdout ? 0 : 2;
}

} // namespace

int main(int argc, char **argv) {
  configureThreadsAndReexec(argv);
  TrainOptions o;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir;
  auto num = [](const std::string &v) { return std::stod(v); };
  auto integer = [](const std::string &v) { return std::stoll(v); };
  std::map<std::string, Flag> flags = {
      {"steps", {"optimizer steps", [&](auto v) { o.steps = integer(v); }}},
      {"lr", {"peak learning rate", [&](auto v) { o.lr = num(v); }}},
      {"min-lr", {"learning rate at the end of the decay", [&](auto v) { o.minLr = num(v); }}},
      {"warmup", {"linear warmup steps", [&](auto v) { o.warmup = integer(v); }}},
      {"lr-schedule", {"constant or cosine", [&](auto v) { o.schedule = v; }}},
      {"weight-decay", {"AdamW weight decay (matrices)", [&](auto v) { o.weightDecay = num(v); }}},
      {"beta1", {"AdamW beta1", [&](auto v) { o.beta1 = num(v); }}},
      {"beta2", {"AdamW beta2", [&](auto v) { o.beta2 = num(v); }}},
      {"eps", {"AdamW epsilon", [&](auto v) { o.eps = num(v); }}},
      {"clip-grad", {"global gradient-norm clip (0 = off)", [&](auto v) { o.clipGrad = num(v); }}},
      {"seed", {"seed of init, data order, dropout", [&](auto v) { o.seed = integer(v); }}},
      {"init", {"initial weights (safetensors)", [&](auto v) { o.init = v; }}},
      {"save", {"write the trained weights", [&](auto v) { o.save = v; }}},
      {"batches", {"NAME.npy per input, leading dim = step", [&](auto v) { o.batchesDir = v; }}},
      {"data", {"indexed dataset PREFIX, blend, or token file", [&](auto v) { o.data = v; }}},
      {"split", {"train/validation/test weights", [&](auto v) { o.split = v; }}},
      {"vocab-file", {"BERT data: WordPiece vocab.txt", [&](auto v) { o.vocabFile = v; }}},
      {"eval-interval", {"validation loss every N steps", [&](auto v) { o.evalInterval = integer(v); }}},
      {"eval-iters", {"validation batches", [&](auto v) { o.evalIters = integer(v); }}},
      {"log-json", {"one JSON object per step", [&](auto v) { o.logJson = v; }}},
      {"log-every", {"progress every N steps", [&](auto v) { o.logEvery = integer(v); }}},
      {"input", {"run: NAME=FILE.npy", [&](auto v) {
         auto eq = v.find('=');
         if (eq == std::string::npos)
           fail("--input expects NAME=FILE.npy, got '" + v + "'");
         inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
       }}},
      {"output-dir", {"run: where NAME.npy outputs go", [&](auto v) { outputDir = v; }}},
  };
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h"))
    return usage(flags, stdout);
  if (argc < 3 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "run"))
    return usage(flags, stderr);
  std::string command = argv[1], dir = argv[2];
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
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        fail("--" + name + " needs a value");
      }
      auto flag = flags.find(name);
      if (flag == flags.end())
        fail("unknown flag --" + name + " (see mlc-runtime --help)");
      flag->second.set(value);
    }
    Package pkg = Package::load(dir);
    CpuBackend backend(pkg, /*verbose=*/true);
    if (command == "train") {
      if (o.schedule != "constant" && o.schedule != "cosine")
        fail("--lr-schedule must be constant or cosine");
      train(backend, o);
      return 0;
    }
    if (outputDir.empty())
      fail("run needs --output-dir");
    if (!o.init.empty())
      loadParameters(backend, o.init);
    else
      initializeParameters(backend, o.seed);
    for (auto &[name, file] : inputs)
      backend.setInput(name, readNpy(file));
    backend.run("evaluate", 0);
    mkdir(outputDir.c_str(), 0755);
    for (const auto &out : pkg.function("evaluate").outputs)
      writeNpy(outputDir + "/" + out.name + ".npy", backend.output("evaluate", out.name));
  } catch (const Error &e) {
    std::fprintf(stderr, "mlc-runtime: error: %s\n", e.what());
    return 1;
  } catch (const std::exception &e) { // bad numbers in flags
    std::fprintf(stderr, "mlc-runtime: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
