//===- OnnxShapeOps.cpp - ONNX data-movement operators ----------------------===//
//
// Reshape and its kin, Transpose, Concat, Split (and SplitToSequence /
// SequenceAt), Slice, Gather, GatherND, Expand: each evaluates its node
// when every input is a constant (the exporter's shape and mask
// arithmetic) and otherwise emits mlc ops; see OnnxNode.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxNode.h"
#include "frontend/onnx/OnnxParameters.h"

using namespace mlir;

namespace mlc::onnximport {
namespace {

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// A result that only needs input 0's data in a new shape: a constant stays
/// a constant (for the exporter's shape arithmetic), a value becomes a view.
llvm::Error rearranged(Node &nd, const Shape &shape) {
  if (nd.isConst(0)) {
    Const c = nd.c(0);
    c.shape = shape;
    return nd.result(std::move(c));
  }
  return nd.result(nd.im.reshape(nd.v(0), shape));
}

/// Reshape, Flatten, Unsqueeze, Squeeze.
llvm::Error reshapeLike(Node &nd) {
  const std::string &op = nd.op();
  if (auto err = nd.need(1))
    return err;
  Shape s = nd.shape(0);
  int64_t rank = s.size();
  Shape target;
  if (op == "Reshape") {
    if (auto err = nd.need(2))
      return err;
    if (!nd.in[1]->constant || nd.in[1]->constant->kind == Kind::Float)
      return nd.error("the target shape must be integers the importer can evaluate");
    Shape spec = nd.in[1]->constant->i;
    bool allowZero = nd.intAttr("allowzero", 0);
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < spec.size(); ++k) {
      int64_t d = spec[k];
      if (d == 0 && !allowZero) {
        if (int64_t(k) >= rank)
          return nd.error("copies dim " + std::to_string(k) + " of a rank-" + std::to_string(rank) +
                          " input");
        d = s[k];
      }
      if (d == -1) {
        if (infer >= 0)
          return nd.error("has two -1 dims in " + shapeText(spec));
        infer = k;
      } else if (d < 0) {
        return nd.error("has the negative dim " + std::to_string(d));
      } else {
        known = saturatingMul(known, d);
      }
      target.push_back(d);
    }
    if (infer >= 0) {
      if (known == 0 || product(s) % known)
        return nd.error("cannot reshape " + shapeText(s) + " to " + shapeText(spec));
      target[infer] = product(s) / known;
    }
  } else if (op == "Flatten") {
    auto axis = nd.axis(nd.intAttr("axis", 1), rank + 1);
    if (!axis)
      return axis.takeError();
    target = {product(Shape(s.begin(), s.begin() + *axis)),
              product(Shape(s.begin() + *axis, s.end()))};
  } else {
    auto axesOr = nd.intsInputOrAttr(1, "axes");
    if (!axesOr)
      return axesOr.takeError();
    Shape axes = axesOr->value_or(Shape());
    if (op == "Unsqueeze") {
      int64_t outRank = rank + axes.size();
      std::set<int64_t> at;
      for (int64_t a : axes) {
        auto ax = nd.axis(a, outRank);
        if (!ax)
          return ax.takeError();
        if (!at.insert(*ax).second)
          return nd.error("repeats axis " + std::to_string(a));
      }
      size_t next = 0;
      for (int64_t d = 0; d < outRank; ++d)
        target.push_back(at.count(d) ? 1 : s[next++]);
    } else {
      std::set<int64_t> drop;
      for (int64_t a : axes) {
        auto ax = nd.axis(a, rank);
        if (!ax)
          return ax.takeError();
        if (s[*ax] != 1)
          return nd.error("squeezes dim " + std::to_string(a) + " of size " +
                          std::to_string(s[*ax]));
        drop.insert(*ax);
      }
      for (int64_t d = 0; d < rank; ++d)
        if (!(axes.empty() ? s[d] == 1 : drop.count(d) > 0))
          target.push_back(s[d]);
    }
  }
  if (product(target) != product(s))
    return nd.error("cannot reshape " + shapeText(s) + " to " + shapeText(target));
  return rearranged(nd, target);
}

/// `c` with its dims permuted.
Const transposeConst(const Const &c, const Shape &perm) {
  Shape outShape;
  for (int64_t p : perm)
    outShape.push_back(c.shape[p]);
  Shape is = stridesOf(c.shape), os = stridesOf(outShape);
  Const r;
  r.kind = c.kind;
  r.shape = outShape;
  r.resize(c.numel());
  for (int64_t k = 0; k < c.numel(); ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += ((k / os[d]) % outShape[d]) * is[perm[d]];
    r.copyFrom(k, c, src);
  }
  return r;
}

llvm::Error transpose(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  Shape s = nd.shape(0);
  Shape perm = nd.intsAttr("perm").value_or(Shape());
  if (perm.empty())
    for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d)
      perm.push_back(d);
  std::set<int64_t> seen(perm.begin(), perm.end());
  if (perm.size() != s.size() || seen.size() != s.size() || *seen.begin() != 0 ||
      *seen.rbegin() != int64_t(s.size()) - 1)
    return nd.error("perm " + shapeText(perm) + " does not permute rank " +
                    std::to_string(s.size()));
  if (nd.allConst())
    return nd.result(transposeConst(nd.c(0), perm));
  bool identity = true;
  for (size_t d = 0; d < perm.size(); ++d)
    identity = identity && perm[d] == int64_t(d);
  if (identity) // the optimize=False export's Transpose(perm=[0, 1, ...])
    return nd.forward(0);
  return nd.result(nd.b.create<TransposeOp>(nd.loc, nd.v(0), nd.b.getDenseI64ArrayAttr(perm)));
}

llvm::Error concat(Node &nd) {
  if (nd.in.empty())
    return nd.error("needs inputs");
  if (auto err = nd.need(nd.in.size()))
    return err;
  int64_t rank = nd.shape(0).size();
  auto axis = nd.axis(nd.intAttr("axis", 0), rank);
  if (!axis)
    return axis.takeError();
  Shape outShape = nd.shape(0);
  outShape[*axis] = 0;
  for (size_t k = 0; k < nd.in.size(); ++k) {
    Shape s = nd.shape(k);
    if (int64_t(s.size()) != rank)
      return nd.error("joins tensors of different ranks");
    if (nd.kind(k) != nd.kind(0))
      return nd.error("joins tensors of different element types");
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && s[d] != nd.shape(0)[d])
        return nd.error("joins shapes " + shapeText(nd.shape(0)) + " and " + shapeText(s));
    outShape[*axis] += s[*axis];
  }
  if (!nd.allConst()) {
    SmallVector<Value> xs;
    for (size_t k = 0; k < nd.in.size(); ++k)
      xs.push_back(nd.v(k));
    return nd.result(nd.b.create<ConcatOp>(nd.loc, xs, nd.b.getI64IntegerAttr(*axis)));
  }
  if (auto err = nd.checkFoldSize(outShape))
    return err;
  Const r;
  r.kind = nd.c(0).kind;
  r.shape = outShape;
  int64_t outer = product(Shape(outShape.begin(), outShape.begin() + *axis));
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < nd.in.size(); ++k) {
      const Const &x = nd.c(k);
      int64_t chunk = product(Shape(x.shape.begin() + *axis, x.shape.end()));
      for (int64_t e = 0; e < chunk; ++e) {
        if (r.kind == Kind::Float)
          r.f.push_back(x.at(o * chunk + e));
        else
          r.i.push_back(x.intAt(o * chunk + e));
      }
    }
  return nd.result(std::move(r));
}

llvm::Error split(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  Shape s = nd.shape(0);
  auto axis = nd.axis(nd.intAttr("axis", 0), s.size());
  if (!axis)
    return axis.takeError();
  auto splitOr = nd.intsInputOrAttr(1, "split");
  if (!splitOr)
    return splitOr.takeError();
  Shape sizes = splitOr->value_or(Shape());
  if (sizes.empty()) {
    int64_t parts = nd.intAttr("num_outputs", nd.n.output_size());
    if (parts < 1 || parts != nd.n.output_size())
      return nd.error("splits into " + std::to_string(parts) + " parts for " +
                      std::to_string(nd.n.output_size()) + " outputs");
    int64_t each = (s[*axis] + parts - 1) / parts;
    for (int64_t k = 0; k < parts; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(each, s[*axis] - k * each)));
  }
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 1 || v > s[*axis])
      return nd.error("has the split size " + std::to_string(v) + " for a dim of " +
                      std::to_string(s[*axis]));
    total += v;
  }
  if (total != s[*axis] || int64_t(sizes.size()) != nd.n.output_size())
    return nd.error("splits dim " + std::to_string(*axis) + " of " + shapeText(s) + " into " +
                    shapeText(sizes) + " for " + std::to_string(nd.n.output_size()) + " outputs");
  auto split = nd.b.create<SplitOp>(nd.loc, nd.v(0), nd.b.getI64IntegerAttr(*axis),
                                    nd.b.getDenseI64ArrayAttr(sizes));
  for (Value r : split.getResults())
    nd.out.push_back({r, nullptr});
  return llvm::Error::success();
}

/// SplitToSequence: the pieces of input 0 along `axis` as a sequence (of
/// `split`-sized chunks, the last one smaller; or of size-1 pieces, squeezed
/// unless keepdims), read back by SequenceAt. mlc has no sequence values:
/// only these two operators take them.
llvm::Error splitToSequence(Node &nd) {
  if (auto err = nd.need(1))
    return err;
  Shape s = nd.shape(0);
  auto axis = nd.axis(nd.intAttr("axis", 0), s.size());
  if (!axis)
    return axis.takeError();
  int64_t dim = s[*axis];
  Shape sizes;
  bool squeeze = false;
  if (nd.has(1)) {
    if (!nd.isConst(1) || nd.c(1).kind == Kind::Float)
      return nd.error("split must be integers the importer can evaluate");
    const Const &sp = nd.c(1);
    if (sp.shape.empty()) {
      int64_t chunk = sp.i[0];
      if (chunk < 1)
        return nd.error("has the split size " + std::to_string(chunk));
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = sp.i;
    }
  } else {
    sizes.assign(dim, 1);
    squeeze = !nd.intAttr("keepdims", 1);
  }
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 1 || v > dim)
      return nd.error("has the split size " + std::to_string(v) + " for a dim of " +
                      std::to_string(dim));
    total += v;
  }
  if (total != dim || sizes.empty())
    return nd.error("splits dim " + std::to_string(*axis) + " of " + shapeText(s) + " into " +
                    shapeText(sizes));
  auto seq = std::make_shared<std::vector<Entry>>();
  if (sizes.size() == 1) {
    seq->push_back(*nd.in[0]);
  } else {
    auto split = nd.b.create<SplitOp>(nd.loc, nd.v(0), nd.b.getI64IntegerAttr(*axis),
                                      nd.b.getDenseI64ArrayAttr(sizes));
    for (Value r : split.getResults())
      seq->push_back({r, nullptr, nullptr});
  }
  if (squeeze) {
    Shape piece = s;
    piece.erase(piece.begin() + *axis);
    for (Entry &e : *seq) {
      e.value = nd.im.reshape(e.value ? e.value : nd.im.materialize(*e.constant), piece);
      e.constant = nullptr;
    }
  }
  Entry out;
  out.sequence = std::move(seq);
  nd.out.push_back(std::move(out));
  return llvm::Error::success();
}

llvm::Error sequenceAt(Node &nd) {
  if (!nd.has(0) || !nd.in[0]->sequence)
    return nd.error("needs a sequence from SplitToSequence");
  if (!nd.isConst(1) || nd.c(1).numel() != 1 || nd.c(1).kind == Kind::Float)
    return nd.error("position must be a constant integer");
  const auto &seq = *nd.in[0]->sequence;
  int64_t n = seq.size(), at = nd.c(1).i[0];
  if (at < -n || at >= n)
    return nd.error(
        llvm::formatv("position {0} is out of range for a sequence of {1}", at, n).str());
  nd.out.push_back(seq[at < 0 ? at + n : at]);
  return llvm::Error::success();
}

llvm::Error slice(Node &nd) {
  if (auto err = nd.need(3))
    return err;
  Shape s = nd.shape(0);
  int64_t rank = s.size();
  auto starts = nd.intsInputOrAttr(1, "starts");
  if (!starts)
    return starts.takeError();
  auto ends = nd.intsInputOrAttr(2, "ends");
  if (!ends)
    return ends.takeError();
  auto axesOr = nd.intsInputOrAttr(3, "axes");
  if (!axesOr)
    return axesOr.takeError();
  auto stepsOr = nd.intsInputOrAttr(4, "steps");
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
    return nd.error("starts, ends, axes and steps differ in length");
  Shape lo(rank, 0), hi = s, step(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    auto ax = nd.axis(axes[k], rank);
    if (!ax)
      return ax.takeError();
    if (steps[k] < 1)
      return nd.error("step " + std::to_string(steps[k]) +
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
  if (nd.in[0]->constant) {
    const Const &c = *nd.in[0]->constant;
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
    nd.out.push_back({Value(), std::make_shared<const Const>(std::move(r))});
    return llvm::Error::success();
  }
  if (product(outShape) == 0)
    return nd.error("produces an empty tensor " + shapeText(outShape));
  if (outShape == s) // all of it (the exporter's x[:, 0:INT64_MAX]): no op to differentiate
    return nd.forward(0);
  return nd.result(nd.b.create<SliceOp>(nd.loc, nd.v(0), nd.b.getDenseI64ArrayAttr(lo),
                                        nd.b.getDenseI64ArrayAttr(hi),
                                        nd.b.getDenseI64ArrayAttr(step)));
}

/// Gather of constants along `axis`.
llvm::Error evalGather(Node &nd, int64_t axis) {
  const Const &data = nd.c(0), &idx = nd.c(1);
  Shape outShape(data.shape.begin(), data.shape.begin() + axis);
  outShape.insert(outShape.end(), idx.shape.begin(), idx.shape.end());
  outShape.insert(outShape.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (auto err = nd.checkFoldSize(outShape))
    return err;
  int64_t outer = product(Shape(data.shape.begin(), data.shape.begin() + axis));
  int64_t inner = product(Shape(data.shape.begin() + axis + 1, data.shape.end()));
  int64_t dim = data.shape[axis];
  Const r;
  r.kind = data.kind;
  r.shape = outShape;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < idx.numel(); ++j) {
      int64_t ix = idx.i[j] < 0 ? idx.i[j] + dim : idx.i[j];
      if (ix < 0 || ix >= dim)
        return nd.error(
            llvm::formatv("index {0} is out of range for a dim of {1}", idx.i[j], dim).str());
      for (int64_t e = 0; e < inner; ++e) {
        int64_t s = (o * dim + ix) * inner + e;
        if (r.kind == Kind::Float)
          r.f.push_back(data.f[s]);
        else
          r.i.push_back(data.i[s]);
      }
    }
  return nd.result(std::move(r));
}

llvm::Error gather(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  Shape data = nd.shape(0), idx = nd.shape(1);
  int64_t rank = data.size();
  auto axis = nd.axis(nd.intAttr("axis", 0), rank);
  if (!axis)
    return axis.takeError();
  if (nd.kind(1) == Kind::Float)
    return nd.error("indices must be integers");
  if (nd.allConst())
    return evalGather(nd, *axis);
  // Constant indices on a value: slices (a scalar index drops the dim).
  if (nd.in[1]->constant && nd.in[1]->constant->numel() == 1 && idx.size() <= 1) {
    int64_t ix = nd.in[1]->constant->i[0];
    if (ix < 0)
      ix += data[*axis];
    if (ix < 0 || ix >= data[*axis])
      return nd.error("index " + std::to_string(nd.in[1]->constant->i[0]) +
                      " is out of range for dim " + std::to_string(data[*axis]));
    Shape lo(rank, 0), hi = data, step(rank, 1);
    lo[*axis] = ix;
    hi[*axis] = ix + 1;
    Value s = nd.b.create<SliceOp>(nd.loc, nd.v(0), nd.b.getDenseI64ArrayAttr(lo),
                                   nd.b.getDenseI64ArrayAttr(hi), nd.b.getDenseI64ArrayAttr(step));
    Shape target = data;
    if (idx.empty())
      target.erase(target.begin() + *axis);
    else
      target[*axis] = 1;
    return nd.result(nd.im.reshape(s, target));
  }
  if (*axis != 0 || rank != 2 || nd.kind(0) != Kind::Float)
    return nd.error("gathers along axis " + std::to_string(*axis) + " of " + shapeText(data) +
                    "; mlc supports row gathers from a float matrix (embeddings) "
                    "and constant scalar indices");
  if (nd.in[1]->constant)
    for (int64_t v : nd.in[1]->constant->i)
      if (v < 0 || v >= data[0])
        return nd.error("index " + std::to_string(v) + " is out of range for the " +
                        std::to_string(data[0]) + " rows of '" + nd.n.input(0) +
                        "' (is the sequence longer than the model's positions?)");
  // torch's nn.Embedding(padding_idx=p) trains every row but p; the ONNX
  // Gather does not say so, the exporter's FX node on it does.
  auto pad = torchEmbeddingPadding(nd.n);
  if (!pad)
    return nd.error(llvm::toString(pad.takeError()));
  if (*pad && (**pad < 0 || **pad >= data[0]))
    return nd.error("padding_idx " + std::to_string(**pad) +
                    " (its FX node's) is not a row of the " + std::to_string(data[0]) +
                    " rows of '" + nd.n.input(0) + "'");
  Value indices = nd.v(1);
  if (!cast<RankedTensorType>(indices.getType()).getElementType().isInteger(64))
    indices = nd.b.create<CastOp>(nd.loc, RankedTensorType::get(idx, nd.b.getI64Type()), indices);
  auto lookup = nd.b.create<EmbeddingOp>(nd.loc, nd.v(0), indices);
  if (*pad)
    lookup.setPaddingIdxAttr(nd.b.getI64IntegerAttr(**pad));
  return nd.result(lookup.getResult());
}

llvm::Error expand(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  if (!nd.in[1]->constant || nd.in[1]->constant->kind == Kind::Float)
    return nd.error("the shape must be integers the importer can evaluate");
  auto s = broadcastShapes(nd.shape(0), nd.in[1]->constant->i);
  if (!s)
    return nd.error("cannot expand " + shapeText(nd.shape(0)) + " to " +
                    shapeText(nd.in[1]->constant->i));
  if (nd.isConst(0)) {
    if (auto err = nd.checkFoldSize(*s))
      return err;
    const Const &x = nd.c(0);
    Const r;
    r.kind = x.kind;
    r.shape = *s;
    r.resize(product(*s));
    for (int64_t k = 0; k < product(*s); ++k)
      r.copyFrom(k, x, broadcastIndex(k, *s, x.shape));
    return nd.result(std::move(r));
  }
  if (*s == nd.shape(0))
    return nd.result(nd.v(0));
  auto type = RankedTensorType::get(*s, cast<RankedTensorType>(nd.v(0).getType()).getElementType());
  return nd.result(nd.b.create<BroadcastOp>(nd.loc, type, nd.v(0)));
}

/// GatherND of constants (batch_dims 0): `indices[..., :K]` index data's
/// first K dims.
llvm::Error evalGatherND(Node &nd, const Shape &outShape) {
  if (auto err = nd.checkFoldSize(outShape))
    return err;
  const Const &data = nd.c(0), &idx = nd.c(1);
  int64_t K = idx.shape.back(), tuples = product(Shape(idx.shape.begin(), idx.shape.end() - 1));
  int64_t inner = product(Shape(data.shape.begin() + K, data.shape.end()));
  Shape ds = stridesOf(data.shape);
  Const r;
  r.kind = data.kind;
  r.shape = outShape;
  r.resize(product(outShape));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t src = 0;
    for (int64_t k = 0; k < K; ++k) {
      int64_t ix = idx.i[t * K + k], dim = data.shape[k];
      if (ix < -dim || ix >= dim)
        return nd.error(llvm::formatv("index {0} is out of range for a dim of {1}", ix, dim).str());
      src += (ix < 0 ? ix + dim : ix) * ds[k];
    }
    for (int64_t e = 0; e < inner; ++e)
      r.copyFrom(t * inner + e, data, src + e);
  }
  return nd.result(std::move(r));
}

/// For constant indices into a run-time value: the out dim whose position
/// each `indices[..., k]` is (the exporter's way of broadcasting a mask),
/// or -1 for an index that is always 0 into a dim of size 1; nullopt when
/// the indices are anything else.
std::optional<Shape> positionalIndices(const Const &idx, const Shape &data) {
  int64_t K = idx.shape.back(), rank = int64_t(idx.shape.size()) - 1;
  Shape outer(idx.shape.begin(), idx.shape.end() - 1), os = stridesOf(outer);
  int64_t tuples = product(outer);
  auto matches = [&](int64_t k, int64_t d) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t want = d < 0 ? 0 : (t / os[d]) % outer[d];
      int64_t ix = idx.i[t * K + k];
      if ((ix < 0 ? ix + data[k] : ix) != want)
        return false;
    }
    return true;
  };
  Shape dims;
  for (int64_t k = 0; k < K; ++k) {
    int64_t found = -2;
    for (int64_t d = dims.empty() ? 0 : std::max<int64_t>(dims.back() + 1, 0); d < rank; ++d)
      if (outer[d] == data[k] && matches(k, d)) {
        found = d;
        break;
      }
    if (found == -2 && data[k] == 1 && matches(k, -1))
      found = -1;
    if (found == -2)
      return std::nullopt;
    dims.push_back(found);
  }
  return dims;
}

/// The most separate runs of slabs a GatherND of a run-time value may
/// pick (one slice each).
constexpr int64_t kMaxGatherRuns = 64;

/// GatherND of a run-time value at constant indices that are not positions
/// (Falcon's `qkv[..., [-2], :]`, which the exporter writes as a Transpose,
/// a GatherND of indices [[-2]] and a Transpose back): each index tuple
/// picks one slab `data[i0, .., iK-1, ...]`. The first K dims are flattened
/// into one, each run of consecutive slabs is one slice of it, the runs are
/// concatenated and the result takes the indices' outer shape.
llvm::Error gatherSlabs(Node &nd, const Shape &data, const Shape &outShape) {
  const Const &idx = nd.c(1);
  int64_t K = idx.shape.back(), tuples = product(Shape(idx.shape.begin(), idx.shape.end() - 1));
  Shape lead(data.begin(), data.begin() + K), rest(data.begin() + K, data.end());
  for (int64_t d : lead)
    if (ShapedType::isDynamic(d))
      return nd.error("gathers along a dim whose size is not known when importing " +
                      shapeText(data));
  Shape ls = stridesOf(lead);
  std::vector<std::pair<int64_t, int64_t>> runs; // [first slab, count]
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t flat = 0;
    for (int64_t k = 0; k < K; ++k) {
      int64_t ix = idx.i[t * K + k], dim = lead[k];
      if (ix < -dim || ix >= dim)
        return nd.error(llvm::formatv("index {0} is out of range for a dim of {1}", ix, dim).str());
      flat += (ix < 0 ? ix + dim : ix) * ls[k];
    }
    if (!runs.empty() && runs.back().first + runs.back().second == flat)
      ++runs.back().second;
    else
      runs.push_back({flat, 1});
    if (int64_t(runs.size()) > kMaxGatherRuns)
      return nd.error(llvm::formatv("gathers more than {0} separate runs of slabs from a run-time "
                                    "value; mlc has no general gather op",
                                    kMaxGatherRuns)
                          .str());
  }
  if (runs.empty())
    return nd.error("indices " + shapeText(idx.shape) +
                    " pick no element; mlc has no empty tensors");
  Shape flatShape{product(lead)};
  flatShape.insert(flatShape.end(), rest.begin(), rest.end());
  // One index into a transposed value (the exporter's way of indexing an
  // inner dim): slice the value before the transpose along the dim that
  // became the first, and transpose after. Falcon's K and V are then
  // slices of the QKV projection's heads beside Q's, whose transposes
  // compose into the head split the attention reads in place.
  if (auto t = nd.v(0).getDefiningOp<TransposeOp>(); t && K == 1) {
    Value src = t.getInput();
    Shape ss = shapeOf(src);
    const int64_t axis = t.getPermutation()[0];
    SmallVector<Value> pieces;
    for (auto [first, count] : runs) {
      Shape lo(ss.size(), 0), hi = ss, step(ss.size(), 1);
      lo[axis] = first, hi[axis] = first + count;
      pieces.push_back(nd.b.create<SliceOp>(nd.loc, src, nd.b.getDenseI64ArrayAttr(lo),
                                            nd.b.getDenseI64ArrayAttr(hi),
                                            nd.b.getDenseI64ArrayAttr(step)));
    }
    Value y = pieces.size() == 1
                  ? pieces.front()
                  : Value(nd.b.create<ConcatOp>(nd.loc, pieces, nd.b.getI64IntegerAttr(axis)));
    y = nd.b.create<TransposeOp>(nd.loc, y, t.getPermutationAttr());
    return nd.result(nd.im.reshape(y, outShape));
  }
  Value x = nd.im.reshape(nd.v(0), flatShape);
  SmallVector<Value> pieces;
  for (auto [first, count] : runs) {
    if (first == 0 && count == flatShape[0]) {
      pieces.push_back(x);
      continue;
    }
    Shape lo(flatShape.size(), 0), hi = flatShape, step(flatShape.size(), 1);
    lo[0] = first, hi[0] = first + count;
    pieces.push_back(nd.b.create<SliceOp>(nd.loc, x, nd.b.getDenseI64ArrayAttr(lo),
                                          nd.b.getDenseI64ArrayAttr(hi),
                                          nd.b.getDenseI64ArrayAttr(step)));
  }
  Value y = pieces.size() == 1
                ? pieces.front()
                : Value(nd.b.create<ConcatOp>(nd.loc, pieces, nd.b.getI64IntegerAttr(0)));
  return nd.result(nd.im.reshape(y, outShape));
}

/// GatherND (batch_dims 0). Of a run-time value, the indices must be
/// constants. Indices that only broadcast its elements (each index tuple is
/// the position of an output element, as the exporter builds masks) are a
/// reshape and a broadcast; others pick slabs (gatherSlabs).
llvm::Error gatherND(Node &nd) {
  if (auto err = nd.need(2))
    return err;
  if (nd.intAttr("batch_dims", 0) != 0)
    return nd.error("batch_dims other than 0 is not supported");
  if (nd.kind(1) != Kind::Int)
    return nd.error("indices must be integers");
  Shape data = nd.shape(0), idx = nd.shape(1);
  if (idx.empty() || idx.back() < 1 || idx.back() > int64_t(data.size()))
    return nd.error("indices " + shapeText(idx) + " do not index data " + shapeText(data));
  int64_t K = idx.back();
  Shape outShape(idx.begin(), idx.end() - 1);
  outShape.insert(outShape.end(), data.begin() + K, data.end());
  if (nd.allConst())
    return evalGatherND(nd, outShape);
  if (!nd.isConst(1))
    return nd.error("gathers from a run-time value at run-time indices; mlc has no general "
                    "gather op (constant indices are supported)");
  std::optional<Shape> dims = positionalIndices(nd.c(1), data);
  if (!dims)
    return gatherSlabs(nd, data, outShape);
  Shape target(idx.size() - 1, 1);
  for (int64_t k = 0; k < K; ++k)
    if ((*dims)[k] >= 0)
      target[(*dims)[k]] = data[k];
  target.insert(target.end(), data.begin() + K, data.end());
  Value x = nd.im.reshape(nd.v(0), target);
  if (target == outShape)
    return nd.result(x);
  auto type = RankedTensorType::get(outShape, cast<RankedTensorType>(x.getType()).getElementType());
  return nd.result(nd.b.create<BroadcastOp>(nd.loc, type, x));
}

constexpr int kAll = kMaxOpset;

const OpSchema kSchemas[] = {
    {"Reshape", kMinOpset, kAll, reshapeLike},
    {"Flatten", kMinOpset, kAll, reshapeLike},
    {"Unsqueeze", kMinOpset, kAll, reshapeLike},
    {"Squeeze", kMinOpset, kAll, reshapeLike},
    {"Transpose", kMinOpset, kAll, transpose},
    {"Concat", kMinOpset, kAll, concat},
    {"Split", kMinOpset, kAll, split},
    {"Slice", kMinOpset, kAll, slice},
    {"SplitToSequence", kMinOpset, kAll, splitToSequence},
    {"SequenceAt", kMinOpset, kAll, sequenceAt},
    {"Gather", kMinOpset, kAll, gather},
    {"Expand", kMinOpset, kAll, expand},
    {"GatherND", kMinOpset, kAll, gatherND},
};

} // namespace

llvm::ArrayRef<OpSchema> shapeOpSchemas() { return kSchemas; }

} // namespace mlc::onnximport
