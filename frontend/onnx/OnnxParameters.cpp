//===- OnnxParameters.cpp - which parameter each initializer read is ------===//
//
// The rule and the facts it reads: OnnxParameters.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxParameters.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>

namespace mlc {

namespace {
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
} // namespace

FxNode parseFxNode(llvm::StringRef text) {
  FxNode fx;
  if (text.consume_front("%")) {
    size_t end = 0;
    while (end < text.size() && identChar(text[end]))
      ++end;
    fx.name = text.take_front(end).str();
  }
  size_t at = text.find("target=");
  size_t open = text.find("](", at);
  if (at == llvm::StringRef::npos || open == llvm::StringRef::npos)
    return fx;
  fx.op = text.slice(at + 7, open).str();
  // args = (A, B, ...): each top-level argument, its FX value's name where
  // it is one (`%name`), else "" (a literal, a list).
  size_t begin = text.find("args = (", open);
  if (begin == llvm::StringRef::npos)
    return fx;
  int depth = 0;
  std::string arg, raw;
  bool isValue = false;
  for (size_t i = begin + 8; i < text.size(); ++i) {
    char c = text[i];
    if (!(depth == 0 && (c == ',' || c == ')')))
      raw += c;
    if (depth == 0 && (c == ',' || c == ')')) {
      fx.args.push_back(isValue ? arg : "");
      fx.text.push_back(llvm::StringRef(raw).trim().str());
      arg.clear();
      raw.clear();
      isValue = false;
      if (c == ')')
        break;
      continue;
    }
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (depth == 0 && c == '%' && arg.empty())
      isValue = true;
    else if (depth == 0 && isValue && identChar(c))
      arg += c;
  }
  return fx;
}

llvm::StringRef fxStem(llvm::StringRef fxValue) {
  llvm::StringRef digits = fxValue.rtrim("0123456789");
  if (digits.size() < fxValue.size() && digits.ends_with("_"))
    return digits.drop_back();
  return fxValue;
}

namespace {

constexpr const char *kRuleKey = "pkg.onnxscript.rewriter.rule_name";

/// The position of the weight among the arguments of torch's product `op`
/// (aten.linear(x, W, b), aten.addmm(b, x, W), aten.mm(x, W)), if it is one.
std::optional<size_t> weightArgument(llvm::StringRef op) {
  if (op.contains("aten.linear.") || op.contains("aten.mm.") || op.contains("aten.matmul.") ||
      op.contains("aten.bmm."))
    return 1;
  if (op.contains("aten.addmm.") || op.contains("aten.baddbmm."))
    return 2;
  return std::nullopt;
}

std::string lastComponent(llvm::StringRef name) {
  auto [head, tail] = name.rsplit('.');
  return tail.empty() ? head.str() : tail.str();
}

/// Whether torch's `op` uses its argument weight transposed as the right
/// operand of a product (true), as it is (false), or is no product.
std::optional<bool> torchTransposes(llvm::StringRef op) {
  if (op.contains("aten.linear."))
    return true;
  for (const char *p : {"aten.addmm.", "aten.mm.", "aten.matmul.", "aten.bmm.", "aten.baddbmm."})
    if (op.contains(p))
      return false;
  return std::nullopt;
}

/// Whether ONNX node `n` uses its input `k` transposed as the right operand
/// of a product, or is no product over that input.
std::optional<bool> onnxTransposes(const onnx::NodeProto &n, int k) {
  if (n.op_type() == "MatMul" && k == 1)
    return false;
  if (n.op_type() == "Gemm" && k == 1) {
    for (const auto &a : n.attribute())
      if (a.name() == "transB")
        return a.i() != 0;
    return false;
  }
  return std::nullopt;
}

/// An FX value named for a transposition of its one argument (torch names
/// a call_function node after its op: `permute`, `t_3`, `transpose_1`).
bool namesTransposition(llvm::StringRef fxValue) {
  llvm::StringRef op = fxValue.rtrim("0123456789");
  if (op.size() < fxValue.size())
    op = op.drop_back(op.ends_with("_") ? 1 : 0);
  return op == "permute" || op == "t" || op == "transpose" || op == "numpy_T";
}

/// Initializers the optimizer folded from one parameter by a transposition
/// (Falcon's `weight.T`, an FX node `permute` of its own), by name -> that
/// parameter: the value_info of the folded value says what it was folded
/// from.
std::map<std::string, std::string> foldedTranspositions(const onnx::GraphProto &g,
                                                        const std::set<std::string> &floatInits,
                                                        const std::set<std::string> &targets) {
  std::map<std::string, std::string> foldedTranspose; // initializer -> parameter
  for (const auto &vi : g.value_info()) {
    if (!floatInits.count(vi.name()) || !namesTransposition(vi.name()))
      continue;
    auto m = onnxValueMetadata(vi);
    auto from = m.find(kFoldedKey);
    if (from == m.end())
      continue;
    std::vector<std::string> sources;
    for (const std::string &src : quotedStrings(from->second))
      if (targets.count(src))
        sources.push_back(src);
    if (sources.size() == 1)
      foldedTranspose[vi.name()] = sources[0];
  }
  return foldedTranspose;
}

std::string nodeLabel(const onnx::NodeProto &n, const FxNode &fx) {
  return n.name().empty() ? fx.name : n.name();
}

/// What the optimizer left of the rewrites that lose a parameter, for the
/// refusal to name (rule 5).
struct LostParameters {
  /// A parameter folded into a constant initializer: the value_info of
  /// `initializer` lists it in `pkg.onnxscript.optimizer.folded_from`.
  struct Folded {
    std::string initializer, sources, reader;
  };
  std::map<std::string, Folded> folded; // target -> where it went
  /// A node that reads `value` (computed as torch's `%kept`) where its FX
  /// node reads `%merged`, an FX value of the same op that no node of the
  /// graph computes: the optimizer merged the two equal computations.
  struct Merged {
    std::string reader, value, kept, merged;
  };
  std::vector<Merged> merged;
};

/// The folded and merged computations of graph `g` (LostParameters), from
/// its value_info and its nodes' FX nodes `fxs`.
LostParameters findLost(const onnx::GraphProto &g, const std::vector<FxNode> &fxs,
                        const ExportSignature &signature, const std::set<std::string> &targets) {
  LostParameters lost;
  std::set<std::string> initializers;
  for (const auto &t : g.initializer())
    initializers.insert(t.name());
  std::map<std::string, std::string> firstReader; // initializer -> a node reading it
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string &v : g.node(i).input())
      if (initializers.count(v))
        firstReader.emplace(v, nodeLabel(g.node(i), fxs[i]));
  for (const auto &vi : g.value_info()) {
    if (!initializers.count(vi.name()))
      continue;
    auto m = onnxValueMetadata(vi);
    auto from = m.find(kFoldedKey);
    if (from == m.end())
      continue;
    std::string reader = firstReader.count(vi.name()) ? firstReader[vi.name()] : "";
    for (const std::string &src : quotedStrings(from->second))
      if (targets.count(src))
        lost.folded.emplace(src, LostParameters::Folded{vi.name(), from->second, reader});
  }
  // Every FX value the file still holds: a node's, a placeholder, an
  // initializer or input named for one.
  std::set<std::string> held = initializers;
  std::map<std::string, std::string> fxOf; // ONNX value -> FX value computing it
  std::set<std::string> parameterPlaceholders, withParameters; // FX values
  for (const auto &in : g.input())
    held.insert(in.name());
  for (const SignatureInput &in : signature) {
    held.insert(in.placeholder);
    if (in.kind == "PARAMETER")
      parameterPlaceholders.insert(in.placeholder);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    held.insert(fxs[i].name);
    for (const std::string &o : g.node(i).output())
      if (!fxs[i].name.empty())
        fxOf[o] = fxs[i].name;
    for (const std::string &a : fxs[i].args)
      if (parameterPlaceholders.count(a))
        withParameters.insert(fxs[i].name);
  }
  // Only a merge of computations with parameters (an FX node reading one, or
  // a constant folded from one) can lose a parameter.
  for (auto &[target, f] : lost.folded)
    withParameters.insert(f.initializer);
  std::set<std::string> seen;
  for (int i = 0; i < g.node_size(); ++i) {
    const FxNode &fx = fxs[i];
    for (const std::string &v : g.node(i).input()) {
      std::string kept = initializers.count(v) ? v : (fxOf.count(v) ? fxOf[v] : "");
      if (kept.empty() || !withParameters.count(kept) || llvm::is_contained(fx.args, kept))
        continue;
      for (const std::string &a : fx.args)
        if (!a.empty() && !held.count(a) && a != kept && fxStem(a) == fxStem(kept) &&
            seen.insert(a).second)
          lost.merged.push_back({nodeLabel(g.node(i), fx), v, kept, a});
    }
  }
  return lost;
}

/// Rules 4 and 5 for the parameters no read claims: a tie (an alias of the
/// parameter read under the same attribute in their module), else refused,
/// saying what the optimizer did with it where the file shows that.
llvm::Error placeUnread(ParameterPlan &plan, const std::map<std::string, std::string> &mentionedBy,
                        const std::map<std::string, std::vector<std::vector<std::string>>> &readIn,
                        const LostParameters &lost, const std::string &file) {
  auto fail = [&](const std::string &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), file + ": " + msg);
  };
  std::set<std::string> claimed;
  for (auto &[at, r] : plan.reads)
    claimed.insert(r.target);
  for (auto &[node, t] : plan.removedBias)
    claimed.insert(t);
  const std::string reexport =
      ": the exporter's optimizer folded it into a constant or removed it, and training that "
      "graph would not train this parameter; export with torch.onnx.export(..., "
      "optimize=False)";
  for (const std::string &t : plan.parameters) {
    if (claimed.count(t))
      continue;
    if (auto m = mentionedBy.find(t); m != mentionedBy.end())
      return fail("parameter '" + t + "', which torch computes with at node '" + m->second +
                  "', is in no input of the graph" + reexport);
    // 4. A tie: the parameter read in the module of `t` (or the nearest
    // module below it) under the same attribute name.
    std::vector<std::string> at = nearestReads(t, readIn);
    // 5. Refused, naming what the optimizer did where the file shows it. A
    // folded parameter: the file holds what it was folded into, not the
    // parameter; neither the operation nor the other operands (removed with
    // it) are left, and a fold rounds (1 + w in f32 keeps w only to 2^-24).
    if (auto f = lost.folded.find(t); at.size() != 1 && f != lost.folded.end())
      return fail("parameter '" + t + "' is folded into the constant '" + f->second.initializer +
                  "' (its value_info's " + kFoldedKey + " " + f->second.sources +
                  "), which node '" + f->second.reader +
                  "' reads: the file holds the folded value, not the parameter's, nor the "
                  "operation or the other operands it was folded with (mlc gives back only "
                  "the `weight + 1.0` of the module classes docs/onnx.md lists), and training "
                  "that constant would not train this parameter; export with "
                  "torch.onnx.export(..., optimize=False)");
    if (at.empty() && !lost.merged.empty()) {
      const LostParameters::Merged &m = lost.merged.front();
      return fail("parameter '" + t +
                  "' is read by no node of the graph: the exporter's optimizer merged equal "
                  "computations into one (node '" + m.reader + "' reads '" + m.value +
                  "', torch's `%" + m.kept + "`, where torch's op read `%" + m.merged +
                  "`, which no node computes), and the file does not say which parameters `%" +
                  m.merged + "` computed with; export with torch.onnx.export(..., "
                  "optimize=False)");
    }
    if (at.size() != 1)
      return fail("parameter '" + t + "' is read by no node of the graph and tied to " +
                  (at.empty() ? "no other parameter" : "'" + at[0] + "' and '" + at[1] + "' alike") +
                  reexport);
    plan.aliases[at[0]].push_back(t);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::optional<int64_t>> torchEmbeddingPadding(const onnx::NodeProto &node) {
  std::map<std::string, std::string> meta = onnxNodeMetadata(node);
  auto it = meta.find(kFxNodeKey);
  if (it == meta.end())
    return std::nullopt;
  FxNode fx = parseFxNode(it->second);
  if (!llvm::StringRef(fx.op).contains("aten.embedding."))
    return std::nullopt;
  auto fail = [&](const std::string &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "its FX node `" + it->second + "` " + msg);
  };
  // aten.embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False,
  // sparse=False); nn.Embedding has made a negative padding_idx a row
  // already, so -1 is "none".
  if (fx.text.size() > 3 && fx.text[3] != "False")
    return fail("scales the gradient by the ids' frequency (scale_grad_by_freq=" + fx.text[3] +
                "), which mlc does not train");
  if (fx.text.size() < 3)
    return std::nullopt;
  int64_t pad;
  if (llvm::StringRef(fx.text[2]).getAsInteger(10, pad))
    return fail("has padding_idx '" + fx.text[2] + "', not an integer");
  if (pad == -1)
    return std::nullopt;
  return pad;
}

llvm::Expected<ParameterPlan> planParameters(const onnx::ModelProto &model,
                                             const ExportSignature &signature,
                                             const std::set<std::string> &floatInits,
                                             const std::string &file) {
  ParameterPlan plan;
  auto fail = [&](const std::string &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), file + ": " + msg);
  };
  std::map<std::string, std::string> targetOf; // FX placeholder -> PARAMETER target
  std::set<std::string> targets;
  for (const SignatureInput &in : signature)
    if (in.kind == "PARAMETER") {
      targetOf[in.placeholder] = in.target;
      targets.insert(in.target);
      plan.parameters.push_back(in.target);
    }
  const onnx::GraphProto &g = model.graph();
  std::vector<std::map<std::string, std::string>> meta;
  std::vector<FxNode> fxs;
  meta.reserve(g.node_size());
  fxs.reserve(g.node_size());
  bool anyFx = false;
  for (const auto &n : g.node()) {
    meta.push_back(onnxNodeMetadata(n));
    auto it = meta.back().find(kFxNodeKey);
    fxs.push_back(it == meta.back().end() ? FxNode{} : parseFxNode(it->second));
    anyFx |= it != meta.back().end();
  }
  if (targets.empty() || !anyFx)
    return plan;
  plan.attributed = true;

  std::map<std::string, std::string> foldedTranspose =
      foldedTranspositions(g, floatInits, targets);

  std::map<std::string, std::string> mentionedBy; // target -> a node that computes with it
  std::map<std::string, std::vector<std::vector<std::string>>> readIn; // target -> module chains
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    const FxNode &fx = fxs[i];
    std::vector<std::string> left; // the FX node's parameters not yet matched
    for (const std::string &a : fx.args)
      if (auto t = targetOf.find(a); !a.empty() && t != targetOf.end() && !llvm::is_contained(left, t->second)) {
        left.push_back(t->second);
        mentionedBy.emplace(t->second, nodeLabel(n, fx));
      }
    std::vector<int> open; // float initializer inputs not yet matched
    auto claim = [&](int k, const std::string &target) {
      ParameterRead r{target, false};
      std::optional<bool> torchT = torchTransposes(fx.op), onnxT = onnxTransposes(n, k);
      if (torchT && onnxT)
        r.transposed = *torchT != *onnxT;
      plan.reads[{i, k}] = r;
      left.erase(std::remove(left.begin(), left.end(), target), left.end());
    };
    for (int k = 0; k < n.input_size(); ++k) {
      if (!floatInits.count(n.input(k)))
        continue;
      if (llvm::is_contained(left, n.input(k)))
        claim(k, n.input(k));
      else
        open.push_back(k);
    }
    // The product's right operand is torch's weight argument.
    if (std::optional<size_t> w = weightArgument(fx.op); w && *w < fx.args.size())
      if (auto t = targetOf.find(fx.args[*w]); t != targetOf.end())
        for (auto it = open.begin(); it != open.end(); ++it)
          if (onnxTransposes(n, *it) && llvm::is_contained(left, t->second)) {
            claim(*it, t->second);
            open.erase(it);
            break;
          }
    if (open.size() == 1 && left.size() == 1) {
      claim(open[0], left[0]);
      open.clear();
    }
    for (auto it = open.begin(); it != open.end();) {
      std::string attr = lastComponent(n.input(*it));
      std::vector<std::string> same;
      for (const std::string &t : left)
        if (lastComponent(t) == attr)
          same.push_back(t);
      if (same.size() == 1) {
        claim(*it, same[0]);
        it = open.erase(it);
      } else {
        ++it;
      }
    }
    if (!open.empty() && !left.empty())
      return fail("node '" + nodeLabel(n, fx) + "' (" + n.op_type() +
                  ") reads initializer '" + n.input(open[0]) +
                  "', and torch's op for it computes with the parameters '" +
                  llvm::join(left, "', '") + "': which one it holds cannot be told");
    // Read under its own name by a node torch's op does not attribute (one
    // the optimizer made): that parameter; a transposition of a parameter
    // the optimizer folded, which torch's op reads as the FX value of that
    // name: the parameter, transposed; else a constant.
    for (int k : open) {
      if (targets.count(n.input(k))) {
        claim(k, n.input(k));
      } else if (auto f = foldedTranspose.find(n.input(k));
                 f != foldedTranspose.end() && llvm::is_contained(fx.args, n.input(k))) {
        plan.reads[{i, k}] = {f->second, true};
        mentionedBy.emplace(f->second, n.name());
      }
    }
    // 3. A zero bias the optimizer removed from a Gemm.
    auto rule = meta[i].find(kRuleKey);
    if (n.op_type() == "Gemm" && (n.input_size() < 3 || n.input(2).empty()) && left.size() == 1 &&
        rule != meta[i].end() && rule->second == "RemoveOptionalBiasFromGemm") {
      plan.removedBias[i] = left[0];
      left.clear();
    }
    if (auto s = meta[i].find(kScopesKey); s != meta[i].end()) {
      std::vector<std::string> chain = moduleScopes(s->second);
      for (int k = 0; k < n.input_size(); ++k)
        if (auto r = plan.reads.find({i, k}); r != plan.reads.end())
          readIn[r->second.target].push_back(chain);
    }
  }

  if (auto err = placeUnread(plan, mentionedBy, readIn, findLost(g, fxs, signature, targets), file))
    return std::move(err);
  return plan;
}

} // namespace mlc
