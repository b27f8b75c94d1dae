//===- BatchSources.cpp - where a training step's batches come from --------===//

#include "runtime/train/BatchSources.h"
#include "runtime/data/TokenizerRecord.h"
#include "contract/StepFunctions.h"
#include "support/Error.h"
#include "runtime/core/Hash.h"
#include "runtime/data/Balance.h"
#include "runtime/data/BertDataset.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/Tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>

namespace mlc::rt {

uint64_t nameSeed(uint64_t seed, const std::string &name) {
  return std::stoull(contentHash(std::to_string(seed) + "/" + name), nullptr, 16);
}

namespace {

/// The input_ids input of a model that --data can feed: one whose inputs are
/// input_ids [batch, seq] and labels (GPT-style; labels = input_ids), and
/// for packed documents position_ids and cu_seqlens.
const InputInfo *gptTokenInput(const Package &pkg) {
  const InputInfo *ids = nullptr;
  for (const InputInfo &in : pkg.inputs) {
    if (in.name == "input_ids")
      ids = &in;
    else if (in.name != "labels" && in.name != "position_ids" && in.name != "cu_seqlens")
      fail("--data feeds input_ids and labels (and position_ids, cu_seqlens of packed "
           "documents) only; this model also needs '" + in.name + "' (use --batches, or "
           "--bind " + in.name + "=ROLE)");
  }
  if (!ids || ids->shape.size() != 2)
    fail("--data needs a model with input_ids [batch, seq]");
  // Labels and positions are cut from the same samples as the ids.
  for (const InputInfo &in : pkg.inputs)
    if ((in.name == "labels" || in.name == "position_ids") && in.shape != ids->shape)
      fail(pkg.dir + "/plan.txt: input " + in.name + " is " + shapeString(in.shape) +
           ", not input_ids' " + shapeString(ids->shape) + ": --data fills both from the "
           "same [batch, seq] samples");
  return ids;
}

bool hasInput(const Package &pkg, const char *name) {
  for (const InputInfo &in : pkg.inputs)
    if (in.name == name)
      return true;
  return false;
}

/// An integer tensor of `dtype` (i32 or i64) holding `values`.
template <typename T>
HostTensor intTensor(const std::string &dtype, std::vector<int64_t> shape,
                     const std::vector<T> &values) {
  HostTensor out;
  out.dtype = dtype;
  out.shape = std::move(shape);
  out.data.resize(values.size() * dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == "i32")
      reinterpret_cast<int32_t *>(out.data.data())[i] = int32_t(values[i]);
    else
      reinterpret_cast<int64_t *>(out.data.data())[i] = int64_t(values[i]);
  }
  return out;
}

/// The end-of-document id of GPT data: --eod-token, else the tokenizer's
/// (<|endoftext|> of a GPT-2 vocab.json with --merge-file, else mlc's byte
/// tokenizer's 0, the data --sample-every decodes as bytes).
int64_t eodTokenOf(const TrainOptions &o, const std::string &why) {
  if (o.eodToken >= 0)
    return o.eodToken;
  if (o.mergeFile.empty() && !o.vocabFile.empty())
    fail(why + " needs the data's EOD id: --eod-token N, or the GPT-2 tokenizer's "
         "--vocab-file vocab.json with --merge-file merges.txt (" + o.vocabFile +
         " alone is no GPT tokenizer)");
  if (o.mergeFile.empty()) {
    // A dataset's .bin/.idx do not say which tokenizer wrote them: say which
    // id splits documents, so BPE data read without its tokenizer (where 0
    // is an ordinary token) is noticed.
    const int64_t eod = makeTokenizer("ByteTokenizer", "", "")->eod();
    std::fprintf(stderr,
                 "mlc: note: %s: documents end at token %lld (mlc's byte tokenizer's EOD); "
                 "data of another tokenizer needs --eod-token N or its --vocab-file and "
                 "--merge-file\n",
                 why.c_str(), (long long)eod);
    return eod;
  }
  std::unique_ptr<Tokenizer> t = makeTokenizer("GPT2BPETokenizer", o.vocabFile, o.mergeFile);
  if (!t->hasEod())
    fail(why + ": the tokenizer of --vocab-file " + o.vocabFile + " has no end-of-document "
         "token (<|endoftext|>); give its id with --eod-token N");
  return t->eod();
}

/// GPT samples as packed documents: `tokens` gives input_ids [B, S] for a
/// block; the other inputs follow from them and the EOD id, as Megatron-LM
/// builds them (findDocuments): cu_seqlens [B * S + 1] and position_ids
/// [B, S] when the package takes them (compiled with --reset-attention-mask,
/// --reset-position-ids), and labels = input_ids, ignored after each EOD
/// with --eod-mask-loss. Without any of these, `tokens` itself.
BatchFn withDocuments(const Package &pkg, const TrainOptions &o, BatchFn tokens) {
  const bool cu = hasInput(pkg, "cu_seqlens"), positions = hasInput(pkg, "position_ids");
  if (!cu && !positions && !o.eodMaskLoss)
    return tokens;
  const InputInfo ids = *gptTokenInput(pkg);
  const int64_t B = ids.shape[0], S = ids.shape[1];
  if (B * S >= INT32_MAX)
    fail("packed documents: a micro-batch of " + std::to_string(B * S) +
         " tokens does not fit cu_seqlens' int32 offsets");
  const int64_t eod = eodTokenOf(o, o.eodMaskLoss ? "--eod-mask-loss"
                                                  : "a package compiled with "
                                                    "--reset-attention-mask or "
                                                    "--reset-position-ids");
  const bool maskLoss = o.eodMaskLoss;
  // A block's inputs come from the same tokens: read them once.
  auto cache = std::make_shared<std::pair<int64_t, HostTensor>>(-1, HostTensor());
  return [tokens, ids, B, S, eod, maskLoss, cache](const InputInfo &in, int64_t k) {
    if (cache->first != k) {
      cache->second = tokens(ids, k);
      cache->first = k;
    }
    const HostTensor &t = cache->second;
    const int64_t *src = reinterpret_cast<const int64_t *>(t.data.data());
    if (in.name == "input_ids")
      return t;
    if (in.name == "labels") {
      HostTensor labels = t;
      int64_t *dst = reinterpret_cast<int64_t *>(labels.data.data());
      if (maskLoss) {
        maskLossAfterEod(src, dst, B, S, eod);
        // A sample's first label is no target of the causal loss (it pairs
        // the prediction at i with labels[i + 1]); ignoring it makes the
        // labels not ignored the loss's terms, which
        // --calculate-per-token-loss weighs the micro-batches by.
        for (int64_t b = 0; b < B; ++b)
          dst[b * S] = -100;
      }
      return labels;
    }
    DocumentBoundaries d = findDocuments(src, B, S, eod);
    if (in.name == "cu_seqlens")
      return intTensor("i32", {B * S + 1}, d.cuSeqlens);
    return intTensor("i64", {B, S}, d.positionIds);
  };
}


/// Batches from NAME.npy files of shape [steps, G, ...]: entry s is step s's
/// global batch of G rows, P = G / B micro-batches of the model's B. Block k
/// (see BatchFn) is entry k / P; within it, rank r takes rows [r G / R,
/// (r + 1) G / R) and micro-batch j of those, so the same files train the
/// same way on any number of ranks and micro-batches. An input without a
/// leading batch dimension (dynamic, packed) takes [steps] + its shape: one
/// micro-batch per step. Sets `parts` to P.
BatchFn batchesFromDirectory(const Package &pkg, const std::string &dir, int64_t steps,
                             int ranks, int64_t &parts) {
  auto files = std::make_shared<std::map<std::string, HostTensor>>();
  parts = 0;
  for (const InputInfo &in : pkg.inputs) {
    std::string path = dir + "/" + in.name + ".npy";
    HostTensor t = readNpy(path);
    std::vector<int64_t> inner(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
    int64_t mine = 0; // micro-batches in one entry
    if (!t.shape.empty() && inner == in.shape)
      mine = 1;
    else if (!t.shape.empty() && !in.dynamic() && !in.shape.empty() && in.shape[0] > 0 &&
             inner.size() == in.shape.size() && inner[0] % in.shape[0] == 0 &&
             std::equal(inner.begin() + 1, inner.end(), in.shape.begin() + 1))
      mine = inner[0] / in.shape[0];
    if (mine == 0 || (parts > 0 && mine != parts)) {
      std::vector<int64_t> want = in.shape;
      if (parts > 0 && !want.empty())
        want[0] *= parts;
      fail(path + ": shape " + shapeString(t.shape) + " is not [steps] + " +
           shapeString(want) + (parts > 0 ? " (the global batch of the other inputs)"
                                          : " or a multiple of its rows (a global batch)"));
    }
    parts = mine;
    if (t.shape[0] < steps)
      fail(path + ": holds " + std::to_string(t.shape[0]) + " batches but " +
           std::to_string(steps) + " steps were asked for");
    (*files)[in.name] = std::move(t);
  }
  const int64_t P = parts, M = std::max<int64_t>(1, parts / ranks);
  return [files, dir, P, M, ranks](const InputInfo &in, int64_t k) {
    const HostTensor &all = files->at(in.name);
    const int64_t entry = k / P, part = k % P;
    if (k < 0 || entry >= all.shape[0])
      fail(dir + "/" + in.name + ".npy: holds " + std::to_string(all.shape[0]) +
           " batches; batch " + std::to_string(entry + 1) + " was asked for");
    const int64_t rows = (part % ranks) * M + part / ranks; // rank, then micro-batch
    HostTensor out;
    out.dtype = all.dtype;
    out.shape = in.shape;
    int64_t bytes = in.numel * dtypeSize(all.dtype);
    auto from = all.data.begin() + (entry * P + rows) * bytes;
    out.data.assign(from, from + bytes);
    return out;
  };
}

/// GPT-style samples from a token file: `.bin` holds uint16 tokens, any other
/// file is read as bytes (a byte-level vocabulary of 256). The tokens are cut
/// into samples of seq-len tokens; each epoch visits them in a seeded random
/// order, so step t's batch depends only on (seed, t) and a resumed run sees
/// the batches it would have seen.
BatchFn batchesFromTokens(const Package &pkg, const std::string &path, uint64_t seed) {
  auto tokens = std::make_shared<std::vector<uint16_t>>();
  std::string bytes = readFile(path);
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0) {
    if (bytes.size() % 2)
      fail(path + ": a .bin token file must hold uint16 tokens (odd byte count)");
    tokens->resize(bytes.size() / 2);
    std::memcpy(tokens->data(), bytes.data(), bytes.size());
  } else {
    tokens->assign(bytes.begin(), bytes.end());
    for (auto &t : *tokens)
      t &= 0xFF;
  }
  const InputInfo *ids = gptTokenInput(pkg);
  const int64_t S = ids->shape[1];
  const int64_t samples = int64_t(tokens->size()) / S;
  if (samples < 1)
    fail(path + ": holds " + std::to_string(tokens->size()) + " tokens, fewer than one " +
         "sample of " + std::to_string(S));
  // One permutation per epoch, computed when first needed.
  auto orders = std::make_shared<std::map<int64_t, std::vector<int64_t>>>();
  return [tokens, orders, seed, S, samples](const InputInfo &in, int64_t t) {
    HostTensor out;
    out.dtype = "i64";
    out.shape = in.shape;
    out.data.resize(in.numel * 8);
    int64_t *dst = reinterpret_cast<int64_t *>(out.data.data());
    const int64_t B = in.shape[0];
    for (int64_t b = 0; b < B; ++b) {
      int64_t k = t * B + b, epoch = k / samples;
      auto &order = (*orders)[epoch];
      if (order.empty()) {
        order.resize(samples);
        for (int64_t i = 0; i < samples; ++i)
          order[i] = i;
        std::mt19937_64 rng(nameSeed(seed, "epoch/" + std::to_string(epoch)));
        std::shuffle(order.begin(), order.end(), rng);
      }
      const uint16_t *src = tokens->data() + order[k % samples] * S;
      for (int64_t s = 0; s < S; ++s)
        dst[b * S + s] = src[s];
    }
    return out;
  };
}

/// --data names indexed datasets when it is a blend ("W1 P1 W2 P2": errors
/// in it are reported as such) or a PREFIX with PREFIX.idx beside it; any
/// other single path is a plain token file.
bool isIndexedData(const std::string &spec) {
  if (spec.find_first_of(" \t") != std::string::npos)
    return true;
  FILE *f = std::fopen((spec + ".idx").c_str(), "rb");
  if (!f)
    return false;
  std::fclose(f);
  return true;
}

/// Batches of GPT samples (input_ids = labels) from indexed datasets; step t
/// takes samples t*B .. t*B+B-1 of the split.
BatchFn batchesFromIndexed(const Package &pkg, const TrainOptions &o, int part) {
  const InputInfo *ids = gptTokenInput(pkg);
  auto samples = std::make_shared<GptSamples>(parseBlend(o.data), o.split, part,
                                              ids->shape[1], o.seed);
  return [samples](const InputInfo &in, int64_t t) {
    HostTensor out;
    out.dtype = "i64";
    out.shape = in.shape;
    out.data.resize(in.numel * 8);
    int64_t *dst = reinterpret_cast<int64_t *>(out.data.data());
    for (int64_t b = 0; b < in.shape[0]; ++b)
      samples->sample(t * in.shape[0] + b, dst + b * in.shape[1]);
    return out;
  };
}

/// Masked-LM batches for BERT (input_ids, token_type_ids, attention_mask,
/// labels [batch, seq]) from a WordPiece-tokenized indexed dataset. Unpadded
/// (varlen) over R ranks: blocks k of all ranks with the same k / R = w share
/// the window of samples w R B .. (w + 1) R B - 1, the samples one process
/// with R B sequences would take; every rank deals it with --balance (at
/// most B sequences each) and keeps its share.
BatchFn batchesForBert(const Package &pkg, const TrainOptions &o, int part,
                       std::shared_ptr<double> imbalance) {
  int64_t B = 0, S = 0;
  bool varlen = false;
  for (const InputInfo &in : pkg.inputs)
    varlen |= in.name == "cu_seqlens";
  for (const InputInfo &in : pkg.inputs) {
    if (varlen) {
      // Packed: at most B sequences (cu_seqlens has B + 1 entries) and the
      // token capacity B * S.
      if (in.name == "cu_seqlens") {
        B = in.shape[0] - 1;
        S = pkg.tokenCapacity / B;
      } else if (in.name != "input_ids" && in.name != "token_type_ids" &&
                 in.name != "position_ids" && in.name != "labels") {
        fail("unpadded BERT data feeds input_ids, token_type_ids, position_ids, labels and "
             "cu_seqlens; the model also needs '" + in.name + "'");
      }
      continue;
    }
    if (in.name != "input_ids" && in.name != "token_type_ids" &&
        in.name != "attention_mask" && in.name != "labels")
      fail("BERT data feeds input_ids, token_type_ids, attention_mask and labels; the model "
           "also needs '" + in.name + "'");
    if (in.shape.size() != 2)
      fail("BERT data needs [batch, seq] inputs");
    B = in.shape[0];
    S = in.shape[1];
  }
  if (o.vocabFile.empty())
    fail("BERT training on --data needs --vocab-file (the WordPiece vocab.txt the dataset "
         "was tokenized with) for its [CLS], [SEP], [MASK] and [PAD] ids");
  if (parseBlend(o.data).size() != 1)
    fail("BERT data takes one dataset PREFIX, not a blend");
  auto samples = std::make_shared<BertSamples>(parseBlend(o.data)[0].second, o.split, part, S,
                                               BertSpecialTokens::fromVocab(o.vocabFile),
                                               o.seed);
  // The four inputs of a step come from the same samples: build them once.
  auto cache = std::make_shared<std::pair<int64_t, std::vector<BertSample>>>();
  cache->first = -1;
  const int R = varlen ? o.ranks : 1, rank = varlen ? o.rank : 0;
  const BalancePolicy policy = parseBalancePolicy(o.balance);
  return [samples, cache, B, S, varlen, R, rank, policy,
          imbalance](const InputInfo &in, int64_t k) {
    const int64_t t = R == 1 ? k : k / R;
    if (cache->first != t) {
      cache->second.clear();
      if (R == 1) {
        for (int64_t b = 0; b < B; ++b)
          cache->second.push_back(samples->sample(t * B + b));
      } else {
        std::vector<BertSample> window;
        std::vector<int64_t> lengths;
        for (int64_t b = 0; b < R * B; ++b) {
          window.push_back(samples->sample(t * R * B + b));
          lengths.push_back(window.back().length);
        }
        auto deal = dealWindow(lengths, R, policy, B);
        double total = 0, most = 0;
        for (const auto &share : deal) {
          double tokens = 0;
          for (int64_t i : share)
            tokens += double(lengths[i]);
          total += tokens;
          most = std::max(most, tokens);
        }
        if (imbalance)
          *imbalance = total > 0 ? most / (total / R) : 1.0;
        for (int64_t i : deal[rank])
          cache->second.push_back(window[i]);
      }
      cache->first = t;
    }
    if (varlen) {
      // Only the real tokens of each sample, back to back.
      std::vector<int64_t> values;
      int64_t offset = 0;
      if (in.name == "cu_seqlens")
        values.push_back(0);
      for (const BertSample &s : cache->second) {
        for (int64_t i = 0; i < s.length; ++i) {
          if (in.name == "input_ids")
            values.push_back(s.inputIds[i]);
          else if (in.name == "token_type_ids")
            values.push_back(s.tokenTypeIds[i]);
          else if (in.name == "position_ids")
            values.push_back(i);
          else if (in.name == "labels")
            values.push_back(s.labels[i]);
        }
        offset += s.length;
        if (in.name == "cu_seqlens")
          values.push_back(offset);
      }
      return intTensor(in.name == "cu_seqlens" ? "i32" : "i64", {int64_t(values.size())},
                       values);
    }
    HostTensor out;
    out.dtype = "i64";
    out.shape = in.shape;
    out.data.resize(in.numel * 8);
    int64_t *dst = reinterpret_cast<int64_t *>(out.data.data());
    for (int64_t b = 0; b < B; ++b) {
      const BertSample &s = cache->second[b];
      const std::vector<int64_t> &src = in.name == "input_ids"        ? s.inputIds
                                        : in.name == "token_type_ids" ? s.tokenTypeIds
                                        : in.name == "attention_mask" ? s.attentionMask
                                                                      : s.labels;
      std::copy(src.begin(), src.end(), dst + b * S);
    }
    return out;
  };
}

/// Sequences per micro-batch: input_ids' leading dimension, or for packed
/// (unpadded) batches the sequence count cu_seqlens allows; 0 when the model
/// has no input_ids [batch, ...].
int64_t microBatchOf(const Package &pkg) {
  // Packed documents: input_ids [B, S] beside cu_seqlens [B * S + 1].
  for (const InputInfo &in : pkg.inputs)
    if (in.name == "input_ids" && in.shape.size() == 2 && in.shape[0] > 0)
      return in.shape[0];
  for (const InputInfo &in : pkg.inputs)
    if (in.name == "cu_seqlens")
      return in.shape[0] - 1;
  for (const InputInfo &in : pkg.inputs)
    if (in.name == "input_ids" && !in.shape.empty() && in.shape[0] > 0)
      return in.shape[0];
  return 0;
}

bool isBert(const Package &pkg) {
  for (const InputInfo &in : pkg.inputs)
    if (in.name == "token_type_ids")
      return true;
  return false;
}

} // namespace

BatchLayout batchLayout(const Package &pkg, const TrainOptions &o, const BatchSources &sources) {
  BatchLayout l;
  l.sequences = microBatchOf(pkg);
  const std::string R = std::to_string(o.ranks), B = std::to_string(l.sequences);
  // Micro-batches of the whole step, over all ranks.
  int64_t parts = o.ranks;
  if (sources.batchesPerStep > 0) {
    parts = sources.batchesPerStep;
    if (o.globalBatch > 0 && o.globalBatch != parts * l.sequences)
      fail("--global-batch " + std::to_string(o.globalBatch) + " disagrees with --batches " +
           o.batchesDir + ", whose entries hold " + std::to_string(parts * l.sequences) +
           " sequences (a step's global batch)");
    if (parts % o.ranks != 0)
      fail("--batches " + o.batchesDir + ": a step's " + std::to_string(parts * l.sequences) +
           " sequences (" + std::to_string(parts) + " micro-batches of " + B +
           ") do not split evenly over " + R + " ranks");
  } else if (o.globalBatch > 0) {
    if (l.sequences == 0)
      fail("--global-batch needs a model with input_ids [batch, ...]");
    if (o.globalBatch % (l.sequences * o.ranks) != 0)
      fail("--global-batch " + std::to_string(o.globalBatch) + " is not a multiple of the "
           "micro-batch (" + B + " sequences) times the ranks (" + R + ")");
    parts = o.globalBatch / l.sequences;
  }
  l.micro = parts / o.ranks;
  l.global = parts * l.sequences;
  return l;
}

/// The model's inputs under the --data roles that --bind gives them (a model
/// input not named is its own role).
std::map<std::string, std::string> parseBind(const Package &pkg, const std::string &spec) {
  static const std::map<std::string, std::string> roles = {
      {"tokens", "input_ids"},           {"input_ids", "input_ids"},
      {"labels", "labels"},              {"token_type_ids", "token_type_ids"},
      {"attention_mask", "attention_mask"}, {"position_ids", "position_ids"},
      {"cu_seqlens", "cu_seqlens"}};
  std::map<std::string, std::string> roleOf;
  for (const InputInfo &in : pkg.inputs)
    roleOf[in.name] = in.name;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty())
      continue;
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq), role = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || !roleOf.count(name)) {
      std::string names;
      for (const InputInfo &in : pkg.inputs)
        names += (names.empty() ? "" : ", ") + in.name;
      fail("--bind '" + item + "': expected INPUT=ROLE with INPUT one of the model's inputs (" +
           names + ")");
    }
    auto r = roles.find(role);
    if (r == roles.end())
      fail("--bind '" + item + "': unknown role '" + role +
           "' (tokens, input_ids, labels, token_type_ids, attention_mask, position_ids, "
           "cu_seqlens)");
    roleOf[name] = r->second;
  }
  return roleOf;
}

/// --eod-token N given: an id the data can hold and the model can embed.
/// An id no token of the data is, never splits a document or masks a label:
/// --reset-attention-mask, --reset-position-ids and --eod-mask-loss would
/// silently do nothing. The data's vocabulary is known for a plain file (read
/// as bytes: 256 ids) and for the GPT-2 tokenizer of --vocab-file and
/// --merge-file; the model's from its logits.
void checkEodToken(const Package &pkg, const TrainOptions &o) {
  if (o.eodToken < 0)
    return;
  const std::string eod = "--eod-token " + std::to_string(o.eodToken);
  if (!o.data.empty() && !isIndexedData(o.data)) {
    const int64_t bytes = makeTokenizer("ByteTokenizer", "", "")->vocabSize();
    if (o.eodToken >= bytes)
      fail(eod + " is no token of --data " + o.data + ", which is read as bytes (a vocabulary "
           "of " + std::to_string(bytes) + " ids, 0.." + std::to_string(bytes - 1) + ")");
  } else if (!o.vocabFile.empty() && !o.mergeFile.empty()) {
    const int64_t size = makeTokenizer("GPT2BPETokenizer", o.vocabFile, o.mergeFile)->vocabSize();
    if (o.eodToken >= size)
      fail(eod + " is outside the vocabulary of --vocab-file " + o.vocabFile + " (" +
           std::to_string(size) + " ids, 0.." + std::to_string(size - 1) + ")");
  }
  auto fn = pkg.functions.find(kForwardFn);
  if (fn == pkg.functions.end())
    return;
  for (const FunctionPlan::Output &out : fn->second.outputs)
    if (out.name == "logits" && !out.shape.empty() && o.eodToken >= out.shape.back())
      fail(eod + " is outside the model's vocabulary of " + std::to_string(out.shape.back()) +
           " tokens (ids 0.." + std::to_string(out.shape.back() - 1) + ")");
}

/// The datasets of --data against the model's vocabulary (its logits' last
/// dimension), through the record of the tokenizer that `mlc preprocess`
/// wrote beside each (TokenizerRecord.h).
void checkDataFitsModel(const Package &pkg, const TrainOptions &o) {
  auto fn = pkg.functions.find(kForwardFn);
  if (fn == pkg.functions.end())
    return;
  for (const FunctionPlan::Output &out : fn->second.outputs)
    if (out.name == "logits" && !out.shape.empty()) {
      std::vector<std::string> prefixes;
      for (auto &[weight, prefix] : parseBlend(o.data))
        prefixes.push_back(prefix);
      checkDatasetsFitModel(prefixes, out.shape.back(),
                            "its logits' last dimension" +
                                (o.init.empty() ? std::string() : ", --init " + o.init));
    }
}

std::unique_ptr<Tokenizer> datasetTokenizer(const TrainOptions &o) {
  if (o.data.empty() || !isIndexedData(o.data))
    return nullptr;
  std::optional<TokenizerRecord> record = readTokenizerRecord(parseBlend(o.data).front().second);
  return record ? loadRecordedTokenizer(*record) : nullptr;
}

BatchSources openBatchSources(const Package &pkg, const TrainOptions &o) {
  checkEodToken(pkg, o);
  if (!o.bind.empty()) {
    if (o.data.empty())
      fail("--bind maps --data fields to model inputs; --batches files are named by input");
    // The sources see the inputs under their roles; their batches go back
    // to the model's names.
    std::map<std::string, std::string> roleOf = parseBind(pkg, o.bind);
    Package renamed;
    renamed.dir = pkg.dir;
    renamed.tokenCapacity = pkg.tokenCapacity;
    renamed.inputs = pkg.inputs;
    for (InputInfo &in : renamed.inputs)
      in.name = roleOf.at(in.name);
    TrainOptions plain = o;
    plain.bind.clear();
    BatchSources inner = openBatchSources(renamed, plain);
    auto wrap = [roleOf](BatchFn fn) -> BatchFn {
      if (!fn)
        return fn;
      return [fn, roleOf](const InputInfo &in, int64_t t) {
        InputInfo role = in;
        role.name = roleOf.at(in.name);
        return fn(role, t);
      };
    };
    inner.train = wrap(inner.train);
    inner.validation = wrap(inner.validation);
    inner.test = wrap(inner.test);
    return inner;
  }
  // BERT's data flags mean nothing to a GPT-style model's samples: refused,
  // not ignored. Its tokenizer is GPT-2 BPE's vocab.json with merges.txt (a
  // vocabulary alone is BERT's WordPiece vocab.txt), and its packed samples
  // are dealt to the ranks in order, never balanced.
  if (!isBert(pkg)) {
    if (!o.vocabFile.empty() && o.mergeFile.empty())
      fail("--vocab-file " + o.vocabFile + " without --merge-file: " + pkg.dir +
           " is a GPT-style model, whose data's tokenizer is GPT-2 BPE (vocab.json with "
           "--merge-file merges.txt); --vocab-file alone is BERT data's WordPiece vocab.txt");
    if (o.balance != TrainOptions().balance)
      fail("--balance " + o.balance + " deals unpadded BERT samples to the ranks; " +
           pkg.dir + " is a GPT-style model, whose samples are dealt in order");
  }
  BatchSources s;
  if (o.eodMaskLoss && (isBert(pkg) || o.data.empty()))
    fail("--eod-mask-loss masks the labels of GPT samples from --data" +
         std::string(isBert(pkg) ? "; BERT's masked-LM labels have no EOD" : ""));
  if (!o.batchesDir.empty()) {
    s.train = batchesFromDirectory(pkg, o.batchesDir, o.steps, o.ranks, s.batchesPerStep);
  } else if (!o.data.empty() && isIndexedData(o.data)) {
    checkDataFitsModel(pkg, o);
    auto source = [&](int part) {
      return isBert(pkg) ? batchesForBert(pkg, o, part, part == 0 ? s.imbalance : nullptr)
                         : withDocuments(pkg, o, batchesFromIndexed(pkg, o, part));
    };
    s.train = source(0);
    if (o.evalInterval > 0) {
      s.validation = source(1);
      // The test split is evaluated at the end when the split gives it
      // documents enough for a sample (a small dataset may round it to none).
      if (parseSplit(o.split)[2] > 0) {
        try {
          s.test = source(2);
        } catch (const Error &) {
        }
      }
    }
  } else if (!o.data.empty()) {
    s.train = withDocuments(pkg, o, batchesFromTokens(pkg, o.data, o.seed));
  } else {
    fail("no training data: give --data FILE or --batches DIR");
  }
  if (o.evalInterval > 0 && !s.validation)
    fail("--eval-interval needs --data with an indexed dataset (its validation split)");
  return s;
}

} // namespace mlc::rt
