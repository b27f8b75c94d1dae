//===- Pipeline.cpp - from model to package --------------------------------===//

#include "compiler/Pipeline.h"
#include "frontend/Frontend.h"
#include "compiler/codegen/Passes.h"
#include "passes/Pipelines.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "support/Json.h"
#include "runtime/core/Package.h"
#include "support/TensorIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <iomanip>
#include <sstream>

using namespace mlir;

namespace mlc {

namespace {

/// Runs `pm` on the module; the diagnostics, each with its location when
/// `withLocations`, become the error.
llvm::Error runPasses(PassManager &pm, ModuleOp module, const llvm::Twine &what,
                      bool withLocations) {
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (withLocations && !isa<UnknownLoc>(d.getLocation()))
      os << d.getLocation() << ": ";
    os << d << "\n";
    return success();
  });
  if (succeeded(pm.run(module)))
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 what + llvm::StringRef(diagnostics).rtrim());
}

} // namespace

llvm::Error runPipeline(ModuleOp module, bool training, bool fuse, const std::string &autocast,
                        const std::string &recompute, int64_t recomputeNumLayers,
                        int64_t tensorParallel, bool sequenceParallel) {
  if (auto err = verifyFrontendModule(module, training))
    return err;
  PassManager pm(module.getContext());
  GraphPipelineOptions options;
  options.training = training;
  options.fuse = fuse;
  options.autocast = autocast;
  options.recompute = recompute;
  options.recomputeNumLayers = recomputeNumLayers;
  options.tensorParallel = tensorParallel;
  options.sequenceParallel = sequenceParallel;
  buildGraphPipeline(pm, options);
  return runPasses(pm, module, "compilation failed:\n", /*withLocations=*/true);
}

llvm::Error lowerToPlanPipeline(ModuleOp module, const DataParallelOptions &dp) {
  PassManager pm(module.getContext());
  LoweringPipelineOptions options;
  options.ranks = dp.ranks;
  options.capMb = dp.bucketCapMb;
  options.firstBucketMb = dp.firstBucketMb;
  options.clip = dp.clip;
  options.distributedOptimizer = dp.distributedOptimizer;
  buildLoweringPipeline(pm, options);
  // A lowering error is on the op that failed: its location names the ONNX
  // node or the builtin layer.
  return runPasses(pm, module, "", /*withLocations=*/true);
}

llvm::Expected<LoweredPackage> lowerModule(ModuleOp module, const DataParallelOptions &dp) {
  if (auto err = lowerToPlanPipeline(module, dp))
    return std::move(err);
  return serializePlan(module);
}

/// A finite double as JSON writes it (25, 0.5, 1e-05).
static std::string numberText(double x) {
  std::ostringstream os;
  os << std::setprecision(15) << x; // what a user typed reads back the same
  return os.str();
}

llvm::Expected<LoweredPackage> writePackage(ModuleOp module, const std::string &dir,
                                            const PackageDescription &d) {
  // The final graph, for inspection, before the lowering replaces it.
  std::string graph;
  {
    llvm::raw_string_ostream os(graph);
    module->print(os);
  }
  if (auto err = lowerToPlanPipeline(module, d.dataParallel))
    return std::move(err);
  if (d.checkPlan)
    if (auto err = d.checkPlan(module))
      return std::move(err);
  auto lowered = serializePlan(module);
  if (!lowered)
    return lowered.takeError();
  bool existed = llvm::sys::fs::exists(dir);
  if (auto ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create package directory " + dir);
  std::map<std::string, std::string> files = {{"plan.txt", lowered->plan},
                                              {"kernels.cpp", lowered->kernelsCpp},
                                              {"graph.mlir", graph}};
  if (!lowered->kernelsCu.empty())
    files["kernels.cu"] = lowered->kernelsCu;
  if (!d.weights.empty())
    files["weights.safetensors"] = rt::encodeSafetensors(d.weights);
  if (!d.hfConfig.empty())
    files["hf_config.json"] = d.hfConfig;
  if (!d.aliases.empty()) {
    std::string json = "{";
    for (auto &[param, names] : d.aliases) {
      json += std::string(json.size() > 1 ? "," : "") + "\n  " + rt::jsonQuote(param) + ": [";
      for (size_t k = 0; k < names.size(); ++k)
        json += (k ? ", " : "") + rt::jsonQuote(names[k]);
      json += "]";
    }
    files["aliases.json"] = json + "\n}\n";
  }
  std::string manifest = "{\n  \"format\": \"mlc-package\",\n  \"version\": " +
                         std::to_string(rt::kPackageVersion) + ",\n  \"model\": " +
                         rt::jsonQuote(d.family) + ",\n  \"config\": " +
                         rt::jsonQuote(d.configText) + ",\n  \"dtype\": " +
                         rt::jsonQuote(d.options.dtype) + ",\n  \"micro_batch\": " +
                         std::to_string(d.options.microBatch) + ",\n  \"seq_len\": " +
                         std::to_string(d.options.seqLen) + ",\n  \"fields_hash\": " +
                         rt::jsonQuote(rt::manifestFieldsHash(d.family, d.configText,
                                                              d.options.dtype,
                                                              d.options.microBatch,
                                                              d.options.seqLen)) +
                         ",\n  \"ranks\": " + std::to_string(d.dataParallel.ranks) +
                         // The other compile flags: what `mlc train PACKAGE` checks
                         // the flags given with a package against.
                         ",\n  \"fuse\": " + (d.fused ? "true" : "false") +
                         ",\n  \"recompute\": " + rt::jsonQuote(d.recompute) +
                         ",\n  \"recompute_num_layers\": " +
                         std::to_string(d.recomputeNumLayers) +
                         ",\n  \"varlen\": " + (d.options.varlen ? "true" : "false") +
                         ",\n  \"reset_attention_mask\": " +
                         (d.options.resetAttentionMask ? "true" : "false") +
                         ",\n  \"reset_position_ids\": " +
                         (d.options.resetPositionIds ? "true" : "false") +
                         ",\n  \"bucket_cap_mb\": " +
                         numberText(d.dataParallel.bucketCapMb) +
                         ",\n  \"first_bucket_mb\": " +
                         numberText(d.dataParallel.firstBucketMb) +
                         ",\n  \"distributed_optimizer\": " +
                         (d.dataParallel.distributedOptimizer ? "true" : "false") +
                         ",\n  \"kernels\": {";
  bool first = true;
  for (auto &[fn, c] : lowered->counts) {
    manifest += std::string(first ? "" : ",") + "\n    " + rt::jsonQuote(fn) +
                ": {\"launches\": " + std::to_string(c.kernels) +
                ", \"gemms\": " + std::to_string(c.gemms) + "}";
    first = false;
  }
  manifest += "\n  },\n  \"files\": {";
  first = true;
  for (auto &[name, bytes] : files) {
    manifest += std::string(first ? "" : ",") + "\n    " + rt::jsonQuote(name) + ": " +
                rt::jsonQuote(contentHash(bytes));
    first = false;
  }
  manifest += "\n  }\n}\n";
  // All written before any replaces a previous package's file (a full disk
  // leaves that package as it was); the manifest goes last: a package
  // without one is incomplete, never stale.
  std::vector<std::pair<std::string, std::string>> paths;
  for (auto &[name, bytes] : files)
    paths.push_back({dir + "/" + name, std::move(bytes)});
  paths.push_back({dir + "/manifest.json", manifest});
  try {
    rt::writeFilesAtomically(paths);
  } catch (const ::mlc::rt::Error &e) {
    if (!existed)
      llvm::sys::fs::remove(dir); // empty again: no temporary file is left
    return llvm::createStringError(llvm::inconvertibleErrorCode(), e.what());
  }
  return lowered;
}

} // namespace mlc
