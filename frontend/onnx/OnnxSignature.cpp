//===- OnnxSignature.cpp - torch.export's graph signature -----------------===//
//
// Where the signature is stored and how it reads: OnnxAliases.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxAliases.h"

#include "llvm/ADT/StringRef.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

namespace mlc {
namespace {

constexpr const char *kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";
constexpr int kGraphMetadataField = 16, kNodeMetadataField = 9, kValueInfoMetadataField = 4;

/// The key/value entries of the repeated StringStringEntryProto field
/// `number` of `m`, known to this proto or not.
std::map<std::string, std::string> metadataEntries(const google::protobuf::Message &m,
                                                   int number) {
  std::map<std::string, std::string> out;
  auto add = [&](const std::string &bytes) {
    onnx::StringStringEntryProto e;
    if (e.ParseFromString(bytes))
      out.emplace(e.key(), e.value());
  };
  const google::protobuf::FieldDescriptor *fd = m.GetDescriptor()->FindFieldByNumber(number);
  const google::protobuf::Reflection *r = m.GetReflection();
  if (fd && fd->is_repeated() && fd->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
    for (int i = 0, n = r->FieldSize(m, fd); i < n; ++i)
      add(r->GetRepeatedMessage(m, fd, i).SerializeAsString());
    return out;
  }
  const google::protobuf::UnknownFieldSet &unknown = r->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    if (f.number() == number && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      add(f.length_delimited());
  }
  return out;
}

/// The signature's text, or "" when the file has none.
std::string signatureText(const onnx::ModelProto &model) {
  auto graphMeta = metadataEntries(model.graph(), kGraphMetadataField);
  if (auto it = graphMeta.find(kSignatureKey); it != graphMeta.end())
    return it->second;
  for (const auto &p : model.metadata_props())
    if (p.key() == kSignatureKey)
      return p.value();
  return "";
}

} // namespace

ExportSignature readExportSignature(const onnx::ModelProto &model) {
  ExportSignature sig;
  std::string text = signatureText(model);
  bool inInputs = false;
  for (llvm::StringRef rest = text; !rest.empty();) {
    llvm::StringRef line;
    std::tie(line, rest) = rest.split('\n');
    line = line.trim();
    if (line.starts_with("#")) {
      inInputs = line == "# inputs";
      continue;
    }
    // NAME: KIND target='TARGET' ...
    auto [placeholder, spec] = line.split(": ");
    auto [kind, attrs] = spec.split(' ');
    size_t at = attrs.find("target='");
    if (!inInputs || kind.empty() || at == llvm::StringRef::npos)
      continue;
    llvm::StringRef target = attrs.drop_front(at + 8);
    size_t end = target.find('\'');
    if (end != llvm::StringRef::npos)
      sig.push_back({placeholder.trim().str(), kind.str(), target.take_front(end).str()});
  }
  return sig;
}

std::map<std::string, std::string> onnxNodeMetadata(const onnx::NodeProto &node) {
  return metadataEntries(node, kNodeMetadataField);
}

std::map<std::string, std::string> onnxValueMetadata(const onnx::ValueInfoProto &value) {
  return metadataEntries(value, kValueInfoMetadataField);
}

} // namespace mlc
