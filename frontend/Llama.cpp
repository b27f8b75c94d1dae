//===- Llama.cpp - builtin Llama (and Qwen2-shaped) graphs -----------------===//
//
// transformers' LlamaForCausalLM op for op: RMSNorm, rotary embeddings
// (rotate-half), grouped-query attention, the SwiGLU MLP, an untied or tied
// head and the next-token loss. Qwen2ForCausalLM is the same graph with
// biases on q/k/v only (`qkv_bias=1`) and a tied head.
//
// RMSNorm is mlc.rms_norm (a row kernel with the residual add). The rotary
// embedding is mlc.rotary with constant cos/sin tables over the projection's
// rows: one pointwise kernel per Q and K forward and backward, the head split
// a view on either side of it. K and V keep their num_key_value_heads heads:
// mlc.attention groups the query heads over them (its kernels index K/V by
// the kv head and sum a group's dK, dV), so they are never expanded. The
// MLP's silu(gate) * up is mlc.swiglu: one kernel forward, one backward.
//
// Packed documents (--reset-attention-mask, --reset-position-ids) go through
// PackedDocuments as in GPT-2: the heads are [B * S, heads, D] views and the
// grouped-query attention is variable-length causal over cu_seqlens; the
// rotary tables are gathered at position_ids once per step. With the reset
// mask the reset positions change only rounding (a rotary score depends on
// i - j within a document, the same from any start); they matter, and match
// HF's position_ids, under --reset-position-ids alone.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphBuilder.h"
#include "dialects/mlc/MlcLosses.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace mlc {
namespace detail {

//===----------------------------------------------------------------------===//
// Config
//===----------------------------------------------------------------------===//

const std::map<std::string, Preset> &llamaPresets() {
  // TinyLlama-1.1B (TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T's
  // config.json); the others change what differs from it.
  static const Preset tinyllama = {
      {"vocab_size", 32000},         {"hidden_size", 2048},
      {"intermediate_size", 5632},   {"num_hidden_layers", 22},
      {"num_attention_heads", 32},   {"num_key_value_heads", 4},
      {"head_dim", 0},               {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000},         {"max_position_embeddings", 2048},
      {"tie_word_embeddings", 0},    {"attention_bias", 0},
      {"mlp_bias", 0},               {"qkv_bias", 0},
      {"initializer_range", 0.02},   {"qk_norm", 0},
      {"sliding_window", 0}};
  static const std::map<std::string, Preset> presets = [] {
    std::map<std::string, Preset> p;
    p["tinyllama-1.1b"] = tinyllama;
    // meta-llama/Llama-3.2-1B, with its llama3 rope_scaling (factor 32).
    Preset &l32 = p["llama-3.2-1b"] = tinyllama;
    l32["vocab_size"] = 128256;
    l32["intermediate_size"] = 8192;
    l32["num_hidden_layers"] = 16;
    l32["num_key_value_heads"] = 8;
    l32["head_dim"] = 64;
    l32["rope_theta"] = 500000;
    l32["max_position_embeddings"] = 131072;
    l32["tie_word_embeddings"] = 1;
    l32[kRopeScalingFactor] = 32;
    l32[kRopeScalingLowFreqFactor] = 1;
    l32[kRopeScalingHighFreqFactor] = 4;
    l32[kRopeScalingOriginalMax] = 8192;
    // meta-llama/Meta-Llama-3-8B: 8.03B parameters.
    Preset &l3 = p["llama-3-8b"] = tinyllama;
    l3["vocab_size"] = 128256;
    l3["hidden_size"] = 4096;
    l3["intermediate_size"] = 14336;
    l3["num_hidden_layers"] = 32;
    l3["num_attention_heads"] = 32;
    l3["num_key_value_heads"] = 8;
    l3["head_dim"] = 128;
    l3["rms_norm_eps"] = 1e-5;
    l3["rope_theta"] = 500000;
    l3["max_position_embeddings"] = 8192;
    l3["tie_word_embeddings"] = 0;
    // meta-llama/Llama-3.1-8B: Llama-3-8B's shapes and parameters, its
    // context stretched to 131,072 tokens by the llama3 rope_scaling.
    Preset &l31 = p["llama-3.1-8b"] = l3;
    l31["max_position_embeddings"] = 131072;
    l31[kRopeScalingFactor] = 8;
    l31[kRopeScalingLowFreqFactor] = 1;
    l31[kRopeScalingHighFreqFactor] = 4;
    l31[kRopeScalingOriginalMax] = 8192;
    // meta-llama/Meta-Llama-3-70B: 70.6B parameters, with Llama-3.1-70B's
    // llama3 rope_scaling (the same shapes; its frequencies are constants
    // of the rotary tables).
    Preset &l70 = p["llama-3-70b"] = l31;
    l70["hidden_size"] = 8192;
    l70["intermediate_size"] = 28672;
    l70["num_hidden_layers"] = 80;
    l70["num_attention_heads"] = 64;
    l70["num_key_value_heads"] = 8;
    // Qwen/Qwen2-0.5B: q/k/v biases, tied head.
    Preset &q = p["qwen2-0.5b"] = tinyllama;
    q["vocab_size"] = 151936;
    q["hidden_size"] = 896;
    q["intermediate_size"] = 4864;
    q["num_hidden_layers"] = 24;
    q["num_attention_heads"] = 14;
    q["num_key_value_heads"] = 2;
    q["rms_norm_eps"] = 1e-6;
    q["rope_theta"] = 1000000;
    q["max_position_embeddings"] = 32768;
    q["tie_word_embeddings"] = 1;
    q["qkv_bias"] = 1;
    // Trains in seconds on a laptop core; byte-level vocabulary, 4 query
    // heads over 2 key/value heads.
    Preset &t = p["tiny"] = tinyllama;
    t["vocab_size"] = 256;
    t["hidden_size"] = 64;
    t["intermediate_size"] = 172;
    t["num_hidden_layers"] = 2;
    t["num_attention_heads"] = 4;
    t["num_key_value_heads"] = 2;
    t["rms_norm_eps"] = 1e-6;
    t["max_position_embeddings"] = 256;
    Preset &qt = p["qwen2-tiny"] = t;
    qt["tie_word_embeddings"] = 1;
    qt["qkv_bias"] = 1;
    return p;
  }();
  return presets;
}

Preset llamaHFDefaults(llvm::StringRef modelType) {
  Preset p = {{"vocab_size", 32000},         {"hidden_size", 4096},
              {"intermediate_size", 11008},  {"num_hidden_layers", 32},
              {"num_attention_heads", 32},   {"num_key_value_heads", 32},
              {"head_dim", 0},               {"rms_norm_eps", 1e-6},
              {"rope_theta", 10000},         {"max_position_embeddings", 2048},
              {"tie_word_embeddings", 0},    {"attention_bias", 0},
              {"mlp_bias", 0},               {"qkv_bias", 0},
              {"initializer_range", 0.02},   {"qk_norm", 0},
              {"sliding_window", 0}};
  if (modelType == "qwen2" || modelType == "qwen3") {
    p["vocab_size"] = 151936;
    p["intermediate_size"] = 22016;
    p["max_position_embeddings"] = 32768;
  }
  if (modelType == "qwen2")
    p["qkv_bias"] = 1; // Qwen2Attention: q/k/v always biased, o_proj never
  if (modelType == "qwen3") {
    p["head_dim"] = 128;
    p["qk_norm"] = 1; // Qwen3Attention: RMSNorm over each head's q and k
  }
  if (modelType == "mistral") {
    p["intermediate_size"] = 14336;
    p["num_key_value_heads"] = 8;
    p["max_position_embeddings"] = 4096 * 32;
    p["sliding_window"] = 4096;
  }
  return p;
}

llvm::Error checkLlamaConfig(ModelConfig &config) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  for (auto &[key, value] : config.values) {
    llvm::StringRef k(key);
    if (isBooleanKey(k)) {
      if (value != 0 && value != 1)
        return error("config key '" + key + "' must be 0 or 1 (false or true)");
      continue;
    }
    if (k == "rms_norm_eps" || k == "rope_theta" || k == "initializer_range" ||
        k == kRopeScalingFactor || k == kRopeScalingLowFreqFactor ||
        k == kRopeScalingHighFreqFactor) {
      if (!(value > 0) || !std::isfinite(value))
        return error("config key '" + key + "' must be a finite positive number, got " +
                     formatNumber(value));
      continue;
    }
    // head_dim 0: hidden_size / num_attention_heads (HF's default);
    // sliding_window 0: no window.
    double lowest = k == "head_dim" || k == "sliding_window" ? 0 : 1;
    if (value < lowest || value != std::floor(value))
      return error("config key '" + key + "' must be a positive integer");
    double limit = k == "num_hidden_layers" ? 10000 : 1e9;
    if (value > limit)
      return error(llvm::formatv("config key '{0}' must be at most {1}, got {2:f0}", key,
                                 int64_t(limit), value)
                       .str());
  }
  const int64_t E = config.get("hidden_size"), H = config.get("num_attention_heads"),
                Hkv = config.get("num_key_value_heads");
  if (H % Hkv != 0)
    return error(llvm::formatv("num_attention_heads={0} is not divisible by "
                               "num_key_value_heads={1}",
                               H, Hkv)
                     .str());
  if (config.get("head_dim") == 0) {
    if (E % H != 0)
      return error(llvm::formatv("hidden_size={0} is not divisible by num_attention_heads={1} "
                                 "(or set head_dim)",
                                 E, H)
                       .str());
    config.values["head_dim"] = double(E / H);
  }
  // llama3 rope_scaling: the four keys together, a band low < high (its
  // frequencies are interpolated over it).
  const int scalingKeys = config.values.count(kRopeScalingFactor) +
                          config.values.count(kRopeScalingLowFreqFactor) +
                          config.values.count(kRopeScalingHighFreqFactor) +
                          config.values.count(kRopeScalingOriginalMax);
  if (scalingKeys != 0 && scalingKeys != 4)
    return error(llvm::formatv("llama3 rope scaling needs all of {0}, {1}, {2} and {3}",
                               kRopeScalingFactor, kRopeScalingLowFreqFactor,
                               kRopeScalingHighFreqFactor, kRopeScalingOriginalMax)
                     .str());
  if (scalingKeys == 4 && !(config.getFloat(kRopeScalingLowFreqFactor) <
                            config.getFloat(kRopeScalingHighFreqFactor)))
    return error(llvm::formatv("{0}={1} must be below {2}={3}", kRopeScalingLowFreqFactor,
                               formatNumber(config.getFloat(kRopeScalingLowFreqFactor)),
                               kRopeScalingHighFreqFactor,
                               formatNumber(config.getFloat(kRopeScalingHighFreqFactor)))
                     .str());
  if (config.get("head_dim") % 2 != 0)
    return error(llvm::formatv("head_dim={0} must be even (rotary embeddings rotate pairs)",
                               config.get("head_dim"))
                     .str());
  return llvm::Error::success();
}

double llamaParameterCount(const ModelConfig &c) {
  double V = c.get("vocab_size"), E = c.get("hidden_size"), I = c.get("intermediate_size"),
         L = c.get("num_hidden_layers"), H = c.get("num_attention_heads"),
         Hkv = c.get("num_key_value_heads"), D = c.get("head_dim");
  double attention = 2 * E * H * D + 2 * E * Hkv * D + (H + 2 * Hkv) * D + E +
                     (c.get("qk_norm") ? 2 * D : 0);
  double mlp = 3 * E * I + 2 * I + E;
  return V * E * (c.get("tie_word_embeddings") ? 1 : 2) + L * (attention + mlp + 2 * E) + E;
}

double llamaActivationsPerToken(const ModelConfig &c, int64_t seqLen) {
  double E = c.get("hidden_size"), I = c.get("intermediate_size"),
         L = c.get("num_hidden_layers"), H = c.get("num_attention_heads"),
         D = c.get("head_dim");
  // Norms, q (H heads) and k, v (Hkv heads each), rotary temporaries,
  // attention probabilities, the gated MLP's three I-wide values; the logits
  // twice.
  const double Hkv = c.get("num_key_value_heads");
  return L * (12 * E + 4 * (H + Hkv) * D + 5 * I + 5 * H * double(seqLen)) +
         2 * double(c.get("vocab_size"));
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

namespace {

/// LlamaRMSNorm: weight * (x * rsqrt(mean(x^2, -1) + eps)), in the graph's
/// element type (f32 or f64; autocast keeps mlc.rms_norm in f32).
Value rmsNorm(GraphBuilder &g, Value x, Value weight, double eps) {
  return g.b.create<RmsNormOp>(g.loc, x, weight, g.b.getF64FloatAttr(eps));
}

/// The rotary frequencies inv_freq_i = theta^(-2i/D), i < D/2, as
/// transformers computes them: in f32 for an f32 graph (so that the tables
/// agree with HF's bit for bit or within an ulp), in f64 for an f64 one.
/// With llama3 rope scaling (Llama 3.1, 3.2: transformers'
/// _compute_llama3_parameters) each frequency is rescaled by its wavelength
/// 2 pi / inv_freq against the original context length L: longer than
/// L / low_freq_factor, divided by `factor`; shorter than
/// L / high_freq_factor, kept; in between, interpolated with
/// smooth = (L / wavelength - low) / (high - low):
/// (1 - smooth) * inv_freq / factor + smooth * inv_freq. Its attention
/// scaling is 1: the tables are plain cosines and sines of the new angles.
SmallVector<double> rotaryFrequencies(const ModelConfig &c, int64_t D, bool f32) {
  const double theta = c.getFloat("rope_theta");
  SmallVector<double> inv(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) {
    if (f32) {
      float exponent = float(2 * i) / float(D);
      inv[i] = double(1.0f / std::pow(float(theta), exponent));
    } else {
      inv[i] = 1.0 / std::pow(theta, double(2 * i) / double(D));
    }
  }
  if (!c.values.count(kRopeScalingFactor))
    return inv;
  const double factor = c.getFloat(kRopeScalingFactor),
               low = c.getFloat(kRopeScalingLowFreqFactor),
               high = c.getFloat(kRopeScalingHighFreqFactor),
               original = c.getFloat(kRopeScalingOriginalMax);
  const double lowFreqWavelen = original / low, highFreqWavelen = original / high;
  for (double &f : inv) {
    if (f32) {
      // torch's f32 ops on the f32 inv_freq (2 pi / x is x.reciprocal() * 2 pi).
      float x = float(f);
      float wavelen = (1.0f / x) * float(2 * M_PI);
      float scaled = x / float(factor);
      if (wavelen > float(lowFreqWavelen))
        f = double(scaled);
      else if (!(wavelen < float(highFreqWavelen))) {
        float smooth = ((1.0f / wavelen) * float(original) - float(low)) / float(high - low);
        f = double((1.0f - smooth) * x / float(factor) + smooth * x);
      }
    } else {
      double wavelen = 2 * M_PI / f;
      if (wavelen > lowFreqWavelen)
        f = f / factor;
      else if (!(wavelen < highFreqWavelen)) {
        double smooth = (original / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  }
  return inv;
}

/// The rotary tables cos(p * f_i) and sin(p * f_i) over positions p < S and
/// the head's D dimensions, f_i the rotaryFrequencies repeated for both
/// halves (HF's cat(freqs, freqs)), the sine with mlc.rotary's sign
/// (negated on the first half). Over positions 0..S-1 the tables are
/// constants of the step; with --reset-position-ids they are gathered at
/// each token's position (still constants: no gradient reaches them). They
/// are mlc.rotary_table ops: only the D/2 frequencies are in the IR, and the
/// kernel computes the S * D values (a literal table of 8192 positions made
/// kernel sources of 60 MB). In f32 the table rounds the f32 angle
/// p * inv_freq's cosine to f32, as HF does; in f64 in f64.
/// `shape` is [S, 1, D] (broadcast over the heads of [B, S, heads, D]) or
/// [S, D] (rows to gather by position).
std::pair<Value, Value> rotaryTableConstants(GraphBuilder &g, ArrayRef<int64_t> shape,
                                             const ModelConfig &c) {
  SmallVector<double> inv = rotaryFrequencies(c, shape.back(), g.dtype.isF32());
  auto type = RankedTensorType::get(shape, g.dtype);
  auto table = [&](bool sine) -> Value {
    return g.b.create<RotaryTableOp>(g.loc, type, g.b.getDenseF64ArrayAttr(inv),
                                     g.b.getBoolAttr(sine));
  };
  return {table(false), table(true)};
}

/// The rotary tables of the micro-batch's tokens over [B, S, heads, D]: the
/// constants [S, 1, D] when every sample's positions are 0..S-1, or, when
/// they reset at each document (--reset-position-ids), the rows of the
/// [S, D] constants at position_ids, gathered into [B, S, 1, D]: one gather
/// kernel per table and step (B * S * D reads and writes each), shared by
/// every layer. The tables are constants, so autodiff builds no gradient
/// for them (nothing trained flows into the gather).
std::pair<Value, Value> rotaryTables(GraphBuilder &g, PackedDocuments &docs, int64_t B,
                                     int64_t S, int64_t D, const ModelConfig &c, bool reset) {
  if (!reset)
    return rotaryTableConstants(g, {S, 1, D}, c);
  auto [cos, sin] = rotaryTableConstants(g, {S, D}, c);
  auto gather = [&](Value table) {
    return g.reshape(g.b.create<EmbeddingOp>(g.loc, table, docs.positions), {B, S, 1, D});
  };
  return {gather(cos), gather(sin)};
}

/// HF's apply_rotary_pos_emb on x [B, S, heads, D] (tables [S, 1, D] or
/// [B, S, 1, D]):
/// x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]),
/// one mlc.rotary (the tables carry rotate_half's sign).
Value applyRotary(GraphBuilder &g, Value x, Value cos, Value sin) {
  return g.b.create<RotaryOp>(g.loc, x, cos, sin, /*interleaved=*/false, /*transpose=*/false);
}

} // namespace

OwningOpRef<ModuleOp> buildLlama(MLIRContext &ctx, const ModelConfig &c,
                                 const BuildOptions &o, Type dtype) {
  GraphBuilder g(ctx, dtype, "llama");
  OpBuilder &b = g.b;
  Location &loc = g.loc; // follows g.at(): the part of the model being built
  const int64_t V = c.get("vocab_size"), E = c.get("hidden_size"),
                I = c.get("intermediate_size"), L = c.get("num_hidden_layers"),
                H = c.get("num_attention_heads"), Hkv = c.get("num_key_value_heads"),
                D = c.get("head_dim");
  const int64_t B = o.microBatch, S = o.seqLen, window = c.get("sliding_window");
  const double eps = c.getFloat("rms_norm_eps");
  const bool tied = c.get("tie_word_embeddings"), attentionBias = c.get("attention_bias"),
             qkvBias = attentionBias || c.get("qkv_bias"), mlpBias = c.get("mlp_bias");
  const std::string init = "normal:" + formatNumber(c.getFloat("initializer_range"));
  Type i64 = b.getI64Type();

  // Parameters in the order of HF's state_dict.
  Value embed = g.param("model.embed_tokens.weight", {V, E}, init);
  struct Layer {
    Value qW, qB, kW, kB, vW, vB, oW, oB, qNorm, kNorm, gateW, gateB, upW, upB, downW,
        downB, ln1, ln2;
  };
  const bool qkNorm = c.get("qk_norm");
  auto linear = [&](const std::string &name, int64_t out, int64_t in, bool bias, Value &w,
                    Value &bv) {
    w = g.param(name + ".weight", {out, in}, init);
    bv = bias ? g.param(name + ".bias", {out}, "zeros") : Value();
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    Layer l;
    linear(p + "self_attn.q_proj", H * D, E, qkvBias, l.qW, l.qB);
    linear(p + "self_attn.k_proj", Hkv * D, E, qkvBias, l.kW, l.kB);
    linear(p + "self_attn.v_proj", Hkv * D, E, qkvBias, l.vW, l.vB);
    linear(p + "self_attn.o_proj", E, H * D, attentionBias, l.oW, l.oB);
    if (qkNorm) {
      l.qNorm = g.param(p + "self_attn.q_norm.weight", {D}, "ones");
      l.kNorm = g.param(p + "self_attn.k_norm.weight", {D}, "ones");
    }
    linear(p + "mlp.gate_proj", I, E, mlpBias, l.gateW, l.gateB);
    linear(p + "mlp.up_proj", I, E, mlpBias, l.upW, l.upB);
    linear(p + "mlp.down_proj", E, I, mlpBias, l.downW, l.downB);
    l.ln1 = g.param(p + "input_layernorm.weight", {E}, "ones");
    l.ln2 = g.param(p + "post_attention_layernorm.weight", {E}, "ones");
    layers.push_back(l);
  }
  Value norm = g.param("model.norm.weight", {E}, "ones");
  Value head = tied ? embed : g.param("lm_head.weight", {V, E}, init);
  Value ids = g.input("input_ids", {B, S}, i64);
  Value labels = g.input("labels", {B, S}, i64);

  // Packed documents (--reset-attention-mask, --reset-position-ids) add
  // position_ids and cu_seqlens after the labels, as in GPT-2.
  g.at("llama.embed_tokens");
  PackedDocuments docs(g, o, B, S);
  auto [cos, sin] =
      rotaryTables(g, docs, B, S, D, c, o.resetPositionIds);
  Value x = b.create<EmbeddingOp>(loc, embed, ids);
  for (auto [index, l] : llvm::enumerate(layers)) {
    const std::string layer = "llama.layers." + std::to_string(index);
    g.at(layer + ".self_attn");
    Value h = rmsNorm(g, x, l.ln1, eps);
    // Q and K rotate in the projection's [B, S, heads, D] layout (tables
    // [S, 1, D]) before the heads are split: the rotation reads the GEMM's
    // rows and writes them contiguous, and in the backward it reads the
    // attention's gradient through the split's transpose and writes the rows
    // the weight-gradient GEMM reads, so the split costs no copy either way.
    // Packed, the split is a reshape to [B * S, heads, D], a view as well.
    // Qwen3 (qk_norm): an RMSNorm over each head's D values of q and k,
    // before the rotation.
    auto headNorm = [&](Value x, Value weight) { return weight ? rmsNorm(g, x, weight, eps) : x; };
    Value q = docs.headsOfRows(applyRotary(
        g, headNorm(g.reshape(g.dense(h, l.qW, l.qB, /*linear=*/true), {B, S, H, D}), l.qNorm),
        cos, sin));
    Value k = docs.headsOfRows(applyRotary(
        g, headNorm(g.reshape(g.dense(h, l.kW, l.kB, true), {B, S, Hkv, D}), l.kNorm), cos,
        sin));
    Value v = docs.heads(g.dense(h, l.vW, l.vB, true), Hkv, D);
    // Mistral's sliding window: a window shorter than the sequence narrows
    // the causal attention (in its kernels: no mask is built); a longer one
    // is the same attention as none.
    Value a = docs.attention(q, k, v, /*dropout=*/0.0, /*scale=*/0, window < S ? window : 0);
    a = g.dense(docs.merge(a, H * D), l.oW, l.oB, true);
    x = b.create<AddOp>(loc, x, a);
    g.at(layer + ".mlp");
    h = rmsNorm(g, x, l.ln2, eps);
    Value gate = g.dense(h, l.gateW, l.gateB, true);
    Value up = g.dense(h, l.upW, l.upB, true);
    h = g.dense(b.create<SwigluOp>(loc, gate, up), l.downW, l.downB, true);
    x = b.create<AddOp>(loc, x, h);
  }
  g.at("llama.lm_head");
  x = rmsNorm(g, x, norm, eps);
  Value logits = g.dense(x, head, Value(), /*linear=*/true);
  Value loss = buildLanguageModelLoss(b, loc, logits, labels, LanguageModelLoss::Causal);
  g.finish({{"loss", loss}, {"logits", logits}});
  return std::move(g.module);
}

} // namespace detail
} // namespace mlc
