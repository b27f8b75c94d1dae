//===- OnnxExport.cpp - trained weights back into an ONNX model ------------===//

#include "frontend/onnx/OnnxExport.h"
#include "frontend/onnx/OnnxAliases.h"
#include "frontend/onnx/OnnxNode.h"
#include "frontend/onnx/OnnxParameters.h"

#include "support/Error.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <vector>

namespace mlc {
namespace {

llvm::Error error(const std::string &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// The TensorProto element type that holds an mlc dtype's elements as they
/// are, or UNDEFINED.
int onnxType(const std::string &dtype) {
  static const std::map<std::string, int> types = {
      {"f32", onnx::TensorProto::FLOAT}, {"f64", onnx::TensorProto::DOUBLE},
      {"i64", onnx::TensorProto::INT64}, {"i32", onnx::TensorProto::INT32},
      {"u16", onnx::TensorProto::UINT16}, {"u8", onnx::TensorProto::UINT8},
      {"bool", onnx::TensorProto::BOOL}};
  auto it = types.find(dtype);
  return it == types.end() ? int(onnx::TensorProto::UNDEFINED) : it->second;
}

std::string typeName(int type) {
  if (!onnx::TensorProto_DataType_IsValid(type))
    return "type " + std::to_string(type);
  std::string name = onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(type));
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  return name;
}

std::vector<int64_t> dimsOf(const onnx::TensorProto &t) {
  return std::vector<int64_t>(t.dims().begin(), t.dims().end());
}

/// Sets `t`'s value to `w`'s elements, inline and little-endian (raw_data),
/// every other place a value can be stored cleared.
void setValue(onnx::TensorProto &t, const rt::HostTensor &w) {
  t.clear_float_data();
  t.clear_int32_data();
  t.clear_string_data();
  t.clear_int64_data();
  t.clear_double_data();
  t.clear_uint64_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  t.set_raw_data(w.data.data(), w.data.size());
}

/// A weight may take the place of `init` (element type and shape).
llvm::Error checkFits(const std::string &name, const rt::HostTensor &w,
                      const onnx::TensorProto &init, const std::string &modelName,
                      const std::string &weightsName) {
  std::string where = weightsName + ": tensor '" + name + "'";
  if (onnxType(w.dtype) != init.data_type())
    return error(where + " is " + w.dtype + " but " + modelName + "'s initializer '" +
                 init.name() + "' is " + typeName(init.data_type()));
  if (w.shape != dimsOf(init))
    return error(where + " has shape " + rt::shapeString(w.shape) + " but " + modelName +
                 "'s initializer '" + init.name() + "' has shape " +
                 rt::shapeString(dimsOf(init)));
  return llvm::Error::success();
}

/// `w` transposed (2-D, any element size).
rt::HostTensor transposedTensor(const rt::HostTensor &w) {
  rt::HostTensor t = w;
  int64_t rows = w.shape[0], cols = w.shape[1];
  size_t e = w.data.size() / size_t(std::max<int64_t>(rows * cols, 1));
  t.shape = {cols, rows};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&t.data[(c * rows + r) * e], &w.data[(r * cols + c) * e], e);
  return t;
}

/// The float initializers of rank >= 1 that are no BUFFER: the ones a
/// parameter may be read from (as OnnxImporter declares them).
std::set<std::string> parameterCandidates(const onnx::GraphProto &graph,
                                          const ExportSignature &signature) {
  std::set<std::string> buffers, out;
  for (const SignatureInput &in : signature)
    if (in.kind == "BUFFER")
      buffers.insert(in.target);
  for (const auto &t : graph.initializer()) {
    bool isFloat = t.data_type() == onnx::TensorProto::FLOAT ||
                   t.data_type() == onnx::TensorProto::DOUBLE ||
                   t.data_type() == onnx::TensorProto::FLOAT16 ||
                   t.data_type() == onnx::TensorProto::BFLOAT16;
    bool empty = t.dims_size() == 0 ||
                 std::any_of(t.dims().begin(), t.dims().end(), [](int64_t d) { return d <= 0; });
    if (isFloat && !empty && !buffers.count(t.name()))
      out.insert(t.name());
  }
  return out;
}

/// `t`'s value set to `c`'s elements, as float or double.
llvm::Error setConstValue(onnx::TensorProto &t, const onnximport::Const &c,
                          const std::string &what) {
  rt::HostTensor w;
  w.shape = c.shape;
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    std::vector<float> v(c.f.begin(), c.f.end());
    w.data.resize(v.size() * sizeof(float));
    std::memcpy(w.data.data(), v.data(), w.data.size());
  } else if (t.data_type() == onnx::TensorProto::DOUBLE) {
    w.data.resize(c.f.size() * sizeof(double));
    std::memcpy(w.data.data(), c.f.data(), w.data.size());
  } else {
    return error(what + " is " + typeName(t.data_type()) +
                 "; export-onnx writes recovered parameters as float or double");
  }
  setValue(t, w);
  return llvm::Error::success();
}

/// The parameters the exporter's optimizer folded or merged, given back in
/// `model` as the importer gives them back (recoverLostParameters,
/// OnnxRecover.cpp): its added `Add(weight, one)` and cloned
/// `LayerNormalization` nodes read initializers under torch's names, which
/// are added here with their starting values (of the type of the initializer
/// each came from), and `one` a scalar 1. `modelDir` is where external data
/// lies ("" refuses it). Returns how many parameters were recovered.
llvm::Expected<int64_t> recoverLost(onnx::ModelProto &model, const ExportSignature &signature,
                                    const std::string &modelName, const std::string &modelDir) {
  if (std::none_of(signature.begin(), signature.end(),
                   [](const SignatureInput &in) { return in.kind == "PARAMETER"; }))
    return 0;
  onnx::GraphProto &graph = *model.mutable_graph();
  // The parameter candidates, each decoded as the importer decodes it only
  // where a recovery reads its value (a folded constant, a merged node's
  // input): a file with nothing to recover decodes none.
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  OnnxImportOptions options;
  onnximport::Importer decoder(ctx, modelName, options);
  decoder.modelDir = modelDir;
  std::map<std::string, const onnx::TensorProto *> inits;
  std::map<std::string, int> types;
  for (const auto &t : graph.initializer()) {
    types[t.name()] = t.data_type();
    inits[t.name()] = &t;
  }
  onnximport::LazyParameters lazy;
  lazy.names = parameterCandidates(graph, signature);
  lazy.decode = [&](const std::string &name) {
    return decoder.tensorFromProto(*inits.at(name), "initializer '" + name + "'");
  };
  std::map<std::string, onnximport::Const> paramInits;
  auto found = onnximport::recoverLostParameters(graph, signature, paramInits, modelName, &lazy);
  if (!found)
    return found.takeError();
  int oneType = onnx::TensorProto::UNDEFINED;
  for (auto &[target, source] : found->source) {
    // An initializer of the parameter's name that no node read (the merge
    // checked that it holds the kept node's value) takes the value in place.
    onnx::TensorProto *t = nullptr;
    for (auto &init : *graph.mutable_initializer())
      if (init.name() == target)
        t = &init;
    if (!t) {
      t = graph.add_initializer();
      t->set_name(target);
    }
    t->set_data_type(types.at(source));
    t->clear_dims();
    for (int64_t d : paramInits.at(target).shape)
      t->add_dims(d);
    if (auto err = setConstValue(*t, paramInits.at(target),
                                 modelName + ": parameter '" + target + "' (from '" + source +
                                     "')"))
      return std::move(err);
    for (const auto &n : graph.node())
      if (n.op_type() == "Add" && n.input_size() == 2 && n.input(0) == target &&
          n.input(1) == found->one)
        oneType = t->data_type();
  }
  if (!found->one.empty()) {
    onnx::TensorProto *t = graph.add_initializer();
    t->set_name(found->one);
    t->set_data_type(oneType);
    onnximport::Const one;
    one.f = {1.0};
    if (auto err = setConstValue(*t, one, modelName + ": the constant 1 of '" + found->one + "'"))
      return std::move(err);
  }
  return int64_t(found->source.size());
}

/// An attributed file (OnnxParameters.h): every read of a parameter gets an
/// initializer of the trained value, `NAME` (or `NAME.T`, the transpose the
/// node reads), the Gemm biases the optimizer removed come back as input C,
/// and initializers nothing reads any more go.
llvm::Expected<OnnxExportResult>
replaceAttributed(onnx::ModelProto &model, const ParameterPlan &plan, const std::string &modelName,
                  const std::map<std::string, rt::HostTensor> &weights,
                  const std::string &weightsName) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::map<std::string, std::string> paramOf; // a weight's name -> its parameter
  for (const std::string &p : plan.parameters)
    paramOf[p] = p;
  for (auto &[p, names] : plan.aliases)
    for (const std::string &a : names)
      paramOf[a] = p;
  std::map<std::string, const rt::HostTensor *> trained; // parameter -> value
  for (const auto &[given, w] : weights) {
    auto p = paramOf.find(given);
    if (p == paramOf.end())
      return error(weightsName + ": tensor '" + given + "' is no parameter of " + modelName +
                   " (its graph signature names " + std::to_string(plan.parameters.size()) +
                   "); was it saved from another model?");
    if (given == p->second || !trained.count(p->second))
      trained[p->second] = &w;
  }
  std::map<std::string, int> initializers;
  for (int i = 0; i < graph.initializer_size(); ++i)
    initializers.emplace(graph.initializer(i).name(), i);

  // Each (parameter, transposed) read gets one initializer.
  std::map<std::pair<std::string, bool>, std::string> written;
  std::set<std::string> replaced;
  auto initializerFor = [&](const ParameterRead &r, int type) -> llvm::Expected<std::string> {
    auto key = std::make_pair(r.target, r.transposed);
    if (auto it = written.find(key); it != written.end())
      return it->second;
    auto w = trained.find(r.target);
    if (w == trained.end())
      return std::string();
    rt::HostTensor value = r.transposed ? transposedTensor(*w->second) : *w->second;
    if (onnxType(value.dtype) != type)
      return error(weightsName + ": tensor '" + r.target + "' is " + value.dtype + " but " +
                   modelName + " reads it as " + typeName(type));
    std::string name = r.target + (r.transposed ? ".T" : "");
    onnx::TensorProto *t;
    if (auto it = initializers.find(name); it != initializers.end()) {
      t = graph.mutable_initializer(it->second);
      if (dimsOf(*t) != value.shape)
        return error(weightsName + ": tensor '" + r.target + "' has shape " +
                     rt::shapeString(value.shape) + " but " + modelName + "'s initializer '" +
                     name + "' has shape " + rt::shapeString(dimsOf(*t)));
    } else {
      t = graph.add_initializer();
      t->set_name(name);
      t->set_data_type(type);
      for (int64_t d : value.shape)
        t->add_dims(d);
      initializers.emplace(name, graph.initializer_size() - 1);
    }
    setValue(*t, value);
    replaced.insert(name);
    written[key] = name;
    return name;
  };
  for (auto &[at, r] : plan.reads) {
    onnx::NodeProto &n = *graph.mutable_node(at.first);
    const onnx::TensorProto &source = graph.initializer(initializers.at(n.input(at.second)));
    std::vector<int64_t> want = dimsOf(source);
    auto name = initializerFor(r, source.data_type());
    if (!name)
      return name.takeError();
    if (name->empty())
      continue; // not in the weights: the node keeps its initializer
    if (dimsOf(graph.initializer(initializers.at(*name))) != want)
      return error(weightsName + ": tensor '" + r.target + "' has shape " +
                   rt::shapeString(trained.at(r.target)->shape) + " but " + modelName +
                   " reads '" + n.input(at.second) + "' of shape " + rt::shapeString(want) +
                   " as it");
    n.set_input(at.second, *name);
  }
  for (auto &[node, target] : plan.removedBias) {
    onnx::NodeProto &n = *graph.mutable_node(node);
    auto name = initializerFor({target, false}, onnx::TensorProto::FLOAT);
    if (!name)
      return name.takeError();
    if (name->empty())
      continue;
    while (n.input_size() < 3)
      n.add_input("");
    n.set_input(2, *name);
  }

  // Initializers no node reads any more (merged or folded copies now
  // replaced by the parameters' own) go.
  std::set<std::string> read;
  for (const auto &n : graph.node())
    for (const std::string &in : n.input())
      read.insert(in);
  for (const auto &o : graph.output())
    read.insert(o.name());
  // Their value_info goes with them: a folded constant's names the
  // parameters it was folded from, which the model now reads themselves.
  std::set<std::string> dropped;
  for (int i = graph.initializer_size() - 1; i >= 0; --i)
    if (!read.count(graph.initializer(i).name())) {
      dropped.insert(graph.initializer(i).name());
      graph.mutable_initializer()->DeleteSubrange(i, 1);
    }
  for (int i = graph.value_info_size() - 1; i >= 0; --i)
    if (dropped.count(graph.value_info(i).name()))
      graph.mutable_value_info()->DeleteSubrange(i, 1);
  for (const auto &t : graph.initializer())
    if (!replaced.count(t.name()) && t.data_location() == onnx::TensorProto::EXTERNAL)
      return error(modelName + ": initializer '" + t.name() +
                   "' is stored in external data, which the trained model would not "
                   "carry; export-onnx writes a self-contained model");
  OnnxExportResult result;
  result.replaced = int64_t(replaced.size());
  result.kept = int64_t(graph.initializer_size()) - result.replaced;
  if (!model.SerializeToString(&result.bytes))
    return error(modelName + ": the trained model does not serialize (over protobuf's 2 GB?)");
  return std::move(result);
}

} // namespace

llvm::Expected<OnnxExportResult>
replaceOnnxInitializers(llvm::StringRef bytes, const std::string &modelName,
                        const std::map<std::string, rt::HostTensor> &weights,
                        const std::string &weightsName, const std::string &modelDir) {
  onnx::ModelProto model;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), int(bytes.size())))
    return error(modelName + ": not a valid ONNX model (the protobuf does not parse; is the "
                             "file truncated or not ONNX?)");
  onnx::GraphProto &graph = *model.mutable_graph();
  ExportSignature signature = readExportSignature(model);
  auto recovered = recoverLost(model, signature, modelName, modelDir);
  if (!recovered)
    return recovered.takeError();
  auto plan = planParameters(model, signature, parameterCandidates(graph, signature), modelName);
  if (!plan)
    return plan.takeError();
  if (plan->attributed) {
    auto result = replaceAttributed(model, *plan, modelName, weights, weightsName);
    if (result)
      result->recovered = *recovered;
    return result;
  }

  // 1. Where each weight goes: an initializer of that name, or the
  // Identity(initializer) node that writes that name (an untied parameter).
  std::map<std::string, int> initializers; // name -> index
  for (int i = 0; i < graph.initializer_size(); ++i)
    initializers.emplace(graph.initializer(i).name(), i);
  std::map<std::string, int> identities; // output -> node index
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &n = graph.node(i);
    if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 &&
        initializers.count(n.input(0)))
      identities.emplace(n.output(0), i);
  }
  // A tied parameter's other names (OnnxAliases.h), as --save writes them:
  // the initializer's own name wins where both are given.
  std::map<std::string, std::string> aliasOf; // alias -> initializer
  OnnxAliases aliases = onnxParameterAliases(model, signature);
  for (auto &[init, names] : aliases.byInitializer)
    for (const std::string &alias : names)
      aliasOf.emplace(alias, init);
  std::vector<std::pair<int, const rt::HostTensor *>> inPlace;
  std::vector<std::pair<int, const rt::HostTensor *>> untied; // node index, weight
  for (const auto &[given, w] : weights) {
    std::string name = given;
    if (auto a = aliasOf.find(name); a != aliasOf.end() && !initializers.count(name)) {
      if (weights.count(a->second))
        continue;
      name = a->second;
    }
    if (auto it = initializers.find(name); it != initializers.end()) {
      if (auto err = checkFits(name, w, graph.initializer(it->second), modelName, weightsName))
        return std::move(err);
      inPlace.push_back({it->second, &w});
    } else if (auto id = identities.find(name); id != identities.end()) {
      const onnx::TensorProto &source =
          graph.initializer(initializers.at(graph.node(id->second).input(0)));
      if (auto err = checkFits(name, w, source, modelName, weightsName))
        return std::move(err);
      untied.push_back({id->second, &w});
    } else {
      return error(weightsName + ": tensor '" + name + "' is not an initializer of " +
                   modelName + " (nor the output of an Identity of one); was it saved from "
                               "another model?");
    }
  }

  // 2. The initializers kept as they were must not point outside the output.
  std::set<int> replaced;
  for (auto &[index, w] : inPlace)
    replaced.insert(index);
  for (int i = 0; i < graph.initializer_size(); ++i)
    if (!replaced.count(i) &&
        graph.initializer(i).data_location() == onnx::TensorProto::EXTERNAL)
      return error(modelName + ": initializer '" + graph.initializer(i).name() +
                   "' is stored in external data, which the trained model would not "
                   "carry; export-onnx writes a self-contained model");

  // 3. Replace; each untied Identity becomes an initializer of its name.
  for (auto &[index, w] : inPlace)
    setValue(*graph.mutable_initializer(index), *w);
  std::vector<int> dropped;
  for (auto &[node, w] : untied) {
    const onnx::NodeProto &n = graph.node(node);
    const int type = graph.initializer(initializers.at(n.input(0))).data_type();
    onnx::TensorProto *t = graph.add_initializer();
    t->set_name(n.output(0));
    t->set_data_type(type);
    for (int64_t d : w->shape)
      t->add_dims(d);
    setValue(*t, *w);
    // Before IR version 4 every initializer is a graph input too.
    if (model.ir_version() < 4) {
      auto *tensorType = graph.add_input()->mutable_type()->mutable_tensor_type();
      graph.mutable_input(graph.input_size() - 1)->set_name(n.output(0));
      tensorType->set_elem_type(type);
      for (int64_t d : w->shape)
        tensorType->mutable_shape()->add_dim()->set_dim_value(d);
    }
    dropped.push_back(node);
  }
  std::sort(dropped.begin(), dropped.end(), std::greater<int>());
  for (int node : dropped)
    graph.mutable_node()->DeleteSubrange(node, 1);

  OnnxExportResult result;
  result.replaced = int64_t(inPlace.size() + untied.size());
  result.untied = int64_t(untied.size());
  result.kept = int64_t(initializers.size() - inPlace.size());
  if (!model.SerializeToString(&result.bytes))
    return error(modelName + ": the trained model does not serialize (over protobuf's 2 GB?)");
  return std::move(result);
}

llvm::Expected<OnnxExportResult> exportOnnxFile(const std::string &modelPath,
                                                const std::string &weightsPath,
                                                const std::string &outputPath) {
  try {
    rt::refuseOutputsOverInputs({{"--model", modelPath}, {"--weights", weightsPath}},
                                {{"-o", outputPath}});
    rt::checkWritableFile(outputPath, "-o");
    std::string bytes = rt::readFile(modelPath);
    std::map<std::string, rt::HostTensor> weights = rt::readSafetensors(weightsPath);
    llvm::SmallString<256> dir(modelPath);
    llvm::sys::path::remove_filename(dir);
    auto result = replaceOnnxInitializers(bytes, modelPath, weights, weightsPath,
                                          dir.empty() ? "." : std::string(dir));
    if (!result)
      return result.takeError();
    rt::writeFileAtomically(outputPath, result->bytes);
    return result;
  } catch (const rt::Error &e) {
    return error(e.what());
  }
}

} // namespace mlc
