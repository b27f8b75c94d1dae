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
  const size_t d = size_t(p.tpDim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i)
    outer *= p.shape[i];
  for (size_t i = d + 1; i < p.shape.size(); ++i)
    inner *= p.shape[i];
  const int64_t local = p.shape[d], row = inner * es;
  // Along dim tpDim the whole tensor is block after block, each block the
  // ranks' parts in rank order (sliceOfWhole()); a rank's part of a block
  // is `part` consecutive rows of its slice.
  for (int64_t o = 0; o < outer; ++o) {
    int64_t first = 0; // the block's first row in a slice
    for (int64_t block : p.tpBlocks) {
      const int64_t part = block / t;
      for (int64_t r = 0; r < t; ++r)
        emit(slices.data() + r * sliceBytes + (o * local + first) * row, size_t(part * row));
      first += part;
    }
  }
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
    for (size_t i = 0; i < size; i += size_t(es), ++index) {
      double x;
      if (es == 4) {
        float f;
        std::memcpy(&f, bytes + i, 4);
        x = f;
      } else {
        std::memcpy(&x, bytes + i, 8);
      }
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

/// safetensors' dtype name of an mlc dtype (TensorIO.cpp's table).
std::string safetensorsDtype(const std::string &dtype) {
  static const std::map<std::string, std::string> names = {
      {"f32", "F32"}, {"f64", "F64"}, {"i64", "I64"},  {"i32", "I32"},
      {"u16", "U16"}, {"u8", "U8"},   {"bool", "BOOL"}};
  auto it = names.find(dtype);
  if (it == names.end())
    fail("internal: no safetensors dtype for '" + dtype + "'");
  return it->second;
}

} // namespace

SafetensorsStream::SafetensorsStream(const std::string &path, const std::vector<Entry> &entries,
                                     const std::map<std::string, std::string> &metadata)
    : path_(path), hash_(kFnvOffset) {
  // The header as encodeSafetensors() writes it.
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (auto &[key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + jsonQuote(key) + ":" + jsonQuote(value);
    header += entries.empty() ? "}" : "},";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry &e = entries[i];
    int64_t n = 1;
    std::string shape = "[";
    for (size_t d = 0; d < e.shape.size(); ++d) {
      shape += (d ? "," : "") + std::to_string(e.shape[d]);
      n *= e.shape[d];
    }
    shape += "]";
    const uint64_t bytes = uint64_t(n * dtypeSize(e.dtype));
    header += (i ? "," : "") + jsonQuote(e.name) + ":{\"dtype\":\"" + safetensorsDtype(e.dtype) +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  checkWritableFile(path, "output");
  tmp_ = path + ".tmp." + std::to_string(getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    tmp_.clear();
    fail(path + ": cannot write: " + std::strerror(errno));
  }
  expected_ = 8 + header.size() + offset;
  char size[8];
  for (int i = 0; i < 8; ++i)
    size[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  append(size, 8);
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
  const off_t fileSize = ::lseek(fd_, 0, SEEK_END);
  const uint64_t size = fileSize < 0 ? 0 : uint64_t(fileSize);
  if (size < 8)
    fail(path + ": not a safetensors file (shorter than its header size)");
  unsigned char head[8];
  read(0, reinterpret_cast<char *>(head), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | head[i];
  if (n > size - 8)
    fail(path + ": not a safetensors file (header size " + std::to_string(n) +
         " exceeds the file)");
  std::string text(size_t(n), '\0');
  read(8, text.data(), text.size());
  Json header = Json::parse(text, path, /*uniqueKeys=*/true);
  if (header.kind != Json::Object)
    fail(path + ": safetensors header is not a JSON object");
  const uint64_t base = 8 + n;
  std::vector<std::pair<uint64_t, std::string>> starts;
  for (auto &[name, info] : header.object) {
    if (name == "__metadata__")
      continue;
    const Json *dtype = info.find("dtype"), *shape = info.find("shape"),
               *offsets = info.find("data_offsets");
    if (!dtype || !shape || !offsets || offsets->array.size() != 2)
      fail(path + ": tensor '" + name + "' lacks dtype, shape or data_offsets");
    Tensor t;
    for (const char *mlc : {"f32", "f64", "i64", "i32", "u16", "u8", "bool"})
      if (safetensorsDtype(mlc) == dtype->string)
        t.dtype = mlc;
    if (t.dtype.empty())
      fail(path + ": tensor '" + name + "' has unsupported dtype " + dtype->string);
    auto whole = [&](const Json &v, const char *what) {
      if (v.kind != Json::Number || v.number < 0 || v.number > 9007199254740992.0 ||
          v.number != std::floor(v.number))
        fail(path + ": tensor '" + name + "' has a " + what + " that is not a non-negative "
             "integer");
      return int64_t(v.number);
    };
    if (shape->kind != Json::Array)
      fail(path + ": tensor '" + name + "' has a shape that is not a list");
    double elements = 1;
    for (const Json &d : shape->array) {
      t.shape.push_back(whole(d, "dimension"));
      elements *= double(t.shape.back());
    }
    if (elements * double(dtypeSize(t.dtype)) > double(size))
      fail(path + ": tensor '" + name + "' of shape " + shapeString(t.shape) +
           " is larger than the file");
    const uint64_t begin = uint64_t(whole(offsets->array[0], "data offset")),
                   end = uint64_t(whole(offsets->array[1], "data offset"));
    if (end < begin || base + end > size)
      fail(path + ": tensor '" + name + "' lies outside the file (truncated?)");
    if (double(end - begin) != elements * double(dtypeSize(t.dtype)))
      fail(path + ": tensor '" + name + "' has " + std::to_string(end - begin) +
           " bytes for shape " + shapeString(t.shape));
    t.begin = base + begin;
    t.end = base + end;
    starts.push_back({begin, name});
    tensors_.emplace(name, std::move(t));
  }
  // As HF's reader: the tensors tile the data exactly, without overlaps or gaps.
  std::sort(starts.begin(), starts.end());
  uint64_t expected = 0;
  for (const auto &[begin, name] : starts) {
    if (begin != expected)
      fail(path + ": tensor '" + name + "' starts at byte " + std::to_string(begin) +
           " of the data, not " + std::to_string(expected) +
           (begin < expected ? " (it overlaps another tensor)" : " (a gap before it)"));
    expected = tensors_.at(name).end - base;
  }
  if (base + expected != size)
    fail(path + ": the tensors cover " + std::to_string(expected) + " bytes of data but the "
         "file holds " + std::to_string(size - base));
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
  const size_t d = size_t(p.tpDim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d; ++i)
    outer *= p.shape[i];
  for (size_t i = d + 1; i < p.shape.size(); ++i)
    inner *= p.shape[i];
  const int64_t local = p.shape[d], full = local * t, row = inner * es;
  // The rank's part of each block: `part` consecutive rows of the whole
  // (forEachWholeRun() in reverse).
  for (int64_t o = 0; o < outer; ++o) {
    int64_t first = 0, blockStart = 0;
    for (int64_t block : p.tpBlocks) {
      const int64_t part = block / t;
      read(tensor.begin + uint64_t((o * full + blockStart + rank * part) * row),
           dst + (o * local + first) * row, size_t(part * row));
      first += part;
      blockStart += block;
    }
  }
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
