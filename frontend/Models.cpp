//===- Models.cpp - builtin GPT-2 and BERT graphs, model configs -----------===//
//
// The graphs follow transformers' GPT2LMHeadModel and BertForMaskedLM op for
// op (training mode, so dropout is live when its probability is non-zero).
// Configs of every builtin family are parsed here; Llama's graph is built in
// Llama.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"
#include "frontend/GraphBuilder.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcLosses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstdio>
#include <limits>

using namespace mlir;

namespace mlc {

//===----------------------------------------------------------------------===//
// Configs and presets
//===----------------------------------------------------------------------===//

using namespace detail;

static const std::map<std::string, Preset> &gpt2Presets() {
  static const Preset base = {{"vocab_size", 50257}, {"n_positions", 1024},
                              {"n_embd", 768},       {"n_layer", 12},
                              {"n_head", 12},        {"resid_pdrop", 0.1},
                              {"embd_pdrop", 0.1},   {"attn_pdrop", 0.1},
                              {"layer_norm_epsilon", 1e-5}};
  static const std::map<std::string, Preset> presets = [] {
    std::map<std::string, Preset> p;
    p["small"] = base;
    p["medium"] = base;
    p["medium"]["n_embd"] = 1024;
    p["medium"]["n_layer"] = 24;
    p["medium"]["n_head"] = 16;
    // Small enough to train in seconds on a laptop core; byte-level vocabulary.
    p["tiny"] = base;
    p["tiny"]["vocab_size"] = 256;
    p["tiny"]["n_positions"] = 256;
    p["tiny"]["n_embd"] = 128;
    p["tiny"]["n_layer"] = 2;
    p["tiny"]["n_head"] = 4;
    return p;
  }();
  return presets;
}

static const std::map<std::string, Preset> &bertPresets() {
  static const Preset base = {{"vocab_size", 30522},
                              {"hidden_size", 768},
                              {"num_hidden_layers", 12},
                              {"num_attention_heads", 12},
                              {"intermediate_size", 3072},
                              {"max_position_embeddings", 512},
                              {"type_vocab_size", 2},
                              {"hidden_dropout_prob", 0.1},
                              {"attention_probs_dropout_prob", 0.1},
                              {"layer_norm_eps", 1e-12}};
  static const std::map<std::string, Preset> presets = [] {
    std::map<std::string, Preset> p;
    p["base"] = base;
    p["large"] = base;
    p["large"]["hidden_size"] = 1024;
    p["large"]["num_hidden_layers"] = 24;
    p["large"]["num_attention_heads"] = 16;
    p["large"]["intermediate_size"] = 4096;
    p["tiny"] = base;
    p["tiny"]["vocab_size"] = 256;
    p["tiny"]["hidden_size"] = 128;
    p["tiny"]["num_hidden_layers"] = 2;
    p["tiny"]["num_attention_heads"] = 4;
    p["tiny"]["intermediate_size"] = 512;
    p["tiny"]["max_position_embeddings"] = 256;
    return p;
  }();
  return presets;
}

std::string detail::formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string ModelConfig::describe() const {
  std::string s;
  for (auto &[key, value] : values) {
    if (!s.empty())
      s += ", ";
    s += key + "=" + formatNumber(value);
  }
  return s;
}

/// Reads an HF config.json into `config.values`: the family's keys from the
/// file, HF's defaults (the config class's) for those it leaves out, and an
/// error for what the builder does not model.
static llvm::Error readHFConfig(llvm::StringRef path, ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + msg);
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return error("cannot read it (" + buffer.getError().message() + ")");
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return error("not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return error("not an HF config (a JSON object)");
  const std::string &family = config.family;
  std::string modelType = root->getString("model_type").value_or(family).str();
  std::vector<std::string> accepted =
      family == "llama" ? std::vector<std::string>{"llama", "qwen2"}
                        : std::vector<std::string>{family};
  if (!llvm::is_contained(accepted, modelType))
    return error("model_type '" + modelType + "' is not a " + family + " config (mlc " +
                 family + " reads model_type " + llvm::join(accepted, " or ") + ")");
  // HF's defaults for keys the file leaves out: the config class's own.
  if (family == "gpt2")
    config.values = gpt2Presets().at("small");
  else if (family == "bert")
    config.values = bertPresets().at("base");
  else
    config.values = llamaHFDefaults(modelType);
  auto unsupported = [&](llvm::StringRef key, llvm::StringRef ok) -> llvm::Error {
    const llvm::json::Value *v = root->get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      return llvm::Error::success();
    std::string text;
    llvm::raw_string_ostream os(text);
    os << *v;
    if (!ok.empty() && v->getAsString() && *v->getAsString() == ok)
      return llvm::Error::success();
    std::string hint = !ok.empty() ? " (only " + ok.str() + ")"
                       : key == "rope_scaling"
                           ? " (the presets tinyllama-1.1b, llama-3.2-1b, qwen2-0.5b give "
                             "real shapes)"
                           : "";
    return error(key + " = " + text + " is not supported by the builtin " + family + hint);
  };
  // What the builders do not model is refused, not ignored.
  if (family == "gpt2") {
    if (auto err = unsupported("activation_function", "gelu_new"))
      return std::move(err);
  } else if (family == "bert") {
    if (auto err = unsupported("hidden_act", "gelu"))
      return std::move(err);
    if (auto err = unsupported("position_embedding_type", "absolute"))
      return std::move(err);
  } else {
    if (auto err = unsupported("hidden_act", "silu"))
      return std::move(err);
    if (auto err = unsupported("rope_scaling", ""))
      return std::move(err);
    if (auto sliding = root->getBoolean("use_sliding_window"); sliding && *sliding)
      return error("use_sliding_window = true is not supported by the builtin llama");
    if (auto drop = root->getNumber("attention_dropout"); drop && *drop != 0)
      return error("attention_dropout is not supported by the builtin llama (0 only)");
  }
  for (auto &[key, value] : config.values) {
    const llvm::json::Value *v = root->get(key);
    if (!v || v->kind() == llvm::json::Value::Null)
      continue;
    if (auto b = v->getAsBoolean())
      value = *b ? 1 : 0;
    else if (auto n = v->getAsNumber())
      value = *n;
    else
      return error("'" + key + "' must be a number or a boolean");
  }
  if (family == "llama") {
    // transformers 5's rope_parameters hold the rotary base.
    if (const llvm::json::Object *rope = root->getObject("rope_parameters")) {
      auto type = rope->getString("rope_type");
      if (type && *type != "default")
        return error("rope_parameters.rope_type '" + *type +
                     "' is not supported by the builtin llama (only default)");
      if (auto theta = rope->getNumber("rope_theta"))
        config.values["rope_theta"] = *theta;
    }
    // HF: num_key_value_heads None means one per query head; head_dim None,
    // hidden_size / num_attention_heads.
    const llvm::json::Value *kv = root->get("num_key_value_heads");
    if (!kv || kv->kind() == llvm::json::Value::Null)
      config.values["num_key_value_heads"] = config.values["num_attention_heads"];
    const llvm::json::Value *hd = root->get("head_dim");
    if (!hd || hd->kind() == llvm::json::Value::Null)
      config.values["head_dim"] = 0;
  }
  return llvm::Error::success();
}

llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef family,
                                             llvm::StringRef spec) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  const std::map<std::string, Preset> *presets;
  std::string defaultPreset;
  if (family == "gpt2") {
    presets = &gpt2Presets();
    defaultPreset = "small";
  } else if (family == "bert") {
    presets = &bertPresets();
    defaultPreset = "base";
  } else if (family == "llama") {
    presets = &llamaPresets();
    defaultPreset = "tiny";
  } else {
    return error("unknown model '" + family + "' (expected gpt2, bert or llama)");
  }
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ',', -1, /*KeepEmpty=*/false);
  ModelConfig config;
  config.family = family.str();
  size_t first = 0;
  config.preset = defaultPreset;
  if (!parts.empty() && !parts[0].contains('=')) {
    config.preset = parts[0].trim().str();
    first = 1;
  }
  auto preset = presets->find(config.preset);
  if (llvm::StringRef(config.preset).ends_with(".json")) {
    if (auto err = readHFConfig(config.preset, config))
      return std::move(err);
  } else if (preset == presets->end()) {
    std::string names;
    for (auto &[name, _] : *presets)
      names += (names.empty() ? "" : ", ") + name;
    return error("unknown " + family + " preset '" + config.preset +
                 "' (presets: " + names + ", or an HF config.json)");
  } else {
    config.values = preset->second;
  }
  for (llvm::StringRef part : llvm::ArrayRef(parts).drop_front(first)) {
    auto [key, value] = part.split('=');
    key = key.trim();
    value = value.trim();
    if (!config.values.count(key.str())) {
      std::string keys;
      for (auto &[name, _] : config.values)
        keys += (keys.empty() ? "" : ", ") + name;
      return error("unknown " + family + " config key '" + key + "' (keys: " +
                   keys + ")");
    }
    double number;
    if (value.empty() || value.getAsDouble(number))
      return error("config key '" + key + "' needs a number, got '" + value + "'");
    config.values[key.str()] = number;
  }
  if (family == "llama") {
    if (auto err = checkLlamaConfig(config))
      return std::move(err);
    return config;
  }
  // Sizes must be positive integers and heads must divide the hidden size.
  for (auto &[key, value] : config.values) {
    bool isProbability = llvm::StringRef(key).contains("drop");
    bool isEps = llvm::StringRef(key).contains("eps");
    if (isProbability && !(value >= 0 && value < 1))
      return error("config key '" + key + "' must be in [0, 1)");
    if (isEps && !(value > 0))
      return error("config key '" + key + "' must be positive");
    if (!isProbability && !isEps && (value < 1 || value != std::floor(value)))
      return error("config key '" + key + "' must be a positive integer");
    // Sizes beyond these are not models but typos (and would overflow the
    // element counts or build a graph of billions of ops).
    bool layers = key == "n_layer" || key == "num_hidden_layers";
    double limit = layers ? 10000 : 1e9;
    if (!isProbability && !isEps && value > limit)
      return error(llvm::formatv("config key '{0}' must be at most {1}, got {2:f0}", key,
                                 int64_t(limit), value)
                       .str());
  }
  const char *hidden = family == "gpt2" ? "n_embd" : "hidden_size";
  const char *heads = family == "gpt2" ? "n_head" : "num_attention_heads";
  if (config.get(hidden) % config.get(heads) != 0)
    return error(llvm::formatv("{0}={1} is not divisible by {2}={3}", hidden,
                               config.get(hidden), heads, config.get(heads))
                     .str());
  return config;
}

//===----------------------------------------------------------------------===//
// Graph construction
//===----------------------------------------------------------------------===//

namespace {

/// Mean cross-entropy of flattened logits [N, V] against labels [N].
Value crossEntropy(GraphBuilder &g, Value logits, Value labels) {
  return g.b.create<CrossEntropyOp>(g.loc, logits, labels,
                                    g.b.getI64IntegerAttr(-100));
}

OwningOpRef<ModuleOp> buildGPT2(MLIRContext &ctx, const ModelConfig &c,
                                const BuildOptions &o, Type dtype) {
  GraphBuilder g(ctx, dtype);
  OpBuilder &b = g.b;
  Location loc = g.loc;
  const int64_t V = c.get("vocab_size"), P = c.get("n_positions"),
                E = c.get("n_embd"), L = c.get("n_layer"), H = c.get("n_head");
  const int64_t B = o.microBatch, S = o.seqLen, D = E / H;
  const double eps = c.getFloat("layer_norm_epsilon");
  Type i64 = b.getI64Type();

  Value wte = g.param("transformer.wte.weight", {V, E});
  Value wpe = g.param("transformer.wpe.weight", {P, E});
  // GPT-2 scales the init of residual projections by 1/sqrt(2 * n_layer).
  std::string residualInit =
      "normal:" + formatNumber(0.02 / std::sqrt(2.0 * L));
  struct Layer {
    Value ln1w, ln1b, attnW, attnB, projW, projB, ln2w, ln2b, fcW, fcB, mlpW, mlpB;
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "transformer.h." + std::to_string(i) + ".";
    Layer l;
    l.ln1w = g.param(p + "ln_1.weight", {E}, "ones");
    l.ln1b = g.param(p + "ln_1.bias", {E});
    l.attnW = g.param(p + "attn.c_attn.weight", {E, 3 * E});
    l.attnB = g.param(p + "attn.c_attn.bias", {3 * E});
    l.projW = g.param(p + "attn.c_proj.weight", {E, E}, residualInit);
    l.projB = g.param(p + "attn.c_proj.bias", {E});
    l.ln2w = g.param(p + "ln_2.weight", {E}, "ones");
    l.ln2b = g.param(p + "ln_2.bias", {E});
    l.fcW = g.param(p + "mlp.c_fc.weight", {E, 4 * E});
    l.fcB = g.param(p + "mlp.c_fc.bias", {4 * E});
    l.mlpW = g.param(p + "mlp.c_proj.weight", {4 * E, E}, residualInit);
    l.mlpB = g.param(p + "mlp.c_proj.bias", {E});
    layers.push_back(l);
  }
  Value lnfW = g.param("transformer.ln_f.weight", {E}, "ones");
  Value lnfB = g.param("transformer.ln_f.bias", {E});
  Value ids = g.input("input_ids", {B, S}, i64);
  Value labels = g.input("labels", {B, S}, i64);

  PackedDocuments docs(g, o, B, S);
  Value x = b.create<AddOp>(loc, b.create<EmbeddingOp>(loc, wte, ids),
                            b.create<EmbeddingOp>(loc, wpe, docs.positions));
  x = g.dropout(x, c.getFloat("embd_pdrop"));
  for (const Layer &l : layers) {
    Value h = g.layerNorm(x, l.ln1w, l.ln1b, eps);
    Value qkv = g.dense(h, l.attnW, l.attnB, /*linear=*/false);
    auto split = b.create<SplitOp>(loc, qkv, b.getI64IntegerAttr(2),
                                   b.getDenseI64ArrayAttr({E, E, E}));
    Value q = docs.heads(split.getResult(0), H, D);
    Value k = docs.heads(split.getResult(1), H, D);
    Value v = docs.heads(split.getResult(2), H, D);
    Value a = docs.merge(docs.attention(q, k, v, c.getFloat("attn_pdrop")), E);
    a = g.dropout(g.dense(a, l.projW, l.projB, false), c.getFloat("resid_pdrop"));
    x = b.create<AddOp>(loc, x, a);
    h = g.layerNorm(x, l.ln2w, l.ln2b, eps);
    h = b.create<GeluOp>(loc, g.dense(h, l.fcW, l.fcB, false),
                         GeluApproximation::tanh);
    h = g.dropout(g.dense(h, l.mlpW, l.mlpB, false), c.getFloat("resid_pdrop"));
    x = b.create<AddOp>(loc, x, h);
  }
  x = g.layerNorm(x, lnfW, lnfB, eps);
  Value logits = b.create<MatmulOp>(loc, x, wte, false, /*transpose_rhs=*/true);
  // Next-token loss: logits[:, :-1] against labels[:, 1:].
  Value loss = buildLanguageModelLoss(b, loc, logits, labels, LanguageModelLoss::Causal);
  g.finish({{"loss", loss}, {"logits", logits}});
  return std::move(g.module);
}

OwningOpRef<ModuleOp> buildBERT(MLIRContext &ctx, const ModelConfig &c,
                                const BuildOptions &o, Type dtype) {
  GraphBuilder g(ctx, dtype);
  OpBuilder &b = g.b;
  Location loc = g.loc;
  const int64_t V = c.get("vocab_size"), P = c.get("max_position_embeddings"),
                E = c.get("hidden_size"), L = c.get("num_hidden_layers"),
                H = c.get("num_attention_heads"), I = c.get("intermediate_size"),
                T = c.get("type_vocab_size");
  const int64_t B = o.microBatch, S = o.seqLen, D = E / H;
  const double eps = c.getFloat("layer_norm_eps");
  const double hiddenDrop = c.getFloat("hidden_dropout_prob");
  Type i64 = b.getI64Type();

  Value word = g.param("bert.embeddings.word_embeddings.weight", {V, E});
  Value position = g.param("bert.embeddings.position_embeddings.weight", {P, E});
  Value tokenType = g.param("bert.embeddings.token_type_embeddings.weight", {T, E});
  Value embLnW = g.param("bert.embeddings.LayerNorm.weight", {E}, "ones");
  Value embLnB = g.param("bert.embeddings.LayerNorm.bias", {E});
  struct Layer {
    Value qW, qB, kW, kB, vW, vB, oW, oB, ln1W, ln1B, iW, iB, outW, outB, ln2W, ln2B;
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "bert.encoder.layer." + std::to_string(i) + ".";
    Layer l;
    l.qW = g.param(p + "attention.self.query.weight", {E, E});
    l.qB = g.param(p + "attention.self.query.bias", {E});
    l.kW = g.param(p + "attention.self.key.weight", {E, E});
    l.kB = g.param(p + "attention.self.key.bias", {E});
    l.vW = g.param(p + "attention.self.value.weight", {E, E});
    l.vB = g.param(p + "attention.self.value.bias", {E});
    l.oW = g.param(p + "attention.output.dense.weight", {E, E});
    l.oB = g.param(p + "attention.output.dense.bias", {E});
    l.ln1W = g.param(p + "attention.output.LayerNorm.weight", {E}, "ones");
    l.ln1B = g.param(p + "attention.output.LayerNorm.bias", {E});
    l.iW = g.param(p + "intermediate.dense.weight", {I, E});
    l.iB = g.param(p + "intermediate.dense.bias", {I});
    l.outW = g.param(p + "output.dense.weight", {E, I});
    l.outB = g.param(p + "output.dense.bias", {E});
    l.ln2W = g.param(p + "output.LayerNorm.weight", {E}, "ones");
    l.ln2B = g.param(p + "output.LayerNorm.bias", {E});
    layers.push_back(l);
  }
  Value headW = g.param("cls.predictions.transform.dense.weight", {E, E});
  Value headB = g.param("cls.predictions.transform.dense.bias", {E});
  Value headLnW = g.param("cls.predictions.transform.LayerNorm.weight", {E}, "ones");
  Value headLnB = g.param("cls.predictions.transform.LayerNorm.bias", {E});
  Value decoderBias = g.param("cls.predictions.bias", {V});

  // Padded batches are [B, S] with an additive attention mask; unpadded
  // (varlen) ones pack the micro-batch's sequences into one dynamic token
  // dimension of T <= B * S tokens with their boundaries in cu_seqlens (B + 1
  // offsets; sequences past the last are empty), so nothing is padded.
  const bool varlen = o.varlen;
  const int64_t tokens = ShapedType::kDynamic;
  Value ids, types, positions, labels, cu, additive;
  if (varlen) {
    g.module->getOperation()->setAttr("mlc.token_capacity", b.getI64IntegerAttr(B * S));
    ids = g.input("input_ids", {tokens}, i64);
    types = g.input("token_type_ids", {tokens}, i64);
    positions = g.input("position_ids", {tokens}, i64);
    labels = g.input("labels", {tokens}, i64);
    cu = g.input("cu_seqlens", {B + 1}, b.getI32Type());
  } else {
    ids = g.input("input_ids", {B, S}, i64);
    types = g.input("token_type_ids", {B, S}, i64);
    Value attentionMask = g.input("attention_mask", {B, S}, i64);
    labels = g.input("labels", {B, S}, i64);
    positions = b.create<IotaOp>(loc, RankedTensorType::get({S}, i64), b.getI64IntegerAttr(0));
    // Additive mask as transformers builds it: (1 - mask) * lowest, [B, 1, 1, S].
    Value maskF = b.create<CastOp>(loc, RankedTensorType::get({B, S}, dtype), attentionMask);
    Value inverted = b.create<SubOp>(loc, g.constant(1.0), maskF);
    double lowest = dtype.isF64() ? std::numeric_limits<double>::lowest()
                                  : double(std::numeric_limits<float>::lowest());
    additive = g.reshape(b.create<MulOp>(loc, inverted, g.constant(lowest)), {B, 1, 1, S});
  }
  auto heads = [&](Value y) {
    return varlen ? g.reshape(y, {tokens, H, D}) : g.splitHeads(y, B, S, H, D);
  };
  auto merge = [&](Value a) {
    return varlen ? g.reshape(a, {tokens, E}) : g.mergeHeads(a, B, S, E);
  };

  Value x = b.create<AddOp>(loc, b.create<EmbeddingOp>(loc, word, ids),
                            b.create<EmbeddingOp>(loc, tokenType, types));
  x = b.create<AddOp>(loc, x, b.create<EmbeddingOp>(loc, position, positions));
  x = g.dropout(g.layerNorm(x, embLnW, embLnB, eps), hiddenDrop);
  for (const Layer &l : layers) {
    Value q = heads(g.dense(x, l.qW, l.qB, true));
    Value k = heads(g.dense(x, l.kW, l.kB, true));
    Value v = heads(g.dense(x, l.vW, l.vB, true));
    Value a = g.attention(q, k, v, additive, /*causal=*/false,
                          c.getFloat("attention_probs_dropout_prob"), cu);
    a = g.dropout(g.dense(merge(a), l.oW, l.oB, true), hiddenDrop);
    x = g.layerNorm(b.create<AddOp>(loc, a, x), l.ln1W, l.ln1B, eps);
    Value h = b.create<GeluOp>(loc, g.dense(x, l.iW, l.iB, true),
                               GeluApproximation::none);
    h = g.dropout(g.dense(h, l.outW, l.outB, true), hiddenDrop);
    x = g.layerNorm(b.create<AddOp>(loc, h, x), l.ln2W, l.ln2B, eps);
  }
  Value t = b.create<GeluOp>(loc, g.dense(x, headW, headB, true),
                             GeluApproximation::none);
  t = g.layerNorm(t, headLnW, headLnB, eps);
  Value logits = g.dense(t, word, decoderBias, /*linear=*/true);
  Value loss = varlen ? crossEntropy(g, logits, labels)
                      : buildLanguageModelLoss(b, loc, logits, labels, LanguageModelLoss::Masked);
  g.finish({{"loss", loss}, {"logits", logits}});
  return std::move(g.module);
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>> buildModel(MLIRContext &ctx,
                                                 const ModelConfig &config,
                                                 const BuildOptions &options) {
  ctx.loadDialect<MlcDialect, func::FuncDialect>();
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  Type dtype;
  if (options.dtype == "f32")
    dtype = Float32Type::get(&ctx);
  else if (options.dtype == "f64")
    dtype = Float64Type::get(&ctx);
  else
    return error("unsupported dtype '" + options.dtype + "' (expected f32 or f64)");
  if (options.varlen && config.family != "bert")
    return error("--varlen packs BERT's variable-length sequences; " +
                 std::string(config.family == "gpt2" ? "GPT-2" : "Llama") +
                 " trains on full samples");
  if ((options.resetAttentionMask || options.resetPositionIds) && config.family == "bert")
    return error("--reset-attention-mask and --reset-position-ids split causal samples "
                 "at their EOD tokens; BERT's attention is bidirectional (--varlen "
                 "packs BERT's sequences)");
  if (options.microBatch < 1)
    return error("micro-batch must be >= 1");
  const char *positions =
      config.family == "gpt2" ? "n_positions" : "max_position_embeddings";
  if (options.seqLen < 2 || options.seqLen > config.get(positions))
    return error(llvm::formatv("seq-len {0} must be in [2, {1}] ({2})",
                               options.seqLen, config.get(positions), positions)
                     .str());
  // The memory a training step would need, estimated before anything is
  // built: parameters, gradients and two AdamW moments, and the activations
  // a layer keeps for backward (about 34 E + 5 H S values per token).
  // The step's memory estimate: parameters with their gradient and moments,
  // and the activations the backward keeps.
  const double tokens = double(options.microBatch) * double(options.seqLen);
  double params, activations;
  if (config.family == "llama") {
    params = llamaParameterCount(config);
    activations = tokens * llamaActivationsPerToken(config, options.seqLen);
  } else {
    const bool gpt = config.family == "gpt2";
    double V = config.get("vocab_size"), P = config.get(positions),
           E = config.get(gpt ? "n_embd" : "hidden_size"),
           L = config.get(gpt ? "n_layer" : "num_hidden_layers"),
           H = config.get(gpt ? "n_head" : "num_attention_heads"),
           I = gpt ? 4 * E : double(config.get("intermediate_size"));
    params = (V + P) * E + L * (4 * E * E + 2 * E * I + 9 * E + I) + 4 * E;
    activations = tokens * L * (34 * E + 5 * H * double(options.seqLen)) + tokens * V * 2;
  }
  const double bytes = (4 * params + activations) * (options.dtype == "f64" ? 8 : 4);
  const double limit = 16.0 * (1ull << 40); // far beyond any one device
  if (!std::isfinite(bytes) || bytes > limit || tokens > 1e12)
    return error(llvm::formatv("this model and batch would need about {0:f0} GiB to train "
                               "({1:e2} parameters, micro-batch {2} x seq-len {3}); the "
                               "limit is 16384 GiB",
                               bytes / double(1ull << 30), params, options.microBatch,
                               options.seqLen)
                     .str());
  OwningOpRef<ModuleOp> module =
      config.family == "gpt2"   ? buildGPT2(ctx, config, options, dtype)
      : config.family == "bert" ? buildBERT(ctx, config, options, dtype)
                                : buildLlama(ctx, config, options, dtype);
  if (failed(verify(*module)))
    return error("internal error: the built " + config.family +
                 " graph does not verify");
  return std::move(module);
}

} // namespace mlc
