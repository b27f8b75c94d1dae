//===- Data.cpp - mlc preprocess, tokenizer, data and plot -----------------===//
//
//   mlc preprocess --input FILE.jsonl --output-prefix P [--tokenizer-type ...]
//   mlc tokenizer train --input FILE.jsonl --vocab-size N --output-dir DIR
//   mlc tokenizer decode --input IDS.txt --tokenizer-type T [--tokenizer-model M ...]
//   mlc data stats|dump|loader PREFIX
//   mlc plot LOG.jsonl [-o loss.png]
//
// The subcommands around training that need no compiler: the data it reads
// and the log it writes.
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Tool.h"

#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"
#include "runtime/data/Balance.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/Preprocess.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/train/Plot.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <climits>
#include <fstream>
#include <sstream>

using namespace llvm;

namespace mlc::tool {
namespace {

// preprocess
cl::opt<std::string> ppInput("input", cl::desc("JSONL corpus"), cl::sub(preprocessCmd()),
                             cl::cat(category()));
cl::opt<std::string> ppOutputPrefix("output-prefix",
                                    cl::desc("Writes PREFIX_KEY_document.{bin,idx} per JSON key"),
                                    cl::sub(preprocessCmd()), cl::cat(category()));
cl::list<std::string> ppJsonKeys("json-keys", cl::desc("JSON fields to tokenize (default text)"),
                                 cl::CommaSeparated, cl::sub(preprocessCmd()), cl::cat(category()));
cl::opt<std::string> ppTokenizer("tokenizer-type",
                                 cl::desc("ByteLevelTokenizer, GPT2BPETokenizer, "
                                          "BertWordPieceLowerCase, BertWordPieceCase, "
                                          "HuggingFaceTokenizer, SentencePieceTokenizer, "
                                          "Llama2Tokenizer (Megatron's names) or "
                                          "ByteTokenizer"),
                                 cl::init("ByteTokenizer"), cl::sub(preprocessCmd()),
                                 cl::cat(category()));
cl::opt<std::string> ppVocab("vocab-file", cl::desc("Vocabulary (vocab.json or vocab.txt)"),
                             cl::sub(preprocessCmd()), cl::cat(category()));
cl::opt<std::string> ppModel("tokenizer-model",
                             cl::desc("HuggingFaceTokenizer: a tokenizer.json, or a model "
                                      "directory holding one (and tokenizer_config.json); "
                                      "SentencePieceTokenizer, Llama2Tokenizer: a "
                                      "tokenizer.model or its directory"),
                             cl::sub(preprocessCmd()), cl::cat(category()));
cl::opt<std::string> ppMerges("merge-file", cl::desc("BPE merges (merges.txt)"),
                              cl::sub(preprocessCmd()), cl::cat(category()));
cl::opt<bool> ppAppendEod("append-eod", cl::desc("End every document with the EOD token"),
                          cl::sub(preprocessCmd()), cl::cat(category()));
cl::opt<int> ppWorkers("workers", cl::desc("Tokenizing threads"), cl::init(1),
                       cl::sub(preprocessCmd()), cl::cat(category()));
cl::opt<bool> ppStrict("strict", cl::desc("Fail on the first malformed line"),
                       cl::sub(preprocessCmd()), cl::cat(category()));

// tokenizer
cl::list<std::string> tokArgs(cl::Positional, cl::desc("train|decode"), cl::sub(tokenizerCmd()),
                              cl::cat(category()));
cl::opt<std::string> tokInput("input", cl::desc("JSONL corpus"), cl::sub(tokenizerCmd()),
                              cl::cat(category()));
cl::list<std::string> tokKeys("json-keys", cl::desc("JSON fields to learn from (default text)"),
                              cl::CommaSeparated, cl::sub(tokenizerCmd()), cl::cat(category()));
cl::opt<int64_t> tokVocab("vocab-size", cl::desc("Entries of the vocabulary"), cl::init(8192),
                          cl::sub(tokenizerCmd()), cl::cat(category()));
cl::opt<std::string> tokOut("output-dir", cl::desc("Where vocab.json and merges.txt go"),
                            cl::sub(tokenizerCmd()), cl::cat(category()));
cl::opt<std::string> tokType("tokenizer-type", cl::desc("decode: the ids' tokenizer"),
                             cl::init("ByteTokenizer"), cl::sub(tokenizerCmd()),
                             cl::cat(category()));
cl::opt<std::string> tokModel("tokenizer-model",
                              cl::desc("decode, HuggingFaceTokenizer: tokenizer.json or its "
                                       "directory; SentencePieceTokenizer, Llama2Tokenizer: "
                                       "tokenizer.model or its directory"),
                              cl::sub(tokenizerCmd()), cl::cat(category()));
cl::opt<std::string> tokVocabFile("vocab-file", cl::desc("decode: vocab.json or vocab.txt"),
                                  cl::sub(tokenizerCmd()), cl::cat(category()));
cl::opt<std::string> tokMergeFile("merge-file", cl::desc("decode: merges.txt"),
                                  cl::sub(tokenizerCmd()), cl::cat(category()));

// data
cl::list<std::string> dataArgs(cl::Positional, cl::desc("stats|dump PREFIX"),
                               cl::sub(dataCmd()), cl::cat(category()));
cl::opt<int> ranks("ranks", cl::desc("Data-parallel ranks"), cl::init(8), cl::sub(dataCmd()),
                   cl::cat(category()));
cl::opt<int64_t> tokensPerRank("tokens-per-rank",
                               cl::desc("Token budget of one rank's micro-batch"),
                               cl::init(4096), cl::sub(dataCmd()), cl::cat(category()));
cl::opt<std::string> policy("policy",
                            cl::desc("presort, zigzag or random (default: all, side by side)"),
                            cl::sub(dataCmd()), cl::cat(category()));
cl::opt<bool> json("json", cl::desc("Print one JSON object keyed by policy"),
                   cl::sub(dataCmd()), cl::cat(category()));
cl::opt<uint64_t> dataSeed("seed", cl::desc("Seed of the sample order"), cl::init(1234),
                           cl::sub(dataCmd()), cl::cat(category()));
cl::opt<int64_t> dumpCount("count", cl::desc("Documents to dump"), cl::init(10),
                           cl::sub(dataCmd()), cl::cat(category()));

// plot
cl::opt<std::string> plotLogFile(cl::Positional, cl::desc("<LOG.jsonl>"), cl::sub(plotCmd()),
                                 cl::cat(category()));
cl::opt<std::string> plotOut("o", cl::desc("The PNG to write (default loss.png)"),
                             cl::init("loss.png"), cl::value_desc("file"), cl::sub(plotCmd()),
                             cl::cat(category()));
cl::opt<int> plotWidth("width", cl::desc("Pixels"), cl::init(960), cl::sub(plotCmd()),
                       cl::cat(category()));
cl::opt<int> plotHeight("height", cl::desc("Pixels"), cl::init(600), cl::sub(plotCmd()),
                        cl::cat(category()));

} // namespace

int runPlot() {
  if (plotLogFile.empty())
    return fail("usage: mlc plot LOG.jsonl [-o loss.png]");
  try {
    std::string summary = mlc::rt::plotLog(plotLogFile, plotOut, plotWidth, plotHeight);
    outs() << "mlc plot: " << summary << "\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

/// `mlc tokenizer decode`: each line of --input holds token ids (separated
/// by spaces); prints each line's text as one JSON string.
static int runDecode() {
  try {
    std::unique_ptr<mlc::rt::Tokenizer> t = mlc::rt::makeTokenizer(
        tokType, rt::readsTokenizerModel(tokType) ? tokModel : tokVocabFile, tokMergeFile);
    std::ifstream in(tokInput);
    if (!in)
      return fail(tokInput + ": cannot open");
    std::string line;
    int64_t lineNo = 0;
    while (std::getline(in, line)) {
      ++lineNo;
      std::vector<int32_t> ids;
      std::istringstream words(line);
      std::string w;
      while (words >> w) {
        char *end = nullptr;
        long long v = std::strtoll(w.c_str(), &end, 10);
        if (*end || v < 0 || v > INT32_MAX)
          return fail(tokInput + ":" + std::to_string(lineNo) + ": '" + w +
                      "' is not a token id");
        ids.push_back(int32_t(v));
      }
      outs() << mlc::rt::jsonQuote(t->decode(ids)) << "\n";
    }
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

int runTokenizer() {
  if (tokArgs.size() == 1 && tokArgs[0] == "decode" && !tokInput.empty())
    return runDecode();
  if (tokArgs.size() != 1 || tokArgs[0] != "train" || tokInput.empty() || tokOut.empty())
    return fail("usage: mlc tokenizer train --input FILE.jsonl [--json-keys text] "
                "--vocab-size N --output-dir DIR | mlc tokenizer decode --input IDS.txt "
                "--tokenizer-type T [--tokenizer-model M | --vocab-file V --merge-file M]");
  std::vector<std::string> keys(tokKeys.begin(), tokKeys.end());
  if (keys.empty())
    keys = {"text"};
  try {
    mlc::rt::checkCorpusPath(tokInput); // as preprocess: a directory is no corpus
    mlc::rt::refuseOutputsOverInputs({{"--input", tokInput}},
                                     {{"--output-dir", tokOut + "/vocab.json"},
                                      {"--output-dir", tokOut + "/merges.txt"}});
    std::ifstream in(tokInput);
    if (!in)
      return fail(tokInput + ": cannot open");
    std::vector<std::string> texts;
    std::string line;
    int64_t lineNo = 0;
    while (std::getline(in, line)) {
      ++lineNo;
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      try {
        mlc::rt::Json doc = mlc::rt::Json::parse(line, "document");
        for (const std::string &k : keys)
          if (const mlc::rt::Json *t = doc.find(k); t && t->kind == mlc::rt::Json::String)
            texts.push_back(t->string);
      } catch (const mlc::rt::Error &e) {
        errs() << "mlc tokenizer: " << tokInput << ":" << lineNo << ": " << e.what()
               << "; line skipped\n";
      }
    }
    // As preprocess: no vocabulary is written from no text.
    if (texts.empty())
      return fail(tokInput + ": no documents to learn from (no line has a string under --json-keys " +
                  join(keys, ",") + ")");
    int64_t written = mlc::rt::trainBpe(texts, tokVocab, tokOut);
    outs() << "mlc tokenizer: learned " << written << " entries from " << texts.size()
           << " documents; wrote " << tokOut << "/vocab.json and merges.txt\n";
    if (written < tokVocab)
      errs() << "mlc tokenizer: note: the corpus ran out of pairs to merge before "
             << tokVocab << " entries\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

namespace {
/// The numeric flags of `mlc data`, each within what it can mean.
int checkDataFlags() {
  struct Range {
    const char *flag;
    int64_t value, lo, hi;
  } ranges[] = {{"--seq-len", seqLen, 1, int64_t(1) << 24},
                {"--ranks", ranks, 1, 1 << 16},
                {"--tokens-per-rank", tokensPerRank, 1, int64_t(1) << 40},
                {"--count", dumpCount, 1, int64_t(1) << 40}};
  for (const Range &r : ranges)
    if (r.value < r.lo || r.value > r.hi)
      return fail(formatv("{0} must be in [{1}, {2}], got {3}", r.flag, r.lo, r.hi, r.value));
  return 0;
}

} // namespace

int runData() {
  if (int rc = checkDataFlags())
    return rc;
  if (dataArgs.size() != 2 ||
      (dataArgs[0] != "stats" && dataArgs[0] != "dump" && dataArgs[0] != "loader"))
    return fail("usage: mlc data stats PREFIX [--seq-len S --ranks R --tokens-per-rank T "
                "--policy P --json] | mlc data dump PREFIX [--count N] | mlc data loader "
                "PREFIX [--seq-len S --count SAMPLES]");
  try {
    if (dataArgs[0] == "loader") {
      // The GPT sample loader alone: tokens per second it can deliver.
      mlc::rt::GptSamples samples(mlc::rt::parseBlend(dataArgs[1]), "969,30,1", 0, seqLen,
                                  dataSeed);
      std::vector<int64_t> buffer(seqLen);
      auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < dumpCount; ++i)
        samples.sample(i, buffer.data());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      outs() << formatv("mlc data loader: {0} samples of {1} tokens in {2:f3} s: {3:f0} "
                        "tokens/s\n",
                        int64_t(dumpCount), int64_t(seqLen), s, dumpCount * seqLen / s);
      return 0;
    }
    mlc::rt::IndexedDataset data(dataArgs[1]);
    if (dataArgs[0] == "dump") {
      std::vector<int64_t> ids;
      for (int64_t d = 0; d < std::min<int64_t>(dumpCount, data.documents()); ++d) {
        for (int64_t q = data.documentStart(d); q < data.documentStart(d + 1); ++q) {
          data.read(q, ids);
          for (size_t i = 0; i < ids.size(); ++i)
            outs() << (i ? " " : "") << ids[i];
          outs() << "\n";
        }
      }
      return 0;
    }
    std::vector<int64_t> lengths;
    for (int64_t d = 0; d < data.documents(); ++d) {
      int64_t n = 0;
      for (int64_t q = data.documentStart(d); q < data.documentStart(d + 1); ++q)
        n += data.length(q);
      lengths.push_back(n);
    }
    std::vector<mlc::rt::BalancePolicy> policies;
    if (policy.empty())
      policies = {mlc::rt::BalancePolicy::Presort, mlc::rt::BalancePolicy::ZigZag,
                  mlc::rt::BalancePolicy::Random};
    else
      policies = {mlc::rt::parseBalancePolicy(policy)};
    if (!json)
      outs() << formatv("{0}: {1} documents; one sample per document, truncated at {2} "
                        "tokens; {3} ranks x {4} tokens\n",
                        dataArgs[1], data.documents(), seqLen, ranks, tokensPerRank);
    std::string object = "{";
    for (auto p : policies) {
      auto st = mlc::rt::balanceStats(lengths, seqLen, ranks, tokensPerRank, p, dataSeed);
      if (json)
        object += formatv("{0}\"{1}\": {{\"imbalance\": {2:f6}, \"padding\": {3:f6}, "
                          "\"padding_to_seq_len\": {4:f6}, \"unpadded_padding\": 0, "
                          "\"steps\": {5}, \"tokens\": {6}}",
                          object.size() > 1 ? ", " : "", policyName(p), st.imbalance,
                          st.padding, st.paddingFixed, st.steps, st.tokens)
                      .str();
      else
        outs() << formatv("  {0,-8} imbalance (max/mean tokens per rank) {1:f4}; padding: "
                          "{2:f1}% padded to each rank's longest, {3:f1}% padded to seq-len, "
                          "0% packed; {4} steps\n",
                          policyName(p), st.imbalance, 100 * st.padding,
                          100 * st.paddingFixed, st.steps);
    }
    if (json)
      outs() << object << "}\n";
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

int runPreprocess() {
  mlc::rt::PreprocessOptions o;
  if (ppInput.empty() || ppOutputPrefix.empty())
    return fail("mlc preprocess needs --input FILE.jsonl and --output-prefix PREFIX");
  o.input = ppInput;
  o.outputPrefix = ppOutputPrefix;
  if (!ppJsonKeys.empty())
    o.jsonKeys.assign(ppJsonKeys.begin(), ppJsonKeys.end());
  o.tokenizerType = ppTokenizer;
  o.vocabFile = ppVocab;
  if (rt::readsTokenizerModel(ppTokenizer)) {
    if (ppModel.empty())
      return fail("--tokenizer-type " + ppTokenizer + " needs --tokenizer-model (" +
                  (ppTokenizer == "HuggingFaceTokenizer"
                       ? "a tokenizer.json or a directory holding one)"
                       : "a SentencePiece tokenizer.model or a directory holding one)"));
    if (!ppVocab.empty() || !ppMerges.empty())
      return fail("--tokenizer-type " + ppTokenizer + " reads --tokenizer-model; "
                  "--vocab-file and --merge-file belong to the other tokenizers");
    o.vocabFile = ppModel;
  } else if (!ppModel.empty()) {
    return fail("--tokenizer-model is HuggingFaceTokenizer's, SentencePieceTokenizer's and "
                "Llama2Tokenizer's; --tokenizer-type is '" + ppTokenizer + "'");
  }
  o.mergeFile = ppMerges;
  o.appendEod = ppAppendEod;
  if (ppWorkers < 1 || ppWorkers > 1024)
    return fail("--workers must be in [1, 1024], got " + std::to_string(ppWorkers));
  o.workers = ppWorkers;
  o.strict = ppStrict;
  try {
    mlc::rt::PreprocessStats s = mlc::rt::preprocess(o);
    outs() << formatv("mlc preprocess: {0} documents ({1} lines skipped), {2} tokens, "
                      "{3:f1} MB in {4:f2} s: {5:f1} MB/s\n",
                      s.documents, s.skipped, s.tokens, s.bytes / 1e6, s.seconds,
                      s.bytes / 1e6 / std::max(s.seconds, 1e-9));
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

} // namespace mlc::tool
