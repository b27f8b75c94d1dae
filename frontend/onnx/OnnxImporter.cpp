//===- OnnxImporter.cpp - ONNX models as mlc graphs -------------------------===//
//
// A value of the ONNX graph is either a host constant (initializers that are
// not parameters, Constant nodes, and everything computed from them alone:
// the exporter's shape arithmetic, causal masks, scales) or an SSA value of
// @forward. Nodes whose inputs are all constants are evaluated here (up to
// a size limit), so every shape the graph computes is known while
// importing; other nodes become mlc ops, with their constant inputs
// materialized as mlc.constant.
//
//===----------------------------------------------------------------------===//

#include "contract/StepFunctions.h"
#include "frontend/onnx/OnnxImporter.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcLosses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <type_traits>

using namespace mlir;

namespace mlc {

bool isOnnxPath(llvm::StringRef path) { return path.ends_with_insensitive(".onnx"); }

namespace {

using Shape = std::vector<int64_t>;

enum class Kind { Float, Int, Bool };

/// A double as an integer without undefined behaviour: NaN is 0 and values
/// beyond int64 clamp.
int64_t toInt(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9.2e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18)
    return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

/// One binary op of the folder on two numbers. Integers wrap (two's
/// complement) and divide toward zero (the caller rules out x / 0).
template <typename T>
T binaryOp(const std::string &op, T x, T y) {
  constexpr bool integral = std::is_integral_v<T>;
  auto wrap = [](uint64_t v) { return T(int64_t(v)); };
  if (op == "Add")
    return integral ? wrap(uint64_t(x) + uint64_t(y)) : T(x + y);
  if (op == "Sub")
    return integral ? wrap(uint64_t(x) - uint64_t(y)) : T(x - y);
  if (op == "Mul")
    return integral ? wrap(uint64_t(x) * uint64_t(y)) : T(x * y);
  if (op == "Div")
    return x / y;
  if (op == "Pow")
    return integral ? T(toInt(std::pow(double(x), double(y)))) : T(std::pow(x, y));
  if (op == "Max")
    return std::max(x, y);
  if (op == "Min")
    return std::min(x, y);
  if (op == "Equal")
    return x == y;
  if (op == "Less")
    return x < y;
  if (op == "Greater")
    return x > y;
  if (op == "LessOrEqual")
    return x <= y;
  if (op == "GreaterOrEqual")
    return x >= y;
  if (op == "And")
    return x != 0 && y != 0;
  if (op == "Or")
    return x != 0 || y != 0;
  return 0;
}

/// A tensor known while importing. Floats in `f`, integers and booleans in `i`.
struct Const {
  Kind kind = Kind::Float;
  Shape shape;
  std::vector<double> f;
  std::vector<int64_t> i;

  int64_t numel() const;
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

/// What a name of the graph stands for.
struct Entry {
  Value value;
  ConstPtr constant;
};


/// Element counts saturate at kHuge, so that a hostile shape is refused by
/// the size checks instead of overflowing them.
constexpr int64_t kHuge = int64_t(1) << 62;
int64_t saturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  if (a < 0 || b < 0 || a > kHuge / b)
    return kHuge;
  return a * b;
}
int64_t product(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n = saturatingMul(n, d);
  return n;
}

int64_t Const::numel() const { return product(shape); }

std::string shapeText(const Shape &s) {
  std::string t = "[";
  for (size_t k = 0; k < s.size(); ++k)
    t += (k ? ", " : "") + std::to_string(s[k]);
  return t + "]";
}

Shape stridesOf(const Shape &s) {
  Shape st(s.size(), 1);
  for (int k = int(s.size()) - 2; k >= 0; --k)
    st[k] = st[k + 1] * s[k + 1];
  return st;
}

/// Numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t k = 0; k < n; ++k) {
    int64_t x = k < n - a.size() ? 1 : a[k - (n - a.size())];
    int64_t y = k < n - b.size() ? 1 : b[k - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      return std::nullopt;
    out[k] = x == 1 ? y : x;
  }
  return out;
}

/// Index into `in` (broadcast to `out`) of the element at flat index `k` of `out`.
int64_t broadcastIndex(int64_t k, const Shape &out, const Shape &in) {
  int64_t idx = 0, stride = 1;
  for (int d = int(out.size()) - 1, e = int(in.size()) - 1; d >= 0; --d, --e) {
    int64_t coord = k % out[d];
    k /= out[d];
    if (e >= 0) {
      if (in[e] != 1)
        idx += coord * stride;
      stride *= in[e];
    }
  }
  return idx;
}

/// The shortest decimal that rounds to the same float: ONNX keeps ratios
/// and epsilons as floats, mlc's attributes are doubles (0.1f -> 0.1).
double floatDecimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", double(float(v)));
  return std::strtod(buf, nullptr);
}

class Importer {
public:
  Importer(MLIRContext &ctx, std::string file, const OnnxImportOptions &options)
      : ctx(ctx), b(&ctx), loc(b.getUnknownLoc()), file(std::move(file)), options(options) {}

  llvm::Expected<ImportedModel> run(const onnx::ModelProto &model);

private:
  // Errors --------------------------------------------------------------
  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), file + ": " + msg);
  }
  llvm::Error nodeError(const onnx::NodeProto &n, const llvm::Twine &msg) const {
    return error("node '" + nodeName(n) + "' (" + n.op_type() + ", opset " +
                 std::to_string(opset) + "): " + msg);
  }
  /// The first `count` inputs of `n` must be given.
  llvm::Error needInputs(const onnx::NodeProto &n, const std::vector<const Entry *> &in,
                         size_t count) const {
    if (in.size() < count ||
        std::any_of(in.begin(), in.begin() + count, [](const Entry *e) { return !e; }))
      return nodeError(n, "needs " + std::to_string(count) + " inputs");
    return llvm::Error::success();
  }
  std::string nodeName(const onnx::NodeProto &n) const {
    if (!n.name().empty())
      return n.name();
    return n.output_size() ? n.output(0) : std::string("?");
  }

  // Types ---------------------------------------------------------------
  Type floatType() {
    return options.dtype == "f64" ? Type(b.getF64Type()) : Type(b.getF32Type());
  }
  Type elementFor(Kind k) {
    return k == Kind::Float ? floatType() : k == Kind::Int ? Type(b.getI64Type()) : Type(b.getI1Type());
  }
  static std::optional<Kind> kindOfOnnx(int t) {
    switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return Kind::Float;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
      return Kind::Int;
    case onnx::TensorProto::BOOL:
      return Kind::Bool;
    default:
      return std::nullopt;
    }
  }
  static Kind kindOfType(Type el) {
    if (isa<FloatType>(el))
      return Kind::Float;
    return el.isInteger(1) ? Kind::Bool : Kind::Int;
  }
  static Shape shapeOf(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return Shape(t.getShape().begin(), t.getShape().end());
  }
  Shape shapeOfEntry(const Entry &e) const {
    return e.constant ? e.constant->shape : shapeOf(e.value);
  }
  Kind kindOfEntry(const Entry &e) const {
    return e.constant ? e.constant->kind
                      : kindOfType(cast<RankedTensorType>(e.value.getType()).getElementType());
  }

  // Tensors -------------------------------------------------------------
  llvm::Expected<Const> tensorFromProto(const onnx::TensorProto &t, const std::string &what);
  Value materialize(const Const &c);
  /// An initializer's values in the model's float type, for the package.
  rt::HostTensor weightTensor(const Const &c) const {
    rt::HostTensor t;
    t.dtype = options.dtype;
    t.shape = c.shape;
    if (options.dtype == "f64") {
      t.data.resize(c.f.size() * 8);
      std::memcpy(t.data.data(), c.f.data(), t.data.size());
    } else {
      std::vector<float> v(c.f.begin(), c.f.end());
      t.data.resize(v.size() * 4);
      std::memcpy(t.data.data(), v.data(), t.data.size());
    }
    return t;
  }
  Value valueOf(const Entry &e) {
    return e.value ? e.value : materialize(*e.constant);
  }

  // Graph ---------------------------------------------------------------
  llvm::Error declareInputs(const onnx::GraphProto &g);
  llvm::Error convert(const onnx::NodeProto &n);
  llvm::Expected<std::optional<Const>> fold(const onnx::NodeProto &n,
                                            const std::vector<const Entry *> &in);
  llvm::Error emit(const onnx::NodeProto &n, const std::vector<const Entry *> &in,
                   std::vector<Entry> &out);
  llvm::Error finish(const onnx::GraphProto &g);

  // Attributes ----------------------------------------------------------
  using AttrType = onnx::AttributeProto::AttributeType;
  /// Attribute `name` of `n`, when it has the type the operator's schema
  /// gives it. One of another type (a FLOAT axis) reads as absent and becomes
  /// the node's error, which convert() reports before anything else.
  const onnx::AttributeProto *attr(const onnx::NodeProto &n, const char *name,
                                   AttrType type) const {
    for (const auto &a : n.attribute()) {
      if (a.name() != name)
        continue;
      if (a.type() == type)
        return &a;
      if (attrMismatch.empty())
        attrMismatch = "attribute '" + std::string(name) + "' has type " +
                       onnx::AttributeProto::AttributeType_Name(a.type()) + "; " +
                       n.op_type() + " expects " +
                       onnx::AttributeProto::AttributeType_Name(type);
      return nullptr;
    }
    return nullptr;
  }
  /// `err`, unless an attribute of the node being converted had the wrong
  /// type: that is the error then, as what followed read it as absent.
  llvm::Error attrError(const onnx::NodeProto &n, llvm::Error err) const {
    if (attrMismatch.empty())
      return err;
    llvm::consumeError(std::move(err));
    return nodeError(n, attrMismatch);
  }
  /// True when output `k` of `n` exists and something reads it.
  bool outputUsed(const onnx::NodeProto &n, int k) const {
    return k < n.output_size() && !n.output(k).empty() && consumed.count(n.output(k));
  }
  int64_t intAttr(const onnx::NodeProto &n, const char *name, int64_t def) const {
    const auto *a = attr(n, name, onnx::AttributeProto::INT);
    return a ? a->i() : def;
  }
  double floatAttr(const onnx::NodeProto &n, const char *name, double def) const {
    const auto *a = attr(n, name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : def;
  }
  std::optional<Shape> intsAttr(const onnx::NodeProto &n, const char *name) const {
    const auto *a = attr(n, name, onnx::AttributeProto::INTS);
    if (!a)
      return std::nullopt;
    return Shape(a->ints().begin(), a->ints().end());
  }
  /// An optional constant integer list given as input `k` (opset >= 13 axes,
  /// Slice's bounds) or, in older opsets, as attribute `name`.
  llvm::Expected<std::optional<Shape>> intsInputOrAttr(const onnx::NodeProto &n,
                                                       const std::vector<const Entry *> &in,
                                                       size_t k, const char *name) {
    if (k < in.size() && in[k]) {
      if (!in[k]->constant)
        return nodeError(n, "input #" + std::to_string(k) + " (" + name +
                                ") must be a constant the importer can evaluate");
      const Const &c = *in[k]->constant;
      if (c.kind == Kind::Float)
        return nodeError(n, std::string(name) + " must be integers");
      return std::optional<Shape>(c.i);
    }
    return intsAttr(n, name);
  }
  llvm::Expected<int64_t> normalizeAxis(const onnx::NodeProto &n, int64_t axis, int64_t rank) {
    if (axis < -rank || axis >= rank)
      return nodeError(n, llvm::formatv("axis {0} is out of range for rank {1}", axis, rank).str());
    return axis < 0 ? axis + rank : axis;
  }

  // Emission helpers ------------------------------------------------------
  Value reshape(Value x, const Shape &shape) {
    if (shapeOf(x) == shape)
      return x;
    auto type = RankedTensorType::get(
        shape, cast<RankedTensorType>(x.getType()).getElementType());
    return b.create<ReshapeOp>(loc, type, x);
  }
  Value scalar(double v) {
    Const c;
    c.kind = Kind::Float;
    c.f = {v};
    return materialize(c);
  }

  MLIRContext &ctx;
  OpBuilder b;
  Location loc;
  std::string file;
  const OnnxImportOptions &options;
  int64_t opset = 0;
  /// The first attribute of the node being converted whose type is wrong.
  mutable std::string attrMismatch;

  func::FuncOp func;
  Block *block = nullptr;
  SmallVector<DictionaryAttr> argAttrs;
  std::map<std::string, Entry> values;
  std::map<std::string, int64_t> dimSizes;
  /// Float initializers that become parameters, by name, until first use.
  std::map<std::string, Const> paramInits;
  std::map<std::string, Value> params;
  std::vector<std::pair<std::string, rt::HostTensor>> weights;
  std::set<std::string> paramNames;
  /// Names some node or graph output reads (unused extra outputs, such as
  /// Dropout's mask, are allowed).
  std::set<std::string> consumed;
  int64_t nextSeed = 1;
  int64_t parameterCount = 0;
};

llvm::Expected<Const> Importer::tensorFromProto(const onnx::TensorProto &t,
                                                const std::string &what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return error(what + " keeps its data in an external file; re-export with the weights "
                        "inside the model (torch.onnx.export does for models under 2 GB)");
  auto kind = kindOfOnnx(t.data_type());
  if (!kind)
    return error(what + " has data type " + std::to_string(t.data_type()) +
                 ", which mlc does not import (float, double, integer and bool tensors)");
  Const c;
  c.kind = *kind;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t(1) << 40) || (d > 0 && product(c.shape) > (int64_t(1) << 40) / d))
      return error(what + " has an invalid or oversized shape");
    c.shape.push_back(d);
  }
  const int64_t n = c.numel();
  const std::string &raw = t.raw_data();
  int64_t elemBytes = 0;
  switch (t.data_type()) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    elemBytes = 8;
    break;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    elemBytes = 4;
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
    elemBytes = 2;
    break;
  default:
    elemBytes = 1;
  }
  // The data must be there before anything is allocated for it.
  int64_t stored = t.has_raw_data() ? int64_t(raw.size()) / elemBytes
                   : t.data_type() == onnx::TensorProto::FLOAT  ? t.float_data_size()
                   : t.data_type() == onnx::TensorProto::DOUBLE ? t.double_data_size()
                   : t.data_type() == onnx::TensorProto::INT64  ? t.int64_data_size()
                                                                : t.int32_data_size();
  if (t.has_raw_data() && int64_t(raw.size()) != n * elemBytes)
    return error(what + llvm::formatv(" holds {0} bytes; its shape {1} needs {2}", raw.size(),
                                      shapeText(c.shape), n * elemBytes)
                            .str());
  if (stored != n)
    return error(what + llvm::formatv(" holds {0} values; its shape {1} needs {2}", stored,
                                      shapeText(c.shape), n)
                            .str());
  if (n > options.foldLimit * 64)
    return error(what + " holds " + std::to_string(n) + " values, more than mlc imports");
  c.resize(n);
  if (t.has_raw_data()) {
    const char *p = raw.data();
    for (int64_t k = 0; k < n; ++k, p += elemBytes) {
      switch (t.data_type()) {
      case onnx::TensorProto::FLOAT: {
        float v;
        std::memcpy(&v, p, 4);
        c.f[k] = v;
        break;
      }
      case onnx::TensorProto::DOUBLE:
        std::memcpy(&c.f[k], p, 8);
        break;
      case onnx::TensorProto::INT64:
        std::memcpy(&c.i[k], p, 8);
        break;
      case onnx::TensorProto::INT32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        c.i[k] = v;
        break;
      }
      case onnx::TensorProto::INT16: {
        int16_t v;
        std::memcpy(&v, p, 2);
        c.i[k] = v;
        break;
      }
      case onnx::TensorProto::INT8:
        c.i[k] = int8_t(*p);
        break;
      case onnx::TensorProto::UINT8:
      case onnx::TensorProto::BOOL:
        c.i[k] = uint8_t(*p);
        break;
      default: { // float16 / bfloat16
        uint16_t h;
        std::memcpy(&h, p, 2);
        uint32_t bits;
        if (t.data_type() == onnx::TensorProto::BFLOAT16) {
          bits = uint32_t(h) << 16;
        } else {
          uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
          float v = exp == 0    ? std::ldexp(float(man), -24)
                    : exp == 31 ? (man ? NAN : INFINITY)
                                : std::ldexp(float(man + 1024), int(exp) - 25);
          std::memcpy(&bits, &v, 4);
          bits |= sign << 31;
        }
        float v;
        std::memcpy(&v, &bits, 4);
        c.f[k] = v;
      }
      }
    }
    return c;
  }
  // Typed fields.
  auto take = [&](int64_t have, auto get) -> llvm::Error {
    if (have != n)
      return error(what + llvm::formatv(" holds {0} values; its shape {1} needs {2}", have,
                                        shapeText(c.shape), n)
                              .str());
    for (int64_t k = 0; k < n; ++k)
      c.set(k, get(k));
    return llvm::Error::success();
  };
  llvm::Error err = llvm::Error::success();
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    err = take(t.float_data_size(), [&](int64_t k) { return double(t.float_data(k)); });
    break;
  case onnx::TensorProto::DOUBLE:
    err = take(t.double_data_size(), [&](int64_t k) { return t.double_data(k); });
    break;
  case onnx::TensorProto::INT64:
    if (t.int64_data_size() != n)
      err = error(what + " holds " + std::to_string(t.int64_data_size()) +
                  " values; its shape " + shapeText(c.shape) + " needs " + std::to_string(n));
    else
      for (int64_t k = 0; k < n; ++k)
        c.i[k] = t.int64_data(k);
    break;
  default: // int32_data holds int32, int16, int8, uint8, bool and float16 bits
    if (c.kind == Kind::Float)
      err = error(what + ": half-precision values must be stored as raw data");
    else
      err = take(t.int32_data_size(), [&](int64_t k) { return double(t.int32_data(k)); });
  }
  if (err)
    return std::move(err);
  return c;
}

Value Importer::materialize(const Const &c) {
  Type el = elementFor(c.kind);
  auto type = RankedTensorType::get(c.shape, el);
  bool splat = c.numel() > 0;
  for (int64_t k = 1; k < c.numel() && splat; ++k)
    splat = c.kind == Kind::Float ? c.f[k] == c.f[0] : c.i[k] == c.i[0];
  DenseElementsAttr attr;
  if (c.kind == Kind::Float) {
    if (splat) {
      attr = DenseElementsAttr::get(type, b.getFloatAttr(el, c.f[0]));
    } else if (el.isF64()) {
      attr = DenseElementsAttr::get(type, llvm::ArrayRef<double>(c.f));
    } else {
      std::vector<float> v(c.f.begin(), c.f.end());
      attr = DenseElementsAttr::get(type, llvm::ArrayRef<float>(v));
    }
  } else if (c.kind == Kind::Bool) {
    if (splat) {
      attr = DenseElementsAttr::get(type, b.getBoolAttr(c.i[0] != 0));
    } else {
      SmallVector<bool> v(c.i.begin(), c.i.end());
      attr = DenseElementsAttr::get(type, llvm::ArrayRef<bool>(v));
    }
  } else {
    attr = splat ? DenseElementsAttr::get(type, b.getI64IntegerAttr(c.i[0]).getValue())
                 : DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>(c.i));
  }
  return b.create<ConstantOp>(loc, attr);
}

llvm::Error Importer::declareInputs(const onnx::GraphProto &g) {
  std::set<std::string> initNames;
  for (const auto &t : g.initializer())
    initNames.insert(t.name());
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
        dimSizes[name] = options.seqLen;
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
// Evaluation of constant nodes
//===----------------------------------------------------------------------===//

llvm::Expected<std::optional<Const>>
Importer::fold(const onnx::NodeProto &n, const std::vector<const Entry *> &in) {
  const std::string &op = n.op_type();
  // Shape needs only its input's shape.
  if (op == "Shape") {
    if (in.empty() || !in[0])
      return nodeError(n, "needs one input");
    Shape s = shapeOfEntry(*in[0]);
    int64_t rank = s.size();
    int64_t start = intAttr(n, "start", 0), end = intAttr(n, "end", rank);
    start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
    end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
    Const c;
    c.kind = Kind::Int;
    for (int64_t k = start; k < end; ++k)
      c.i.push_back(s[k]);
    c.shape = {int64_t(c.i.size())};
    return std::optional<Const>(c);
  }
  if (op == "Constant") {
    if (const auto *a = attr(n, "value", onnx::AttributeProto::TENSOR))
      return tensorFromProto(a->t(), "Constant node '" + nodeName(n) + "'");
    Const c;
    if (const auto *a = attr(n, "value_float", onnx::AttributeProto::FLOAT)) {
      c.f = {a->f()};
    } else if (const auto *a = attr(n, "value_int", onnx::AttributeProto::INT)) {
      c.kind = Kind::Int;
      c.i = {a->i()};
    } else if (const auto *a = attr(n, "value_ints", onnx::AttributeProto::INTS)) {
      c.kind = Kind::Int;
      c.i.assign(a->ints().begin(), a->ints().end());
      c.shape = {int64_t(c.i.size())};
    } else if (const auto *a = attr(n, "value_floats", onnx::AttributeProto::FLOATS)) {
      c.f.assign(a->floats().begin(), a->floats().end());
      c.shape = {int64_t(c.f.size())};
    } else {
      return nodeError(n, "has no value attribute mlc supports (value, value_float, "
                          "value_int, value_floats, value_ints)");
    }
    return std::optional<Const>(c);
  }
  for (const Entry *e : in)
    if (e && !e->constant)
      return std::optional<Const>();
  auto C = [&](size_t k) -> const Const & { return *in[k]->constant; };
  auto need = [&](size_t count) { return needInputs(n, in, count); };
  auto checkSize = [&](const Shape &s) -> llvm::Error {
    for (int64_t d : s)
      if (d < 0)
        return nodeError(n, "computes the negative dim in " + shapeText(s));
    if (product(s) > options.foldLimit)
      return nodeError(n, "would hold " + std::to_string(product(s)) + " elements");
    return llvm::Error::success();
  };

  // Elementwise.
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Equal",
                                               "Less", "Greater", "And", "Or", "Max", "Min",
                                               "LessOrEqual", "GreaterOrEqual"};
  static const std::set<std::string> unary = {"Sqrt", "Neg", "Cast", "Not", "Erf", "Tanh",
                                              "Exp", "Log", "Reciprocal", "Identity", "Abs",
                                              "Floor", "Ceil"};
  if (binary.count(op) || op == "Where") {
    size_t arity = op == "Where" ? 3 : 2;
    if (auto err = need(arity))
      return std::move(err);
    std::optional<Shape> s = C(0).shape;
    for (size_t k = 1; k < arity && s; ++k)
      s = broadcastShapes(*s, C(k).shape);
    if (!s)
      return nodeError(n, "inputs of shapes " + shapeText(C(0).shape) + " and " +
                              shapeText(C(1).shape) + " do not broadcast");
    if (auto err = checkSize(*s))
      return std::move(err);
    Const r;
    bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "And" ||
                   op == "Or" || op == "LessOrEqual" || op == "GreaterOrEqual";
    r.kind = compare ? Kind::Bool : op == "Where" ? C(1).kind : C(0).kind;
    r.shape = *s;
    int64_t total = product(*s);
    r.resize(total);
    bool ints = C(arity == 3 ? 1 : 0).kind != Kind::Float;
    for (int64_t k = 0; k < total; ++k) {
      if (op == "Where") {
        bool cond = C(0).at(broadcastIndex(k, *s, C(0).shape)) != 0;
        const Const &src = cond ? C(1) : C(2);
        r.copyFrom(k, src, broadcastIndex(k, *s, src.shape));
        continue;
      }
      int64_t ia = broadcastIndex(k, *s, C(0).shape), ib = broadcastIndex(k, *s, C(1).shape);
      if (ints && C(1).kind != Kind::Float) {
        int64_t x = C(0).intAt(ia), y = C(1).intAt(ib);
        if (op == "Div" && (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)))
          return nodeError(n, "divides integers by zero");
        r.i[k] = binaryOp(op, x, y);
      } else {
        r.set(k, binaryOp(op, C(0).at(ia), C(1).at(ib)));
      }
    }
    // Float results are rounded to the model's float type, as a kernel would.
    if (r.kind == Kind::Float && options.dtype == "f32")
      for (double &v : r.f)
        v = double(float(v));
    return std::optional<Const>(r);
  }
  if (unary.count(op)) {
    if (auto err = need(1))
      return std::move(err);
    Const r = C(0);
    if (op == "Identity")
      return std::optional<Const>(r);
    if (op == "Cast") {
      auto kind = kindOfOnnx(int(intAttr(n, "to", 1)));
      if (!kind)
        return nodeError(n, "casts to data type " + std::to_string(intAttr(n, "to", 1)) +
                                ", which mlc does not support");
      Const c;
      c.kind = *kind;
      c.shape = r.shape;
      c.resize(r.numel());
      for (int64_t k = 0; k < r.numel(); ++k)
        c.set(k, *kind == Kind::Float ? r.at(k) : double(r.intAt(k)));
      if (*kind != Kind::Float && r.kind == Kind::Float)
        for (int64_t k = 0; k < r.numel(); ++k)
          c.i[k] = *kind == Kind::Bool ? r.f[k] != 0 : toInt(std::trunc(r.f[k]));
      return std::optional<Const>(c);
    }
    if (op == "Not") {
      for (int64_t &v : r.i)
        v = !v;
      return std::optional<Const>(r);
    }
    if (r.kind != Kind::Float) {
      if (op == "Neg" || op == "Abs") {
        for (int64_t &v : r.i)
          v = op == "Neg" ? int64_t(0 - uint64_t(v)) : (v < 0 ? int64_t(0 - uint64_t(v)) : v);
        return std::optional<Const>(r);
      }
      return nodeError(n, "of integers is not supported");
    }
    for (double &v : r.f) {
      if (op == "Sqrt")
        v = std::sqrt(v);
      else if (op == "Neg")
        v = -v;
      else if (op == "Erf")
        v = std::erf(v);
      else if (op == "Tanh")
        v = std::tanh(v);
      else if (op == "Exp")
        v = std::exp(v);
      else if (op == "Log")
        v = std::log(v);
      else if (op == "Reciprocal")
        v = 1 / v;
      else if (op == "Abs")
        v = std::fabs(v);
      else if (op == "Floor")
        v = std::floor(v);
      else if (op == "Ceil")
        v = std::ceil(v);
    }
    return std::optional<Const>(r);
  }

  // Shape and data movement (Reshape and its kin, Slice: emit() computes the
  // shape and keeps constants constant).
  if (op == "Concat") {
    if (in.empty())
      return nodeError(n, "needs inputs");
    if (auto err = need(in.size()))
      return std::move(err);
    int64_t rank = C(0).shape.size();
    auto axis = normalizeAxis(n, intAttr(n, "axis", 0), rank);
    if (!axis)
      return axis.takeError();
    Const r;
    r.kind = C(0).kind;
    r.shape = C(0).shape;
    r.shape[*axis] = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      Shape s = C(k).shape;
      if (int64_t(s.size()) != rank)
        return nodeError(n, "joins tensors of different ranks");
      for (int64_t d = 0; d < rank; ++d)
        if (d != *axis && s[d] != r.shape[d])
          return nodeError(n, "joins shapes " + shapeText(C(0).shape) + " and " + shapeText(s));
      r.shape[*axis] += s[*axis];
    }
    if (auto err = checkSize(r.shape))
      return std::move(err);
    int64_t outer = product(Shape(r.shape.begin(), r.shape.begin() + *axis));
    for (int64_t o = 0; o < outer; ++o)
      for (size_t k = 0; k < in.size(); ++k) {
        int64_t chunk = product(Shape(C(k).shape.begin() + *axis, C(k).shape.end()));
        for (int64_t e = 0; e < chunk; ++e) {
          if (r.kind == Kind::Float)
            r.f.push_back(C(k).at(o * chunk + e));
          else
            r.i.push_back(C(k).intAt(o * chunk + e));
        }
      }
    return std::optional<Const>(r);
  }
  if (op == "Gather") {
    if (auto err = need(2))
      return std::move(err);
    const Const &data = C(0), &idx = C(1);
    if (idx.kind == Kind::Float)
      return nodeError(n, "indices must be integers");
    int64_t rank = data.shape.size();
    auto axis = normalizeAxis(n, intAttr(n, "axis", 0), rank);
    if (!axis)
      return axis.takeError();
    Shape outShape(data.shape.begin(), data.shape.begin() + *axis);
    outShape.insert(outShape.end(), idx.shape.begin(), idx.shape.end());
    outShape.insert(outShape.end(), data.shape.begin() + *axis + 1, data.shape.end());
    if (auto err = checkSize(outShape))
      return std::move(err);
    int64_t outer = product(Shape(data.shape.begin(), data.shape.begin() + *axis));
    int64_t inner = product(Shape(data.shape.begin() + *axis + 1, data.shape.end()));
    int64_t dim = data.shape[*axis];
    Const r;
    r.kind = data.kind;
    r.shape = outShape;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < idx.numel(); ++j) {
        int64_t ix = idx.i[j] < 0 ? idx.i[j] + dim : idx.i[j];
        if (ix < 0 || ix >= dim)
          return nodeError(n, llvm::formatv("index {0} is out of range for a dim of {1}",
                                            idx.i[j], dim)
                                  .str());
        for (int64_t e = 0; e < inner; ++e) {
          int64_t s = (o * dim + ix) * inner + e;
          if (r.kind == Kind::Float)
            r.f.push_back(data.f[s]);
          else
            r.i.push_back(data.i[s]);
        }
      }
    return std::optional<Const>(r);
  }
  if (op == "Range") {
    if (auto err = need(3))
      return std::move(err);
    double start = C(0).at(0), limit = C(1).at(0), delta = C(2).at(0);
    if (C(0).numel() != 1 || C(1).numel() != 1 || C(2).numel() != 1 || delta == 0)
      return nodeError(n, "needs scalar start, limit and a non-zero delta");
    double count = std::ceil((limit - start) / delta);
    if (!(count <= double(options.foldLimit)))
      return nodeError(n, "would count past the size limit");
    int64_t len = std::max<int64_t>(0, toInt(count));
    Const r;
    r.kind = C(0).kind;
    r.shape = {len};
    r.resize(len);
    for (int64_t k = 0; k < len; ++k)
      r.set(k, start + double(k) * delta);
    return std::optional<Const>(r);
  }
  if (op == "ConstantOfShape") {
    if (auto err = need(1))
      return std::move(err);
    Const r;
    r.shape = C(0).i;
    if (C(0).kind == Kind::Float)
      return nodeError(n, "shape must be integers");
    if (auto err = checkSize(r.shape))
      return std::move(err);
    Const value;
    value.f = {0.0};
    if (const auto *a = attr(n, "value", onnx::AttributeProto::TENSOR)) {
      auto v = tensorFromProto(a->t(), "node '" + nodeName(n) + "' value");
      if (!v)
        return v.takeError();
      if (v->numel() != 1)
        return nodeError(n, "value must hold one element");
      value = *v;
    }
    r.kind = value.kind;
    r.resize(r.numel());
    for (int64_t k = 0; k < r.numel(); ++k)
      r.copyFrom(k, value, 0);
    return std::optional<Const>(r);
  }
  if (op == "Trilu") {
    if (auto err = need(1))
      return std::move(err);
    Const r = C(0);
    if (r.shape.size() < 2)
      return nodeError(n, "needs a tensor of rank >= 2");
    int64_t k = in.size() > 1 && in[1] ? C(1).intAt(0) : 0;
    bool upper = intAttr(n, "upper", 1);
    int64_t rows = r.shape[r.shape.size() - 2], cols = r.shape.back();
    for (int64_t e = 0; e < r.numel(); ++e) {
      int64_t i = (e / cols) % rows, j = e % cols;
      if (upper ? j - i < k : j - i > k)
        r.set(e, 0);
    }
    return std::optional<Const>(r);
  }
  return std::optional<Const>();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

llvm::Error Importer::convert(const onnx::NodeProto &n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return nodeError(n, "belongs to domain '" + n.domain() +
                            "'; mlc imports the default ONNX domain only");
  std::vector<const Entry *> in;
  for (const std::string &name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr); // an omitted optional input
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
      argAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("mlc.param", b.getStringAttr(name)),
           b.getNamedAttr("mlc.init", b.getStringAttr("package"))}));
      it = values.emplace(name, Entry{v, nullptr}).first;
    }
    in.push_back(&it->second);
  }
  // Identity of an initializer the exporter merged: a parameter of its own.
  if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 &&
      paramInits.count(n.input(0)) && !paramNames.count(n.output(0))) {
    Const init = paramInits.at(n.input(0));
    const std::string &name = n.output(0);
    Value v = block->addArgument(RankedTensorType::get(init.shape, floatType()), loc);
    argAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("mlc.param", b.getStringAttr(name)),
         b.getNamedAttr("mlc.init", b.getStringAttr("package"))}));
    paramNames.insert(name);
    weights.push_back({name, weightTensor(init)});
    values[name] = {v, nullptr};
    return llvm::Error::success();
  }
  attrMismatch.clear();
  auto folded = fold(n, in);
  if (!folded)
    return attrError(n, folded.takeError());
  if (auto err = attrError(n, llvm::Error::success()))
    return err;
  std::vector<Entry> out;
  if (*folded) {
    if (n.output_size() < 1)
      return nodeError(n, "has no output");
    out.push_back({Value(), std::make_shared<const Const>(std::move(**folded))});
  } else if (auto err = attrError(n, emit(n, in, out))) {
    return err;
  }
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

llvm::Error Importer::emit(const onnx::NodeProto &n, const std::vector<const Entry *> &in,
                           std::vector<Entry> &out) {
  const std::string &op = n.op_type();
  auto need = [&](size_t count) { return needInputs(n, in, count); };
  auto V = [&](size_t k) { return valueOf(*in[k]); };
  auto S = [&](size_t k) { return shapeOfEntry(*in[k]); };
  auto result = [&](Value v) {
    out.push_back({v, nullptr});
    return llvm::Error::success();
  };
  // Results that only need the input's data rearranged: constants stay
  // constants (for the exporter's shape arithmetic), values become views.
  auto rearranged = [&](const Shape &shape) -> llvm::Error {
    if (in[0]->constant) {
      Const c = *in[0]->constant;
      c.shape = shape;
      out.push_back({Value(), std::make_shared<const Const>(std::move(c))});
      return llvm::Error::success();
    }
    return result(reshape(V(0), shape));
  };
  auto floatOperands = [&](size_t count) -> llvm::Error {
    for (size_t k = 0; k < count; ++k)
      if (kindOfEntry(*in[k]) != Kind::Float)
        return nodeError(n, "input #" + std::to_string(k) +
                                " must be floating point here (integer arithmetic is only "
                                "supported on values the importer can evaluate)");
    return llvm::Error::success();
  };
  auto broadcastCheck = [&](size_t count) -> llvm::Error {
    std::optional<Shape> s = S(0);
    for (size_t k = 1; k < count && s; ++k)
      s = broadcastShapes(*s, S(k));
    if (!s)
      return nodeError(n, "inputs of shapes " + shapeText(S(0)) + " and " + shapeText(S(1)) +
                              " do not broadcast");
    return llvm::Error::success();
  };

  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") {
    if (auto err = need(2))
      return err;
    if (auto err = broadcastCheck(2))
      return err;
    if (auto err = floatOperands(2))
      return err;
    Value x = V(0), y = V(1);
    if (op == "Add")
      return result(b.create<AddOp>(loc, x, y));
    if (op == "Sub")
      return result(b.create<SubOp>(loc, x, y));
    if (op == "Mul")
      return result(b.create<MulOp>(loc, x, y));
    if (op == "Div")
      return result(b.create<DivOp>(loc, x, y));
    return result(b.create<PowOp>(loc, x, y));
  }
  if (op == "Sqrt" || op == "Erf" || op == "Tanh" || op == "Exp" || op == "Log" ||
      op == "Neg" || op == "Reciprocal") {
    if (auto err = need(1))
      return err;
    if (auto err = floatOperands(1))
      return err;
    Value x = V(0);
    if (op == "Sqrt")
      return result(b.create<SqrtOp>(loc, x));
    if (op == "Erf")
      return result(b.create<ErfOp>(loc, x));
    if (op == "Tanh")
      return result(b.create<TanhOp>(loc, x));
    if (op == "Exp")
      return result(b.create<ExpOp>(loc, x));
    if (op == "Log")
      return result(b.create<LogOp>(loc, x));
    if (op == "Neg")
      return result(b.create<NegOp>(loc, x));
    return result(b.create<DivOp>(loc, scalar(1.0), x));
  }
  if (op == "Relu") {
    if (auto err = need(1))
      return err;
    if (auto err = floatOperands(1))
      return err;
    Value x = V(0), zero = scalar(0.0);
    Value positive = b.create<CompareOp>(loc, ComparePredicate::gt, x, zero);
    return result(b.create<SelectOp>(loc, positive, x, zero));
  }
  if (op == "Identity") {
    if (auto err = need(1))
      return err;
    out.push_back(*in[0]);
    return llvm::Error::success();
  }
  if (op == "Cast") {
    if (auto err = need(1))
      return err;
    auto kind = kindOfOnnx(int(intAttr(n, "to", 1)));
    if (!kind)
      return nodeError(n, "casts to data type " + std::to_string(intAttr(n, "to", 1)) +
                              ", which mlc does not support");
    Value x = V(0);
    if (kindOfEntry(*in[0]) == *kind)
      return result(x);
    auto type = RankedTensorType::get(S(0), elementFor(*kind));
    return result(b.create<CastOp>(loc, type, x));
  }
  if (op == "Equal" || op == "Less" || op == "Greater") {
    if (auto err = need(2))
      return err;
    if (auto err = broadcastCheck(2))
      return err;
    if (kindOfEntry(*in[0]) != kindOfEntry(*in[1]))
      return nodeError(n, "compares tensors of different element types");
    auto pred = op == "Equal" ? ComparePredicate::eq
                : op == "Less" ? ComparePredicate::lt
                               : ComparePredicate::gt;
    return result(b.create<CompareOp>(loc, pred, V(0), V(1)));
  }
  if (op == "Where") {
    if (auto err = need(3))
      return err;
    if (auto err = broadcastCheck(3))
      return err;
    if (kindOfEntry(*in[0]) != Kind::Bool)
      return nodeError(n, "condition must be boolean");
    if (kindOfEntry(*in[1]) != kindOfEntry(*in[2]))
      return nodeError(n, "chooses between tensors of different element types");
    return result(b.create<SelectOp>(loc, V(0), V(1), V(2)));
  }
  if (op == "MatMul" || op == "Gemm") {
    if (auto err = need(2))
      return err;
    if (auto err = floatOperands(2))
      return err;
    Shape l = S(0), r = S(1);
    bool tA = op == "Gemm" && intAttr(n, "transA", 0), tB = op == "Gemm" && intAttr(n, "transB", 0);
    if (op == "Gemm" && (l.size() != 2 || r.size() != 2))
      return nodeError(n, "Gemm takes matrices; got " + shapeText(l) + " and " + shapeText(r));
    if (l.size() < 2 || r.size() < 2)
      return nodeError(n, "multiplies " + shapeText(l) + " by " + shapeText(r) +
                              "; mlc's matmul needs both operands of rank >= 2");
    int64_t kl = tA ? l[l.size() - 2] : l.back(), kr = tB ? r.back() : r[r.size() - 2];
    if (kl != kr)
      return nodeError(n, "multiplies " + shapeText(l) + " by " + shapeText(r) +
                              ": the inner dims differ");
    if (!broadcastShapes(Shape(l.begin(), l.end() - 2), Shape(r.begin(), r.end() - 2)))
      return nodeError(n, "batch dims of " + shapeText(l) + " and " + shapeText(r) +
                              " do not broadcast");
    Value y = b.create<MatmulOp>(loc, V(0), V(1), tA, tB);
    if (op == "Gemm") {
      double alpha = floatAttr(n, "alpha", 1.0), beta = floatAttr(n, "beta", 1.0);
      if (alpha != 1.0)
        y = b.create<MulOp>(loc, y, scalar(alpha));
      if (in.size() > 2 && in[2]) {
        if (!broadcastShapes(shapeOf(y), S(2)))
          return nodeError(n, "C of shape " + shapeText(S(2)) + " does not broadcast to " +
                                  shapeText(shapeOf(y)));
        Value c = V(2);
        if (beta != 1.0)
          c = b.create<MulOp>(loc, c, scalar(beta));
        y = b.create<AddOp>(loc, y, c);
      }
    }
    return result(y);
  }
  if (op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" || op == "Flatten") {
    if (auto err = need(1))
      return err;
    Shape s = S(0);
    int64_t rank = s.size();
    Shape target;
    if (op == "Reshape") {
      if (auto err = need(2))
        return err;
      if (!in[1]->constant || in[1]->constant->kind == Kind::Float)
        return nodeError(n, "the target shape must be integers the importer can evaluate");
      Shape spec = in[1]->constant->i;
      bool allowZero = intAttr(n, "allowzero", 0);
      int64_t known = 1, infer = -1;
      for (size_t k = 0; k < spec.size(); ++k) {
        int64_t d = spec[k];
        if (d == 0 && !allowZero) {
          if (int64_t(k) >= rank)
            return nodeError(n, "copies dim " + std::to_string(k) + " of a rank-" +
                                    std::to_string(rank) + " input");
          d = s[k];
        }
        if (d == -1) {
          if (infer >= 0)
            return nodeError(n, "has two -1 dims in " + shapeText(spec));
          infer = k;
        } else if (d < 0) {
          return nodeError(n, "has the negative dim " + std::to_string(d));
        } else {
          known = saturatingMul(known, d);
        }
        target.push_back(d);
      }
      if (infer >= 0) {
        if (known == 0 || product(s) % known)
          return nodeError(n, "cannot reshape " + shapeText(s) + " to " + shapeText(spec));
        target[infer] = product(s) / known;
      }
    } else if (op == "Flatten") {
      auto axis = normalizeAxis(n, intAttr(n, "axis", 1), rank + 1);
      if (!axis)
        return axis.takeError();
      target = {product(Shape(s.begin(), s.begin() + *axis)),
                product(Shape(s.begin() + *axis, s.end()))};
    } else {
      auto axesOr = intsInputOrAttr(n, in, 1, "axes");
      if (!axesOr)
        return axesOr.takeError();
      Shape axes = axesOr->value_or(Shape());
      if (op == "Unsqueeze") {
        int64_t outRank = rank + axes.size();
        std::set<int64_t> at;
        for (int64_t a : axes) {
          auto ax = normalizeAxis(n, a, outRank);
          if (!ax)
            return ax.takeError();
          if (!at.insert(*ax).second)
            return nodeError(n, "repeats axis " + std::to_string(a));
        }
        size_t next = 0;
        for (int64_t d = 0; d < outRank; ++d)
          target.push_back(at.count(d) ? 1 : s[next++]);
      } else {
        std::set<int64_t> drop;
        for (int64_t a : axes) {
          auto ax = normalizeAxis(n, a, rank);
          if (!ax)
            return ax.takeError();
          if (s[*ax] != 1)
            return nodeError(n, "squeezes dim " + std::to_string(a) + " of size " +
                                    std::to_string(s[*ax]));
          drop.insert(*ax);
        }
        for (int64_t d = 0; d < rank; ++d)
          if (!(axes.empty() ? s[d] == 1 : drop.count(d) > 0))
            target.push_back(s[d]);
      }
    }
    if (product(target) != product(s))
      return nodeError(n, "cannot reshape " + shapeText(s) + " to " + shapeText(target));
    return rearranged(target);
  }
  if (op == "Transpose") {
    if (auto err = need(1))
      return err;
    Shape s = S(0);
    Shape perm = intsAttr(n, "perm").value_or(Shape());
    if (perm.empty())
      for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d)
        perm.push_back(d);
    std::set<int64_t> seen(perm.begin(), perm.end());
    if (perm.size() != s.size() || seen.size() != s.size() || *seen.begin() != 0 ||
        *seen.rbegin() != int64_t(s.size()) - 1)
      return nodeError(n, "perm " + shapeText(perm) + " does not permute rank " +
                              std::to_string(s.size()));
    return result(b.create<TransposeOp>(loc, V(0), b.getDenseI64ArrayAttr(perm)));
  }
  if (op == "Concat") {
    if (in.empty())
      return nodeError(n, "needs inputs");
    if (auto err = need(in.size()))
      return err;
    int64_t rank = S(0).size();
    auto axis = normalizeAxis(n, intAttr(n, "axis", 0), rank);
    if (!axis)
      return axis.takeError();
    SmallVector<Value> xs;
    for (size_t k = 0; k < in.size(); ++k) {
      Shape s = S(k);
      if (int64_t(s.size()) != rank)
        return nodeError(n, "joins tensors of different ranks");
      if (kindOfEntry(*in[k]) != kindOfEntry(*in[0]))
        return nodeError(n, "joins tensors of different element types");
      for (int64_t d = 0; d < rank; ++d)
        if (d != *axis && s[d] != S(0)[d])
          return nodeError(n, "joins shapes " + shapeText(S(0)) + " and " + shapeText(s));
      xs.push_back(V(k));
    }
    return result(b.create<ConcatOp>(loc, xs, b.getI64IntegerAttr(*axis)));
  }
  if (op == "Split") {
    if (auto err = need(1))
      return err;
    Shape s = S(0);
    auto axis = normalizeAxis(n, intAttr(n, "axis", 0), s.size());
    if (!axis)
      return axis.takeError();
    auto splitOr = intsInputOrAttr(n, in, 1, "split");
    if (!splitOr)
      return splitOr.takeError();
    Shape sizes = splitOr->value_or(Shape());
    if (sizes.empty()) {
      int64_t parts = intAttr(n, "num_outputs", n.output_size());
      if (parts < 1 || parts != n.output_size())
        return nodeError(n, "splits into " + std::to_string(parts) + " parts for " +
                                std::to_string(n.output_size()) + " outputs");
      int64_t each = (s[*axis] + parts - 1) / parts;
      for (int64_t k = 0; k < parts; ++k)
        sizes.push_back(std::max<int64_t>(0, std::min(each, s[*axis] - k * each)));
    }
    int64_t total = 0;
    for (int64_t v : sizes) {
      if (v < 1 || v > s[*axis])
        return nodeError(n, "has the split size " + std::to_string(v) + " for a dim of " +
                                std::to_string(s[*axis]));
      total += v;
    }
    if (total != s[*axis] || int64_t(sizes.size()) != n.output_size())
      return nodeError(n, "splits dim " + std::to_string(*axis) + " of " + shapeText(s) +
                              " into " + shapeText(sizes) + " for " +
                              std::to_string(n.output_size()) + " outputs");
    auto split = b.create<SplitOp>(loc, V(0), b.getI64IntegerAttr(*axis),
                                   b.getDenseI64ArrayAttr(sizes));
    for (Value r : split.getResults())
      out.push_back({r, nullptr});
    return llvm::Error::success();
  }
  if (op == "Slice") {
    if (auto err = need(3))
      return err;
    Shape s = S(0);
    int64_t rank = s.size();
    auto starts = intsInputOrAttr(n, in, 1, "starts");
    if (!starts)
      return starts.takeError();
    auto ends = intsInputOrAttr(n, in, 2, "ends");
    if (!ends)
      return ends.takeError();
    auto axesOr = intsInputOrAttr(n, in, 3, "axes");
    if (!axesOr)
      return axesOr.takeError();
    auto stepsOr = intsInputOrAttr(n, in, 4, "steps");
    if (!stepsOr)
      return stepsOr.takeError();
    Shape st = starts->value_or(Shape()), en = ends->value_or(Shape());
    Shape axes = axesOr->value_or(Shape()), steps = stepsOr->value_or(Shape());
    if (axes.empty())
      for (size_t k = 0; k < st.size(); ++k)
        axes.push_back(k);
    if (steps.empty())
      steps.assign(st.size(), 1);
    if (st.size() != en.size() || st.size() != axes.size() || st.size() != steps.size())
      return nodeError(n, "starts, ends, axes and steps differ in length");
    Shape lo(rank, 0), hi = s, step(rank, 1);
    for (size_t k = 0; k < axes.size(); ++k) {
      auto ax = normalizeAxis(n, axes[k], rank);
      if (!ax)
        return ax.takeError();
      if (steps[k] < 1)
        return nodeError(n, "step " + std::to_string(steps[k]) +
                                " is not supported (steps must be >= 1)");
      int64_t dim = s[*ax];
      auto clampIndex = [&](int64_t v) {
        if (v < 0)
          v = v < -dim ? 0 : v + dim;
        return std::min(v, dim);
      };
      lo[*ax] = clampIndex(st[k]);
      hi[*ax] = std::max(lo[*ax], clampIndex(en[k]));
      step[*ax] = steps[k];
    }
    Shape outShape(rank);
    for (int64_t d = 0; d < rank; ++d)
      outShape[d] = hi[d] <= lo[d] ? 0 : 1 + (hi[d] - lo[d] - 1) / step[d];
    if (in[0]->constant) {
      const Const &c = *in[0]->constant;
      Const r;
      r.kind = c.kind;
      r.shape = outShape;
      Shape cs = stridesOf(s), os = stridesOf(outShape);
      int64_t total = product(outShape);
      r.resize(total);
      for (int64_t k = 0; k < total; ++k) {
        int64_t src = 0;
        for (int64_t d = 0; d < rank; ++d)
          src += (lo[d] + ((k / os[d]) % outShape[d]) * step[d]) * cs[d];
        r.copyFrom(k, c, src);
      }
      out.push_back({Value(), std::make_shared<const Const>(std::move(r))});
      return llvm::Error::success();
    }
    if (product(outShape) == 0)
      return nodeError(n, "produces an empty tensor " + shapeText(outShape));
    return result(b.create<SliceOp>(loc, V(0), b.getDenseI64ArrayAttr(lo),
                                    b.getDenseI64ArrayAttr(hi), b.getDenseI64ArrayAttr(step)));
  }
  if (op == "Gather") {
    if (auto err = need(2))
      return err;
    Shape data = S(0), idx = S(1);
    int64_t rank = data.size();
    auto axis = normalizeAxis(n, intAttr(n, "axis", 0), rank);
    if (!axis)
      return axis.takeError();
    if (kindOfEntry(*in[1]) == Kind::Float)
      return nodeError(n, "indices must be integers");
    // Constant indices on a value: slices (a scalar index drops the dim).
    if (in[1]->constant && in[1]->constant->numel() == 1 && idx.size() <= 1) {
      int64_t ix = in[1]->constant->i[0];
      if (ix < 0)
        ix += data[*axis];
      if (ix < 0 || ix >= data[*axis])
        return nodeError(n, "index " + std::to_string(in[1]->constant->i[0]) +
                                " is out of range for dim " + std::to_string(data[*axis]));
      Shape lo(rank, 0), hi = data, step(rank, 1);
      lo[*axis] = ix;
      hi[*axis] = ix + 1;
      Value s = b.create<SliceOp>(loc, V(0), b.getDenseI64ArrayAttr(lo),
                                  b.getDenseI64ArrayAttr(hi), b.getDenseI64ArrayAttr(step));
      Shape target = data;
      if (idx.empty())
        target.erase(target.begin() + *axis);
      else
        target[*axis] = 1;
      return result(reshape(s, target));
    }
    if (*axis != 0 || rank != 2 || kindOfEntry(*in[0]) != Kind::Float)
      return nodeError(n, "gathers along axis " + std::to_string(*axis) + " of " +
                              shapeText(data) +
                              "; mlc supports row gathers from a float matrix (embeddings) "
                              "and constant scalar indices");
    if (in[1]->constant)
      for (int64_t v : in[1]->constant->i)
        if (v < 0 || v >= data[0])
          return nodeError(n, "index " + std::to_string(v) + " is out of range for the " +
                                  std::to_string(data[0]) + " rows of '" + n.input(0) +
                                  "' (is the sequence longer than the model's positions?)");
    Value indices = V(1);
    if (!cast<RankedTensorType>(indices.getType()).getElementType().isInteger(64))
      indices = b.create<CastOp>(loc, RankedTensorType::get(idx, b.getI64Type()), indices);
    return result(b.create<EmbeddingOp>(loc, V(0), indices));
  }
  if (op == "Expand") {
    if (auto err = need(2))
      return err;
    if (!in[1]->constant || in[1]->constant->kind == Kind::Float)
      return nodeError(n, "the shape must be integers the importer can evaluate");
    auto s = broadcastShapes(S(0), in[1]->constant->i);
    if (!s)
      return nodeError(n, "cannot expand " + shapeText(S(0)) + " to " +
                              shapeText(in[1]->constant->i));
    if (*s == S(0))
      return result(V(0));
    auto type = RankedTensorType::get(
        *s, cast<RankedTensorType>(V(0).getType()).getElementType());
    return result(b.create<BroadcastOp>(loc, type, V(0)));
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    if (auto err = need(1))
      return err;
    if (auto err = floatOperands(1))
      return err;
    int64_t rank = S(0).size();
    if (rank == 0)
      return nodeError(n, "needs a tensor of rank >= 1");
    auto axis = normalizeAxis(n, intAttr(n, "axis", opset >= 13 ? -1 : 1), rank);
    if (!axis)
      return axis.takeError();
    if (opset < 13 && *axis != rank - 1)
      return nodeError(n, "before opset 13 softmax flattens from its axis; only the last "
                          "axis is supported");
    if (op == "Softmax")
      return result(b.create<SoftmaxOp>(loc, V(0), b.getI64IntegerAttr(*axis)));
    return result(b.create<LogSoftmaxOp>(loc, V(0), b.getI64IntegerAttr(*axis)));
  }
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") {
    if (auto err = need(1))
      return err;
    int64_t rank = S(0).size();
    // ReduceSum takes axes as an input from opset 13, the others from 18.
    size_t axesInput = (op == "ReduceSum" ? opset >= 13 : opset >= 18) ? 1 : size_t(-1);
    auto axesOr = intsInputOrAttr(n, in, axesInput, "axes");
    if (!axesOr)
      return axesOr.takeError();
    Shape axes;
    if (!*axesOr || (*axesOr)->empty()) {
      if (intAttr(n, "noop_with_empty_axes", 0))
        return result(V(0));
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    } else {
      for (int64_t a : **axesOr) {
        auto ax = normalizeAxis(n, a, rank);
        if (!ax)
          return ax.takeError();
        axes.push_back(*ax);
      }
      std::sort(axes.begin(), axes.end());
      axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    }
    bool keep = intAttr(n, "keepdims", 1);
    auto axesAttr = b.getDenseI64ArrayAttr(axes);
    UnitAttr keepAttr = keep ? b.getUnitAttr() : UnitAttr();
    if (op == "ReduceMean") {
      if (auto err = floatOperands(1))
        return err;
      return result(b.create<ReduceMeanOp>(loc, V(0), axesAttr, keepAttr));
    }
    if (op == "ReduceSum")
      return result(b.create<ReduceSumOp>(loc, V(0), axesAttr, keepAttr));
    return result(b.create<ReduceMaxOp>(loc, V(0), axesAttr, keepAttr));
  }
  if (op == "LayerNormalization") {
    if (auto err = need(2))
      return err;
    if (auto err = floatOperands(in.size() > 2 && in[2] ? 3 : 2))
      return err;
    Shape s = S(0);
    if (s.empty())
      return nodeError(n, "normalizes a scalar");
    double eps = floatDecimal(floatAttr(n, "epsilon", 1e-5));
    if (!(eps > 0) || !std::isfinite(eps))
      return nodeError(n, "epsilon " + std::to_string(eps) + " must be positive");
    auto axis = normalizeAxis(n, intAttr(n, "axis", -1), s.size());
    if (!axis)
      return axis.takeError();
    if (*axis != int64_t(s.size()) - 1)
      return nodeError(n, "normalizes from axis " + std::to_string(*axis) +
                              "; mlc normalizes over the last axis only");
    if (outputUsed(n, 1) || outputUsed(n, 2))
      return nodeError(n, "its mean and inverse-deviation outputs are not supported");
    Shape w = {s.back()};
    if (S(1) != w || (in.size() > 2 && in[2] && S(2) != w))
      return nodeError(n, "scale and bias must be of shape " + shapeText(w));
    Value bias;
    if (in.size() > 2 && in[2]) {
      bias = V(2);
    } else {
      Const zero;
      zero.shape = w;
      zero.f.assign(s.back(), 0.0);
      bias = materialize(zero);
    }
    return result(b.create<LayerNormOp>(loc, V(0), V(1), bias, b.getF64FloatAttr(eps)));
  }
  if (op == "Dropout") {
    if (auto err = need(1))
      return err;
    if (outputUsed(n, 1))
      return nodeError(n, "its mask output is not supported");
    double ratio = opset >= 12 ? 0.5 : floatAttr(n, "ratio", 0.5);
    if (opset >= 12 && in.size() > 1 && in[1]) {
      if (!in[1]->constant || in[1]->constant->numel() != 1)
        return nodeError(n, "ratio must be a constant scalar");
      ratio = in[1]->constant->at(0);
    }
    bool training = false;
    if (in.size() > 2 && in[2]) {
      if (!in[2]->constant || in[2]->constant->numel() != 1)
        return nodeError(n, "training_mode must be a constant scalar");
      training = in[2]->constant->at(0) != 0;
    }
    if (!(ratio >= 0 && ratio < 1))
      return nodeError(n, "ratio " + std::to_string(ratio) + " is not in [0, 1)");
    if (!training || ratio == 0) {
      out.push_back(*in[0]);
      return llvm::Error::success();
    }
    if (auto err = floatOperands(1))
      return err;
    return result(b.create<DropoutOp>(loc, V(0), b.getF64FloatAttr(floatDecimal(ratio)),
                                      b.getI64IntegerAttr(nextSeed++)));
  }
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    if (auto err = need(2))
      return err;
    if (in.size() > 2 && in[2])
      return nodeError(n, "class weights are not supported");
    if (outputUsed(n, 1))
      return nodeError(n, "its log-probability output is not supported");
    const onnx::AttributeProto *red = attr(n, "reduction", onnx::AttributeProto::STRING);
    std::string reduction = red ? red->s() : "mean";
    if (reduction != "mean")
      return nodeError(n, "reduction '" + reduction + "' is not supported (mean only)");
    Value scores = V(0);
    if (op == "NegativeLogLikelihoodLoss") {
      // NLL of a LogSoftmax is the cross-entropy of its input.
      auto ls = scores.getDefiningOp<LogSoftmaxOp>();
      if (!ls || ls.getAxis() != 1)
        return nodeError(n, "mlc imports NegativeLogLikelihoodLoss only of a "
                            "LogSoftmax over axis 1 (cross-entropy)");
      scores = ls.getInput();
    }
    Shape s = shapeOf(scores), l = S(1);
    if (s.size() < 2 || l.size() != s.size() - 1 || l[0] != s[0] ||
        !std::equal(l.begin() + 1, l.end(), s.begin() + 2))
      return nodeError(n, "scores " + shapeText(s) + " and labels " + shapeText(l) +
                              " do not match ([N, C, ...] and [N, ...])");
    if (kindOfEntry(*in[1]) != Kind::Int)
      return nodeError(n, "labels must be integers");
    if (!isa<FloatType>(cast<RankedTensorType>(scores.getType()).getElementType()))
      return nodeError(n, "scores must be floating point");
    int64_t classes = s[1];
    if (s.size() > 2) { // [N, C, d...] -> [N * d..., C]
      Shape perm = {0};
      for (size_t d = 2; d < s.size(); ++d)
        perm.push_back(d);
      perm.push_back(1);
      scores = b.create<TransposeOp>(loc, scores, b.getDenseI64ArrayAttr(perm));
      scores = reshape(scores, {product(s) / classes, classes});
    }
    Value labels = reshape(V(1), {product(l)});
    int64_t ignore = intAttr(n, "ignore_index", std::numeric_limits<int64_t>::min());
    return result(b.create<CrossEntropyOp>(loc, scores, labels, b.getI64IntegerAttr(ignore)));
  }
  if (op == "Trilu" || op == "Range" || op == "ConstantOfShape" || op == "Shape") {
    return nodeError(n, "is only supported on inputs the importer can evaluate (it builds "
                        "masks and shapes)");
  }
  static const char *supported =
      "Add, Cast, Concat, Constant, ConstantOfShape, Div, Dropout, Equal, Erf, Exp, Expand, "
      "Flatten, Gather, Gemm, Greater, Identity, LayerNormalization, Less, Log, LogSoftmax, "
      "MatMul, Mul, Neg, NegativeLogLikelihoodLoss, Pow, Range, Reciprocal, ReduceMax, "
      "ReduceMean, ReduceSum, Relu, Reshape, Shape, Slice, Softmax, SoftmaxCrossEntropyLoss, "
      "Split, Sqrt, Squeeze, Sub, Tanh, Transpose, Trilu, Unsqueeze, Where";
  return nodeError(n, std::string("is not supported; mlc imports ") + supported);
}

llvm::Error Importer::finish(const onnx::GraphProto &g) {
  std::vector<std::pair<std::string, Value>> outputs;
  for (const auto &o : g.output()) {
    auto it = values.find(o.name());
    if (it == values.end())
      return error("output '" + o.name() + "' is not computed by any node");
    outputs.push_back({o.name(), valueOf(it->second)});
  }
  if (outputs.empty())
    return error("the graph has no outputs");
  // The loss: a named scalar output, or computed from the logits. `auto`
  // takes the output 'loss' where there is one, else leaves the kind of
  // loss to mlc-infer-loss, which decides it from the recognized attention.
  bool hasLoss =
      std::any_of(outputs.begin(), outputs.end(), [](auto &p) { return p.first == "loss"; });
  bool hasLogits = std::any_of(outputs.begin(), outputs.end(),
                               [&](auto &p) { return p.first == options.logits; });
  std::string loss = options.loss;
  if (loss == "auto" && !hasLoss && hasLogits && !values.count(options.labels))
    func->setAttr("mlc.infer_loss",
                  b.getDictionaryAttr({b.getNamedAttr("logits", b.getStringAttr(options.logits)),
                                       b.getNamedAttr("labels", b.getStringAttr(options.labels))}));
  if (loss == "auto")
    loss = "loss";
  if (loss == "causal-lm" || loss == "masked-lm") {
    auto logits = std::find_if(outputs.begin(), outputs.end(),
                               [&](auto &p) { return p.first == options.logits; });
    if (logits == outputs.end())
      return error("--loss " + loss + " needs an output named '" + options.logits + "'");
    if (std::any_of(outputs.begin(), outputs.end(), [](auto &p) { return p.first == "loss"; }))
      return error("--loss " + loss + ": the model already has an output named 'loss'; "
                   "train on it with --loss loss");
    Shape s = shapeOf(logits->second);
    if (s.size() != 3 || s[1] < 2)
      return error("--loss " + loss + " needs logits of shape [batch, sequence, vocab], got " +
                   shapeText(s));
    if (values.count(options.labels))
      return error("--loss " + loss + ": the model already has an input named '" +
                   options.labels + "'; pick another with --labels");
    Value labels = block->addArgument(RankedTensorType::get({s[0], s[1]}, b.getI64Type()), loc);
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr("mlc.input", b.getStringAttr(options.labels))));
    Value ce = buildLanguageModelLoss(
        b, loc, logits->second, labels,
        loss == "causal-lm" ? LanguageModelLoss::Causal : LanguageModelLoss::Masked);
    outputs.insert(outputs.begin(), {"loss", ce});
  } else if (loss != "loss") {
    auto it = std::find_if(outputs.begin(), outputs.end(),
                           [&](auto &p) { return p.first == loss; });
    if (it == outputs.end())
      return error("--loss " + loss + ": the model has no output of that name");
    if (std::any_of(outputs.begin(), outputs.end(), [](auto &p) { return p.first == "loss"; }))
      return error("--loss " + loss + ": the model also has an output named 'loss'");
    it->first = "loss";
  }
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

llvm::Expected<ImportedModel> Importer::run(const onnx::ModelProto &model) {
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
  if (opset < 14 || opset > 18)
    return error("opset " + std::to_string(opset) +
                 " is not supported; mlc imports opsets 14 to 18 (export with "
                 "opset_version between 14 and 18)");
  const onnx::GraphProto &g = model.graph();

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  func = b.create<func::FuncOp>(loc, mlc::kForwardFn, b.getFunctionType({}, {}));
  module->push_back(func);
  block = func.addEntryBlock();
  b.setInsertionPointToStart(block);

  if (auto err = declareInputs(g))
    return std::move(err);
  for (const auto &t : g.initializer()) {
    if (t.name().empty())
      return error("an initializer has no name");
    auto c = tensorFromProto(t, "initializer '" + t.name() + "'");
    if (!c)
      return c.takeError();
    if (values.count(t.name()) || paramInits.count(t.name()))
      return error("initializer '" + t.name() + "' is defined twice");
    if (c->kind == Kind::Float && !c->shape.empty() && c->numel() > 0) {
      parameterCount += c->numel();
      paramNames.insert(t.name());
      weights.push_back({t.name(), weightTensor(*c)});
      paramInits.emplace(t.name(), std::move(*c));
    } else {
      values[t.name()] = {Value(), std::make_shared<const Const>(std::move(*c))};
    }
  }
  for (const auto &n : g.node())
    for (const std::string &name : n.input())
      consumed.insert(name);
  for (const auto &o : g.output())
    consumed.insert(o.name());
  for (const auto &n : g.node())
    if (auto err = convert(n))
      return std::move(err);
  if (auto err = finish(g))
    return std::move(err);
  // Parameters that no node reads are dropped from the weights.
  std::set<std::string> used;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto p = func.getArgAttrOfType<StringAttr>(i, "mlc.param"))
      used.insert(p.getValue().str());
  llvm::erase_if(weights, [&](auto &w) { return !used.count(w.first); });
  if (failed(verify(*module)))
    return error("internal error: the imported graph does not verify");

  ImportedModel m;
  m.module = std::move(module);
  m.weights = std::move(weights);
  std::string dims;
  for (auto &[name, size] : dimSizes)
    dims += (dims.empty() ? "" : ", ") + name + "=" + std::to_string(size);
  int64_t count = 0;
  for (auto &w : m.weights)
    count += w.second.numel();
  m.summary = llvm::formatv("opset {0}, {1} nodes, {2} parameters in {3} tensors{4}{5}", opset,
                            g.node_size(), count, m.weights.size(),
                            dims.empty() ? "" : ", dims ", dims)
                  .str();
  return m;
}

} // namespace

llvm::Expected<ImportedModel> importOnnxBytes(MLIRContext &ctx, llvm::StringRef bytes,
                                              const std::string &name,
                                              const OnnxImportOptions &options) {
  onnx::ModelProto model;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), int(bytes.size())))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": not a valid ONNX model (the protobuf does not "
                                          "parse; is the file truncated or not ONNX?)");
  Importer importer(ctx, name, options);
  return importer.run(model);
}

llvm::Expected<ImportedModel> importOnnxFile(MLIRContext &ctx, const std::string &path,
                                             const OnnxImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + buffer.getError().message());
  return importOnnxBytes(ctx, (*buffer)->getBuffer(), path, options);
}

} // namespace mlc
