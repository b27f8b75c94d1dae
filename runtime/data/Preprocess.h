//===- Preprocess.h - JSONL corpus to indexed datasets ---------*- C++ -*-===//

#ifndef MLC_RUNTIME_PREPROCESS_H
#define MLC_RUNTIME_PREPROCESS_H

#include <string>
#include <vector>

namespace mlc::rt {

struct PreprocessOptions {
  std::string input;                          // JSONL, one document per line
  std::vector<std::string> jsonKeys{"text"};  // one dataset per key
  std::string tokenizerType = "ByteTokenizer";
  std::string vocabFile, mergeFile;
  std::string outputPrefix;                   // writes PREFIX_KEY_document.{bin,idx}
  bool appendEod = false;
  int workers = 1;
  bool strict = false;                        // fail on the first malformed line
  bool quiet = false;
};

struct PreprocessStats {
  int64_t documents = 0, skipped = 0, tokens = 0, bytes = 0;
  double seconds = 0;
};

/// Streams the corpus (never holding it in memory), tokenizes `workers`
/// documents at a time, and writes Megatron datasets. Malformed lines are
/// reported with their line numbers and skipped.
PreprocessStats preprocess(const PreprocessOptions &options);

} // namespace mlc::rt

#endif // MLC_RUNTIME_PREPROCESS_H
