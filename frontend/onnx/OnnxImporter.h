//===- OnnxImporter.h - ONNX models as mlc graphs --------------*- C++ -*-===//
//
// Imports an ONNX model (a torch.onnx.export of a HuggingFace GPT-2 or BERT,
// opsets 14-23) as the `@forward` function every frontend hands the compiler
// (frontend/Frontend.h):
//
// - floating initializers of rank >= 1 become parameters under their ONNX
//   names (HuggingFace's when the export keeps them); a weight used twice
//   stays one parameter. `Identity(initializer)` nodes, which PyTorch's
//   eval-mode exporter leaves where it merged equal initializers, become
//   parameters of their own, initialized from the kept one: they were
//   separate weights in the model. Integer, boolean and scalar initializers
//   (position ids, causal masks, mask values) are constants.
// - symbolic input dims (dim_param, unified by name) are bound to sizes:
//   `dims` first, then a name first seen at position 0 of an input is the
//   micro-batch and at position 1 the sequence length. Every shape is then
//   static: the Shape/Gather/Concat/Reshape/Range arithmetic of an export is
//   evaluated while importing.
// - each node becomes mlc graph ops through the handler its op type and
//   opset select (OnnxNode.h); single-op Gelu, LayerNormalization and
//   Attention become mlc.gelu / mlc.layer_norm / mlc.attention, decomposed
//   ones stay decomposed here and are recognized by `mlc-recognize`.
// - a parameter torch.export knew under more names (a tied embedding) keeps
//   its initializer's name and lists the others as `mlc.aliases`
//   (OnnxAliases.h): `mlc train --save` writes each with the same values.
//
// Every error names the file and, for a node, its name, op type and opset.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_ONNX_ONNXIMPORTER_H
#define MLC_FRONTEND_ONNX_ONNXIMPORTER_H

#include "support/TensorIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlc {

struct OnnxImportOptions {
  /// Sizes of symbolic dims by name; then the roles below.
  std::map<std::string, int64_t> dims;
  int64_t microBatch = 8;
  int64_t seqLen = 128;
  /// seqLen is a default, not the user's: it is capped at the rows of a
  /// learned position table (an initializer named like HuggingFace's,
  /// `*wpe.weight` or `*position_embeddings.weight`).
  bool capSeqLenAtPositions = false;
  /// "f32" or "f64": the element type of every floating tensor.
  std::string dtype = "f32";
  /// Which output is the training loss: the name of a scalar output
  /// (default "loss"), or "causal-lm" / "masked-lm" to compute it from the
  /// `logits` output against the input `labels` (HuggingFace's shifted
  /// next-token loss, or the masked-LM loss with ignore index -100), or
  /// "auto": the output 'loss' where the model has one, else @forward is
  /// marked `mlc.infer_loss` and mlc-infer-loss picks the kind from the
  /// recognized attention.
  std::string loss = "loss";
  std::string labels = "labels";
  std::string logits = "logits";
  /// The most elements a tensor computed while importing (a mask, a shape)
  /// may hold; initializers may hold 64 times as many.
  int64_t foldLimit = int64_t(1) << 24;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Initial parameter values by parameter name (package weights).
  std::vector<std::pair<std::string, rt::HostTensor>> weights;
  /// One line for logs and manifests: opset, nodes, parameters, dims.
  std::string summary;
  /// Set when capSeqLenAtPositions shortened the sequence: the table's
  /// name and the sequence length used (its rows).
  std::string seqLenCappedBy;
  int64_t seqLenCappedTo = 0;
  /// Parameter -> its other names (tied weights the export keeps once;
  /// OnnxAliases.h), also on @forward's argument as `mlc.aliases`; and why
  /// a parameter the graph signature names got no alias ("" if none).
  std::map<std::string, std::vector<std::string>> aliases;
  std::string aliasNote;
};

/// Imports the model in `path`.
llvm::Expected<ImportedModel> importOnnxFile(mlir::MLIRContext &ctx, const std::string &path,
                                             const OnnxImportOptions &options);
/// Imports serialized ModelProto bytes; `name` stands for the file in errors.
llvm::Expected<ImportedModel> importOnnxBytes(mlir::MLIRContext &ctx, llvm::StringRef bytes,
                                              const std::string &name,
                                              const OnnxImportOptions &options);

/// True when `path` names an ONNX model (by its extension).
bool isOnnxPath(llvm::StringRef path);

} // namespace mlc

#endif // MLC_FRONTEND_ONNX_ONNXIMPORTER_H
