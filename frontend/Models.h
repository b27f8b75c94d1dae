//===- Models.h - builtin GPT-2, BERT and Llama graphs ---------*- C++ -*-===//
//
// Builders for HuggingFace's GPT2LMHeadModel, BertForMaskedLM and
// LlamaForCausalLM (Qwen2ForCausalLM through its keys) as mlc graphs.
// Parameter and input names follow HF checkpoints exactly, so weights move
// between mlc and PyTorch by name.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_MODELS_H
#define MLC_FRONTEND_MODELS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace mlc {

/// A model's hyper-parameters under HF config key names. `family` is "gpt2",
/// "bert" or "llama"; `values` holds every key of that family (numbers as
/// doubles, booleans as 0 or 1). Llama's keys are LlamaConfig's plus
/// `qkv_bias` (biases on q/k/v only, Qwen2's layout; `attention_bias` puts
/// them on o_proj too, as LlamaConfig does).
struct ModelConfig {
  std::string family;
  std::string preset;
  std::map<std::string, double> values;

  int64_t get(const std::string &key) const { return int64_t(values.at(key)); }
  double getFloat(const std::string &key) const { return values.at(key); }
  /// "n_layer=2, n_embd=128, ..." for logs and manifests.
  std::string describe() const;
};

/// Parses `--config PRESET[,key=value...]` for a family. Unknown presets,
/// unknown keys and malformed values are errors that list what is accepted.
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef family,
                                             llvm::StringRef spec);

/// The config.json of a Hugging Face model directory for `config`:
/// model_type, architectures and every key the builtin model was built
/// with, as transformers writes them (booleans as true/false, n_inner 0 as
/// null), so that from_pretrained builds the same model and mlc's
/// `--config DIR` reads it back. The Llama family's class follows the keys:
/// Qwen3 (qk_norm), Qwen2 (qkv_bias), Mistral (sliding_window), else
/// Llama. Empty, with the reason in `whyNot`, for a config no transformers
/// class builds (Qwen2's biases with a window, say).
std::string hfConfigJson(const ModelConfig &config, std::string &whyNot);

/// Shapes and element type of the graph to build.
struct BuildOptions {
  int64_t microBatch = 8;
  int64_t seqLen = 128;
  /// "f32" or "f64".
  std::string dtype = "f32";
  /// BERT only: unpadded batches, the micro-batch's sequences packed into one
  /// dynamic token dimension (at most micro-batch x seq-len tokens) with
  /// their boundaries in cu_seqlens.
  bool varlen = false;
  /// Causal models trained on packed documents (Megatron-LM's
  /// --reset-attention-mask): a token attends only to the earlier tokens of
  /// its own document. Attention takes the variable-length causal form over
  /// the micro-batch's B x S tokens, the documents' boundaries coming in the
  /// input cu_seqlens [B * S + 1] (int32; entries past the last document
  /// repeat B * S: empty sequences). No S x S mask is built.
  bool resetAttentionMask = false;
  /// Megatron-LM's --reset-position-ids: the positions come from the input
  /// position_ids [B, S] (restarting at 0 after each EOD) instead of 0..S-1.
  bool resetPositionIds = false;
};

/// Builds `func.func @forward(params..., inputs...) -> (loss, logits)`.
/// Parameters carry `mlc.param = "<HF name>"`, inputs `mlc.input = "<name>"`,
/// results `mlc.output = "loss" | "logits"`.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildModel(mlir::MLIRContext &ctx, const ModelConfig &config,
           const BuildOptions &options);

} // namespace mlc

#endif // MLC_FRONTEND_MODELS_H
