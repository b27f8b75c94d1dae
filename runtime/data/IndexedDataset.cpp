//===- IndexedDataset.cpp - Megatron's .bin/.idx datasets ------------------===//

#include "runtime/data/IndexedDataset.h"
#include "support/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

const char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

int itemSize(int code) {
  switch (code) {
  case 1:
  case 2:
    return 1;
  case 3:
  case 8:
    return 2;
  case 4:
  case 7:
    return 4;
  case 5:
  case 6:
    return 8;
  }
  return 0;
}

template <typename T> void put(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof v);
}

const char *mapFile(const std::string &path, size_t &size) {
  // O_NONBLOCK: opening a FIFO would wait for a writer that never comes;
  // only a regular file is a dataset (a FIFO or a device has no size to map).
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    fail(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    fail(path + ": is not a regular file (" +
         std::string(S_ISDIR(st.st_mode) ? "a directory" : "a device or other special file") +
         ")");
  }
  size = st.st_size;
  if (size == 0) {
    close(fd);
    return nullptr;
  }
  void *p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    fail(path + ": cannot map: " + std::strerror(errno));
  return static_cast<const char *>(p);
}

/// Takes PREFIX.lock, or fails naming the prefix when another process holds
/// it. The file is removed on release; a lock won on a file that its previous
/// holder removed meanwhile is taken again on the new file, so two writers
/// never both hold a prefix.
int lockPrefix(const std::string &prefix) {
  std::string path = prefix + ".lock";
  for (;;) {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      fail(path + ": cannot create the dataset's lock: " + std::strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      close(fd);
      if (err == EWOULDBLOCK)
        fail(prefix + ": another process is writing this dataset (it holds " + path +
             "); wait for it to finish or write to another prefix");
      fail(path + ": cannot lock: " + std::strerror(err));
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(path.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino)
      return fd;
    close(fd);
  }
}

void unlockPrefix(const std::string &prefix, int fd) {
  unlink((prefix + ".lock").c_str());
  close(fd);
}

} // namespace

IndexedDatasetWriter::IndexedDatasetWriter(const std::string &prefix, int64_t vocabSize)
    : prefix_(prefix), code_(vocabSize < 65500 ? 8 : 4) {
  lock_ = lockPrefix(prefix);
  std::string tmp = prefix + ".bin.tmp";
  bin_ = std::fopen(tmp.c_str(), "wb");
  if (!bin_) {
    int err = errno;
    unlockPrefix(prefix, lock_);
    fail(tmp + ": cannot write: " + std::strerror(err));
  }
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_) { // leave nothing behind, and the previous dataset as it was
    if (bin_)
      std::fclose(bin_);
    std::remove((prefix_ + ".bin.tmp").c_str());
    std::remove((prefix_ + ".idx.tmp").c_str());
  }
  unlockPrefix(prefix_, lock_);
}

void IndexedDatasetWriter::write(FILE *f, const void *data, size_t bytes,
                                 const std::string &path) {
  if (std::fwrite(data, 1, bytes, f) != bytes)
    fail(path + ": cannot write: " + std::strerror(errno));
}

/// Flushed to the disk before it is renamed into place: a crash or a full
/// disk never publishes a half-written file.
void IndexedDatasetWriter::close(FILE *&f, const std::string &path) {
  bool ok = std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  ok = std::fclose(f) == 0 && ok;
  f = nullptr;
  if (!ok)
    fail(path + ": cannot write: " + std::strerror(err ? err : errno));
}

void IndexedDatasetWriter::addDocument(const std::vector<int32_t> &tokens) {
  if (tokens.empty()) {
    documentIndex_.push_back(int64_t(lengths_.size()));
    return;
  }
  if (code_ == 8) {
    std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
    write(bin_, narrow.data(), narrow.size() * 2, prefix_ + ".bin");
  } else {
    write(bin_, tokens.data(), tokens.size() * 4, prefix_ + ".bin");
  }
  lengths_.push_back(int32_t(tokens.size()));
  documentIndex_.push_back(int64_t(lengths_.size()));
  tokens_ += tokens.size();
}

void IndexedDatasetWriter::finish() {
  close(bin_, prefix_ + ".bin");
  std::string idx(kMagic, 9);
  put<uint64_t>(idx, 1);
  put<uint8_t>(idx, uint8_t(code_));
  put<uint64_t>(idx, lengths_.size());
  put<uint64_t>(idx, documentIndex_.size());
  idx.append(reinterpret_cast<const char *>(lengths_.data()), lengths_.size() * 4);
  int64_t pointer = 0;
  for (int32_t len : lengths_) {
    put<int64_t>(idx, pointer);
    pointer += int64_t(len) * itemSize(code_);
  }
  for (int64_t d : documentIndex_)
    put<int64_t>(idx, d);
  std::string tmp = prefix_ + ".idx.tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    fail(tmp + ": cannot write: " + std::strerror(errno));
  try {
    write(f, idx.data(), idx.size(), prefix_ + ".idx");
  } catch (...) {
    std::fclose(f);
    throw;
  }
  close(f, prefix_ + ".idx");
  // The .bin first: a reader that sees the new .bin beside the old .idx
  // refuses the pair when their sizes disagree.
  if (std::rename((prefix_ + ".bin.tmp").c_str(), (prefix_ + ".bin").c_str()) != 0 ||
      std::rename(tmp.c_str(), (prefix_ + ".idx").c_str()) != 0)
    fail(prefix_ + ": cannot move the dataset into place: " + std::strerror(errno));
  finished_ = true;
}

IndexedDataset::IndexedDataset(const std::string &prefix) : prefix_(prefix) {
  std::string idxPath = prefix + ".idx", binPath = prefix + ".bin";
  idx_ = mapFile(idxPath, idxSize_);
  bin_ = mapFile(binPath, binSize_);
  auto bad = [&](const std::string &msg) { fail(idxPath + ": " + msg); };
  if (idxSize_ < 34 || std::memcmp(idx_, kMagic, 9) != 0)
    bad("not a Megatron indexed dataset index (bad magic)");
  uint64_t version, docEntries, sequences;
  std::memcpy(&version, idx_ + 9, 8);
  if (version != 1)
    bad("index version " + std::to_string(version) + " is not supported (expected 1)");
  code_ = uint8_t(idx_[17]);
  itemSize_ = itemSize(code_);
  if (!itemSize_)
    bad("unknown dtype code " + std::to_string(code_));
  if (code_ == 6 || code_ == 7)
    bad("dtype code " + std::to_string(code_) + " holds floats, not token ids");
  std::memcpy(&sequences, idx_ + 18, 8);
  std::memcpy(&docEntries, idx_ + 26, 8);
  size_t need = 34 + sequences * (4 + 8) + docEntries * 8;
  if (sequences > idxSize_ || docEntries > idxSize_ || need > idxSize_)
    bad("truncated: " + std::to_string(sequences) + " sequences and " +
        std::to_string(docEntries) + " document entries need " + std::to_string(need) +
        " bytes, the file has " + std::to_string(idxSize_));
  sequences_ = int64_t(sequences);
  lengths_ = idx_ + 34;
  pointers_ = idx_ + 34 + sequences * 4;
  docIndex_.resize(docEntries);
  if (docEntries)
    std::memcpy(docIndex_.data(), idx_ + 34 + sequences * 12, docEntries * 8);
  if (docIndex_.empty() || docIndex_.front() != 0 || docIndex_.back() != sequences_)
    bad("the document index must run from 0 to the sequence count");
  for (size_t d = 1; d < docIndex_.size(); ++d)
    if (docIndex_[d] < docIndex_[d - 1])
      bad("the document index decreases at entry " + std::to_string(d));
  uint64_t end = 0; // where the furthest sequence ends
  for (int64_t i = 0; i < sequences_; ++i) {
    int32_t length = at<int32_t>(lengths_, i);
    int64_t pointer = at<int64_t>(pointers_, i);
    if (length < 0 || pointer < 0)
      bad("sequence " + std::to_string(i) + " has " + std::to_string(length) +
          " tokens at byte " + std::to_string(pointer));
    // Writers (Megatron's and mlc's) place each sequence at a whole number
    // of tokens; one that starts mid-token reads every id from two halves.
    if (pointer % int64_t(itemSize_) != 0)
      bad("sequence " + std::to_string(i) + " starts at byte " + std::to_string(pointer) +
          ", inside a token (the dtype's tokens are " + std::to_string(itemSize_) +
          " bytes)");
    end = std::max(end, uint64_t(pointer) + uint64_t(length) * itemSize_);
  }
  if (end != binSize_)
    fail(binPath + " holds " + std::to_string(binSize_) + " bytes, but " + idxPath +
         " describes " + std::to_string(end) + " (" + std::to_string(sequences_) +
         " sequences): " +
         (end > binSize_ ? "its data lies past the end of the file (truncated?)"
                         : "the file has bytes that no sequence holds (extended?)") +
         "; the two files are not one dataset");
}

IndexedDataset::~IndexedDataset() {
  if (idx_)
    munmap(const_cast<char *>(idx_), idxSize_);
  if (bin_)
    munmap(const_cast<char *>(bin_), binSize_);
}

void IndexedDataset::read(int64_t i, std::vector<int64_t> &out, int64_t offset,
                          int64_t count) const {
  if (i < 0 || i >= sequences_)
    fail(prefix_ + ": sequence " + std::to_string(i) + " out of range [0, " +
         std::to_string(sequences_) + ")");
  int64_t n = at<int32_t>(lengths_, i) - offset;
  if (count >= 0 && count < n)
    n = count;
  out.resize(n < 0 ? 0 : n);
  const char *p = bin_ + at<int64_t>(pointers_, i) + offset * itemSize_;
  for (int64_t k = 0; k < n; ++k, p += itemSize_) {
    switch (code_) {
    case 1: out[k] = at<uint8_t>(p, 0); break;
    case 2: out[k] = at<int8_t>(p, 0); break;
    case 3: out[k] = at<int16_t>(p, 0); break;
    case 4: out[k] = at<int32_t>(p, 0); break;
    case 5: out[k] = at<int64_t>(p, 0); break;
    case 8: out[k] = at<uint16_t>(p, 0); break;
    }
  }
}

int64_t IndexedDataset::totalTokens() const {
  int64_t n = 0;
  for (int64_t i = 0; i < sequences_; ++i)
    n += at<int32_t>(lengths_, i);
  return n;
}

} // namespace mlc::rt
