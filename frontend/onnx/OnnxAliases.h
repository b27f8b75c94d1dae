//===- OnnxAliases.h - what a torch.export ONNX file says of its inputs -*- C++ -*-===//
//
// The dynamo exporter (torch >= 2.5) stores torch.export's graph signature
// as text under the metadata key
// `pkg.torch.export.ExportedProgram.graph_signature`, in the graph's
// metadata_props (older exports: the model's):
//
//   # inputs
//   p_model_norm_weight: PARAMETER target='model.norm.weight'
//   b_model_rotary_emb_inv_freq: BUFFER target='model.rotary_emb.inv_freq' persistent=False
//   input_ids: USER_INPUT
//
//   # outputs
//   linear_14: USER_OUTPUT
//
// An initializer carries its target's name when the exporter kept it (every
// parameter of an optimize=False export; buffers such as inv_freq in every
// export). The kind tells a trained parameter from a buffer, which mlc keeps
// constant (OnnxSignature.cpp reads it).
//
// The exporter also keeps a tensor the model holds under two names (a tied
// embedding: GPT-2's `transformer.wte.weight` is `lm_head.weight`) once, as
// one initializer. The signature still lists every parameter, and each
// node's metadata (`pkg.torch.onnx.name_scopes`) the modules it ran in.
// The tie rule (OnnxAliases.cpp): a PARAMETER target `M.P` (module M,
// attribute P) that is no initializer is an alias of the initializer `I`
// named `*.P` that a node reads in module M or the nearest module below it:
// the embedding's Gather reads `lm_head.weight` in `transformer.wte` (depth
// 0), BERT's decoder reads `cls.predictions.decoder.bias` one module below
// `cls.predictions` (whose `bias` it is), nearer than
// `cls.predictions.transform.dense.bias`. A target with no such initializer,
// or two at the same depth, gets no alias and a note. A file with no
// signature (the TorchScript exporter's) has no aliases.
//
// The graph's and nodes' metadata_props (GraphProto field 16, NodeProto
// field 9) are newer than some onnx protos mlc is built with (Debian's 1.12):
// they are read through reflection where the proto knows them, else from
// the unknown fields; an entry that does not parse is skipped.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_ONNX_ONNXALIASES_H
#define MLC_FRONTEND_ONNX_ONNXALIASES_H

#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlc {

/// One `# inputs` line of the signature that has a target.
struct SignatureInput {
  /// The FX placeholder (`p_model_norm_weight`), as node metadata names it.
  std::string placeholder;
  /// "PARAMETER", "BUFFER", "CONSTANT_TENSOR", ...
  std::string kind;
  /// The module attribute's name (`model.norm.weight`).
  std::string target;
};
/// The signature's inputs, in signature order; empty when the file carries
/// none.
using ExportSignature = std::vector<SignatureInput>;

/// The signature of `model`: the graph's metadata entry, else the model's.
ExportSignature readExportSignature(const onnx::ModelProto &model);

/// The single-quoted strings of a Python list's text, in order:
/// "['a.b', 'val_5']" -> {a.b, val_5}.
std::vector<std::string> quotedStrings(llvm::StringRef text);

/// The module scopes of a node's `pkg.torch.onnx.name_scopes`: "['',
/// 'transformer', 'transformer.wte', 'embedding']" -> {transformer,
/// transformer.wte} (the last entry is the FX node's own name, the first the
/// root module).
std::vector<std::string> moduleScopes(llvm::StringRef text);

/// A node's metadata_props by key.
std::map<std::string, std::string> onnxNodeMetadata(const onnx::NodeProto &node);
/// A value_info's metadata_props (ValueInfoProto field 4) by key.
std::map<std::string, std::string> onnxValueMetadata(const onnx::ValueInfoProto &value);

/// The tie rule's search: the names among `readIn` (name -> the module
/// chains of the nodes reading it) whose last component is `target`'s
/// attribute and that a node reads in `target`'s module, at the nearest depth
/// below it. One name is the tie; none or two are no tie.
std::vector<std::string>
nearestReads(llvm::StringRef target,
             const std::map<std::string, std::vector<std::vector<std::string>>> &readIn);

struct OnnxAliases {
  /// Initializer name -> the other names of that parameter, in signature
  /// order.
  std::map<std::string, std::vector<std::string>> byInitializer;
  /// Why some target has no alias ("" when every one was placed, or when
  /// the file has no signature).
  std::string note;
};

/// The tie rule on `model`, whose signature is `signature`.
OnnxAliases onnxParameterAliases(const onnx::ModelProto &model,
                                 const ExportSignature &signature);

} // namespace mlc

#endif // MLC_FRONTEND_ONNX_ONNXALIASES_H
