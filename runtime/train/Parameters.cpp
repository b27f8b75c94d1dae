//===- Parameters.cpp - the parameters, initialized, loaded and saved ------===//
//
// The flat parameters are filled from the package's init spec or from
// weights by name, and saved as safetensors (or a Hugging Face model
// directory, ModelDirectory.cpp). `run` (runForward) loads them and runs
// the forward pass once.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"
#include "contract/DeviceMemory.h"
#include "contract/StepFunctions.h"
#include "runtime/train/BatchSources.h"
#include "runtime/train/ModelDirectory.h"
#include "runtime/train/TensorParallel.h"
#include "runtime/train/TrainerParts.h"
#include "runtime/train/WholeTensors.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace mlc::rt {

namespace {

template <typename T> T *as(char *p) { return reinterpret_cast<T *>(p); }

/// Writes `x` as element i of a flat buffer of `elementSize`-byte floats.
void store(std::vector<char> &flat, int64_t elementSize, int64_t i, double x) {
  if (elementSize == 4)
    as<float>(flat.data())[i] = float(x);
  else
    as<double>(flat.data())[i] = x;
}

} // namespace

/// Calls emit(i, x) for element i of parameter p's whole HF tensor (`shape`),
/// in order: the package's initializer, or the seeded draws of its init spec.
/// The draws depend on the parameter's name and the whole shape only, so a
/// tensor-parallel rank that slices them starts from one process's weights.
template <typename Emit>
static void forEachInitialValue(const Package &pkg, const ParamInfo &p,
                                const std::vector<int64_t> &shape, uint64_t seed,
                                const std::map<std::string, HostTensor> &packaged, Emit emit) {
  int64_t n = 1;
  for (int64_t x : shape)
    n *= x;
  if (p.init == "package") {
    auto it = packaged.find(p.name);
    if (it == packaged.end() || it->second.shape != shape)
      fail(pkg.dir + "/weights.safetensors: no tensor " + p.name + " " + shapeString(shape) +
           " (the package is damaged; compile it again)");
    for (int64_t i = 0; i < n; ++i)
      emit(i, it->second.getDouble(i));
    return;
  }
  std::mt19937_64 rng(nameSeed(seed, p.name));
  double std = 0, fill = 0;
  bool normal = false;
  if (p.init.rfind("normal:", 0) == 0) {
    normal = true;
    std = std::stod(p.init.substr(7));
  } else if (p.init == "ones") {
    fill = 1;
  } else if (p.init != "zeros") {
    fail(pkg.dir + ": parameter " + p.name + " has unknown init '" + p.init + "'");
  }
  std::normal_distribution<double> dist(0.0, std);
  for (int64_t i = 0; i < n; ++i)
    emit(i, normal ? dist(rng) : fill);
}

void initializeParameters(Backend &backend, uint64_t seed) {
  const Package &pkg = backend.package();
  const int64_t es = backend.elementSize(), t = pkg.tensorParallel;
  std::vector<char> flat(pkg.paramCount * es);
  // An imported model's parameters start from its initializers, which the
  // compiler stored in the package.
  std::map<std::string, HostTensor> packaged;
  for (const ParamInfo &p : pkg.params)
    if (p.init == "package" && packaged.empty()) {
      packaged = readSafetensors(pkg.dir + "/weights.safetensors");
      break;
    }
  for (const ParamInfo &p : pkg.params) {
    if (p.tpDim < 0) { // whole on every rank: straight into the flat buffer
      forEachInitialValue(pkg, p, p.shape, seed, packaged,
                          [&](int64_t i, double x) { store(flat, es, p.offset + i, x); });
      continue;
    }
    // Split over the tensor-parallel group: drawn whole, then this rank's slice.
    HostTensor whole;
    whole.dtype = "f64";
    whole.shape = wholeShape(p, t);
    whole.data.resize(size_t(whole.numel() * 8));
    double *v = reinterpret_cast<double *>(whole.data.data());
    forEachInitialValue(pkg, p, whole.shape, seed, packaged,
                        [&](int64_t i, double x) { v[i] = x; });
    HostTensor mine = sliceOfWhole(whole, p, backend.tpRank(), t);
    for (int64_t i = 0; i < p.numel; ++i)
      store(flat, es, p.offset + i, mine.getDouble(i));
  }
  uploadAll(backend, FlatBuffer::Params, flat);
}

static bool sameValues(const HostTensor &a, const HostTensor &b, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i)
    if (a.getDouble(i) != b.getDouble(i))
      return false;
  return true;
}

/// A value as a message shows it: -0.5, 1e-09, nan, inf.
std::string valueText(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

namespace {

/// Where loaded weights come from: whole tensors read up front (a model
/// directory, an index of shards), or one safetensors file read a slice at
/// a time (a checkpoint's model.safetensors, --init FILE), so that no rank
/// holds more of the model than its slices.
class WeightSource {
public:
  explicit WeightSource(const std::string &path) {
    struct stat st;
    const bool index = path.size() >= 11 && path.compare(path.size() - 11, 11, ".index.json") == 0;
    if (!index && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      file_ = std::make_unique<SafetensorsFile>(path);
      for (const auto &[name, t] : file_->tensors())
        shapes_[name] = t.shape;
    } else {
      whole_ = readModelWeights(path);
      for (const auto &[name, t] : whole_)
        shapes_[name] = t.shape;
    }
  }
  /// Every stored tensor's whole shape, by name.
  const std::map<std::string, std::vector<int64_t>> &shapes() const { return shapes_; }
  /// Rank `rank`'s slice of the stored tensor `name` (parameter p's).
  HostTensor slice(const std::string &name, const ParamInfo &p, int rank, int64_t t) const {
    const bool split = p.tpDim >= 0 && t > 1;
    if (!file_)
      return split ? sliceOfWhole(whole_.at(name), p, rank, t) : whole_.at(name);
    const SafetensorsFile::Tensor &stored = *file_->find(name);
    HostTensor out;
    out.dtype = stored.dtype;
    out.shape = split ? p.shape : stored.shape;
    out.data.resize(size_t(out.numel() * dtypeSize(out.dtype)));
    file_->readSlice(stored, p, rank, t, out.data.data());
    return out;
  }

private:
  std::unique_ptr<SafetensorsFile> file_;
  std::map<std::string, HostTensor> whole_;
  std::map<std::string, std::vector<int64_t>> shapes_;
};

} // namespace

void loadParameters(Backend &backend, const std::string &path) {
  const Package &pkg = backend.package();
  const int64_t t = pkg.tensorParallel;
  WeightSource source(path);
  const auto &shapes = source.shapes();
  // Every stored name of a split parameter holds the whole HF tensor.
  if (t > 1)
    for (const ParamInfo &p : pkg.params) {
      if (p.tpDim < 0)
        continue;
      std::vector<std::string> names{p.name};
      if (auto a = pkg.aliases.find(p.name); a != pkg.aliases.end())
        names.insert(names.end(), a->second.begin(), a->second.end());
      for (const std::string &name : names)
        if (auto it = shapes.find(name); it != shapes.end() && it->second != wholeShape(p, t))
          fail(path + ": " + name + " is " + shapeString(it->second) + ", the model needs " +
               shapeString(wholeShape(p, t)) + " (each of " + std::to_string(t) +
               " tensor-parallel ranks holding " + shapeString(p.shape) + ")");
    }
  auto numel = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  };
  auto localShape = [&](const ParamInfo &p, const std::string &name) {
    return p.tpDim >= 0 && t > 1 ? p.shape : shapes.at(name);
  };
  std::string problems;
  // A tied parameter may be stored under any of its names (HF's own files
  // keep one of them); where several are stored, they must agree.
  auto aliasesOf = [&](const std::string &name) {
    auto a = pkg.aliases.find(name);
    return a == pkg.aliases.end() ? std::vector<std::string>{} : a->second;
  };
  auto isAlias = [&](const std::string &name) {
    for (auto &[param, names] : pkg.aliases)
      if (std::find(names.begin(), names.end(), name) != names.end())
        return true;
    return false;
  };
  std::map<std::string, std::string> source_; // parameter -> the name its values are read under
  for (const ParamInfo &p : pkg.params) {
    std::string stored = shapes.count(p.name) ? p.name : "";
    for (const std::string &alias : aliasesOf(p.name)) {
      if (!shapes.count(alias))
        continue;
      if (stored.empty()) {
        stored = alias;
        continue;
      }
      const int rank = backend.tpRank();
      if (localShape(p, alias) != localShape(p, stored) ||
          !sameValues(source.slice(alias, p, rank, t), source.slice(stored, p, rank, t),
                      numel(localShape(p, stored))))
        problems += "\n  disagreeing: " + alias + " and " + stored +
                    " (one tied parameter) hold different values";
    }
    if (stored.empty()) {
      problems += "\n  missing: " + p.name + " " + shapeString(p.shape);
      continue;
    }
    if (localShape(p, stored) != p.shape)
      problems += "\n  mis-shaped: " + stored + " is " + shapeString(localShape(p, stored)) +
                  ", the model needs " + shapeString(p.shape);
    source_[p.name] = stored;
  }
  for (auto &[name, shape] : shapes)
    if (!pkg.param(name) && !isAlias(name))
      problems += "\n  unexpected: " + name + " " + shapeString(shape);
  if (!problems.empty())
    fail(path + ": weights do not match the model:" + problems);
  const int64_t es = backend.elementSize();
  std::vector<char> flat(pkg.paramCount * es); // this rank's own parameters
  for (const ParamInfo &p : pkg.params) {
    const HostTensor t = source.slice(source_.at(p.name), p, backend.tpRank(), pkg.tensorParallel);
    for (int64_t i = 0; i < p.numel; ++i) {
      store(flat, es, p.offset + i, t.getDouble(i));
      // A NaN or infinity (or a value past the package's f32) would make
      // the first step's loss non-finite: refused where it comes from.
      if (!std::isfinite(es == 4 ? double(as<float>(flat.data())[p.offset + i])
                                 : as<double>(flat.data())[p.offset + i]))
        fail(path + ": " + p.name + " holds " + valueText(t.getDouble(i)) + " at index " +
             std::to_string(i) + (std::isfinite(t.getDouble(i)) ? ", past the package's " +
                                                                     pkg.dtype
                                                               : std::string()) +
             ": parameters must be finite");
    }
  }
  uploadAll(backend, FlatBuffer::Params, flat);
}

/// --memory-report: what the backend allocated, by item (contract/
/// DeviceMemory.h), and the total, as one JSON object.
void writeMemoryReport(const Backend &backend, const std::string &path) {
  std::string json = "{\"device\": " + jsonQuote(backend.name());
  int64_t total = 0;
  for (const char *item : memory::kItems) {
    auto it = backend.allocated().find(item);
    int64_t bytes = it == backend.allocated().end() ? 0 : it->second;
    json += ", \"" + std::string(item) + "\": " + std::to_string(bytes);
    total += bytes;
  }
  for (auto &[item, bytes] : backend.allocated())
    if (std::find_if(std::begin(memory::kItems), std::end(memory::kItems),
                     [&](const char *k) { return item == k; }) == std::end(memory::kItems))
      fail("internal: the backend allocated under an unknown item '" + item + "'");
  writeFileAtomically(path, json + ", \"total\": " + std::to_string(total) + "}\n");
}

void saveParameters(Backend &backend, const std::string &path) {
  // The writer opens the file first: one that cannot write it stops the
  // group before any tensor moves.
  const bool writer = isWriter(backend);
  std::unique_ptr<SafetensorsStream> file;
  std::string error;
  if (writer) {
    try {
      file = std::make_unique<SafetensorsStream>(path, parameterEntries(backend.package()),
                                                 std::map<std::string, std::string>{{"format", "pt"}});
    } catch (const Error &e) {
      error = e.what();
    }
  }
  if (!agreeWithWriter(backend, error.empty(), /*allRanks=*/false)) {
    if (writer)
      fail(error);
    return;
  }
  streamParameters(backend, file.get(), path, error);
  reportGathers(backend, path);
  if (!writer)
    return;
  if (!error.empty())
    fail(error); // the file is removed: the previous one stays
  file->finish();
}

/// --save: a safetensors file, or a Hugging Face model directory.
void saveWeights(Backend &backend, const TrainOptions &o) {
  if (isDirectoryPath(o.save))
    saveModelDirectory(backend, o, o.save);
  else
    saveParameters(backend, o.save);
}


/// A run that stops on a non-finite step writes --save with the parameters
/// before it, when they are finite (saveParameters writes no others); the
/// end of its error message says which.
std::string keepParameters(Backend &backend, const TrainOptions &o) {
  if (o.save.empty())
    return "";
  try {
    saveWeights(backend, o);
  } catch (const Error &e) {
    return std::string("; ") + e.what();
  }
  // Only the writer knows whether the file was written; the others say
  // nothing of it.
  if (!isWriter(backend))
    return "";
  return "; the parameters before this step are saved in " + o.save;
}

void runForward(Backend &backend, const TrainOptions &weights, const RunOptions &run) {
  const Package &pkg = backend.package();
  backend.setTf32(weights.tf32 == "on");
  if (run.outputDir.empty())
    fail("run needs --output-dir");
  // Nothing the run reads is overwritten by an output (a NAME.npy that is a
  // link to an input, to --init or to a file of the package).
  std::vector<NamedPath> inputs = {{"--init", weights.init}};
  for (auto &[name, file] : run.inputs)
    inputs.push_back({"--input " + name, file});
  for (const std::string &f : filesIn(pkg.dir))
    inputs.push_back({"the package", f});
  std::vector<NamedPath> outputs;
  for (const auto &out : pkg.function(kEvaluateFn).outputs) {
    // Each output is NAME.npy inside --output-dir, never a path elsewhere.
    if (out.name.empty() || out.name == "." || out.name == ".." ||
        out.name.find('/') != std::string::npos)
      fail(pkg.dir + ": the model's output '" + out.name + "' is not a file name; --output-dir "
           "holds NAME.npy per output");
    outputs.push_back({"--output-dir", run.outputDir + "/" + out.name + ".npy"});
  }
  refuseOutputsOverInputs(inputs, outputs);
  setTensorParallelRank(backend);
  if (!weights.init.empty())
    loadParameters(backend, weights.init);
  else
    initializeParameters(backend, weights.seed);
  std::set<std::string> given;
  for (auto &[name, file] : run.inputs) {
    if (name.empty() || file.empty())
      fail("--input expects NAME=FILE.npy, got '" + name + "=" + file + "'");
    if (given.count(name)) // the first would be dropped in silence
      fail("--input " + name + " is given twice; the model takes one array per input");
    HostTensor t = readNpy(file); // its errors name the file
    try {
      backend.setInput(name, t);
    } catch (const Error &e) {
      fail(file + ": " + e.what());
    }
    given.insert(name);
  }
  for (const InputInfo &in : pkg.inputs)
    if (!given.count(in.name))
      fail("missing --input " + in.name + "=FILE.npy (shape " + shapeString(in.shape) + ", " +
           in.dtype + ")");
  // Inference: the dropout-free copy of the forward graph. A bad value in an
  // input (a token id outside the vocabulary) is reported with the inputs.
  try {
    backend.run(kEvaluateFn, 0);
  } catch (const Error &e) {
    std::string given;
    for (auto &[name, file] : run.inputs)
      given += (given.empty() ? "" : ", ") + name + "=" + file;
    fail(std::string(e.what()) + " (inputs " + given + ")");
  }
  // All outputs or none: a failed write leaves every previous NAME.npy.
  makeDirectories(run.outputDir);
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto &out : pkg.function(kEvaluateFn).outputs)
    files.push_back({run.outputDir + "/" + out.name + ".npy",
                     encodeNpy(backend.output(kEvaluateFn, out.name))});
  writeFilesAtomically(files);
}

} // namespace mlc::rt
