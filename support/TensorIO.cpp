//===- TensorIO.cpp - .npy and .safetensors files --------------------------===//

#include "support/TensorIO.h"
#include "support/Error.h"
#include "support/Json.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace mlc::rt {

int64_t dtypeSize(const std::string &d) {
  if (d == "f64" || d == "i64")
    return 8;
  if (d == "f32" || d == "i32")
    return 4;
  if (d == "u16" || d == "bf16")
    return 2;
  if (d == "u8" || d == "bool")
    return 1;
  fail("unknown dtype '" + d + "'");
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

static int64_t numelOf(const std::vector<int64_t> &shape) {
  for (int64_t d : shape)
    if (d == 0)
      return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      fail("a tensor of shape " + shapeString(shape) + " has more elements than an int64 counts");
  return n;
}

int64_t HostTensor::numel() const { return numelOf(shape); }

double HostTensor::getDouble(int64_t i) const {
  const char *p = data.data() + i * dtypeSize(dtype);
  if (dtype == "f32")
    return *reinterpret_cast<const float *>(p);
  if (dtype == "f64")
    return *reinterpret_cast<const double *>(p);
  return double(getInt(i));
}

int64_t HostTensor::getInt(int64_t i) const {
  const char *p = data.data() + i * dtypeSize(dtype);
  if (dtype == "i64")
    return *reinterpret_cast<const int64_t *>(p);
  if (dtype == "i32")
    return *reinterpret_cast<const int32_t *>(p);
  if (dtype == "u16")
    return *reinterpret_cast<const uint16_t *>(p);
  if (dtype == "u8" || dtype == "bool")
    return *reinterpret_cast<const uint8_t *>(p);
  return int64_t(getDouble(i));
}

std::string readFile(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail(path + ": is not a regular file (" +
         std::string(S_ISDIR(st.st_mode) ? "a directory" : "a device or other special file") +
         ")");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void checkWritableFile(const std::string &path, const std::string &flag) {
  struct stat st;
  if (path.empty())
    fail(flag + " needs a file name");
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail(flag + " " + path + ": is not a regular file (" +
         (S_ISDIR(st.st_mode) ? "a directory" : "a device or other special file") + ")");
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(flag + " " + path + ": the directory " + dir + " does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    fail(flag + " " + path + ": the directory " + dir + " is not writable");
}

void refuseOutputsOverInputs(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs) {
  for (const NamedPath &out : outputs) {
    struct stat o;
    if (out.path.empty() || stat(out.path.c_str(), &o) != 0)
      continue;
    for (const NamedPath &in : inputs) {
      struct stat i;
      if (in.path.empty() || stat(in.path.c_str(), &i) != 0)
        continue;
      if (i.st_dev == o.st_dev && i.st_ino == o.st_ino)
        fail(out.flag + " " + out.path + " is the same file as " + in.flag + " " + in.path +
             ": writing it would destroy the input; choose another " + out.flag);
      if (!S_ISDIR(o.st_mode))
        continue;
      // An input inside an output directory: walk up the input's parents.
      char *real = ::realpath(in.path.c_str(), nullptr);
      std::string up = real ? real : "";
      std::free(real);
      while (!up.empty() && up != "/") {
        up = up.substr(0, std::max<size_t>(1, up.rfind('/')));
        struct stat u;
        if (stat(up.c_str(), &u) == 0 && u.st_dev == o.st_dev && u.st_ino == o.st_ino)
          fail(out.flag + " " + out.path + " holds " + in.flag + " " + in.path +
               ": writing into it could destroy the input; choose another " + out.flag);
      }
    }
  }
}

std::vector<std::string> filesIn(const std::string &dir) {
  std::vector<std::string> paths;
  DIR *d = dir.empty() ? nullptr : ::opendir(dir.c_str());
  if (!d)
    return paths;
  while (const dirent *e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      paths.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  std::sort(paths.begin(), paths.end());
  return paths;
}

int writeAll(int fd, const char *bytes, size_t size) {
  for (size_t done = 0; done < size;) {
    ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? errno : ENOSPC;
    done += size_t(n);
  }
  return 0;
}

int writeAll(int fd, const std::string &bytes) { return writeAll(fd, bytes.data(), bytes.size()); }

void writeFileDurably(const std::string &path, const std::string &bytes,
                      const std::string &name) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(name + ": cannot write: " + std::strerror(errno));
  // Every write, the fsync and the close are checked: a full disk or a file
  // size limit (EFBIG; mlc ignores SIGXFSZ) is an error here, not later.
  int err = writeAll(fd, bytes);
  if (!err && ::fsync(fd) != 0)
    err = errno;
  if (::close(fd) != 0 && !err)
    err = errno;
  if (err) {
    std::remove(path.c_str());
    fail(name + ": write failed: " + std::strerror(err));
  }
}

/// `path`'s temporary sibling, written in full and flushed to the disk.
static std::string writeTemporary(const std::string &path, const std::string &bytes) {
  checkWritableFile(path, "output");
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  writeFileDurably(tmp, bytes, path);
  return tmp;
}

static void renameIntoPlace(const std::string &tmp, const std::string &path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(path + ": cannot rename into place: " + std::strerror(err));
  }
}

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  renameIntoPlace(writeTemporary(path, bytes), path);
}

void writeFilesAtomically(const std::vector<std::pair<std::string, std::string>> &files) {
  std::vector<std::string> written;
  try {
    for (const auto &[path, bytes] : files)
      written.push_back(writeTemporary(path, bytes));
  } catch (...) {
    for (const std::string &tmp : written)
      std::remove(tmp.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      renameIntoPlace(written[i], files[i].first);
    } catch (...) {
      for (size_t j = i + 1; j < written.size(); ++j) // none left behind
        std::remove(written[j].c_str());
      throw;
    }
  }
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

static const std::map<std::string, std::string> &npyToMlc() {
  static const std::map<std::string, std::string> m = {
      {"<f4", "f32"}, {"<f8", "f64"}, {"<i8", "i64"}, {"<i4", "i32"},
      {"<u2", "u16"}, {"|u1", "u8"},  {"|b1", "bool"}};
  return m;
}

HostTensor readNpy(const std::string &path) {
  std::string bytes = readFile(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    fail(path + ": not a .npy file (bad magic)");
  int major = uint8_t(bytes[6]);
  size_t headerLen, start;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (uint8_t(bytes[9]) << 8);
    start = 10;
  } else {
    if (bytes.size() < 12)
      fail(path + ": truncated .npy header");
    headerLen = uint32_t(uint8_t(bytes[8])) | (uint32_t(uint8_t(bytes[9])) << 8) |
                (uint32_t(uint8_t(bytes[10])) << 16) | (uint32_t(uint8_t(bytes[11])) << 24);
    start = 12;
  }
  if (start + headerLen > bytes.size())
    fail(path + ": truncated .npy header");
  std::string header = bytes.substr(start, headerLen);
  auto field = [&](const std::string &key) {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos)
      fail(path + ": .npy header lacks '" + key + "'");
    size_t colon = header.find(':', k);
    return header.substr(colon + 1);
  };
  std::string descr = field("descr");
  descr = descr.substr(descr.find('\'') + 1);
  descr = descr.substr(0, descr.find('\''));
  auto dt = npyToMlc().find(descr);
  if (dt == npyToMlc().end())
    fail(path + ": unsupported .npy dtype '" + descr + "'");
  std::string fortran = field("fortran_order");
  if (fortran.find("True") < fortran.find(','))
    fail(path + ": Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
  std::string shapeText = field("shape");
  shapeText = shapeText.substr(shapeText.find('(') + 1);
  shapeText = shapeText.substr(0, shapeText.find(')'));
  HostTensor t;
  t.dtype = dt->second;
  std::stringstream ss(shapeText);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item.find_first_not_of(" ") != std::string::npos) {
      char *end = nullptr;
      errno = 0;
      long long d = std::strtoll(item.c_str(), &end, 10);
      while (end && *end == ' ')
        ++end;
      if (*end || errno == ERANGE || d < 0 || d > (1ll << 40))
        fail(path + ": malformed .npy shape '(" + shapeText + ")'");
      t.shape.push_back(d);
    }
  size_t dataStart = start + headerLen;
  double elements = 1;
  for (int64_t d : t.shape)
    elements *= double(d);
  if (dataStart > bytes.size() || elements * double(dtypeSize(t.dtype)) > double(bytes.size()))
    fail(path + ": truncated .npy data (shape " + shapeString(t.shape) + " needs more bytes "
         "than the file holds)");
  size_t need = t.numel() * dtypeSize(t.dtype);
  if (bytes.size() - dataStart < need)
    fail(path + ": truncated .npy data (" + std::to_string(bytes.size() - dataStart) +
         " bytes, shape " + shapeString(t.shape) + " needs " + std::to_string(need) + ")");
  t.data.assign(bytes.begin() + dataStart, bytes.begin() + dataStart + need);
  return t;
}

std::string npyHeader(const std::string &dtype, const std::vector<int64_t> &shape,
                      size_t size) {
  std::string descr;
  for (auto &[np, mlc] : npyToMlc())
    if (mlc == dtype)
      descr = np;
  std::string dims = "(";
  for (int64_t d : shape)
    dims += std::to_string(d) + ",";
  if (shape.size() > 1)
    dims.pop_back();
  dims += ")";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + dims + ", }";
  size_t total = 10 + header.size() + 1;
  size_t padded = total + (64 - total % 64) % 64;
  if (size > padded)
    padded = size;
  header += std::string(padded - total, ' ') + "\n";
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += char(header.size() & 0xFF);
  out += char(header.size() >> 8);
  return out + header;
}

std::string encodeNpy(const HostTensor &t) {
  std::string out = npyHeader(t.dtype, t.shape);
  out.append(t.data.begin(), t.data.end());
  return out;
}

void writeNpy(const std::string &path, const HostTensor &t) {
  writeFileAtomically(path, encodeNpy(t));
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

static const std::map<std::string, std::string> &stToMlc() {
  static const std::map<std::string, std::string> m = {
      {"F32", "f32"}, {"F64", "f64"}, {"I64", "i64"},  {"I32", "i32"},
      {"U16", "u16"}, {"U8", "u8"},   {"BOOL", "bool"}};
  return m;
}

std::map<std::string, SafetensorsTensor>
readSafetensorsHeader(const std::string &path, uint64_t size,
                      const std::function<void(uint64_t, char *, size_t)> &read) {
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
  std::map<std::string, SafetensorsTensor> tensors;
  std::vector<std::pair<uint64_t, std::string>> starts; // in the data
  for (auto &[name, info] : header.object) {
    if (name == "__metadata__")
      continue;
    const Json *dtype = info.find("dtype"), *shape = info.find("shape"),
               *offsets = info.find("data_offsets");
    if (!dtype || !shape || !offsets || offsets->array.size() != 2)
      fail(path + ": tensor '" + name + "' lacks dtype, shape or data_offsets");
    auto dt = stToMlc().find(dtype->string);
    if (dt == stToMlc().end())
      fail(path + ": tensor '" + name + "' has unsupported dtype " + dtype->string);
    SafetensorsTensor t;
    t.dtype = dt->second;
    // Sizes and offsets are whole numbers a file can hold (`tensor`: C++17
    // lambdas capture no structured binding; the fuzz targets are C++17).
    const std::string &tensor = name;
    auto whole = [&](const Json &v, const char *what) {
      if (v.kind != Json::Number || v.number < 0 || v.number > 9007199254740992.0 ||
          v.number != std::floor(v.number))
        fail(path + ": tensor '" + tensor + "' has a " + what + " that is not a non-negative "
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
    if (int64_t(end - begin) != numelOf(t.shape) * dtypeSize(t.dtype))
      fail(path + ": tensor '" + name + "' has " + std::to_string(end - begin) +
           " bytes for shape " + shapeString(t.shape));
    t.begin = base + begin;
    t.end = base + end;
    starts.push_back({begin, name});
    tensors.emplace(name, std::move(t));
  }
  // As HF's reader: the tensors tile the data exactly, without overlaps or gaps.
  std::sort(starts.begin(), starts.end());
  uint64_t expected = 0;
  for (const auto &[begin, name] : starts) {
    if (begin != expected)
      fail(path + ": tensor '" + name + "' starts at byte " + std::to_string(begin) +
           " of the data, not " + std::to_string(expected) +
           (begin < expected ? " (it overlaps another tensor)" : " (a gap before it)"));
    expected = tensors.at(name).end - base;
  }
  if (base + expected != size)
    fail(path + ": the tensors cover " + std::to_string(expected) + " bytes of data but the "
         "file holds " + std::to_string(size - base));
  return tensors;
}

std::map<std::string, HostTensor> readSafetensors(const std::string &path) {
  const std::string bytes = readFile(path);
  std::map<std::string, HostTensor> out;
  for (auto &[name, entry] :
       readSafetensorsHeader(path, bytes.size(), [&](uint64_t offset, char *dst, size_t size) {
         std::memcpy(dst, bytes.data() + offset, size);
       })) {
    HostTensor &t = out[name];
    t.dtype = std::move(entry.dtype);
    t.shape = std::move(entry.shape);
    t.data.assign(bytes.begin() + entry.begin, bytes.begin() + entry.end);
  }
  return out;
}

bool isDirectoryPath(const std::string &path) {
  struct stat st;
  return (!path.empty() && path.back() == '/') ||
         (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
}

/// Reads the shards a model.safetensors.index.json names, checking each
/// against the index.
static std::map<std::string, HostTensor> readShardedSafetensors(const std::string &index) {
  Json root = Json::parse(readFile(index), index, /*uniqueKeys=*/true);
  const Json *map = root.kind == Json::Object ? root.find("weight_map") : nullptr;
  if (!map || map->kind != Json::Object)
    fail(index + ": \"weight_map\" is missing or not an object (a safetensors index maps "
         "each tensor to its shard)");
  std::string dir = ".";
  if (auto slash = index.rfind('/'); slash != std::string::npos)
    dir = slash == 0 ? "/" : index.substr(0, slash);
  // Shard -> the tensors the index puts in it, in the index's order.
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto &[tensor, file] : map->object) {
    if (file.kind != Json::String || file.string.empty())
      fail(index + ": \"weight_map\".\"" + tensor + "\" is not a file name");
    if (file.string.find('/') != std::string::npos || file.string == "." || file.string == "..")
      fail(index + ": \"weight_map\".\"" + tensor + "\" = \"" + file.string +
           "\": a shard is a file beside the index, not a path");
    shards[file.string].push_back(tensor);
  }
  if (shards.empty())
    fail(index + ": \"weight_map\" lists no tensors");
  std::map<std::string, HostTensor> out;
  for (auto &[file, tensors] : shards) {
    std::string path = dir + "/" + file;
    struct stat st;
    if (stat(path.c_str(), &st) != 0)
      fail(index + ": \"weight_map\".\"" + tensors.front() + "\" names the shard " + file +
           ", which does not exist (" + path + ")");
    std::map<std::string, HostTensor> shard = readSafetensors(path);
    for (const std::string &tensor : tensors) {
      auto it = shard.find(tensor);
      if (it == shard.end())
        fail(path + ": lacks tensor '" + tensor + "', which " + index +
             " (\"weight_map\") places in this shard");
      out.emplace(tensor, std::move(it->second));
      shard.erase(it);
    }
    for (const auto &[tensor, _] : shard) {
      auto listed = map->object.find(tensor);
      if (listed != map->object.end())
        fail(path + ": holds tensor '" + tensor + "', which " + index +
             " (\"weight_map\") places in " + listed->second.string +
             ": a tensor in two shards");
      fail(path + ": holds tensor '" + tensor + "', which " + index +
           " (\"weight_map\") does not list");
    }
  }
  return out;
}

std::map<std::string, HostTensor> readModelWeights(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string dir = path.back() == '/' ? path.substr(0, path.size() - 1) : path;
    std::string index = dir + "/" + kSafetensorsIndex, single = dir + "/model.safetensors";
    // from_pretrained loads model.safetensors when both are there and never
    // reads the shards: which of the two is stale, only the user knows.
    if (stat(index.c_str(), &st) == 0 && stat(single.c_str(), &st) == 0)
      fail(path + ": the model directory holds both model.safetensors and " +
           kSafetensorsIndex + " (sharded weights): from_pretrained would load " +
           "model.safetensors and ignore the shards; remove the stale one, or name the "
           "file to read (--init " + single + " or " + index + ")");
    if (stat(index.c_str(), &st) == 0)
      return readShardedSafetensors(index);
    if (stat(single.c_str(), &st) == 0)
      return readSafetensors(single);
    fail(path + ": a model directory holds " + kSafetensorsIndex +
         " (sharded weights) or model.safetensors; this one holds neither");
  }
  if (path.size() >= 11 && path.compare(path.size() - 11, 11, ".index.json") == 0)
    return readShardedSafetensors(path);
  return readSafetensors(path);
}

std::string encodeSafetensorsHeader(const std::vector<SafetensorsEntry> &entries,
                                    const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (auto &[key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + jsonQuote(key) + ":" + jsonQuote(value);
    header += entries.empty() ? "}" : "},";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry &e = entries[i];
    std::string dtype;
    for (auto &[st, mlc] : stToMlc())
      if (mlc == e.dtype)
        dtype = st;
    if (dtype.empty())
      fail("internal: no safetensors dtype for '" + e.dtype + "'");
    std::string shape = "[";
    for (size_t d = 0; d < e.shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(e.shape[d]);
    shape += "]";
    header += (i ? "," : "") + jsonQuote(e.name) + ":{\"dtype\":\"" + dtype +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + e.bytes) + "]}";
    offset += e.bytes;
  }
  header += "}";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  return out + header;
}

std::string encodeSafetensors(const std::vector<std::pair<std::string, HostTensor>> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  std::vector<SafetensorsEntry> entries;
  for (auto &[name, t] : tensors)
    entries.push_back({name, t.dtype, t.shape, t.data.size()});
  std::string out = encodeSafetensorsHeader(entries, metadata);
  for (auto &[_, t] : tensors)
    out.append(t.data.begin(), t.data.end());
  return out;
}

void writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, HostTensor>> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  writeFileAtomically(path, encodeSafetensors(tensors, metadata));
}

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void makeDirectories(const std::string &path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if ((i == path.size() || path[i] == '/') && !partial.empty())
      mkdir(partial.c_str(), 0755);
    if (i < path.size())
      partial += path[i];
  }
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(path + ": cannot create the directory");
}

} // namespace mlc::rt
