//===- OnnxParameters.h - which parameter each initializer read is -*- C++ -*-===//
//
// A model trains the parameters torch had, each on its own, under its own
// name. The file's initializers do not say that by themselves:
//
// - the default exporter (optimize=True) merges initializers of equal value,
//   so in a freshly initialized model every LayerNorm weight (all ones) is
//   one initializer, and every zero bias another;
// - its optimizer removes a Gemm's zero bias (rule RemoveOptionalBiasFromGemm)
//   and folds a linear layer's transposed weight into a new initializer
//   (`val_N`, the weight's transpose);
// - a weight torch tied (GPT-2's `lm_head.weight` is `transformer.wte.weight`)
//   is one initializer in every export.
//
// The dynamo exporter writes the facts that tell these apart: torch.export's
// graph signature (each PARAMETER's FX placeholder and target, OnnxAliases.h)
// and, on each node, the FX node it came from (`pkg.torch.onnx.fx_node`, e.g.
// `%layer_norm_1 = call_function[target=torch.ops.aten.layer_norm.default](
// args = (%add_6, [64], %p_transformer_h_0_ln_2_weight, ...))`). The rule:
//
// 1. A node's float initializer input is the PARAMETER that its FX node reads
//    (matched by name, else as the only one left, else by the attribute name
//    after the last '.'); an input no PARAMETER of its FX node claims is a
//    constant, never trained (OLMo's weightless LayerNorm gets a ones vector).
//    Two reads of one initializer that claim different parameters are two
//    parameters, each starting from that value: torch trains them apart.
// 2. The initializer holds the parameter's transpose where torch's op uses
//    the parameter transposed and the ONNX node does not (aten.linear's weight
//    as MatMul's B), or the other way round (Gemm's transB). An initializer
//    that is an FX value named for a transposition (`permute_5`: Falcon's
//    `x @ weight.T`), which the optimizer folded from one parameter (its
//    value_info's `pkg.onnxscript.optimizer.folded_from`), is that parameter
//    transposed.
// 3. A Gemm whose FX node reads a bias that no input carries, and which the
//    optimizer's RemoveOptionalBiasFromGemm rewrote, gets that bias back as
//    its input C: a parameter of zeros (the rule removes only zero biases).
// 4. A PARAMETER that no FX node reads is a name of another one (torch.export
//    gives a tied weight one placeholder): the tie rule of OnnxAliases.h,
//    over the parameters' reads.
// 5. A PARAMETER that an FX node reads but no read claims, or that no FX node
//    reads and that ties to none, is refused by name, saying what the file
//    shows of where it went; the file does not hold the parameter:
//    - folded into a constant (Gemma's 1 + w): the constant's value_info
//      lists it in `pkg.onnxscript.optimizer.folded_from`, but neither the
//      operation nor its other operands are left;
//    - read by a computation merged into an equal one (GPT-NeoX's two
//      LayerNorms of one input, equal at initialization): a consumer's FX
//      node still names the merged FX value (`%layer_norm_1`), which no node
//      computes, but nothing says which parameters that value computed with.
//    Before the rule runs, the importer gives back the ones the file does
//    fix (OnnxRecover.cpp): a `weight + 1.0` that the reading module's class
//    says it is, and a merged computation whose parameters one module alone
//    can hold; the rest are refused here.
//
// A file without the signature or the FX metadata (the TorchScript exporter,
// older dynamo exports) is not attributed: each float initializer is a
// parameter under its own name, as it always was.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_ONNX_ONNXPARAMETERS_H
#define MLC_FRONTEND_ONNX_ONNXPARAMETERS_H

#include "frontend/onnx/OnnxAliases.h"

#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mlc {

/// Node metadata: torch's FX node, the module scopes it ran in and their
/// classes; value_info metadata: what the optimizer folded a constant from.
constexpr const char *kFxNodeKey = "pkg.torch.onnx.fx_node";
constexpr const char *kScopesKey = "pkg.torch.onnx.name_scopes";
constexpr const char *kClassesKey = "pkg.torch.onnx.class_hierarchy";
constexpr const char *kFoldedKey = "pkg.onnxscript.optimizer.folded_from";

/// What a node's `pkg.torch.onnx.fx_node` says: the FX value it computes
/// (`linear_2`), the op (`torch.ops.aten.linear.default`) and the FX values
/// its arguments name, in order.
struct FxNode {
  std::string name, op;
  /// Each top-level argument's FX value (`%layer_norm_1` -> layer_norm_1),
  /// "" for a literal or a list.
  std::vector<std::string> args;
  /// Each top-level argument as written (`%input_ids`, `1`, `[64]`, `True`).
  std::vector<std::string> text;
};
FxNode parseFxNode(llvm::StringRef text);

/// An FX value's name without torch's `_N` suffix (`layer_norm_1` ->
/// `layer_norm`): torch names a call_function node after its op.
llvm::StringRef fxStem(llvm::StringRef fxValue);

/// One read of a parameter by a node's input.
struct ParameterRead {
  /// The parameter's name, torch's target (`model.layers.0.mlp.up_proj.weight`).
  std::string target;
  /// The initializer holds the parameter transposed (a 2-D tensor).
  bool transposed = false;
};

struct ParameterPlan {
  /// The file says which parameter each read is (a signature with
  /// PARAMETERs and FX nodes on the graph's nodes).
  bool attributed = false;
  /// (node index, input index) -> the parameter it reads. In an attributed
  /// file a float initializer input not listed here is a constant.
  std::map<std::pair<int, int>, ParameterRead> reads;
  /// Node index -> the zero bias (parameter) the optimizer removed from
  /// that Gemm.
  std::map<int, std::string> removedBias;
  /// Parameter -> its other names (tied), in signature order.
  std::map<std::string, std::vector<std::string>> aliases;
  /// Every PARAMETER target of the signature, in signature order.
  std::vector<std::string> parameters;
};

/// The rule above on `model`, whose signature is `signature`; `floatInits`
/// the initializers that may be parameters (float, rank >= 1, not a
/// BUFFER). Errors name `file`, the parameter and the node.
llvm::Expected<ParameterPlan> planParameters(const onnx::ModelProto &model,
                                             const ExportSignature &signature,
                                             const std::set<std::string> &floatInits,
                                             const std::string &file);

/// torch's `padding_idx` of the lookup whose FX node (`pkg.torch.onnx.
/// fx_node`) `node` carries: `aten.embedding.default(args = (%w, %ids, 1))`
/// is 1; none where the FX node is no aten.embedding, has no padding_idx or
/// -1 (nn.Embedding without one), or the node has no FX metadata (then the
/// file cannot say: TorchScript exports train every row). A lookup with
/// scale_grad_by_freq, or a padding_idx that is no integer, is an error
/// that quotes the FX node.
llvm::Expected<std::optional<int64_t>> torchEmbeddingPadding(const onnx::NodeProto &node);

} // namespace mlc

#endif // MLC_FRONTEND_ONNX_ONNXPARAMETERS_H
