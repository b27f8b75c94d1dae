//===- BatchDump.h - --dump-batches: the inputs a run fed ------*- C++ -*-===//
//
// DIR/NAME.npy per model input, [micro-batches, ...] in the order they ran:
// what the data became (packed documents' cu_seqlens, position_ids, masked
// labels). Each batch goes to the file as it is drawn, so a run of any
// length holds none of them in memory.
//
// A file is written as DIR/.NAME.npy.tmp.PID, its header reserving room for
// the largest row count; commit() writes the real count into the header,
// flushes every file to the disk and renames them into place. A write that
// fails is an Error naming the file, and a run that stops on an error
// removes its temporaries: a NAME.npy is always whole (a killed run leaves
// only its hidden temporaries).
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TRAIN_BATCHDUMP_H
#define MLC_RUNTIME_TRAIN_BATCHDUMP_H

#include "runtime/core/PlanFormat.h"
#include "support/TensorIO.h"

#include <map>
#include <string>
#include <vector>

namespace mlc::rt {

class BatchDump {
public:
  /// Creates `dir`; an input with a dynamic token dimension (unpadded BERT)
  /// cannot be stacked and is an error.
  BatchDump(const std::string &dir, const std::vector<InputInfo> &inputs);
  /// Removes the temporaries of a dump not committed.
  ~BatchDump();
  BatchDump(const BatchDump &) = delete;
  BatchDump &operator=(const BatchDump &) = delete;

  /// Appends one micro-batch of input `name` (every batch of an input has
  /// the first one's dtype and shape).
  void append(const std::string &name, const HostTensor &t);
  /// The row counts into the headers, then every file into place.
  void commit();

private:
  struct File {
    std::string path, tmp, dtype;
    std::vector<int64_t> shape; // one batch's
    int fd = -1;
    int64_t rows = 0;
    size_t headerSize = 0;
  };
  [[noreturn]] void failWriting(const File &f, int err);
  void closeAll();

  std::string dir_;
  std::map<std::string, File> files_;
  bool committed_ = false;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_TRAIN_BATCHDUMP_H
