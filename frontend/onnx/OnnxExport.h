//===- OnnxExport.h - trained weights back into an ONNX model --*- C++ -*-===//
//
// The way back from training (what ONNX Runtime Training offered before its
// deprecation): an imported model's parameters are its initializers, under
// their ONNX names (OnnxImporter.h), so `mlc train MODEL.onnx --save W` writes
// a safetensors file keyed by those names, and the model with each named
// initializer replaced by its trained value is the trained model, which any
// ONNX runtime runs.
//
// - A weight named like an initializer replaces it: same element type and
//   shape, else an error naming the tensor and both types or shapes.
// - A weight named like the output of an `Identity(initializer)` node (a
//   parameter the eval-mode exporter merged, which the importer untied) turns
//   that node into an initializer of its own, so the two weights stay apart.
// - A weight the model has neither for is an error; initializers the file
//   does not name stay as they were (their count is reported).
//
// A file that says which parameter each initializer read is (torch.export's
// signature and FX node metadata, OnnxParameters.h) is written by that rule
// instead: the weights are named by torch's parameters (as `--save` writes
// them); each read gets an initializer of its parameter's trained value,
// `NAME`, or `NAME.T` where the node reads the transpose (a weight the
// exporter's optimizer folded transposed); a zero bias the optimizer removed
// from a Gemm comes back as its input C; initializers that only merged or
// folded copies were, which no node reads any more, go (with their
// value_info).
//
// The parameters the default exporter's optimizer folded into a constant or
// merged into an equal computation (Gemma's `x * (1 + weight)`, GPT-NeoX's
// two LayerNorms of one input), which the importer gives back where the file
// fixes them, are given back in the model written by the same code
// (recoverLostParameters, OnnxRecover.cpp): its `Add(weight, one)` and
// cloned `LayerNormalization` nodes read initializers under torch's names,
// which hold the trained values, so the written model computes what mlc
// trained and imports with the same parameters. What the importer refuses
// (a parameter the file does not fix) is refused here with its message.
//
// The replaced initializers are written inline (raw_data). An initializer
// kept in external data is refused: the output would point at files beside
// the input model.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_ONNX_ONNXEXPORT_H
#define MLC_FRONTEND_ONNX_ONNXEXPORT_H

#include "support/TensorIO.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>

namespace mlc {

struct OnnxExportResult {
  /// The serialized ModelProto.
  std::string bytes;
  /// Initializers given the weights' values (`untied` of them new, in place
  /// of an Identity node), and those left as they were.
  int64_t replaced = 0, untied = 0, kept = 0;
  /// Parameters the exporter's optimizer had folded or merged, given back
  /// as nodes of their own (OnnxRecover.cpp).
  int64_t recovered = 0;
};

/// Replaces the initializers of the serialized ModelProto `model` by
/// `weights`. `modelName` and `weightsName` stand for the files in errors;
/// `modelDir` is where the model's external data lies, which the recovery
/// reads in files with a graph signature ("" refuses it there).
llvm::Expected<OnnxExportResult>
replaceOnnxInitializers(llvm::StringRef model, const std::string &modelName,
                        const std::map<std::string, rt::HostTensor> &weights,
                        const std::string &weightsName, const std::string &modelDir = "");

/// The same over files: reads `modelPath` and the safetensors `weightsPath`
/// and writes `outputPath` atomically (a temporary file and a rename); an
/// output that is one of the inputs is refused before anything is read.
llvm::Expected<OnnxExportResult> exportOnnxFile(const std::string &modelPath,
                                                const std::string &weightsPath,
                                                const std::string &outputPath);

} // namespace mlc

#endif // MLC_FRONTEND_ONNX_ONNXEXPORT_H
