//===- Preprocess.cpp - JSONL corpus to indexed datasets -------------------===//

#include "runtime/data/Preprocess.h"
#include "runtime/data/TokenizerRecord.h"
#include "support/Error.h"
#include "runtime/data/IndexedDataset.h"
#include "support/Json.h"
#include "support/TensorIO.h"
#include "runtime/data/Tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

/// Malformed lines reported one by one before the rest are only counted.
constexpr size_t kLinesReported = 10;

/// Refuses, before anything is written, a corpus that is a directory, a JSON
/// key given twice (two writers of one dataset) and an output dataset that is
/// one of the run's input files.
void checkPaths(const PreprocessOptions &o) {
  checkCorpusPath(o.input);
  std::vector<NamedPath> outputs;
  for (const std::string &key : o.jsonKeys) {
    if (std::count(o.jsonKeys.begin(), o.jsonKeys.end(), key) > 1)
      fail("--json-keys names '" + key + "' twice; each key writes a dataset of its own");
    for (const char *ext : {".bin", ".idx"})
      outputs.push_back({"--output-prefix", o.outputPrefix + "_" + key + "_document" + ext});
  }
  refuseOutputsOverInputs(
      {{"--input", o.input}, {"--vocab-file", o.vocabFile}, {"--merge-file", o.mergeFile}},
      outputs);
}

bool isTerminal(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return false;
  bool tty = isatty(fd);
  close(fd);
  return tty;
}

std::string lineList(const std::vector<int64_t> &lines) {
  std::string s;
  for (int64_t l : lines)
    s += (s.empty() ? "" : ", ") + std::to_string(l);
  return s;
}

} // namespace

void checkCorpusPath(const std::string &input) {
  struct stat st;
  if (stat(input.c_str(), &st) != 0)
    fail(input + ": cannot open: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    fail("--input " + input + " is a directory; expected a JSONL file");
  // A pipe streams a corpus and a terminal is typed into; any other device
  // (/dev/zero, a disk) never ends a line.
  if (S_ISBLK(st.st_mode) || (S_ISCHR(st.st_mode) && !isTerminal(input)))
    fail("--input " + input + " is a device; expected a JSONL file (or a pipe)");
}

PreprocessStats preprocess(const PreprocessOptions &o) {
  if (o.outputPrefix.empty())
    fail("--output-prefix is required");
  checkPaths(o);
  std::ifstream in(o.input, std::ios::binary);
  if (!in)
    fail(o.input + ": cannot open");
  std::unique_ptr<Tokenizer> tokenizer = makeTokenizer(o.tokenizerType, o.vocabFile, o.mergeFile);
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  std::vector<TokenizerRecord> records;
  const TokenizerRecord record =
      describeTokenizer(o.tokenizerType, o.vocabFile, o.mergeFile, tokenizer->vocabSize(),
                        tokenizer->idsBelow());
  for (const std::string &key : o.jsonKeys) {
    writers.push_back(std::make_unique<IndexedDatasetWriter>(
        o.outputPrefix + "_" + key + "_document", tokenizer->vocabSize()));
    records.push_back(record);
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now(), lastReport = start;
  PreprocessStats stats;
  const size_t batch = size_t(std::max(1, o.workers)) * 256;
  std::vector<std::string> lines;
  std::vector<int64_t> lineNumbers, skippedLines;
  int64_t lineNo = 0;
  bool done = false;
  while (!done) {
    // Read a batch of lines, tokenize it in parallel, write it in order.
    lines.clear();
    lineNumbers.clear();
    std::string line;
    while (lines.size() < batch && std::getline(in, line)) {
      ++lineNo;
      stats.bytes += line.size() + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      lines.push_back(std::move(line));
      lineNumbers.push_back(lineNo);
    }
    done = lines.size() < batch;
    size_t n = lines.size(), keys = o.jsonKeys.size();
    std::vector<std::vector<int32_t>> tokens(n * keys);
    std::vector<std::string> errors(n);
#pragma omp parallel for num_threads(std::max(1, o.workers)) schedule(dynamic, 16)
    for (size_t i = 0; i < n; ++i) {
      try {
        Json doc = Json::parse(lines[i], "document");
        for (size_t k = 0; k < keys; ++k) {
          const Json *text = doc.find(o.jsonKeys[k]);
          if (!text || text->kind != Json::String)
            throw Error("no string field '" + o.jsonKeys[k] + "'");
          tokens[i * keys + k] = tokenizer->encode(text->string);
          // As Megatron: an empty document stays empty (no EOD-only sequence).
          if (o.appendEod && !tokens[i * keys + k].empty())
            tokens[i * keys + k].push_back(tokenizer->eod());
        }
      } catch (const std::exception &e) {
        // Nothing may leave an OpenMP region: every failure is this line's.
        errors[i] = e.what();
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!errors[i].empty()) {
        std::string msg = o.input + ":" + std::to_string(lineNumbers[i]) + ": " + errors[i];
        if (o.strict)
          fail(msg);
        if (!o.quiet && skippedLines.size() < kLinesReported)
          fprintf(stderr, "mlc preprocess: %s; line skipped\n", msg.c_str());
        if (skippedLines.size() < kLinesReported)
          skippedLines.push_back(lineNumbers[i]);
        ++stats.skipped;
        continue;
      }
      for (size_t k = 0; k < keys; ++k) {
        const std::vector<int32_t> &ids = tokens[i * keys + k];
        writers[k]->addDocument(ids);
        stats.tokens += ids.size();
        TokenizerRecord &r = records[k];
        r.tokens += ids.size();
        r.documents += 1;
        for (int32_t id : ids)
          r.maxId = std::max<int64_t>(r.maxId, id);
      }
      ++stats.documents;
    }
    auto now = Clock::now();
    if (!o.quiet && (std::chrono::duration<double>(now - lastReport).count() > 1.0 || done)) {
      double s = std::chrono::duration<double>(now - start).count();
      fprintf(stderr, "mlc preprocess: %lld documents, %.0f docs/s, %.1f MB/s\n",
              (long long)stats.documents, stats.documents / std::max(s, 1e-9),
              stats.bytes / 1e6 / std::max(s, 1e-9));
      lastReport = now;
    }
  }
  if (in.bad())
    fail(o.input + ": read failed after line " + std::to_string(lineNo));
  std::string skipped;
  if (stats.skipped)
    skipped = std::to_string(stats.skipped) + " of " +
              std::to_string(stats.skipped + stats.documents) +
              " lines skipped (first at lines " + lineList(skippedLines) + ")";
  // Nothing is published from a run without documents: a dataset under the
  // prefix stays as it was.
  if (stats.documents == 0)
    fail(o.input + ": no documents to write" +
         (skipped.empty() ? std::string(" (it has no lines with text)") : ": " + skipped));
  if (!skipped.empty() && !o.quiet)
    fprintf(stderr, "mlc preprocess: %s: %s\n", o.input.c_str(), skipped.c_str());
  // The old record goes before the new dataset is published and the new
  // record after: an interrupted run leaves no record rather than a wrong one.
  for (const std::string &key : o.jsonKeys)
    std::remove(tokenizerRecordPath(o.outputPrefix + "_" + key + "_document").c_str());
  for (auto &w : writers)
    w->finish();
  for (size_t k = 0; k < writers.size(); ++k)
    writeFileAtomically(tokenizerRecordPath(o.outputPrefix + "_" + o.jsonKeys[k] + "_document"),
                        tokenizerRecordJson(records[k]));
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

} // namespace mlc::rt
