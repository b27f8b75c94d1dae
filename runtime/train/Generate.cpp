//===- Generate.cpp - text from a trained GPT-style model ------------------===//

#include "runtime/train/Generate.h"
#include "contract/StepFunctions.h"
#include "support/Error.h"
#include "support/TensorIO.h"
#include "runtime/train/GenerationConfig.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <utility>

namespace mlc::rt {

namespace {

/// A flag's value: all of its text (no blanks around it), finite, >= 0.
double nonNegative(const std::string &flag, const std::string &v, bool integer) {
  char *end = nullptr;
  errno = 0;
  double x = integer ? double(std::strtoll(v.c_str(), &end, 10)) : std::strtod(v.c_str(), &end);
  if (v.empty() || std::isspace((unsigned char)v[0]) || *end || errno == ERANGE ||
      !std::isfinite(x) || x < 0)
    fail("--" + flag + " expects " + (integer ? "an integer" : "a number") + " >= 0, got '" +
         v + "'");
  return x;
}

/// The logits of one step at `position`, which must all be finite. A
/// tensor-parallel package's vocabulary-parallel head gives each rank of the
/// group `columns` of them (rank r the token ids [r columns, (r+1) columns)):
/// the ranks gather that one position's, so every rank holds the same whole
/// row and chooses the same token.
std::vector<double> lastLogits(Communicator *group, const HostTensor &out, int64_t position,
                               int64_t columns, int64_t step, const GenerateOptions &o) {
  std::vector<double> mine(columns);
  for (int64_t v = 0; v < columns; ++v)
    mine[v] = out.getDouble(position * columns + v);
  std::vector<double> x = mine;
  if (group) {
    x.resize(columns * group->size());
    group->allGatherBytes(mine.data(), columns * int64_t(sizeof(double)), x.data());
  }
  const int64_t V = int64_t(x.size());
  for (int64_t v = 0; v < V; ++v) {
    if (!std::isfinite(x[v]))
      fail("generate, step " + std::to_string(step + 1) + ": the logit of token id " +
           std::to_string(v) + " is " + (std::isnan(x[v]) ? "NaN" : "infinite") + "; " +
           o.weights + " hold NaN or infinite values, or overflow");
  }
  return x;
}

} // namespace

bool setGenerateFlag(GenerateOptions &o, const std::string &name, const std::string &value) {
  if (name == "prompt")
    o.prompt = value;
  else if (name == "max-tokens")
    o.maxTokens = int64_t(nonNegative(name, value, /*integer=*/true));
  else if (name == "temperature")
    o.temperature = nonNegative(name, value, /*integer=*/false);
  else if (name == "top-k")
    o.topK = int64_t(nonNegative(name, value, /*integer=*/true));
  else if (name == "top-p") {
    o.topP = nonNegative(name, value, /*integer=*/false);
    if (!(o.topP > 0 && o.topP <= 1))
      fail("--top-p expects a number in (0, 1], got '" + value + "'");
  } else if (name == "repetition-penalty") {
    o.repetitionPenalty = nonNegative(name, value, /*integer=*/false);
    if (!(o.repetitionPenalty > 0))
      fail("--repetition-penalty expects a number > 0, got '" + value + "'");
  }
  else if (name == "tokenizer-type")
    o.tokenizerType = value;
  else if (name == "vocab-file")
    o.vocabFile = value;
  else if (name == "output-ids")
    o.outputIds = value;
  else if (name == "merge-file")
    o.mergeFile = value;
  else if (name == "tokenizer-model")
    o.vocabFile = value; // HuggingFaceTokenizer's tokenizer.json or its directory
  else
    return false;
  o.given.insert(name);
  return true;
}

std::string TextStream::push(int32_t id) {
  if (tokenizer.decodesInContext()) {
    // Decode everything so far; a trailing U+FFFD may be a character whose
    // bytes have not all come, so it waits.
    ids.push_back(id);
    std::string all = tokenizer.decode(ids);
    size_t end = all.size();
    while (end >= emitted + 3 && all.compare(end - 3, 3, "\xEF\xBF\xBD") == 0)
      end -= 3;
    if (end <= emitted)
      return "";
    std::string ready = all.substr(emitted, end - emitted);
    emitted = end;
    return ready;
  }
  pending += tokenizer.decode({id});
  // Hold back the last character if its lead byte announces more bytes than
  // have come (a stray or invalid byte is passed on as it is).
  size_t cut = pending.size();
  for (size_t back = 1; back <= std::min<size_t>(4, pending.size()); ++back) {
    unsigned char c = pending[pending.size() - back];
    if ((c & 0xC0) == 0x80)
      continue; // a continuation byte
    size_t need = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
    if (need > back)
      cut = pending.size() - back;
    break;
  }
  std::string ready = pending.substr(0, cut);
  pending.erase(0, cut);
  return ready;
}

std::string TextStream::finish() {
  if (tokenizer.decodesInContext()) {
    std::string all = tokenizer.decode(ids);
    std::string rest = all.size() > emitted ? all.substr(emitted) : std::string();
    emitted = all.size();
    return rest;
  }
  return std::exchange(pending, std::string());
}

/// A package compiled for packed documents generates from one document per
/// row: positions 0..S-1 and cu_seqlens 0, S, 2S, ..., B S (then empty
/// sequences), the plain causal model's attention.
static void setOneDocumentPerRow(Backend &backend, int64_t B, int64_t S) {
  for (const InputInfo &in : backend.package().inputs) {
    HostTensor t;
    if (in.name == "position_ids") {
      t.dtype = "i64";
      t.shape = {B, S};
      t.data.resize(B * S * 8);
      for (int64_t i = 0; i < B * S; ++i)
        reinterpret_cast<int64_t *>(t.data.data())[i] = i % S;
    } else if (in.name == "cu_seqlens") {
      t.dtype = "i32";
      t.shape = in.shape;
      t.data.resize(in.numel * 4);
      for (int64_t i = 0; i < in.numel; ++i)
        reinterpret_cast<int32_t *>(t.data.data())[i] = int32_t(std::min(i, B) * S);
    } else {
      continue;
    }
    backend.setInput(in.name, t);
  }
}

std::vector<int32_t> generate(Backend &backend, const Tokenizer &tokenizer,
                              const GenerateOptions &o,
                              const std::function<void(int32_t)> &onToken,
                              std::vector<int32_t> *sequence) {
  const Package &pkg = backend.package();
  const FunctionPlan &fn = pkg.function(kEvaluateFn);
  const InputInfo *ids = nullptr;
  for (const InputInfo &in : pkg.inputs) {
    if (in.name == "input_ids")
      ids = &in;
    else if (in.name != "labels" && in.name != "position_ids" && in.name != "cu_seqlens")
      fail("generate needs a GPT-style model (inputs input_ids and labels, and position_ids, "
           "cu_seqlens of packed documents); this one also takes '" + in.name + "'");
  }
  // A tensor-parallel package's @evaluate returns this rank's columns of the
  // vocabulary (mlc-shard-tensor-parallel's vocabulary-parallel head).
  const FunctionPlan::Output *logits = nullptr;
  for (const FunctionPlan::Output &out : fn.outputs)
    if (out.name == "logits" || out.name == "vocab_parallel_logits")
      logits = &out;
  if (!ids || ids->shape.size() != 2 || !logits || logits->shape.size() != 3)
    fail("generate needs input_ids [batch, seq] and logits [batch, seq, vocab]");
  const bool vocabParallel = logits->name == "vocab_parallel_logits";
  Communicator *group = vocabParallel ? backend.tensorParallel() : nullptr;
  if (vocabParallel && (!group || group->size() != pkg.tensorParallel))
    fail(pkg.dir + " is one rank of a tensor-parallel group of " +
         std::to_string(pkg.tensorParallel) +
         ": generate with all the group's ranks (mlc train --sample-every under mpirun), or "
         "with a package compiled without --tensor-parallel");
  const int64_t B = ids->shape[0], S = ids->shape[1], columns = logits->shape[2];
  const int64_t V = columns * (vocabParallel ? pkg.tensorParallel : 1);
  if (o.maxTokens < 0 || !(o.temperature >= 0) || o.topK < 0 || !(o.topP > 0 && o.topP <= 1) ||
      !(o.repetitionPenalty > 0))
    fail("generate: max-tokens and top-k must be >= 0, the temperature a number >= 0, top-p "
         "in (0, 1] and the repetition penalty > 0");

  std::vector<int32_t> tokens = tokenizer.encode(o.prompt);
  if (tokens.empty()) // an empty prompt starts a document
    tokens.push_back(o.bosId >= 0 ? o.bosId : tokenizer.eod());
  const int64_t maxTokens =
      o.maxLength >= 0 ? std::max<int64_t>(0, o.maxLength - int64_t(tokens.size())) : o.maxTokens;
  auto stops = [&](int32_t id) {
    if (o.eosIds.empty())
      return id == tokenizer.eod();
    return std::find(o.eosIds.begin(), o.eosIds.end(), id) != o.eosIds.end();
  };
  // A tokenizer may reserve more ids than the model has rows (Megatron's
  // ByteLevelTokenizer has 512 for 256 bytes); what matters is the prompt.
  for (int32_t t : tokens)
    if (t < 0 || t >= V)
      fail("the prompt encodes to token " + std::to_string(t) + ", outside the model's " +
           std::to_string(V) + "-token vocabulary (a --tokenizer-type other than the data's?)");
  std::vector<int32_t> generated;
  std::mt19937_64 rng(o.seed);
  if (sequence)
    *sequence = tokens;
  HostTensor input, labels;
  input.dtype = labels.dtype = "i64";
  input.shape = labels.shape = ids->shape;
  labels.data.assign(B * S * 8, 0);
  setOneDocumentPerRow(backend, B, S);
  for (int64_t n = 0; n < maxTokens; ++n) {
    // The last S tokens in the first row; later positions do not reach
    // earlier ones (causal attention), so what fills them does not matter.
    int64_t len = std::min<int64_t>(int64_t(tokens.size()), S);
    input.data.assign(B * S * 8, 0);
    int64_t *row = reinterpret_cast<int64_t *>(input.data.data());
    for (int64_t i = 0; i < len; ++i)
      row[i] = tokens[tokens.size() - len + i];
    backend.setInput("input_ids", input);
    backend.setInput("labels", labels);
    backend.run(kEvaluateFn, 0);
    HostTensor out = backend.output(kEvaluateFn, logits->name);
    std::vector<double> x = lastLogits(group, out, len - 1, columns, n, o);
    if (o.repetitionPenalty != 1.0) {
      std::vector<bool> seen(V, false);
      for (int32_t t : tokens)
        if (t >= 0 && t < V && !seen[t]) {
          seen[t] = true;
          x[t] = x[t] < 0 ? x[t] * o.repetitionPenalty : x[t] / o.repetitionPenalty;
        }
    }
    int32_t next;
    if (o.temperature == 0) {
      next = int32_t(std::max_element(x.begin(), x.end()) - x.begin()); // first of ties
    } else {
      std::vector<int32_t> order(V);
      std::iota(order.begin(), order.end(), 0);
      int64_t k = o.topK > 0 && o.topK < V ? o.topK : V;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return x[a] > x[b]; });
      double top = x[order[0]], sum = 0;
      std::vector<double> p(k);
      for (int64_t i = 0; i < k; ++i)
        sum += p[i] = std::exp((x[order[i]] - top) / o.temperature);
      if (o.topP < 1) {
        // The most likely tokens while those before them hold less than
        // top-p of the probability (at least one), as transformers keeps.
        double before = 0;
        int64_t keep = 0;
        while (keep < k && before < o.topP * sum)
          before += p[keep++];
        k = std::max<int64_t>(keep, 1);
        sum = 0;
        for (int64_t i = 0; i < k; ++i)
          sum += p[i];
      }
      double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
      int64_t i = 0;
      while (i + 1 < k && u >= p[i])
        u -= p[i++];
      next = order[i];
    }
    if (stops(next)) {
      if (sequence)
        sequence->push_back(next);
      // transformers' sequence ends with the eos id, and its decoded text
      // shows the id unless it is a special token: so does mlc's for the
      // eos ids of a generation_config.json.
      if (!o.eosIds.empty() && onToken)
        onToken(next);
      break;
    }
    tokens.push_back(next);
    generated.push_back(next);
    if (sequence)
      sequence->push_back(next);
    if (onToken)
      onToken(next);
  }
  return generated;
}

void generateText(Backend &backend, const TrainOptions &weights, const GenerateOptions &options,
                  const std::function<void(const std::string &)> &write) {
  GenerateOptions o = options;
  // --tokenizer-model names the file of HuggingFaceTokenizer (the type when
  // none is given), SentencePieceTokenizer or Llama2Tokenizer; with any other
  // type it would be ignored: refused.
  if (o.given.count("tokenizer-model")) {
    if (!o.given.count("tokenizer-type"))
      o.tokenizerType = "HuggingFaceTokenizer";
    else if (!readsTokenizerModel(o.tokenizerType))
      fail("--tokenizer-model is HuggingFaceTokenizer's, SentencePieceTokenizer's or "
           "Llama2Tokenizer's; --tokenizer-type is '" + o.tokenizerType + "'");
  }
  // A model directory brings its tokenizer and generation defaults.
  if (std::string dir = !weights.init.empty() && isDirectoryPath(weights.init)
                            ? weights.init
                            : o.modelDirectory;
      !dir.empty())
    applyModelDirectory(o, dir);
  if (!weights.init.empty()) {
    loadParameters(backend, weights.init);
    o.weights = "the weights in " + weights.init;
  } else {
    initializeParameters(backend, weights.seed);
    o.weights = "the weights initialized with --seed " + std::to_string(weights.seed);
  }
  std::unique_ptr<Tokenizer> tokenizer = makeTokenizer(o.tokenizerType, o.vocabFile, o.mergeFile);
  if (!o.outputIds.empty())
    checkWritableFile(o.outputIds, "--output-ids");
  TextStream text(*tokenizer);
  write(o.prompt);
  std::vector<int32_t> ids;
  generate(
      backend, *tokenizer, o,
      [&](int32_t id) {
        if (std::string piece = text.push(id); !piece.empty())
          write(piece);
      },
      &ids);
  write(text.finish());
  if (!o.outputIds.empty()) {
    std::string line;
    for (int32_t id : ids)
      line += (line.empty() ? "" : " ") + std::to_string(id);
    writeFileAtomically(o.outputIds, line + "\n");
  }
}

} // namespace mlc::rt
