//===- SafetensorsTest.cpp - one safetensors header, read and written two ways -===//
//
// readSafetensors() (whole files) and SafetensorsFile (a checkpoint's
// tensors, a rank's slice at a time) check a header with the same code, and
// SafetensorsStream writes what encodeSafetensors() writes; no file of
// parameters that are not finite is written.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"
#include "runtime/train/WholeTensors.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlc::rt;

namespace {

std::string tempPath(const std::string &name) {
  return "/tmp/mlc-safetensorstest-" + std::to_string(getpid()) + "-" + name;
}

/// An f32 tensor of `shape` whose bytes count up from `first`.
HostTensor tensor(const std::vector<int64_t> &shape, char first) {
  HostTensor t{"f32", shape, {}};
  t.data.resize(size_t(t.numel() * 4));
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = char(first + i);
  return t;
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// `bytes` written to `path`.
void put(const std::string &path, const std::string &bytes) { writeFileAtomically(path, bytes); }

/// A file of two tensors with the first's header entry replaced by `a`.
std::string withEntry(const std::string &a) {
  std::string header = "{\"a\":" + a + ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
                       "\"data_offsets\":[8,12]}}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  return out + header + std::string(12, '\0');
}

/// Parameters held on the host: enough of a backend for the writers.
class HostParameters : public Backend {
public:
  explicit HostParameters(const Package &pkg)
      : Backend(pkg), params_(size_t(pkg.paramCount * 4)) {}
  std::string name() const override { return "host"; }
  void upload(FlatBuffer, int64_t offset, const void *src, int64_t bytes) override {
    std::memcpy(params_.data() + offset, src, size_t(bytes));
  }
  void download(FlatBuffer, int64_t offset, void *dst, int64_t bytes) override {
    std::memcpy(dst, params_.data() + offset, size_t(bytes));
  }
  void zero(FlatBuffer) override {}
  void setInput(const std::string &, const HostTensor &) override {}
  void run(const std::string &, int64_t) override {}
  HostTensor output(const std::string &, const std::string &) override { return {}; }
  void setScalars(const std::string &, const std::vector<double> &) override {}

private:
  std::vector<char> params_;
};

} // namespace

TEST(Safetensors, BothReadersRefuseABadHeaderWithTheSameMessage) {
  const std::string path = tempPath("bad.safetensors");
  const std::string good = "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"x", "not a safetensors file (shorter than its header size)"},
      {withEntry(good).substr(0, 12), "exceeds the file"},
      {withEntry("{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}"),
       "tensor 'a' has unsupported dtype F16"},
      {withEntry("{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}"),
       "tensor 'a' has a dimension that is not a non-negative integer"},
      {withEntry("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"),
       "tensor 'a' has 8 bytes for shape [3]"},
      {withEntry("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}"),
       "tensor 'a' lies outside the file (truncated?)"},
      {withEntry("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}"),
       "tensor 'a' starts at byte 4 of the data, not 0 (a gap before it)"},
      {withEntry("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}"),
       "tensor 'b' starts at byte 8 of the data, not 12 (it overlaps another tensor)"},
      {withEntry("{\"dtype\":\"F32\",\"shape\":[2]}"),
       "tensor 'a' lacks dtype, shape or data_offsets"},
  };
  for (const auto &[bytes, message] : cases) {
    put(path, bytes);
    const std::string whole = errorOf([&] { readSafetensors(path); });
    const std::string sliced = errorOf([&] { SafetensorsFile file(path); });
    EXPECT_NE(whole.find(path + ": "), std::string::npos) << whole;
    EXPECT_NE(whole.find(message), std::string::npos) << whole;
    EXPECT_EQ(sliced, whole);
  }
  put(path, withEntry(good));
  EXPECT_EQ(readSafetensors(path).at("a").shape, (std::vector<int64_t>{2}));
  SafetensorsFile file(path);
  EXPECT_EQ(file.find("b")->begin, file.find("a")->end);
  std::remove(path.c_str());
}

TEST(Safetensors, TheStreamWritesWhatEncodeWrites) {
  const std::string path = tempPath("stream.safetensors");
  const std::vector<std::pair<std::string, HostTensor>> tensors = {
      {"w", tensor({2, 3}, 0)}, {"b", tensor({3}, 24)}, {"e", tensor({0, 4}, 0)}};
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::vector<SafetensorsStream::Entry> entries;
  for (const auto &[name, t] : tensors)
    entries.push_back({name, t.dtype, t.shape});
  {
    SafetensorsStream stream(path, entries, metadata);
    for (const auto &[_, t] : tensors)
      stream.append(t.data.data(), t.data.size());
    stream.finish();
  }
  EXPECT_EQ(readFile(path), encodeSafetensors(tensors, metadata));
  EXPECT_EQ(readSafetensors(path).at("w").data, tensors[0].second.data);
  std::remove(path.c_str());
}

// No file of parameters that are not finite is written, whatever writes it
// (--save at the end, the weights kept when a step fails, a checkpoint's
// model.safetensors: saveParameters() and streamParameters()).
TEST(Safetensors, NoFileOfNonFiniteParametersIsWritten) {
  Package pkg;
  pkg.dtype = "f32";
  ParamInfo w, b;
  w.name = "w";
  w.shape = {2, 3};
  w.numel = 6;
  b.name = "b";
  b.shape = {3};
  b.numel = 3;
  b.offset = 6;
  pkg.params = {w, b};
  pkg.paramCount = 9;
  HostParameters backend(pkg);
  std::vector<float> values(9, 0.5f);
  const std::string path = tempPath("params.safetensors");
  backend.upload(FlatBuffer::Params, 0, values.data(), 36);
  saveParameters(backend, path);
  EXPECT_EQ(readSafetensors(path).at("b").data.size(), 12u);
  std::remove(path.c_str());
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    values[7] = bad;
    backend.upload(FlatBuffer::Params, 0, values.data(), 36);
    EXPECT_EQ(errorOf([&] { saveParameters(backend, path); }),
              path + " was not written: parameter b holds " + (std::isnan(bad) ? "nan" : "-inf") +
                  " at index 1");
    struct stat st;
    EXPECT_NE(stat(path.c_str(), &st), 0) << "written: " << path;
    EXPECT_NE(stat((path + ".tmp." + std::to_string(getpid())).c_str(), &st), 0);
  }
}
