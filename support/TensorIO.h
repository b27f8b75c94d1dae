//===- TensorIO.h - .npy and .safetensors files ----------------*- C++ -*-===//
//
// Host tensors and the two file formats mlc exchanges with PyTorch: NumPy's
// .npy (batches, `mlc run` inputs and outputs) and safetensors (weights by
// HuggingFace name). dtypes use mlc's names: f32 f64 i64 i32 u16 u8 bool.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_SUPPORT_TENSORIO_H
#define MLC_SUPPORT_TENSORIO_H

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mlc::rt {

struct HostTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numel() const;
  /// Element i converted to double / int64 (any numeric dtype).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
};

/// bf16 <-> f32, bit for bit the kernels' mlc_bf16: to f32 exactly, from
/// f32 by rounding to nearest even (a NaN stays a NaN).
inline float bf16ToFloat(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u)
                                         : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// Element `i` of an array of f32 (`es` 4) or f64 (`es` 8) values.
inline double floatAt(const char *data, int64_t i, int64_t es) {
  if (es == 4) {
    float f;
    std::memcpy(&f, data + i * 4, 4);
    return f;
  }
  double d;
  std::memcpy(&d, data + i * 8, 8);
  return d;
}

/// Bytes per element of an mlc dtype name; throws on an unknown name.
int64_t dtypeSize(const std::string &dtype);
std::string shapeString(const std::vector<int64_t> &shape);

HostTensor readNpy(const std::string &path);
void writeNpy(const std::string &path, const HostTensor &t);
/// The bytes writeNpy writes.
std::string encodeNpy(const HostTensor &t);
/// The .npy header (magic, version, dict) of an array of `dtype` and
/// `shape`, padded with spaces to a multiple of 64 bytes and to at least
/// `size` (a file written before its row count is known reserves room).
std::string npyHeader(const std::string &dtype, const std::vector<int64_t> &shape,
                      size_t size = 0);

std::map<std::string, HostTensor> readSafetensors(const std::string &path);
/// One tensor of a safetensors file: its mlc dtype, its shape, and the
/// bytes [begin, end) of the file that hold it.
struct SafetensorsTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};
/// The tensors of the safetensors file `path`, `size` bytes long, from its
/// header, which `read(offset, dst, bytes)` reads from the file. Checked as
/// HF's reader checks: the header's size and JSON, each tensor's dtype,
/// shape and offsets (inside the file, as many bytes as its shape needs),
/// and the data tiled without gaps or overlaps; every Error names `path`,
/// and the tensor at fault.
std::map<std::string, SafetensorsTensor>
readSafetensorsHeader(const std::string &path, uint64_t size,
                      const std::function<void(uint64_t, char *, size_t)> &read);
/// The name of a Hugging Face model's index of its safetensors shards.
inline constexpr const char *kSafetensorsIndex = "model.safetensors.index.json";
/// True for a path that names a directory: one that exists as a directory,
/// or any path ending in '/'.
bool isDirectoryPath(const std::string &path);
/// The weights of a model as Hugging Face keeps them: `path` is one
/// safetensors file, a model.safetensors.index.json, or a model directory
/// holding either (the index first, as from_pretrained looks). Through an
/// index, every shard it names is read and must hold exactly the tensors
/// the index puts in it: a missing shard, a tensor in two shards, a tensor
/// the index places in a shard that lacks it, or one a shard holds that the
/// index does not list, is an Error naming the file and the tensor.
std::map<std::string, HostTensor> readModelWeights(const std::string &path);
/// `metadata` becomes the header's "__metadata__" (string to string) when
/// not empty: transformers' from_pretrained wants {"format": "pt"}.
void writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, HostTensor>> &tensors,
                      const std::map<std::string, std::string> &metadata = {});
/// One tensor of a safetensors file to write: `bytes` of data follow.
struct SafetensorsEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};
/// The first bytes of a safetensors file of `entries`, in file order: the
/// header's size and the header (offsets from the entries' sizes), before
/// the tensors' data.
std::string encodeSafetensorsHeader(const std::vector<SafetensorsEntry> &entries,
                                    const std::map<std::string, std::string> &metadata = {});
/// The bytes writeSafetensors writes.
std::string encodeSafetensors(const std::vector<std::pair<std::string, HostTensor>> &tensors,
                              const std::map<std::string, std::string> &metadata = {});
/// Writes all of `bytes` to `fd`, retrying short writes and EINTR; 0, or
/// the errno of the write that failed (ENOSPC for one that wrote nothing).
int writeAll(int fd, const char *bytes, size_t size);
int writeAll(int fd, const std::string &bytes);

/// Writes `bytes` to `path` through a temporary file and a rename, so that a
/// crash, a full disk or a file size limit never leaves a half-written file
/// under the final name: the previous file stays as it was, the temporary
/// file is removed, and the Error names `path`.
void writeFileAtomically(const std::string &path, const std::string &bytes);
/// Several files (path, bytes), all or none: every temporary file is
/// written before the first rename, so that a failed write leaves each
/// previous file as it was. Renamed in the order given (a manifest last).
void writeFilesAtomically(const std::vector<std::pair<std::string, std::string>> &files);
/// Writes `bytes` to `path` itself (created or truncated) and flushes it to
/// the disk; every write, the fsync and the close are checked, and on
/// failure `path` is removed and the Error names `name`.
void writeFileDurably(const std::string &path, const std::string &bytes,
                      const std::string &name);
std::string readFile(const std::string &path);
/// Refuses a destination that cannot become a regular file: an existing
/// directory or special file (a device, a FIFO), or a directory that does
/// not exist or cannot be written. `flag` names the option in the message.
void checkWritableFile(const std::string &path, const std::string &flag);
/// A file the run reads (`flag` names the option) and one it writes.
struct NamedPath {
  std::string flag, path;
};
/// Refuses, before anything runs, an output that is one of the inputs: the
/// same device and inode after following links, or for a directory output
/// (`outputsAreDirectories`), an input inside it. Empty paths and paths that
/// do not exist yet are skipped. The message names both flags and the file.
void refuseOutputsOverInputs(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs);
/// The paths of the entries of directory `dir` (DIR/NAME, sorted), none
/// when `dir` is empty or cannot be read.
std::vector<std::string> filesIn(const std::string &dir);
/// Creates `path` and its missing parents; an Error if it is not a directory
/// afterwards.
void makeDirectories(const std::string &path);
/// Flushes the entries of directory `dir` (a file renamed into it) to the
/// disk, where the directory can be opened; nothing is reported.
void syncDirectory(const std::string &dir);

} // namespace mlc::rt

#endif // MLC_SUPPORT_TENSORIO_H
