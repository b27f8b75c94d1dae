//===- TokenizerRecord.cpp - which tokenizer made a dataset ---------------===//

#include "runtime/data/TokenizerRecord.h"
#include "runtime/data/Tokenizer.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mlc::rt {
namespace {

bool exists(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (f)
    std::fclose(f);
  return f != nullptr;
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dirName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string absolute(const std::string &path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

/// The files a tokenizer reads, as its loader finds them.
std::vector<std::string> tokenizerFiles(const std::string &type, const std::string &vocabFile,
                                        const std::string &mergeFile) {
  if (type == "GPT2BPETokenizer")
    return {vocabFile, mergeFile};
  if (type == "BertWordPieceLowerCase" || type == "BertWordPieceCase")
    return {vocabFile};
  if (type == "HuggingFaceTokenizer") {
    bool dir = isDirectoryPath(vocabFile);
    std::string json = dir ? vocabFile + "/tokenizer.json" : vocabFile;
    std::string config = (dir ? vocabFile : dirName(vocabFile)) + "/tokenizer_config.json";
    if (exists(config))
      return {json, config};
    return {json};
  }
  if (type == "SentencePieceTokenizer" || type == "Llama2Tokenizer")
    return {isDirectoryPath(vocabFile) ? vocabFile + "/tokenizer.model" : vocabFile};
  return {}; // the byte tokenizers read no file
}

std::string overallHash(const TokenizerRecord &r) {
  std::string text = r.type + "\n";
  for (const TokenizerRecord::File &f : r.files)
    text += f.name + " " + f.sha256 + "\n";
  return sha256Hex(text);
}

} // namespace

std::string tokenizerRecordPath(const std::string &datasetPrefix) {
  return datasetPrefix + ".tokenizer.json";
}

TokenizerRecord describeTokenizer(const std::string &type, const std::string &vocabFile,
                                  const std::string &mergeFile, int64_t vocabSize,
                                  int64_t idsBelow) {
  TokenizerRecord r;
  r.type = type;
  r.vocabSize = vocabSize;
  r.idsBelow = idsBelow;
  for (const std::string &file : tokenizerFiles(type, vocabFile, mergeFile))
    r.files.push_back({baseName(file), absolute(file), sha256Hex(readFile(file))});
  r.sha256 = overallHash(r);
  return r;
}

std::unique_ptr<Tokenizer> loadRecordedTokenizer(const TokenizerRecord &r) {
  for (const TokenizerRecord::File &f : r.files) {
    if (!exists(f.path))
      fail(r.recordPath + ": the dataset's tokenizer file " + f.path + " is gone");
    if (sha256Hex(readFile(f.path)) != f.sha256)
      fail(r.recordPath + ": the dataset's tokenizer file " + f.path +
           " changed since the dataset was made (its SHA-256 is not the recorded " + f.sha256 +
           ")");
  }
  // The files in the order tokenizerFiles lists them: GPT-2's vocabulary and
  // merges, or the one file (a tokenizer.json with its tokenizer_config.json
  // found beside it).
  std::string first = r.files.empty() ? "" : r.files[0].path;
  std::string second = r.files.size() > 1 && r.type == "GPT2BPETokenizer" ? r.files[1].path : "";
  return makeTokenizer(r.type, first, second);
}

std::string tokenizerRecordJson(const TokenizerRecord &r) {
  std::string files;
  for (const TokenizerRecord::File &f : r.files)
    files += std::string(files.empty() ? "" : ",") + "\n    {\"name\": " + jsonQuote(f.name) +
             ", \"path\": " + jsonQuote(f.path) + ", \"sha256\": " + jsonQuote(f.sha256) + "}";
  return "{\"format\": \"mlc-dataset-tokenizer\", \"version\": 1,\n"
         "  \"tokenizer_type\": " + jsonQuote(r.type) + ",\n"
         "  \"vocab_size\": " + std::to_string(r.vocabSize) + ",\n"
         "  \"ids_below\": " + std::to_string(r.idsBelow) + ",\n"
         "  \"max_id\": " + std::to_string(r.maxId) + ",\n"
         "  \"documents\": " + std::to_string(r.documents) + ", \"tokens\": " +
         std::to_string(r.tokens) + ",\n"
         "  \"files\": [" + files + (files.empty() ? "" : "\n  ") + "],\n"
         "  \"sha256\": " + jsonQuote(r.sha256) + "}\n";
}

std::optional<TokenizerRecord> readTokenizerRecord(const std::string &datasetPrefix) {
  const std::string path = tokenizerRecordPath(datasetPrefix);
  if (!exists(path))
    return std::nullopt;
  Json j = Json::parse(readFile(path), path);
  auto bad = [&](const std::string &field, const std::string &why) {
    fail(path + ": " + field + ": " + why + " (the record of the tokenizer that `mlc "
         "preprocess` wrote beside the dataset)");
  };
  if (j.kind != Json::Object)
    bad("the file", "expected a JSON object");
  auto field = [&](const std::string &key, Json::Kind kind) -> const Json & {
    const Json *v = j.find(key);
    if (!v || v->kind != kind)
      bad(key, v ? "has the wrong type" : "missing");
    return *v;
  };
  auto integer = [&](const std::string &key, double lo) {
    double v = field(key, Json::Number).number;
    if (v != std::floor(v) || v < lo || v > 9.0e15)
      bad(key, "expected an integer of at least " + std::to_string(int64_t(lo)));
    return int64_t(v);
  };
  if (field("format", Json::String).string != "mlc-dataset-tokenizer")
    bad("format", "expected 'mlc-dataset-tokenizer'");
  TokenizerRecord r;
  r.recordPath = path;
  r.type = field("tokenizer_type", Json::String).string;
  r.vocabSize = integer("vocab_size", 1);
  r.idsBelow = integer("ids_below", 1);
  r.maxId = integer("max_id", -1);
  r.documents = integer("documents", 0);
  r.tokens = integer("tokens", 0);
  const Json &files = field("files", Json::Array);
  for (size_t i = 0; i < files.array.size(); ++i) {
    const Json &f = files.array[i];
    const std::string where = "files[" + std::to_string(i) + "]";
    const Json *name = f.find("name"), *p = f.find("path"), *sha = f.find("sha256");
    if (f.kind != Json::Object || !name || !p || !sha || name->kind != Json::String ||
        p->kind != Json::String || sha->kind != Json::String)
      bad(where, "expected {\"name\", \"path\", \"sha256\"} strings");
    r.files.push_back({name->string, p->string, sha->string});
  }
  r.sha256 = field("sha256", Json::String).string;
  if (r.idsBelow > r.vocabSize)
    bad("ids_below", std::to_string(r.idsBelow) + " is past vocab_size " +
                         std::to_string(r.vocabSize));
  if (r.maxId >= r.idsBelow)
    bad("max_id", std::to_string(r.maxId) + " is not below ids_below " +
                      std::to_string(r.idsBelow));
  return r;
}

void checkDatasetsFitModel(const std::vector<std::string> &prefixes, int64_t modelVocab,
                           const std::string &model) {
  std::optional<TokenizerRecord> first;
  for (const std::string &prefix : prefixes) {
    std::optional<TokenizerRecord> r = readTokenizerRecord(prefix);
    if (!r)
      continue;
    std::string files;
    for (const TokenizerRecord::File &f : r->files)
      files += (files.empty() ? "" : ", ") + f.path;
    const std::string tokenizer =
        r->type + (files.empty() ? std::string() : " of " + files) + " (" + r->recordPath + ")";
    const std::string fits = "the model's vocabulary of " + std::to_string(modelVocab) +
                             " (" + model + ") embeds ids 0.." +
                             std::to_string(modelVocab - 1);
    if (r->maxId >= modelVocab)
      fail("--data " + prefix + ": its tokens reach id " + std::to_string(r->maxId) +
           ", and " + fits + "; the dataset was tokenized by " + tokenizer);
    // The dataset's ids fit, but its tokenizer's do not all: the model trains
    // on this data, and text that encodes past it (at generation, or in the
    // next dataset) is refused there. Said, not refused: a small model over
    // the ASCII ids of a byte tokenizer is a legitimate choice.
    if (r->idsBelow > modelVocab)
      fprintf(stderr,
              "warning: --data %s: its tokenizer, %s, encodes to ids up to %lld (a vocabulary "
              "of %lld), and %s: text past id %lld cannot be embedded by this model\n",
              prefix.c_str(), tokenizer.c_str(), (long long)(r->idsBelow - 1),
              (long long)r->vocabSize, fits.c_str(), (long long)(modelVocab - 1));
    if (first && first->sha256 != r->sha256)
      fail("--data mixes datasets of different tokenizers: " + first->recordPath + " (" +
           first->type + ", sha256 " + first->sha256.substr(0, 12) + ") and " +
           r->recordPath + " (" + r->type + ", sha256 " + r->sha256.substr(0, 12) + ")");
    if (!first)
      first = r;
  }
}

} // namespace mlc::rt
