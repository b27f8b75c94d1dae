//===- KernelPrinter.cpp - plan.kernel ops to a target's source ------------===//
//
// A walk over the kernels that writes text and decides nothing: a template
// kernel prints through its template's model (TemplateAttrInterface::print,
// compiler/codegen/templates/), which passes the parameters to the target
// method of that template as they are (KernelTarget.h states what each
// computes); a kernel with a body prints from its ops here.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelPrinter.h"
#include "compiler/codegen/CudaSchedule.h"
#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

#include <functional>

namespace mlc::lowering {

std::string literalOf(Attribute value, Type el) {
  if (auto f = dyn_cast_or_null<FloatAttr>(value))
    return literal(f.getValueAsDouble(), el);
  if (auto i = dyn_cast_or_null<IntegerAttr>(value))
    return "(" + cType(el) + ")" + std::to_string(i.getValue().getSExtValue());
  return "";
}

namespace {

/// A body's accesses, one per argument in argument order (the verifier
/// holds every argument to one access).
struct BodyAccesses {
  std::vector<Access> accs;
  std::vector<bool> vector, read, written;
  int accumulated = -1;        // the argument of a column reduction's sums
  plan::NormalizeOp normalized; // a rows kernel's LayerNorm (its first store)
  std::vector<int> normalizedArgs; // every argument it is stored in
};
BodyAccesses accessesOf(plan::KernelOp k) {
  BodyAccesses b;
  size_t n = k.getNumArgs();
  b.accs.resize(n), b.vector.assign(n, false), b.read.assign(n, false),
      b.written.assign(n, false);
  auto note = [&](int64_t arg, int64_t offset, ArrayRef<int64_t> strides, Value v, bool vec,
                  bool store) {
    b.accs[arg] = {int(arg), offset, Shape(strides.begin(), strides.end()),
                   cast<RankedTensorType>(v.getType()).getElementType()};
    b.vector[arg] = b.vector[arg] || vec;
    (store ? b.written : b.read)[arg] = true;
  };
  for (Operation &op : k.getBody().front()) {
    if (auto l = dyn_cast<plan::LoadOp>(op))
      note(l.getArg(), l.getOffset(), l.getStrides(), l.getValue(), l.getVector(), false);
    else if (auto s = dyn_cast<plan::StoreOp>(op))
      note(s.getArg(), s.getOffset(), s.getStrides(), s.getValue(), s.getVector(), true);
    else if (auto a = dyn_cast<plan::AccumulateOp>(op)) {
      note(a.getArg(), 0, {}, a.getValue(), false, true);
      b.accumulated = a.getArg();
    } else if (auto n = dyn_cast<plan::NormalizeOp>(op)) {
      note(n.getArg(), n.getOffset(), n.getStrides(), n.getInput(), false, true);
      b.accs[n.getArg()].element = n.getElement();
      if (!b.normalized)
        b.normalized = n;
      b.normalizedArgs.push_back(int(n.getArg()));
    }
  }
  return b;
}

/// The element code of a body: each load a constant x<arg>, each scalar op
/// a temporary t<n> (its expression the op's ScalarOpInterface spells in the
/// target's words), each store an assignment; `flat` is the element's flat
/// index (dropout's counter). With `lanes`, vector accesses are lane u of
/// their vector v<arg>.
/// How a template spells its element code: the flat index's name, the
/// indentation, whether `flat` is defined from o0 first, whether a load is
/// read where it is used (rows) instead of into a constant.
struct CodeStyle {
  std::string index = "flat", indent = "    ";
  bool flatLine = true, inlineLoads = false;
  /// Whether plan.accumulate adds to `sum` in the element code (a column
  /// reduction) or names the template's value (the norm).
  bool sumLine = true;
  /// A segment kernel's names: a load's constant and element, a store's
  /// element, a per-step scalar's or the decay factor's constant.
  std::function<std::string(int64_t)> loadName, loadElement, storeElement;
  std::function<std::string(Operation *)> scalarName;
};

llvm::Expected<std::string> elementCode(plan::KernelOp k, KernelTarget &target, bool lanes,
                                        std::string &prologue, const CodeStyle &style = {},
                                        llvm::DenseMap<Value, std::string> *scalars = nullptr) {
  const std::string index = style.index; // the emitter keeps a reference to it
  const std::string &in = style.indent;
  std::unique_ptr<ScalarEmitter> emitter = target.scalarEmitter(index, prologue);
  llvm::DenseMap<Value, std::string> own;
  llvm::DenseMap<Value, std::string> &scalar = scalars ? *scalars : own;
  std::string body = style.flatLine ? in + "const int64_t flat = o0;\n" : "";
  int tmp = 0;
  auto element = [&](int64_t arg, bool vector) {
    std::string a = std::to_string(arg);
    return lanes && vector ? "v" + a + "[u]" : "p" + a + "[o" + a + "]";
  };
  for (Operation &op : k.getBody().front()) {
    if (auto l = dyn_cast<plan::LoadOp>(op)) {
      std::string at = style.loadElement ? style.loadElement(l.getArg())
                                         : element(l.getArg(), l.getVector());
      if (style.inlineLoads) {
        scalar[l.getValue()] = at;
        continue;
      }
      std::string name = style.loadName ? style.loadName(l.getArg())
                                        : "x" + std::to_string(l.getArg());
      body += in + "const " + cType(l.getValue().getType().getElementType()) + " " + name +
              " = " + at + ";\n";
      scalar[l.getValue()] = name;
    } else if (auto s = dyn_cast<plan::StoreOp>(op)) {
      std::string at = style.storeElement ? style.storeElement(s.getArg())
                                          : element(s.getArg(), s.getVector());
      body += in + at + " = " + scalar.lookup(s.getValue()) + ";\n";
    } else if (auto a = dyn_cast<plan::AccumulateOp>(op)) {
      if (style.sumLine)
        body += in + "sum += " + scalar.lookup(a.getValue()) + ";\n";
    } else if (isa<plan::ScalarOp, plan::DecayFactorOp>(op) && style.scalarName) {
      scalar[op.getResult(0)] = style.scalarName(&op);
    } else if (isa<plan::NormalizeOp>(op)) {
      continue; // the template normalizes (its operands are in `scalar`)
    } else if (auto c = dyn_cast<ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!dense || !dense.isSplat())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "kernel @" + k.getSymName() + ": a non-splat constant");
      Type el = dense.getElementType();
      scalar[c.getResult()] =
          isa<FloatType>(el)
              ? literal(dense.getSplatValue<APFloat>().convertToDouble(), el)
              : "(" + cType(el) + ")" +
                    std::to_string(dense.getSplatValue<APInt>().getSExtValue());
    } else if (auto s = dyn_cast<ScalarOpInterface>(op)) {
      std::vector<std::string> operands;
      for (Value v : op.getOperands())
        operands.push_back(scalar.lookup(v));
      // A rows kernel's norm weight computed from loads and constants alone
      // (Gemma's 1 + w) is spelled where the norm reads it, after the
      // prologue's loop: an expression, not a temporary of that loop.
      Value result = op.getResult(0);
      if (style.inlineLoads && llvm::all_of(result.getUsers(), [&](Operation *u) {
            auto n = dyn_cast<plan::NormalizeOp>(u);
            return n && n.getWeight() == result && n.getInput() != result;
          }) && llvm::all_of(op.getOperands(), [](Value v) {
            return isa_and_nonnull<plan::LoadOp, ConstantOp>(v.getDefiningOp());
          })) {
        scalar[op.getResult(0)] = "(" + s.scalarExpr(*emitter, operands) + ")";
        continue;
      }
      std::string name = "t" + std::to_string(tmp++);
      body += in + "const " + cType(typeOf(op.getResult(0)).getElementType()) + " " + name +
              " = " + s.scalarExpr(*emitter, operands) + ";\n";
      scalar[op.getResult(0)] = name;
    } else {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "kernel @" + k.getSymName() + ": '" +
                                         op.getName().getStringRef() +
                                         "' is not a scalar op of a kernel body");
    }
  }
  return body;
}

/// A column reduction with a body (rows x columns over dims, the first
/// `lead` the rows): each access's offset decomposed from the element's
/// (row r, column c), the element code summing into `sum`, the target's
/// two-level loop around it.
llvm::Expected<std::string> printColumns(plan::KernelOp k, KernelTarget &target) {
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  Shape dims = r.i64s("dims");
  int64_t lead = r.i64("lead"), C = r.i64("columns");
  Rows rows = r.rows();
  if (auto err = r.error())
    return std::move(err);
  BodyAccesses b = accessesOf(k);
  if (b.accumulated < 0 || lead > int64_t(dims.size()))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + k.getSymName() +
                                       ": a column reduction without its sums");
  Shape rowDims(dims.begin(), dims.begin() + lead), colDims(dims.begin() + lead, dims.end());
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
  for (size_t i = 0; i < b.accs.size(); ++i) {
    if (int(i) == b.accumulated)
      continue;
    const Shape &st = b.accs[i].strides;
    Shape rs(st.begin(), st.begin() + lead), cs(st.begin() + lead, st.end());
    offsets += "      const int64_t o" + std::to_string(i) + " = " +
               std::to_string(b.accs[i].base) + " + " + decompose("r", rowDims, rs) + " + " +
               decompose("c", colDims, cs) + ";\n";
  }
  std::vector<KernelArg> args;
  for (size_t i = 0; i < b.accs.size(); ++i)
    args.push_back({b.accs[i].element, b.written[i]});
  std::string prologue;
  CodeStyle style;
  style.flatLine = false;
  auto body = elementCode(k, target, false, prologue, style);
  if (!body)
    return body.takeError();
  return target.arguments(args) + prologue +
         target.columnReduction(rows, C, offsets, *body, b.accumulated,
                                cType(b.accs[b.accumulated].element));
}

/// A LayerNorm of a pointwise prologue (a rows kernel with a body over
/// rows x E): per row, each access's base b<k> (decomposed from the row r);
/// per element c, its offset from the base; the prologue's element code,
/// whose value plan.normalize names, normalized by the target's template.
llvm::Expected<std::string> printRowNorm(plan::KernelOp k, KernelTarget &target) {
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  Shape dims = r.i64s("dims");
  Rows rows = r.rows();
  double eps = r.f64("eps");
  if (auto err = r.error())
    return std::move(err);
  BodyAccesses b = accessesOf(k);
  if (!b.normalized || dims.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + k.getSymName() + ": a rows kernel without its norm");
  Shape rowDims(dims.begin(), dims.end() - 1);
  const int64_t E = dims.back();
  std::string bases, offsets;
  for (size_t a = 0; a < b.accs.size(); ++a) {
    std::string e = std::to_string(b.accs[a].base), rem = "r";
    for (size_t d = rowDims.size(); d-- > 0;) {
      std::string idx = d == 0 ? rem : "(" + rem + " % " + std::to_string(rowDims[d]) + ")";
      if (b.accs[a].strides[d])
        e += " + " + idx + " * " + std::to_string(b.accs[a].strides[d]);
      rem = "(" + rem + " / " + std::to_string(rowDims[d]) + ")";
    }
    bases += "    const int64_t b" + std::to_string(a) + " = " + e + ";\n";
    offsets += "    const int64_t o" + std::to_string(a) + " = b" + std::to_string(a) +
               " + c * " + std::to_string(b.accs[a].strides.back()) + ";\n";
  }
  std::vector<KernelArg> args;
  for (size_t i = 0; i < b.accs.size(); ++i)
    args.push_back({b.accs[i].element, b.written[i]});
  CodeStyle style;
  style.index = "(r * " + std::to_string(E) + " + c)";
  style.indent = "    ";
  style.flatLine = false;
  style.inlineLoads = true;
  std::string prologue;
  llvm::DenseMap<Value, std::string> scalar;
  auto body = elementCode(k, target, false, prologue, style, &scalar);
  if (!body)
    return body.takeError();
  plan::NormalizeOp n = b.normalized;
  Type el = n.getInput().getType().getElementType();
  return target.arguments(args) + prologue +
         target.layerNormFusion(el, rows, E, literal(eps, Float64Type::get(k.getContext())),
                                bases, offsets, *body, scalar.lookup(n.getInput()),
                                b.normalizedArgs, scalar.lookup(n.getWeight()),
                                n.getBias() ? scalar.lookup(n.getBias()) : std::string(),
                                n.getRms(),
                                n.getResidual() ? scalar.lookup(n.getResidual()) : std::string());
}

/// The optimizer's update and the gradient norm: element code over the
/// flat-buffer segments (params.segments: offset, count[, decays]), the
/// body of the templates' lambda (PreludeCalls.h): one element's p, m, v,
/// g as the lambda's parameters of those names, the block's names x0..
/// (p, g, m, v, the decay factor x4, the step's scalars).
llvm::Expected<std::string> printSegments(plan::KernelOp k, KernelTarget &target) {
  const bool optimizer = k.getKind() == plan::KernelTemplate::optimizer;
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  Shape flat = r.i64s("segments");
  if (auto err = r.error())
    return std::move(err);
  const size_t per = optimizer ? 3 : 2;
  std::vector<Segment> segments;
  for (size_t i = 0; i + per - 1 < flat.size(); i += per)
    segments.push_back({flat[i], flat[i + 1], optimizer && flat[i + 2] != 0});
  // Arguments P, M, V, G (and the scalars) of the optimizer; out, G of the norm.
  static const char *ptr[] = {"p", "m", "v", "g"};
  static const int block[] = {0, 2, 3, 1}; // the block argument of P, M, V, G
  CodeStyle style;
  style.index = "i";
  style.indent = "      ";
  style.flatLine = false;
  style.sumLine = false;
  style.loadName = [&](int64_t arg) {
    return "x" + std::to_string(optimizer ? block[arg] : 0);
  };
  style.loadElement = [&](int64_t arg) { return std::string(optimizer ? ptr[arg] : "g"); };
  style.storeElement = [&](int64_t arg) { return std::string(ptr[arg]); };
  style.scalarName = [](Operation *op) {
    if (auto s = dyn_cast<plan::ScalarOp>(op))
      return "x" + std::to_string(5 + s.getIndex());
    return std::string("x4");
  };
  std::string prologue;
  llvm::DenseMap<Value, std::string> scalar;
  auto body = elementCode(k, target, false, prologue, style, &scalar);
  if (!body)
    return body.takeError();
  Type el;
  std::string setup, value;
  for (Operation &op : k.getBody().front()) {
    if (auto l = dyn_cast<plan::LoadOp>(op))
      el = l.getValue().getType().getElementType();
    if (auto a = dyn_cast<plan::AccumulateOp>(op))
      value = scalar.lookup(a.getValue());
  }
  if (!el)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + k.getSymName() + ": reads no segment element");
  if (!optimizer)
    return prologue + target.norm(el, segments, *body, value);
  const std::string T = cType(el);
  // The segments' decay factor (1 where the update has none).
  std::string decay = "  const " + T + " decayOn = (" + T + ")1;\n";
  for (Operation &op : k.getBody().front()) {
    if (auto s = dyn_cast<plan::ScalarOp>(op))
      setup += "  const " + T + " x" + std::to_string(5 + s.getIndex()) + " = (" + T + ")h[" +
               std::to_string(s.getIndex()) + "];\n";
    if (auto d = dyn_cast<plan::DecayFactorOp>(op))
      decay = "  const " + T + " decayOn = (" + T + ")h[" + std::to_string(d.getIndex()) +
              "];\n";
  }
  return target.optimizer(el, segments, setup + decay + prologue, *body);
}

/// A pointwise kernel with a body: its arguments, the once-per-kernel
/// declarations, the target's nest around the element code.
llvm::Expected<std::string> printBody(plan::KernelOp k, KernelTarget &target) {
  if (k.getKind() == plan::KernelTemplate::optimizer ||
      k.getKind() == plan::KernelTemplate::reduction)
    return printSegments(k, target);
  if (k.getKind() == plan::KernelTemplate::column_reduction)
    return printColumns(k, target);
  if (k.getKind() == plan::KernelTemplate::rows)
    return printRowNorm(k, target);
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  PointwiseNest nest;
  nest.dims = r.i64s("dims");
  nest.dynamic = r.flag("dynamic");
  if (target.name() == "cuda") {
    if (!r.has("vector_lanes"))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "kernel @" + k.getSymName() +
                                         ": no vector decision (run mlc-cuda-vectorize)");
    nest.lanes = r.i64("vector_lanes");
  }
  if (auto err = r.error())
    return std::move(err);
  BodyAccesses b = accessesOf(k);
  nest.accs = b.accs, nest.vector = b.vector, nest.read = b.read, nest.written = b.written;
  // The vector body names o<k> for its element accesses and flat's o0.
  nest.offsetUsed.assign(b.accs.size(), false);
  for (size_t i = 0; i < b.accs.size(); ++i)
    nest.offsetUsed[i] = i == 0 || ((b.read[i] || b.written[i]) && !b.vector[i]);
  std::vector<KernelArg> args;
  for (size_t i = 0; i < b.accs.size(); ++i)
    args.push_back({b.accs[i].element, b.written[i]});
  std::string prologue;
  auto body = elementCode(k, target, false, prologue);
  if (!body)
    return body.takeError();
  std::string vectorBody;
  if (nest.lanes > 1) {
    auto v = elementCode(k, target, true, prologue);
    if (!v)
      return v.takeError();
    vectorBody = std::move(*v);
  }
  return target.arguments(args) + prologue + target.pointwiseNest(nest, *body, vectorBody);
}

} // namespace

llvm::Expected<std::string> printKernel(plan::KernelOp k, KernelTarget &target) {
  std::string name = k.getSymName().str();
  if (target.name() == "cuda") {
    std::optional<CudaSchedule> s = readCudaSchedule(k);
    if (!s)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "kernel @" + name + ": no CUDA schedule (run mlc-cuda-launch)");
    target.schedule(*s);
  }
  std::string body;
  if (!k.getBody().empty()) {
    auto printed = printBody(k, target);
    if (!printed)
      return printed.takeError();
    body = std::move(*printed);
  } else if (plan::TemplateAttrInterface t = k.getKernelTemplateAttr()) {
    auto printed = t.print(k, target);
    if (!printed)
      return printed.takeError();
    body = std::move(*printed);
  } else {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel @" + name + " is neither a template nor a body");
  }
  return target.function(name, plan::stringifyKernelTemplate(k.getKind()).str(), body,
                         k.getNumArgs());
}

} // namespace mlc::lowering
