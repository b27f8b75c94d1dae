//===- ModelDirectory.cpp - Hugging Face model directories -----------------===//

#include "runtime/train/ModelDirectory.h"
#include "runtime/train/TensorParallel.h"
#include "runtime/train/WholeTensors.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

namespace mlc::rt {

namespace {

/// What a tokenizer directory holds that AutoTokenizer reads, and the
/// generation defaults beside it: copied into a saved model directory.
const char *const kTokenizerFiles[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
    "added_tokens.json", "vocab.json", "merges.txt", "vocab.txt", "generation_config.json"};

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

bool isRegularFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string baseName(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string parentOf(const std::string &path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Removes a directory of files (a model directory has no subdirectories).
void removeFlatDirectory(const std::string &dir) {
  for (const std::string &path : filesIn(dir))
    std::remove(path.c_str());
  ::rmdir(dir.c_str());
}

/// The tokenizer files the run brings, as (name in the model directory,
/// source path): --tokenizer-model (a directory, or a tokenizer.json or
/// tokenizer.model with the configs beside it), else those of the --init
/// or --config directory.
std::vector<std::pair<std::string, std::string>> tokenizerFiles(const TrainOptions &o) {
  std::vector<std::pair<std::string, std::string>> files;
  auto fromDirectory = [&](const std::string &dir) {
    for (const char *name : kTokenizerFiles)
      if (isRegularFile(dir + "/" + name))
        files.push_back({name, dir + "/" + name});
  };
  if (!o.tokenizerModel.empty()) {
    if (isDirectoryPath(o.tokenizerModel)) {
      fromDirectory(o.tokenizerModel);
    } else {
      std::string name = baseName(o.tokenizerModel);
      bool model = name.size() > 6 && name.compare(name.size() - 6, 6, ".model") == 0;
      files.push_back({model ? "tokenizer.model" : "tokenizer.json", o.tokenizerModel});
      std::string dir = parentOf(o.tokenizerModel);
      for (const char *beside : {"tokenizer_config.json", "special_tokens_map.json",
                                 "added_tokens.json", "generation_config.json"})
        if (isRegularFile(dir + "/" + beside))
          files.push_back({beside, dir + "/" + beside});
    }
    if (files.empty())
      fail("--tokenizer-model " + o.tokenizerModel + ": holds no tokenizer file (" +
           "tokenizer.json, tokenizer.model, vocab.json, vocab.txt) to copy");
    return files;
  }
  for (const std::string &dir : {o.init, o.configDir})
    if (!dir.empty() && isDirectoryPath(dir) &&
        (isRegularFile(dir + "/tokenizer.json") || isRegularFile(dir + "/tokenizer.model"))) {
      fromDirectory(dir);
      break;
    }
  return files;
}

/// A tokenizer.json copied into a model directory must be JSON and produce
/// only ids of the model's vocabulary (its model's vocab and its added
/// tokens): an id past the embedding's rows is an index error in the first
/// forward of whoever loads the directory. The file is copied as it is, so
/// its model type need not be one mlc's tokenizers read.
void checkTokenizerFits(const std::vector<std::pair<std::string, std::string>> &files,
                        const std::string &config) {
  Json parsedConfig = Json::parse(config, "the model's config");
  const Json *vocab = parsedConfig.find("vocab_size");
  for (const auto &[name, source] : files) {
    if (name != "tokenizer.json")
      continue;
    Json tok = Json::parse(readFile(source), source);
    const Json *model = tok.find("model");
    if (!model || model->kind != Json::Object)
      fail("--save: " + source + " is no tokenizer.json (it has no \"model\" object): "
           "AutoTokenizer could not load the model directory");
    double top = -1; // the largest id the tokenizer produces
    if (const Json *v = model->find("vocab")) {
      if (v->kind == Json::Array) // Unigram: [piece, score] pairs, ids their order
        top = double(v->array.size()) - 1;
      for (const auto &[piece, id] : v->object)
        if (id.kind == Json::Number)
          top = std::max(top, id.number);
    }
    if (const Json *added = tok.find("added_tokens"))
      for (const Json &t : added->array)
        if (const Json *id = t.find("id"); id && id->kind == Json::Number)
          top = std::max(top, id->number);
    if (vocab && vocab->kind == Json::Number && top >= vocab->number)
      fail("--save: the tokenizer " + source + " produces ids up to " +
           std::to_string(int64_t(top)) + ", outside the model's vocabulary (vocab_size " +
           std::to_string(int64_t(vocab->number)) +
           "): give --tokenizer-model the model's own tokenizer");
  }
}

} // namespace

int64_t parseShardSize(const std::string &text) {
  auto bad = [&]() -> int64_t {
    fail("--max-shard-size must be a number of bytes or a size such as 500KB, 5MB, 2GB or "
         "1GiB, got '" + text + "'");
  };
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit((unsigned char)text[digits]) || text[digits] == '.'))
    ++digits;
  if (digits == 0)
    return bad();
  char *end = nullptr;
  std::string number = text.substr(0, digits);
  double value = std::strtod(number.c_str(), &end);
  if (*end || !std::isfinite(value))
    return bad();
  // As transformers: the unit's case does not matter, except that KB, MB
  // and GB ending in a lower-case b count bits.
  std::string unit = text.substr(digits), upper;
  for (char c : unit)
    upper += char(std::toupper((unsigned char)c));
  double scale;
  if (unit.empty())
    scale = 1;
  else if (upper == "KIB" || upper == "MIB" || upper == "GIB")
    scale = std::pow(1024.0, upper == "KIB" ? 1 : upper == "MIB" ? 2 : 3);
  else if (upper == "KB" || upper == "MB" || upper == "GB")
    scale = std::pow(1000.0, upper == "KB" ? 1 : upper == "MB" ? 2 : 3) /
            (unit.back() == 'b' ? 8 : 1);
  else
    return bad();
  double bytes = std::floor(value * scale);
  if (!(bytes >= 1) || bytes > 9e18)
    return bad();
  return int64_t(bytes);
}

std::vector<std::vector<size_t>> planShards(const std::vector<int64_t> &bytes,
                                            int64_t maxShardSize) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t current = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (current + bytes[i] > maxShardSize && !shards.back().empty()) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes[i];
  }
  return shards;
}

bool isModelDirectoryFile(const std::string &name) {
  if (name == "config.json" || name == "model.safetensors" || name == kSafetensorsIndex)
    return true;
  for (const char *file : kTokenizerFiles)
    if (name == file)
      return true;
  // model-00001-of-00003.safetensors
  const std::string suffix = ".safetensors";
  return name.rfind("model-", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void checkModelDirectory(const std::string &dir, const std::string &flag) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      fail(flag + " " + dir + ": is not a directory (a path ending in '/' names a model "
           "directory)");
    // Only a model directory is replaced whole: never a directory of other files.
    for (const std::string &entry : filesIn(path))
      if (!isModelDirectoryFile(baseName(entry)) || !isRegularFile(entry))
        fail(flag + " " + dir + ": holds " + baseName(entry) + ", which is not a file of a "
             "model directory; --save replaces the whole directory, so choose a new or "
             "empty one");
    if (access(path.c_str(), W_OK) != 0)
      fail(flag + " " + dir + ": the directory is not writable");
  }
  std::string parent = parentOf(path);
  if (stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(flag + " " + dir + ": the directory " + parent + " does not exist");
  if (access(parent.c_str(), W_OK) != 0)
    fail(flag + " " + dir + ": the directory " + parent + " is not writable");
}

/// The package's hf_config.json: the builtin model's config.json. `what`
/// names the destination in messages ("--save DIR").
static std::string hfConfigOf(const Package &pkg, const std::string &what) {
  std::string config;
  if (isRegularFile(pkg.dir + "/hf_config.json"))
    config = readFile(pkg.dir + "/hf_config.json");
  if (config.empty())
    fail(what + ": a model directory needs the model's Hugging Face config, and " +
         pkg.dir + " has none (an ONNX model, a builtin config that no transformers class " +
         "builds, or a package of an older mlc): save to a .safetensors file instead");
  return config;
}

void checkModelDirectorySource(const Package &pkg, const TrainOptions &o,
                               const std::string &what) {
  std::string config = hfConfigOf(pkg, what);
  parseShardSize(o.maxShardSize);
  checkTokenizerFits(tokenizerFiles(o), config);
}

/// The file name of shard i of n: model.safetensors alone, else
/// model-00001-of-00003.safetensors.
static std::string shardName(size_t i, size_t n) {
  if (n == 1)
    return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

namespace {

/// What the writer writes, settled before any tensor moves.
struct DirectoryPlan {
  std::string final, tmp, config;
  std::vector<std::vector<size_t>> shards; // indices into pkg.params
  std::vector<std::pair<std::string, std::string>> tokenizer;
};

/// The writer's checks and its temporary directory.
DirectoryPlan planDirectory(const Backend &backend, const TrainOptions &o, const std::string &dir,
                            const std::string &flag) {
  const Package &pkg = backend.package();
  DirectoryPlan plan;
  plan.final = dir;
  while (plan.final.size() > 1 && plan.final.back() == '/')
    plan.final.pop_back();
  checkModelDirectory(plan.final, flag);
  plan.config = hfConfigOf(pkg, flag + " " + dir);
  if (pkg.dtype == "f64") // the parameters as the file stores them
    if (auto at = plan.config.find("\"torch_dtype\": \"float32\""); at != std::string::npos)
      plan.config.replace(at, 24, "\"torch_dtype\": \"float64\"");
  const int64_t maxShard = parseShardSize(o.maxShardSize);
  plan.tokenizer = tokenizerFiles(o);
  // The tensors in the package's order; a tied parameter once, under its
  // own name (save_pretrained drops the tied copies; from_pretrained ties
  // them again).
  std::vector<int64_t> sizes;
  for (const ParamInfo &p : pkg.params)
    sizes.push_back(p.numel * (p.tpDim >= 0 ? pkg.tensorParallel : 1) * backend.elementSize());
  plan.shards = planShards(sizes, maxShard);
  plan.tmp = parentOf(plan.final) + "/." + baseName(plan.final) + ".tmp." +
             std::to_string(getpid());
  removeFlatDirectory(plan.tmp);
  makeDirectories(plan.tmp);
  return plan;
}

/// The writer's files after the shards: the index, the tokenizer, the
/// config last; then the directory swapped in whole.
void finishDirectory(const DirectoryPlan &plan, const std::string &what,
                     const std::map<std::string, std::string> &weightMap, int64_t total) {
  const std::string &tmp = plan.tmp, &final = plan.final;
  if (plan.shards.size() > 1) {
    // As save_pretrained writes it: json.dumps(index, indent=2, sort_keys=True).
    std::string index = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(total) +
                        "\n  },\n  \"weight_map\": {";
    bool first = true;
    for (const auto &[name, file] : weightMap) {
      index += std::string(first ? "" : ",") + "\n    " + jsonQuote(name) + ": " +
               jsonQuote(file);
      first = false;
    }
    index += "\n  }\n}\n";
    writeFileDurably(tmp + "/" + kSafetensorsIndex, index, final + "/" + kSafetensorsIndex);
  }
  for (const auto &[name, source] : plan.tokenizer)
    writeFileDurably(tmp + "/" + name, readFile(source), final + "/" + name);
  // The config last: a directory without one is not a model.
  writeFileDurably(tmp + "/config.json", plan.config, final + "/config.json");
  syncDirectory(tmp);
  // Swapped in whole: the previous directory (checked above to hold only
  // a model directory's files) goes once the new one is in place.
  std::string old;
  if (exists(final)) {
    old = parentOf(final) + "/." + baseName(final) + ".old." + std::to_string(getpid());
    removeFlatDirectory(old);
    if (std::rename(final.c_str(), old.c_str()) != 0)
      fail(what + ": cannot move the previous directory aside");
  }
  if (std::rename(tmp.c_str(), final.c_str()) != 0) {
    if (!old.empty())
      std::rename(old.c_str(), final.c_str());
    fail(what + ": cannot move the model directory into place");
  }
  if (!old.empty())
    removeFlatDirectory(old);
  syncDirectory(parentOf(final));
}

} // namespace

void saveModelDirectory(Backend &backend, const TrainOptions &o, const std::string &dir,
                        const std::string &flag, bool go) {
  // The other data-parallel replicas hold the same parameters: the first
  // replica's ranks send theirs, and the writer alone writes.
  if (backend.rank() != 0)
    return;
  const Package &pkg = backend.package();
  const bool writer = isWriter(backend);
  DirectoryPlan plan;
  std::string error;
  if (writer && go) {
    try {
      plan = planDirectory(backend, o, dir, flag);
    } catch (const Error &e) {
      error = e.what();
    }
  }
  if (!agreeWithWriter(backend, go && error.empty(), /*allRanks=*/false)) {
    if (writer && !error.empty())
      fail(error);
    return;
  }
  // Whole HF tensors, gathered to the writer one at a time
  // (WholeTensors.h) and streamed into the shards.
  std::map<std::string, std::string> weightMap;
  int64_t total = 0;
  std::unique_ptr<SafetensorsStream> file;
  size_t shard = 0, done = 0; // the shard being written, its tensors written
  // One whole tensor into the shard being written; a message names the
  // file where it goes, not the temporary one.
  auto writeTensor = [&](const ParamInfo &p, const std::vector<char> &slices) {
    try {
      const std::string name = shardName(shard, plan.shards.size());
      if (!file) {
        std::vector<SafetensorsStream::Entry> entries;
        for (size_t i : plan.shards[shard])
          entries.push_back({pkg.params[i].name, pkg.dtype,
                             wholeShape(pkg.params[i], pkg.tensorParallel)});
        file = std::make_unique<SafetensorsStream>(
            plan.tmp + "/" + name, entries, std::map<std::string, std::string>{{"format", "pt"}});
      }
      // No directory of weights that are not finite is written.
      checkFinite(backend, p, slices, dir);
      forEachWholeRun(backend, p, slices, [&](const char *bytes, size_t size) {
        file->append(bytes, size);
        total += int64_t(size);
      });
      weightMap[p.name] = name;
      if (++done == plan.shards[shard].size()) {
        file->finish();
        file.reset();
        ++shard;
        done = 0;
      }
    } catch (const Error &e) {
      std::string m = e.what();
      fail(m.rfind(plan.tmp, 0) == 0 ? plan.final + m.substr(plan.tmp.size()) : m);
    }
  };
  // Nothing of a failed save (a write error, a gather that failed: a peer
  // gone, --comm-timeout) stays beside the user's directory.
  auto removeTemporary = [&] {
    file.reset();
    if (writer && !plan.tmp.empty())
      removeFlatDirectory(plan.tmp);
  };
  try {
    forEachWholeTensor(backend, FlatBuffer::Params, error, writeTensor);
    reportGathers(backend, dir);
  } catch (...) {
    removeTemporary();
    throw;
  }
  if (!writer)
    return;
  try {
    if (!error.empty())
      fail(error);
    finishDirectory(plan, flag + " " + dir, weightMap, total);
  } catch (const Error &) {
    removeTemporary(); // the previous directory stays as it was
    throw;
  }
}

} // namespace mlc::rt
