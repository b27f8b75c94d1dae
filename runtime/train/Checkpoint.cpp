//===- Checkpoint.cpp - checkpoints and exact resume -----------------------===//

#include "runtime/train/Checkpoint.h"
#include "runtime/train/ModelDirectory.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "support/Json.h"
#include "support/TensorIO.h"
#include "runtime/train/TensorParallel.h"
#include "runtime/train/Trainer.h"
#include "runtime/train/TrainerParts.h"
#include "runtime/train/WholeTensors.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <random>
#include <memory>
#include <set>
#include <sstream>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

/// The settings a run's numbers depend on; a resumed run must use the same.
/// (--steps may change: the cosine schedule then follows the new length.)
/// --eod-mask-loss and --eod-token decide which labels the loss counts,
/// --calculate-per-token-loss how the micro-batches' losses weigh.
const char *const kRunFlags[] = {"seed",  "lr",   "min-lr",    "warmup", "lr-schedule",
                                 "weight-decay", "beta1", "beta2", "eps", "clip-grad",
                                 "data",  "split", "batches",  "vocab-file", "global-batch",
                                 "lr-scaling", "base-batch", "clip", "eod-mask-loss",
                                 "eod-token", "calculate-per-token-loss"};

/// The run flags added after checkpoints were first written: a checkpoint
/// without one was written before it existed, so it ran with the flag's
/// default (false, -1, false), and compares as that.
const char *const kLaterRunFlags[] = {"eod-mask-loss", "eod-token", "calculate-per-token-loss"};

/// The package fields that identify the model and its batches.
const char *const kPackageFields[] = {"model", "config", "dtype", "micro_batch", "seq_len"};

std::string stepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

void removeDirectory(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name, path = dir + "/" + name;
      struct stat st;
      if (name == "." || name == "..")
        continue;
      if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        removeDirectory(path); // hf/ of --save-dir-hf, and its temporary
      else
        std::remove(path.c_str());
    }
    closedir(d);
  }
  ::rmdir(dir.c_str());
}

/// Removes the temporary directories of checkpoint writers that died
/// mid-write (their process is gone).
void removeAbandoned(const std::string &saveDir) {
  DIR *d = opendir(saveDir.c_str());
  if (!d)
    return;
  std::vector<std::string> stale;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    auto at = name.rfind(".tmp.");
    if (name.rfind(".step-", 0) != 0 || at == std::string::npos)
      continue;
    long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      stale.push_back(saveDir + "/" + name);
  }
  closedir(d);
  for (const std::string &dir : stale)
    removeDirectory(dir);
}

/// Complete checkpoints (those with a checkpoint.json) in `saveDir`, by step.
std::vector<std::pair<int64_t, std::string>> listCheckpoints(const std::string &saveDir) {
  std::vector<std::pair<int64_t, std::string>> out;
  DIR *d = opendir(saveDir.c_str());
  if (!d)
    return out;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    long long step = -1;
    char tail = 0;
    if (std::sscanf(name.c_str(), "step-%lld%c", &step, &tail) != 1 || step < 0)
      continue;
    struct stat st;
    if (stat((saveDir + "/" + name + "/checkpoint.json").c_str(), &st) == 0)
      out.push_back({step, saveDir + "/" + name});
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string manifestField(const Package &pkg, const char *key) {
  const Json *v = pkg.manifest.find(key);
  if (!v)
    return "";
  if (v->kind == Json::Number)
    return std::to_string(int64_t(v->number));
  return v->string;
}

const TrainFlag &flag(const char *name) {
  for (const TrainFlag &f : trainFlags())
    if (f.name == name)
      return f;
  fail(std::string("internal: no training flag --") + name);
}

/// What state.json's "run" records: the flags above (--global-batch as the
/// whole step's), the layout (the data-parallel ranks, the tensor-parallel
/// group's) and the package's hash.
std::vector<std::pair<std::string, std::string>> runSettings(const Package &pkg,
                                                             const TrainOptions &o) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char *name : kRunFlags)
    out.push_back({name, flag(name).value(o)});
  out.push_back({"ranks", std::to_string(o.ranks)});
  out.push_back({"tensor-parallel", std::to_string(pkg.tensorParallel)});
  out.push_back({"package", packageHash(pkg)});
  return out;
}

/// A JSON value as a message shows it.
std::string describe(const Json *v) {
  if (!v)
    return "missing";
  switch (v->kind) {
  case Json::Number: {
    std::ostringstream os;
    os.precision(17);
    os << v->number;
    return os.str();
  }
  case Json::String:
    return jsonQuote(v->string);
  case Json::Bool:
    return v->boolean ? "true" : "false";
  case Json::Null:
    return "null";
  default:
    return v->kind == Json::Array ? "an array" : "an object";
  }
}

/// The whole number `obj[key]` in [lo, hi], or an Error naming the file and field.
int64_t wholeNumber(const Json &obj, const char *key, int64_t lo, int64_t hi,
                    const std::string &path) {
  const Json *v = obj.find(key);
  if (!v || v->kind != Json::Number || v->number != std::floor(v->number) ||
      v->number < double(lo) || v->number > double(hi))
    fail(path + ": \"" + key + "\" must be a whole number in [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "], got " + describe(v));
  return int64_t(v->number);
}

/// `obj[key]`, an object whose values are all strings, or an Error.
const Json &stringsObject(const Json &obj, const char *key, const std::string &path) {
  const Json *v = obj.find(key);
  if (!v || v->kind != Json::Object)
    fail(path + ": \"" + key + "\" must be an object, got " + describe(v));
  for (const auto &[name, value] : v->object)
    if (value.kind != Json::String)
      fail(path + ": \"" + key + "\"." + name + " must be a string, got " + describe(&value));
  return *v;
}

/// The largest step a checkpoint may hold: every smaller whole number is
/// exact in a JSON number.
constexpr int64_t kMaxStep = int64_t(1) << 53;

/// The run id in a checkpoint's manifest, or "" (none, or unreadable).
std::string runIdOf(const std::string &dir) {
  try {
    Json m = Json::parse(readFile(dir + "/checkpoint.json"), dir, /*uniqueKeys=*/true);
    const Json *id = m.find("run");
    return id && id->kind == Json::String ? id->string : "";
  } catch (const Error &) {
    return "";
  }
}

/// What a checkpoint that does not record setting `name` ran with: the
/// default of a flag added later (kLaterRunFlags), else "(not recorded)".
std::string recordedDefault(const std::string &name) {
  if (name == "tensor-parallel")
    return "1"; // recorded since checkpoints were written at T > 1
  for (const char *later : kLaterRunFlags)
    if (name == later)
      return flag(later).value(TrainOptions{});
  return "(not recorded)";
}

/// Compares the checkpoint's recorded settings with this run's: the
/// differences, one line each, and the names of those not allowed by
/// --resume-with-changes.
std::pair<std::string, std::vector<std::string>>
settingDifferences(const Package &pkg, const TrainOptions &o, const Json &package,
                   const Json &run) {
  std::set<std::string> allowed, known;
  std::stringstream list(o.resumeWithChanges);
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty())
      allowed.insert(item.rfind("--", 0) == 0 ? item.substr(2) : item);
  std::string differences;
  std::vector<std::string> refused;
  auto compare = [&](const std::string &name, const std::string &shown, const Json *v,
                     const std::string &ours, const char *whose) {
    known.insert(name);
    std::string theirs = v ? v->string : recordedDefault(name);
    if (theirs == ours)
      return;
    differences += "\n  " + shown + ": the checkpoint's '" + theirs + "', " + whose + " '" +
                   ours + "'";
    if (!allowed.count(name) && !allowed.count("all"))
      refused.push_back(name);
  };
  for (const char *key : kPackageFields)
    compare(key, key, package.find(key), manifestField(pkg, key), "this package's");
  for (const auto &[name, ours] : runSettings(pkg, o))
    compare(name,
            name == "ranks" || name == "tensor-parallel" || name == "package" ? name
                                                                             : "--" + name,
            run.find(name), ours, "this run's");
  for (const std::string &name : allowed)
    if (name != "all" && !known.count(name)) {
      std::string names;
      for (const std::string &k : known)
        names += (names.empty() ? "" : ", ") + k;
      fail("--resume-with-changes: unknown setting '" + name + "' (one of: all, " + names + ")");
    }
  return {differences, refused};
}

/// One line when the checkpoint was written at another layout (tensor-parallel
/// group x data-parallel ranks) than this run's: every tensor in it is
/// whole, so each rank takes its slices and shards as it loads.
void reportLayout(const TrainOptions &o, const Package &pkg, const Json &run) {
  auto recorded = [&](const char *name) {
    const Json *v = run.find(name);
    return v ? v->string : recordedDefault(name);
  };
  const std::string theirT = recorded("tensor-parallel"), theirD = recorded("ranks");
  const std::string ourT = std::to_string(pkg.tensorParallel), ourD = std::to_string(o.ranks);
  if ((theirT != ourT || theirD != ourD) && !o.quiet)
    fprintf(stderr, "mlc: the checkpoint was written at tensor-parallel %s x data-parallel %s, "
                    "this run is tensor-parallel %s x data-parallel %s: each rank takes its "
                    "slices and shards of the checkpoint's whole tensors\n",
            theirT.c_str(), theirD.c_str(), ourT.c_str(), ourD.c_str());
}

/// Refuses to write step `step`'s checkpoint over another run's.
void refuseOverwrite(const TrainOptions &o, const std::string &dir, int64_t step) {
  struct stat st;
  if (stat((dir + "/checkpoint.json").c_str(), &st) == 0 && runIdOf(dir) != o.runId)
    fail("--save-dir " + o.saveDir + ": " + dir + " is a checkpoint of another run, which "
         "this run would overwrite at step " + std::to_string(step) +
         " (use another --save-dir, or resume that run)");
}

} // namespace

std::string newRunId() {
  std::random_device device;
  return contentHash(std::to_string(device()) + "/" + std::to_string(getpid()) + "/" +
                     std::to_string(std::chrono::system_clock::now().time_since_epoch().count()));
}

std::string packageHash(const Package &pkg) {
  std::string text = manifestField(pkg, "fields_hash");
  if (const Json *files = pkg.manifest.find("files"))
    for (const auto &[name, hash] : files->object)
      text += "\n" + name + " " + hash.string;
  return contentHash(text);
}

void checkSaveDir(const TrainOptions &o, int64_t first) {
  for (const auto &[step, dir] : listCheckpoints(o.saveDir))
    if (step >= first && step <= o.steps &&
        ((o.saveInterval > 0 && step % o.saveInterval == 0) || step == o.steps))
      refuseOverwrite(o, dir, step);
}

/// The optimizer file's tensors: exp_avg.NAME, then exp_avg_sq.NAME, each
/// parameter's whole shape.
static std::vector<SafetensorsStream::Entry> momentEntries(const Package &pkg) {
  std::vector<SafetensorsStream::Entry> entries;
  for (const char *prefix : {"exp_avg.", "exp_avg_sq."})
    for (const ParamInfo &p : pkg.params)
      entries.push_back({prefix + p.name, pkg.dtype, wholeShape(p, pkg.tensorParallel)});
  return entries;
}

/// The directory's contents after its tensors (and hf/): state.json and the
/// manifest (last), the writer's alone.
static void writeCheckpointFiles(Backend &backend, const TrainOptions &o, int64_t step,
                                 const std::string &tmp, const std::string &modelHash,
                                 const std::string &optimizerHash) {
  const Package &pkg = backend.package();
  std::string state = "{\n  \"step\": " + std::to_string(step) + ",\n  \"package\": {";
  bool first = true;
  for (const char *key : kPackageFields) {
    state += std::string(first ? "" : ",") + "\n    " + jsonQuote(key) + ": " +
             jsonQuote(manifestField(pkg, key));
    first = false;
  }
  state += "\n  },\n  \"run\": {";
  first = true;
  for (const auto &[name, value] : runSettings(pkg, o)) {
    state += std::string(first ? "" : ",") + "\n    " + jsonQuote(name) + ": " +
             jsonQuote(value);
    first = false;
  }
  state += "\n  },\n  \"steps\": " + std::to_string(o.steps) + "\n}\n";
  writeFileAtomically(tmp + "/state.json", state);
  std::string manifest = "{\n  \"format\": \"mlc-checkpoint\",\n  \"version\": " +
                         std::to_string(kCheckpointVersion) + ",\n  \"run\": " +
                         jsonQuote(o.runId) + ",\n  \"step\": " + std::to_string(step) +
                         ",\n  \"files\": {";
  first = true;
  for (const auto &[file, hash] : {std::pair<const char *, std::string>{"model.safetensors", modelHash},
                                   {"optimizer.safetensors", optimizerHash},
                                   {"state.json", contentHash(state)}}) {
    manifest += std::string(first ? "" : ",") + "\n    " + jsonQuote(file) + ": " +
                jsonQuote(hash);
    first = false;
  }
  manifest += "\n  }\n}\n";
  // The manifest goes last: a directory without one is not a checkpoint.
  writeFileAtomically(tmp + "/checkpoint.json", manifest);
}

std::string saveCheckpoint(Backend &backend, const TrainOptions &o, int64_t step) {
  const Package &pkg = backend.package();
  const bool writer = isWriter(backend), lead = backend.rank() == 0, sharded = backend.sharded();
  std::string final = o.saveDir + "/" + stepName(step);
  // The first data-parallel replica holds the run's parameters and (unless
  // sharded over the replicas) moments.
  if (!lead && !sharded)
    return "";
  // The writer alone looks at the directory, before any tensor moves; a
  // writer that cannot write (another run's checkpoint of this step) stops
  // the others at the agreement, not in a gather.
  std::string tmp = o.saveDir + "/." + stepName(step) + ".tmp." + std::to_string(getpid()), error;
  std::unique_ptr<SafetensorsStream> model, optimizer;
  if (writer) {
    try {
      refuseOverwrite(o, final, step);
      makeDirectories(o.saveDir);
      removeDirectory(tmp);
      removeAbandoned(o.saveDir);
      makeDirectories(tmp);
      model = std::make_unique<SafetensorsStream>(tmp + "/model.safetensors", parameterEntries(pkg),
                                                  std::map<std::string, std::string>{{"format", "pt"}});
      optimizer = std::make_unique<SafetensorsStream>(tmp + "/optimizer.safetensors",
                                                      momentEntries(pkg));
    } catch (const Error &e) {
      error = e.what();
    }
  }
  if (!agreeWithWriter(backend, error.empty(), /*allRanks=*/sharded)) {
    if (writer) {
      model.reset();
      optimizer.reset();
      removeDirectory(tmp);
      throw CheckpointRefused(error);
    }
    return lead ? final : "";
  }
  // Every tensor whole, whatever the layout: gathered to the writer tensor
  // by tensor (the tensor-parallel group's slices and, under the
  // distributed optimizer, the data-parallel group's shards first) and
  // streamed into the files. The others keep nothing of it.
  streamParameters(backend, model.get(), tmp + "/model.safetensors", error);
  for (FlatBuffer which : {FlatBuffer::AdamM, FlatBuffer::AdamV})
    forEachWholeTensor(backend, which, error, [&](const ParamInfo &p, const std::vector<char> &slices) {
      forEachWholeRun(backend, p, slices,
                      [&](const char *bytes, size_t size) { optimizer->append(bytes, size); });
    });
  reportGathers(backend, final);
  // --save-dir-hf: the parameters once more, as transformers loads them,
  // gathered and streamed the same way into hf/. Not read on resume, so not
  // among the manifest's files. A writer whose checkpoint already failed
  // stops the group at the directory's agreement.
  if (o.saveDirHf && lead) {
    try {
      saveModelDirectory(backend, o, tmp + "/hf", "--save-dir-hf", error.empty());
    } catch (const Error &e) {
      if (!writer)
        throw; // a gather's failure
      if (error.empty())
        error = e.what();
    }
  }
  if (!writer)
    return lead ? final : "";
  try {
    if (!error.empty())
      fail(error);
    const std::string modelHash = model->finish(), optimizerHash = optimizer->finish();
    // For the test of a crash mid-write: the process dies here, between
    // files, after every gather (no rank waits for it in a collective).
    if (const char *kill = std::getenv("MLC_TEST_KILL_IN_CHECKPOINT"); kill && *kill)
      std::raise(SIGKILL);
    writeCheckpointFiles(backend, o, step, tmp, modelHash, optimizerHash);
    syncDirectory(tmp);
    removeDirectory(final);
    if (std::rename(tmp.c_str(), final.c_str()) != 0)
      fail(final + ": cannot move the checkpoint into place");
    syncDirectory(o.saveDir);
  } catch (const Error &) {
    model.reset();
    optimizer.reset();
    removeDirectory(tmp); // the previous checkpoints stay as they were
    throw;
  }
  if (o.keep > 0) {
    // This run's older checkpoints beyond the newest --keep (the one just
    // written among them); another run's are never touched.
    std::vector<std::string> older;
    for (const auto &[s, dir] : listCheckpoints(o.saveDir))
      if (dir != final && runIdOf(dir) == o.runId)
        older.push_back(dir);
    for (size_t i = 0; i + size_t(o.keep) - 1 < older.size(); ++i)
      removeDirectory(older[i]);
  }
  return final;
}

std::string resolveCheckpoint(const std::string &spec, const std::string &saveDir) {
  if (spec != "latest")
    return spec;
  if (saveDir.empty())
    fail("--resume latest needs --save-dir (where the checkpoints are)");
  auto all = listCheckpoints(saveDir);
  if (all.empty())
    fail("--resume latest: " + saveDir + " holds no complete checkpoint");
  return all.back().second;
}

Resumed loadCheckpoint(Backend &backend, const TrainOptions &o, const std::string &dir) {
  const Package &pkg = backend.package();
  std::string manifestPath = dir + "/checkpoint.json";
  struct stat st;
  if (stat(manifestPath.c_str(), &st) != 0)
    fail(dir + ": not a checkpoint (no checkpoint.json: incomplete or another directory)");
  Json manifest = Json::parse(readFile(manifestPath), manifestPath, /*uniqueKeys=*/true);
  const Json *format = manifest.find("format");
  if (!format || format->string != "mlc-checkpoint")
    fail(manifestPath + ": not an mlc checkpoint manifest");
  int64_t version = wholeNumber(manifest, "version", 0, 1 << 30, manifestPath);
  if (version != kCheckpointVersion)
    fail(manifestPath + ": checkpoint version " + std::to_string(version) +
         " is not supported (this runtime reads version " +
         std::to_string(kCheckpointVersion) + ")");
  const Json &files = stringsObject(manifest, "files", manifestPath);
  for (const char *file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    const Json *hash = files.find(file);
    if (!hash)
      fail(manifestPath + ": lists no " + file);
    std::string actual = fileContentHash(dir + "/" + file); // a chunk at a time
    if (actual != hash->string)
      fail(dir + "/" + file + ": content hash " + actual + " does not match the manifest's " +
           hash->string + " (the file changed or is corrupt)");
  }
  Resumed resumed;
  if (const Json *id = manifest.find("run")) {
    if (id->kind != Json::String || id->string.empty())
      fail(manifestPath + ": \"run\" must be a run id (a string), got " + describe(id));
    resumed.runId = id->string;
  } else {
    resumed.runId = newRunId(); // written before runs had ids
  }
  std::string statePath = dir + "/state.json";
  Json state = Json::parse(readFile(statePath), statePath, /*uniqueKeys=*/true);
  if (state.kind != Json::Object)
    fail(statePath + ": malformed checkpoint state (not an object)");
  resumed.step = wholeNumber(state, "step", 1, kMaxStep, statePath);
  if (manifest.find("step") && wholeNumber(manifest, "step", 1, kMaxStep, manifestPath) != resumed.step)
    fail(manifestPath + ": step " + describe(manifest.find("step")) + " is not state.json's " +
         std::to_string(resumed.step));
  const int64_t steps = wholeNumber(state, "steps", 1, kMaxStep, statePath);
  const Json &package = stringsObject(state, "package", statePath);
  const Json &run = stringsObject(state, "run", statePath);
  auto [differences, refused] = settingDifferences(pkg, o, package, run);
  if (!refused.empty()) {
    std::string names;
    for (const std::string &name : refused)
      names += (names.empty() ? "" : ",") + name;
    fail(dir + ": the checkpoint was written by another model or run; resume with its "
         "settings:" + differences + "\n(or continue with this run's: --resume-with-changes " +
         names + ")");
  }
  if (!differences.empty() && !o.quiet)
    fprintf(stderr, "mlc: resuming with changed settings (--resume-with-changes):%s\n",
            differences.c_str());
  if (resumed.step >= o.steps)
    fail(dir + ": the checkpoint is at step " + std::to_string(resumed.step) + " and --steps is " +
         std::to_string(o.steps) + ": nothing to train (give --steps above " +
         std::to_string(resumed.step) + " to continue)");
  if (steps != o.steps && o.schedule != "constant" && !o.quiet)
    fprintf(stderr,
            "mlc: note: the checkpoint's run was %lld steps long, this one %lld: the "
            "learning rate follows the new length from here on\n",
            (long long)steps, (long long)o.steps);
  reportLayout(o, pkg, run);
  loadParameters(backend, dir + "/model.safetensors"); // this rank's slices
  // The moments a tensor at a time, each rank reading only its slice of
  // each (and uploading only its shards of it): no rank holds the file.
  const std::string optimizerPath = dir + "/optimizer.safetensors";
  SafetensorsFile moments(optimizerPath);
  const int64_t es = backend.elementSize(), t = pkg.tensorParallel;
  for (const auto &[prefix, which] : {std::pair<const char *, FlatBuffer>{"exp_avg.", FlatBuffer::AdamM},
                                      {"exp_avg_sq.", FlatBuffer::AdamV}}) {
    std::vector<char> slice;
    for (const ParamInfo &p : pkg.params) {
      const SafetensorsFile::Tensor *whole = moments.find(prefix + p.name);
      if (!whole || whole->shape != wholeShape(p, t) || whole->dtype != pkg.dtype)
        fail(optimizerPath + ": " + prefix + p.name + " is missing or has "
             "another shape or dtype than the model's (" + shapeString(wholeShape(p, t)) +
             " " + pkg.dtype + ")");
      // Whole in the file, whatever the writer's layout: this rank's slice.
      slice.assign(size_t(p.numel * es), 0);
      moments.readSlice(*whole, p, backend.tpRank(), t, slice.data());
      // An edited or corrupt file whose hash was recomputed: a NaN, or a
      // negative second moment (sqrt(v) of the next update is NaN), would
      // make the next update non-finite.
      const bool second = which == FlatBuffer::AdamV;
      for (int64_t i = 0; i < p.numel; ++i) {
        const double x = floatAt(slice.data(), i, es);
        if (!std::isfinite(x) || (second && x < 0))
          fail(optimizerPath + ": " + prefix + p.name + " holds " + valueText(x) +
               " at index " + std::to_string(i) + ": " +
               (second ? "AdamW's second moments must be finite and >= 0"
                       : "AdamW's first moments must be finite"));
      }
      // This rank keeps its shards of the data-parallel group's (at any count).
      if (!backend.sharded()) {
        backend.upload(which, p.offset * es, slice.data(), p.numel * es);
        continue;
      }
      for (const Backend::Shard &s : backend.shards()) {
        const int64_t a = std::max(p.offset, s.offset),
                      b = std::min(p.offset + p.numel, s.offset + s.count);
        if (a < b)
          backend.upload(which, (s.moment + a - s.offset) * es,
                         slice.data() + (a - p.offset) * es, (b - a) * es);
      }
    }
  }
  return resumed;
}

} // namespace mlc::rt
