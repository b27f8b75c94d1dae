//===- WholeTensors.cpp - whole tensors gathered to the writer, one at a time ===//

#include "runtime/train/WholeTensors.h"
#include "runtime/core/PlanFormat.h"
#include "runtime/train/TensorParallel.h"
#include "runtime/train/TrainerParts.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

/// MLC_DEBUG_GATHER's tally of this rank's gathers: the most bytes its
/// buffers held at once, and the bytes it sent and received.
struct Tally {
  int64_t held = 0, sent = 0, received = 0;
} tally;

void holding(size_t bytes) { tally.held = std::max(tally.held, int64_t(bytes)); }

/// This rank's elements of p's range of a sharded moment buffer `which`,
/// gathered over the data-parallel group to its first rank, into `slice`
/// (there; null elsewhere): one gather per bucket p lies in, each rank's
/// part of the bucket's range after the previous ranks' (shardOf() deals
/// them in order), straight into place.
void gatherShards(Backend &backend, const ParamInfo &p, FlatBuffer which, char *slice) {
  Communicator *dp = backend.communicator();
  const int ranks = dp ? dp->size() : 1, me = backend.rank();
  const int64_t es = backend.elementSize(), lo = p.offset, hi = p.offset + p.numel;
  std::vector<char> piece;
  for (const Backend::Shard &s : backend.shards()) {
    const int64_t a = std::max(lo, s.bucketOffset), b = std::min(hi, s.bucketOffset + s.bucketCount);
    if (a >= b)
      continue;
    // This rank's part of [a, b): where it meets the rank's shard.
    const int64_t ma = std::clamp(s.offset, a, b), mb = std::clamp(s.offset + s.count, a, b);
    const int64_t bytes = (mb - ma) * es;
    char *at = nullptr;
    if (slice) {
      at = slice + (ma - lo) * es;
    } else {
      piece.assign(size_t(bytes), 0);
      holding(piece.size());
      at = piece.data();
    }
    if (bytes > 0)
      backend.download(which, (s.moment + ma - s.offset) * es, at, bytes);
    if (ranks <= 1)
      continue;
    std::vector<int64_t> counts;
    if (me == 0)
      for (int r = 0; r < ranks; ++r) {
        const ShardRange q = shardOf(s.bucketCount, r, ranks);
        const int64_t qa = std::clamp(s.bucketOffset + q.first, a, b),
                      qb = std::clamp(s.bucketOffset + q.first + q.count, a, b);
        counts.push_back((qb - qa) * es);
        if (r != 0)
          tally.received += (qb - qa) * es;
      }
    dp->gatherBytes(at, bytes, me == 0 ? slice + (a - lo) * es : nullptr, counts, 0);
    if (me != 0)
      tally.sent += bytes;
  }
}

} // namespace

bool isWriter(const Backend &backend) { return backend.rank() == 0 && backend.tpRank() == 0; }

bool agreeWithWriter(Backend &backend, bool ok, bool allRanks) {
  char flag = ok ? 1 : 0;
  if (backend.rank() == 0)
    if (Communicator *tp = backend.tensorParallel(); tp && tp->size() > 1)
      tp->broadcast(&flag, 1, 0);
  if (allRanks)
    if (Communicator *dp = backend.communicator(); dp && dp->size() > 1)
      dp->broadcast(&flag, 1, 0);
  return flag != 0;
}

bool gatherToWriter(Backend &backend, const ParamInfo &p, FlatBuffer which,
                    std::vector<char> &slices) {
  std::vector<char>().swap(slices); // the previous tensor's, freed
  const int64_t es = backend.elementSize(), t = backend.package().tensorParallel;
  const size_t sliceBytes = size_t(p.numel * es);
  const bool split = p.tpDim >= 0 && t > 1, lead = backend.rank() == 0;
  const bool sharded = which != FlatBuffer::Params && backend.sharded();
  // A tensor that is not split: the writer's group rank 0 holds it whole.
  // Every data-parallel replica holds the same parameters (and moments, when
  // they are not sharded): the first replica's are written.
  if ((!split && backend.tpRank() != 0) || (!sharded && !lead))
    return false;
  const bool writer = isWriter(backend);
  std::vector<char> own; // a first-replica rank's slice, to send on
  char *mine = nullptr;  // this rank's slice, on the first replica
  if (writer) {
    slices.assign(split ? sliceBytes * size_t(t) : sliceBytes, 0);
    holding(slices.size());
    mine = slices.data();
  } else if (lead) {
    own.assign(sliceBytes, 0);
    holding(own.size());
    mine = own.data();
  }
  if (!sharded)
    backend.download(which, p.offset * es, mine, int64_t(sliceBytes));
  else
    gatherShards(backend, p, which, mine);
  if (split && lead) {
    std::vector<int64_t> counts(writer ? size_t(t) : 0, int64_t(sliceBytes));
    backend.tensorParallel()->gatherBytes(mine, int64_t(sliceBytes),
                                          writer ? slices.data() : nullptr, counts, 0);
    (writer ? tally.received : tally.sent) += int64_t(sliceBytes) * (writer ? t - 1 : 1);
  }
  return writer;
}

void forEachWholeRun(const Backend &backend, const ParamInfo &p, const std::vector<char> &slices,
                     const std::function<void(const char *, size_t)> &emit) {
  const int64_t t = backend.package().tensorParallel, es = backend.elementSize();
  if (p.tpDim < 0 || t == 1) {
    emit(slices.data(), slices.size());
    return;
  }
  const int64_t sliceBytes = p.numel * es;
  if (int64_t(slices.size()) != sliceBytes * t)
    fail("internal: " + p.name + " is split over " + std::to_string(t) +
         " ranks, but their slices were not gathered");
  forEachSliceRun(p, t, es, [&](int rank, int64_t, int64_t slice, int64_t bytes) {
    emit(slices.data() + rank * sliceBytes + slice, size_t(bytes));
  });
}

void forEachWholeTensor(Backend &backend, FlatBuffer which, std::string &error,
                        const std::function<void(const ParamInfo &,
                                                 const std::vector<char> &)> &write) {
  std::vector<char> slices;
  for (const ParamInfo &p : backend.package().params) {
    if (!gatherToWriter(backend, p, which, slices) || !error.empty())
      continue;
    try {
      write(p, slices);
    } catch (const Error &e) {
      error = e.what();
    }
  }
}

void reportGathers(const Backend &backend, const std::string &what) {
  const char *debug = std::getenv("MLC_DEBUG_GATHER");
  if (debug && *debug) {
    const int64_t t = backend.package().tensorParallel;
    fprintf(stderr,
            "mlc: gathers for %s: rank %lld (tensor-parallel %d, data-parallel %d%s) held at "
            "most %lld bytes at once, received %lld, sent %lld\n",
            what.c_str(), (long long)(backend.rank() * t + backend.tpRank()), backend.tpRank(),
            backend.rank(), isWriter(backend) ? ", the writer" : "", (long long)tally.held,
            (long long)tally.received, (long long)tally.sent);
  }
  tally = Tally{};
}

static std::vector<std::string> namesOf(const Package &pkg, const ParamInfo &p) {
  std::vector<std::string> names;
  if (auto a = pkg.aliases.find(p.name); a != pkg.aliases.end())
    names = a->second;
  names.push_back(p.name);
  return names;
}

std::vector<SafetensorsStream::Entry> parameterEntries(const Package &pkg) {
  std::vector<SafetensorsStream::Entry> entries;
  for (const ParamInfo &p : pkg.params)
    for (const std::string &name : namesOf(pkg, p))
      entries.push_back({name, pkg.dtype, wholeShape(p, pkg.tensorParallel)});
  return entries;
}

void checkFinite(const Backend &backend, const ParamInfo &p, const std::vector<char> &slices,
                 const std::string &path) {
  const int64_t es = backend.elementSize();
  int64_t index = 0; // in the whole tensor
  forEachWholeRun(backend, p, slices, [&](const char *bytes, size_t size) {
    for (size_t i = 0; i < size / size_t(es); ++i, ++index) {
      const double x = floatAt(bytes, int64_t(i), es);
      if (!std::isfinite(x))
        fail(path + " was not written: parameter " + p.name + " holds " + valueText(x) +
             " at index " + std::to_string(index));
    }
  });
}

void streamParameters(Backend &backend, SafetensorsStream *file, const std::string &path,
                      std::string &error) {
  forEachWholeTensor(backend, FlatBuffer::Params, error, [&](const ParamInfo &p,
                                                             const std::vector<char> &slices) {
    checkFinite(backend, p, slices, path);
    for (size_t n = namesOf(backend.package(), p).size(); n > 0; --n)
      forEachWholeRun(backend, p, slices,
                      [&](const char *bytes, size_t size) { file->append(bytes, size); });
  });
}

//===----------------------------------------------------------------------===//
// SafetensorsStream
//===----------------------------------------------------------------------===//

namespace {

constexpr size_t kBuffer = size_t(8) << 20;
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

} // namespace

SafetensorsStream::SafetensorsStream(const std::string &path, const std::vector<Entry> &entries,
                                     const std::map<std::string, std::string> &metadata)
    : path_(path), hash_(kFnvOffset) {
  std::vector<SafetensorsEntry> files;
  for (const Entry &e : entries) {
    int64_t n = 1;
    for (int64_t d : e.shape)
      n *= d;
    files.push_back({e.name, e.dtype, e.shape, uint64_t(n * dtypeSize(e.dtype))});
  }
  const std::string header = encodeSafetensorsHeader(files, metadata);
  checkWritableFile(path, "output");
  tmp_ = path + ".tmp." + std::to_string(getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    tmp_.clear();
    fail(path + ": cannot write: " + std::strerror(errno));
  }
  expected_ = header.size();
  for (const SafetensorsEntry &e : files)
    expected_ += e.bytes;
  append(header.data(), header.size());
}

SafetensorsStream::~SafetensorsStream() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!tmp_.empty())
    std::remove(tmp_.c_str());
}

void SafetensorsStream::append(const char *bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    hash_ ^= uint64_t(static_cast<unsigned char>(bytes[i]));
    hash_ *= kFnvPrime;
  }
  written_ += size;
  if (buffer_.size() + size > kBuffer)
    flush();
  if (size >= kBuffer) {
    if (int err = writeAll(fd_, bytes, size))
      fail(path_ + ": write failed: " + std::strerror(err));
    return;
  }
  buffer_.append(bytes, size);
}

void SafetensorsStream::flush() {
  if (int err = writeAll(fd_, buffer_))
    fail(path_ + ": write failed: " + std::strerror(err));
  buffer_.clear();
}

std::string SafetensorsStream::finish() {
  flush();
  if (written_ != expected_)
    fail("internal: " + path_ + " got " + std::to_string(written_) + " bytes of " +
         std::to_string(expected_));
  int err = ::fsync(fd_) != 0 ? errno : 0;
  if (::close(fd_) != 0 && !err)
    err = errno;
  fd_ = -1;
  if (err)
    fail(path_ + ": write failed: " + std::strerror(err));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(path_ + ": cannot rename into place: " + std::strerror(errno));
  tmp_.clear();
  std::vector<char> hex(17);
  std::snprintf(hex.data(), hex.size(), "%016llx", (unsigned long long)hash_);
  return hex.data();
}

//===----------------------------------------------------------------------===//
// SafetensorsFile
//===----------------------------------------------------------------------===//

SafetensorsFile::SafetensorsFile(const std::string &path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    fail(path + ": cannot open: " + std::strerror(errno));
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  tensors_ = readSafetensorsHeader(path, size < 0 ? 0 : uint64_t(size),
                                   [&](uint64_t offset, char *dst, size_t bytes) {
                                     read(offset, dst, bytes);
                                   });
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

const SafetensorsFile::Tensor *SafetensorsFile::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsFile::read(uint64_t offset, char *dst, size_t size) const {
  for (size_t done = 0; done < size;) {
    ssize_t n = ::pread(fd_, dst + done, size - done, off_t(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      fail(path_ + ": cannot read: " + (n < 0 ? std::strerror(errno) : "the file is shorter"));
    done += size_t(n);
  }
}

void SafetensorsFile::readSlice(const Tensor &tensor, const ParamInfo &p, int rank, int64_t t,
                                char *dst) const {
  const int64_t es = dtypeSize(tensor.dtype);
  if (p.tpDim < 0 || t == 1) {
    read(tensor.begin, dst, size_t(tensor.end - tensor.begin));
    return;
  }
  forEachSliceRun(p, t, es, [&](int r, int64_t whole, int64_t slice, int64_t bytes) {
    if (r == rank)
      read(tensor.begin + uint64_t(whole), dst + slice, size_t(bytes));
  });
}

std::string fileContentHash(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(path + ": cannot read: " + std::strerror(errno));
  std::vector<char> chunk(kBuffer);
  uint64_t hash = kFnvOffset;
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail(path + ": cannot read: " + std::strerror(err));
    }
    if (n == 0)
      break;
    for (ssize_t i = 0; i < n; ++i) {
      hash ^= uint64_t(static_cast<unsigned char>(chunk[size_t(i)]));
      hash *= kFnvPrime;
    }
  }
  ::close(fd);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
  return hex;
}

} // namespace mlc::rt
