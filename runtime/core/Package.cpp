//===- Package.cpp - reading a compiled package ----------------------------===//

#include "runtime/core/Package.h"
#include "contract/StepFunctions.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "support/TensorIO.h"

#include <sstream>
#include <sys/stat.h>

namespace mlc::rt {

std::string manifestFieldsHash(const std::string &model, const std::string &config,
                               const std::string &dtype, int64_t microBatch, int64_t seqLen) {
  return contentHash(model + "\n" + config + "\n" + dtype + "\n" + std::to_string(microBatch) +
                     "\n" + std::to_string(seqLen));
}

namespace {

std::map<std::string, std::vector<std::string>>
parseAliases(const std::string &text, const std::string &path, const Package &pkg) {
  Json json = Json::parse(text, path, /*uniqueKeys=*/true);
  if (json.kind != Json::Object)
    fail(path + ": expected an object of parameter -> [alias names]");
  std::map<std::string, std::vector<std::string>> out;
  std::map<std::string, std::string> seen; // alias -> parameter
  for (auto &[param, names] : json.object) {
    if (!pkg.param(param))
      fail(path + ": '" + param + "' is not a parameter of the package");
    if (names.kind != Json::Array)
      fail(path + ": the aliases of '" + param + "' are not an array of names");
    for (const Json &n : names.array) {
      if (n.kind != Json::String || n.string.empty())
        fail(path + ": an alias of '" + param + "' is not a name");
      if (pkg.param(n.string) || !seen.emplace(n.string, param).second)
        fail(path + ": alias '" + n.string + "' of '" + param + "' is already the name of " +
             (pkg.param(n.string) ? "a parameter" : "an alias of '" + seen[n.string] + "'"));
      out[param].push_back(n.string);
    }
  }
  return out;
}

} // namespace

Package Package::load(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(dir + ": not a package directory");
  Package pkg;
  pkg.dir = dir;
  std::string manifestPath = dir + "/manifest.json";
  pkg.manifest = Json::parse(readFile(manifestPath), manifestPath, /*uniqueKeys=*/true);
  const Json *format = pkg.manifest.find("format");
  const Json *version = pkg.manifest.find("version");
  if (!format || format->string != "mlc-package" || !version)
    fail(manifestPath + ": not an mlc package manifest");
  if (int(version->number) != kPackageVersion)
    fail(manifestPath + ": package format version " + std::to_string(int(version->number)) +
         " is not supported by this runtime (it reads version " +
         std::to_string(kPackageVersion) + "); recompile with a matching mlc");
  // Every listed file must still have the content it was compiled with.
  std::map<std::string, std::string> contents;
  if (const Json *files = pkg.manifest.find("files"))
    for (auto &[name, hash] : files->object) {
      std::string bytes = readFile(dir + "/" + name);
      if (contentHash(bytes) != hash.string)
        fail(dir + "/" + name + ": content hash " + contentHash(bytes) +
             " does not match the manifest's " + hash.string +
             " (the file changed or is corrupt)");
      contents[name] = std::move(bytes);
    }
  {
    auto text = [&](const char *key) {
      const Json *v = pkg.manifest.find(key);
      return v && v->kind == Json::String ? v->string : std::string("?");
    };
    auto number = [&](const char *key) {
      const Json *v = pkg.manifest.find(key);
      return v && v->kind == Json::Number ? int64_t(v->number) : int64_t(-1);
    };
    pkg.computeDtype = text("dtype");
    const Json *stored = pkg.manifest.find("fields_hash");
    std::string actual = manifestFieldsHash(text("model"), text("config"), text("dtype"),
                                            number("micro_batch"), number("seq_len"));
    if (!stored || stored->string != actual)
      fail(manifestPath + ": its model, config, dtype, micro_batch or seq_len field changed "
           "after compilation (fields_hash " + actual + " does not match the manifest's " +
           (stored ? stored->string : std::string("(none)")) + ")");
  }
  if (!contents.count("plan.txt") || !contents.count("kernels.cpp"))
    fail(manifestPath + ": lists no plan.txt or kernels.cpp");
  pkg.kernelsSource = contents["kernels.cpp"];
  if (contents.count("kernels.cu"))
    pkg.cudaSource = contents["kernels.cu"];

  PlanData plan = parsePlan(contents["plan.txt"], dir + "/plan.txt");
  pkg.tokenCapacity = plan.tokenCapacity;
  pkg.tensorParallel = plan.tensorParallel;
  pkg.sequenceParallel = plan.sequenceParallel;
  pkg.params = std::move(plan.params);
  pkg.inputs = std::move(plan.inputs);
  pkg.scalars = std::move(plan.scalars);
  for (const ParamInfo &p : pkg.params) {
    pkg.paramCount = p.offset + p.numel;
    pkg.dtype = p.dtype;
  }
  for (FunctionPlan &f : plan.functions) {
    std::string name = f.name;
    if (!pkg.functions.emplace(name, std::move(f)).second)
      fail(dir + "/plan.txt: function " + name + " is defined twice");
  }
  if (!pkg.functions.count(kForwardFn))
    fail(dir + "/plan.txt: has no forward function");
  if (contents.count("aliases.json"))
    pkg.aliases = parseAliases(contents["aliases.json"], dir + "/aliases.json", pkg);
  return pkg;
}

const FunctionPlan &Package::function(const std::string &name) const {
  auto it = functions.find(name);
  if (it == functions.end())
    fail(dir + ": the package has no '" + name + "' function" +
         (name == kTrainStepFn || name == kOptimizerFn || name == kGradNormFn
              ? " (it was compiled for inference only)"
              : ""));
  return it->second;
}

const ParamInfo *Package::param(const std::string &name) const {
  for (const ParamInfo &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace mlc::rt
