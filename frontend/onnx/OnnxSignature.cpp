//===- OnnxSignature.cpp - torch.export's graph signature -----------------===//
//
// The dynamo exporter (torch >= 2.5) stores torch.export's graph signature
// in the graph's metadata_props (GraphProto field 16, newer than Debian's
// onnx 1.12 protos, which keep it as an unknown field) under the key
// `pkg.torch.export.ExportedProgram.graph_signature`, as text:
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
// constant.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxAliases.h"
#include "frontend/onnx/OnnxNode.h"

namespace mlc::onnximport {

namespace {

constexpr const char *kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";

/// The signature's text, or "" when the graph has none.
std::string signatureText(const onnx::GraphProto &g) {
  auto meta = onnxGraphMetadata(g);
  auto it = meta.find(kSignatureKey);
  return it == meta.end() ? "" : it->second;
}

} // namespace

std::map<std::string, std::string> exportedInputKinds(const onnx::GraphProto &g) {
  std::map<std::string, std::string> kinds;
  llvm::SmallVector<llvm::StringRef> lines;
  std::string text = signatureText(g);
  llvm::StringRef(text).split(lines, '\n');
  bool inputs = false;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.starts_with("#")) {
      inputs = line == "# inputs";
      continue;
    }
    // NAME: KIND target='TARGET' ...
    auto [name, rest] = line.split(": ");
    auto [kind, attrs] = rest.split(' ');
    size_t at = attrs.find("target='");
    if (!inputs || kind.empty() || at == llvm::StringRef::npos)
      continue;
    llvm::StringRef target = attrs.drop_front(at + 8);
    target = target.take_until([](char ch) { return ch == '\''; });
    kinds[target.str()] = kind.str();
  }
  return kinds;
}

} // namespace mlc::onnximport
