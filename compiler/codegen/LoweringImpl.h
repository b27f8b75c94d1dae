//===- LoweringImpl.h - the lowering's shared pieces ------------*- C++ -*-===//
//
// Private to compiler/: the per-function lowering state (the plan.func being
// built, each value's buffer and view) that LowerToPlan.cpp drives and the
// emitters (KernelEmitters.cpp, RowEmitters.cpp, ...) fill with steps.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_LOWERINGIMPL_H
#define MLC_COMPILER_LOWERINGIMPL_H

#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/KernelSet.h"
#include "compiler/codegen/KernelTarget.h"
#include "compiler/codegen/Lowering.h"
#include "compiler/codegen/LoweringMarks.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcShapes.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <climits>
#include <set>
#include <sstream>

namespace mlir {
class ConversionPatternRewriter;
} // namespace mlir

namespace mlc::lowering {

using namespace mlir;
class OpPatterns;

/// A lowering error on the op that failed (LoweringError).
inline llvm::Error failure(Operation *op, const llvm::Twine &msg) {
  return llvm::make_error<LoweringError>(op, msg.str());
}
/// One at a location that is no op's (a function argument's).
inline llvm::Error failure(Location loc, const llvm::Twine &msg) {
  return llvm::make_error<LoweringError>(loc, msg.str());
}

inline RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
/// v's shape with a dynamic leading (token) dimension at the module's token
/// `capacity`: the static extent that stands for it in buffer sizes and
/// strides. Kernels iterate over the run's actual token count instead.
inline Shape shapeOf(Value v, int64_t capacity) {
  auto s = typeOf(v).getShape();
  Shape out(s.begin(), s.end());
  if (!out.empty() && out[0] == kDynamic)
    out[0] = capacity;
  return out;
}
/// True when v's leading dimension is the dynamic token count.
inline bool dynamicRows(Value v) {
  auto t = typeOf(v);
  return t.getRank() >= 1 && t.isDynamicDim(0);
}
inline int64_t product(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}
inline Shape rowMajorStrides(const Shape &s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}
/// Strides of `to` reading the same elements as the view (shape, strides),
/// if a reshape needs no copy (numpy's rule: each group of dimensions whose
/// sizes multiply to the same number must be contiguous among itself).
inline std::optional<Shape> reshapeStrides(const Shape &shape, const Shape &strides,
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

using plan::dtypeName;
inline int64_t dtypeBytes(Type el) { return plan::elementBytes(el); }
inline std::string cType(Type el) {
  if (el.isF32())
    return "float";
  if (el.isF64())
    return "double";
  if (el.isBF16())
    return "mlc_bf16"; // the preludes' bf16 storage type
  if (el.isInteger(64))
    return "int64_t";
  if (el.isInteger(32))
    return "int32_t";
  return "uint8_t";
}
inline std::string literal(double v, Type el) {
  // 1/0 rather than std::numeric_limits: the one spelling of infinity that
  // both the host compiler and NVRTC fold to a constant.
  if (el.isBF16())
    return "(mlc_bf16)" + literal(v, Float32Type::get(el.getContext()));
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (el.isF32() ? "(1.0f / 0.0f)" : "(1.0 / 0.0)");
  std::string s = llvm::formatv("{0:e16}", v).str();
  if (el.isF32())
    return "(float)" + s;
  if (el.isF64())
    return s;
  return "(" + cType(el) + ")" + std::to_string(int64_t(v));
}
/// A pointwise loop nest over `shape` with its unit dimensions dropped and
/// the dimensions that are contiguous for every access merged: the extents
/// left and each access's stride along them.
inline std::pair<Shape, std::vector<Shape>> mergeDims(const Shape &shape,
                                                      const std::vector<Access> &accs) {
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
  return {dims, strides};
}

/// `  const int64_t o<k> = base + i<d> * stride...;` for every access of a
/// merged nest (mergeDims): the offsets both targets' pointwise loops use.
inline std::string accessOffsets(const std::vector<Access> &accs,
                                 const std::vector<Shape> &strides, const std::string &indent,
                                 const std::string &prefix = "o") {
  std::string s;
  for (size_t k = 0; k < accs.size(); ++k) {
    s += indent + "const int64_t " + prefix + std::to_string(k) + " = " +
         std::to_string(accs[k].base);
    for (size_t d = 0; d < strides[k].size(); ++d)
      if (strides[k][d])
        s += " + i" + std::to_string(d) + " * " + std::to_string(strides[k][d]);
    s += ";\n";
  }
  return s;
}

/// Typed pointers p0..pN bound from the launch's buffers b[] (C syntax both
/// targets share).
inline std::string bindArguments(const std::vector<KernelArg> &args) {
  std::string s;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string c = args[i].written ? "" : "const ";
    std::string t = cType(args[i].element);
    s += "  " + c + t + " *p" + std::to_string(i) + " = (" + c + t + " *)b[" +
         std::to_string(i) + "];\n";
  }
  return s;
}

/// The optimizer's and norm's table of flat-buffer segments: {offset,
/// numel[, decay]} rows in a static array `seg`.
inline std::string segmentTable(const std::vector<Segment> &segments, bool decay) {
  std::string s = "  static const int64_t seg[" + std::to_string(segments.size()) + "][" +
                  (decay ? "3" : "2") + "] = {";
  for (size_t i = 0; i < segments.size(); ++i) {
    s += std::string(i ? ", " : "") + "{" + std::to_string(segments[i].offset) + ", " +
         std::to_string(segments[i].numel);
    if (decay)
      s += std::string(", ") + (segments[i].decay ? "1" : "0");
    s += "}";
  }
  return s + "};\n";
}

/// The scalar words both targets spell alike in C syntax: literals, type
/// names, and dropout's counter-based draw (the key of (seed, step) declared
/// once per kernel in `prologue`). A target names its math functions.
class CScalarEmitter : public ScalarEmitter {
public:
  CScalarEmitter(const std::string &index, std::string &prologue)
      : index(index), prologue(prologue) {}
  std::string literal(double value, Type el) override { return lowering::literal(value, el); }
  std::string typeName(Type el) override { return cType(el); }
  std::string elementIndex() override { return index; }
  std::string uniform(int64_t seed, const std::string &counter) override {
    std::string key = "key" + std::to_string(seed);
    std::string decl = "  const uint64_t " + key + " = mlc_key(" + std::to_string(seed) +
                       "ull, (uint64_t)ctx->step);\n";
    if (prologue.find(decl) == std::string::npos)
      prologue += decl;
    return "mlc_uniform(" + key + ", " + counter + ")";
  }

protected:
  /// `f(args...)`.
  static std::string apply(const std::string &f, llvm::ArrayRef<std::string> args) {
    std::string out = f + "(";
    for (size_t i = 0; i < args.size(); ++i)
      out += (i ? ", " : "") + args[i];
    return out + ")";
  }

private:
  const std::string &index;
  std::string &prologue;
};

/// exp and tanh for kernels of element type `el`: the vectorizable prelude
/// versions for f32, libm for f64 (whose results the gradient checks compare).
inline std::string expFn(Type el) { return el.isF32() ? "mlc_expf" : "std::exp"; }
inline std::string tanhFn(Type el) { return el.isF32() ? "mlc_tanhf" : "std::tanh"; }

inline std::string shapeText(const Shape &s) {
  if (s.empty())
    return "scalar";
  std::string t;
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? "x" : "") + (s[i] == kDynamic ? std::string("?") : std::to_string(s[i]));
  return t;
}


/// Strides that read a tensor of `in` shape broadcast to `out` shape
/// (numpy alignment on the right; 0 where broadcast).
inline Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape st(out.size(), 0), own = rowMajorStrides(in);
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    st[i + offset] = in[i] == 1 ? 0 : own[i];
  return st;
}

class FunctionLowering {
public:
  /// A parameter's place in the flat buffers (elements), and whether AdamW
  /// decays it; the optimizer's kernels iterate over these.
  struct Slot {
    int64_t offset = 0, numel = 0;
  };
  using Layout = std::map<std::string, Slot>;

  /// Starts the plan.func that `fn` becomes (detached: lowerToPlan places
  /// it after the kernels).
  FunctionLowering(func::FuncOp fn, KernelSet &kernels, const Layout *layout = nullptr)
      : fn(fn), kernels(kernels), layout(layout), stepLoc(fn.getLoc()) {
    OpBuilder b(fn.getContext());
    planFn = b.create<plan::FuncOp>(fn.getLoc(), b.getStringAttr(fn.getSymName()),
                                    b.getI64IntegerAttr(0));
    planFn->getBody().emplaceBlock();
  }

  /// Shapes with the dynamic token dimension at the module's capacity.
  Shape shapeOf(Value v) const { return lowering::shapeOf(v, kernels.tokenCapacity); }
  int64_t numel(Value v) const {
    int64_t n = 1;
    for (int64_t d : shapeOf(v))
      n *= d;
    return n;
  }
  /// `n` rows (at the capacity when `dynamic`) as a row count.
  Rows rowsOf(int64_t n, bool dynamic) const {
    return {n, dynamic && kernels.tokenCapacity ? n / kernels.tokenCapacity : 0};
  }

  llvm::Error run();
  /// The offsets of the views of `params` fusions' outputs, from the flat
  /// layout of the parameters (`layout["*"]`: all of them); before finish.
  llvm::Error placeParameterViews(const Layout &layout);
  /// The plan.func, its outputs appended and the buffers no step or output
  /// uses dropped (arena slices not yet placed).
  OwningOpRef<plan::FuncOp> finish();
  /// Parameter name -> step at which its gradient is complete (train step).
  std::map<std::string, int> gradReadyStep;

  /// The body of a conversion pattern of `op`: `lower` emits its steps at
  /// its location; the op, and any whose results its kernel computes too,
  /// is replaced by its results' buffers. An error is kept (the first one,
  /// on the op it names) and fails the conversion.
  LogicalResult convert(Operation *op, ConversionPatternRewriter &rewriter,
                        llvm::function_ref<llvm::Error()> lower);

private:
  /// The function's results (the return): named outputs, and the gradients
  /// and updates that no op wrote into their flat buffers, copied there.
  llvm::Error lowerResults(func::ReturnOp ret);
  /// One pattern per graph op type (LowerToPlan.cpp).
  void addOpPatterns(OpPatterns &patterns);
  /// mlc.tp_reduce (plan.tp_all_reduce), mlc.tp_all_gather and
  /// mlc.tp_reduce_scatter (plan.tp_all_gather, plan.tp_reduce_scatter).
  llvm::Error lowerTpCollective(Operation *op);
  /// The plan.func's body: its buffers first, in the order they are made,
  /// then its steps, in order.
  Block &body() { return planFn->getBody().front(); }
  /// A buffer op of the plan.func (plan.bind, plan.arena, plan.view) of
  /// `numel` elements `el`, after the buffers made before it.
  template <typename OpT, typename... Args>
  Value newBuffer(Type el, int64_t numel, Args &&...args) {
    OpBuilder b(context());
    if (lastBuffer)
      b.setInsertionPointAfter(lastBuffer);
    else
      b.setInsertionPointToStart(&body());
    auto op = b.create<OpT>(fn.getLoc(), MemRefType::get({numel}, el),
                            std::forward<Args>(args)...);
    lastBuffer = op;
    return op.getResult();
  }
  /// The flat buffer, input or scalars `kind` of that name (a parameter's
  /// slice, or the whole flat buffer for "*").
  Value bind(plan::BufferKind kind, Type el, int64_t numel, StringRef name) {
    return newBuffer<plan::BindOp>(el, numel, plan::BufferKindAttr::get(context(), kind),
                                   StringAttr::get(context(), name));
  }
  /// An arena slice, unplaced until mlc-plan-memory.
  Value arena(Type el, int64_t numel) {
    return newBuffer<plan::ArenaOp>(el, numel, OpBuilder(context()).getI64IntegerAttr(-1));
  }
  /// `numel` elements `el` of `source`, `bytes` into it.
  Value alias(Value source, int64_t bytes, Type el, int64_t numel) {
    return newBuffer<plan::ViewOp>(el, numel, source,
                                   OpBuilder(context()).getI64IntegerAttr(bytes));
  }
  /// A step of the plan.func, located at the graph op being lowered.
  template <typename OpT, typename... Args> OpT addPlanStep(Args &&...args) {
    auto b = OpBuilder::atBlockEnd(&body());
    return b.create<OpT>(stepLoc, std::forward<Args>(args)...);
  }
  Value arenaFor(Value v) {
    Type el = typeOf(v).getElementType();
    auto it = targets.find(v);
    if (it != targets.end())
      return bind(it->second.first, el, numel(v), it->second.second);
    return arena(el, numel(v));
  }
  /// A kernel's result `v` in a buffer of its own (arenaFor), bound to it
  /// and appended to the kernel's buffers `bufs`.
  void bindResult(Value v, std::vector<Value> &bufs) {
    Value buf = arenaFor(v);
    valueBuffers[v] = buf;
    bufs.push_back(buf);
  }
  /// The buffer of an operand, materialized if needed: splat constants are
  /// filled on first use, and a view that is not contiguous is copied once.
  Value bufferOf(Value v) {
    auto it = valueBuffers.find(v);
    if (it != valueBuffers.end())
      return it->second;
    if (auto c = v.getDefiningOp<ConstantOp>()) {
      Value buf = arenaFor(v);
      valueBuffers[v] = buf;
      emitConstant(c, buf);
      return buf;
    }
    View view = viewOf(v);
    Type el = typeOf(v).getElementType();
    Value buf;
    if (view.contiguous()) {
      buf = alias(view.buffer, view.offset * dtypeBytes(el), el, numel(v));
    } else {
      buf = arenaFor(v);
      std::vector<Access> accs{{0, 0, rowMajorStrides(view.shape), el},
                               {1, view.offset, view.strides, el}};
      llvm::cantFail(addBodyStep(
          view.shape, accs, dynamicRows(v),
          [&](OpBuilder &b, llvm::ArrayRef<Shape> strides) {
            Value x = load(b, accs[1], strides[1]);
            store(b, x, accs[0], strides[0]);
            return llvm::Error::success();
          },
          {buf, view.buffer}, KernelTemplate::copy));
    }
    valueBuffers[v] = buf;
    return buf;
  }

  /// A strided view of a materialized buffer (element offsets and strides).
  struct View {
    Value buffer;
    int64_t offset = 0;
    Shape shape, strides;
    bool contiguous() const { return strides == rowMajorStrides(shape); }
  };

  /// Views look through the transposes, reshapes, splits and slices that
  /// mlc.buffers assigns `view`, so that a consumer that reads strided data
  /// (pointwise kernels, fusions, attention) needs no copy. Other values are
  /// their own buffers.
  View viewOf(Value v) {
    auto known = views.find(v);
    if (known != views.end())
      return known->second;
    View view;
    Operation *def = v.getDefiningOp();
    if (assignedBuffer(v) != buffers::view) { // mlc-assign-buffers' decision
      assert((valueBuffers.count(v) || isa_and_nonnull<ConstantOp>(def)) &&
             "a value read before its producer was lowered");
      return own(v);
    }
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
    } else if (auto c = dyn_cast_or_null<TpCopyOp>(def)) {
      view = viewOf(c.getInput()); // Megatron's f is the identity forward
    } else if (auto sl = dyn_cast_or_null<SliceOp>(def)) {
      View in = viewOf(sl.getInput());
      view = in;
      view.shape = shapeOf(v);
      for (size_t d = 0; d < in.shape.size(); ++d) {
        view.offset += sliceStart(in.shape[d], sl.getStarts()[d]) * in.strides[d];
        view.strides[d] = in.strides[d] * sl.getSteps()[d];
      }
    } else { // assigned a view, but of no input (mlc-lower-to-plan refused it)
      return own(v);
    }
    views[v] = view;
    return view;
  }
  /// Reads `v` (through its view) broadcast to `out`; appends its buffer.
  Access readAccess(int slot, Value v, const Shape &out, std::vector<Value> &bufs) {
    View view = viewOf(v);
    Shape st(out.size(), 0);
    size_t offset = out.size() - view.shape.size();
    for (size_t i = 0; i < view.shape.size(); ++i)
      st[i + offset] = view.shape[i] == 1 ? 0 : view.strides[i];
    bufs.push_back(view.buffer);
    return {slot, view.offset, st, typeOf(v).getElementType()};
  }
  View own(Value v) {
    return {bufferOf(v), 0, shapeOf(v), rowMajorStrides(shapeOf(v))};
  }

  /// Whether the op that reads `v` last may overwrite its bytes: every use
  /// of v is one of `readers`, and v owns a fresh arena slice, directly or
  /// through reshapes that are their input's only use (not an input, a
  /// parameter, or a slice of a value that others still read).
  bool overwritable(Value v, llvm::ArrayRef<Operation *> readers) {
    for (Operation *user : v.getUsers())
      if (!llvm::is_contained(readers, user))
        return false;
    Value buf = bufferOf(v);
    while (auto view = buf.getDefiningOp<plan::ViewOp>()) {
      auto rs = v.getDefiningOp<ReshapeOp>();
      if (!rs || !rs.getInput().hasOneUse() || !valueBuffers.count(rs.getInput()) ||
          view.getSource() != valueBuffers[rs.getInput()] || view.getOffset() != 0)
        return false;
      v = rs.getInput();
      buf = view.getSource();
    }
    return buf.getDefiningOp<plan::ArenaOp>() && v.getDefiningOp() != nullptr;
  }

  /// Where a concatenation's result lives: in its own arena buffer, or,
  /// where mlc-in-place marked it `mlc.in_reader_layout` (its only reader a
  /// transpose that keeps the innermost dimension: GPT-NeoX's per-head
  /// [q k v] gradient, back to [tokens, heads, 3 x head]), in the
  /// transpose's layout, so that neither is a copy.
  View concatDestination(ConcatOp c) {
    Value x = c.getResult();
    if (auto known = views.find(x); known != views.end())
      return known->second;
    if (inReaderLayout(c, 0)) {
      if (std::optional<View> v = outputView(x)) {
        views[x] = *v;
        valueBuffers[x] = v->buffer;
        return *v;
      }
      unplaced.insert(c); // the concatenation's lowering refuses the mark
    }
    if (!valueBuffers.count(x))
      valueBuffers[x] = arenaFor(x);
    return own(x);
  }

  /// Where a producer can write `r` in place: when r's only use is a
  /// transpose, a reshape or a concatenation, the producer writes straight
  /// into their result (strided) and they cost nothing. The producers ask
  /// for the results mlc-in-place marked (inReaderLayout).
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
      View dst = concatDestination(c);
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
  /// A step launching a kernel of template `templ` (a #plan.NAME
  /// attribute) with `params`.
  void addStep(Attribute templ, DictionaryAttr params, std::vector<Value> bufs,
               KernelTemplate kind) {
    KernelSet::Kernel k;
    k.kind = kind;
    k.numArgs = bufs.size();
    k.templ = templ;
    k.params = params;
    addLaunch(kernels.add(std::move(k)), std::move(bufs));
  }
  MLIRContext *context() { return fn.getContext(); }
  /// A step launching a pointwise kernel over `shape` with accesses `accs`
  /// (merged, mergeDims) whose body `build` writes: given a builder in the
  /// body and each access's strides along the merged dims, its loads,
  /// scalar ops and stores (scalarClone, load, store).
  using BodyBuilder = llvm::function_ref<llvm::Error(OpBuilder &, llvm::ArrayRef<Shape>)>;
  /// Without `merge`, the dims stay as given (a column reduction splits
  /// them into rows and columns); `more` adds the template's parameters.
  llvm::Error addBodyStep(const Shape &shape, const std::vector<Access> &accs, bool dynamic,
                          BodyBuilder build, std::vector<Value> bufs,
                          KernelTemplate kind = KernelTemplate::pointwise, bool merge = true,
                          llvm::function_ref<void(ParamsBuilder &)> more = {});
  /// In a body: `op` on rank-0 tensors (a splat constant of rank 0), its
  /// operands looked up in `map`, its results mapped.
  llvm::Error scalarClone(OpBuilder &b, Operation *op, IRMapping &map);
  /// In a flat-buffer fusion's body (norm, params): its one block argument
  /// loaded from kernel argument 1 (element `el`), the region's scalar ops
  /// cloned; the value it yields.
  llvm::Expected<Value> flatElement(OpBuilder &b, Block &block, Type el);
  /// The partner reads of the one mlc.rotary op of a kernel (see
  /// splitForRotary): access indices, -1 where none.
  struct RotaryReads {
    Operation *op = nullptr;
    int partner = -1, sinPartner = -1;
  };
  /// In a body: the fusion's region, each block argument loaded from its
  /// access (the inputs' accesses follow the results') and every op but
  /// `skip` cloned on rank-0 values into `map`.
  llvm::Error cloneFusionRegion(OpBuilder &b, FusionOp fusion, const std::vector<Access> &accs,
                                llvm::ArrayRef<Shape> strides, IRMapping &map,
                                llvm::ArrayRef<Operation *> skip = {},
                                const RotaryReads *rotary = nullptr);
  /// Splits a kernel's nest for `rotary`: the last dim (the head dim) into
  /// its pairs, [2, D/2] or [D/2, 2] interleaved, in `iter` and in every
  /// access; appends the partner reads of access `x` (the rotary input) and,
  /// for a transposed op, of access `sin`.
  RotaryReads splitForRotary(RotaryOp rotary, Shape &iter, std::vector<Access> &accs,
                             std::vector<Value> &bufs, int x, int sin);
  struct KernelArgs;
  llvm::Expected<RotaryReads> splitFusionForRotary(FusionOp fusion, Shape &iter,
                                                   KernelArgs &bound);
  /// In a body: the rotary op's element x * cos + partner * sin from the
  /// mapped operands and the partner reads.
  void rotaryScalar(OpBuilder &b, const RotaryReads &r, const std::vector<Access> &accs,
                    llvm::ArrayRef<Shape> strides, IRMapping &map);
  void addLaunch(const std::string &kernel, llvm::ArrayRef<Value> bufs) {
    addPlanStep<plan::LaunchOp>(FlatSymbolRefAttr::get(context(), kernel), bufs);
  }
  /// Access `a`'s element (at `strides` along the merged dims) in a body.
  Value load(OpBuilder &b, const Access &a, const Shape &strides) {
    return b.create<plan::LoadOp>(fn.getLoc(), RankedTensorType::get({}, a.element), a.slot,
                                  a.base, strides);
  }
  void store(OpBuilder &b, Value v, const Access &a, const Shape &strides) {
    b.create<plan::StoreOp>(fn.getLoc(), v, a.slot, a.base, strides);
  }
  void emitConstant(ConstantOp c, Value buf);
  llvm::Error emitPointwise(Operation *op);
  struct KernelArgs {
    std::vector<std::pair<Type, bool>> slots; // element type, written?
    std::vector<Value> bufs;
    std::vector<Access> accs;
  };
  llvm::Expected<KernelArgs> bindFusion(FusionOp fusion, const Shape &iter);
  llvm::Error scalarOps(Block &block, llvm::ArrayRef<Operation *> roots, const std::string &index,
                        const std::string &indent, llvm::DenseMap<Value, std::string> &scalar,
                        std::string &body, std::string &prologue);
  llvm::Error emitFusion(FusionOp fusion);
  llvm::Error emitRowFusion(FusionOp fusion, KernelArgs &bound);
  llvm::Error emitOptimizerFusion(FusionOp fusion);
  llvm::Error emitNormFusion(FusionOp fusion);
  llvm::Error emitParamsFusion(FusionOp fusion);
  /// The `params` fusions and the flat buffer's elements their kernels map.
  std::vector<std::pair<Operation *, int64_t>> paramsFusions;
  /// The flat-buffer segments of the parameters `args` of `user` name (by their
  /// `role` attribute), merged where contiguous; with their indices into args.
  llvm::Expected<std::vector<std::pair<Slot, std::vector<size_t>>>>
  segments(Operation *user, ValueRange args, llvm::StringRef role);
  plan::NestAttr copyNest(const Shape &shape, const std::vector<Access> &accs, bool dynamic);
  void emitCopies(Value dst, Type el, int64_t dstNumel, bool zeroFirst,
                  const std::vector<Value> &sources, const std::vector<int64_t> &dstBases,
                  const Shape &dstStrides);
  llvm::Error emitReduce(Operation *op, Value input, ArrayRef<int64_t> axes,
                         const std::string &kind);
  llvm::Error emitGemm(MatmulOp op);
  Value accumulatorBuffer(Value acc, Value result);
  /// Reads mlc-assign-buffers' mlc.buffers of every op of `block` (the
  /// flat-buffer slices into `targets`); refuses, on the op, an entry it
  /// cannot obey (BufferAssignment.cpp).
  llvm::Error readAssignment(Block &block);
  llvm::Error emitRows(Operation *op);
  /// LayerNorm, RMSNorm and their gradients (RowEmitters.cpp).
  llvm::Error emitNormRows(Operation *op);
  llvm::Error emitCrossEntropy(Operation *op);
  llvm::Error emitCrossEntropyWithGrad(CrossEntropyOp ce, CrossEntropyGradOp cg);
  llvm::Error emitAttention(Operation *op, bool backward);
  void rotaryTables(Value cos, Value sin, bool varlen, AttentionKernel &desc,
                    std::vector<Value> &bufs);

  func::FuncOp fn;
  KernelSet &kernels;
  const Layout *layout;
  /// The plan.func being built, its last buffer op, and the location of
  /// the graph op being lowered (its steps').
  OwningOpRef<plan::FuncOp> planFn;
  Operation *lastBuffer = nullptr;
  Location stepLoc;
  /// The views of a `params` fusion's results into its flat output, placed
  /// at their parameters' offsets by placeParameterViews.
  struct ParamView {
    plan::ViewOp view;
    std::string param;
    Operation *fusion;
  };
  std::vector<ParamView> paramViews;
  /// Each lowered value's buffer (a plan.bind, plan.arena or plan.view).
  llvm::DenseMap<Value, Value> valueBuffers;
  llvm::DenseMap<Value, View> views;
  llvm::DenseSet<Value> writtenInPlace;
  /// Concatenations marked mlc.in_reader_layout that could not be placed so.
  llvm::DenseSet<Operation *> unplaced;
  /// Ops whose results the kernel of another op computes (a GEMM's GELU
  /// epilogue, the gradient of the loss written by the loss kernel): the
  /// pattern that lowers that op replaces them too (pendingWith).
  llvm::DenseSet<Operation *> loweredWith;
  llvm::SmallVector<Operation *> pendingWith;
  void lowersToo(Operation *op) {
    loweredWith.insert(op);
    pendingWith.push_back(op);
  }
  /// The first error of a pattern: the op it names and why.
  std::optional<std::pair<Operation *, std::string>> error;
  /// Results written in place into a flat buffer (kind, parameter name):
  /// those mlc.buffers assigns a slice, and the products that add to them.
  llvm::DenseMap<Value, std::pair<plan::BufferKind, std::string>> targets;
  struct Output {
    std::string name;
    Value buffer;
    Shape shape; // -1: the token dimension
  };
  std::vector<Output> outputs;
};


} // namespace mlc::lowering

#endif // MLC_COMPILER_LOWERINGIMPL_H
