//===- BatchDump.cpp - --dump-batches: the inputs a run fed ----------------===//

#include "runtime/train/BatchDump.h"
#include "support/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

/// The leading dimension the reserved header has room for: any count a run
/// can reach (int64's digits).
constexpr int64_t kMostRows = INT64_MAX;

std::vector<int64_t> stacked(int64_t rows, std::vector<int64_t> shape) {
  shape.insert(shape.begin(), rows);
  return shape;
}

} // namespace

BatchDump::BatchDump(const std::string &dir, const std::vector<InputInfo> &inputs) : dir_(dir) {
  for (const InputInfo &in : inputs)
    if (in.dynamic())
      fail("--dump-batches stacks fixed-shape inputs; '" + in.name +
           "' has a dynamic token dimension (unpadded BERT)");
  makeDirectories(dir);
}

BatchDump::~BatchDump() {
  closeAll();
  if (!committed_)
    for (auto &[name, f] : files_)
      std::remove(f.tmp.c_str());
}

void BatchDump::closeAll() {
  for (auto &[name, f] : files_)
    if (f.fd >= 0) {
      ::close(f.fd);
      f.fd = -1;
    }
}

void BatchDump::failWriting(const File &f, int err) {
  fail("--dump-batches: " + f.path + ": write failed: " + std::strerror(err));
}

void BatchDump::append(const std::string &name, const HostTensor &t) {
  auto [it, fresh] = files_.try_emplace(name);
  File &f = it->second;
  if (fresh) {
    f.path = dir_ + "/" + name + ".npy";
    f.tmp = dir_ + "/." + name + ".npy.tmp." + std::to_string(getpid());
    f.dtype = t.dtype;
    f.shape = t.shape;
    checkWritableFile(f.path, "--dump-batches");
    f.fd = ::open(f.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0)
      failWriting(f, errno);
    std::string header = npyHeader(f.dtype, stacked(kMostRows, f.shape));
    f.headerSize = header.size();
    if (int err = writeAll(f.fd, header))
      failWriting(f, err);
  } else if (t.dtype != f.dtype || t.shape != f.shape) {
    fail("--dump-batches: input '" + name + "' was " + f.dtype + " " + shapeString(f.shape) +
         " and is now " + t.dtype + " " + shapeString(t.shape));
  }
  if (int err = writeAll(f.fd, t.data.data(), t.data.size()))
    failWriting(f, err);
  ++f.rows;
}

void BatchDump::commit() {
  // Every file whole on the disk before the first takes its name.
  for (auto &[name, f] : files_) {
    std::string header = npyHeader(f.dtype, stacked(f.rows, f.shape), f.headerSize);
    if (header.size() != f.headerSize)
      fail("internal: --dump-batches: " + f.path + "'s header outgrew its reserved room");
    int err = 0;
    errno = 0;
    if (::pwrite(f.fd, header.data(), header.size(), 0) != ssize_t(header.size()))
      err = errno ? errno : EIO;
    if (!err && ::fsync(f.fd) != 0)
      err = errno;
    if (::close(f.fd) != 0 && !err)
      err = errno;
    f.fd = -1;
    if (err)
      failWriting(f, err);
  }
  for (auto &[name, f] : files_)
    if (std::rename(f.tmp.c_str(), f.path.c_str()) != 0)
      fail("--dump-batches: " + f.path + ": cannot rename into place: " +
           std::strerror(errno));
  committed_ = true;
}

} // namespace mlc::rt
