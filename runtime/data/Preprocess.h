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
/// documents at a time, and writes Megatron datasets, each with the record
/// of its tokenizer beside it (PREFIX.tokenizer.json: TokenizerRecord.h). Malformed lines are
/// skipped: the first ten reported with their line numbers, then all of them
/// counted. A directory as input, an output that is an input file, and a run
/// with no document to write are errors that publish nothing.
PreprocessStats preprocess(const PreprocessOptions &options);

/// Refuses a corpus path that cannot be read as a JSONL file: missing, or a
/// directory (a directory reads as no lines, so a run would see no
/// documents). preprocess and tokenizer train share it.
void checkCorpusPath(const std::string &input);

} // namespace mlc::rt

#endif // MLC_RUNTIME_PREPROCESS_H
