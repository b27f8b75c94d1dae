//===- OnnxNode.h - what an ONNX operator handler sees ----------*- C++ -*-===//
//
// Private to frontend/onnx. The importer (OnnxImporter.cpp) walks the graph
// and hands each node to the handler registered for its op type
// (OnnxOps.cpp: elementwise, logic and constant operators; OnnxShapeOps.cpp:
// data movement; OnnxNnOps.cpp: matmuls, normalizations, activations,
// attention and losses). OnnxTensors.cpp decodes the tensors, declares the
// initializers and defines the Node helpers below.
//
// A value of the graph is either a host constant (`Const`: initializers that
// are not parameters, Constant nodes and whatever is computed from them
// alone: the exporter's shape arithmetic, causal masks, scales) or an SSA
// value of @forward. A handler checks its node once and then either
// evaluates it on constants (when every input is one and it has an
// evaluation form) or emits mlc ops: one function holds both forms of an
// operator, so its checks and its shape rules are written once. That is the
// importer's only constant folding.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_FRONTEND_ONNX_ONNXNODE_H
#define MLC_FRONTEND_ONNX_ONNXNODE_H

#include "dialects/mlc/MlcDialect.h"
#include "frontend/onnx/OnnxAliases.h"
#include "frontend/onnx/OnnxImporter.h"
#include "frontend/onnx/OnnxParameters.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace mlc::onnximport {

using Shape = std::vector<int64_t>;

enum class Kind { Float, Int, Bool };

/// A double as an integer without undefined behaviour: NaN is 0 and values
/// beyond int64 clamp.
inline int64_t toInt(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9.2e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18)
    return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

/// Element counts saturate at kHuge, so that a hostile shape is refused by
/// the size checks instead of overflowing them.
constexpr int64_t kHuge = int64_t(1) << 62;
inline int64_t saturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  if (a < 0 || b < 0 || a > kHuge / b)
    return kHuge;
  return a * b;
}
inline int64_t product(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n = saturatingMul(n, d);
  return n;
}
std::string shapeText(const Shape &s);
Shape stridesOf(const Shape &s);
/// Numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b);
/// Index into `in` (broadcast to `out`) of the element at flat index `k` of
/// `out`.
int64_t broadcastIndex(int64_t k, const Shape &out, const Shape &in);
/// The shortest decimal that rounds to the same float: ONNX keeps ratios
/// and epsilons as floats, mlc's attributes are doubles (0.1f -> 0.1).
double floatDecimal(double v);

/// A tensor known while importing. Floats in `f`, integers and booleans in `i`.
struct Const {
  Kind kind = Kind::Float;
  Shape shape;
  std::vector<double> f;
  std::vector<int64_t> i;

  int64_t numel() const { return product(shape); }
  double at(int64_t k) const { return kind == Kind::Float ? f[k] : double(i[k]); }
  int64_t intAt(int64_t k) const { return kind == Kind::Float ? toInt(f[k]) : i[k]; }
  void resize(int64_t n) {
    if (kind == Kind::Float)
      f.assign(n, 0);
    else
      i.assign(n, 0);
  }
  void set(int64_t k, double v) {
    if (kind == Kind::Float)
      f[k] = v;
    else if (kind == Kind::Bool)
      i[k] = v != 0;
    else
      i[k] = toInt(v);
  }
  void copyFrom(int64_t k, const Const &src, int64_t s) {
    if (kind == Kind::Float)
      f[k] = src.at(s);
    else
      i[k] = src.intAt(s);
  }
};
using ConstPtr = std::shared_ptr<const Const>;

/// What a name of the graph stands for: a value of @forward or a constant.
struct Entry {
  mlir::Value value;
  ConstPtr constant;
  /// A sequence (SplitToSequence's result), which only SequenceAt reads.
  std::shared_ptr<const std::vector<Entry>> sequence;
};

std::optional<Kind> kindOfOnnx(int onnxType);

inline Shape shapeOf(mlir::Value v) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

/// The parameters the exporter's optimizer folded into a constant or merged
/// into an equal computation, given back where the file fixes them
/// (OnnxRecover.cpp).
struct RecoveredParameters {
  /// Each recovered parameter -> the initializer its starting value came
  /// from (the folded constant, or the merged node's input).
  std::map<std::string, std::string> source;
  /// The scalar 1 the recovered `Add(weight, one)` nodes read, which the
  /// graph does not hold; empty when none was added.
  std::string one;
};

/// Float initializers that may be parameters, left undecoded until a
/// recovery reads one's value: `mlc export-onnx` decodes no parameter
/// otherwise. `names` are those not in paramInits yet; `decode` gives one's
/// value as the importer decodes it.
struct LazyParameters {
  std::set<std::string> names;
  std::function<llvm::Expected<Const>(const std::string &)> decode;
};

/// Edits `g` into what torch computed, where the file fixes a lost
/// parameter: the added nodes read it under its torch name. `paramInits`
/// holds the float initializers that may be parameters (OnnxParameters.h),
/// with those of `lazy` (if any) decoded into it as they are read, and gets
/// each recovered parameter's starting value. The importer runs it before
/// declaring parameters; `mlc export-onnx` on the model it writes. Errors
/// name `file`.
llvm::Expected<RecoveredParameters>
recoverLostParameters(onnx::GraphProto &g, const ExportSignature &signature,
                      std::map<std::string, Const> &paramInits, const std::string &file,
                      LazyParameters *lazy = nullptr);

/// The state of one import, shared by the driver and the handlers.
class Importer {
public:
  Importer(mlir::MLIRContext &ctx, std::string file, const OnnxImportOptions &options)
      : ctx(ctx), b(&ctx), loc(b.getUnknownLoc()), file(std::move(file)), options(options) {}

  /// Imports `model`; recoverParameters may edit its graph.
  llvm::Expected<ImportedModel> run(onnx::ModelProto &model);

  // Errors --------------------------------------------------------------
  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), file + ": " + msg);
  }
  llvm::Error nodeError(const onnx::NodeProto &n, const llvm::Twine &msg) const {
    return error("node '" + nodeName(n) + "' (" + n.op_type() + ", opset " + std::to_string(opset) +
                 "): " + msg);
  }
  static std::string nodeName(const onnx::NodeProto &n) {
    if (!n.name().empty())
      return n.name();
    return n.output_size() ? n.output(0) : std::string("?");
  }

  // Types and tensors ---------------------------------------------------
  mlir::Type floatType() {
    return options.dtype == "f64" ? mlir::Type(b.getF64Type()) : mlir::Type(b.getF32Type());
  }
  mlir::Type elementFor(Kind k) {
    return k == Kind::Float ? floatType()
           : k == Kind::Int ? mlir::Type(b.getI64Type())
                            : mlir::Type(b.getI1Type());
  }
  llvm::Expected<Const> tensorFromProto(const onnx::TensorProto &t, const std::string &what);
  /// The `need` bytes of a tensor stored outside the model (data_location
  /// EXTERNAL: `location` relative to the model's directory, `offset`,
  /// `length`), bounds-checked; files are read once.
  llvm::Expected<llvm::StringRef> externalData(const onnx::TensorProto &t, const std::string &what,
                                               int64_t need);
  mlir::Value materialize(const Const &c);
  rt::HostTensor weightTensor(const Const &c) const;
  mlir::Value reshape(mlir::Value x, const Shape &shape);
  mlir::Value scalar(double v);

  /// Attribute `name` of `n`, when it has the type the operator's schema
  /// gives it. One of another type (a FLOAT axis) reads as absent and becomes
  /// the node's error, which convert() reports before anything else.
  const onnx::AttributeProto *attr(const onnx::NodeProto &n, const char *name,
                                   onnx::AttributeProto::AttributeType type) const;

  mlir::MLIRContext &ctx;
  mlir::OpBuilder b;
  mlir::Location loc;
  std::string file;
  const OnnxImportOptions &options;
  int64_t opset = 0;
  /// The first attribute of the node being converted whose type is wrong.
  mutable std::string attrMismatch;
  /// Names some node or graph output reads (unused extra outputs, such as
  /// Dropout's mask, are allowed).
  std::set<std::string> consumed;
  int64_t nextSeed = 1;
  /// The directory of the model file, where external data lies; empty when
  /// the model came as bytes (external data is then refused).
  std::string modelDir;

private:
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> externalFiles;
  llvm::Error declareInputs(const onnx::GraphProto &g);
  llvm::Error declareInitializers(const onnx::GraphProto &g, const ExportSignature &signature);
  /// Gives back the parameters the exporter's optimizer folded into a
  /// constant or merged into an equal computation, where the file fixes
  /// them (OnnxRecover.cpp): edits `g` and adds their initial values to
  /// paramInits.
  llvm::Error recoverParameters(onnx::GraphProto &g, const ExportSignature &signature);
  llvm::Error convert(const onnx::NodeProto &n);
  llvm::Error readInputs(const onnx::NodeProto &n, std::vector<const Entry *> &in);
  /// The value parameter `read.target` has where a node reads it from
  /// initializer `init` (OnnxParameters.h), created on first use.
  llvm::Expected<const Entry *> parameterRead(const ParameterRead &read, const std::string &init,
                                              const onnx::NodeProto &n);
  /// A block argument for parameter `name`, starting from `value`.
  mlir::Value addParameter(const std::string &name, const Const &value);
  llvm::Error finish(const onnx::GraphProto &g);
  llvm::Error addLoss(std::vector<std::pair<std::string, mlir::Value>> &outputs);

  mlir::func::FuncOp func;
  mlir::Block *block = nullptr;
  llvm::SmallVector<mlir::DictionaryAttr> argAttrs;
  std::map<std::string, Entry> values;
  std::map<std::string, int64_t> dimSizes;
  /// The position table that shortened a default sequence length, if any.
  std::string seqLenCappedBy;
  int64_t seqLenCappedTo = 0;
  /// Float initializers that become parameters, by name, until first use.
  std::map<std::string, Const> paramInits;
  /// Which parameter each read of an initializer is (OnnxParameters.h).
  ParameterPlan plan;
  /// The index of the node being converted.
  int nodeIndex = -1;
  /// Attributed files: a parameter's value as torch holds it, by name; and
  /// the entries of parameters (`name`, `name^T`) and of constant
  /// initializers.
  std::map<std::string, Const> paramValues;
  std::map<std::string, Entry> paramEntries;
  std::vector<std::pair<std::string, rt::HostTensor>> weights;
  std::set<std::string> paramNames;
  int64_t parameterCount = 0;
};

/// One node being converted: its inputs, its attributes, its results.
struct Node {
  Importer &im;
  const onnx::NodeProto &n;
  std::vector<const Entry *> in;
  std::vector<Entry> out;
  mlir::OpBuilder &b;
  mlir::Location loc;
  int64_t opset;

  Node(Importer &im, const onnx::NodeProto &n, std::vector<const Entry *> in)
      : im(im), n(n), in(std::move(in)), b(im.b), loc(im.loc), opset(im.opset) {}

  const std::string &op() const { return n.op_type(); }
  llvm::Error error(const llvm::Twine &msg) const { return im.nodeError(n, msg); }
  /// The first `count` inputs must be given.
  llvm::Error need(size_t count) const;
  /// Input `k` is given (present and not an omitted optional input).
  bool has(size_t k) const { return k < in.size() && in[k]; }
  bool isConst(size_t k) const { return has(k) && in[k]->constant; }
  /// Every given input is a constant.
  bool allConst() const;
  const Const &c(size_t k) const { return *in[k]->constant; }
  mlir::Value v(size_t k) { return in[k]->value ? in[k]->value : im.materialize(c(k)); }
  Shape shape(size_t k) const;
  Kind kind(size_t k) const;
  /// The first `count` inputs are floating point.
  llvm::Error floatOperands(size_t count) const;
  /// The first `count` inputs broadcast together; their shape.
  llvm::Expected<Shape> broadcast(size_t count) const;
  /// A shape a folded result may have (no negative dim, within the limit).
  llvm::Error checkFoldSize(const Shape &s) const;
  /// True when output `k` exists and something reads it.
  bool outputUsed(int k) const {
    return k < n.output_size() && !n.output(k).empty() && im.consumed.count(n.output(k));
  }

  // Attributes ------------------------------------------------------------
  const onnx::AttributeProto *attr(const char *name,
                                   onnx::AttributeProto::AttributeType type) const {
    return im.attr(n, name, type);
  }
  int64_t intAttr(const char *name, int64_t def) const {
    const auto *a = attr(name, onnx::AttributeProto::INT);
    return a ? a->i() : def;
  }
  double floatAttr(const char *name, double def) const {
    const auto *a = attr(name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : def;
  }
  std::string stringAttr(const char *name, const std::string &def) const {
    const auto *a = attr(name, onnx::AttributeProto::STRING);
    return a ? a->s() : def;
  }
  std::optional<Shape> intsAttr(const char *name) const;
  /// An optional constant integer list given as input `k` (axes, Slice's
  /// bounds) or, in older opsets, as attribute `name`.
  llvm::Expected<std::optional<Shape>> intsInputOrAttr(size_t k, const char *name) const;
  llvm::Expected<int64_t> axis(int64_t axis, int64_t rank) const;

  // Results ---------------------------------------------------------------
  llvm::Error result(mlir::Value v) {
    out.push_back({v, nullptr});
    return llvm::Error::success();
  }
  llvm::Error result(Const c) {
    out.push_back({mlir::Value(), std::make_shared<const Const>(std::move(c))});
    return llvm::Error::success();
  }
  /// Input `k` itself is the result (Identity, an inactive Dropout).
  llvm::Error forward(size_t k) {
    out.push_back(*in[k]);
    return llvm::Error::success();
  }
};

/// An operator's handler, for the opsets [minOpset, maxOpset] of the
/// default domain (the model's opset, which selects each operator's
/// latest version at or below it).
using Handler = llvm::Error (*)(Node &);
struct OpSchema {
  const char *opType;
  int minOpset, maxOpset;
  Handler handler;
};

/// The handlers of OnnxOps.cpp, OnnxShapeOps.cpp, OnnxNnOps.cpp and
/// OnnxRotaryOps.cpp.
llvm::ArrayRef<OpSchema> tensorOpSchemas();
llvm::ArrayRef<OpSchema> shapeOpSchemas();
llvm::ArrayRef<OpSchema> nnOpSchemas();
llvm::ArrayRef<OpSchema> rotaryOpSchemas();

/// The opsets of the default domain the importer reads.
constexpr int kMinOpset = 14, kMaxOpset = 23;

} // namespace mlc::onnximport

#endif // MLC_FRONTEND_ONNX_ONNXNODE_H
