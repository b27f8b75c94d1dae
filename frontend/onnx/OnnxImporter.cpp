//===- OnnxImporter.cpp - ONNX models as mlc graphs ----------------------===//
//
// The driver: reads the model's inputs and initializers, hands each node to
// the handler registered for its op type and opset (OnnxNode.h), and
// returns @forward with the loss. Tensors of the protobuf are decoded, and
// initializers declared, in OnnxTensors.cpp.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "dialects/mlc/MlcLosses.h"
#include "frontend/onnx/OnnxAliases.h"
#include "frontend/onnx/OnnxNode.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;

namespace mlc {

bool isOnnxPath(llvm::StringRef path) { return path.ends_with_insensitive(".onnx"); }

namespace onnximport {

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

llvm::Error Importer::declareInputs(const onnx::GraphProto &g) {
  std::set<std::string> initNames;
  for (const auto &t : g.initializer())
    initNames.insert(t.name());
  // A default sequence length longer than the model's learned positions
  // could not run: it is shortened to them.
  int64_t seqLen = options.seqLen;
  if (options.capSeqLenAtPositions)
    for (const auto &t : g.initializer()) {
      llvm::StringRef n = t.name();
      if (t.dims_size() == 2 && t.dims(0) > 0 && t.dims(0) < seqLen &&
          (n.ends_with("wpe.weight") || n.ends_with("position_embeddings.weight"))) {
        seqLen = seqLenCappedTo = t.dims(0);
        seqLenCappedBy = t.name();
      }
    }
  // Symbolic dims: explicit sizes first, then roles by position.
  for (const auto &in : g.input()) {
    if (initNames.count(in.name()))
      continue;
    const auto &tt = in.type().tensor_type();
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto &dim = tt.shape().dim(d);
      if (dim.has_dim_value() || dimSizes.count(dim.dim_param()))
        continue;
      const std::string &name = dim.dim_param();
      if (auto it = options.dims.find(name); it != options.dims.end())
        dimSizes[name] = it->second;
      else if (d == 0)
        dimSizes[name] = options.microBatch;
      else if (d == 1)
        dimSizes[name] = seqLen;
      else
        return error("input '" + in.name() + "' has symbolic dim '" + name + "' at position " +
                     std::to_string(d) + "; give its size with --dim " + name + "=N");
    }
  }
  for (auto &[name, size] : options.dims)
    if (!dimSizes.count(name))
      return error("--dim " + name + ": the model has no symbolic dim of that name");
  for (const auto &in : g.input()) {
    if (initNames.count(in.name()))
      continue; // old exporters list initializers as inputs too
    if (!in.type().has_tensor_type())
      return error("input '" + in.name() + "' is not a tensor");
    const auto &tt = in.type().tensor_type();
    if (!tt.has_shape())
      return error("input '" + in.name() +
                   "' has no shape (a dynamic rank); mlc needs every input's rank");
    auto kind = kindOfOnnx(tt.elem_type());
    if (!kind)
      return error("input '" + in.name() + "' has data type " + std::to_string(tt.elem_type()) +
                   ", which mlc does not import");
    Shape shape;
    for (const auto &dim : tt.shape().dim()) {
      int64_t size = dim.has_dim_value() ? dim.dim_value() : dimSizes.at(dim.dim_param());
      if (size < 1 || size > (int64_t(1) << 31))
        return error("input '" + in.name() + "' has dim of size " + std::to_string(size));
      shape.push_back(size);
    }
    if (product(shape) > (int64_t(1) << 40))
      return error("input '" + in.name() + "' of shape " + shapeText(shape) +
                   " is larger than mlc supports");
    Type el = elementFor(*kind);
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr("mlc.input", b.getStringAttr(in.name()))));
    values[in.name()] = {block->addArgument(RankedTensorType::get(shape, el), loc), nullptr};
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

namespace {

/// Every handler by op type; an op type may have several, for disjoint
/// opset ranges.
const llvm::StringMap<std::vector<OpSchema>> &opTable() {
  static const llvm::StringMap<std::vector<OpSchema>> table = [] {
    llvm::StringMap<std::vector<OpSchema>> t;
    for (auto schemas : {tensorOpSchemas(), shapeOpSchemas(), nnOpSchemas(), rotaryOpSchemas()})
      for (const OpSchema &s : schemas)
        t[s.opType].push_back(s);
    return t;
  }();
  return table;
}

/// The op types the importer takes at `opset`, sorted, for errors.
std::string supportedOps(int64_t opset) {
  std::vector<std::string> names;
  for (const auto &entry : opTable())
    for (const OpSchema &s : entry.getValue())
      if (s.minOpset <= opset && opset <= s.maxOpset)
        names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return llvm::join(names, ", ");
}

} // namespace

llvm::Error Importer::readInputs(const onnx::NodeProto &n, std::vector<const Entry *> &in) {
  for (const std::string &name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr); // an omitted optional input
      continue;
    }
    if (plan.attributed && paramInits.count(name)) {
      // Which parameter this read is, or a constant (OnnxParameters.h).
      auto read = plan.reads.find({nodeIndex, int(in.size())});
      if (read == plan.reads.end()) {
        auto c = paramEntries.find("const:" + name);
        if (c == paramEntries.end())
          c = paramEntries
                  .emplace("const:" + name,
                           Entry{Value(), std::make_shared<const Const>(paramInits.at(name))})
                  .first;
        in.push_back(&c->second);
        continue;
      }
      auto e = parameterRead(read->second, name, n);
      if (!e)
        return e.takeError();
      in.push_back(*e);
      continue;
    }
    auto it = values.find(name);
    if (it == values.end()) {
      // A parameter is materialized on its first use.
      auto init = paramInits.find(name);
      if (init == paramInits.end())
        return nodeError(n, "reads '" + name +
                                "', which no input, initializer or earlier node defines");
      Value v = block->addArgument(RankedTensorType::get(init->second.shape, floatType()), loc);
      argAttrs.push_back(
          b.getDictionaryAttr({b.getNamedAttr("mlc.param", b.getStringAttr(name)),
                               b.getNamedAttr("mlc.init", b.getStringAttr("package"))}));
      it = values.emplace(name, Entry{v, nullptr}).first;
    }
    in.push_back(&it->second);
  }
  return llvm::Error::success();
}

Value Importer::addParameter(const std::string &name, const Const &value) {
  Value v = block->addArgument(RankedTensorType::get(value.shape, floatType()), loc);
  argAttrs.push_back(
      b.getDictionaryAttr({b.getNamedAttr("mlc.param", b.getStringAttr(name)),
                           b.getNamedAttr("mlc.init", b.getStringAttr("package"))}));
  paramNames.insert(name);
  weights.push_back({name, weightTensor(value)});
  paramValues.emplace(name, value);
  return v;
}

/// `c` transposed (2-D).
static Const transposed(const Const &c) {
  Const t = c;
  int64_t rows = c.shape[0], cols = c.shape[1];
  t.shape = {cols, rows};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k)
      t.f[k * rows + r] = c.f[r * cols + k];
  return t;
}

llvm::Expected<const Entry *> Importer::parameterRead(const ParameterRead &read,
                                                      const std::string &init,
                                                      const onnx::NodeProto &n) {
  const std::string key = read.target + (read.transposed ? "^T" : "");
  if (auto it = paramEntries.find(key); it != paramEntries.end()) {
    // Another initializer read as the same parameter must hold its value.
    const Const &held = paramValues.at(read.target), &here = paramInits.at(init);
    if ((read.transposed ? transposed(here).f : here.f) != held.f)
      return nodeError(n, "reads initializer '" + init + "' as parameter '" + read.target +
                              "', whose value another initializer gives differently");
    return &it->second;
  }
  const Const &c = paramInits.at(init);
  if (read.transposed && c.shape.size() != 2)
    return nodeError(n, "reads initializer '" + init + "' of shape " + shapeText(c.shape) +
                            " as the transposed matrix '" + read.target + "'");
  Const value = read.transposed ? transposed(c) : c;
  auto base = paramEntries.find(read.target);
  if (base == paramEntries.end()) {
    base = paramEntries.emplace(read.target, Entry{addParameter(read.target, value), nullptr})
               .first;
  } else if (paramValues.at(read.target).f != value.f) {
    return nodeError(n, "reads initializer '" + init + "' as parameter '" + read.target +
                            "', whose value another initializer gives differently");
  }
  if (!read.transposed)
    return &base->second;
  Value t = b.create<TransposeOp>(loc, base->second.value, b.getDenseI64ArrayAttr({1, 0}));
  return &paramEntries.emplace(key, Entry{t, nullptr}).first->second;
}

llvm::Error Importer::convert(const onnx::NodeProto &n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return nodeError(n, "belongs to domain '" + n.domain() +
                            "'; mlc imports the default ONNX domain only (opsets " +
                            std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  std::vector<const Entry *> in;
  if (auto err = readInputs(n, in))
    return err;
  // A Gemm's zero bias that the exporter's optimizer removed: the parameter
  // comes back as input C, zeros of the product's column count.
  if (auto bias = plan.removedBias.find(nodeIndex); bias != plan.removedBias.end()) {
    if (in.size() < 2 || !in[1])
      return nodeError(n, "has no input B");
    Shape s = in[1]->value ? shapeOf(in[1]->value) : in[1]->constant->shape;
    const onnx::AttributeProto *tB = attr(n, "transB", onnx::AttributeProto::INT);
    if (s.size() != 2)
      return nodeError(n, "input B has shape " + shapeText(s) + "; Gemm needs a matrix");
    Const zeros;
    zeros.shape = {tB && tB->i() ? s[0] : s[1]};
    zeros.resize(zeros.shape[0]);
    Value v = addParameter(bias->second, zeros);
    in.resize(2);
    in.push_back(&paramEntries.emplace(bias->second, Entry{v, nullptr}).first->second);
  }
  // Identity of an initializer the exporter merged: a parameter of its own.
  if (!plan.attributed && n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 &&
      paramInits.count(n.input(0)) && !paramNames.count(n.output(0))) {
    values[n.output(0)] = {addParameter(n.output(0), paramInits.at(n.input(0))), nullptr};
    return llvm::Error::success();
  }
  const auto &table = opTable();
  auto it = table.find(n.op_type());
  if (it == table.end())
    return nodeError(n, "is not supported; mlc imports " + supportedOps(opset));
  const OpSchema *schema = nullptr;
  std::string forms;
  for (const OpSchema &s : it->getValue()) {
    if (s.minOpset <= opset && opset <= s.maxOpset)
      schema = &s;
    forms +=
        llvm::formatv("{0}opsets {1} to {2}", forms.empty() ? "" : ", ", s.minOpset, s.maxOpset)
            .str();
  }
  if (!schema)
    return nodeError(n,
                     "is not defined at this opset; mlc imports " + n.op_type() + " at " + forms);
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k] && in[k]->sequence && n.op_type() != "SequenceAt")
      return nodeError(n, "reads the sequence '" + n.input(k) +
                              "'; mlc takes sequences only from SplitToSequence into SequenceAt");
  attrMismatch.clear();
  Node node(*this, n, std::move(in));
  llvm::Error err = schema->handler(node);
  // An attribute of the wrong type is the error: what followed read it as
  // absent.
  if (!attrMismatch.empty()) {
    llvm::consumeError(std::move(err));
    return nodeError(n, attrMismatch);
  }
  if (err)
    return err;
  std::vector<Entry> &out = node.out;
  if (!out.empty() && n.output_size() < 1)
    return nodeError(n, "has no output");
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty() || (size_t(k) >= out.size() && !consumed.count(n.output(k))))
      continue;
    if (size_t(k) >= out.size())
      return nodeError(n, "output #" + std::to_string(k) + " ('" + n.output(k) +
                              "') is not supported");
    if (!values.emplace(n.output(k), out[k]).second || paramInits.count(n.output(k)))
      return nodeError(n, "defines '" + n.output(k) + "' a second time");
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// The function
//===----------------------------------------------------------------------===//

/// The loss as options.loss asks: computed from the logits (causal-lm,
/// masked-lm) or an output renamed.
llvm::Error Importer::addLoss(std::vector<std::pair<std::string, Value>> &outputs) {
  // `auto` takes the output 'loss' where there is one, else leaves the kind
  // of loss to mlc-infer-loss, which decides it from the recognized attention.
  bool hasLoss =
      std::any_of(outputs.begin(), outputs.end(), [](auto &p) { return p.first == "loss"; });
  bool hasLogits = std::any_of(outputs.begin(), outputs.end(),
                               [&](auto &p) { return p.first == options.logits; });
  std::string loss = options.loss == "auto" ? "loss" : options.loss;
  if (options.loss == "auto" && !hasLoss && hasLogits && !values.count(options.labels))
    func->setAttr("mlc.infer_loss",
                  b.getDictionaryAttr({b.getNamedAttr("logits", b.getStringAttr(options.logits)),
                                       b.getNamedAttr("labels", b.getStringAttr(options.labels))}));
  if (loss == "causal-lm" || loss == "masked-lm") {
    auto logits = std::find_if(outputs.begin(), outputs.end(),
                               [&](auto &p) { return p.first == options.logits; });
    if (logits == outputs.end())
      return error("--loss " + loss + " needs an output named '" + options.logits + "'");
    if (std::any_of(outputs.begin(), outputs.end(), [](auto &p) { return p.first == "loss"; }))
      return error("--loss " + loss +
                   ": the model already has an output named 'loss'; "
                   "train on it with --loss loss");
    Shape s = shapeOf(logits->second);
    if (s.size() != 3 || s[1] < 2)
      return error("--loss " + loss + " needs logits of shape [batch, sequence, vocab], got " +
                   shapeText(s));
    if (values.count(options.labels))
      return error("--loss " + loss + ": the model already has an input named '" + options.labels +
                   "'; pick another with --labels");
    Value labels = block->addArgument(RankedTensorType::get({s[0], s[1]}, b.getI64Type()), loc);
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr("mlc.input", b.getStringAttr(options.labels))));
    Value ce = buildLanguageModelLoss(
        b, loc, logits->second, labels,
        loss == "causal-lm" ? LanguageModelLoss::Causal : LanguageModelLoss::Masked);
    outputs.insert(outputs.begin(), {"loss", ce});
  } else if (loss != "loss") {
    auto it =
        std::find_if(outputs.begin(), outputs.end(), [&](auto &p) { return p.first == loss; });
    if (it == outputs.end())
      return error("--loss " + loss + ": the model has no output of that name");
    if (std::any_of(outputs.begin(), outputs.end(), [](auto &p) { return p.first == "loss"; }))
      return error("--loss " + loss + ": the model also has an output named 'loss'");
    it->first = "loss";
  }
  return llvm::Error::success();
}

llvm::Error Importer::finish(const onnx::GraphProto &g) {
  std::vector<std::pair<std::string, Value>> outputs;
  for (const auto &o : g.output()) {
    auto it = values.find(o.name());
    if (it == values.end())
      return error("output '" + o.name() + "' is not computed by any node");
    if (it->second.sequence)
      return error("output '" + o.name() + "' is a sequence; mlc's outputs are tensors");
    outputs.push_back(
        {o.name(), (it->second.value ? it->second.value : materialize(*it->second.constant))});
  }
  if (outputs.empty())
    return error("the graph has no outputs");
  if (auto err = addLoss(outputs))
    return err;
  for (auto &[name, v] : outputs)
    if (name == "loss") {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getRank() != 0 || !isa<FloatType>(t.getElementType()))
        return error("output 'loss' must be a float scalar, got " + shapeText(shapeOf(v)));
    }
  SmallVector<Value> results;
  for (auto &[_, v] : outputs)
    results.push_back(v);
  b.create<func::ReturnOp>(loc, results);
  SmallVector<Type> argTypes(block->getArgumentTypes());
  func.setFunctionType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    func.setArgAttrs(i, attrs);
  for (auto [i, o] : llvm::enumerate(outputs))
    func.setResultAttr(i, "mlc.output", b.getStringAttr(o.first));
  return llvm::Error::success();
}

llvm::Expected<ImportedModel> Importer::run(onnx::ModelProto &model) {
  ctx.loadDialect<MlcDialect, func::FuncDialect>();
  if (options.dtype != "f32" && options.dtype != "f64")
    return error("unsupported dtype '" + options.dtype + "' (expected f32 or f64)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return error("not an ONNX model (no graph with nodes); is the file truncated?");
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset == 0)
    return error("the model imports no default-domain opset");
  if (opset < kMinOpset || opset > kMaxOpset)
    return error(llvm::formatv("opset {0} is not supported; mlc imports opsets {1} to {2} "
                               "(export with opset_version between {1} and {2})",
                               opset, kMinOpset, kMaxOpset)
                     .str());
  const onnx::GraphProto &g = model.graph();

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  func = b.create<func::FuncOp>(loc, mlc::kForwardFn, b.getFunctionType({}, {}));
  module->push_back(func);
  block = func.addEntryBlock();
  b.setInsertionPointToStart(block);

  if (auto err = declareInputs(g))
    return std::move(err);
  ExportSignature signature = readExportSignature(model);
  if (auto err = declareInitializers(g, signature))
    return std::move(err);
  if (auto err = recoverParameters(*model.mutable_graph(), signature))
    return std::move(err);
  for (const auto &n : g.node())
    for (const std::string &name : n.input())
      consumed.insert(name);
  for (const auto &o : g.output())
    consumed.insert(o.name());
  std::set<std::string> floatInits;
  for (auto &[name, c] : paramInits)
    floatInits.insert(name);
  auto planned = planParameters(model, signature, floatInits, file);
  if (!planned)
    return planned.takeError();
  plan = std::move(*planned);
  // Attributed: the weights are the parameters' values, added as they are
  // first read (parameterRead), not the initializers.
  if (plan.attributed)
    weights.clear();
  for (const auto &n : g.node()) {
    ++nodeIndex;
    // Each op a node becomes carries the node's name (as onnx-mlir's do; an
    // unnamed node is its op type and index, Add#7): --mlir-print-debuginfo
    // shows it, and a verifier or pass error on the op, or on the gradient
    // autodiff builds from it, names the node.
    loc = NameLoc::get(b.getStringAttr(
        n.name().empty() ? n.op_type() + "#" + std::to_string(nodeIndex) : n.name()));
    if (auto err = convert(n))
      return std::move(err);
  }
  loc = b.getUnknownLoc();
  if (auto err = finish(g))
    return std::move(err);
  // Parameters that no node reads are dropped from the weights.
  std::set<std::string> used;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto p = func.getArgAttrOfType<StringAttr>(i, "mlc.param"))
      used.insert(p.getValue().str());
  llvm::erase_if(weights, [&](auto &w) { return !used.count(w.first); });
  OnnxAliases aliases;
  if (plan.attributed)
    aliases.byInitializer = plan.aliases;
  else
    aliases = onnxParameterAliases(model, signature);
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto p = func.getArgAttrOfType<StringAttr>(i, "mlc.param"))
      if (auto it = aliases.byInitializer.find(p.getValue().str());
          it != aliases.byInitializer.end())
        func.setArgAttr(i, "mlc.aliases",
                        b.getStrArrayAttr(llvm::to_vector_of<StringRef>(it->second)));
  for (auto it = aliases.byInitializer.begin(); it != aliases.byInitializer.end();)
    it = used.count(it->first) ? std::next(it) : aliases.byInitializer.erase(it);
  if (failed(verify(*module)))
    return error("internal error: the imported graph does not verify");

  ImportedModel m;
  m.module = std::move(module);
  m.weights = std::move(weights);
  m.seqLenCappedBy = seqLenCappedBy;
  m.seqLenCappedTo = seqLenCappedTo;
  m.aliases = std::move(aliases.byInitializer);
  m.aliasNote = std::move(aliases.note);
  std::string dims;
  for (auto &[name, size] : dimSizes)
    dims += (dims.empty() ? "" : ", ") + name + "=" + std::to_string(size);
  int64_t count = 0;
  for (auto &w : m.weights)
    count += w.second.numel();
  m.summary =
      llvm::formatv("opset {0}, {1} nodes, {2} parameters in {3} tensors{4}{5}", opset,
                    g.node_size(), count, m.weights.size(), dims.empty() ? "" : ", dims ", dims)
          .str();
  return m;
}

} // namespace onnximport

llvm::Expected<ImportedModel> importOnnxBytes(MLIRContext &ctx, llvm::StringRef bytes,
                                              const std::string &name,
                                              const OnnxImportOptions &options) {
  onnx::ModelProto model;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), int(bytes.size())))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": not a valid ONNX model (the protobuf does not "
                                          "parse; is the file truncated or not ONNX?)");
  onnximport::Importer importer(ctx, name, options);
  return importer.run(model);
}

llvm::Expected<ImportedModel> importOnnxFile(MLIRContext &ctx, const std::string &path,
                                             const OnnxImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + buffer.getError().message());
  onnx::ModelProto model;
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), int(bytes.size())))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": not a valid ONNX model (the protobuf does not "
                                          "parse; is the file truncated or not ONNX?)");
  onnximport::Importer importer(ctx, path, options);
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  importer.modelDir = dir.empty() ? "." : std::string(dir);
  return importer.run(model);
}

} // namespace mlc
