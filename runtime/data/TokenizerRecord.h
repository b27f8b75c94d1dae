//===- TokenizerRecord.h - which tokenizer made a dataset ------*- C++ -*-===//
//
// Megatron's .idx holds no word of the tokenizer its ids came from, and its
// format is fixed, so `mlc preprocess` writes beside PREFIX.bin and
// PREFIX.idx a small JSON file, PREFIX.tokenizer.json:
//
//   {"format": "mlc-dataset-tokenizer", "version": 1,
//    "tokenizer_type": "SentencePieceTokenizer",
//    "vocab_size": 32000,                    the tokenizer's ids are 0..N-1
//    "ids_below": 32000,                     no text encodes to an id past it
//                                            (ByteLevelTokenizer: 256 of 512)
//    "max_id": 31871,                        the largest id in the dataset
//    "documents": 1000, "tokens": 523211,
//    "files": [{"name": "tokenizer.model", "path": "/abs/path/tokenizer.model",
//               "sha256": "..."}],           what `sha256sum FILE` prints
//    "sha256": "..."}                        of the type and the files' hashes
//
// `mlc train` reads it for each dataset of --data and refuses a model whose
// vocabulary cannot embed the dataset's ids (its max_id past the model's), and
// a blend of datasets from different tokenizers; a tokenizer that encodes to
// ids past the model, on data that fits, is a warning. `--sample-every`
// decodes with the tokenizer it names. A dataset without the file (one Megatron made, or an older
// mlc's) is trained as before, unchecked.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_TOKENIZERRECORD_H
#define MLC_RUNTIME_TOKENIZERRECORD_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlc::rt {

class Tokenizer;

struct TokenizerRecord {
  struct File {
    std::string name, path, sha256;
  };
  std::string type;
  int64_t vocabSize = 0;
  int64_t idsBelow = 0; // ids the tokenizer encodes to are below it
  int64_t maxId = -1; // -1: the dataset holds no token
  int64_t documents = 0, tokens = 0;
  std::vector<File> files;
  std::string sha256;
  std::string recordPath; // the file it was read from
};

/// PREFIX.tokenizer.json, beside PREFIX.bin and PREFIX.idx.
std::string tokenizerRecordPath(const std::string &datasetPrefix);

/// The record of a --tokenizer-type and its files (--vocab-file and
/// --merge-file, or --tokenizer-model, as makeTokenizer takes them), hashed.
TokenizerRecord describeTokenizer(const std::string &type, const std::string &vocabFile,
                                  const std::string &mergeFile, int64_t vocabSize,
                                  int64_t idsBelow);

std::string tokenizerRecordJson(const TokenizerRecord &r);

/// The record beside a dataset, if there is one; a file that is not one is
/// an error naming it and the field.
std::optional<TokenizerRecord> readTokenizerRecord(const std::string &datasetPrefix);

/// The tokenizer a record names, loaded from the files it lists (what
/// decodes the dataset's ids: `mlc train --sample-every`). A file that is
/// gone, or whose SHA-256 is no longer the recorded one, is an error naming
/// it and the record.
std::unique_ptr<Tokenizer> loadRecordedTokenizer(const TokenizerRecord &r);

/// Refuses datasets whose ids a model with `modelVocab` embedding rows
/// cannot take, naming the dataset, its tokenizer and both numbers (and
/// warns where only their tokenizer's ids reach past it); and a blend of
/// datasets that different tokenizers made. `model` says where the model's
/// vocabulary comes from (for the message).
void checkDatasetsFitModel(const std::vector<std::string> &prefixes, int64_t modelVocab,
                           const std::string &model);

} // namespace mlc::rt

#endif // MLC_RUNTIME_TOKENIZERRECORD_H
