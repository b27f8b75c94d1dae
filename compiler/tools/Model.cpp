//===- Model.cpp - MODEL as a graph and through the pipeline ---------------===//

#include "compiler/tools/Model.h"
#include "compiler/tools/MemoryPlan.h"
#include "compiler/tools/Tool.h"

#include "contract/StepFunctions.h"
#include "frontend/Models.h"
#include "frontend/onnx/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <sstream>

using namespace llvm;

namespace mlc::tool {

bool isPackage(const std::string &path) {
  return sys::fs::exists(path + "/manifest.json");
}

bool isOnnxModel() { return mlc::isOnnxPath(model) && !isPackage(model); }

namespace {

/// Resolves MODEL + --config into a builtin model, or explains what is wrong.
Expected<mlc::ModelConfig> builtinConfig() {
  if (model.empty())
    return createStringError(inconvertibleErrorCode(),
                             "no model given (gpt2, bert, llama, an ONNX file or a package)");
  if (model != "gpt2" && model != "bert" && model != "llama") {
    if (!sys::fs::exists(model))
      return createStringError(inconvertibleErrorCode(),
                               "'" + model + "': no such file, and not a builtin "
                                             "model (gpt2, bert, llama)");
    return createStringError(inconvertibleErrorCode(),
                             "'" + model + "' is neither a builtin model (gpt2, bert, llama), an "
                                           "ONNX file (.onnx) nor a package directory");
  }
  return mlc::parseModelConfig(model, config);
}

/// The graph's element type: bf16 builds an f32 graph whose matrix
/// products mlc-autocast narrows.
std::string graphDtype() { return dtype == "bf16" ? "f32" : std::string(dtype); }

mlc::BuildOptions buildOptions() {
  mlc::BuildOptions options;
  options.microBatch = microBatch;
  options.seqLen = seqLen;
  // bf16 builds the f32 graph; mlc-autocast narrows its products.
  options.dtype = graphDtype();
  options.varlen = varlen;
  options.resetAttentionMask = resetAttentionMask;
  options.resetPositionIds = resetPositionIds;
  return options;
}

/// What the manifest records: the options, with the dtype asked for (bf16
/// where the graph was built in f32).
mlc::BuildOptions manifestOptions() {
  mlc::BuildOptions options = buildOptions();
  options.dtype = dtype;
  return options;
}

Expected<mlc::DataParallelOptions> dataParallelOptions() {
  mlc::DataParallelOptions dp;
  if (ranksFlag < 1 || ranksFlag > 65536)
    return createStringError(inconvertibleErrorCode(),
                             "--ranks must be in [1, 65536], got " + std::to_string(ranksFlag));
  if (!(bucketCapMb > 0) || !(firstBucketMb > 0) || !std::isfinite(bucketCapMb) ||
      !std::isfinite(firstBucketMb)) {
    auto text = [](double x) {
      std::ostringstream os;
      os << x;
      return os.str();
    };
    return createStringError(inconvertibleErrorCode(),
                             "--bucket-cap-mb and --first-bucket-mb must be finite and "
                             "positive, got " + text(bucketCapMb) + " and " +
                                 text(firstBucketMb));
  }
  if (tensorParallelFlag < 1 || tensorParallelFlag > 4096)
    return createStringError(inconvertibleErrorCode(),
                             "--tensor-parallel must be in [1, 4096], got " +
                                 std::to_string(tensorParallelFlag));
  if (sequenceParallelFlag && tensorParallelFlag < 2)
    return createStringError(inconvertibleErrorCode(),
                             "--sequence-parallel splits the residual stream over a "
                             "tensor-parallel group: it needs --tensor-parallel T > 1, got " +
                                 std::to_string(tensorParallelFlag));
  dp.ranks = ranksFlag;
  dp.bucketCapMb = bucketCapMb;
  dp.firstBucketMb = firstBucketMb;
  dp.distributedOptimizer = useDistributedOptimizer;
  dp.clip = compileCmd() ? std::string(compileClip) : givenFlag("clip");
  if (dp.clip.empty())
    dp.clip = "global";
  if (dp.clip != "global" && dp.clip != "bucket" && dp.clip != "none")
    return createStringError(inconvertibleErrorCode(),
                             "--clip must be global, bucket or none, got '" + dp.clip + "'");
  return dp;
}

} // namespace

Expected<Graph> buildGraph(mlir::MLIRContext &ctx, int64_t layers) {
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
    if (resetAttentionMask || resetPositionIds)
      return createStringError(inconvertibleErrorCode(),
                               "--reset-attention-mask and --reset-position-ids are built into "
                               "the builtin gpt2 and llama; " + sys::path::filename(model).str() +
                                   " brings its own attention and positions");
    mlc::OnnxImportOptions o;
    o.microBatch = microBatch;
    o.seqLen = seqLen;
    o.capSeqLenAtPositions = !seqLen.getNumOccurrences() && !seqLenFromInputs;
    o.dtype = graphDtype();
    // none: no loss is built or inferred (a forward-only package).
    o.loss = lossSpec == "none" ? "loss" : std::string(lossSpec);
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
    if (!imported->seqLenCappedBy.empty())
      errs() << "mlc: " << file << ": the default sequence length " << seqLen.getValue()
             << " is past the " << imported->seqLenCappedTo << " rows of '"
             << imported->seqLenCappedBy << "': compiling for " << imported->seqLenCappedTo
             << " (--seq-len overrides)\n";
    std::string loss = lossSpec == "auto" || lossSpec == "loss" ? "" : ", loss " + lossSpec;
    g.description = {"onnx", file + ": " + imported->summary + loss, manifestOptions(),
                     std::move(imported->weights)};
    g.description.aliases = std::move(imported->aliases);
    if (!imported->aliasNote.empty())
      errs() << "mlc: " << file << ": note: " << imported->aliasNote << "\n";
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
  std::string packed;
  if (resetAttentionMask || resetPositionIds)
    packed = std::string(", packed documents:") +
             (resetAttentionMask ? " reset-attention-mask" : "") +
             (resetPositionIds ? " reset-position-ids" : "");
  g.description = {cfg->family, cfg->preset + ": " + cfg->describe() + packed,
                   manifestOptions(), {}};
  // None where no transformers class builds the model: --save DIR refuses.
  std::string whyNot;
  g.description.hfConfig = mlc::hfConfigJson(*cfg, whyNot);
  return std::move(g);
}

Expected<Graph> compileModel(mlir::MLIRContext &ctx, bool training, int64_t layers,
                             std::optional<bool> fused) {
  auto g = buildGraph(ctx, layers);
  if (!g)
    return g.takeError();
  bool onnx = g->description.family == "onnx";
  if (onnx && lossSpec == "none") {
    if (trainCmd())
      return createStringError(inconvertibleErrorCode(),
                               "--loss none compiles @forward only; training needs a loss");
    training = false;
  }
  auto forward = g->module->lookupSymbol<mlir::func::FuncOp>(mlc::kForwardFn);
  if (training && onnx) {
    bool hasLoss = forward && forward->hasAttr("mlc.infer_loss"), hasLogits = false;
    for (unsigned i = 0; forward && i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<mlir::StringAttr>(i, "mlc.output")) {
        hasLoss |= name.getValue() == "loss";
        hasLogits |= name.getValue() == "logits";
      }
    if (!hasLoss && hasLogits)
      return createStringError(inconvertibleErrorCode(),
                               model + " has no output named 'loss', and its logits cannot be "
                                       "given one here: it already has an input named '" +
                                   labelsName + "'; pass --loss causal-lm or masked-lm with "
                                                "--labels NAME");
    if (!hasLoss)
      return createStringError(inconvertibleErrorCode(),
                               model + " has no output named 'loss' to train on, nor 'logits' "
                                       "to infer one from; pass --loss NAME (a scalar output)");
  }
  if (!training && forward)
    forward->removeAttr("mlc.infer_loss"); // @forward only: no loss to infer
  if (recompute != "none" && recompute != "full" && recompute != "selective" &&
      recompute != "auto")
    return createStringError(inconvertibleErrorCode(),
                             "--recompute must be full, selective, auto or none, got '" +
                                 std::string(recompute) + "'");
  // Recomputation trades forward activations for backward work: a compile
  // of @forward alone has no backward to recompute in.
  if (!training && recompute != "none")
    return createStringError(inconvertibleErrorCode(),
                             "--recompute " + std::string(recompute) +
                                 " recomputes activations in backward, and this compile "
                                 "(--inference or --loss none) builds @forward only");
  if (recomputeNumLayers.getNumOccurrences() && (recompute != "full" || recomputeNumLayers < 1))
    return createStringError(inconvertibleErrorCode(),
                             "--recompute-num-layers takes N >= 1 layers, with --recompute full; "
                             "got " + std::to_string(recomputeNumLayers) + " with --recompute " +
                                 std::string(recompute));
  std::string recomputeMode = recompute == "none" ? "" : std::string(recompute);
  int64_t recomputeLayers = recomputeNumLayers;
  const bool fuseGraph = fused.value_or(fuse && !noFuse);
  const std::string autocast = dtype == "bf16" ? "bf16" : "";
  if (recompute == "auto" && !training) {
    recomputeMode = ""; // @forward only: nothing is saved for backward
  } else if (const RecomputeChoice *c = recompute == "auto" ? lastRecomputeChoice() : nullptr) {
    // Chosen for this model already: --report's counts compile it again
    // (unfused, with one and two layers) with the same recomputation.
    recomputeMode = c->mode;
    recomputeLayers = c->numLayers;
  } else if (recompute == "auto") {
    // Each candidate is the step compiled and lowered from a copy of the
    // graph; the chosen one is compiled below, as any mode is.
    auto dp = dataParallelOptions();
    if (!dp)
      return dp.takeError();
    auto choice = chooseRecompute(
        [&](const std::string &mode,
            int64_t numLayers) -> Expected<mlir::OwningOpRef<mlir::ModuleOp>> {
          mlir::OwningOpRef<mlir::ModuleOp> trial = g->module->clone();
          if (auto err = mlc::runPipeline(*trial, training, fuseGraph, autocast, mode, numLayers,
                                            tensorParallelFlag, sequenceParallelFlag))
            return std::move(err);
          if (auto err = mlc::lowerToPlanPipeline(*trial, *dp))
            return std::move(err);
          return std::move(trial);
        });
    if (!choice)
      return choice.takeError();
    recomputeMode = choice->mode;
    recomputeLayers = choice->numLayers;
  }
  if (auto err = mlc::runPipeline(*g->module, training, fuseGraph, autocast, recomputeMode,
                                  recomputeLayers, tensorParallelFlag, sequenceParallelFlag))
    return std::move(err);
  forward = g->module->lookupSymbol<mlir::func::FuncOp>(mlc::kForwardFn);
  if (auto inferred = forward ? forward->getAttrOfType<mlir::StringAttr>("mlc.inferred_loss")
                              : mlir::StringAttr()) {
    bool causal = inferred.getValue() == "causal-lm";
    errs() << "mlc: " << sys::path::filename(model) << " returns no loss: training on the "
           << inferred.getValue() << " loss ("
           << (causal ? "its attention is causal" : "bidirectional attention, vocabulary-sized "
                                                     "logits")
           << "; --loss overrides)\n";
    g->description.configText += ", loss " + inferred.getValue().str() + " (inferred)";
  }
  auto dp = dataParallelOptions();
  if (!dp)
    return dp.takeError();
  g->description.dataParallel = *dp;
  g->description.fused = fused.value_or(fuse && !noFuse);
  // What was compiled: under auto, what it chose (full+selective: full on
  // the first recompute_num_layers layers, selective elsewhere).
  g->description.recompute =
      training && !recomputeMode.empty() ? recomputeMode : std::string("none");
  g->description.recomputeNumLayers = training ? recomputeLayers : -1;
  return g;
}

} // namespace mlc::tool
