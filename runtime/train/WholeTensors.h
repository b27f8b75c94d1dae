//===- WholeTensors.h - whole tensors gathered to the writer, one at a time -*- C++ -*-===//
//
// Checkpoints and --save hold every tensor whole under its HF name, whatever
// the layout that trained it. One rank writes them, the writer: world rank
// 0, the first data-parallel replica's tensor-parallel rank 0. The ranks
// that hold the parts of a tensor send them to it, tensor after tensor:
//
//   - a parameter split over the tensor-parallel group: each rank of the
//     first replica's group sends its slice (point to point, to the writer
//     alone);
//   - under the distributed optimizer, a moment: each rank of a
//     data-parallel group first sends its shard of the slice to the group's
//     first rank (one gather per bucket the parameter lies in, into place),
//     which then sends the slice on as above.
//
// So the writer holds one whole tensor at a time besides its own buffers,
// and the others hold the part they send, never a gathered copy (for a
// model directory too, --save DIR and --save-dir-hf: ModelDirectory.h).
// Every rank
// that holds a part calls the same functions in the same order.
// MLC_DEBUG_GATHER=1 prints, per rank and write, the most bytes its gathers
// held at once and the bytes it sent.
//
// The writer streams the tensors into a safetensors file as they arrive
// (SafetensorsStream): the header first (the names, dtypes and shapes are
// known up front), then the data, through a temporary sibling renamed into
// place when complete.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_WHOLETENSORS_H
#define MLC_RUNTIME_TRAIN_WHOLETENSORS_H

#include "runtime/backend/Backend.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mlc::rt {

/// True on the rank that writes checkpoints and --save.
bool isWriter(const Backend &backend);

/// The writer's `ok` on every rank that takes part in the gathers that
/// follow: the first replica's tensor-parallel group and, when `allRanks`
/// (a sharded run's moments), every data-parallel group (collective over
/// them). The writer checks its destination before any tensor moves; a
/// writer that cannot write stops the others here, not in a gather.
bool agreeWithWriter(Backend &backend, bool ok, bool allRanks);

/// Parameter p's part of flat buffer `which` (the parameters, or an AdamW
/// moment), gathered to the writer (see above). True on the writer, with
/// `slices` holding the tensor-parallel group's slices rank after rank (the
/// whole tensor's bytes; the whole tensor itself when p is not split);
/// false elsewhere, with `slices` empty.
bool gatherToWriter(Backend &backend, const ParamInfo &p, FlatBuffer which,
                    std::vector<char> &slices);

/// Calls emit(bytes, size) over p's whole HF tensor, in order, from the
/// slices gatherToWriter() gave: runs of rows, no copy of the tensor.
void forEachWholeRun(const Backend &backend, const ParamInfo &p,
                     const std::vector<char> &slices,
                     const std::function<void(const char *, size_t)> &emit);

/// Every parameter's whole tensor of `which`, in the package's order,
/// gathered to the writer one at a time and handed to `write` there. An
/// Error from `write` is kept in `error` (the first one; `write` is not
/// called again) and the gathers go on, so that no rank waits for a writer
/// that stopped. Collective as gatherToWriter().
void forEachWholeTensor(Backend &backend, FlatBuffer which, std::string &error,
                        const std::function<void(const ParamInfo &,
                                                 const std::vector<char> &)> &write);

/// MLC_DEBUG_GATHER: prints this rank's tally of the gathers since the last
/// call (`what` names the write) and starts a new one.
void reportGathers(const Backend &backend, const std::string &what);

/// A safetensors file written as its tensors arrive, byte for byte what
/// writeSafetensors() writes for the same tensors.
class SafetensorsStream {
public:
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
  };
  /// Writes the header of `entries` (in file order) into a temporary
  /// sibling of `path`.
  SafetensorsStream(const std::string &path, const std::vector<Entry> &entries,
                    const std::map<std::string, std::string> &metadata = {});
  /// An unfinished file is removed: `path` keeps its previous content.
  ~SafetensorsStream();
  SafetensorsStream(const SafetensorsStream &) = delete;
  SafetensorsStream &operator=(const SafetensorsStream &) = delete;

  /// The next bytes of the tensors' data, in order.
  void append(const char *bytes, size_t size);
  /// Checks that every tensor got its bytes, flushes the file to the disk
  /// and renames it into place. Returns its content hash (contentHash()).
  std::string finish();

private:
  void flush();
  std::string path_, tmp_, buffer_;
  int fd_ = -1;
  uint64_t hash_, expected_ = 0, written_ = 0;
};

/// A safetensors file read a slice at a time: the header when opened, the
/// data by pread, never the whole file.
class SafetensorsFile {
public:
  using Tensor = SafetensorsTensor;
  /// Reads and checks the header as readSafetensors() does
  /// (readSafetensorsHeader()).
  explicit SafetensorsFile(const std::string &path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::map<std::string, Tensor> &tensors() const { return tensors_; }
  /// The tensor named `name`, or null.
  const Tensor *find(const std::string &name) const;
  /// Rank `rank`'s slice of `t` (parameter p's whole tensor, split over the
  /// `t`-rank group as sliceOfWhole() splits it), p.numel elements, into
  /// `dst`: the rows that make it up, read where they lie.
  void readSlice(const Tensor &tensor, const ParamInfo &p, int rank, int64_t t, char *dst) const;

private:
  void read(uint64_t offset, char *dst, size_t size) const;
  std::string path_;
  int fd_ = -1;
  std::map<std::string, Tensor> tensors_;
};

/// The content hash (contentHash()) of the file at `path`, read a chunk at
/// a time.
std::string fileContentHash(const std::string &path);

/// The tensors of a file of the parameters, in order: each parameter whole
/// under its HF name, a tied one under each of its names (safetensors files
/// hold no shared storage, and load_state_dict(strict=True) wants every
/// name the model has): its aliases, then its own.
std::vector<SafetensorsStream::Entry> parameterEntries(const Package &pkg);

/// An Error naming `path` ("PATH was not written") and the first element
/// of p's whole tensor (from gatherToWriter()'s `slices`) that is not finite.
void checkFinite(const Backend &backend, const ParamInfo &p, const std::vector<char> &slices,
                 const std::string &path);

/// Streams the parameters, gathered tensor by tensor, into `file` (the
/// writer's, opened with parameterEntries(); null elsewhere). No file of
/// weights that are not finite is written, under any label: a parameter
/// that holds one is an Error in `error` naming `path` (see
/// forEachWholeTensor()). Collective as gatherToWriter().
void streamParameters(Backend &backend, SafetensorsStream *file, const std::string &path,
                      std::string &error);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_WHOLETENSORS_H
