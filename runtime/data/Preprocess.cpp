//===- Preprocess.cpp - JSONL corpus to indexed datasets -------------------===//

#include "runtime/data/Preprocess.h"
#include "runtime/core/Error.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/core/Json.h"
#include "runtime/data/Tokenizer.h"

#include <chrono>
#include <fstream>
#include <memory>

namespace mlc::rt {

PreprocessStats preprocess(const PreprocessOptions &o) {
  std::ifstream in(o.input, std::ios::binary);
  if (!in)
    fail(o.input + ": cannot open");
  if (o.outputPrefix.empty())
    fail("--output-prefix is required");
  std::unique_ptr<Tokenizer> tokenizer = makeTokenizer(o.tokenizerType, o.vocabFile, o.mergeFile);
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const std::string &key : o.jsonKeys)
    writers.push_back(std::make_unique<IndexedDatasetWriter>(
        o.outputPrefix + "_" + key + "_document", tokenizer->vocabSize()));

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now(), lastReport = start;
  PreprocessStats stats;
  const size_t batch = size_t(std::max(1, o.workers)) * 256;
  std::vector<std::string> lines;
  std::vector<int64_t> lineNumbers;
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
        if (!o.quiet)
          fprintf(stderr, "mlc preprocess: %s; line skipped\n", msg.c_str());
        ++stats.skipped;
        continue;
      }
      for (size_t k = 0; k < keys; ++k) {
        writers[k]->addDocument(tokens[i * keys + k]);
        stats.tokens += tokens[i * keys + k].size();
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
  for (auto &w : writers)
    w->finish();
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

} // namespace mlc::rt
