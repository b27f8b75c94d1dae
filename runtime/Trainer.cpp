//===- Trainer.cpp - the training loop -------------------------------------===//

#include "runtime/Trainer.h"
#include "runtime/Error.h"
#include "runtime/BertDataset.h"
#include "runtime/GptDataset.h"
#include "runtime/Hash.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <random>

namespace mlc::rt {

namespace {

template <typename T> T *as(char *p) { return reinterpret_cast<T *>(p); }

uint64_t nameSeed(uint64_t seed, const std::string &name) {
  return std::stoull(contentHash(std::to_string(seed) + "/" + name), nullptr, 16);
}

/// The input_ids input of a model that --data can feed: one whose inputs are
/// input_ids [batch, seq] and labels (GPT-style; labels = input_ids).
const InputInfo *gptTokenInput(const Package &pkg) {
  const InputInfo *ids = nullptr;
  for (const InputInfo &in : pkg.inputs) {
    if (in.name == "input_ids")
      ids = &in;
    else if (in.name != "labels")
      fail("--data feeds input_ids and labels only; this model also needs '" + in.name +
           "' (use --batches)");
  }
  if (!ids || ids->shape.size() != 2)
    fail("--data needs a model with input_ids [batch, seq]");
  return ids;
}

/// A batch source: returns the tensor of `input` for 0-based step `t`.
using BatchFn = std::function<HostTensor(const InputInfo &input, int64_t t)>;

BatchFn batchesFromDirectory(const Package &pkg, const std::string &dir, int64_t steps) {
  auto files = std::make_shared<std::map<std::string, HostTensor>>();
  for (const InputInfo &in : pkg.inputs) {
    std::string path = dir + "/" + in.name + ".npy";
    HostTensor t = readNpy(path);
    std::vector<int64_t> inner(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
    if (t.shape.empty() || inner != in.shape)
      fail(path + ": shape " + shapeString(t.shape) + " is not [steps] + " +
           shapeString(in.shape));
    if (t.shape[0] < steps)
      fail(path + ": holds " + std::to_string(t.shape[0]) + " batches but " +
           std::to_string(steps) + " steps were asked for");
    (*files)[in.name] = std::move(t);
  }
  return [files](const InputInfo &in, int64_t t) {
    const HostTensor &all = files->at(in.name);
    HostTensor out;
    out.dtype = all.dtype;
    out.shape = in.shape;
    int64_t bytes = in.numel * dtypeSize(all.dtype);
    out.data.assign(all.data.begin() + t * bytes, all.data.begin() + (t + 1) * bytes);
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

} // namespace

void initializeParameters(CpuBackend &backend, uint64_t seed) {
  const Package &pkg = backend.package();
  for (const ParamInfo &p : pkg.params) {
    char *base = backend.params() + p.offset * backend.elementSize();
    std::mt19937_64 rng(nameSeed(seed, p.name));
    double std = 0, fill = 0;
    bool normal = false;
    if (p.init.rfind("normal:", 0) == 0) {
      normal = true;
      std = std::stod(p.init.substr(7));
    } else if (p.init == "ones") {
      fill = 1;
    } else if (p.init != "zeros") {
      fail(pkg.dir + ": parameter " + p.name + " has unknown init '" + p.init + "'");
    }
    std::normal_distribution<double> dist(0.0, std);
    for (int64_t i = 0; i < p.numel; ++i) {
      double x = normal ? dist(rng) : fill;
      if (backend.elementSize() == 4)
        as<float>(base)[i] = float(x);
      else
        as<double>(base)[i] = x;
    }
  }
}

void loadParameters(CpuBackend &backend, const std::string &path) {
  const Package &pkg = backend.package();
  auto tensors = readSafetensors(path);
  std::string problems;
  for (const ParamInfo &p : pkg.params) {
    auto it = tensors.find(p.name);
    if (it == tensors.end()) {
      problems += "\n  missing: " + p.name + " " + shapeString(p.shape);
      continue;
    }
    if (it->second.shape != p.shape)
      problems += "\n  mis-shaped: " + p.name + " is " + shapeString(it->second.shape) +
                  ", the model needs " + shapeString(p.shape);
  }
  for (auto &[name, t] : tensors)
    if (!pkg.param(name))
      problems += "\n  unexpected: " + name + " " + shapeString(t.shape);
  if (!problems.empty())
    fail(path + ": weights do not match the model:" + problems);
  for (const ParamInfo &p : pkg.params) {
    const HostTensor &t = tensors.at(p.name);
    char *base = backend.params() + p.offset * backend.elementSize();
    for (int64_t i = 0; i < p.numel; ++i) {
      double x = t.getDouble(i);
      if (backend.elementSize() == 4)
        as<float>(base)[i] = float(x);
      else
        as<double>(base)[i] = x;
    }
  }
}

void saveParameters(CpuBackend &backend, const std::string &path) {
  std::vector<std::pair<std::string, HostTensor>> out;
  for (const ParamInfo &p : backend.package().params) {
    HostTensor t;
    t.dtype = backend.package().dtype;
    t.shape = p.shape;
    const char *base = backend.params() + p.offset * backend.elementSize();
    t.data.assign(base, base + p.numel * backend.elementSize());
    out.push_back({p.name, std::move(t)});
  }
  writeSafetensors(path, out);
}

double learningRate(const TrainOptions &o, int64_t step) {
  if (o.warmup > 0 && step <= o.warmup)
    return o.lr * double(step) / double(o.warmup);
  if (o.schedule == "constant")
    return o.lr;
  // The first step after warmup runs at the peak; the decay reaches min-lr
  // one step after the last, so no step is wasted at the floor.
  double span = double(std::max<int64_t>(1, o.steps - o.warmup));
  double progress = std::min(1.0, double(step - o.warmup - 1) / span);
  return o.minLr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (o.lr - o.minLr);
}

double gradientNorm(CpuBackend &backend) {
  int64_t n = backend.package().paramCount;
  double sum = 0;
  if (backend.elementSize() == 4) {
    const float *g = as<float>(backend.grads());
#pragma omp parallel for reduction(+ : sum) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      sum += double(g[i]) * g[i];
  } else {
    const double *g = as<double>(backend.grads());
#pragma omp parallel for reduction(+ : sum) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      sum += g[i] * g[i];
  }
  return std::sqrt(sum);
}

/// --data names indexed datasets when it is a blend ("W1 P1 W2 P2": errors
/// in it are reported as such) or a PREFIX with PREFIX.idx beside it; any
/// other single path is a plain token file.
static bool isIndexedData(const std::string &spec) {
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
static BatchFn batchesFromIndexed(const Package &pkg, const TrainOptions &o, int part) {
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
/// labels [batch, seq]) from a WordPiece-tokenized indexed dataset.
static BatchFn batchesForBert(const Package &pkg, const TrainOptions &o, int part) {
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
  return [samples, cache, B, S, varlen](const InputInfo &in, int64_t t) {
    if (cache->first != t) {
      cache->second.clear();
      for (int64_t b = 0; b < B; ++b)
        cache->second.push_back(samples->sample(t * B + b));
      cache->first = t;
    }
    if (varlen) {
      // Only the real tokens of each sample, back to back.
      HostTensor out;
      out.dtype = in.name == "cu_seqlens" ? "i32" : "i64";
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
      out.shape = {int64_t(values.size())};
      out.data.resize(values.size() * dtypeSize(out.dtype));
      for (size_t i = 0; i < values.size(); ++i) {
        if (out.dtype == "i32")
          reinterpret_cast<int32_t *>(out.data.data())[i] = int32_t(values[i]);
        else
          reinterpret_cast<int64_t *>(out.data.data())[i] = values[i];
      }
      return out;
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

static bool isBert(const Package &pkg) {
  for (const InputInfo &in : pkg.inputs)
    if (in.name == "token_type_ids")
      return true;
  return false;
}

template <typename T>
static void adamwFlat(const std::vector<ParamInfo> &params, T *p, const T *g, T *m, T *v,
                      const TrainOptions &o, double lr, int64_t t, double gradScale) {
  const double b1 = o.beta1, b2 = o.beta2, eps = o.eps;
  const double bc1 = 1 - std::pow(b1, double(t)), bc2 = 1 - std::pow(b2, double(t));
  const double stepSize = lr / bc1, sqrtBc2 = std::sqrt(bc2);
  // One parallel region for every parameter: the slices are work-shared
  // loops without barriers between them, so the update is a single pass over
  // the flat buffers (torch's math: decay first, then the Adam step).
  // The element math runs in T (as torch's does), which keeps it vectorized
  // and memory-bound.
  const T tb1 = T(b1), tb2 = T(b2), ta1 = T(1 - b1), ta2 = T(1 - b2), tEps = T(eps),
          tStep = T(stepSize), tInvSqrtBc2 = T(1.0 / sqrtBc2), tScale = T(gradScale);
#pragma omp parallel
  for (const ParamInfo &q : params) {
    const T decay = T(1.0 - lr * (q.decay ? o.weightDecay : 0.0));
    T *__restrict pq = p + q.offset, *__restrict mq = m + q.offset,
                  *__restrict vq = v + q.offset;
    const T *__restrict gq = g + q.offset;
#pragma omp for simd schedule(static) nowait
    for (int64_t i = 0; i < q.numel; ++i) {
      T gi = gq[i] * tScale;
      T mi = tb1 * mq[i] + ta1 * gi;
      T vi = tb2 * vq[i] + ta2 * gi * gi;
      mq[i] = mi;
      vq[i] = vi;
      pq[i] = pq[i] * decay - tStep * mi / (std::sqrt(vi) * tInvSqrtBc2 + tEps);
    }
  }
}

void adamwUpdate(const std::vector<ParamInfo> &params, int64_t elementSize, char *p,
                 const char *g, char *m, char *v, const TrainOptions &o, double lr, int64_t t,
                 double gradScale) {
  if (elementSize == 4)
    adamwFlat(params, as<float>(p), reinterpret_cast<const float *>(g), as<float>(m),
              as<float>(v), o, lr, t, gradScale);
  else
    adamwFlat(params, as<double>(p), reinterpret_cast<const double *>(g), as<double>(m),
              as<double>(v), o, lr, t, gradScale);
}

std::vector<double> train(CpuBackend &backend, const TrainOptions &o) {
  const Package &pkg = backend.package();
  pkg.function("train_step");
  if (!o.init.empty())
    loadParameters(backend, o.init);
  else
    initializeParameters(backend, o.seed);
  BatchFn batch, validation;
  if (!o.batchesDir.empty()) {
    batch = batchesFromDirectory(pkg, o.batchesDir, o.steps);
  } else if (!o.data.empty() && isIndexedData(o.data)) {
    auto source = isBert(pkg) ? batchesForBert : batchesFromIndexed;
    batch = source(pkg, o, 0);
    if (o.evalInterval > 0)
      validation = source(pkg, o, 1);
  } else if (!o.data.empty()) {
    batch = batchesFromTokens(pkg, o.data, o.seed);
  } else {
    fail("no training data: give --data FILE or --batches DIR");
  }
  if (o.evalInterval > 0 && !validation)
    fail("--eval-interval needs --data with an indexed dataset (its validation split)");
  // Mean loss of the first eval-iters validation batches, without dropout.
  auto evaluate = [&]() {
    double sum = 0;
    for (int64_t i = 0; i < o.evalIters; ++i) {
      for (const InputInfo &in : pkg.inputs)
        backend.setInput(in.name, validation(in, i));
      backend.run("evaluate", 0);
      sum += backend.output("evaluate", "loss").getDouble(0);
    }
    return sum / double(std::max<int64_t>(1, o.evalIters));
  };

  int64_t tokensPerStep = 0;
  for (const InputInfo &in : pkg.inputs)
    if (in.name == "input_ids")
      tokensPerStep = in.numel;
  std::ofstream log;
  if (!o.logJson.empty()) {
    log.open(o.logJson, std::ios::trunc);
    if (!log)
      fail(o.logJson + ": cannot write the JSON log");
  }
  std::vector<char> m(pkg.paramCount * backend.elementSize(), 0), v = m;
  std::vector<double> losses;
  for (int64_t t = 1; t <= o.steps; ++t) {
    auto start = std::chrono::steady_clock::now();
    for (const InputInfo &in : pkg.inputs) {
      HostTensor tensor = batch(in, t - 1);
      if (in.name == "input_ids")
        tokensPerStep = tensor.numel(); // unpadded batches vary
      backend.setInput(in.name, tensor);
    }
    backend.run("train_step", t);
    double loss = backend.output("train_step", "loss").getDouble(0);
    double norm = gradientNorm(backend);
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      std::string kept;
      if (!o.save.empty()) {
        saveParameters(backend, o.save);
        kept = "; the parameters before this step are saved in " + o.save;
      }
      fail("the loss became " + std::to_string(loss) + " (gradient norm " +
           std::to_string(norm) + ") at step " + std::to_string(t) + kept);
    }
    double scale = 1.0;
    if (o.clipGrad > 0)
      scale = std::min(1.0, o.clipGrad / (norm + 1e-6));
    double lr = learningRate(o, t);
    adamwUpdate(pkg.params, backend.elementSize(), backend.params(), backend.grads(),
                m.data(), v.data(), o, lr, t, scale);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    losses.push_back(loss);
    double tps = tokensPerStep / (ms / 1000.0);
    if (log)
      log << std::setprecision(10) << "{\"step\": " << t << ", \"loss\": " << loss << ", \"lr\": " << lr
          << ", \"grad_norm\": " << norm << ", \"ms\": " << ms
          << ", \"tokens_per_s\": " << tps << "}\n";
    if (o.evalInterval > 0 && (t % o.evalInterval == 0 || t == o.steps)) {
      double val = evaluate();
      if (log)
        log << std::setprecision(10) << "{\"step\": " << t << ", \"val_loss\": " << val
            << "}\n";
      if (!o.quiet)
        fprintf(stderr, "eval  %5lld/%lld | validation loss %.4f (%lld batches)\n",
                (long long)t, (long long)o.steps, val, (long long)o.evalIters);
    }
    if (!o.quiet && (t % o.logEvery == 0 || t == 1 || t == o.steps))
      fprintf(stderr, "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %7.1f ms | %8.0f tok/s\n",
              (long long)t, (long long)o.steps, loss, lr, norm, ms, tps);
  }
  if (backend.profile)
    fprintf(stderr, "mlc profile: %lld steps, GEMMs %.1f ms/step, kernels %.1f ms/step\n",
            (long long)o.steps, 1e3 * backend.gemmSeconds / o.steps,
            1e3 * backend.kernelSeconds / o.steps);
  if (backend.profile) {
    std::vector<std::pair<double, std::string>> top;
    for (auto &[name, sec] : backend.secondsByKernel)
      top.push_back({sec, name});
    std::sort(top.rbegin(), top.rend());
    for (size_t i = 0; i < top.size() && i < 12; ++i)
      fprintf(stderr, "mlc profile:   %-8s %8.2f ms/step\n", top[i].second.c_str(),
              1e3 * top[i].first / o.steps);
  }
  if (!o.save.empty())
    saveParameters(backend, o.save);
  return losses;
}

} // namespace mlc::rt
