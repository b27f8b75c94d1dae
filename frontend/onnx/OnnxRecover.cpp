//===- OnnxRecover.cpp - parameters the exporter's optimizer folded or merged -===//
//
// The default exporter (optimize=True) loses two kinds of parameter of a
// freshly initialized model (OnnxParameters.h, rule 5). Where the file fixes
// the lost parameter exactly, the importer gives it back before parameters
// are attributed, by editing the graph into what torch computed; the added
// nodes carry no FX metadata and read the recovered parameters under their
// torch names, so rule 1 claims them by name. Anything short of that is left
// as it is, and rule 5 refuses it. `mlc export-onnx` makes the same edits to
// the model it writes (recoverLostParameters, OnnxNode.h; OnnxExport.h).
//
// - A scale folded into a constant (Gemma's `x * (1.0 + weight)`): an
//   initializer C whose value_info's `pkg.onnxscript.optimizer.folded_from`
//   lists exactly one PARAMETER, whose name is torch's FX value of an add
//   (`add_6`), read only by nodes that run in a module whose class is known
//   to compute `weight + 1.0` (kOnePlusWeight) and whose FX nodes read an
//   `add` there: the one C the file holds or, where the exporter merged
//   equal constants, another that no node computes. The file does not hold
//   the folded operand (`val_5`, gone with the Add), so the class says what
//   it was. Each reader gets its module's `weight` (a PARAMETER no FX node
//   reads), starting from w = C - 1 computed in f32 and kept only if
//   w + 1 == C exactly, element by element, and `Add(weight, 1)` in place
//   of C. Several readers of one merged C get one parameter each.
// - A computation merged into an equal one (GPT-NeoX's two LayerNorms of one
//   input, parallel residual): a node R reads the output of node N (torch's
//   `%layer_norm`) where R's FX node reads `%layer_norm_1`, an FX value of
//   the same op that no node computes. The optimizer merges only nodes of
//   equal op, attributes and inputs, so `%layer_norm_1` was N applied to N's
//   inputs with parameters of N's values. Which parameters the file does
//   not say; the nearest module holding N and every such R does, where its
//   class is a layer known to apply norms of its own, each once
//   (kOwnNorms): they are those of its one child module whose parameters of
//   N's attribute names (`weight`, `bias`) no FX node reads. N is cloned
//   with those parameters, starting from N's values, and those readers read
//   the clone. Two such children is an error naming both; none, or a layer
//   of another class, is left to rule 5.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxNode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

namespace mlc::onnximport {
namespace {

/// transformers' norm classes whose forward is `x * (1.0 + weight)`
/// (`output * (1.0 + self.weight.float())` in GemmaRMSNorm.forward and
/// Gemma2RMSNorm.forward): the folded constant is weight + 1.0 in f32.
constexpr const char *kOnePlusWeight[] = {
    "transformers.models.gemma.modeling_gemma.GemmaRMSNorm",
    "transformers.models.gemma2.modeling_gemma2.Gemma2RMSNorm",
};

/// transformers' layers whose forward applies norms of their own, each
/// once, to one input: GPTNeoXLayer with use_parallel_residual
/// (`self.attention(self.input_layernorm(hidden_states), ...)` and
/// `self.mlp(self.post_attention_layernorm(hidden_states))`). A computation
/// merged into one of them, inside such a layer, was another of its own.
constexpr const char *kOwnNorms[] = {
    "transformers.models.gpt_neox.modeling_gpt_neox.GPTNeoXLayer",
};

/// What the graph says of each node: its FX node, its module chain (root
/// excluded) and each of those modules' class.
struct NodeFacts {
  FxNode fx;
  std::vector<std::string> scopes, classes;
  std::string moduleClass; // the innermost module's
};

std::string attrOf(llvm::StringRef name) {
  auto [head, tail] = name.rsplit('.');
  return tail.empty() ? head.str() : tail.str();
}

std::string moduleOf(llvm::StringRef name) {
  auto [head, tail] = name.rsplit('.');
  return tail.empty() ? "" : head.str();
}

/// A node computing `op` of `inputs` into `output`, with `from`'s
/// attributes and no metadata.
onnx::NodeProto makeNode(const std::string &name, const std::string &op,
                         const std::vector<std::string> &inputs, const std::string &output,
                         const onnx::NodeProto *from = nullptr) {
  onnx::NodeProto n;
  n.set_name(name);
  n.set_op_type(op);
  if (from) {
    n.set_domain(from->domain());
    *n.mutable_attribute() = from->attribute();
  }
  for (const std::string &in : inputs)
    n.add_input(in);
  n.add_output(output);
  return n;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

} // namespace

/// The graph's facts both recoveries read, and the edits they make: inputs
/// renamed, nodes inserted before a node index, applied once both searched
/// the file's graph.
struct Recovery {
  std::string file;
  std::map<std::string, Const> &paramInits;
  LazyParameters *lazy;
  RecoveredParameters found;
  std::map<std::string, std::string> targetOf; // placeholder -> PARAMETER target
  std::set<std::string> targets, recovered;
  std::vector<NodeFacts> facts;
  /// Every ONNX name and FX value the graph holds; the targets an FX node
  /// reads.
  std::set<std::string> held, fxRead;
  std::map<std::string, int> producer; // ONNX value -> node index
  std::map<std::pair<int, int>, std::string> renamed;
  std::multimap<int, onnx::NodeProto> inserted;

  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), file + ": " + msg);
  }
  /// Whether `name` is a float initializer that may be a parameter.
  bool has(const std::string &name) const {
    return paramInits.count(name) || (lazy && lazy->names.count(name));
  }
  /// `name`'s value, decoded when first read; null when has(name) is false.
  llvm::Expected<const Const *> value(const std::string &name) {
    if (auto it = paramInits.find(name); it != paramInits.end())
      return &it->second;
    if (!lazy || !lazy->names.count(name))
      return nullptr;
    auto c = lazy->decode(name);
    if (!c)
      return c.takeError();
    lazy->names.erase(name);
    return &(paramInits[name] = std::move(*c));
  }
  /// `name`, or a variant of it, that the graph does not hold yet.
  std::string fresh(const std::string &name) {
    std::string n = name;
    for (int k = 1; held.count(n); ++k)
      n = name + "_" + std::to_string(k) + "_recovered";
    held.insert(n);
    return n;
  }
};

namespace {

/// The facts of `g` and `signature`; false when the file has no PARAMETER
/// or no FX metadata (nothing to recover).
bool readFacts(const onnx::GraphProto &g, const ExportSignature &signature, Recovery &r) {
  for (const SignatureInput &in : signature)
    if (in.kind == "PARAMETER") {
      r.targetOf[in.placeholder] = in.target;
      r.targets.insert(in.target);
    }
  r.facts.resize(g.node_size());
  for (const auto &in : g.input())
    r.held.insert(in.name());
  for (const auto &t : g.initializer())
    r.held.insert(t.name());
  for (const SignatureInput &in : signature)
    r.held.insert(in.placeholder);
  bool anyFx = false;
  for (int i = 0; i < g.node_size(); ++i) {
    auto meta = onnxNodeMetadata(g.node(i));
    NodeFacts &f = r.facts[i];
    if (auto it = meta.find(kFxNodeKey); it != meta.end()) {
      f.fx = parseFxNode(it->second);
      anyFx = true;
    }
    if (auto it = meta.find(kScopesKey); it != meta.end())
      f.scopes = moduleScopes(it->second);
    if (auto it = meta.find(kClassesKey); it != meta.end()) {
      // One class per name scope: the root's, each module's, the op.
      std::vector<std::string> classes = quotedStrings(it->second);
      if (classes.size() == f.scopes.size() + 2) {
        f.moduleClass = classes[classes.size() - 2];
        f.classes.assign(classes.begin() + 1, classes.end() - 1);
      }
    }
    r.held.insert(f.fx.name);
    for (const std::string &o : g.node(i).output()) {
      r.held.insert(o);
      r.producer[o] = i;
    }
    for (const std::string &a : f.fx.args)
      if (auto t = r.targetOf.find(a); !a.empty() && t != r.targetOf.end())
        r.fxRead.insert(t->second);
  }
  return !r.targets.empty() && anyFx;
}

/// The edits of `r` made to `g`.
void applyEdits(onnx::GraphProto &g, Recovery &r) {
  for (auto &[at, name] : r.renamed)
    g.mutable_node(at.first)->set_input(at.second, name);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Swap(g.mutable_node());
  for (int i = 0; i <= nodes.size(); ++i) {
    auto [first, last] = r.inserted.equal_range(i);
    for (auto it = first; it != last; ++it)
      *g.add_node() = std::move(it->second);
    if (i < nodes.size())
      *g.add_node() = std::move(nodes[i]);
  }
}

} // namespace

llvm::Error Importer::recoverParameters(onnx::GraphProto &g, const ExportSignature &signature) {
  auto found = recoverLostParameters(g, signature, paramInits, file);
  if (!found)
    return found.takeError();
  if (!found->one.empty()) {
    Const c1;
    c1.f = {1.0};
    values[found->one] = {mlir::Value(), std::make_shared<const Const>(std::move(c1))};
  }
  return llvm::Error::success();
}

namespace {

/// Folded `weight + 1.0` (the file's header).
llvm::Error recoverFolded(const onnx::GraphProto &g, Recovery &r) {
  auto &paramInits = r.paramInits;
  std::string &one = r.found.one;
  for (const auto &vi : g.value_info()) {
    if (!r.has(vi.name()))
      continue;
    auto meta = onnxValueMetadata(vi);
    auto from = meta.find(kFoldedKey);
    if (from == meta.end() || fxStem(vi.name()) != "add")
      continue;
    std::vector<std::string> params;
    for (const std::string &s : quotedStrings(from->second))
      if (r.targets.count(s))
        params.push_back(s);
    if (params.size() != 1)
      continue;
    // Each reader (node, input) and its module's weight, which it scales by.
    std::vector<std::pair<std::pair<int, int>, std::string>> readers;
    bool all = true, named = false;
    for (int i = 0; i < g.node_size() && all; ++i)
      for (int k = 0; k < g.node(i).input_size() && all; ++k) {
        if (g.node(i).input(k) != vi.name())
          continue;
        const NodeFacts &f = r.facts[i];
        std::string arg = size_t(k) < f.fx.args.size() &&
                                  f.fx.args.size() == size_t(g.node(i).input_size())
                              ? f.fx.args[k]
                              : "";
        std::string target = f.scopes.empty() ? "" : f.scopes.back() + ".weight";
        all = llvm::is_contained(kOnePlusWeight, f.moduleClass) && fxStem(arg) == "add" &&
              (arg == vi.name() || !r.held.count(arg)) && r.targets.count(target) &&
              !r.fxRead.count(target) && !r.recovered.count(target) && !r.has(target) &&
              (arg != vi.name() || target == params[0]);
        named |= target == params[0];
        readers.push_back({{i, k}, target});
      }
    if (!all || !named)
      continue;
    auto c = r.value(vi.name());
    if (!c)
      return c.takeError();
    // w = C - 1 in f32, exact: w + 1 gives C back in any precision.
    Const w = **c;
    for (int64_t e = 0; e < w.numel(); ++e) {
      float ce = float((*c)->f[e]), we = ce - 1.0f;
      if (!sameBits(float(double(we) + 1.0), ce) || double(we) + 1.0 != double(ce))
        return r.error(llvm::formatv(
                         "parameter '{0}' is folded into the constant '{1}' (its value_info's "
                         "{2} {3}), computed as weight + 1.0 by its module's class; element "
                         "{4} of '{1}', {5:e}, is 1 + w for no f32 w exactly, so the parameter "
                         "cannot be recovered; export with torch.onnx.export(..., "
                         "optimize=False)",
                         params[0], vi.name(), kFoldedKey, from->second, e, ce)
                         .str());
      w.f[e] = double(we);
    }
    if (one.empty())
      one = r.fresh("one");
    std::map<std::string, std::string> sum; // parameter -> its Add's output
    for (auto &[at, target] : readers) {
      if (!sum.count(target)) {
        std::string arg = r.facts[at.first].fx.args[at.second];
        sum[target] = r.fresh(arg);
        r.inserted.emplace(at.first, makeNode("node_" + sum[target], "Add", {target, one},
                                            sum[target]));
        paramInits[target] = w;
        r.found.source[target] = vi.name();
        r.recovered.insert(target);
      }
      r.renamed[at] = sum[target];
    }
  }
  return llvm::Error::success();
}

/// Merged computations (the file's header).
llvm::Error recoverMerged(const onnx::GraphProto &g, Recovery &r) {
  auto &paramInits = r.paramInits;
  // (kept node, merged FX value) -> the inputs reading the kept node's
  // output where their FX node reads the merged value.
  std::map<std::pair<int, std::string>, std::vector<std::pair<int, int>>> merged;
  for (int i = 0; i < g.node_size(); ++i)
    for (int k = 0; k < g.node(i).input_size(); ++k) {
      auto p = r.producer.find(g.node(i).input(k));
      const FxNode &fx = r.facts[i].fx;
      if (p == r.producer.end() || r.facts[p->second].fx.name.empty() ||
          g.node(p->second).output(0) != g.node(i).input(k))
        continue;
      const std::string &kept = r.facts[p->second].fx.name;
      if (llvm::is_contained(fx.args, kept))
        continue;
      std::vector<std::string> lost;
      for (const std::string &a : fx.args)
        if (!a.empty() && !r.held.count(a) && fxStem(a) == fxStem(kept) &&
            !llvm::is_contained(lost, a))
          lost.push_back(a);
      if (lost.size() == 1)
        merged[{p->second, lost[0]}].push_back({i, k});
    }
  for (auto &[key, readers] : merged) {
    auto &[n, value] = key;
    const onnx::NodeProto &kept = g.node(n);
    // Each float initializer input of the kept node: the attribute of the
    // parameter its FX node reads there.
    std::vector<std::string> params;
    for (const std::string &a : r.facts[n].fx.args)
      if (auto t = r.targetOf.find(a); !a.empty() && t != r.targetOf.end())
        params.push_back(t->second);
    std::map<int, std::string> attrAt;
    bool attributed = !params.empty();
    for (int k = 0; k < kept.input_size(); ++k) {
      if (!r.has(kept.input(k)))
        continue;
      std::vector<std::string> same;
      for (const std::string &t : params)
        if (t == kept.input(k) || attrOf(t) == attrOf(kept.input(k)))
          same.push_back(attrOf(t));
      attributed &= same.size() == 1;
      if (same.size() == 1)
        attrAt[k] = same[0];
    }
    if (!attributed || attrAt.size() != params.size())
      continue;
    // The nearest module holding the kept node and every reader, which must
    // be a layer applying norms of its own (kOwnNorms); of its children,
    // the one whose parameters of those names no node reads.
    std::vector<std::string> common = r.facts[n].scopes;
    for (auto &[i, k] : readers) {
      const std::vector<std::string> &s = r.facts[i].scopes;
      size_t m = 0;
      while (m < common.size() && m < s.size() && common[m] == s[m])
        ++m;
      common.resize(m);
    }
    if (common.empty() || r.facts[n].classes.size() != r.facts[n].scopes.size() ||
        !llvm::is_contained(kOwnNorms, r.facts[n].classes[common.size() - 1]))
      continue;
    const std::string &layer = common.back();
    std::string own = r.facts[n].scopes.empty() ? "" : r.facts[n].scopes.back();
    std::set<std::string> modules;
    for (const std::string &t : r.targets) {
      std::string m = moduleOf(t);
      if (r.fxRead.count(t) || r.recovered.count(t) || m == own || moduleOf(m) != layer)
        continue;
      bool every = true;
      for (auto &[k, attr] : attrAt)
        every &= r.targets.count(m + "." + attr) && !r.fxRead.count(m + "." + attr) &&
                 !r.recovered.count(m + "." + attr);
      if (every)
        modules.insert(m);
    }
    if (modules.size() != 1) {
      if (modules.empty())
        continue;
      return r.error("node '" + Importer::nodeName(g.node(readers[0].first)) + "' reads '" +
                   kept.output(0) + "', torch's `%" + r.facts[n].fx.name +
                   "`, where torch's op read `%" + value +
                   "`, which the exporter's optimizer merged into it; the parameters `%" + value +
                   "` computed with are those of one of the modules '" +
                   llvm::join(modules, "', '") + "' (norms of '" + layer + "', a " +
                   attrOf(r.facts[n].classes[common.size() - 1]) +
                   ", none of whose parameters a node reads), and the file does not say which; "
                   "export with torch.onnx.export(..., optimize=False)");
    }
    const std::string &module = *modules.begin();
    std::vector<std::string> inputs(kept.input().begin(), kept.input().end());
    for (auto &[k, attr] : attrAt) {
      std::string target = module + "." + attr;
      auto value0 = r.value(kept.input(k));
      if (!value0)
        return value0.takeError();
      auto held = r.value(target);
      if (!held)
        return held.takeError();
      if (*held && (*held)->f != (*value0)->f)
        return r.error("parameter '" + target + "' and '" + kept.input(k) + "', which node '" +
                       Importer::nodeName(kept) + "' reads, differ, yet the exporter's optimizer merged `%" +
                     value + "` into that node; export with torch.onnx.export(..., "
                     "optimize=False)");
      paramInits[target] = **value0;
      r.found.source[target] = kept.input(k);
      r.recovered.insert(target);
      inputs[k] = target;
    }
    std::string out = r.fresh(value);
    r.inserted.emplace(n + 1, makeNode("node_" + out, kept.op_type(), inputs, out, &kept));
    for (auto &at : readers)
      r.renamed[at] = out;
  }

  return llvm::Error::success();
}

} // namespace

llvm::Expected<RecoveredParameters>
recoverLostParameters(onnx::GraphProto &g, const ExportSignature &signature,
                      std::map<std::string, Const> &paramInits, const std::string &file,
                      LazyParameters *lazy) {
  Recovery r{file, paramInits, lazy};
  if (!readFacts(g, signature, r))
    return RecoveredParameters();
  if (auto err = recoverFolded(g, r))
    return std::move(err);
  if (auto err = recoverMerged(g, r))
    return std::move(err);
  applyEdits(g, r);
  return std::move(r.found);
}

} // namespace mlc::onnximport
