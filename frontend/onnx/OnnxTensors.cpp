//===- OnnxTensors.cpp - the ONNX importer's constants and tensors --------===//
//
// What the importer knows of values: shape arithmetic and broadcasting, the
// protobuf's tensors decoded (raw, typed and external data) into host
// constants, the graph's initializers declared as parameters or constants,
// constants materialized as mlc ops, and the checks on a node's operands
// that the operator handlers use (OnnxNode.h). The driver that walks the
// graph is OnnxImporter.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxNode.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;

namespace mlc {
namespace onnximport {

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

/// Index into `in` (broadcast to `out`) of the element at flat index `k` of
/// `out`.
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

std::optional<Kind> kindOfOnnx(int t) {
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

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

namespace {

int64_t elementBytes(int type) {
  switch (type) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
    return 2;
  default:
    return 1;
  }
}

float halfToFloat(uint16_t h, bool bfloat) {
  uint32_t bits;
  if (bfloat) {
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
  return v;
}

/// Little-endian element bytes (raw_data) into `c`, already sized.
void decodeRaw(const char *p, int type, Const &c) {
  const int64_t n = c.numel(), elemBytes = elementBytes(type);
  for (int64_t k = 0; k < n; ++k, p += elemBytes) {
    switch (type) {
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
      c.f[k] = halfToFloat(h, type == onnx::TensorProto::BFLOAT16);
    }
    }
  }
}

/// The typed fields (float_data, int64_data, ...) into `c`, already sized;
/// their counts were checked.
llvm::Error decodeTyped(const onnx::TensorProto &t, Const &c,
                        llvm::function_ref<llvm::Error(const llvm::Twine &)> error) {
  const int64_t n = c.numel();
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    for (int64_t k = 0; k < n; ++k)
      c.f[k] = t.float_data(k);
    return llvm::Error::success();
  case onnx::TensorProto::DOUBLE:
    for (int64_t k = 0; k < n; ++k)
      c.f[k] = t.double_data(k);
    return llvm::Error::success();
  case onnx::TensorProto::INT64:
    for (int64_t k = 0; k < n; ++k)
      c.i[k] = t.int64_data(k);
    return llvm::Error::success();
  default: // int32_data holds int32, int16, int8, uint8, bool and float16 bits
    if (c.kind == Kind::Float)
      return error(": half-precision values must be stored as raw data");
    for (int64_t k = 0; k < n; ++k)
      c.set(k, double(t.int32_data(k)));
    return llvm::Error::success();
  }
}

} // namespace

llvm::Expected<llvm::StringRef> Importer::externalData(const onnx::TensorProto &t,
                                                       const std::string &what, int64_t need) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    int64_t *field = kv.key() == "offset" ? &offset : kv.key() == "length" ? &length : nullptr;
    if (kv.key() == "location")
      location = kv.value();
    else if (field && (llvm::StringRef(kv.value()).getAsInteger(10, *field) || *field < 0))
      return error(what + ": external data " + kv.key() + " '" + kv.value() +
                   "' is not a byte count");
  }
  if (modelDir.empty())
    return error(what + " keeps its data in an external file, which needs the model's "
                        "directory (import the model from its file)");
  // The data lies beside the model: a relative path that stays inside its directory.
  llvm::StringRef loc(location);
  if (loc.empty() || loc.starts_with("/") || loc.starts_with("\\") || loc == ".." ||
      loc.starts_with("../") || loc.contains("/../") || loc.ends_with("/.."))
    return error(what + ": external data location '" + location +
                 "' must be a file name relative to the model's directory");
  std::string path = modelDir + "/" + location;
  auto &buffer = externalFiles[path];
  if (!buffer) {
    auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
    if (!file)
      return error(what + ": cannot read its external data " + path + ": " +
                   file.getError().message());
    buffer = std::move(*file);
  }
  int64_t size = int64_t(buffer->getBufferSize());
  if (length < 0)
    length = std::max<int64_t>(0, size - offset);
  if (offset > size || length > size - offset)
    return error(what + llvm::formatv(": external data {0} at offset {1}, length {2} lies "
                                      "past the file's end ({3} bytes)",
                                      path, offset, length, size)
                            .str());
  if (length != need)
    return error(what + llvm::formatv(": external data {0} holds {1} bytes at offset {2}; its "
                                      "shape needs {3}",
                                      path, length, offset, need)
                            .str());
  return buffer->getBuffer().substr(offset, length);
}

llvm::Expected<Const> Importer::tensorFromProto(const onnx::TensorProto &t,
                                                const std::string &what) {
  auto kind = kindOfOnnx(t.data_type());
  if (!kind)
    return error(what + " has data type " + std::to_string(t.data_type()) +
                 ", which mlc does not import (float, double, integer and bool "
                 "tensors)");
  Const c;
  c.kind = *kind;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t(1) << 40) || (d > 0 && product(c.shape) > (int64_t(1) << 40) / d))
      return error(what + " has an invalid or oversized shape");
    c.shape.push_back(d);
  }
  const int64_t n = c.numel();
  const int64_t elemBytes = elementBytes(t.data_type());
  llvm::StringRef raw = t.raw_data();
  bool hasRaw = t.has_raw_data();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto bytes = externalData(t, what, n * elemBytes);
    if (!bytes)
      return bytes.takeError();
    raw = *bytes;
    hasRaw = true;
  }
  // The data must be there before anything is allocated for it.
  int64_t stored = hasRaw                                       ? int64_t(raw.size()) / elemBytes
                   : t.data_type() == onnx::TensorProto::FLOAT  ? t.float_data_size()
                   : t.data_type() == onnx::TensorProto::DOUBLE ? t.double_data_size()
                   : t.data_type() == onnx::TensorProto::INT64  ? t.int64_data_size()
                                                                : t.int32_data_size();
  if (hasRaw && int64_t(raw.size()) != n * elemBytes)
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
  if (hasRaw) {
    decodeRaw(raw.data(), t.data_type(), c);
    return c;
  }
  if (auto err = decodeTyped(t, c, [&](const llvm::Twine &m) { return error(what + m); }))
    return std::move(err);
  return c;
}

rt::HostTensor Importer::weightTensor(const Const &c) const {
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

Value Importer::reshape(Value x, const Shape &shape) {
  auto t = cast<RankedTensorType>(x.getType());
  if (Shape(t.getShape().begin(), t.getShape().end()) == shape)
    return x;
  return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, t.getElementType()), x);
}

Value Importer::scalar(double v) {
  Const c;
  c.kind = Kind::Float;
  c.f = {v};
  return materialize(c);
}

const onnx::AttributeProto *Importer::attr(const onnx::NodeProto &n, const char *name,
                                           onnx::AttributeProto::AttributeType type) const {
  for (const auto &a : n.attribute()) {
    if (a.name() != name)
      continue;
    if (a.type() == type)
      return &a;
    if (attrMismatch.empty())
      attrMismatch = "attribute '" + std::string(name) + "' has type " +
                     onnx::AttributeProto::AttributeType_Name(a.type()) + "; " + n.op_type() +
                     " expects " + onnx::AttributeProto::AttributeType_Name(type);
    return nullptr;
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Node: what handlers use
//===----------------------------------------------------------------------===//

llvm::Error Node::need(size_t count) const {
  if (in.size() < count ||
      std::any_of(in.begin(), in.begin() + count, [](const Entry *e) { return !e; }))
    return error("needs " + std::to_string(count) + " inputs");
  return llvm::Error::success();
}

bool Node::allConst() const {
  return std::all_of(in.begin(), in.end(), [](const Entry *e) { return !e || e->constant; });
}

Shape Node::shape(size_t k) const {
  if (in[k]->constant)
    return in[k]->constant->shape;
  auto t = cast<RankedTensorType>(in[k]->value.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

Kind Node::kind(size_t k) const {
  if (in[k]->constant)
    return in[k]->constant->kind;
  Type el = cast<RankedTensorType>(in[k]->value.getType()).getElementType();
  if (isa<FloatType>(el))
    return Kind::Float;
  return el.isInteger(1) ? Kind::Bool : Kind::Int;
}

llvm::Error Node::floatOperands(size_t count) const {
  for (size_t k = 0; k < count; ++k)
    if (kind(k) != Kind::Float)
      return error("input #" + std::to_string(k) +
                   " must be floating point here (integer arithmetic is only "
                   "supported on values the importer can evaluate)");
  return llvm::Error::success();
}

llvm::Expected<Shape> Node::broadcast(size_t count) const {
  std::optional<Shape> s = shape(0);
  for (size_t k = 1; k < count && s; ++k)
    s = broadcastShapes(*s, shape(k));
  if (!s)
    return error("inputs of shapes " + shapeText(shape(0)) + " and " + shapeText(shape(1)) +
                 " do not broadcast");
  return *s;
}

llvm::Error Node::checkFoldSize(const Shape &s) const {
  for (int64_t d : s)
    if (d < 0)
      return error("computes the negative dim in " + shapeText(s));
  if (product(s) > im.options.foldLimit)
    return error("would hold " + std::to_string(product(s)) + " elements");
  return llvm::Error::success();
}

std::optional<Shape> Node::intsAttr(const char *name) const {
  const auto *a = attr(name, onnx::AttributeProto::INTS);
  if (!a)
    return std::nullopt;
  return Shape(a->ints().begin(), a->ints().end());
}

llvm::Expected<std::optional<Shape>> Node::intsInputOrAttr(size_t k, const char *name) const {
  if (has(k)) {
    if (!in[k]->constant)
      return error("input #" + std::to_string(k) + " (" + name +
                   ") must be a constant the importer can evaluate");
    const Const &x = *in[k]->constant;
    if (x.kind == Kind::Float)
      return error(std::string(name) + " must be integers");
    return std::optional<Shape>(x.i);
  }
  return intsAttr(name);
}

llvm::Expected<int64_t> Node::axis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= rank)
    return error(llvm::formatv("axis {0} is out of range for rank {1}", axis, rank).str());
  return axis < 0 ? axis + rank : axis;
}

llvm::Error Importer::declareInitializers(const onnx::GraphProto &g,
                                          const ExportSignature &signature) {
  // A float initializer of rank >= 1 is a parameter, unless torch.export's
  // graph signature calls it a buffer (inv_freq of rotary embeddings):
  // buffers are constants, folded into what reads them and never trained.
  std::set<std::string> buffers;
  for (const SignatureInput &in : signature)
    if (in.kind == "BUFFER")
      buffers.insert(in.target);
  for (const auto &t : g.initializer()) {
    if (t.name().empty())
      return error("an initializer has no name");
    auto c = tensorFromProto(t, "initializer '" + t.name() + "'");
    if (!c)
      return c.takeError();
    if (values.count(t.name()) || paramInits.count(t.name()))
      return error("initializer '" + t.name() + "' is defined twice");
    bool buffer = buffers.count(t.name());
    if (c->kind == Kind::Float && !c->shape.empty() && c->numel() > 0 && !buffer) {
      parameterCount += c->numel();
      paramNames.insert(t.name());
      weights.push_back({t.name(), weightTensor(*c)});
      paramInits.emplace(t.name(), std::move(*c));
    } else {
      values[t.name()] = {Value(), std::make_shared<const Const>(std::move(*c))};
    }
  }
  return llvm::Error::success();
}

} // namespace onnximport
} // namespace mlc
