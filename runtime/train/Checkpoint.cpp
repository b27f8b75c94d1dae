//===- Checkpoint.cpp - checkpoints and exact resume -----------------------===//

#include "runtime/train/Checkpoint.h"
#include "runtime/core/Error.h"
#include "runtime/core/Hash.h"
#include "runtime/core/Json.h"
#include "runtime/core/TensorIO.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

/// The settings a run's numbers depend on; a resumed run must use the same.
/// (--steps may change: the cosine schedule then follows the new length.)
const char *const kRunFlags[] = {"seed",  "lr",   "min-lr",    "warmup", "lr-schedule",
                                 "weight-decay", "beta1", "beta2", "eps", "clip-grad",
                                 "data",  "split", "batches",  "vocab-file", "global-batch",
                                 "lr-scaling", "base-batch"};

/// The package fields that identify the model and its batches.
const char *const kPackageFields[] = {"model", "config", "dtype", "micro_batch", "seq_len"};

std::string stepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)step);
  return buf;
}

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void removeDirectory(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        std::remove((dir + "/" + name).c_str());
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

} // namespace

std::string saveCheckpoint(Backend &backend, const TrainOptions &o, int64_t step) {
  const Package &pkg = backend.package();
  makeDirectories(o.saveDir);
  std::string final = o.saveDir + "/" + stepName(step);
  std::string tmp = o.saveDir + "/." + stepName(step) + ".tmp." + std::to_string(getpid());
  removeDirectory(tmp);
  removeAbandoned(o.saveDir);
  makeDirectories(tmp);
  try {
    saveParameters(backend, tmp + "/model.safetensors");
    std::vector<char> m = downloadAll(backend, FlatBuffer::AdamM),
                      v = downloadAll(backend, FlatBuffer::AdamV);
    std::vector<std::pair<std::string, HostTensor>> moments;
    for (const auto &[prefix, flat] : {std::pair<const char *, std::vector<char> *>{"exp_avg.", &m},
                                       {"exp_avg_sq.", &v}})
      for (const ParamInfo &p : pkg.params) {
        HostTensor t;
        t.dtype = pkg.dtype;
        t.shape = p.shape;
        const char *base = flat->data() + p.offset * backend.elementSize();
        t.data.assign(base, base + p.numel * backend.elementSize());
        moments.push_back({prefix + p.name, std::move(t)});
      }
    writeSafetensors(tmp + "/optimizer.safetensors", moments);
    // For the test of a crash mid-write: the process dies here, between files.
    if (const char *kill = std::getenv("MLC_TEST_KILL_IN_CHECKPOINT"); kill && *kill)
      std::raise(SIGKILL);
    std::string state = "{\n  \"step\": " + std::to_string(step) + ",\n  \"package\": {";
    bool first = true;
    for (const char *key : kPackageFields) {
      state += std::string(first ? "" : ",") + "\n    " + jsonQuote(key) + ": " +
               jsonQuote(manifestField(pkg, key));
      first = false;
    }
    state += "\n  },\n  \"run\": {";
    first = true;
    for (const char *name : kRunFlags) {
      state += std::string(first ? "" : ",") + "\n    " + jsonQuote(name) + ": " +
               jsonQuote(flag(name).value(o));
      first = false;
    }
    state += "\n  },\n  \"steps\": " + std::to_string(o.steps) + "\n}\n";
    writeFileAtomically(tmp + "/state.json", state);
    std::string manifest = "{\n  \"format\": \"mlc-checkpoint\",\n  \"version\": " +
                           std::to_string(kCheckpointVersion) + ",\n  \"step\": " +
                           std::to_string(step) + ",\n  \"files\": {";
    first = true;
    for (const char *file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
      manifest += std::string(first ? "" : ",") + "\n    " + jsonQuote(file) + ": " +
                  jsonQuote(contentHash(readFile(tmp + "/" + file)));
      first = false;
    }
    manifest += "\n  }\n}\n";
    // The manifest goes last: a directory without one is not a checkpoint.
    writeFileAtomically(tmp + "/checkpoint.json", manifest);
    syncDirectory(tmp);
    removeDirectory(final);
    if (std::rename(tmp.c_str(), final.c_str()) != 0)
      fail(final + ": cannot move the checkpoint into place");
    syncDirectory(o.saveDir);
  } catch (const Error &) {
    removeDirectory(tmp); // the previous checkpoints stay as they were
    throw;
  }
  if (o.keep > 0) {
    auto all = listCheckpoints(o.saveDir);
    for (size_t i = 0; i + size_t(o.keep) < all.size(); ++i)
      removeDirectory(all[i].second);
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

int64_t loadCheckpoint(Backend &backend, const TrainOptions &o, const std::string &dir) {
  const Package &pkg = backend.package();
  std::string manifestPath = dir + "/checkpoint.json";
  struct stat st;
  if (stat(manifestPath.c_str(), &st) != 0)
    fail(dir + ": not a checkpoint (no checkpoint.json: incomplete or another directory)");
  Json manifest = Json::parse(readFile(manifestPath), manifestPath, /*uniqueKeys=*/true);
  const Json *format = manifest.find("format"), *version = manifest.find("version");
  if (!format || format->string != "mlc-checkpoint" || !version)
    fail(manifestPath + ": not an mlc checkpoint manifest");
  if (int(version->number) != kCheckpointVersion)
    fail(manifestPath + ": checkpoint version " + std::to_string(int(version->number)) +
         " is not supported (this runtime reads version " +
         std::to_string(kCheckpointVersion) + ")");
  const Json *files = manifest.find("files");
  for (const char *file : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    const Json *hash = files ? files->find(file) : nullptr;
    if (!hash)
      fail(manifestPath + ": lists no " + file);
    std::string actual = contentHash(readFile(dir + "/" + file));
    if (actual != hash->string)
      fail(dir + "/" + file + ": content hash " + actual + " does not match the manifest's " +
           hash->string + " (the file changed or is corrupt)");
  }
  std::string statePath = dir + "/state.json";
  Json state = Json::parse(readFile(statePath), statePath, /*uniqueKeys=*/true);
  const Json *step = state.find("step"), *package = state.find("package"),
             *run = state.find("run");
  if (!step || step->kind != Json::Number || step->number < 0 || !package || !run)
    fail(statePath + ": malformed checkpoint state");
  std::string differences;
  for (const char *key : kPackageFields) {
    const Json *v = package->find(key);
    std::string theirs = v ? v->string : "", ours = manifestField(pkg, key);
    if (theirs != ours)
      differences += "\n  " + std::string(key) + ": the checkpoint's '" + theirs +
                     "', this package's '" + ours + "'";
  }
  for (const char *name : kRunFlags) {
    const Json *v = run->find(name);
    std::string theirs = v ? v->string : "", ours = flag(name).value(o);
    if (theirs != ours)
      differences += "\n  --" + std::string(name) + ": the checkpoint's '" + theirs +
                     "', this run's '" + ours + "'";
  }
  if (!differences.empty())
    fail(dir + ": the checkpoint was written by another model or run; resume with its "
         "settings:" + differences);
  if (const Json *steps = state.find("steps");
      steps && int64_t(steps->number) != o.steps && o.schedule != "constant")
    fprintf(stderr,
            "mlc: note: the checkpoint's run was %lld steps long, this one %lld: the "
            "learning rate follows the new length from here on\n",
            (long long)steps->number, (long long)o.steps);
  loadParameters(backend, dir + "/model.safetensors");
  auto moments = readSafetensors(dir + "/optimizer.safetensors");
  const int64_t es = backend.elementSize();
  for (const auto &[prefix, which] : {std::pair<const char *, FlatBuffer>{"exp_avg.", FlatBuffer::AdamM},
                                      {"exp_avg_sq.", FlatBuffer::AdamV}}) {
    std::vector<char> flat(pkg.paramCount * es);
    for (const ParamInfo &p : pkg.params) {
      auto it = moments.find(prefix + p.name);
      if (it == moments.end() || it->second.shape != p.shape || it->second.dtype != pkg.dtype)
        fail(dir + "/optimizer.safetensors: " + prefix + p.name + " is missing or has "
             "another shape or dtype than the model's");
      std::copy(it->second.data.begin(), it->second.data.end(),
                flat.begin() + p.offset * es);
    }
    uploadAll(backend, which, flat);
  }
  return int64_t(step->number);
}

} // namespace mlc::rt
