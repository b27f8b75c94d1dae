//===- OnnxAliases.h - tied parameters of a torch.export ONNX file -*- C++ -*-===//
//
// torch's dynamo exporter keeps a tensor the model holds under two names (a
// tied embedding: GPT-2's `transformer.wte.weight` is `lm_head.weight`)
// once, as one initializer. The file still says so: the graph's metadata
// entry `pkg.torch.export.ExportedProgram.graph_signature` lists every
// parameter of the model (`p_x: PARAMETER target='NAME'`), and each node's
// metadata (`pkg.torch.onnx.name_scopes`) the modules it ran in.
//
// The tie rule: a signature target `M.P` (module M, attribute P) that is no
// initializer is an alias of the initializer `I` named `*.P` that a node
// reads in module M or the nearest module below it: the embedding's Gather
// reads `lm_head.weight` in `transformer.wte` (depth 0), BERT's decoder
// reads `cls.predictions.decoder.bias` one module below `cls.predictions`
// (whose `bias` it is), nearer than `cls.predictions.transform.dense.bias`.
// A target with no such initializer, or two at the same depth, gets no
// alias and a note. A file with no signature (the TorchScript exporter's)
// has no aliases.
//
// The graph's and nodes' metadata_props (GraphProto field 16, NodeProto
// field 9) are newer than some onnx protos mlc is built with: they are read
// through reflection where the proto knows them, else from the unknown
// fields; an entry that does not parse is skipped.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_ONNX_ONNXALIASES_H
#define MLC_FRONTEND_ONNX_ONNXALIASES_H

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

namespace mlc {

struct OnnxAliases {
  /// Initializer name -> the other names of that parameter, in signature
  /// order.
  std::map<std::string, std::vector<std::string>> byInitializer;
  /// Why some target has no alias ("" when every one was placed, or when
  /// the file has no signature).
  std::string note;
  /// The file carries a torch.export graph signature.
  bool hasSignature = false;
};

OnnxAliases onnxParameterAliases(const onnx::ModelProto &model);

/// The graph's metadata_props by key (GraphProto field 16, known to this
/// proto or kept as an unknown field); entries that do not parse are left out.
std::map<std::string, std::string> onnxGraphMetadata(const onnx::GraphProto &g);

} // namespace mlc

#endif // MLC_FRONTEND_ONNX_ONNXALIASES_H
