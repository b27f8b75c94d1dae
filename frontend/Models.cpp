//===- Models.cpp - builtin GPT-2 and BERT graphs ---------------------------===//
//
// The graphs follow transformers' GPT2LMHeadModel and BertForMaskedLM op for
// op (training mode, so dropout is live when its probability is non-zero).
// Llama's graph is built in Llama.cpp; the configs of every builtin family
// are parsed in ModelConfig.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"
#include "frontend/GraphBuilder.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcLosses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace mlc {

using namespace detail;

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
  GraphBuilder g(ctx, dtype, "gpt2");
  OpBuilder &b = g.b;
  Location &loc = g.loc; // follows g.at(): the part of the model being built
  const int64_t V = c.get("vocab_size"), P = c.get("n_positions"),
                E = c.get("n_embd"), L = c.get("n_layer"), H = c.get("n_head");
  const int64_t B = o.microBatch, S = o.seqLen, D = E / H;
  // n_inner: the MLP's width (HF's null, held as 0: 4 * n_embd).
  const int64_t I = c.get("n_inner") ? c.get("n_inner") : 4 * E;
  const double eps = c.getFloat("layer_norm_epsilon");
  const double range = c.getFloat("initializer_range");
  const bool tied = c.get("tie_word_embeddings");
  Type i64 = b.getI64Type();

  // GPT2PreTrainedModel._init_weights: N(0, initializer_range), the residual
  // projections' weights scaled by 1/sqrt(2 * n_layer).
  const std::string init = "normal:" + formatNumber(range);
  std::string residualInit = "normal:" + formatNumber(range / std::sqrt(2.0 * L));
  Value wte = g.param("transformer.wte.weight", {V, E}, init);
  Value wpe = g.param("transformer.wpe.weight", {P, E}, init);
  struct Layer {
    Value ln1w, ln1b, attnW, attnB, projW, projB, ln2w, ln2b, fcW, fcB, mlpW, mlpB;
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "transformer.h." + std::to_string(i) + ".";
    Layer l;
    l.ln1w = g.param(p + "ln_1.weight", {E}, "ones");
    l.ln1b = g.param(p + "ln_1.bias", {E});
    l.attnW = g.param(p + "attn.c_attn.weight", {E, 3 * E}, init);
    l.attnB = g.param(p + "attn.c_attn.bias", {3 * E});
    l.projW = g.param(p + "attn.c_proj.weight", {E, E}, residualInit);
    l.projB = g.param(p + "attn.c_proj.bias", {E});
    l.ln2w = g.param(p + "ln_2.weight", {E}, "ones");
    l.ln2b = g.param(p + "ln_2.bias", {E});
    l.fcW = g.param(p + "mlp.c_fc.weight", {E, I}, init);
    l.fcB = g.param(p + "mlp.c_fc.bias", {I});
    l.mlpW = g.param(p + "mlp.c_proj.weight", {I, E}, residualInit);
    l.mlpB = g.param(p + "mlp.c_proj.bias", {E});
    layers.push_back(l);
  }
  Value lnfW = g.param("transformer.ln_f.weight", {E}, "ones");
  Value lnfB = g.param("transformer.ln_f.bias", {E});
  // tie_word_embeddings false: GPT2LMHeadModel's lm_head (nn.Linear, no bias)
  // is its own parameter.
  Value head = tied ? wte : g.param("lm_head.weight", {V, E}, init);
  Value ids = g.input("input_ids", {B, S}, i64);
  Value labels = g.input("labels", {B, S}, i64);

  g.at("gpt2.embeddings");
  PackedDocuments docs(g, o, B, S);
  Value x = b.create<AddOp>(loc, b.create<EmbeddingOp>(loc, wte, ids),
                            b.create<EmbeddingOp>(loc, wpe, docs.positions));
  x = g.dropout(x, c.getFloat("embd_pdrop"));
  // GPT2Attention divides the scores by sqrt(head dim) (scale_attn_weights)
  // and by layer_idx + 1 (scale_attn_by_inverse_layer_idx): one scale.
  const bool scaleBySqrtD = c.get("scale_attn_weights"),
             scaleByLayer = c.get("scale_attn_by_inverse_layer_idx");
  for (auto [index, l] : llvm::enumerate(layers)) {
    double scale = scaleBySqrtD ? 1.0 / std::sqrt(double(D)) : 1.0;
    if (scaleByLayer)
      scale /= double(index + 1);
    const std::string layer = "gpt2.h." + std::to_string(index);
    g.at(layer + ".attn");
    Value h = g.layerNorm(x, l.ln1w, l.ln1b, eps);
    Value qkv = g.dense(h, l.attnW, l.attnB, /*linear=*/false);
    auto split = b.create<SplitOp>(loc, qkv, b.getI64IntegerAttr(2),
                                   b.getDenseI64ArrayAttr({E, E, E}));
    Value q = docs.heads(split.getResult(0), H, D);
    Value k = docs.heads(split.getResult(1), H, D);
    Value v = docs.heads(split.getResult(2), H, D);
    // The op's default scale is 1/sqrt(D): leave it unset where it is that.
    bool defaultScale = scaleBySqrtD && !scaleByLayer;
    Value a = docs.merge(
        docs.attention(q, k, v, c.getFloat("attn_pdrop"), defaultScale ? 0.0 : scale), E);
    a = g.dropout(g.dense(a, l.projW, l.projB, false), c.getFloat("resid_pdrop"));
    x = b.create<AddOp>(loc, x, a);
    g.at(layer + ".mlp");
    h = g.layerNorm(x, l.ln2w, l.ln2b, eps);
    h = b.create<GeluOp>(loc, g.dense(h, l.fcW, l.fcB, false),
                         GeluApproximation::tanh);
    h = g.dropout(g.dense(h, l.mlpW, l.mlpB, false), c.getFloat("resid_pdrop"));
    x = b.create<AddOp>(loc, x, h);
  }
  g.at("gpt2.lm_head");
  x = g.layerNorm(x, lnfW, lnfB, eps);
  Value logits = b.create<MatmulOp>(loc, x, head, false, /*transpose_rhs=*/true);
  // Next-token loss: logits[:, :-1] against labels[:, 1:].
  Value loss = buildLanguageModelLoss(b, loc, logits, labels, LanguageModelLoss::Causal);
  g.finish({{"loss", loss}, {"logits", logits}});
  return std::move(g.module);
}

OwningOpRef<ModuleOp> buildBERT(MLIRContext &ctx, const ModelConfig &c,
                                const BuildOptions &o, Type dtype) {
  GraphBuilder g(ctx, dtype, "bert");
  OpBuilder &b = g.b;
  Location &loc = g.loc; // follows g.at(): the part of the model being built
  const int64_t V = c.get("vocab_size"), P = c.get("max_position_embeddings"),
                E = c.get("hidden_size"), L = c.get("num_hidden_layers"),
                H = c.get("num_attention_heads"), I = c.get("intermediate_size"),
                T = c.get("type_vocab_size");
  const int64_t B = o.microBatch, S = o.seqLen, D = E / H;
  const double eps = c.getFloat("layer_norm_eps");
  const double hiddenDrop = c.getFloat("hidden_dropout_prob");
  Type i64 = b.getI64Type();
  // BertPreTrainedModel._init_weights: linears and embeddings from
  // N(0, initializer_range), biases zero, LayerNorms one and zero.
  const std::string init = "normal:" + formatNumber(c.getFloat("initializer_range"));

  Value word = g.param("bert.embeddings.word_embeddings.weight", {V, E}, init);
  Value position = g.param("bert.embeddings.position_embeddings.weight", {P, E}, init);
  Value tokenType = g.param("bert.embeddings.token_type_embeddings.weight", {T, E}, init);
  Value embLnW = g.param("bert.embeddings.LayerNorm.weight", {E}, "ones");
  Value embLnB = g.param("bert.embeddings.LayerNorm.bias", {E});
  struct Layer {
    Value qW, qB, kW, kB, vW, vB, oW, oB, ln1W, ln1B, iW, iB, outW, outB, ln2W, ln2B;
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "bert.encoder.layer." + std::to_string(i) + ".";
    Layer l;
    l.qW = g.param(p + "attention.self.query.weight", {E, E}, init);
    l.qB = g.param(p + "attention.self.query.bias", {E});
    l.kW = g.param(p + "attention.self.key.weight", {E, E}, init);
    l.kB = g.param(p + "attention.self.key.bias", {E});
    l.vW = g.param(p + "attention.self.value.weight", {E, E}, init);
    l.vB = g.param(p + "attention.self.value.bias", {E});
    l.oW = g.param(p + "attention.output.dense.weight", {E, E}, init);
    l.oB = g.param(p + "attention.output.dense.bias", {E});
    l.ln1W = g.param(p + "attention.output.LayerNorm.weight", {E}, "ones");
    l.ln1B = g.param(p + "attention.output.LayerNorm.bias", {E});
    l.iW = g.param(p + "intermediate.dense.weight", {I, E}, init);
    l.iB = g.param(p + "intermediate.dense.bias", {I});
    l.outW = g.param(p + "output.dense.weight", {E, I}, init);
    l.outB = g.param(p + "output.dense.bias", {E});
    l.ln2W = g.param(p + "output.LayerNorm.weight", {E}, "ones");
    l.ln2B = g.param(p + "output.LayerNorm.bias", {E});
    layers.push_back(l);
  }
  Value headW = g.param("cls.predictions.transform.dense.weight", {E, E}, init);
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
  g.at("bert.embeddings");
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
  for (auto [index, l] : llvm::enumerate(layers)) {
    const std::string layer = "bert.encoder.layer." + std::to_string(index);
    g.at(layer + ".attention");
    Value q = heads(g.dense(x, l.qW, l.qB, true));
    Value k = heads(g.dense(x, l.kW, l.kB, true));
    Value v = heads(g.dense(x, l.vW, l.vB, true));
    Value a = g.attention(q, k, v, additive, /*causal=*/false,
                          c.getFloat("attention_probs_dropout_prob"), cu);
    a = g.dropout(g.dense(merge(a), l.oW, l.oB, true), hiddenDrop);
    x = g.layerNorm(b.create<AddOp>(loc, a, x), l.ln1W, l.ln1B, eps);
    g.at(layer + ".mlp"); // HF's intermediate and output
    Value h = b.create<GeluOp>(loc, g.dense(x, l.iW, l.iB, true),
                               GeluApproximation::none);
    h = g.dropout(g.dense(h, l.outW, l.outB, true), hiddenDrop);
    x = g.layerNorm(b.create<AddOp>(loc, h, x), l.ln2W, l.ln2B, eps);
  }
  g.at("bert.cls");
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
           I = gpt ? double(config.get("n_inner") ? config.get("n_inner") : 4 * E)
                   : double(config.get("intermediate_size"));
    const bool untied = gpt && !config.get("tie_word_embeddings");
    params = (V * (untied ? 2 : 1) + P) * E + L * (4 * E * E + 2 * E * I + 9 * E + I) + 4 * E;
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
