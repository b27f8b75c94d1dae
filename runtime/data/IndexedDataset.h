//===- IndexedDataset.h - Megatron's .bin/.idx datasets --------*- C++ -*-===//
//
// The indexed binary dataset of Megatron-LM, byte for byte. PREFIX.bin holds
// the tokens of every sequence back to back; PREFIX.idx holds:
//
//   magic       "MMIDIDX\0\0" (9 bytes)
//   version     u64 = 1
//   dtype code  u8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
//               7 float32, 8 uint16 (mlc writes 8 below 65500 ids, else 4)
//   sequences   u64 = S
//   doc entries u64 = D + 1 (the length of the document index below)
//   lengths     S x int32, tokens per sequence
//   pointers    S x int64, byte offset of each sequence in .bin
//   documents   (D + 1) x int64, sequence index where each document starts,
//               from 0 to S
//
// mlc writes one sequence per document. Reading maps both files; every
// inconsistency is an error naming the file, and the .bin must be exactly as
// long as the .idx says (the end of its furthest sequence), so that a pair
// from two different runs is refused.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_INDEXEDDATASET_H
#define MLC_RUNTIME_INDEXEDDATASET_H

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace mlc::rt {

/// Streams documents into PREFIX.bin and writes PREFIX.idx at the end; both
/// appear under their final names only when finish() succeeds, the .bin
/// renamed before the .idx. The writer holds PREFIX.lock (flock) from
/// construction to the end, so a second writer of the same prefix is refused
/// instead of mixing its files with the first's. Every write is checked: a
/// full disk is an error naming the file, and an unfinished writer removes
/// its temporaries, leaving any earlier dataset under PREFIX as it was.
class IndexedDatasetWriter {
public:
  IndexedDatasetWriter(const std::string &prefix, int64_t vocabSize);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter &) = delete;
  IndexedDatasetWriter &operator=(const IndexedDatasetWriter &) = delete;
  /// One document of one sequence; an empty document has no sequence (as
  /// Megatron writes it: a document boundary with nothing in it).
  void addDocument(const std::vector<int32_t> &tokens);
  void finish();
  int64_t tokens() const { return tokens_; }
  int dtypeCode() const { return code_; }

private:
  void write(FILE *f, const void *data, size_t bytes, const std::string &path);
  void close(FILE *&f, const std::string &path);

  std::string prefix_;
  int code_;
  int lock_ = -1;
  bool finished_ = false;
  FILE *bin_ = nullptr;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> documentIndex_{0}; // first sequence of each document, then the end
  int64_t tokens_ = 0;
};

class IndexedDataset {
public:
  /// Maps PREFIX.idx and PREFIX.bin and checks them against each other.
  explicit IndexedDataset(const std::string &prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset &) = delete;
  IndexedDataset &operator=(const IndexedDataset &) = delete;

  int64_t sequences() const { return sequences_; }
  int64_t documents() const { return int64_t(docIndex_.size()) - 1; }
  int64_t length(int64_t i) const { return at<int32_t>(lengths_, i); }
  /// The first sequence of document d (d = documents() gives sequences()).
  int64_t documentStart(int64_t d) const { return docIndex_[d]; }
  /// Sequence i's tokens, widened to int64.
  void read(int64_t i, std::vector<int64_t> &out, int64_t offset = 0,
            int64_t count = -1) const;
  const std::string &prefix() const { return prefix_; }
  int64_t totalTokens() const;

private:
  std::string prefix_;
  int code_ = 0, itemSize_ = 0;
  int64_t sequences_ = 0;
  // Megatron's 34-byte header leaves the tables unaligned: they are read
  // element by element through memcpy.
  const char *lengths_ = nullptr;
  const char *pointers_ = nullptr;
  template <typename T> static T at(const char *table, int64_t i) {
    T v;
    std::memcpy(&v, table + i * int64_t(sizeof(T)), sizeof(T));
    return v;
  }
  std::vector<int64_t> docIndex_;
  const char *idx_ = nullptr, *bin_ = nullptr;
  size_t idxSize_ = 0, binSize_ = 0;
};

} // namespace mlc::rt

#endif // MLC_RUNTIME_INDEXEDDATASET_H
