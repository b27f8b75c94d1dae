//===- OnnxAliases.cpp - tied parameters of a torch.export ONNX file -------===//
//
// The tie rule and where its facts are read: OnnxAliases.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxAliases.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <set>

namespace mlc {
namespace {

constexpr const char *kScopesKey = "pkg.torch.onnx.name_scopes";

} // namespace

std::vector<std::string> quotedStrings(llvm::StringRef text) {
  std::vector<std::string> all;
  for (size_t at = text.find('\''); at != llvm::StringRef::npos;) {
    size_t end = text.find('\'', at + 1);
    if (end == llvm::StringRef::npos)
      break;
    all.push_back(text.slice(at + 1, end).str());
    at = text.find('\'', end + 1);
  }
  return all;
}

std::vector<std::string> moduleScopes(llvm::StringRef text) {
  std::vector<std::string> all = quotedStrings(text);
  if (!all.empty())
    all.pop_back();
  llvm::erase_if(all, [](const std::string &s) { return s.empty(); });
  return all;
}

std::vector<std::string>
nearestReads(llvm::StringRef target,
             const std::map<std::string, std::vector<std::vector<std::string>>> &readIn) {
  llvm::StringRef module, attr;
  std::tie(module, attr) = target.rsplit('.');
  if (attr.empty()) // a parameter of the root module: no scope names it
    std::swap(module, attr);
  int best = -1;
  std::vector<std::string> at;
  for (const auto &[name, chains] : readIn) {
    if (!llvm::StringRef(name).ends_with("." + attr.str()) && name != attr)
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
      at = {name};
    } else if (depth == best) {
      at.push_back(name);
    }
  }
  return at;
}

OnnxAliases onnxParameterAliases(const onnx::ModelProto &model,
                                 const ExportSignature &signature) {
  OnnxAliases result;
  const onnx::GraphProto &g = model.graph();
  std::set<std::string> initializers;
  for (const auto &t : g.initializer())
    initializers.insert(t.name());
  std::vector<std::string> missing;
  for (const SignatureInput &in : signature)
    if (in.kind == "PARAMETER" && !initializers.count(in.target))
      missing.push_back(in.target);
  if (missing.empty())
    return result;

  // Initializer -> the modules the nodes reading it ran in, each with its
  // depth: the scope chain from the root down to the innermost module.
  std::map<std::string, std::vector<std::vector<std::string>>> readIn;
  for (const auto &n : g.node()) {
    auto meta = onnxNodeMetadata(n);
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
    if (attr.empty())
      std::swap(module, attr);
    std::vector<std::string> at = nearestReads(t, readIn);
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
