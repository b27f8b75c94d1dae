//===- GraphBuilder.h - the builtin builders' shared helpers ----*- C++ -*-===//
//
// What the builtin model builders (Models.cpp: GPT-2, BERT; Llama.cpp) share:
// a GraphBuilder that writes @forward's ops and collects its parameters and
// inputs, and the Llama family's config hooks that parseModelConfig
// (ModelConfig.cpp) and buildModel call. Internal to frontend/.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_GRAPHBUILDER_H
#define MLC_FRONTEND_GRAPHBUILDER_H

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcDialect.h"
#include "frontend/Models.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>
#include <string>

namespace mlc {
namespace detail {

using namespace mlir;

using Preset = std::map<std::string, double>;

/// Shortest faithful text of a config number: 768, 0.1, 1e-05, 0.0141421.
std::string formatNumber(double v);

/// Whether a builtin config key is a boolean (held as 0 or 1; true and false
/// on the command line and in config.json).
bool isBooleanKey(llvm::StringRef key);

/// Emits graph ops into @forward and collects its parameters and inputs as
/// block arguments in order of creation.
class GraphBuilder {
public:
  /// @forward is located at the `family` (gpt2, bert, llama), and so are
  /// the step functions the passes derive from it; the module is nowhere.
  GraphBuilder(MLIRContext &ctx, Type dtype, llvm::StringRef family)
      : ctx(ctx), b(&ctx), loc(NameLoc::get(b.getStringAttr(family))), dtype(dtype) {
    module = ModuleOp::create(b.getUnknownLoc());
    auto fn = b.create<func::FuncOp>(loc, mlc::kForwardFn, b.getFunctionType({}, {}));
    module->push_back(fn);
    func = fn;
    block = func.addEntryBlock();
    b.setInsertionPointToStart(block);
  }

  /// Names the ops built from here on after where they sit in the model:
  /// the family and Hugging Face's module path (`gpt2.h.3.attn`,
  /// `llama.layers.0.mlp`). The NameLoc is what --mlir-print-debuginfo
  /// prints, what a verifier or pass error on the op (or on the gradient
  /// autodiff builds from it) names, and it changes no kernel.
  void at(const llvm::Twine &where) { loc = NameLoc::get(StringAttr::get(&ctx, where)); }

  /// A parameter with HF's initialization: `init` is normal:STD, zeros or
  /// ones; by default matrices draw from N(0, 0.02) and vectors start at 0.
  Value param(llvm::StringRef name, ArrayRef<int64_t> shape, std::string init = "") {
    if (init.empty())
      init = shape.size() >= 2 ? "normal:0.02" : "zeros";
    Value v = argument("mlc.param", name, RankedTensorType::get(shape, dtype));
    argAttrs.back() = b.getDictionaryAttr(
        {b.getNamedAttr("mlc.param", b.getStringAttr(name)),
         b.getNamedAttr("mlc.init", b.getStringAttr(init))});
    return v;
  }
  Value input(llvm::StringRef name, ArrayRef<int64_t> shape, Type element) {
    return argument("mlc.input", name, RankedTensorType::get(shape, element));
  }

  Value constant(double value) {
    auto type = RankedTensorType::get({}, dtype);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                         type, b.getFloatAttr(dtype, value)));
  }
  Value intConstant(int64_t value, Type element) {
    auto type = RankedTensorType::get({}, element);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getIntegerAttr(element, value)));
  }

  /// x @ w (+ bias); w is [in, out] (Conv1D) or [out, in] (Linear, transposed).
  Value dense(Value x, Value w, Value bias, bool linear) {
    Value y = b.create<MatmulOp>(loc, x, w, /*transpose_lhs=*/false,
                                 /*transpose_rhs=*/linear);
    return bias ? b.create<AddOp>(loc, y, bias).getResult() : y;
  }
  Value layerNorm(Value x, Value w, Value bias, double eps) {
    return b.create<LayerNormOp>(loc, x, w, bias, b.getF64FloatAttr(eps));
  }
  Value dropout(Value x, double ratio) {
    if (ratio == 0)
      return x;
    return b.create<DropoutOp>(loc, x, b.getF64FloatAttr(ratio),
                               b.getI64IntegerAttr(nextSeed++));
  }
  /// Scaled dot-product attention with dropout on the probabilities; `scale`
  /// multiplies the scores (0: the op's default, 1 / sqrt(head dim));
  /// `window` > 0 (causal only): each query sees its last `window` keys.
  Value attention(Value q, Value k, Value v, Value mask, bool causal, double dropout,
                  Value cuSeqlens = Value(), double scale = 0, int64_t window = 0) {
    return b.create<AttentionOp>(loc, q, k, v, mask, cuSeqlens,
                                 causal ? b.getUnitAttr() : UnitAttr(),
                                 scale ? b.getF64FloatAttr(scale) : FloatAttr(),
                                 b.getF64FloatAttr(dropout),
                                 b.getI64IntegerAttr(dropout > 0 ? nextSeed++ : 0),
                                 /*softcap=*/FloatAttr(),
                                 window > 0 ? b.getI64IntegerAttr(window) : IntegerAttr());
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, cast<RankedTensorType>(x.getType())
                                                 .getElementType());
    return b.create<ReshapeOp>(loc, type, x);
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    return b.create<TransposeOp>(loc, x, b.getDenseI64ArrayAttr(perm));
  }

  /// [B, S, E] -> [B, H, S, D]
  Value splitHeads(Value x, int64_t batch, int64_t seq, int64_t heads, int64_t dim) {
    return transpose(reshape(x, {batch, seq, heads, dim}), {0, 2, 1, 3});
  }
  /// [B, H, S, D] -> [B, S, E]
  Value mergeHeads(Value x, int64_t batch, int64_t seq, int64_t hidden) {
    Value t = transpose(x, {0, 2, 1, 3});
    return reshape(t, {batch, seq, hidden});
  }

  void finish(ArrayRef<std::pair<llvm::StringRef, Value>> outputs) {
    SmallVector<Value> values;
    for (auto &[_, v] : outputs)
      values.push_back(v);
    b.create<func::ReturnOp>(loc, values);
    SmallVector<Type> argTypes(block->getArgumentTypes());
    func.setFunctionType(b.getFunctionType(argTypes, ValueRange(values).getTypes()));
    for (auto [i, attrs] : llvm::enumerate(argAttrs))
      func.setArgAttrs(i, attrs);
    for (auto [i, output] : llvm::enumerate(outputs))
      func.setResultAttr(i, "mlc.output", b.getStringAttr(output.first));
  }

  MLIRContext &ctx;
  OpBuilder b;
  Location loc;
  Type dtype;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;

private:
  Value argument(llvm::StringRef kind, llvm::StringRef name, Type type) {
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kind, b.getStringAttr(name))));
    // Located at its name: HF's parameter (transformer.h.0.attn.c_attn.weight)
    // or input (input_ids).
    return block->addArgument(type, NameLoc::get(b.getStringAttr(name)));
  }

  Block *block;
  SmallVector<DictionaryAttr> argAttrs;
  int64_t nextSeed = 1;
};

//===----------------------------------------------------------------------===//
// Packed documents (any causal builder)
//===----------------------------------------------------------------------===//

/// The positions and attention of a causal model's micro-batch [B, S] when
/// its samples are packed documents (BuildOptions::resetPositionIds,
/// resetAttentionMask, Megatron-LM's --reset-position-ids and
/// --reset-attention-mask), and the plain causal forms otherwise. Built
/// after the builder's input_ids and labels: it adds the inputs
/// position_ids [B, S] (i64) and cu_seqlens [B * S + 1] (i32), in that
/// order, only when asked, so a plain model's graph is unchanged.
///
/// With cu_seqlens the micro-batch is one packed stream of B * S tokens:
/// document n is tokens cu[n] .. cu[n + 1] of the flattened [B * S] (a
/// document never crosses a sample: the batch source cuts at both), and
/// attention is the variable-length causal form over it: query i sees keys
/// j <= i of its own document, what Megatron's block-diagonal lower
/// triangular [B, 1, S, S] mask allows, without any S x S tensor. The
/// heads of [B, S, H * D] are then [B * S, H, D], a reshape (a view of the
/// projection's columns) where the padded form transposes to [B, H, S, D].
struct PackedDocuments {
  PackedDocuments(GraphBuilder &g, const BuildOptions &o, int64_t batch, int64_t seq)
      : g(g), batch(batch), seq(seq) {
    Type i64 = g.b.getI64Type();
    if (o.resetPositionIds)
      positions = g.input("position_ids", {batch, seq}, i64);
    else
      positions = g.b.create<IotaOp>(g.loc, RankedTensorType::get({seq}, i64),
                                     g.b.getI64IntegerAttr(0));
    if (o.resetAttentionMask)
      cuSeqlens = g.input("cu_seqlens", {batch * seq + 1}, g.b.getI32Type());
  }

  /// Token positions: position_ids [B, S], or 0..S-1 as [S] (broadcast over
  /// the batch by the embedding or rotary op that takes them).
  Value positions;
  /// The documents' boundaries, or null for plain causal attention.
  Value cuSeqlens;

  /// [B, S, heads * dim] -> [B * S, heads, dim] (packed) or [B, heads, S, dim].
  Value heads(Value x, int64_t heads, int64_t dim) {
    return cuSeqlens ? g.reshape(x, {batch * seq, heads, dim})
                     : g.splitHeads(x, batch, seq, heads, dim);
  }
  /// The same from the heads' rows [B, S, heads, dim] (a builder that works
  /// on them first, as Llama's rotary does): a reshape when packed, the
  /// transpose to [B, heads, S, dim] otherwise.
  Value headsOfRows(Value x) {
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    return cuSeqlens ? g.reshape(x, {batch * seq, shape[2], shape[3]})
                     : g.transpose(x, {0, 2, 1, 3});
  }
  /// The attention's result back to [B, S, hidden].
  Value merge(Value a, int64_t hidden) {
    return cuSeqlens ? g.reshape(a, {batch, seq, hidden}) : g.mergeHeads(a, batch, seq, hidden);
  }
  /// Causal attention over heads() of q, k and v (`scale` and `window` as
  /// GraphBuilder::attention's).
  Value attention(Value q, Value k, Value v, double dropout, double scale = 0,
                  int64_t window = 0) {
    return g.attention(q, k, v, /*mask=*/Value(), /*causal=*/true, dropout, cuSeqlens, scale,
                       window);
  }

private:
  GraphBuilder &g;
  int64_t batch, seq;
};

//===----------------------------------------------------------------------===//
// The Llama family (Llama.cpp)
//===----------------------------------------------------------------------===//

/// The llama family's llama3 rope scaling (Llama 3.1, 3.2), HF's
/// rope_scaling {rope_type: llama3, factor, low_freq_factor,
/// high_freq_factor, original_max_position_embeddings} as config keys: all
/// four or none (no scaling).
inline constexpr const char *kRopeScalingFactor = "rope_scaling_factor";
inline constexpr const char *kRopeScalingLowFreqFactor = "rope_scaling_low_freq_factor";
inline constexpr const char *kRopeScalingHighFreqFactor = "rope_scaling_high_freq_factor";
inline constexpr const char *kRopeScalingOriginalMax =
    "rope_scaling_original_max_position_embeddings";

/// Presets of `mlc ... llama --config`: tiny and real checkpoints' shapes.
const std::map<std::string, Preset> &llamaPresets();

/// The defaults of HF's LlamaConfig (model_type llama) or Qwen2Config
/// (qwen2: qkv_bias) for the keys an HF config.json leaves out.
Preset llamaHFDefaults(llvm::StringRef modelType);

/// Checks a llama config after its keys are set (kinds of values, head
/// counts) and resolves head_dim = 0 to hidden_size / num_attention_heads.
llvm::Error checkLlamaConfig(ModelConfig &config);

/// Parameters and per-token activation values of a llama training step, for
/// buildModel's memory estimate.
double llamaParameterCount(const ModelConfig &config);
double llamaActivationsPerToken(const ModelConfig &config, int64_t seqLen);

/// LlamaForCausalLM (and Qwen2ForCausalLM through qkv_bias and
/// tie_word_embeddings) as @forward -> (loss, logits).
OwningOpRef<ModuleOp> buildLlama(MLIRContext &ctx, const ModelConfig &config,
                                 const BuildOptions &options, Type dtype);

} // namespace detail
} // namespace mlc

#endif // MLC_FRONTEND_GRAPHBUILDER_H
