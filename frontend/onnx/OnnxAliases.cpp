//===- OnnxAliases.cpp - tied parameters of a torch.export ONNX file -------===//
//
// The tie rule and where its facts are read: OnnxAliases.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxAliases.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include <set>

namespace mlc {
namespace {

constexpr const char *kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";
constexpr const char *kScopesKey = "pkg.torch.onnx.name_scopes";
constexpr int kGraphMetadataField = 16, kNodeMetadataField = 9;

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

/// The `target='NAME'` of each `NAME: PARAMETER target=...` line.
std::vector<std::string> signatureParameters(llvm::StringRef signature) {
  std::vector<std::string> out;
  while (!signature.empty()) {
    auto [line, rest] = signature.split('\n');
    signature = rest;
    size_t at = line.find(": PARAMETER target=");
    if (at == llvm::StringRef::npos)
      continue;
    llvm::StringRef t = line.drop_front(at + 19).trim();
    if (t.size() >= 2 && (t.front() == '\'' || t.front() == '"') && t.back() == t.front())
      out.push_back(t.drop_front().drop_back().str());
  }
  return out;
}

/// The module scopes of a node: "['', 'transformer', 'transformer.wte',
/// 'embedding']" -> {transformer, transformer.wte} (the last entry is the
/// FX node's own name, the first the root module).
std::vector<std::string> moduleScopes(llvm::StringRef text) {
  std::vector<std::string> all;
  for (size_t at = text.find('\''); at != llvm::StringRef::npos;) {
    size_t end = text.find('\'', at + 1);
    if (end == llvm::StringRef::npos)
      break;
    all.push_back(text.slice(at + 1, end).str());
    at = text.find('\'', end + 1);
  }
  if (!all.empty())
    all.pop_back();
  llvm::erase_if(all, [](const std::string &s) { return s.empty(); });
  return all;
}

} // namespace

std::map<std::string, std::string> onnxGraphMetadata(const onnx::GraphProto &g) {
  return metadataEntries(g, kGraphMetadataField);
}

OnnxAliases onnxParameterAliases(const onnx::ModelProto &model) {
  OnnxAliases result;
  const onnx::GraphProto &g = model.graph();
  auto graphMeta = onnxGraphMetadata(g);
  auto sig = graphMeta.find(kSignatureKey);
  if (sig == graphMeta.end()) {
    for (const auto &p : model.metadata_props())
      if (p.key() == kSignatureKey)
        graphMeta[p.key()] = p.value();
    sig = graphMeta.find(kSignatureKey);
    if (sig == graphMeta.end())
      return result;
  }
  result.hasSignature = true;
  std::set<std::string> initializers;
  for (const auto &t : g.initializer())
    initializers.insert(t.name());
  std::vector<std::string> targets = signatureParameters(sig->second);
  std::vector<std::string> missing;
  for (const std::string &t : targets)
    if (!initializers.count(t))
      missing.push_back(t);
  if (missing.empty())
    return result;

  // Initializer -> the modules the nodes reading it ran in, each with its
  // depth: the scope chain from the root down to the innermost module.
  std::map<std::string, std::vector<std::vector<std::string>>> readIn;
  for (const auto &n : g.node()) {
    auto meta = metadataEntries(n, kNodeMetadataField);
    auto scopes = meta.find(kScopesKey);
    if (scopes == meta.end())
      continue;
    std::vector<std::string> chain = moduleScopes(scopes->second);
    for (const std::string &in : n.input())
      if (initializers.count(in))
        readIn[in].push_back(chain);
  }
  for (const std::string &t : missing) {
    llvm::StringRef module, attr;
    std::tie(module, attr) = llvm::StringRef(t).rsplit('.');
    if (attr.empty()) // a parameter of the root module: no scope names it
      std::swap(module, attr);
    // The nearest reader: depth below `module` of the innermost module of
    // a node that reads a `*.attr` initializer inside `module`.
    int best = -1;
    std::vector<std::string> at;
    for (const auto &[init, chains] : readIn) {
      if (!llvm::StringRef(init).ends_with("." + attr.str()) && init != attr)
        continue;
      int depth = -1;
      for (const auto &chain : chains)
        for (size_t k = 0; k < chain.size(); ++k)
          if (chain[k] == module && (depth < 0 || int(chain.size() - 1 - k) < depth))
            depth = int(chain.size() - 1 - k);
      if (depth < 0)
        continue;
      if (best < 0 || depth < best) {
        best = depth;
        at = {init};
      } else if (depth == best) {
        at.push_back(init);
      }
    }
    if (at.size() == 1) {
      result.byInitializer[at[0]].push_back(t);
      continue;
    }
    result.note += (result.note.empty() ? "" : "; ") + t +
                   (at.empty() ? " (no initializer '*." + attr.str() + "' is read in '" +
                                     module.str() + "')"
                               : " (" + at[0] + " and " + at[1] + " are read as near)");
  }
  if (!result.note.empty())
    result.note = "the graph signature names parameters that are no initializer and not "
                  "known to be tied to one, so --save writes them under no name: " +
                  result.note;
  return result;
}

} // namespace mlc
