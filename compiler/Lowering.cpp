//===- Lowering.cpp - graph to plan and kernels ----------------------------===//
//
// Every graph op becomes one plan step: a GEMM call (matmul) or the launch of
// a generated C++ kernel. Kernels have their shapes baked in as constants, so
// the host compiler unrolls and vectorizes index arithmetic; identical
// kernels (the same op and shape in every layer) are emitted once.
//
// Buffers: parameters and gradients are slices of flat buffers named by
// parameter; gradients that an op produces directly are written in place
// (no copy); reshapes are views; every other value lives in an arena whose
// offsets come from first-fit planning over the values' live ranges.
//
//===----------------------------------------------------------------------===//

#include "compiler/Lowering.h"
#include "compiler/KernelPrelude.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <climits>
#include <set>
#include <sstream>

using namespace mlir;

namespace mlc {
namespace {

using Shape = std::vector<int64_t>;

llvm::Error failure(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
Shape shapeOf(Value v) {
  auto s = typeOf(v).getShape();
  return Shape(s.begin(), s.end());
}
int64_t product(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}
Shape rowMajorStrides(const Shape &s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string dtypeName(Type el) {
  if (el.isF32())
    return "f32";
  if (el.isF64())
    return "f64";
  if (el.isInteger(64))
    return "i64";
  if (el.isInteger(32))
    return "i32";
  if (el.isInteger(1))
    return "i1";
  return "";
}
int64_t dtypeBytes(Type el) {
  if (el.isF64() || el.isInteger(64))
    return 8;
  if (el.isF32() || el.isInteger(32))
    return 4;
  return 1;
}
std::string cType(Type el) {
  if (el.isF32())
    return "float";
  if (el.isF64())
    return "double";
  if (el.isInteger(64))
    return "int64_t";
  if (el.isInteger(32))
    return "int32_t";
  return "uint8_t";
}
std::string literal(double v, Type el) {
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + cType(el) +
           ">::infinity()";
  std::string s = llvm::formatv("{0:e16}", v).str();
  if (el.isF32())
    return "(float)" + s;
  if (el.isF64())
    return s;
  return "(" + cType(el) + ")" + std::to_string(int64_t(v));
}
/// exp and tanh for kernels of element type `el`: the vectorizable prelude
/// versions for f32, libm for f64 (whose results the gradient checks compare).
std::string expFn(Type el) { return el.isF32() ? "mlc_expf" : "std::exp"; }
std::string tanhFn(Type el) { return el.isF32() ? "mlc_tanhf" : "std::tanh"; }

std::string shapeText(const Shape &s) {
  if (s.empty())
    return "scalar";
  std::string t;
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

/// A strided view of one kernel argument inside a loop nest.
struct Access {
  int slot;
  int64_t base;
  Shape strides;
};

/// Emits a loop nest over `shape`; in the body, `o<k>` is the element offset
/// of access k. Unit dimensions are dropped and dimensions that are
/// contiguous for every access merge, so most nests are one or two loops.
std::string loopNest(Shape shape, std::vector<Access> accs, const std::string &body,
                     bool parallel) {
  Shape dims;
  std::vector<Shape> strides(accs.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < accs.size() && merge; ++k)
      merge = strides[k].back() == accs[k].strides[d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < accs.size(); ++k)
        strides[k].back() = accs[k].strides[d];
    } else {
      dims.push_back(shape[d]);
      for (size_t k = 0; k < accs.size(); ++k)
        strides[k].push_back(accs[k].strides[d]);
    }
  }
  std::ostringstream os;
  int64_t total = product(dims);
  if (parallel && !dims.empty() && total >= 8192)
    os << "#pragma omp parallel for"
       << (dims.size() > 1 ? " collapse(" + std::to_string(dims.size() - 1) + ")"
                           : std::string())
       << "\n";
  for (size_t d = 0; d < dims.size(); ++d)
    os << "for (int64_t i" << d << " = 0; i" << d << " < " << dims[d] << "; ++i" << d
       << ")\n";
  os << "{\n";
  for (size_t k = 0; k < accs.size(); ++k) {
    os << "  const int64_t o" << k << " = " << accs[k].base;
    for (size_t d = 0; d < dims.size(); ++d)
      if (strides[k][d])
        os << " + i" << d << " * " << strides[k][d];
    os << ";\n";
  }
  os << body << "}\n";
  return os.str();
}

/// Strides that read a tensor of `in` shape broadcast to `out` shape
/// (numpy alignment on the right; 0 where broadcast).
Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape st(out.size(), 0), own = rowMajorStrides(in);
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    st[i + offset] = in[i] == 1 ? 0 : own[i];
  return st;
}

struct Buffer {
  enum Kind { Param, Grad, Input, Arena, Alias } kind;
  Type element;
  int64_t numel = 0;
  std::string name; // parameter or input name
  int alias = -1;
  int64_t offset = 0; // arena: bytes
  int first = INT_MAX, last = -1;
};

struct Step {
  std::string text; // the plan line, with "%<id>" for buffer ids
  std::vector<int> buffers;
};

/// Kernels of the whole package, deduplicated by body.
class KernelSet {
public:
  std::string add(const std::string &body) {
    auto it = names.find(body);
    if (it != names.end())
      return it->second;
    std::string name = "k" + std::to_string(names.size());
    names.emplace(body, name);
    source << "\nextern \"C\" void " << name
           << "(char **b, MlcKernelCtx *ctx) {\n  (void)ctx;\n"
           << body << "}\n";
    return name;
  }
  std::string text() const { return kernelPrelude() + source.str(); }

private:
  std::map<std::string, std::string> names;
  std::ostringstream source;
};

class FunctionLowering {
public:
  FunctionLowering(func::FuncOp fn, KernelSet &kernels) : fn(fn), kernels(kernels) {}

  llvm::Error run();
  std::string planText() const;
  LoweredPackage::Counts counts;
  /// Parameter name -> step at which its gradient is complete (train step).
  std::map<std::string, int> gradReadyStep;

private:
  llvm::Error lowerOp(Operation *op);
  int newBuffer(Buffer b) {
    buffers.push_back(std::move(b));
    return buffers.size() - 1;
  }
  int root(int id) const {
    while (buffers[id].kind == Buffer::Alias)
      id = buffers[id].alias;
    return id;
  }
  int arenaFor(Value v) {
    auto it = gradTargets.find(v);
    if (it != gradTargets.end())
      return newBuffer({Buffer::Grad, typeOf(v).getElementType(), typeOf(v).getNumElements(),
                        it->second});
    return newBuffer(
        {Buffer::Arena, typeOf(v).getElementType(), typeOf(v).getNumElements()});
  }
  /// The buffer of an operand, materialized if needed: splat constants are
  /// filled on first use, and a view that is not contiguous is copied once.
  int bufferOf(Value v) {
    auto it = valueBuffers.find(v);
    if (it != valueBuffers.end())
      return it->second;
    if (auto c = v.getDefiningOp<ConstantOp>()) {
      int id = arenaFor(v);
      valueBuffers[v] = id;
      emitConstant(c, id);
      return id;
    }
    View view = viewOf(v);
    int id;
    if (view.contiguous()) {
      id = newBuffer({Buffer::Alias, typeOf(v).getElementType(), typeOf(v).getNumElements()});
      buffers[id].alias = view.buffer;
      buffers[id].offset = view.offset * dtypeBytes(typeOf(v).getElementType());
    } else {
      id = arenaFor(v);
      Type el = typeOf(v).getElementType();
      addStep(args({{el, true}, {el, false}}) +
                  loopNest(view.shape, {{0, 0, rowMajorStrides(view.shape)},
                                        {1, view.offset, view.strides}},
                           "    p0[o0] = p1[o1];\n", true),
              {id, view.buffer});
    }
    valueBuffers[v] = id;
    return id;
  }

  /// A strided view of a materialized buffer (element offsets and strides).
  struct View {
    int buffer = -1;
    int64_t offset = 0;
    Shape shape, strides;
    bool contiguous() const { return strides == rowMajorStrides(shape); }
  };

  /// Views look through transposes, reshapes, splits and slices, so that a
  /// consumer that reads strided data (pointwise kernels, fusions, attention)
  /// needs no copy. Other values are their own buffers.
  View viewOf(Value v) {
    auto known = views.find(v);
    if (known != views.end())
      return known->second;
    View view;
    Operation *def = v.getDefiningOp();
    if (auto t = dyn_cast_or_null<TransposeOp>(def)) {
      View in = viewOf(t.getInput());
      view = in;
      for (size_t i = 0; i < in.shape.size(); ++i) {
        view.shape[i] = in.shape[t.getPermutation()[i]];
        view.strides[i] = in.strides[t.getPermutation()[i]];
      }
    } else if (auto r = dyn_cast_or_null<ReshapeOp>(def)) {
      View in = viewOf(r.getInput());
      std::optional<Shape> strides = reshapeStrides(in.shape, in.strides, shapeOf(v));
      if (!strides) { // copy the input into a contiguous buffer, then reinterpret it
        in = own(r.getInput());
        strides = rowMajorStrides(shapeOf(v));
      }
      view = {in.buffer, in.offset, shapeOf(v), *strides};
    } else if (auto sp = dyn_cast_or_null<SplitOp>(def)) {
      View in = viewOf(sp.getInput());
      int64_t axis = *normalizeAxis(sp.getAxis(), in.shape.size());
      unsigned index = cast<OpResult>(v).getResultNumber();
      int64_t start = 0;
      for (unsigned i = 0; i < index; ++i)
        start += sp.getSizes()[i];
      view = in;
      view.offset += start * in.strides[axis];
      view.shape[axis] = sp.getSizes()[index];
    } else if (auto sl = dyn_cast_or_null<SliceOp>(def)) {
      View in = viewOf(sl.getInput());
      view = in;
      view.shape = shapeOf(v);
      for (size_t d = 0; d < in.shape.size(); ++d) {
        view.offset += sliceStart(in.shape[d], sl.getStarts()[d]) * in.strides[d];
        view.strides[d] = in.strides[d] * sl.getSteps()[d];
      }
    } else {
      assert((valueBuffers.count(v) || isa_and_nonnull<ConstantOp>(def)) &&
             "a value read before its producer was lowered");
      return own(v);
    }
    views[v] = view;
    return view;
  }
  /// Reads `v` (through its view) broadcast to `out`; appends its buffer.
  Access readAccess(int slot, Value v, const Shape &out, std::vector<int> &bufs) {
    View view = viewOf(v);
    Shape st(out.size(), 0);
    size_t offset = out.size() - view.shape.size();
    for (size_t i = 0; i < view.shape.size(); ++i)
      st[i + offset] = view.shape[i] == 1 ? 0 : view.strides[i];
    bufs.push_back(view.buffer);
    return {slot, view.offset, st};
  }
  View own(Value v) {
    return {bufferOf(v), 0, shapeOf(v), rowMajorStrides(shapeOf(v))};
  }

  /// Where a producer can write `r` in place: when r's only use is a
  /// transpose, a reshape or a concatenation, the producer writes straight
  /// into their result (strided) and they cost nothing.
  std::optional<View> outputView(Value r) {
    if (!r.hasOneUse())
      return std::nullopt;
    Operation *user = *r.getUsers().begin();
    auto destination = [&](Value x) {
      if (auto v = outputView(x))
        return *v;
      if (!valueBuffers.count(x))
        valueBuffers[x] = arenaFor(x);
      return own(x);
    };
    if (auto t = dyn_cast<TransposeOp>(user)) {
      ArrayRef<int64_t> perm = t.getPermutation();
      if (perm.empty() || perm.back() != int64_t(perm.size()) - 1)
        return std::nullopt; // writers need the innermost dimension contiguous
      View dst = destination(t.getResult());
      views[t.getResult()] = dst;
      View v = dst;
      v.shape = shapeOf(r);
      for (size_t i = 0; i < dst.shape.size(); ++i)
        v.strides[t.getPermutation()[i]] = dst.strides[i];
      return v;
    }
    if (auto rs = dyn_cast<ReshapeOp>(user)) {
      View dst = destination(rs.getResult());
      auto strides = reshapeStrides(dst.shape, dst.strides, shapeOf(r));
      if (!strides)
        return std::nullopt;
      views[rs.getResult()] = dst;
      return View{dst.buffer, dst.offset, shapeOf(r), *strides};
    }
    if (auto c = dyn_cast<ConcatOp>(user)) {
      if (!valueBuffers.count(c.getResult()))
        valueBuffers[c.getResult()] = arenaFor(c.getResult());
      View dst = own(c.getResult());
      int64_t axis = *normalizeAxis(c.getAxis(), dst.shape.size());
      View v = dst;
      v.shape = shapeOf(r);
      for (Value in : c.getInputs()) {
        if (in == r)
          break;
        v.offset += shapeOf(in)[axis] * dst.strides[axis];
      }
      writtenInPlace.insert(r);
      return v;
    }
    return std::nullopt;
  }

  /// Strides of `to` reading the same elements as the view (shape, strides),
  /// if a reshape needs no copy (numpy's rule: each group of dimensions whose
  /// sizes multiply to the same number must be contiguous among itself).
  static std::optional<Shape> reshapeStrides(const Shape &shape, const Shape &strides,
                                             const Shape &to) {
    Shape out(to.size(), 0);
    size_t i = 0, j = 0;
    while (i < shape.size() || j < to.size()) {
      size_t i1 = i, j1 = j;
      int64_t a = i < shape.size() ? shape[i] : 1, b = j < to.size() ? to[j] : 1;
      while (a != b) {
        if (a < b)
          a *= shape[++i1];
        else
          b *= to[++j1];
      }
      for (size_t k = i; k < i1; ++k)
        if (shape[k] != 1 && strides[k] != strides[k + 1] * shape[k + 1])
          return std::nullopt;
      int64_t stride = i1 < shape.size() ? strides[i1] : 1;
      for (size_t k = j1 + 1; k-- > j;) {
        if (k >= to.size())
          continue;
        out[k] = stride;
        stride *= to[k];
      }
      i = i1 + 1;
      j = j1 + 1;
    }
    return out;
  }

  /// A splat constant operand's C literal, or "" if the operand is a buffer.
  std::string splatLiteral(Value v) {
    auto c = v.getDefiningOp<ConstantOp>();
    if (!c)
      return "";
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense || !dense.isSplat())
      return "";
    Type el = dense.getElementType();
    if (isa<FloatType>(el))
      return literal(dense.getSplatValue<APFloat>().convertToDouble(), el);
    return "(" + cType(el) + ")" +
           std::to_string(dense.getSplatValue<APInt>().getSExtValue());
  }
  void countBytes(const std::vector<int> &bufs) {
    std::set<int> seen(bufs.begin(), bufs.end());
    for (int b : seen)
      counts.bytes += buffers[b].numel * dtypeBytes(buffers[b].element);
  }
  void addStep(const std::string &kernelBody, std::vector<int> bufs) {
    countBytes(bufs);
    std::string name = kernels.add(kernelBody);
    std::string text = "kernel " + name;
    for (int b : bufs)
      text += " %" + std::to_string(b);
    steps.push_back({text, bufs});
    ++counts.kernels;
  }
  /// Typed pointer declarations for the kernel arguments.
  static std::string args(const std::vector<std::pair<Type, bool>> &slots) {
    std::string s;
    for (size_t i = 0; i < slots.size(); ++i)
      s += "  " + std::string(slots[i].second ? "" : "const ") + cType(slots[i].first) +
           " *p" + std::to_string(i) + " = (" + (slots[i].second ? "" : "const ") +
           cType(slots[i].first) + " *)b[" + std::to_string(i) + "];\n";
    return s;
  }

  void emitConstant(ConstantOp c, int id);
  llvm::Error emitPointwise(Operation *op);
  llvm::Error emitFusion(FusionOp fusion);
  llvm::Error emitRowFusion(FusionOp fusion);
  void emitCopies(int dstId, Type el, int64_t dstNumel, bool zeroFirst,
                  const std::vector<Value> &sources, const std::vector<int64_t> &dstBases,
                  const Shape &dstStrides);
  llvm::Error emitReduce(Operation *op, Value input, ArrayRef<int64_t> axes,
                         const std::string &kind);
  llvm::Error emitGemm(MatmulOp op);
  llvm::Error emitRows(Operation *op);
  llvm::Error emitAttention(Operation *op, bool backward);

  func::FuncOp fn;
  KernelSet &kernels;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  llvm::DenseMap<Value, int> valueBuffers;
  llvm::DenseMap<Value, View> views;
  llvm::DenseSet<Value> writtenInPlace;
  llvm::DenseMap<Value, std::string> gradTargets;
  struct Output {
    std::string name;
    int buffer;
    std::string shape;
  };
  std::vector<Output> outputs;
  int64_t arenaBytes = 0;
};

void FunctionLowering::emitConstant(ConstantOp c, int id) {
  auto dense = cast<DenseElementsAttr>(c.getValue());
  Type el = dense.getElementType();
  int64_t n = typeOf(c.getResult()).getNumElements();
  std::ostringstream body;
  body << args({{el, true}});
  if (dense.isSplat()) {
    body << "  for (int64_t i = 0; i < " << n << "; ++i) p0[i] = " << splatLiteral(c)
         << ";\n";
  } else {
    body << "  static const " << cType(el) << " data[" << n << "] = {";
    int64_t i = 0;
    if (isa<FloatType>(el))
      for (APFloat v : dense.getValues<APFloat>())
        body << (i++ ? ", " : "") << literal(v.convertToDouble(), el);
    else
      for (APInt v : dense.getValues<APInt>())
        body << (i++ ? ", " : "") << v.getSExtValue();
    body << "};\n  std::memcpy(p0, data, sizeof(data));\n";
  }
  addStep(body.str(), {id});
}

/// The C expression of a pointwise op over scalar operand expressions `a`;
/// `index` is the flat element index (dropout's counter). Declarations the
/// expression needs once per kernel (dropout keys) go to `prologue`.
std::string pointwiseExpr(Operation *op, const std::vector<std::string> &a,
                          const std::string &index, std::string &prologue) {
  Type el = typeOf(op->getResult(0)).getElementType();
  std::string T = cType(el);
  auto lit = [&](double v) { return literal(v, el); };
  auto bin = [&](const char *o) { return "(" + a[0] + " " + o + " " + a[1] + ")"; };
  auto call = [&](const std::string &f) { return f + "(" + a[0] + ")"; };
  const std::string c0 = lit(0.7978845608028654), k = lit(0.044715), one = lit(1.0),
                    half = lit(0.5);
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case<AddOp>([&](auto) { return bin("+"); })
      .Case<SubOp>([&](auto) { return bin("-"); })
      .Case<MulOp>([&](auto) { return bin("*"); })
      .Case<DivOp>([&](auto) { return bin("/"); })
      .Case<PowOp>([&](auto) { return "std::pow(" + a[0] + ", " + a[1] + ")"; })
      .Case<NegOp>([&](auto) { return "(-" + a[0] + ")"; })
      .Case<ExpOp>([&](auto) { return call(expFn(el)); })
      .Case<LogOp>([&](auto) { return call("std::log"); })
      .Case<TanhOp>([&](auto) { return call(tanhFn(el)); })
      .Case<ErfOp>([&](auto) { return call("std::erf"); })
      .Case<SqrtOp>([&](auto) { return call("std::sqrt"); })
      .Case<RsqrtOp>([&](auto) { return "(" + one + " / std::sqrt(" + a[0] + "))"; })
      .Case<GeluOp>([&](GeluOp g) {
        const std::string &x = a[0];
        if (g.getApproximate() == GeluApproximation::tanh)
          return "(" + half + " * " + x + " * (" + one + " + " + tanhFn(el) + "(" + c0 +
                 " * (" + x + " + " + k + " * " + x + " * " + x + " * " + x + "))))";
        return "(" + half + " * " + x + " * (" + one + " + std::erf(" + x + " * " +
               lit(M_SQRT1_2) + ")))";
      })
      .Case<GeluGradOp>([&](GeluGradOp g) {
        const std::string &gr = a[0], &x = a[1];
        if (g.getApproximate() == GeluApproximation::tanh) {
          // u = c (x + k x^3), t = tanh u:  0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2)
          std::string t = tanhFn(el) + "(" + c0 + " * (" + x + " + " + k + " * " + x + " * " +
                          x + " * " + x + "))";
          return "(" + gr + " * [&] { const " + T + " t = " + t + "; return " + half + " * (" +
                 one + " + t) + " + half + " * " + x + " * (" + one + " - t * t) * " + c0 +
                 " * (" + one + " + " + lit(3 * 0.044715) + " * " + x + " * " + x + "); }())";
        }
        // Phi(x) + x phi(x)
        return "(" + gr + " * (" + half + " * (" + one + " + std::erf(" + x + " * " +
               lit(M_SQRT1_2) + ")) + " + x + " * " + expFn(el) + "(" + lit(-0.5) + " * " + x +
               " * " + x + ") * " + lit(0.3989422804014327) + "))";
      })
      .Case<CompareOp>([&](CompareOp c) {
        static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
        return "(uint8_t)" + bin(ops[int(c.getPredicate())]);
      })
      .Case<SelectOp>([&](auto) { return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")"; })
      .Case<CastOp>([&](auto) { return "(" + T + ")" + a[0]; })
      .Case<BroadcastOp>([&](auto) { return a[0]; })
      .Case<DropoutOp>([&](DropoutOp d) {
        std::string key = "key" + std::to_string(int64_t(d.getSeed()));
        std::string decl = "  const uint64_t " + key + " = mlc_key(" +
                           std::to_string(int64_t(d.getSeed())) + "ull, (uint64_t)ctx->step);\n";
        if (prologue.find(decl) == std::string::npos)
          prologue += decl;
        double ratio = d.getRatio().convertToDouble();
        return "(mlc_uniform(" + key + ", " + index + ") >= " + std::to_string(ratio) + " ? " +
               a[0] + " * " + lit(1.0 / (1.0 - ratio)) + " : " + lit(0.0) + ")";
      })
      .Default([](Operation *) -> std::string {
        llvm_unreachable("not a pointwise op");
      });
}

llvm::Error FunctionLowering::emitPointwise(Operation *op) {
  Value result = op->getResult(0);
  Shape out = shapeOf(result);
  std::vector<std::pair<Type, bool>> slots{{typeOf(result).getElementType(), true}};
  std::vector<int> bufs{-1};
  std::vector<Access> accs{{0, 0, rowMajorStrides(out)}};
  std::vector<std::string> operands;
  for (Value v : op->getOperands()) {
    std::string lit = splatLiteral(v);
    if (!lit.empty()) {
      operands.push_back(lit);
      continue;
    }
    int slot = slots.size();
    slots.push_back({typeOf(v).getElementType(), false});
    accs.push_back(readAccess(slot, v, out, bufs));
    operands.push_back("p" + std::to_string(slot) + "[o" + std::to_string(accs.size() - 1) +
                       "]");
  }
  int outId = arenaFor(result);
  valueBuffers[result] = outId;
  bufs[0] = outId;
  std::string prologue;
  std::string body = "    p0[o0] = " + pointwiseExpr(op, operands, "o0", prologue) + ";\n";
  addStep(args(slots) + prologue + loopNest(out, accs, body, true), bufs);
  return llvm::Error::success();
}

/// A pointwise fusion: one loop nest over the iteration shape; each input is
/// loaded once per element (broadcast by strides), every op becomes a scalar
/// temporary, and only the yielded values are stored.
llvm::Error FunctionLowering::emitFusion(FusionOp fusion) {
  if (fusion.getKind() == "rows")
    return emitRowFusion(fusion);
  if (fusion.getKind() != "pointwise")
    return failure("fusion kind '" + fusion.getKind() + "' has no CPU lowering");
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  // A column reduction closing the region iterates over its input's shape.
  ReduceSumOp columns;
  for (Operation &op : block.without_terminator())
    if (auto r = dyn_cast<ReduceSumOp>(op))
      columns = r;
  Shape iter = columns ? shapeOf(columns.getInput()) : shapeOf(fusion.getResult(0));
  std::vector<std::pair<Type, bool>> slots;
  std::vector<int> bufs;
  std::vector<Access> accs;
  int reduceSlot = -1;
  for (auto [i, r] : llvm::enumerate(fusion.getResults())) {
    int id = arenaFor(r);
    valueBuffers[r] = id;
    slots.push_back({typeOf(r).getElementType(), true});
    bufs.push_back(id);
    if (columns && yield.getValues()[i] == columns.getResult()) {
      reduceSlot = i;
      accs.push_back({int(i), 0, Shape(iter.size(), 0)}); // not indexed per element
    } else {
      accs.push_back({int(i), 0, rowMajorStrides(iter)});
    }
  }
  llvm::DenseMap<Value, std::string> scalar;
  std::string body;
  for (auto [arg, in] : llvm::zip(block.getArguments(), fusion.getInputs())) {
    int slot = slots.size();
    slots.push_back({typeOf(in).getElementType(), false});
    accs.push_back(readAccess(slot, in, iter, bufs));
    std::string name = "x" + std::to_string(slot);
    body += "    const " + cType(typeOf(in).getElementType()) + " " + name + " = p" +
            std::to_string(slot) + "[o" + std::to_string(accs.size() - 1) + "];\n";
    scalar[arg] = name;
  }
  std::string prologue;
  int tmp = 0;
  for (Operation &op : block.without_terminator()) {
    if (auto c = dyn_cast<ConstantOp>(op)) {
      std::string lit = splatLiteral(c.getResult());
      if (lit.empty())
        return failure("a fusion region holds a non-splat constant");
      scalar[c.getResult()] = lit;
      continue;
    }
    if (&op == columns.getOperation()) {
      body += "    acc[c] += " + scalar.lookup(columns.getInput()) + ";\n";
      continue;
    }
    std::vector<std::string> operands;
    for (Value v : op.getOperands())
      operands.push_back(scalar.lookup(v));
    std::string name = "t" + std::to_string(tmp++);
    body += "    const " + cType(typeOf(op.getResult(0)).getElementType()) + " " + name +
            " = " + pointwiseExpr(&op, operands, "flat", prologue) + ";\n";
    scalar[op.getResult(0)] = name;
  }
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (int(i) != reduceSlot)
      body += "    p" + std::to_string(i) + "[o" + std::to_string(i) + "] = " +
              scalar.lookup(v) + ";\n";
  if (!columns) {
    body = "    const int64_t flat = o0;\n" + body;
    addStep(args(slots) + prologue + loopNest(iter, accs, body, true), bufs);
    return llvm::Error::success();
  }

  // Rows (the reduced leading dimensions) are shared out among threads; each
  // thread sums its rows into its own partial, and the partials are added in
  // thread order, so results do not depend on timing.
  size_t lead = columns.getAxes().size();
  Shape rowDims(iter.begin(), iter.begin() + lead), colDims(iter.begin() + lead, iter.end());
  int64_t R = product(rowDims), C = product(colDims);
  auto decompose = [](const std::string &var, const Shape &dims, const Shape &strides) {
    std::string e = "0";
    std::string rem = var;
    for (size_t d = dims.size(); d-- > 0;) {
      std::string idx = d == 0 ? rem : "(" + rem + " % " + std::to_string(dims[d]) + ")";
      if (strides[d])
        e += " + " + idx + " * " + std::to_string(strides[d]);
      rem = "(" + rem + " / " + std::to_string(dims[d]) + ")";
    }
    return e;
  };
  std::string offsets;
  for (size_t k = 0; k < accs.size(); ++k) {
    if (int(k) == reduceSlot)
      continue;
    Shape rs(accs[k].strides.begin(), accs[k].strides.begin() + lead);
    Shape cs(accs[k].strides.begin() + lead, accs[k].strides.end());
    offsets += "      const int64_t o" + std::to_string(k) + " = " +
               std::to_string(accs[k].base) + " + " + decompose("r", rowDims, rs) + " + " +
               decompose("c", colDims, cs) + ";\n";
  }
  std::string T = cType(typeOf(columns.getResult()).getElementType());
  std::ostringstream k;
  k << args(slots) << prologue << "  const int nt = omp_get_max_threads();\n"
    << "  std::vector<double> part((size_t)nt * " << C << ", 0.0);\n"
    << "#pragma omp parallel\n  {\n"
    << "    double *acc = part.data() + (size_t)omp_get_thread_num() * " << C << ";\n"
    << "#pragma omp for schedule(static)\n"
    << "    for (int64_t r = 0; r < " << R << "; ++r)\n"
    << "    for (int64_t c = 0; c < " << C << "; ++c) {\n"
    << "      const int64_t flat = r * " << C << " + c;\n"
    << offsets << body << "    }\n  }\n"
    << "  for (int64_t c = 0; c < " << C << "; ++c) {\n"
    << "    double s = 0;\n"
    << "    for (int t = 0; t < nt; ++t) s += part[(size_t)t * " << C << " + c];\n"
    << "    p" << reduceSlot << "[c] = (" << T << ")s;\n  }\n";
  addStep(k.str(), bufs);
  return llvm::Error::success();
}

/// A "rows" fusion: a LayerNorm and the pointwise prologue of its input.
/// Each row's prologue is computed once into a row buffer (values needed
/// elsewhere are stored on the way), then normalized from that buffer.
llvm::Error FunctionLowering::emitRowFusion(FusionOp fusion) {
  Block &block = fusion.getBody().front();
  auto yield = cast<YieldOp>(block.getTerminator());
  LayerNormOp norm;
  for (Operation &op : block.without_terminator())
    if (auto n = dyn_cast<LayerNormOp>(op))
      norm = n;
  if (!norm)
    return failure("a \"rows\" fusion without a layer_norm");
  Shape iter = shapeOf(norm.getInput());
  Shape rowDims(iter.begin(), iter.end() - 1);
  const int64_t E = iter.back(), R = product(rowDims);
  std::vector<std::pair<Type, bool>> slots;
  std::vector<int> bufs;
  std::vector<Access> accs;
  int normSlot = -1;
  for (auto [i, r] : llvm::enumerate(fusion.getResults())) {
    int id = arenaFor(r);
    valueBuffers[r] = id;
    slots.push_back({typeOf(r).getElementType(), true});
    bufs.push_back(id);
    accs.push_back({int(i), 0, rowMajorStrides(iter)});
    if (yield.getValues()[i] == norm.getResult())
      normSlot = i;
  }
  llvm::DenseMap<Value, std::string> scalar;
  llvm::DenseMap<Value, int> accessOf; // block argument -> its access
  for (auto [arg, in] : llvm::zip(block.getArguments(), fusion.getInputs())) {
    int slot = slots.size();
    slots.push_back({typeOf(in).getElementType(), false});
    accs.push_back(readAccess(slot, in, iter, bufs));
    accessOf[arg] = accs.size() - 1;
  }
  auto load = [&](Value arg) {
    int k = accessOf.lookup(arg);
    return "p" + std::to_string(accs[k].slot) + "[o" + std::to_string(k) + "]";
  };
  // Row bases (decomposed once per row) and the stride along the row.
  auto decompose = [&](const Access &a) {
    std::string e = std::to_string(a.base);
    std::string rem = "r";
    for (size_t d = rowDims.size(); d-- > 0;) {
      std::string idx = d == 0 ? rem : "(" + rem + " % " + std::to_string(rowDims[d]) + ")";
      if (a.strides[d])
        e += " + " + idx + " * " + std::to_string(a.strides[d]);
      rem = "(" + rem + " / " + std::to_string(rowDims[d]) + ")";
    }
    return e;
  };
  auto offsets = [&](const std::string &indent) {
    std::string o;
    for (size_t k = 0; k < accs.size(); ++k)
      o += indent + "const int64_t o" + std::to_string(k) + " = b" + std::to_string(k) +
           " + c * " + std::to_string(accs[k].strides.back()) + ";\n";
    return o;
  };
  std::string prologue, body;
  int tmp = 0;
  for (auto [arg, in] : llvm::zip(block.getArguments(), fusion.getInputs()))
    scalar[arg] = load(arg);
  for (Operation &op : block.without_terminator()) {
    if (auto c = dyn_cast<ConstantOp>(op)) {
      std::string lit = splatLiteral(c.getResult());
      if (lit.empty())
        return failure("a fusion region holds a non-splat constant");
      scalar[c.getResult()] = lit;
      continue;
    }
    if (&op == norm.getOperation())
      continue;
    std::vector<std::string> operands;
    for (Value v : op.getOperands())
      operands.push_back(scalar.lookup(v));
    std::string name = "t" + std::to_string(tmp++);
    body += "      const " + cType(typeOf(op.getResult(0)).getElementType()) + " " + name +
            " = " + pointwiseExpr(&op, operands, "(r * " + std::to_string(E) + " + c)",
                                  prologue) +
            ";\n";
    scalar[op.getResult(0)] = name;
  }
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (int(i) != normSlot)
      body += "      p" + std::to_string(i) + "[o" + std::to_string(i) + "] = " +
              scalar.lookup(v) + ";\n";
  Type el = typeOf(norm.getResult()).getElementType();
  std::string T = cType(el);
  std::string eps = literal(norm.getEpsilon().convertToDouble(), Float64Type::get(fusion.getContext()));
  std::ostringstream k;
  k << args(slots) << prologue << "#pragma omp parallel for\n"
    << "  for (int64_t r = 0; r < " << R << "; ++r) {\n";
  for (size_t a = 0; a < accs.size(); ++a)
    k << "    const int64_t b" << a << " = " << decompose(accs[a]) << ";\n";
  k << "    " << T << " row[" << E << "];\n"
    << "    double mean = 0, var = 0;\n"
    << "    for (int64_t c = 0; c < " << E << "; ++c) {\n"
    << offsets("      ") << body << "      row[c] = " << scalar.lookup(norm.getInput())
    << ";\n      mean += row[c];\n    }\n"
    << "    mean /= " << E << ";\n"
    << "#pragma omp simd reduction(+ : var)\n"
    << "    for (int64_t c = 0; c < " << E << "; ++c) { double d = row[c] - mean; var += d * d; }\n"
    << "    const " << T << " rstd = (" << T << ")(1.0 / std::sqrt(var / " << E << " + " << eps
    << ")), mu = (" << T << ")mean;\n"
    << "    for (int64_t c = 0; c < " << E << "; ++c) {\n"
    << offsets("      ") << "      p" << normSlot << "[o" << normSlot << "] = (row[c] - mu) * rstd * "
    << scalar.lookup(norm.getWeight()) << " + " << scalar.lookup(norm.getBias()) << ";\n"
    << "    }\n  }\n";
  addStep(k.str(), bufs);
  return llvm::Error::success();
}

/// One kernel that copies each source (read through its view) into a region
/// of the destination buffer: element (i...) of source k lands at
/// dstBases[k] + sum i * dstStrides. Concatenation and padding.
void FunctionLowering::emitCopies(int dstId, Type el, int64_t dstNumel, bool zeroFirst,
                                  const std::vector<Value> &sources,
                                  const std::vector<int64_t> &dstBases,
                                  const Shape &dstStrides) {
  std::vector<std::pair<Type, bool>> slots{{el, true}};
  std::vector<int> bufs{dstId};
  std::string loops;
  for (size_t k = 0; k < sources.size(); ++k) {
    View view = viewOf(sources[k]);
    int slot = slots.size();
    slots.push_back({el, false});
    bufs.push_back(view.buffer);
    loops += loopNest(view.shape, {{0, dstBases[k], dstStrides}, {slot, view.offset, view.strides}},
                      "    p0[o0] = p" + std::to_string(slot) + "[o1];\n", true);
  }
  std::string body = args(slots);
  if (zeroFirst)
    body += "  std::memset(p0, 0, " + std::to_string(dstNumel * dtypeBytes(el)) + ");\n";
  addStep(body + loops, bufs);
}

llvm::Error FunctionLowering::emitReduce(Operation *op, Value input, ArrayRef<int64_t> axes,
                                         const std::string &kind) {
  Value result = op->getResult(0);
  Shape in = shapeOf(input);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes)
    reduced[*normalizeAxis(a, in.size())] = true;
  // Merge neighbouring dimensions of the same kind: [kept..., reduced...] is
  // a row reduction, [reduced..., kept...] a column reduction (bias grads).
  std::vector<std::pair<bool, int64_t>> groups;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1)
      continue;
    if (!groups.empty() && groups.back().first == reduced[d])
      groups.back().second *= in[d];
    else
      groups.push_back({reduced[d], in[d]});
  }
  Type el = typeOf(result).getElementType();
  bool isFloat = isa<FloatType>(el);
  std::string T = cType(el), acc = isFloat ? "double" : "int64_t";
  std::string init = kind == "max" ? (isFloat ? "-std::numeric_limits<double>::infinity()"
                                              : "std::numeric_limits<int64_t>::min()")
                                   : "0";
  int64_t count = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (reduced[d])
      count *= in[d];
  std::string finish = kind == "mean" ? "a / " + std::to_string(count) : "a";
  int64_t outN = typeOf(result).getNumElements();
  std::ostringstream body;
  body << args({{el, true}, {el, false}});
  bool rows = groups.size() == 2 && !groups[0].first && groups[1].first;
  bool full = groups.size() == 1 && groups[0].first;
  bool columns = groups.size() == 2 && groups[0].first && !groups[1].first;
  if (rows || full || groups.empty()) {
    int64_t n = rows ? groups[1].second : full ? groups[0].second : 1;
    std::string combine = kind == "max" ? "a = a > x ? a : x;" : "a += x;";
    std::string red = kind == "max" ? "max" : "+";
    body << (outN >= 4 ? "#pragma omp parallel for\n" : "")
         << "  for (int64_t r = 0; r < " << outN << "; ++r) {\n"
         << "    " << acc << " a = " << init << ";\n"
         << "    const " << T << " *x0 = p1 + r * " << n << ";\n"
         << "#pragma omp simd reduction(" << red << " : a)\n"
         << "    for (int64_t j = 0; j < " << n << "; ++j) { " << acc << " x = x0[j]; "
         << combine << " }\n"
         << "    p0[r] = (" << T << ")(" << finish << ");\n  }\n";
  } else if (columns && kind != "max") {
    // out[c] = sum_r in[r, c]: each thread owns a block of columns and walks
    // the rows, so the inner loop is contiguous and nobody shares an output.
    int64_t R = groups[0].second, C = groups[1].second;
    body << "#pragma omp parallel for\n"
         << "  for (int64_t c0 = 0; c0 < " << C << "; c0 += 256) {\n"
         << "    const int64_t c1 = c0 + 256 < " << C << " ? c0 + 256 : " << C << ";\n"
         << "    " << acc << " a[256] = {0};\n"
         << "    for (int64_t r = 0; r < " << R << "; ++r) {\n"
         << "      const " << T << " *x = p1 + r * " << C << ";\n"
         << "#pragma omp simd\n"
         << "      for (int64_t c = c0; c < c1; ++c) a[c - c0] += x[c];\n    }\n"
         << "    for (int64_t c = c0; c < c1; ++c) { " << acc << " s = a[c - c0]; p0[c] = ("
         << T << ")(" << (kind == "mean" ? "s / " + std::to_string(count) : "s") << "); }\n"
         << "  }\n";
  } else {
    // General axes: one output element per iteration, indices decomposed.
    Shape inStrides = rowMajorStrides(in);
    Shape keptDims, keptStrides, redDims, redStrides;
    for (size_t d = 0; d < in.size(); ++d) {
      (reduced[d] ? redDims : keptDims).push_back(in[d]);
      (reduced[d] ? redStrides : keptStrides).push_back(inStrides[d]);
    }
    auto decompose = [](const std::string &var, const Shape &dims, const Shape &strides,
                        const std::string &out) {
      std::string s = "    int64_t " + out + " = 0;\n    { int64_t rem = " + var + ";\n";
      for (size_t d = dims.size(); d-- > 0;)
        s += "      " + out + " += (rem % " + std::to_string(dims[d]) + ") * " +
             std::to_string(strides[d]) + "; rem /= " + std::to_string(dims[d]) + ";\n";
      return s + "    }\n";
    };
    std::string combine = kind == "max" ? "a = a > x ? a : x;" : "a += x;";
    body << (outN >= 4 ? "#pragma omp parallel for\n" : "")
         << "  for (int64_t r = 0; r < " << outN << "; ++r) {\n"
         << decompose("r", keptDims, keptStrides, "base") << "    " << acc << " a = " << init
         << ";\n    for (int64_t j = 0; j < " << product(redDims) << "; ++j) {\n"
         << decompose("j", redDims, redStrides, "off") << "      " << acc
         << " x = p1[base + off];\n      " << combine << "\n    }\n    p0[r] = (" << T
         << ")(" << finish << ");\n  }\n";
  }
  int outId = arenaFor(result);
  valueBuffers[result] = outId;
  addStep(body.str(), {outId, bufferOf(input)});
  return llvm::Error::success();
}

llvm::Error FunctionLowering::emitGemm(MatmulOp op) {
  Shape l = shapeOf(op.getLhs()), r = shapeOf(op.getRhs()), o = shapeOf(op.getResult());
  bool tA = op.getTransposeLhs(), tB = op.getTransposeRhs();
  int64_t M = o[o.size() - 2], N = o.back();
  int64_t K = tA ? l[l.size() - 2] : l.back();
  Shape batch(o.begin(), o.end() - 2);
  auto batchStrides = [&](const Shape &s) {
    Shape b(s.begin(), s.end() - 2);
    Shape st = broadcastStrides(b, batch);
    int64_t mat = s[s.size() - 2] * s.back();
    for (int64_t &x : st)
      x *= mat;
    return st;
  };
  Shape ls = batchStrides(l), rs = batchStrides(r);
  int outId = arenaFor(op.getResult());
  valueBuffers[op.getResult()] = outId;
  int lhs = bufferOf(op.getLhs()), rhs = bufferOf(op.getRhs());
  std::ostringstream text;
  text << "gemm " << tA << " " << tB << " " << M << " " << N << " " << K << " "
       << batch.size();
  for (int64_t d : batch)
    text << " " << d;
  for (int64_t s : ls)
    text << " " << s;
  for (int64_t s : rs)
    text << " " << s;
  text << " %" << outId << " %" << lhs << " %" << rhs;
  steps.push_back({text.str(), {outId, lhs, rhs}});
  countBytes({outId, lhs, rhs});
  ++counts.gemms;
  return llvm::Error::success();
}

/// Row-wise kernels: the reduction axis is the last one.
llvm::Error FunctionLowering::emitRows(Operation *op) {
  auto lastAxis = [&](int64_t axis, Value v) {
    return *normalizeAxis(axis, typeOf(v).getRank()) == typeOf(v).getRank() - 1;
  };
  Value x = op->getOperand(0);
  Type el = typeOf(op->getResult(0)).getElementType();
  std::string T = cType(el);
  std::ostringstream b;
  std::vector<int> bufs;
  auto rowsOf = [&](Value v) {
    Shape s = shapeOf(v);
    return std::make_pair(product(s) / s.back(), s.back());
  };
  auto bindOut = [&](Value v) {
    int id = arenaFor(v);
    valueBuffers[v] = id;
    bufs.push_back(id);
  };

  if (auto sm = dyn_cast<SoftmaxOp>(op); sm || isa<LogSoftmaxOp>(op)) {
    int64_t axis = sm ? int64_t(sm.getAxis()) : int64_t(cast<LogSoftmaxOp>(op).getAxis());
    if (!lastAxis(axis, x))
      return failure("softmax over a dimension other than the last is not supported yet");
    auto [rows, C] = rowsOf(x);
    bool log = !sm;
    bindOut(op->getResult(0));
    bufs.push_back(bufferOf(x));
    b << args({{el, true}, {el, false}}) << "#pragma omp parallel for\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "    const " << T << " *x = p1 + r * " << C << "; " << T << " *y = p0 + r * " << C
      << ";\n    " << T << " m = -std::numeric_limits<" << T << ">::infinity();\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) m = x[c] > m ? x[c] : m;\n"
      << "    double s = 0;\n"
      << "#pragma omp simd reduction(+ : s)\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) s += " << expFn(el) << "(x[c] - m);\n";
    if (log)
      b << "    " << T << " lse = m + (" << T << ")std::log(s);\n"
        << "    for (int64_t c = 0; c < " << C << "; ++c) y[c] = x[c] - lse;\n";
    else
      b << "    " << T << " inv = (" << T << ")(1.0 / s);\n"
        << "    for (int64_t c = 0; c < " << C << "; ++c) y[c] = " << expFn(el) << "(x[c] - m) * inv;\n";
    b << "  }\n";
  } else if (auto sg = dyn_cast<SoftmaxGradOp>(op)) {
    if (!lastAxis(sg.getAxis(), x))
      return failure("softmax over a dimension other than the last is not supported yet");
    auto [rows, C] = rowsOf(x);
    bindOut(sg.getResult());
    bufs.push_back(bufferOf(sg.getGrad()));
    bufs.push_back(bufferOf(sg.getOutput()));
    b << args({{el, true}, {el, false}, {el, false}}) << "#pragma omp parallel for\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "    const " << T << " *g = p1 + r * " << C << ", *y = p2 + r * " << C << "; " << T
      << " *d = p0 + r * " << C << ";\n    double dot = 0;\n"
      << "#pragma omp simd reduction(+ : dot)\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) dot += g[c] * y[c];\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) d[c] = y[c] * (g[c] - (" << T
      << ")dot);\n  }\n";
  } else if (auto ln = dyn_cast<LayerNormOp>(op)) {
    auto [rows, E] = rowsOf(x);
    bindOut(ln.getResult());
    for (Value v : {ln.getInput(), ln.getWeight(), ln.getBias()})
      bufs.push_back(bufferOf(v));
    b << args({{el, true}, {el, false}, {el, false}, {el, false}})
      << "#pragma omp parallel for\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "    const " << T << " *x = p1 + r * " << E << "; " << T << " *y = p0 + r * " << E
      << ";\n    double mean = 0, var = 0;\n"
      << "#pragma omp simd reduction(+ : mean)\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) mean += x[c];\n"
      << "    mean /= " << E << ";\n"
      << "#pragma omp simd reduction(+ : var)\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) { double d = x[c] - mean; var += d * d; }\n"
      << "    " << T << " rstd = (" << T << ")(1.0 / std::sqrt(var / " << E << " + "
      << literal(ln.getEpsilon().convertToDouble(), Float64Type::get(op->getContext()))
      << "));\n    " << T << " mu = (" << T << ")mean;\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) y[c] = (x[c] - mu) * rstd * p2[c] + p3[c];\n"
      << "  }\n";
  } else if (auto lg = dyn_cast<LayerNormGradOp>(op)) {
    auto [rows, E] = rowsOf(x);
    bindOut(lg.getInputGrad());
    bindOut(lg.getWeightGrad());
    bindOut(lg.getBiasGrad());
    for (Value v : {lg.getGrad(), lg.getInput(), lg.getWeight()})
      bufs.push_back(bufferOf(v));
    std::string eps =
        literal(lg.getEpsilon().convertToDouble(), Float64Type::get(op->getContext()));
    b << args({{el, true}, {el, true}, {el, true}, {el, false}, {el, false}, {el, false}})
      << "  std::vector<double> stats(2 * " << rows << ");\n"
      << "#pragma omp parallel for\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "    const " << T << " *g = p3 + r * " << E << ", *x = p4 + r * " << E << "; " << T
      << " *dx = p0 + r * " << E << ";\n    double mean = 0, var = 0;\n"
      << "#pragma omp simd reduction(+ : mean)\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) mean += x[c];\n"
      << "    mean /= " << E << ";\n"
      << "#pragma omp simd reduction(+ : var)\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) { double d = x[c] - mean; var += d * d; }\n"
      << "    double rstd = 1.0 / std::sqrt(var / " << E << " + " << eps << ");\n"
      << "    stats[2 * r] = mean; stats[2 * r + 1] = rstd;\n"
      << "    double m1 = 0, m2 = 0;\n"
      << "#pragma omp simd reduction(+ : m1, m2)\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) {\n"
      << "      double xh = (x[c] - mean) * rstd, dxh = (double)g[c] * p5[c];\n"
      << "      m1 += dxh; m2 += dxh * xh;\n    }\n"
      << "    m1 /= " << E << "; m2 /= " << E << ";\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) {\n"
      << "      double xh = (x[c] - mean) * rstd, dxh = (double)g[c] * p5[c];\n"
      << "      dx[c] = (" << T << ")(rstd * (dxh - m1 - xh * m2));\n    }\n  }\n"
      << "#pragma omp parallel for\n"
      << "  for (int64_t c = 0; c < " << E << "; ++c) {\n"
      << "    double dw = 0, db = 0;\n"
      << "    for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "      double g = p3[r * " << E << " + c];\n"
      << "      dw += g * (p4[r * " << E << " + c] - stats[2 * r]) * stats[2 * r + 1];\n"
      << "      db += g;\n    }\n"
      << "    p1[c] = (" << T << ")dw; p2[c] = (" << T << ")db;\n  }\n";
  } else if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    auto [rows, C] = rowsOf(ce.getLogits());
    Type lt = typeOf(ce.getLabels()).getElementType();
    bindOut(ce.getResult());
    bufs.push_back(bufferOf(ce.getLogits()));
    bufs.push_back(bufferOf(ce.getLabels()));
    b << args({{el, true}, {el, false}, {lt, false}}) << "  double total = 0;\n"
      << "  int64_t count = 0;\n"
      << "#pragma omp parallel for reduction(+ : total, count)\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "    int64_t label = p2[r];\n"
      << "    if (label == " << int64_t(ce.getIgnoreIndex()) << ") continue;\n"
      << "    if (label < 0 || label >= " << C
      << ") { mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, " << C << "); continue; }\n"
      << "    const " << T << " *x = p1 + r * " << C << ";\n"
      << "    " << T << " m = x[0];\n"
      << "    for (int64_t c = 1; c < " << C << "; ++c) m = x[c] > m ? x[c] : m;\n"
      << "    double s = 0;\n"
      << "#pragma omp simd reduction(+ : s)\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) s += " << expFn(el) << "(x[c] - m);\n"
      << "    total += m + std::log(s) - x[label];\n    ++count;\n  }\n"
      << "  p0[0] = (" << T << ")(count ? total / count : 0.0);\n";
  } else if (auto cg = dyn_cast<CrossEntropyGradOp>(op)) {
    auto [rows, C] = rowsOf(cg.getLogits());
    Type lt = typeOf(cg.getLabels()).getElementType();
    int64_t ignore = cg.getIgnoreIndex();
    bindOut(cg.getResult());
    std::string gradLit = splatLiteral(cg.getGrad());
    bufs.push_back(bufferOf(cg.getLogits()));
    bufs.push_back(bufferOf(cg.getLabels()));
    if (gradLit.empty())
      bufs.push_back(bufferOf(cg.getGrad()));
    std::vector<std::pair<Type, bool>> slots{{el, true}, {el, false}, {lt, false}};
    if (gradLit.empty())
      slots.push_back({el, false});
    b << args(slots) << "  int64_t count = 0;\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) count += p2[r] != " << ignore
      << ";\n  const double scale = count ? (double)(" << (gradLit.empty() ? "p3[0]" : gradLit)
      << ") / count : 0.0;\n"
      << "#pragma omp parallel for\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << "    const " << T << " *x = p1 + r * " << C << "; " << T << " *d = p0 + r * " << C
      << ";\n    int64_t label = p2[r];\n"
      << "    if (label == " << ignore << " || label < 0 || label >= " << C
      << ") { for (int64_t c = 0; c < " << C << "; ++c) d[c] = 0; continue; }\n"
      << "    " << T << " m = x[0];\n"
      << "    for (int64_t c = 1; c < " << C << "; ++c) m = x[c] > m ? x[c] : m;\n"
      << "    double s = 0;\n"
      << "#pragma omp simd reduction(+ : s)\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) s += " << expFn(el) << "(x[c] - m);\n"
      << "    const double inv = 1.0 / s;\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) d[c] = (" << T
      << ")(" << expFn(el) << "(x[c] - m) * inv * scale);\n"
      << "    d[label] -= (" << T << ")scale;\n  }\n";
  } else {
    return failure("internal error: not a row op");
  }
  addStep(b.str(), bufs);
  return llvm::Error::success();
}

llvm::Error FunctionLowering::emitAttention(Operation *op, bool backward) {
  Value q, k, v, mask, cu;
  FloatAttr scaleAttr;
  bool causal;
  double dropout;
  int64_t seed;
  if (auto a = dyn_cast<AttentionOp>(op)) {
    q = a.getQuery(), k = a.getKey(), v = a.getValue(), mask = a.getMask(),
    cu = a.getCuSeqlens(), scaleAttr = a.getScaleAttr(), causal = a.getCausal();
    dropout = a.getDropout().convertToDouble(), seed = a.getSeed();
  } else {
    auto g = cast<AttentionGradOp>(op);
    q = g.getQuery(), k = g.getKey(), v = g.getValue(), mask = g.getMask(),
    cu = g.getCuSeqlens(), scaleAttr = g.getScaleAttr(), causal = g.getCausal();
    dropout = g.getDropout().convertToDouble(), seed = g.getSeed();
  }
  if (cu)
    return failure("variable-length attention (cu_seqlens) is not supported by the CPU "
                   "kernels yet");
  Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t B = qs[0], H = qs[1], Sq = qs[2], D = qs[3], Sk = ks[2], Dv = vs[3];
  double scale = scaleAttr ? scaleAttr.getValueAsDouble() : 1.0 / std::sqrt(double(D));
  Type el = typeOf(q).getElementType();
  std::string T = cType(el);
  Shape maskStrides(4, 0);
  if (mask)
    maskStrides = broadcastStrides(shapeOf(mask), {B, H, Sq, Sk});
  // Every [B, H, S, D] operand and result is a strided view whose innermost
  // dimension is contiguous: q, k, v read through the transposes and the
  // split of the fused QKV projection, and results written straight into
  // the layout their consumers want.
  std::vector<int> bufs;
  std::vector<View> tensors; // outputs, [grad], q, k, v
  for (Value r : op->getResults()) {
    std::optional<View> w = outputView(r);
    if (!w) {
      valueBuffers[r] = arenaFor(r);
      w = own(r);
    }
    tensors.push_back(*w);
    bufs.push_back(w->buffer);
  }
  int nOut = op->getNumResults();
  Value grad = backward ? op->getOperand(0) : Value();
  // Argument order: outputs, [grad], q, k, v, [mask].
  std::vector<std::pair<Type, bool>> slots(nOut, {el, true});
  std::vector<Value> reads;
  if (backward)
    reads.push_back(grad);
  int qi = nOut + (backward ? 1 : 0);
  reads.insert(reads.end(), {q, k, v});
  for (Value x : reads) {
    View w = viewOf(x);
    if (w.strides.back() != 1)
      w = own(x);
    tensors.push_back(w);
    bufs.push_back(w.buffer);
    slots.push_back({el, false});
  }
  if (mask) {
    bufs.push_back(bufferOf(mask));
    slots.push_back({el, false});
  }
  // Base of head (bb, h) and row stride of tensor k.
  auto headBase = [&](int k) {
    const View &w = tensors[k];
    return "p" + std::to_string(k) + " + " + std::to_string(w.offset) + " + bb * " +
           std::to_string(w.strides[0]) + " + h * " + std::to_string(w.strides[1]);
  };
  auto rowStride = [&](int k) { return std::to_string(tensors[k].strides[2]); };
  auto p = [](int i) { return "p" + std::to_string(i); };
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string sc = literal(scale, el);
  std::ostringstream b;
  b << args(slots);
  // Loop orders keep the innermost loop contiguous: dot products over the
  // head dimension (simd reductions) and axpy updates of output rows.
  // Probabilities of query row i of head (bb, h) land in s[0, jn).
  std::string scores =
      "      const " + T + " *qi = qh + i * " + rowStride(qi) + ";\n" +
      "      const int64_t jn = " + (causal ? "i + 1 < " + n(Sk) + " ? i + 1 : " + n(Sk) : n(Sk)) +
      ";\n      " + T + " m = -std::numeric_limits<" + T + ">::infinity();\n" +
      "      for (int64_t j = 0; j < jn; ++j) {\n" +
      "        const " + T + " *kj = kh + j * " + rowStride(qi + 1) + ";\n        " + T +
      " d = 0;\n" +
      "#pragma omp simd reduction(+ : d)\n" +
      "        for (int64_t c = 0; c < " + n(D) + "; ++c) d += qi[c] * kj[c];\n" +
      "        d *= " + sc + ";\n" +
      (mask ? "        d += " + p(qi + 3) + "[bb * " + n(maskStrides[0]) + " + h * " +
                  n(maskStrides[1]) + " + i * " + n(maskStrides[2]) + " + j * " +
                  n(maskStrides[3]) + "];\n"
            : "") +
      "        s[j] = d; m = d > m ? d : m;\n      }\n" +
      "      double sum = 0;\n" +
      "      for (int64_t j = 0; j < jn; ++j) { s[j] = " + expFn(el) + "(s[j] - m); sum += s[j]; }\n" +
      "      const " + T + " inv = (" + T + ")(1.0 / sum);\n" +
      "      for (int64_t j = 0; j < jn; ++j) s[j] *= inv;\n" +
      // keep(j): the dropout mask of probability (bh, i, j), 1 without dropout.
      (dropout > 0 ? "      const uint64_t row = (uint64_t)(bh * " + n(Sq) + " + i) * " + n(Sk) +
                         ";\n"
                   : "");
  std::string keep = dropout > 0 ? "(mlc_uniform(key, row + j) >= " + std::to_string(dropout) +
                                       " ? " + literal(1.0 / (1.0 - dropout), el) + " : (" + T +
                                       ")0)"
                                 : "";
  std::string headPtrs =
      "    const int64_t bb = bh / " + n(H) + ", h = bh % " + n(H) + ";\n" +
      "    const " + T + " *qh = " + headBase(qi) + ";\n" +
      "    const " + T + " *kh = " + headBase(qi + 1) + ";\n" +
      "    const " + T + " *vh = " + headBase(qi + 2) + ";\n";
  if (dropout > 0)
    b << "  const uint64_t key = mlc_key(" << seed << "ull, (uint64_t)ctx->step);\n";
  b << "#pragma omp parallel for\n"
    << "  for (int64_t bh = 0; bh < " << B * H << "; ++bh) {\n"
    << headPtrs << "    std::vector<" << T << "> s(" << Sk << ");\n";
  if (!backward) {
    b << "    " << T << " *oh = " << headBase(0) << ";\n"
      << "    for (int64_t i = 0; i < " << Sq << "; ++i) {\n"
      << scores << "      " << T << " *oi = oh + i * " << rowStride(0) << ";\n"
      << "      for (int64_t c = 0; c < " << Dv << "; ++c) oi[c] = 0;\n"
      << "      for (int64_t j = 0; j < jn; ++j) {\n"
      << "        const " << T << " pj = s[j]" << (keep.empty() ? "" : " * " + keep)
      << ", *vj = vh + j * " << rowStride(qi + 2) << ";\n"
      << "#pragma omp simd\n"
      << "        for (int64_t c = 0; c < " << Dv << "; ++c) oi[c] += pj * vj[c];\n"
      << "      }\n    }\n  }\n";
  } else {
    // dv = P^T dO;  dS = P * (dO v^T - rowsum(dO * O));  dq = scale dS k;
    // dk = scale dS^T q. rowsum(dO * O) = sum_j P_ij (dO_i . v_j).
    b << "    " << T << " *dq = " << headBase(0) << ", *dk = " << headBase(1)
      << ", *dv = " << headBase(2) << ";\n"
      << "    const " << T << " *gh = " << headBase(3) << ";\n"
      << "    std::vector<" << T << "> dp(" << Sk << ");\n"
      << "    for (int64_t j = 0; j < " << Sk << "; ++j) {\n"
      << "      for (int64_t c = 0; c < " << D << "; ++c) dk[j * " << rowStride(1) << " + c] = 0;\n"
      << "      for (int64_t c = 0; c < " << Dv << "; ++c) dv[j * " << rowStride(2) << " + c] = 0;\n"
      << "    }\n"
      << "    for (int64_t i = 0; i < " << Sq << "; ++i) {\n"
      << scores << "      const " << T << " *gi = gh + i * " << rowStride(3) << ";\n"
      << "      " << T << " *dqi = dq + i * " << rowStride(0) << ";\n"
      << "      double rowsum = 0;\n"
      << "      for (int64_t j = 0; j < jn; ++j) {\n"
      << "        const " << T << " *vj = vh + j * " << rowStride(qi + 2) << ";\n"
      << "        " << T << " d = 0;\n"
      << "#pragma omp simd reduction(+ : d)\n"
      << "        for (int64_t c = 0; c < " << Dv << "; ++c) d += gi[c] * vj[c];\n"
      << "        const " << T << " kj = " << (keep.empty() ? "(" + T + ")1" : keep) << ";\n"
      << "        dp[j] = d * kj; rowsum += (double)dp[j] * s[j];\n"
      << "        " << T << " *dvj = dv + j * " << rowStride(2) << "; const " << T
      << " pj = s[j] * kj;\n"
      << "#pragma omp simd\n"
      << "        for (int64_t c = 0; c < " << Dv << "; ++c) dvj[c] += pj * gi[c];\n"
      << "      }\n"
      << "      for (int64_t c = 0; c < " << D << "; ++c) dqi[c] = 0;\n"
      << "      for (int64_t j = 0; j < jn; ++j) {\n"
      << "        const " << T << " ds = s[j] * (dp[j] - (" << T << ")rowsum) * " << sc << ";\n"
      << "        const " << T << " *kj = kh + j * " << rowStride(qi + 1) << "; " << T
      << " *dkj = dk + j * " << rowStride(1)
      << ";\n"
      << "#pragma omp simd\n"
      << "        for (int64_t c = 0; c < " << D << "; ++c) { dqi[c] += ds * kj[c]; dkj[c] += ds * qi[c]; }\n"
      << "      }\n    }\n  }\n";
  }
  addStep(b.str(), bufs);
  return llvm::Error::success();
}

llvm::Error FunctionLowering::lowerOp(Operation *op) {
  Type el = op->getNumResults() ? typeOf(op->getResult(0)).getElementType() : Type();
  std::string T = el ? cType(el) : "";
  auto lit = [&](double v) { return literal(v, el); };

  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case<ConstantOp>([&](auto) { return llvm::Error::success(); }) // lazily
      // Views: resolved when a consumer reads them (viewOf), copied only
      // for consumers that need contiguous data (bufferOf).
      .Case<ReshapeOp, TransposeOp, SplitOp, SliceOp>(
          [&](auto) { return llvm::Error::success(); })
      .Case<IotaOp>([&](IotaOp i) {
        Shape s = shapeOf(i.getResult());
        int64_t dim = *normalizeAxis(i.getDim(), s.size());
        Shape st(s.size(), 0);
        st[dim] = 1;
        int id = arenaFor(i.getResult());
        valueBuffers[i.getResult()] = id;
        // Offset o1 of a zero-based access with stride 1 along dim is the index.
        addStep(args({{el, true}}) + loopNest(s, {{0, 0, rowMajorStrides(s)}, {0, 0, st}},
                                              "    p0[o0] = (" + T + ")o1;\n", true),
                {id});
        return llvm::Error::success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, ExpOp, LogOp, TanhOp, ErfOp, SqrtOp,
            RsqrtOp, GeluOp, GeluGradOp, CompareOp, SelectOp, CastOp, BroadcastOp, DropoutOp>(
          [&](auto) { return emitPointwise(op); })
      .Case<FusionOp>([&](FusionOp f) { return emitFusion(f); })
      .Case<PadOp>([&](PadOp p) {
        Shape in = shapeOf(p.getInput()), out = shapeOf(p.getResult());
        Shape outSt = rowMajorStrides(out);
        int64_t base = 0;
        for (size_t d = 0; d < in.size(); ++d)
          base += p.getLow()[d] * outSt[d];
        int id = arenaFor(p.getResult());
        valueBuffers[p.getResult()] = id;
        emitCopies(id, el, product(out), /*zeroFirst=*/true, {p.getInput()}, {base}, outSt);
        return llvm::Error::success();
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        Shape out = shapeOf(c.getResult());
        int64_t axis = *normalizeAxis(c.getAxis(), out.size());
        Shape outSt = rowMajorStrides(out);
        if (!valueBuffers.count(c.getResult()))
          valueBuffers[c.getResult()] = arenaFor(c.getResult());
        int id = valueBuffers[c.getResult()];
        std::vector<Value> sources;
        std::vector<int64_t> bases;
        int64_t offset = 0;
        for (Value v : c.getInputs()) {
          if (!writtenInPlace.count(v)) { // producers wrote the others in place
            sources.push_back(v);
            bases.push_back(offset * outSt[axis]);
          }
          offset += shapeOf(v)[axis];
        }
        if (!sources.empty())
          emitCopies(id, el, product(out), false, sources, bases, outSt);
        return llvm::Error::success();
      })
      .Case<ReduceSumOp>([&](ReduceSumOp r) {
        return emitReduce(op, r.getInput(), r.getAxes(), "sum");
      })
      .Case<ReduceMeanOp>([&](ReduceMeanOp r) {
        return emitReduce(op, r.getInput(), r.getAxes(), "mean");
      })
      .Case<ReduceMaxOp>([&](ReduceMaxOp r) {
        return emitReduce(op, r.getInput(), r.getAxes(), "max");
      })
      .Case<MatmulOp>([&](MatmulOp m) { return emitGemm(m); })
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LayerNormOp, LayerNormGradOp,
            CrossEntropyOp, CrossEntropyGradOp>([&](auto) { return emitRows(op); })
      .Case<AttentionOp>([&](auto) { return emitAttention(op, false); })
      .Case<AttentionGradOp>([&](auto) { return emitAttention(op, true); })
      .Case<EmbeddingOp>([&](EmbeddingOp e) {
        Shape w = shapeOf(e.getWeight());
        int64_t rows = typeOf(e.getIndices()).getNumElements(), V = w[0], E = w[1];
        Type it = typeOf(e.getIndices()).getElementType();
        int id = arenaFor(e.getResult());
        valueBuffers[e.getResult()] = id;
        std::ostringstream b;
        b << args({{el, true}, {el, false}, {it, false}}) << "#pragma omp parallel for\n"
          << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
          << "    int64_t t = p2[r];\n"
          << "    if (t < 0 || t >= " << V << ") { mlc_report(ctx, MLC_ERR_TOKEN_RANGE, r, t, "
          << V << "); t = 0; }\n"
          << "    std::memcpy(p0 + r * " << E << ", p1 + t * " << E << ", " << E
          << " * sizeof(*p0));\n  }\n";
        addStep(b.str(), {id, bufferOf(e.getWeight()), bufferOf(e.getIndices())});
        return llvm::Error::success();
      })
      .Case<EmbeddingGradOp>([&](EmbeddingGradOp e) {
        Shape t = shapeOf(e.getResult());
        int64_t rows = typeOf(e.getIndices()).getNumElements(), V = t[0], E = t[1];
        Type it = typeOf(e.getIndices()).getElementType();
        int id = arenaFor(e.getResult());
        valueBuffers[e.getResult()] = id;
        std::ostringstream b;
        // Scatter-add, parallel over columns so that no two threads add to the
        // same element.
        b << args({{el, true}, {el, false}, {it, false}}) << "  std::memset(p0, 0, "
          << V * E << " * sizeof(*p0));\n"
          << "#pragma omp parallel for\n"
          << "  for (int64_t c0 = 0; c0 < " << E << "; c0 += 64) {\n"
          << "    const int64_t c1 = c0 + 64 < " << E << " ? c0 + 64 : " << E << ";\n"
          << "    for (int64_t r = 0; r < " << rows << "; ++r) {\n"
          << "      int64_t t = p2[r];\n      if (t < 0 || t >= " << V << ") continue;\n"
          << "      for (int64_t c = c0; c < c1; ++c) p0[t * " << E << " + c] += p1[r * " << E
          << " + c];\n    }\n  }\n";
        addStep(b.str(), {id, bufferOf(e.getGrad()), bufferOf(e.getIndices())});
        return llvm::Error::success();
      })
      .Default([&](Operation *o) {
        return failure("no CPU lowering for '" + o->getName().getStringRef() + "'");
      });
}

llvm::Error FunctionLowering::run() {
  Block &block = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // Arguments: parameters, inputs (and their gradients' destinations).
  for (BlockArgument arg : block.getArguments()) {
    unsigned i = arg.getArgNumber();
    Type el = typeOf(arg).getElementType();
    if (auto p = fn.getArgAttrOfType<StringAttr>(i, "mlc.param"))
      valueBuffers[arg] =
          newBuffer({Buffer::Param, el, typeOf(arg).getNumElements(), p.str()});
    else if (auto in = fn.getArgAttrOfType<StringAttr>(i, "mlc.input"))
      valueBuffers[arg] =
          newBuffer({Buffer::Input, el, typeOf(arg).getNumElements(), in.str()});
    else
      return failure("argument #" + llvm::Twine(i) + " of @" + fn.getSymName() +
                     " is neither an mlc.param nor an mlc.input");
  }
  // A gradient produced by an op (not a view, constant or argument) and used
  // only by the return is written straight into the flat gradient buffer.
  llvm::DenseMap<Value, int> returnUses;
  for (Value v : ret.getOperands())
    ++returnUses[v];
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto g = fn.getResultAttrOfType<StringAttr>(i, "mlc.grad");
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    if (g && def && !isa<ReshapeOp, TransposeOp, SplitOp, SliceOp, ConstantOp>(def) &&
        v.hasOneUse() && returnUses[v] == 1)
      gradTargets[v] = g.str();
  }
  for (Operation &op : block.without_terminator())
    if (auto err = lowerOp(&op))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "while lowering '" + op.getName().getStringRef().str() + "' in @" +
              fn.getSymName().str() + ": " + llvm::toString(std::move(err)));
  // Results: named outputs; gradients not written in place are copied.
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    Value v = ret.getOperand(i);
    if (auto g = fn.getResultAttrOfType<StringAttr>(i, "mlc.grad")) {
      if (gradTargets.count(v)) {
        gradReadyStep[g.str()] = steps.size() - 1;
        for (size_t s = 0; s < steps.size(); ++s)
          for (int b : steps[s].buffers)
            if (b == valueBuffers[v])
              gradReadyStep[g.str()] = std::min<int>(gradReadyStep[g.str()], s);
        continue;
      }
      int dst = newBuffer({Buffer::Grad, typeOf(v).getElementType(),
                           typeOf(v).getNumElements(), g.str()});
      emitCopies(dst, typeOf(v).getElementType(), typeOf(v).getNumElements(), false, {v},
                 {0}, rowMajorStrides(shapeOf(v)));
      gradReadyStep[g.str()] = steps.size() - 1;
      continue;
    }
    std::string name = "result" + std::to_string(i);
    if (auto o = fn.getResultAttrOfType<StringAttr>(i, "mlc.output"))
      name = o.str();
    outputs.push_back({name, bufferOf(v), shapeText(shapeOf(v))});
  }

  // Liveness over steps; outputs stay live to the end.
  for (size_t s = 0; s < steps.size(); ++s)
    for (int b : steps[s].buffers) {
      Buffer &r = buffers[root(b)];
      r.first = std::min<int>(r.first, s);
      r.last = std::max<int>(r.last, s);
    }
  for (const Output &o : outputs)
    buffers[root(o.buffer)].last = steps.size();
  // First-fit placement, largest first.
  std::vector<int> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == Buffer::Arena && buffers[i].last >= 0)
      order.push_back(i);
  auto bytes = [&](int i) {
    return (buffers[i].numel * dtypeBytes(buffers[i].element) + 63) / 64 * 64;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return bytes(a) > bytes(b); });
  std::vector<int> placed;
  for (int i : order) {
    Buffer &buf = buffers[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed)
      if (buffers[j].first <= buf.last && buf.first <= buffers[j].last)
        busy.push_back({buffers[j].offset, buffers[j].offset + bytes(j)});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + bytes(i) <= lo)
        break;
      offset = std::max(offset, hi);
    }
    buf.offset = offset;
    arenaBytes = std::max(arenaBytes, offset + bytes(i));
    placed.push_back(i);
  }
  return llvm::Error::success();
}

std::string FunctionLowering::planText() const {
  std::ostringstream os;
  os << "func " << const_cast<func::FuncOp &>(fn).getSymName().str() << " " << arenaBytes << "\n";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer &b = buffers[i];
    os << "buf %" << i << " ";
    switch (b.kind) {
    case Buffer::Param:
      os << "param " << b.name;
      break;
    case Buffer::Grad:
      os << "grad " << b.name;
      break;
    case Buffer::Input:
      os << "input " << b.name;
      break;
    case Buffer::Arena:
      os << "arena " << b.offset << " " << dtypeName(b.element) << " " << b.numel;
      break;
    case Buffer::Alias:
      os << "alias %" << b.alias;
      if (b.offset)
        os << " " << b.offset;
      break;
    }
    os << "\n";
  }
  for (const Step &s : steps)
    os << s.text << "\n";
  for (const Output &o : outputs)
    os << "output " << o.name << " %" << o.buffer << " " << o.shape << "\n";
  os << "end\n";
  return os.str();
}

} // namespace

llvm::Expected<LoweredPackage> lowerModule(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return failure("the module has no @forward function");
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  auto evaluate = module.lookupSymbol<func::FuncOp>("evaluate");
  KernelSet kernels;
  LoweredPackage out;
  std::vector<std::unique_ptr<FunctionLowering>> lowered;
  // train_step last: the parameter layout reads its gradient order.
  for (func::FuncOp fn : {forward, evaluate, step}) {
    if (!fn)
      continue;
    if (!fn.getBody().hasOneBlock())
      return failure("@" + fn.getSymName() + " must have a single block");
    lowered.push_back(std::make_unique<FunctionLowering>(fn, kernels));
    if (auto err = lowered.back()->run())
      return std::move(err);
    out.counts[fn.getSymName().str()] = lowered.back()->counts;
  }
  // Parameters in the order their gradients become ready in backward.
  struct Param {
    std::string name;
    RankedTensorType type;
    int ready;
    unsigned index;
  };
  std::vector<Param> params;
  std::vector<std::string> inputs;
  for (BlockArgument arg : forward.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto t = typeOf(arg);
    if (auto p = forward.getArgAttrOfType<StringAttr>(i, "mlc.param")) {
      int ready = INT_MAX;
      if (step) {
        auto it = lowered.back()->gradReadyStep.find(p.str());
        if (it != lowered.back()->gradReadyStep.end())
          ready = it->second;
      }
      params.push_back({p.str(), t, ready, i});
    } else if (auto in = forward.getArgAttrOfType<StringAttr>(i, "mlc.input")) {
      Shape s(t.getShape().begin(), t.getShape().end());
      for (int64_t d : s)
        if (d == kDynamic)
          return failure("input '" + in.str() + "' has a dynamic shape; the CPU plan "
                                                  "needs static shapes");
      inputs.push_back("input " + in.str() + " " + dtypeName(t.getElementType()) + " " +
                       shapeText(s));
    }
  }
  std::stable_sort(params.begin(), params.end(),
                   [](const Param &a, const Param &b) { return a.ready < b.ready; });
  std::ostringstream plan;
  plan << "mlc-plan 1\n";
  for (const Param &p : params) {
    Shape s(p.type.getShape().begin(), p.type.getShape().end());
    // Weight decay applies to matrices (rank >= 2), never to biases or norms.
    std::string init = s.size() >= 2 ? "normal:0.02" : "zeros";
    if (auto attr = forward.getArgAttrOfType<StringAttr>(p.index, "mlc.init"))
      init = attr.str();
    plan << "param " << p.name << " " << dtypeName(p.type.getElementType()) << " "
         << shapeText(s) << " " << (s.size() >= 2 ? 1 : 0) << " " << init << "\n";
  }
  for (const std::string &in : inputs)
    plan << in << "\n";
  for (auto &f : lowered)
    plan << f->planText();
  out.plan = plan.str();
  out.kernelsCpp = kernels.text();
  return out;
}

} // namespace mlc
