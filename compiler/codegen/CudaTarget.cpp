//===- CudaTarget.cpp - kernels as CUDA C for NVRTC -------------------------===//
//
// The CUDA kernel target: each kernel is one __global__ function of the
// package's kernels.cu (CudaPrelude.h documents the ABI), run as one or more
// phases. The templates:
//
//   pointwise          a grid-stride loop over the flat element index,
//                      decomposed into the nest's indices
//   rows               a block per row (grid-stride over rows), block-wide
//                      sums and maxima through warp shuffles; softmax and
//                      cross-entropy in one pass with a running log-sum-exp
//   column reduction   phase 0: blocks of (row chunk, column block), a
//   (and LayerNorm's   thread per column summing its chunk's rows into a
//    dw, db)           partial in scratch; phase 1: a thread per column sums
//                      the partials in chunk order (deterministic)
//   norm, loss sums    per-block partials, then one block sums them in order
//   optimizer          a grid-stride loop per flat-buffer segment
//   attention          never writes the S x S scores: a thread per query row
//                      streams key/value tiles through shared memory with an
//                      online softmax; backward recomputes the probabilities
//                      (phase 0 row statistics, phase 1 dK and dV a thread
//                      per key row, phase 2 dQ a thread per query row)
//
// Inside a template's text, `@phase(G,B)` marks a phase's launch (grid G,
// block B) and `@scratch(N)` the scratch bytes it needs; function() numbers
// the phases in the order they appear and turns the marks into the kernel's
// `// mlc.kernel` line.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CudaPrelude.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/Vectorize.h"

#include "llvm/Support/ErrorHandling.h"

#include <sstream>

namespace mlc::lowering {

namespace {

std::string n2s(int64_t v) { return std::to_string(v); }

/// Blocks for `work` items of `per` items each, at least 1, at most `cap`
/// (grid-stride loops cover the rest).
int64_t blocksFor(int64_t work, int64_t per, int64_t cap) {
  int64_t g = (work + per - 1) / per;
  return std::max<int64_t>(1, std::min(g, cap));
}

std::string phase(int64_t grid, int64_t block) {
  return "  if (phase == @phase(" + n2s(grid) + "," + n2s(block) + ")) {\n";
}
std::string scratch(int64_t bytes) { return "  // @scratch(" + n2s(bytes) + ")\n"; }

/// `text` with `extra` put before every line (bodies arrive indented for a
/// loop at depth 2).
std::string indented(const std::string &text, const std::string &extra) {
  if (extra.empty())
    return text;
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t end = eol == std::string::npos ? text.size() : eol + 1;
    out += extra + text.substr(pos, end - pos);
    pos = end;
  }
  return out;
}

/// i0..iN of flat element index `i` over `dims` (the last fastest).
std::string decompose(const Shape &dims, const std::string &in) {
  if (dims.empty())
    return "";
  std::string s = in + "int64_t rem = i;\n";
  for (size_t d = dims.size(); d-- > 0;)
    s += d == 0 ? in + "const int64_t i0 = rem;\n"
                : in + "const int64_t i" + n2s(d) + " = rem % n" + n2s(d) + "; rem /= n" +
                      n2s(d) + ";\n";
  return s;
}

/// How a pointwise kernel moves its contiguous accesses as vectors: `lanes`
/// consecutive elements per thread (1: not vectorized); per access whether
/// it is a vector, read, written (mlc-cuda-vectorize decided, on IR).
struct VectorPlan {
  int64_t lanes = 1;
  std::vector<bool> vector, read, written;
};

/// Threads per row-kernel block: enough warps for the row, at most 256.
int64_t rowBlock(int64_t C) { return C <= 64 ? 64 : C <= 256 ? 128 : 256; }
/// Blocks for a block-per-row kernel over at most `rows` rows.
int64_t rowGrid(int64_t rows) { return std::max<int64_t>(1, std::min<int64_t>(rows, 1 << 20)); }

std::string mathName(llvm::StringRef fn, Type el) {
  std::string f = fn.str();
  return el.isF32() ? f + "f" : f;
}

/// The CUDA target's words for scalar code: CUDA's math functions (f
/// suffixes for f32) and the prelude's counter-based dropout generator,
/// bit for bit the CPU's.
class CudaScalarEmitter final : public CScalarEmitter {
public:
  using CScalarEmitter::CScalarEmitter;
  std::string call(llvm::StringRef fn, Type el, llvm::ArrayRef<std::string> args) override {
    return apply(mathName(fn, el), args);
  }
};

/// The element loop of a pointwise kernel: a thread per element, grid-stride.
std::string elementLoop(const Shape &dims, const std::vector<Shape> &strides,
                        const std::vector<Access> &accs, const std::string &body,
                        const std::string &total, const std::string &in) {
  return in + "for (int64_t i = MLC_TID; i < " + total + "; i += MLC_STRIDE) {\n" +
         decompose(dims, in + "  ") + accessOffsets(accs, strides, in + "  ") +
         indented(body, in.substr(2)) + in + "}\n";
}

class CudaTarget final : public KernelTarget {
public:
  using KernelTarget::KernelTarget;
  std::string name() const override { return "cuda"; }

  std::unique_ptr<ScalarEmitter> scalarEmitter(const std::string &index,
                                              std::string &prologue) override {
    return std::make_unique<CudaScalarEmitter>(index, prologue);
  }

  std::string prelude() override { return cudaKernelPrelude(); }

  std::string function(const std::string &name, const std::string &kind,
                       const std::string &body, int64_t args) override {
    std::string text, launches;
    int64_t scratchBytes = 0, maxBlock = 1;
    int phases = 0;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t p = body.find("@phase(", pos), s = body.find("// @scratch(", pos);
      size_t next = std::min(p, s);
      if (next == std::string::npos) {
        text += body.substr(pos);
        break;
      }
      text += body.substr(pos, next - pos);
      size_t close = body.find(')', next);
      if (next == p) {
        std::string spec = body.substr(p + 7, close - p - 7);
        size_t comma = spec.find(',');
        int64_t grid = std::stoll(spec.substr(0, comma)), block = std::stoll(spec.substr(comma + 1));
        maxBlock = std::max(maxBlock, block);
        launches += (phases ? "," : "") + n2s(grid) + "x" + n2s(block);
        text += n2s(phases++);
        pos = close + 1;
      } else {
        scratchBytes = std::max<int64_t>(scratchBytes, std::stoll(body.substr(s + 12, close - s - 12)));
        size_t eol = body.find('\n', close);
        pos = eol == std::string::npos ? body.size() : eol + 1;
      }
    }
    if (!phases)
      llvm::report_fatal_error(llvm::Twine("CUDA kernel ") + name + " has no launch");
    return "\n// mlc.kernel " + name + " " + kind + " args=" + n2s(args) + " scratch=" +
           n2s(scratchBytes) + " launch=" + launches + "\nextern \"C\" __global__ void " +
           "__launch_bounds__(" + n2s(maxBlock) + ") " + name +
           "(char *const *b, const MlcKernelCtx *ctx, int phase) {\n" + text + "}\n";
  }

  std::string arguments(const std::vector<KernelArg> &args) override {
    return bindArguments(args);
  }

  /// out_k = f(in...) per element of the nest. Memory: each operand read
  /// once and each result written once (a fusion's intermediates live in
  /// registers); a broadcast operand is re-read from L2, not DRAM.
  /// A grid-stride loop over the flat index of the merged nest; the last
  /// dimension varies fastest, so neighbouring threads touch neighbouring
  /// elements of every contiguous access. Where mlc-cuda-vectorize found
  /// that the innermost dimension allows it, a thread takes `lanes`
  /// consecutive elements and moves each vector access's share as one
  /// vector (16 bytes for the widest element), when every such pointer is
  /// aligned at run time; the element loop stays as the path for unaligned
  /// buffers.
  std::string pointwiseNest(const PointwiseNest &n, const std::string &body,
                            const std::string &vectorBody) override {
    std::vector<Shape> strides;
    for (const Access &a : n.accs)
      strides.push_back(a.strides);
    VectorPlan vp{n.lanes, n.vector, n.read, n.written};
    return nest(n.dims, strides, n.accs, vp, n.offsetUsed, body, vectorBody, n.dynamic);
  }

private:
  /// The nest of a pointwise kernel over merged `dims`, access k at
  /// strides[k]; with vectors, the lane loop defines o<k> where
  /// `offsetUsed[k]` and runs `vectorBody`.
  std::string nest(const Shape &dims, const std::vector<Shape> &strides,
                   const std::vector<Access> &accs, const VectorPlan &vp,
                   const std::vector<bool> &offsetUsed, const std::string &body,
                   const std::string &vectorBody, bool dynamic) {
    std::ostringstream os;
    const int64_t block = 256;
    os << phase(blocksFor(product(dims) / vp.lanes, block, 4096), block);
    std::string total = "1";
    for (size_t d = 0; d < dims.size(); ++d) {
      os << "    const int64_t n" << d << " = "
         << (d == 0 ? leadingRows(dims[0], dynamic).expr() : n2s(dims[d])) << ";\n";
      total += " * n" + n2s(d);
    }
    if (vp.lanes == 1) {
      os << elementLoop(dims, strides, accs, body, total, "    ") << "  }\n";
      return os.str();
    }
    const std::string V = n2s(vp.lanes), in = "      ";
    std::string aligned;
    for (size_t k = 0; k < accs.size(); ++k)
      if (vp.vector[k])
        aligned += std::string(aligned.empty() ? "" : " && ") + "mlc_aligned(p" +
                   n2s(accs[k].slot) + ", " + n2s(vp.lanes * dtypeBytes(accs[k].element)) + ")";
    os << "    if (" << aligned << ") {\n"
       << in << "for (int64_t i = MLC_TID * " << V << "; i < " << total << "; i += MLC_STRIDE * "
       << V << ") {\n"
       << decompose(dims, in + "  ") << accessOffsets(accs, strides, in + "  ", "q");
    std::string lanes;
    for (size_t k = 0; k < accs.size(); ++k) {
      const std::string K = n2s(k), P = "p" + n2s(accs[k].slot);
      if (vp.vector[k]) {
        os << in << "  alignas(16) " << cType(accs[k].element) << " v" << K << "[" << V << "];\n";
        if (vp.read[k])
          os << in << "  mlc_vload<" << V << ">(v" << K << ", " << P << " + q" << K << ");\n";
      }
      if (offsetUsed[k])
        lanes += in + "    const int64_t o" + K + " = q" + K +
                 (strides[k].back() ? " + u * " + n2s(strides[k].back()) : "") + ";\n";
    }
    os << in << "  #pragma unroll\n"
       << in << "  for (int u = 0; u < " << V << "; ++u) {\n"
       << lanes << indented(vectorBody, in) << in << "  }\n";
    for (size_t k = 0; k < accs.size(); ++k)
      if (vp.vector[k] && vp.written[k])
        os << in << "  mlc_vstore<" << V << ">(p" << accs[k].slot << " + q" << k << ", v" << k
           << ");\n";
    os << in << "}\n    } else {\n"
       << elementLoop(dims, strides, accs, body, total, "      ") << "    }\n  }\n";
    return os.str();
  }

public:
  /// p[c] = sum_r body(r, c) (a bias gradient fused into its producer).
  /// Phase 0: block (chunk, cb) sums rows of its chunk for the columns of
  /// column block cb, a thread per column, into partial[chunk][c]; phase 1:
  /// a thread per column adds the partials in chunk order. Memory: the rows
  /// read once (coalesced along c), chunks x C doubles of partials written
  /// and read back, the C sums written.
  std::string columnReduction(const Rows &rows, int64_t columns,
                              const std::string &offsets, const std::string &body, int slot,
                              const std::string &type) override {
    const int64_t C = columns, block = 256, colBlocks = (C + block - 1) / block;
    const int64_t chunks = blocksFor(rows.count, 16, 64);
    std::ostringstream k;
    k << scratch(chunks * C * 8) << phase(chunks * colBlocks, block)
      << "    double *part = (double *)ctx->scratch;\n"
      << "    const int64_t R = " << rows << ", chunk = blockIdx.x / " << colBlocks
      << ", c = (blockIdx.x % " << colBlocks << ") * " << block << " + threadIdx.x;\n"
      << "    const int64_t per = (R + " << chunks << " - 1) / " << chunks << ";\n"
      << "    if (c < " << C << ") {\n"
      << "      double sum = 0;\n"
      << "      const int64_t r1 = (chunk + 1) * per < R ? (chunk + 1) * per : R;\n"
      << "      for (int64_t r = chunk * per; r < r1; ++r) {\n"
      << "      const int64_t flat = r * " << C << " + c;\n"
      << "      (void)flat;\n"
      << offsets << body << "      }\n"
      << "      part[chunk * " << C << " + c] = sum;\n    }\n  }\n"
      << phase(colBlocks, block)
      << "    const double *part = (const double *)ctx->scratch;\n"
      << "    const int64_t c = MLC_TID;\n"
      << "    if (c < " << C << ") {\n      double s = 0;\n"
      << "      for (int64_t q = 0; q < " << chunks << "; ++q) s += part[q * " << C << " + c];\n"
      << "      p" << slot << "[c] = (" << type << ")s;\n    }\n  }\n";
    return k.str();
  }

  /// AdamW over the flat buffers (contract/OptimizerScalars.h: m = b1 m +
  /// (1 - b1) g, v = b2 v + (1 - b2) g^2, p = p decay - step m / (sqrt(v)
  /// inv_sqrt_bc2 + eps)), a grid-stride loop per segment, one launch.
  /// Memory: p, m, v and g read, p, m and v written: 28 bytes per f32
  /// parameter, the kernel's whole cost (bandwidth-bound).
  std::string optimizer(mlir::Type el, const std::vector<Segment> &segments,
                        const std::string &setup, const std::string &body) override {
    std::string T = cType(el);
    int64_t total = 0;
    for (const Segment &s : segments)
      total += s.numel;
    std::ostringstream k;
    k << "  " << T << " *P = (" << T << " *)b[0];\n  " << T << " *M = (" << T << " *)b[1];\n  "
      << T << " *V = (" << T << " *)b[2];\n  const " << T << " *G = (const " << T
      << " *)b[3];\n  const double *h = (const double *)b[4];\n"
      << setup << segmentTable(segments, true) << phase(blocksFor(total, 256 * 4, 4096), 256)
      << "    for (int s = 0; s < " << segments.size() << "; ++s) {\n"
      << "      const int64_t off = seg[s][0], n = seg[s][1];\n"
      << "      const " << T << " x4 = seg[s][2] ? decayOn : (" << T << ")1;\n"
      << "      " << T << " *pp = P + off;\n      " << T << " *mm = M + off;\n      " << T
      << " *vv = V + off;\n      const " << T << " *gg = G + off;\n"
      << "      for (int64_t i = MLC_TID; i < n; i += MLC_STRIDE) {\n"
      << body << "      }\n    }\n  }\n";
    return k.str();
  }

  /// out[0] = sqrt(sum_i value(g_i)) in double: phase 0 a block sum per
  /// block into scratch, phase 1 one block adds them in order (the same
  /// bits every run). Memory: every gradient read once (4 bytes per f32).
  std::string norm(mlir::Type el, const std::vector<Segment> &segments,
                   const std::string &body, const std::string &value) override {
    std::string T = cType(el);
    int64_t total = 0;
    for (const Segment &s : segments)
      total += s.numel;
    const int64_t blocks = blocksFor(total, 256 * 8, 1024);
    std::ostringstream k;
    k << "  double *out = (double *)b[0];\n  const " << T << " *G = (const " << T << " *)b[1];\n"
      << segmentTable(segments, false) << scratch(blocks * 8)
      << "  __shared__ double red[32];\n"
      << phase(blocks, 256) << "    double sum = 0;\n"
      << "    for (int s = 0; s < " << segments.size() << "; ++s) {\n"
      << "      const " << T << " *gg = G + seg[s][0];\n"
      << "      const int64_t n = seg[s][1];\n"
      << "      for (int64_t i = MLC_TID; i < n; i += MLC_STRIDE) {\n"
      << body << "        sum += " << value << ";\n      }\n    }\n"
      << "    sum = mlc_block_sum(sum, red);\n"
      << "    if (threadIdx.x == 0) ((double *)ctx->scratch)[blockIdx.x] = sum;\n  }\n"
      << sumPartials(blocks, "out[0] = sqrt(s);");
    return k.str();
  }

  /// y = exp(x - m) / s per row (log: x - m - log s), m and s the row's max
  /// and sum exp(x - m) from one online pass (mlc_lse_add), a block per row.
  /// Memory: x read twice (the second pass mostly from L2), y written once:
  /// 8 bytes per f32 element from DRAM.
  std::string softmax(mlir::Type el, const Rows &rows, int64_t C, bool log) override {
    std::string T = cType(el);
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}}) << lseShared(el)
      << rowLoop(rows, C) << "      const " << T << " *x = p1 + r * " << C << "; " << T
      << " *y = p0 + r * " << C << ";\n"
      << rowLse(el, "x", C);
    if (log)
      b << "      const " << T << " lse = m + (" << T << ")log(s);\n"
        << "      for (int64_t c = threadIdx.x; c < " << C << "; c += blockDim.x) y[c] = x[c] - lse;\n";
    else
      b << "      const double inv = 1.0 / s;\n"
        << "      for (int64_t c = threadIdx.x; c < " << C
        << "; c += blockDim.x) y[c] = (" << T << ")(mlc_exp(x[c] - m) * inv);\n";
    b << "    }\n  }\n";
    return b.str();
  }

  /// dx = y * (g - sum_c g_c y_c) per row, a block per row (the dot product
  /// a block sum in double). Memory: g and y read (twice, the second from
  /// L2), dx written: 12 bytes per f32 element.
  std::string softmaxGrad(mlir::Type el, const Rows &rows, int64_t C) override {
    std::string T = cType(el);
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {el, false}}) << "  __shared__ double red[32];\n"
      << rowLoop(rows, C) << "      const " << T << " *g = p1 + r * " << C << ", *y = p2 + r * "
      << C << "; " << T << " *d = p0 + r * " << C << ";\n      double dot = 0;\n"
      << "      for (int64_t c = threadIdx.x; c < " << C
      << "; c += blockDim.x) dot += (double)g[c] * y[c];\n"
      << "      dot = mlc_block_sum(dot, red);\n"
      << "      for (int64_t c = threadIdx.x; c < " << C << "; c += blockDim.x) d[c] = y[c] * (g[c] - ("
      << T << ")dot);\n    }\n  }\n";
    return b.str();
  }

  /// y = (x - mean) * rstd * w + b per row, a block per row, the statistics
  /// in double over two passes. Memory: x read (three passes over the row,
  /// two from L2), y written; w and b stay in cache: 8 bytes per f32 element.
  std::string layerNorm(mlir::Type el, const Rows &rows, int64_t E,
                        const std::string &eps) override {
    std::string T = cType(el);
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {el, false}, {el, false}})
      << "  __shared__ double red[32];\n"
      << rowLoop(rows, E) << "      const " << T << " *x = p1 + r * " << E << "; " << T
      << " *y = p0 + r * " << E << ";\n"
      << rowMeanRstd("x[c]", E, eps) << "      const " << T << " rs = (" << T << ")rstd, mu = ("
      << T << ")mean;\n"
      << "      for (int64_t c = threadIdx.x; c < " << E
      << "; c += blockDim.x) y[c] = (x[c] - mu) * rs * p2[c] + p3[c];\n    }\n  }\n";
    return b.str();
  }

  /// dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)), dxh = g * w, xh =
  /// (x - mean) * rstd; dw = sum_r g * xh, db = sum_r g.
  /// Phase 0: a block per row writes dx and keeps (mean, rstd) in scratch;
  /// phases 1 and 2: dw and db as a deterministic column reduction.
  /// Memory: g and x read twice (rows, then column chunks), dx written: 20
  /// bytes per f32 element, plus 16 bytes of statistics per row.
  std::string layerNormGrad(mlir::Type el, const Rows &rows, int64_t capacity, int64_t E,
                            const std::string &eps) override {
    std::string T = cType(el);
    const int64_t block = 256, colBlocks = (E + block - 1) / block;
    const int64_t chunks = blocksFor(capacity, 16, 64);
    const std::string stats = "((double *)ctx->scratch)",
                      part = "((double *)ctx->scratch + " + n2s(2 * capacity) + ")";
    std::ostringstream b;
    b << arguments({{el, true}, {el, true}, {el, true}, {el, false}, {el, false}, {el, false}})
      << scratch((2 * capacity + 2 * chunks * E) * 8) << "  __shared__ double red[32];\n"
      << rowLoop(rows, E) << "      const " << T << " *g = p3 + r * " << E << ", *x = p4 + r * "
      << E << "; " << T << " *dx = p0 + r * " << E << ";\n"
      << rowMeanRstd("x[c]", E, eps)
      << "      if (threadIdx.x == 0) { " << stats << "[2 * r] = mean; " << stats
      << "[2 * r + 1] = rstd; }\n"
      << "      double m1 = 0, m2 = 0;\n"
      << "      for (int64_t c = threadIdx.x; c < " << E << "; c += blockDim.x) {\n"
      << "        double xh = (x[c] - mean) * rstd, dxh = (double)g[c] * p5[c];\n"
      << "        m1 += dxh; m2 += dxh * xh;\n      }\n"
      << "      m1 = mlc_block_sum(m1, red) / " << E << ";\n"
      << "      m2 = mlc_block_sum(m2, red) / " << E << ";\n"
      << "      for (int64_t c = threadIdx.x; c < " << E << "; c += blockDim.x) {\n"
      << "        double xh = (x[c] - mean) * rstd, dxh = (double)g[c] * p5[c];\n"
      << "        dx[c] = (" << T << ")(rstd * (dxh - m1 - xh * m2));\n      }\n    }\n  }\n"
      << phase(chunks * colBlocks, block)
      << "    const int64_t R = " << rows << ", chunk = blockIdx.x / " << colBlocks
      << ", c = (blockIdx.x % " << colBlocks << ") * " << block << " + threadIdx.x;\n"
      << "    const int64_t per = (R + " << chunks << " - 1) / " << chunks << ";\n"
      << "    if (c < " << E << ") {\n      double dw = 0, db = 0;\n"
      << "      const int64_t r1 = (chunk + 1) * per < R ? (chunk + 1) * per : R;\n"
      << "      for (int64_t r = chunk * per; r < r1; ++r) {\n"
      << "        const double gc = p3[r * " << E << " + c];\n"
      << "        dw += gc * (p4[r * " << E << " + c] - " << stats << "[2 * r]) * " << stats
      << "[2 * r + 1]; db += gc;\n      }\n"
      << "      " << part << "[chunk * " << E << " + c] = dw;\n"
      << "      " << part << "[(" << chunks << " + chunk) * " << E << " + c] = db;\n    }\n  }\n"
      << phase(colBlocks, block) << "    const int64_t c = MLC_TID;\n"
      << "    if (c < " << E << ") {\n      double dw = 0, db = 0;\n"
      << "      for (int64_t q = 0; q < " << chunks << "; ++q) { dw += " << part << "[q * " << E
      << " + c]; db += " << part << "[(" << chunks << " + q) * " << E << " + c]; }\n"
      << "      p1[c] = (" << T << ")dw; p2[c] = (" << T << ")db;\n    }\n  }\n";
    return b.str();
  }

  /// loss = mean over labelled rows of m + log s - x[label] (m, s the
  /// row's log-sum-exp terms): phase 0 a block per row writes its term, phase
  /// 1 one block sums them in order. Memory: the logits read once (4 bytes
  /// per f32 logit); a label out of range is reported, not read.
  std::string crossEntropy(mlir::Type el, mlir::Type lt, const Rows &rows, int64_t C,
                           int64_t ignore) override {
    std::string T = cType(el);
    const int64_t cap = rows.count;
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {lt, false}}) << scratch(2 * cap * 8)
      << lseShared(el) << "  double *loss = (double *)ctx->scratch, *used = loss + " << cap
      << ";\n"
      << rowLoop(rows, C) << "      const int64_t label = p2[r];\n"
      << "      if (label == " << ignore << " || label < 0 || label >= " << C << ") {\n"
      << "        if (threadIdx.x == 0) { loss[r] = 0; used[r] = 0; if (label != " << ignore
      << ") mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, " << C << "); }\n"
      << "        continue;\n      }\n"
      << "      const " << T << " *x = p1 + r * " << C << ";\n"
      << rowLse(el, "x", C)
      << "      if (threadIdx.x == 0) { loss[r] = m + log(s) - x[label]; used[r] = 1; }\n"
      << "    }\n  }\n"
      << phase(1, 256) << "    const int64_t R = " << rows << ";\n"
      << "    double total = 0, count = 0;\n"
      << "    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) { total += loss[r]; count += "
         "used[r]; }\n"
      << "    total = mlc_block_sum(total, reds);\n    count = mlc_block_sum(count, reds);\n"
      << "    if (threadIdx.x == 0) p0[0] = (" << T << ")(count ? total / count : 0.0);\n  }\n";
    return b.str();
  }

  std::string crossEntropyWithGrad(mlir::Type el, mlir::Type lt, mlir::Type grad,
                                   const Rows &rows, int64_t C, int64_t ignore,
                                   const std::string &scale) override {
    return crossEntropyGradient(el, lt, grad, rows, C, ignore, scale, /*withLoss=*/true);
  }

  std::string crossEntropyGrad(mlir::Type el, mlir::Type lt, const Rows &rows, int64_t C,
                               int64_t ignore, const std::string &scale) override {
    return crossEntropyGradient(el, lt, el, rows, C, ignore, scale, /*withLoss=*/false);
  }

  /// LayerNorm of a pointwise prologue (a residual add, a bias), y =
  /// (u - mean) * rstd * w + b with u = prologue(inputs). A block per row:
  /// the prologue is computed once into a shared-memory row (values needed
  /// elsewhere are stored on the way), then normalized from it. A row too
  /// long for shared memory recomputes the prologue. Memory: the prologue's
  /// inputs read once, its stored values and y written once; u never
  /// reaches DRAM.
  std::string layerNormFusion(mlir::Type el, const Rows &rows, int64_t E,
                              const std::string &eps, const std::string &bases,
                              const std::string &offsets, const std::string &body,
                              const std::string &input, int slot, const std::string &weight,
                              const std::string &bias) override {
    std::string T = cType(el);
    const bool shared = E * int64_t(dtypeBytes(el)) <= 24 * 1024;
    auto eachColumn = [&](const std::string &inner) {
      return "      for (int64_t c = threadIdx.x; c < " + n2s(E) + "; c += blockDim.x) {\n" +
             offsets + inner + "      }\n";
    };
    std::ostringstream k;
    k << "  __shared__ double red[32];\n";
    if (shared)
      k << "  __shared__ " << T << " row[" << E << "];\n";
    k << rowLoop(rows, E) << bases;
    if (shared) {
      k << eachColumn(body + "      row[c] = " + input + ";\n")
        << rowMeanRstd("row[c]", E, eps);
    } else {
      // mean, then the variance around it, each from a recomputed prologue.
      k << "      double mean = 0, var = 0;\n"
        << eachColumn(body + "      mean += (double)(" + input + ");\n")
        << "      mean = mlc_block_sum(mean, red) / " << E << ";\n"
        << eachColumn(body + "      { double d = (double)(" + input + ") - mean; var += d * d; }\n")
        << "      var = mlc_block_sum(var, red);\n"
        << "      const double rstd = rsqrt(var / " << E << " + " << eps << ");\n";
    }
    k << "      const " << T << " rs = (" << T << ")rstd, mu = (" << T << ")mean;\n";
    if (shared)
      k << eachColumn("      p" + std::to_string(slot) + "[o" + std::to_string(slot) +
                      "] = (row[c] - mu) * rs * " + weight + " + " + bias + ";\n");
    else
      k << eachColumn(body + "      p" + std::to_string(slot) + "[o" + std::to_string(slot) +
                      "] = ((" + input + ") - mu) * rs * " + weight + " + " + bias + ";\n");
    k << "    }\n  }\n";
    return k.str();
  }

  std::string attention(const AttentionKernel &a) override;
  std::string attentionTensorCores(const AttentionKernel &a);

  /// Sums, means and maxima (double accumulators; int64 for integers):
  /// Rows a block per row, Columns the two-phase chunked column sums, General
  /// a thread per output walking its reduced indices. Memory: the input read
  /// once, the output written once.
  std::string reduction(const ReductionKernel &r) override {
    mlir::Type el = r.element;
    bool isFloat = isa<mlir::FloatType>(el);
    bool max = r.kind == ReductionKernel::Max;
    std::string T = cType(el), acc = isFloat ? "double" : "int64_t";
    std::string init = max ? (isFloat ? "-mlc_inf<double>()" : "(-9223372036854775807ll - 1)")
                           : "0";
    std::string finish = r.kind == ReductionKernel::Mean ? "a / " + n2s(r.count) : "a";
    std::string combine = max ? "a = a > x ? a : x;" : "a += x;";
    std::ostringstream body;
    body << arguments({{el, true}, {el, false}});
    if (r.shape == ReductionKernel::Rows) {
      body << "  __shared__ " << acc << " red[32];\n"
           << rowLoop(r.rows, r.length) << "      " << acc << " a = " << init << ";\n"
           << "      const " << T << " *x0 = p1 + r * " << r.length << ";\n"
           << "      for (int64_t j = threadIdx.x; j < " << r.length << "; j += blockDim.x) { "
           << acc << " x = x0[j]; " << combine << " }\n"
           << "      a = " << (max ? "mlc_block_max" : "mlc_block_sum") << "(a, red);\n"
           << "      if (threadIdx.x == 0) p0[r] = (" << T << ")(" << finish << ");\n    }\n  }\n";
    } else if (r.shape == ReductionKernel::Columns) {
      const int64_t C = r.length, block = 256, colBlocks = (C + block - 1) / block;
      const int64_t chunks = blocksFor(r.rows.count, 16, 64);
      body << scratch(chunks * C * 8) << phase(chunks * colBlocks, block)
           << "    " << acc << " *part = (" << acc << " *)ctx->scratch;\n"
           << "    const int64_t R = " << r.rows << ", chunk = blockIdx.x / " << colBlocks
           << ", c = (blockIdx.x % " << colBlocks << ") * " << block << " + threadIdx.x;\n"
           << "    const int64_t per = (R + " << chunks << " - 1) / " << chunks << ";\n"
           << "    if (c < " << C << ") {\n      " << acc << " a = 0;\n"
           << "      const int64_t r1 = (chunk + 1) * per < R ? (chunk + 1) * per : R;\n"
           << "      for (int64_t r = chunk * per; r < r1; ++r) a += p1[r * " << C << " + c];\n"
           << "      part[chunk * " << C << " + c] = a;\n    }\n  }\n"
           << phase(colBlocks, block) << "    const " << acc << " *part = (const " << acc
           << " *)ctx->scratch;\n    const int64_t c = MLC_TID;\n"
           << "    if (c < " << C << ") {\n      " << acc << " a = 0;\n"
           << "      for (int64_t q = 0; q < " << chunks << "; ++q) a += part[q * " << C
           << " + c];\n      p0[c] = (" << T << ")(" << finish << ");\n    }\n  }\n";
    } else {
      body << phase(blocksFor(r.outputs, 256, 4096), 256)
           << "    for (int64_t r = MLC_TID; r < " << r.outputs << "; r += MLC_STRIDE) {\n"
           << reductionOutput(r, acc, init, combine, finish, T, "      ") << "    }\n  }\n";
    }
    return body.str();
  }

  /// y[r, c] = table[ids[r], c], a thread per output element (an id out of
  /// range is reported and row 0 read). Memory: the ids, the selected rows
  /// of the table and y: 8 bytes per f32 element.
  std::string embedding(mlir::Type el, mlir::Type it, const Rows &rows, int64_t V,
                        int64_t E) override {
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {it, false}})
      << phase(blocksFor(rows.count * E, 256, 4096), 256)
      << "    const int64_t n = (int64_t)" << rows << " * " << E << ";\n"
      << "    for (int64_t i = MLC_TID; i < n; i += MLC_STRIDE) {\n"
      << "      const int64_t r = i / " << E << ", c = i % " << E << ";\n"
      << "      int64_t t = p2[r];\n"
      << "      if (t < 0 || t >= " << V << ") { if (c == 0) mlc_report(ctx, MLC_ERR_TOKEN_RANGE, r, t, "
      << V << "); t = 0; }\n"
      << "      p0[i] = p1[t * " << E << " + c];\n    }\n  }\n";
    return b.str();
  }

  /// dtable[ids[r], c] += dy[r, c]. Phase 0 zeroes the table; phase 1: block
  /// (vocabulary chunk, column block), a thread per column adding, in token
  /// order, the rows of the tokens whose id falls in its chunk: no two
  /// threads add to one element and no atomics, so the sums are
  /// reproducible. Memory: the table written twice (zeros, then sums), every
  /// chunk reads all ids and dy's rows of its tokens.
  std::string embeddingGrad(mlir::Type el, mlir::Type it, const Rows &rows, int64_t V,
                            int64_t E) override {
    const int64_t block = 256, colBlocks = (E + block - 1) / block;
    const int64_t chunks = std::min<int64_t>(V, 64), per = (V + chunks - 1) / chunks;
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {it, false}})
      << phase(blocksFor(V * E, 256 * 4, 4096), 256)
      << "    for (int64_t i = MLC_TID; i < " << V * E << "; i += MLC_STRIDE) p0[i] = 0;\n  }\n"
      << phase(chunks * colBlocks, block)
      << "    const int64_t v0 = (blockIdx.x / " << colBlocks << ") * " << per
      << ", c = (blockIdx.x % " << colBlocks << ") * " << block << " + threadIdx.x;\n"
      << "    const int64_t R = " << rows << ";\n"
      << "    if (c < " << E << ")\n"
      << "      for (int64_t r = 0; r < R; ++r) {\n"
      << "        const int64_t t = p2[r];\n"
      << "        if (t >= v0 && t < v0 + " << per << " && t < " << V << ") p0[t * " << E
      << " + c] += p1[r * " << E << " + c];\n      }\n  }\n";
    return b.str();
  }

  /// p0 = value (fill), the constant table (constant), or zero bytes (zero):
  /// grid-stride stores, one write per element.
  std::string fill(mlir::Type el, int64_t n, const std::string &value) override {
    return arguments({{el, true}}) + phase(blocksFor(n, 256, 4096), 256) +
           "    for (int64_t i = MLC_TID; i < " + n2s(n) + "; i += MLC_STRIDE) p0[i] = " + value +
           ";\n  }\n";
  }

  std::string constant(mlir::Type el, const std::vector<std::string> &values) override {
    std::ostringstream b;
    b << arguments({{el, true}}) << "  static const " << cType(el) << " data[" << values.size()
      << "] = {";
    for (size_t i = 0; i < values.size(); ++i)
      b << (i ? ", " : "") << values[i];
    b << "};\n"
      << phase(blocksFor(values.size(), 256, 4096), 256) << "    for (int64_t i = MLC_TID; i < "
      << values.size() << "; i += MLC_STRIDE) p0[i] = data[i];\n  }\n";
    return b.str();
  }

  std::string zero(int64_t bytes) override {
    return phase(blocksFor(bytes, 256 * 4, 4096), 256) + "    for (int64_t i = MLC_TID; i < " +
           n2s(bytes) + "; i += MLC_STRIDE) ((char *)b[0])[i] = 0;\n  }\n";
  }

private:

  /// A phase of one block per row (grid-stride over the rows), opened up to
  /// the row's body; the caller closes it with "    }\n  }\n".
  static std::string rowLoop(const Rows &rows, int64_t C) {
    return phase(rowGrid(rows.count), rowBlock(C)) + "    const int64_t R = " + rows.expr() +
           ";\n    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {\n";
  }

  /// The shared scratch of block-wide log-sum-exps (and sums, in reds).
  static std::string lseShared(mlir::Type el) {
    return "  __shared__ " + cType(el) + " redm[32];\n  __shared__ double reds[32];\n";
  }

  /// m and s (the row's max and sum exp(x - m), one pass) of row `x`.
  static std::string rowLse(mlir::Type el, const std::string &x, int64_t C) {
    std::string T = cType(el);
    return "      " + T + " m = -mlc_inf<" + T + ">();\n      double s = 0;\n" +
           "      for (int64_t c = threadIdx.x; c < " + n2s(C) +
           "; c += blockDim.x) mlc_lse_add(m, s, " + x + "[c]);\n" +
           "      mlc_block_lse(m, s, redm, reds);\n";
  }

  /// mean and rstd of the row whose element c is `x` (two passes, in double;
  /// rsqrt, because a double division's slow path spills a register).
  static std::string rowMeanRstd(const std::string &x, int64_t E, const std::string &eps) {
    std::string n = n2s(E);
    return "      double mean = 0, var = 0;\n      for (int64_t c = threadIdx.x; c < " + n +
           "; c += blockDim.x) mean += (double)" + x + ";\n      mean = mlc_block_sum(mean, red) / " +
           n + ";\n      for (int64_t c = threadIdx.x; c < " + n +
           "; c += blockDim.x) { double d = (double)" + x + " - mean; var += d * d; }\n" +
           "      var = mlc_block_sum(var, red);\n" +
           "      const double rstd = rsqrt(var / " + n + " + " + eps + ");\n";
  }

  /// A one-block phase that sums `parts` partials from scratch in order
  /// into s, then runs `finish`.
  static std::string sumPartials(int64_t parts, const std::string &finish) {
    return phase(1, 256) + "    double s = 0;\n    for (int64_t q = threadIdx.x; q < " +
           n2s(parts) + "; q += blockDim.x) s += ((const double *)ctx->scratch)[q];\n" +
           "    s = mlc_block_sum(s, red);\n    if (threadIdx.x == 0) " + finish + "\n  }\n";
  }

  /// The cross-entropy gradient d = scale / n * (softmax(x) - onehot(label))
  /// over the n labelled rows (and the loss when `withLoss`): phase 0
  /// counts the labelled rows; phase 1 a block per row writes its gradient
  /// (and loss term); phase 2 sums the loss terms. Memory: the logits read
  /// twice (the second pass mostly from L2) and the gradient written once,
  /// over the logits when they are dead: 8 bytes per f32 logit (6 when the
  /// gradient is a bf16 copy).
  std::string crossEntropyGradient(mlir::Type el, mlir::Type lt, mlir::Type grad,
                                   const Rows &rows, int64_t C, int64_t ignore,
                                   const std::string &scale, bool withLoss) {
    std::string T = cType(el), TG = cType(grad);
    const int64_t cap = rows.count;
    const int d = withLoss ? 1 : 0, x = d + 1, l = d + 2;
    std::vector<KernelArg> slots;
    if (withLoss)
      slots.push_back({el, true});
    slots.insert(slots.end(), {{grad, true}, {el, false}, {lt, false}});
    if (!withLoss && scale.empty())
      slots.push_back({el, false});
    std::string pd = "p" + n2s(d), px = "p" + n2s(x), pl = "p" + n2s(l);
    std::ostringstream b;
    b << arguments(slots) << scratch((1 + cap) * 8) << lseShared(el)
      << "  double *count = (double *)ctx->scratch, *loss = count + 1;\n"
      << phase(1, 256) << "    const int64_t R = " << rows << ";\n    double n = 0;\n"
      << "    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) n += " << pl << "[r] != "
      << ignore << ";\n"
      << "    n = mlc_block_sum(n, reds);\n    if (threadIdx.x == 0) count[0] = n;\n  }\n"
      << rowLoop(rows, C) << "      const " << T << " *x = " << px << " + r * " << C << "; "
      << TG << " *d = " << pd << " + r * " << C << ";\n"
      << "      const double scale = count[0] ? (double)(" << (scale.empty() ? "p3[0]" : scale)
      << ") / count[0] : 0.0;\n"
      << "      const int64_t label = " << pl << "[r];\n"
      << "      if (label == " << ignore << " || label < 0 || label >= " << C << ") {\n"
      << "        for (int64_t c = threadIdx.x; c < " << C << "; c += blockDim.x) d[c] = 0;\n";
    if (withLoss)
      b << "        if (threadIdx.x == 0) { loss[r] = 0; if (label != " << ignore
        << ") mlc_report(ctx, MLC_ERR_LABEL_RANGE, r, label, " << C << "); }\n";
    b << "        continue;\n      }\n"
      << rowLse(el, "x", C) << "      const " << T << " xl = x[label];\n"
      << "      __syncthreads(); // every thread has read x[label] before d (maybe x) changes\n"
      << "      const double k = scale / s;\n"
      << "      for (int64_t c = threadIdx.x; c < " << C << "; c += blockDim.x)\n"
      << "        d[c] = (" << TG << ")(mlc_exp(x[c] - m) * k - (c == label ? scale : 0.0));\n";
    if (withLoss)
      b << "      if (threadIdx.x == 0) loss[r] = m + log(s) - xl;\n";
    b << "    }\n  }\n";
    if (withLoss)
      b << phase(1, 256) << "    const int64_t R = " << rows << ";\n    double total = 0;\n"
        << "    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) total += loss[r];\n"
        << "    total = mlc_block_sum(total, reds);\n"
        << "    if (threadIdx.x == 0) p0[0] = (" << T
        << ")(count[0] ? total / count[0] : 0.0);\n  }\n";
    return b.str();
  }
};

/// What the attention kernels spell alike: the query blocks of `rowsPer`
/// rows, the sequence lengths (varlen: L, the sequence's own), a tensor's
/// head base (batch bb or sequence start a, head h) and row stride.
struct AttentionNames {
  AttentionNames(const AttentionKernel &a, int64_t rowsPer) : a(a) {
    const int64_t maxLen = a.varlen ? a.tokenCapacity : std::max(a.seqQ, a.seqK);
    qTiles = (maxLen + rowsPer - 1) / rowsPer;
    SQ = a.varlen ? "L" : n2s(a.seqQ);
    SK = a.varlen ? "L" : n2s(a.seqK);
    scale = literal(a.scale, a.element);
  }
  /// Kernel argument i's pointer.
  static std::string arg(int i) { return "p" + std::to_string(i); }
  std::string headBase(int k) const {
    const AttentionKernel::Tensor &w = a.tensors[k];
    return arg(k) + " + " + n2s(w.offset) + (a.varlen ? " + a * " : " + bb * ") +
           n2s(w.batchStride) + " + h * " + n2s(w.headStride);
  }
  std::string rowStride(int k) const { return n2s(a.tensors[k].rowStride); }
  const AttentionKernel &a;
  int64_t qTiles;
  std::string SQ, SK;
  std::string scale; // the scores' scale, a literal of the element type
};

/// Attention on tensor cores (packages whose products are bf16): every
/// product a 16 x 8 x 16 bf16 mma with f32 accumulators; Q, K, V, P and dS
/// are rounded to bf16 for them, as bf16 autocast's attention does, while
/// the scale, mask, softmax, dropout and outputs stay f32. The forward pass
/// gives a warp 16 query rows (a block 64): key tiles of 32 are staged in
/// shared memory, S = Q K^T, the online softmax runs on the accumulators (a
/// row's values are spread over the four lanes of its group: its max and
/// sum are two shuffles), O += P V. The backward pass has the SIMT one's
/// three phases:
///   0. the forward pass again, for the row statistics m, l and D_i =
///      dO_i . O_i (to scratch);
///   1. a warp per 16 key rows: over the query tiles that see them, S^T =
///      K Q^T and dP^T = V dO^T, then dV += (P keep)^T dO and dK += dS^T Q;
///   2. a warp per 16 query rows: S = Q K^T, dP = dO V^T, dQ += dS K.
/// A streamed tile is staged as bf16 pairs along its rows (B operands read
/// along the head dimension) and, where needed, transposed: pairs along the
/// tile (B operands read along it). Rows are padded against bank conflicts.
std::string CudaTarget::attentionTensorCores(const AttentionKernel &a) {
  const mlir::Type el = a.element;
  const bool varlen = a.varlen, causal = a.causal, mask = a.mask;
  const int64_t H = a.heads, D = a.headDim, Dv = a.valueDim, B = a.batch;
  const int qi = a.query;
  const int64_t rowsPer = 64, tile = 32, W = std::max(D, Dv);
  const AttentionNames names(a, rowsPer);
  const int64_t qTiles = names.qTiles;
  const std::string &SQ = names.SQ, &SK = names.SK;
  const std::string rowIndex = varlen ? "(h * " + n2s(a.tokenCapacity) + " + a + (i))"
                                      : "(bh * " + n2s(a.seqQ) + " + (i))";
  const int64_t statRows = varlen ? H * a.tokenCapacity : B * H * a.seqQ;
  const int64_t rowWords = W / 2 + 4, colWords = tile / 2 + 4;
  // The block's head and first row (`first`), as in the forward pass.
  auto blockHead = [&](const std::string &first, const std::string &limit) {
    std::string h = "    const int64_t bh = blockIdx.x / " + n2s(qTiles) + ", " + first +
                    " = (blockIdx.x % " + n2s(qTiles) + ") * " + n2s(rowsPer) + ";\n" +
                    "    const int64_t bb = bh / " + n2s(H) + ", h = bh % " + n2s(H) + ";\n";
    if (varlen)
      h += "    const int64_t a = " + names.arg(a.cuSlot) + "[bb], L = " + names.arg(a.cuSlot) +
           "[bb + 1] - a;\n";
    h += "    if (" + first + " >= " + limit + ") return;\n" +
         "    const float *qh = " + names.headBase(qi) + ", *kh = " + names.headBase(qi + 1) +
         ", *vh = " + names.headBase(qi + 2) + ";\n" +
         (a.backward ? "    const float *gh = " + names.headBase(3) + ";\n" : std::string()) +
         "    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;\n" +
         "    const int64_t r0 = " + first + " + (threadIdx.x >> 5) * 16 + g, r1 = r0 + 8;\n";
    return h;
  };
  // A fragments of the warp's 16 rows of `base` (width `w`, rows below
  // `limit`), one per 16 columns.
  auto aFrags = [&](const std::string &name, const std::string &base, const std::string &stride,
                    int64_t w, const std::string &limit) {
    return "    uint32_t " + name + "[" + n2s(w / 16) + "][4];\n" +
           "    for (int ks = 0; ks < " + n2s(w / 16) + "; ++ks)\n" +
           "      for (int f = 0; f < 4; ++f) {\n" +
           "        const int64_t r = f & 1 ? r1 : r0, c = ks * 16 + (f >> 1) * 8 + 2 * t4;\n" +
           "        " + name + "[ks][f] = r < " + limit + " ? mlc_pack_bf16(" + base + "[r * " +
           stride + " + c], " + base + "[r * " + stride + " + c + 1]) : 0u;\n      }\n";
  };
  // Tile rows [r, r + 32) of `base` into `dst` as pairs along the row, and
  // into `dstT` transposed, pairs along the tile (either may be empty).
  auto stage = [&](const std::string &dst, const std::string &dstT, const std::string &base,
                   const std::string &stride, int64_t w, const std::string &r,
                   const std::string &limit) {
    std::string c;
    if (!dst.empty())
      c += "      for (int e = threadIdx.x; e < " + n2s(tile * w / 2) + "; e += blockDim.x) {\n" +
           "        const int tr = e / " + n2s(w / 2) + ", cp = e % " + n2s(w / 2) + ";\n" +
           "        const int64_t x = " + r + " + tr;\n" +
           "        " + dst + "[tr][cp] = x < " + limit + " ? mlc_pack_bf16(" + base + "[x * " +
           stride + " + 2 * cp], " + base + "[x * " + stride + " + 2 * cp + 1]) : 0u;\n      }\n";
    if (!dstT.empty())
      c += "      for (int e = threadIdx.x; e < " + n2s(tile / 2 * w) + "; e += blockDim.x) {\n" +
           "        const int kp = e / " + n2s(w) + ", col = e % " + n2s(w) + ";\n" +
           "        const int64_t x = " + r + " + 2 * kp;\n" +
           "        " + dstT + "[col][kp] = mlc_pack_bf16(x < " + limit + " ? " + base + "[x * " +
           stride + " + col] : 0.0f, x + 1 < " + limit + " ? " + base + "[(x + 1) * " + stride +
           " + col] : 0.0f);\n      }\n";
    return c;
  };
  // acc[n] += A B over `steps` k-steps for n-tiles [0, n): B from rows of
  // `src` (pairs along the row: src[n * 8 + g][ks * 8 + t4]).
  auto product = [&](const std::string &acc, int64_t n, const std::string &aName,
                     int64_t steps, const std::string &src) {
    return "      for (int n = 0; n < " + n2s(n) + "; ++n)\n" +
           std::string("        for (int ks = 0; ks < ") + n2s(steps) + "; ++ks) {\n" +
           "          const uint32_t bf[2] = {" + src + "[n * 8 + g][ks * 8 + t4], " + src +
           "[n * 8 + g][ks * 8 + 4 + t4]};\n" + "          mlc_mma_bf16(" + acc + "[n], " +
           aName + "[ks], bf);\n        }\n";
  };
  // acc[n] += X B where X (16 x 32) is the f32 tile `x` held as
  // accumulators (4 n-tiles), rounded to A fragments two n-tiles at a time.
  auto productOfTile = [&](const std::string &acc, int64_t n, const std::string &x,
                           const std::string &src) {
    return std::string("      for (int kk = 0; kk < 2; ++kk) {\n") +
           "        const uint32_t xa[4] = {mlc_pack_bf16(" + x + "[2 * kk][0], " + x +
           "[2 * kk][1]), mlc_pack_bf16(" + x + "[2 * kk][2], " + x + "[2 * kk][3]),\n" +
           "                                mlc_pack_bf16(" + x + "[2 * kk + 1][0], " + x +
           "[2 * kk + 1][1]), mlc_pack_bf16(" + x + "[2 * kk + 1][2], " + x +
           "[2 * kk + 1][3])};\n" + "        for (int n = 0; n < " + n2s(n) + "; ++n) {\n" +
           "          const uint32_t bf[2] = {" + src + "[n * 8 + g][kk * 8 + t4], " + src +
           "[n * 8 + g][kk * 8 + 4 + t4]};\n" + "          mlc_mma_bf16(" + acc +
           "[n], xa, bf);\n        }\n      }\n";
  };
  auto zero = [](const std::string &acc, int64_t n) {
    return "    float " + acc + "[" + n2s(n) + "][4];\n    for (int n = 0; n < " + n2s(n) +
           "; ++n) " + acc + "[n][0] = " + acc + "[n][1] = " + acc + "[n][2] = " + acc +
           "[n][3] = 0;\n";
  };
  // The score of element f of n-tile n: query i, key j, -inf where masked.
  auto score = [&](const std::string &var, const std::string &from) {
    std::string c = "          float " + var + " = " + from + " * " + names.scale + ";\n" +
                    "          const bool ok = i < " + SQ + " && j < " + SK +
                    (causal ? " && j <= i" : "") + ";\n";
    if (mask)
      c += "          if (ok) " + var + " += " + names.arg(qi + 3) + "[bb * " + n2s(a.maskStrides[0]) +
           " + h * " + n2s(a.maskStrides[1]) + " + i * " + n2s(a.maskStrides[2]) + " + j * " +
           n2s(a.maskStrides[3]) + "];\n";
    c += "          if (!ok) " + var + " = -mlc_inf<float>();\n";
    return c;
  };
  std::string keep = "1.0f";
  if (a.dropout > 0) {
    std::string rowKey = varlen ? "((uint64_t)h * " + n2s(a.tokenCapacity) + " + a + i) * " +
                                      n2s(a.tokenCapacity) + " + a"
                                : "(uint64_t)(bh * " + n2s(a.seqQ) + " + i) * " + n2s(a.seqK);
    keep = "(mlc_uniform(key, " + rowKey + " + j) >= " + std::to_string(a.dropout) + " ? " +
           literal(1.0 / (1.0 - a.dropout), el) + " : 0.0f)";
  }
  const std::string causalEnd =
      causal ? "(i0 + " + n2s(rowsPer) + " < " + SK + " ? i0 + " + n2s(rowsPer) + " : " + SK + ")"
             : SK;

  std::ostringstream b;
  b << arguments(a.args);
  if (a.dropout > 0)
    b << "  const uint64_t key = mlc_key(" << a.seed << "ull, (uint64_t)ctx->step);\n";
  if (a.backward)
    b << scratch(statRows * 3 * 8) << "  double *stat = (double *)ctx->scratch;\n"
      << "  __shared__ uint32_t rowsA[" << tile << "][" << rowWords << "], rowsB[" << tile
      << "][" << rowWords << "];\n"
      << "  __shared__ uint32_t colsA[" << W << "][" << colWords << "], colsB[" << W << "]["
      << colWords << "];\n"
      << "  __shared__ float sm[" << tile << "], sl[" << tile << "], sd[" << tile << "];\n";
  else
    b << "  __shared__ uint32_t rowsA[" << tile << "][" << rowWords << "], colsA[" << W << "]["
      << colWords << "];\n";

  // The forward pass (backward: phase 0, its statistics and D_i).
  b << phase(B * H * qTiles, 128) << blockHead("i0", SQ)
    << aFrags("qa", "qh", names.rowStride(qi), D, SQ) << zero("o", Dv / 8)
    << "    float m[2] = {-mlc_inf<float>(), -mlc_inf<float>()}, l[2] = {0, 0};\n"
    << "    const int64_t jEnd = " << causalEnd << ";\n"
    << "    for (int64_t j0 = 0; j0 < jEnd; j0 += " << tile << ") {\n"
    << "      __syncthreads();\n"
    << stage("rowsA", "", "kh", names.rowStride(qi + 1), D, "j0", SK)
    << stage("", "colsA", "vh", names.rowStride(qi + 2), Dv, "j0", SK) << "      __syncthreads();\n"
    << "      float sv[4][4];\n"
    << "      for (int n = 0; n < 4; ++n) sv[n][0] = sv[n][1] = sv[n][2] = sv[n][3] = 0;\n"
    << product("sv", 4, "qa", D / 16, "rowsA")
    << "      float tm[2] = {-mlc_inf<float>(), -mlc_inf<float>()};\n"
    << "      for (int n = 0; n < 4; ++n)\n"
    << "        for (int f = 0; f < 4; ++f) {\n"
    << "          const int64_t i = f < 2 ? r0 : r1, j = j0 + n * 8 + 2 * t4 + (f & 1);\n"
    << score("s", "sv[n][f]") << "          sv[n][f] = s;\n"
    << "          tm[f >> 1] = s > tm[f >> 1] ? s : tm[f >> 1];\n        }\n"
    << "      float f2[2];\n"
    << "      for (int r = 0; r < 2; ++r) {\n"
    << "        tm[r] = fmaxf(tm[r], __shfl_xor_sync(0xffffffffu, tm[r], 1));\n"
    << "        tm[r] = fmaxf(tm[r], __shfl_xor_sync(0xffffffffu, tm[r], 2));\n"
    << "        const float mn = tm[r] > m[r] ? tm[r] : m[r];\n"
    << "        f2[r] = mn == -mlc_inf<float>() ? 1.0f : mlc_exp(m[r] - mn);\n"
    << "        l[r] *= f2[r];\n        m[r] = mn;\n      }\n"
    << "      for (int n = 0; n < " << Dv / 8 << "; ++n) {\n"
    << "        o[n][0] *= f2[0]; o[n][1] *= f2[0]; o[n][2] *= f2[1]; o[n][3] *= f2[1];\n      }\n"
    << "      float w[4][4];\n"
    << "      for (int n = 0; n < 4; ++n)\n"
    << "        for (int f = 0; f < 4; ++f) {\n"
    << (a.dropout > 0 ? "          const int64_t i = f < 2 ? r0 : r1, j = j0 + n * 8 + 2 * t4 + (f & 1);\n"
                      : "")
    << "          const float e = sv[n][f] == -mlc_inf<float>() ? 0.0f : mlc_exp(sv[n][f] - m[f >> 1]);\n"
    << "          l[f >> 1] += e;\n"
    << "          w[n][f] = e * " << keep << ";\n        }\n"
    << productOfTile("o", Dv / 8, "w", "colsA") << "    }\n"
    << "    for (int r = 0; r < 2; ++r) {\n"
    << "      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);\n"
    << "      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);\n    }\n";
  if (!a.backward) {
    b << "    float *oh = " << names.headBase(0) << ";\n"
      << "    for (int n = 0; n < " << Dv / 8 << "; ++n)\n"
      << "      for (int f = 0; f < 4; ++f) {\n"
      << "        const int64_t i = f < 2 ? r0 : r1;\n"
      << "        if (i < " << SQ << ") oh[i * " << names.rowStride(0)
      << " + n * 8 + 2 * t4 + (f & 1)] = o[n][f] / l[f >> 1];\n      }\n  }\n";
    return b.str();
  }
  b << "    float di[2] = {0, 0};\n"
    << "    for (int n = 0; n < " << Dv / 8 << "; ++n)\n"
    << "      for (int f = 0; f < 4; ++f) {\n"
    << "        const int64_t i = f < 2 ? r0 : r1;\n"
    << "        if (i < " << SQ << ") di[f >> 1] += gh[i * " << names.rowStride(3)
    << " + n * 8 + 2 * t4 + (f & 1)] * o[n][f];\n      }\n"
    << "    for (int r = 0; r < 2; ++r) {\n"
    << "      di[r] += __shfl_xor_sync(0xffffffffu, di[r], 1);\n"
    << "      di[r] += __shfl_xor_sync(0xffffffffu, di[r], 2);\n"
    << "      const int64_t i = r ? r1 : r0;\n"
    << "      if (t4 == 0 && i < " << SQ << ") {\n"
    << "        stat[3 * " << rowIndex << "] = m[r];\n"
    << "        stat[3 * " << rowIndex << " + 1] = l[r];\n"
    << "        stat[3 * " << rowIndex << " + 2] = di[r] / l[r];\n      }\n    }\n  }\n";

  // P and dS of element f of n-tile n from the statistics of query i
  // (in shared memory at `st`), its scaled score s and dp = dO_i . v_j.
  auto grads = [&](const std::string &m, const std::string &l, const std::string &d) {
    return "          const float pr = s == -mlc_inf<float>() ? 0.0f : mlc_exp(s - " + m +
           ") / " + l + ";\n" + "          const float kp = " + keep + ";\n" +
           "          pw[n][f] = pr * kp;\n" + "          ds[n][f] = pr * (dp[n][f] * kp - " + d +
           ") * " + names.scale + ";\n";
  };
  // Phase 1: dK and dV, a warp per 16 key rows.
  b << phase(B * H * qTiles, 128) << blockHead("j0", SK)
    << "    float *dk = " << names.headBase(1) << ", *dv = " << names.headBase(2) << ";\n"
    << aFrags("ka", "kh", names.rowStride(qi + 1), D, SK) << aFrags("va", "vh", names.rowStride(qi + 2), Dv, SK)
    << zero("gk", D / 8) << zero("gv", Dv / 8)
    << "    for (int64_t i0 = " << (causal ? "j0" : "0") << "; i0 < " << SQ << "; i0 += " << tile
    << ") {\n"
    << "      __syncthreads();\n"
    << stage("rowsA", "colsA", "qh", names.rowStride(qi), D, "i0", SQ)
    << stage("rowsB", "colsB", "gh", names.rowStride(3), Dv, "i0", SQ)
    << "      for (int e = threadIdx.x; e < " << tile << "; e += blockDim.x) {\n"
    << "        const int64_t i = i0 + e;\n"
    << "        const double *st = stat + 3 * " << rowIndex << ";\n"
    << "        sm[e] = i < " << SQ << " ? (float)st[0] : 0.0f;\n"
    << "        sl[e] = i < " << SQ << " ? (float)st[1] : 1.0f;\n"
    << "        sd[e] = i < " << SQ << " ? (float)st[2] : 0.0f;\n      }\n"
    << "      __syncthreads();\n"
    << "      float sv[4][4], dp[4][4], pw[4][4], ds[4][4];\n"
    << "      for (int n = 0; n < 4; ++n)\n"
    << "        for (int f = 0; f < 4; ++f) sv[n][f] = dp[n][f] = 0;\n"
    << product("sv", 4, "ka", D / 16, "rowsA") << product("dp", 4, "va", Dv / 16, "rowsB")
    << "      for (int n = 0; n < 4; ++n)\n"
    << "        for (int f = 0; f < 4; ++f) {\n"
    << "          const int q = n * 8 + 2 * t4 + (f & 1);\n"
    << "          const int64_t j = f < 2 ? r0 : r1, i = i0 + q;\n"
    << score("s", "sv[n][f]") << grads("sm[q]", "sl[q]", "sd[q]") << "        }\n"
    << productOfTile("gv", Dv / 8, "pw", "colsB") << productOfTile("gk", D / 8, "ds", "colsA")
    << "    }\n"
    << "    for (int f = 0; f < 4; ++f) {\n"
    << "      const int64_t j = f < 2 ? r0 : r1;\n"
    << "      if (j >= " << SK << ") continue;\n"
    << "      for (int n = 0; n < " << D / 8 << "; ++n) dk[j * " << names.rowStride(1)
    << " + n * 8 + 2 * t4 + (f & 1)] = gk[n][f];\n"
    << "      for (int n = 0; n < " << Dv / 8 << "; ++n) dv[j * " << names.rowStride(2)
    << " + n * 8 + 2 * t4 + (f & 1)] = gv[n][f];\n"
    << "    }\n  }\n";

  // Phase 2: dQ, a warp per 16 query rows.
  b << phase(B * H * qTiles, 128) << blockHead("i0", SQ)
    << "    float *dq = " << names.headBase(0) << ";\n"
    << aFrags("qa", "qh", names.rowStride(qi), D, SQ) << aFrags("ga", "gh", names.rowStride(3), Dv, SQ)
    << zero("gq", D / 8)
    << "    float rm[2], rl[2], rd[2];\n"
    << "    for (int r = 0; r < 2; ++r) {\n"
    << "      const int64_t i = r ? r1 : r0;\n"
    << "      const double *st = stat + 3 * " << rowIndex << ";\n"
    << "      rm[r] = i < " << SQ << " ? (float)st[0] : 0.0f;\n"
    << "      rl[r] = i < " << SQ << " ? (float)st[1] : 1.0f;\n"
    << "      rd[r] = i < " << SQ << " ? (float)st[2] : 0.0f;\n    }\n"
    << "    const int64_t jEnd = " << causalEnd << ";\n"
    << "    for (int64_t j0 = 0; j0 < jEnd; j0 += " << tile << ") {\n"
    << "      __syncthreads();\n"
    << stage("rowsA", "colsA", "kh", names.rowStride(qi + 1), D, "j0", SK)
    << stage("rowsB", "", "vh", names.rowStride(qi + 2), Dv, "j0", SK) << "      __syncthreads();\n"
    << "      float sv[4][4], dp[4][4], pw[4][4], ds[4][4];\n"
    << "      for (int n = 0; n < 4; ++n)\n"
    << "        for (int f = 0; f < 4; ++f) sv[n][f] = dp[n][f] = 0;\n"
    << product("sv", 4, "qa", D / 16, "rowsA") << product("dp", 4, "ga", Dv / 16, "rowsB")
    << "      for (int n = 0; n < 4; ++n)\n"
    << "        for (int f = 0; f < 4; ++f) {\n"
    << "          const int64_t i = f < 2 ? r0 : r1, j = j0 + n * 8 + 2 * t4 + (f & 1);\n"
    << score("s", "sv[n][f]")
    << grads("rm[f >> 1]", "rl[f >> 1]", "rd[f >> 1]") << "        }\n"
    << "      (void)pw;\n"
    << productOfTile("gq", D / 8, "ds", "colsA") << "    }\n"
    << "    for (int f = 0; f < 4; ++f) {\n"
    << "      const int64_t i = f < 2 ? r0 : r1;\n"
    << "      if (i >= " << SQ << ") continue;\n"
    << "      for (int n = 0; n < " << D / 8 << "; ++n) dq[i * " << names.rowStride(0)
    << " + n * 8 + 2 * t4 + (f & 1)] = gq[n][f];\n"
    << "    }\n  }\n";
  return b.str();
}

/// Attention without the S x S matrix. Tensor k's head (bb, h) starts at
/// names.headBase(k); its rows are rowStride(k) apart (padded: query/key index;
/// varlen: the token a + i). A thread owns a query row (forward, dQ) or a
/// key row (dK, dV); the other side streams through shared memory in tiles.
/// The dropout mask of probability (i, j) is the CPU's, bit for bit.
std::string CudaTarget::attention(const AttentionKernel &a) {
  const mlir::Type el = a.element;
  // Tensor cores: D a multiple of 16 (products over the head dimension);
  // the backward pass also takes products over Dv.
  if (a.bf16Products && el.isF32() && a.headDim % 16 == 0 && a.headDim <= 256 &&
      a.valueDim <= 256 && a.valueDim % (a.backward ? 16 : 8) == 0)
    return attentionTensorCores(a);
  const std::string T = cType(el);
  const bool varlen = a.varlen, causal = a.causal, mask = a.mask;
  const int64_t H = a.heads, D = a.headDim, Dv = a.valueDim, B = a.batch;
  const int qi = a.query;
  const int64_t bytes = dtypeBytes(el);
  // Rows per block, and the rows of the other side per shared tile, so that
  // the tiles stay within 40 KB of shared memory. The backward pass also
  // keeps the block's own rows there (padded against bank conflicts).
  int64_t rowsPer = 64, tile = 32;
  const int64_t own = a.backward ? D + Dv + 2 : 0;
  while (rowsPer > 16 && rowsPer * own * bytes + tile * (D + Dv) * bytes > 40 * 1024)
    rowsPer /= 2;
  while (tile > 4 && rowsPer * own * bytes + tile * (D + Dv) * bytes > 40 * 1024)
    tile /= 2;
  const AttentionNames names(a, rowsPer);
  const int64_t qTiles = names.qTiles;
  const std::string &SQ = names.SQ, &SK = names.SK;
  // The block's (bb, h) and first row; L and a for varlen.
  auto blockHead = [&](const std::string &first) {
    std::string s = "    const int64_t bh = blockIdx.x / " + n2s(qTiles) + ", " + first +
                    " = (blockIdx.x % " + n2s(qTiles) + ") * " + n2s(rowsPer) + ";\n" +
                    "    const int64_t bb = bh / " + n2s(H) + ", h = bh % " + n2s(H) + ";\n";
    if (varlen)
      s += "    const int64_t a = " + names.arg(a.cuSlot) + "[bb], L = " + names.arg(a.cuSlot) +
           "[bb + 1] - a;\n";
    s += "    if (" + first + " >= " + (varlen ? std::string("L") : first == "i0" ? SQ : SK) +
         ") return;\n";
    s += "    const " + T + " *qh = " + names.headBase(qi) + ";\n    const " + T + " *kh = " +
         names.headBase(qi + 1) + ";\n    const " + T + " *vh = " + names.headBase(qi + 2) + ";\n";
    return s;
  };
  // s_ij += mask; keep(i, j): the dropout factor.
  std::string maskAdd =
      mask ? "          s += " + names.arg(qi + 3) + "[bb * " + n2s(a.maskStrides[0]) + " + h * " +
                 n2s(a.maskStrides[1]) + " + i * " + n2s(a.maskStrides[2]) + " + j * " +
                 n2s(a.maskStrides[3]) + "];\n"
           : "";
  std::string rowKey, keep = "(" + T + ")1";
  if (a.dropout > 0) {
    rowKey = varlen ? "((uint64_t)h * " + n2s(a.tokenCapacity) + " + a + i) * " +
                          n2s(a.tokenCapacity) + " + a"
                    : "(uint64_t)(bh * " + n2s(a.seqQ) + " + i) * " + n2s(a.seqK);
    keep = "(mlc_uniform(key, " + rowKey + " + j) >= " + std::to_string(a.dropout) + " ? " +
           literal(1.0 / (1.0 - a.dropout), el) + " : (" + T + ")0)";
  }
  // Loads rows [r0, r0 + n) of tensor `k` (width W) into shared tile `dst`.
  auto loadTile = [&](const std::string &dst, const std::string &base, int k, int64_t W,
                      const std::string &r0, const std::string &limit, int64_t n) {
    return "      for (int64_t e = threadIdx.x; e < " + n2s(n * W) + "; e += blockDim.x) {\n" +
           "        const int64_t t = e / " + n2s(W) + ", c = e % " + n2s(W) + ";\n" +
           "        " + dst + "[t][c] = " + r0 + " + t < " + limit + " ? " + base + "[(" + r0 +
           " + t) * " + names.rowStride(k) + " + c] : (" + T + ")0;\n      }\n";
  };
  const std::string jn = causal ? "(i + 1 < " + SK + " ? i + 1 : " + SK + ")" : SK;
  // A thread's query row i: q (pre-scaled) and the output accumulator in
  // registers, the running max m and sum l of the online softmax.
  auto queryRow = [&] {
    return "    const int64_t i = i0 + threadIdx.x;\n    const bool active = i < " + SQ + ";\n" +
           "    " + T + " q[" + n2s(D) + "], acc[" + n2s(Dv) + "];\n" + "    for (int c = 0; c < " +
           n2s(D) + "; ++c) q[c] = active ? qh[i * " + names.rowStride(qi) + " + c] * " + names.scale + " : (" + T +
           ")0;\n" + "    for (int c = 0; c < " + n2s(Dv) + "; ++c) acc[c] = 0;\n" + "    " + T +
           " m = -mlc_inf<" + T + ">();\n    double l = 0;\n";
  };
  // The loop over the key tiles the block's query rows see (causal: up to
  // its last row), each staged in ks and vs; row i takes keys below jn.
  auto keyTiles = [&] {
    return "    const int64_t jEnd = " +
           (causal ? "(i0 + " + n2s(rowsPer) + " < " + SK + " ? i0 + " + n2s(rowsPer) + " : " + SK + ")"
                   : SK) +
           ";\n    const int64_t jn = active ? " + jn + " : 0;\n" +
           "    for (int64_t j0 = 0; j0 < jEnd; j0 += " + n2s(tile) + ") {\n" +
           "      __syncthreads();\n" + loadTile("ks", "kh", qi + 1, D, "j0", SK, tile) +
           loadTile("vs", "vh", qi + 2, Dv, "j0", SK, tile) + "      __syncthreads();\n";
  };
  std::ostringstream b;
  b << arguments(a.args);
  if (a.dropout > 0)
    b << "  const uint64_t key = mlc_key(" << a.seed << "ull, (uint64_t)ctx->step);\n";
  if (!a.backward) {
    // A thread per query row: q (pre-scaled) and the output accumulator in
    // registers; per key tile, the scores, their max, one rescale, then
    // the weighted values.
    b << "  __shared__ " << T << " ks[" << tile << "][" << D << "], vs[" << tile << "][" << Dv
      << "];\n"
      << phase(B * H * qTiles, rowsPer) << blockHead("i0") << "    " << T << " *oh = " << names.headBase(0) << ";\n"
      << queryRow()
      << keyTiles()
      << "      " << T << " sv[" << tile << "];\n"
      << "      " << T << " tm = -mlc_inf<" << T << ">();\n"
      << "      for (int t = 0; t < " << tile << "; ++t) {\n"
      << "        const int64_t j = j0 + t;\n"
      << "        " << T << " s = -mlc_inf<" << T << ">();\n"
      << "        if (j < jn) {\n          s = 0;\n"
      << "          for (int c = 0; c < " << D << "; ++c) s += q[c] * ks[t][c];\n"
      << maskAdd << "        }\n"
      << "        sv[t] = s;\n        tm = s > tm ? s : tm;\n      }\n"
      << "      if (tm == -mlc_inf<" << T << ">()) continue;\n"
      << "      if (tm > m) {\n        const " << T << " f = mlc_exp(m - tm);\n"
      << "        l *= f;\n        for (int c = 0; c < " << Dv << "; ++c) acc[c] *= f;\n"
      << "        m = tm;\n      }\n"
      << "      for (int t = 0; t < " << tile << "; ++t) {\n"
      << "        const int64_t j = j0 + t;\n"
      << "        if (j >= jn) continue;\n"
      << "        const " << T << " e = mlc_exp(sv[t] - m);\n        l += e;\n"
      << "        const " << T << " w = e * " << keep << ";\n"
      << "        for (int c = 0; c < " << Dv << "; ++c) acc[c] += w * vs[t][c];\n      }\n"
      << "    }\n"
      << "    if (active) {\n      const " << T << " inv = (" << T << ")(1.0 / l);\n"
      << "      for (int c = 0; c < " << Dv << "; ++c) oh[i * " << names.rowStride(0) << " + c] = acc[c] * inv;\n"
      << "    }\n  }\n";
    return b.str();
  }

  // Backward. Row statistics per query (m, l, and Di = sum_j P_ij dP_ij =
  // dO_i . O_i) in scratch, indexed by (head, row).
  const std::string rowIndex =
      varlen ? "(h * " + n2s(a.tokenCapacity) + " + a + i)" : "(bh * " + n2s(a.seqQ) + " + i)";
  const int64_t statRows = varlen ? H * a.tokenCapacity : B * H * a.seqQ;
  const std::string rg = names.rowStride(3);
  // Shared memory is allocated for every __shared__ declaration of the
  // kernel at once, so the phases share two tiles of the streamed side
  // (keys and values, or queries and output gradients) and two blocks of
  // the rows the threads own.
  b << scratch(statRows * 3 * 8) << "  double *stat = (double *)ctx->scratch;\n"
    << "  __shared__ " << T << " tileA[" << tile << "][" << D << "], tileB[" << tile << "][" << Dv
    << "];\n"
    << "  __shared__ " << T << " selfA[" << rowsPer << "][" << D + 1 << "], selfB[" << rowsPer
    << "][" << Dv + 1 << "];\n";
  // Phase 0: like the forward pass, also accumulating O, then Di = dO . O.
  b << phase(B * H * qTiles, rowsPer) << "    " << T << " (*ks)[" << D << "] = tileA;\n    "
    << T << " (*vs)[" << Dv << "] = tileB;\n"
    << blockHead("i0") << "    const " << T << " *gh = " << names.headBase(3) << ";\n"
    << queryRow()
    << keyTiles()
    << "      for (int t = 0; t < " << tile << "; ++t) {\n"
    << "        const int64_t j = j0 + t;\n        if (j >= jn) continue;\n"
    << "        " << T << " s = 0;\n"
    << "        for (int c = 0; c < " << D << "; ++c) s += q[c] * ks[t][c];\n"
    << maskAdd << "        if (s == -mlc_inf<" << T << ">()) continue;\n"
    << "        if (s > m) {\n          const " << T << " f = mlc_exp(m - s);\n"
    << "          l *= f;\n          for (int c = 0; c < " << Dv << "; ++c) acc[c] *= f;\n"
    << "          m = s;\n        }\n"
    << "        const " << T << " e = mlc_exp(s - m);\n        l += e;\n"
    << "        const " << T << " w = e * " << keep << ";\n"
    << "        for (int c = 0; c < " << Dv << "; ++c) acc[c] += w * vs[t][c];\n      }\n"
    << "    }\n"
    << "    if (active) {\n      double di = 0;\n"
    << "      for (int c = 0; c < " << Dv << "; ++c) di += (double)gh[i * " << rg
    << " + c] * acc[c];\n"
    << "      stat[3 * " << rowIndex << "] = m;\n      stat[3 * " << rowIndex << " + 1] = l;\n"
    << "      stat[3 * " << rowIndex << " + 2] = di / l;\n    }\n  }\n";
  // P_ij and dS_ij from the statistics, for the query row i and key row j
  // whose dot products `s` (scaled) and `dp` (dO_i . v_j) are known.
  auto grads = [&](const std::string &indent) {
    return indent + "const double* st = stat + 3 * " + rowIndex + ";\n" + indent + "const " + T +
           " pr = (" + T + ")(mlc_exp(s - (" + T + ")st[0]) / st[1]);\n" + indent + "const " +
           T + " kp = " + keep + ";\n" + indent + "const " + T + " ds = pr * (dp * kp - (" + T +
           ")st[2]) * " + names.scale + ";\n";
  };
  // Phase 1: a thread per key row j: dK_j = sum_i dS_ij q_i, dV_j = sum_i
  // P_ij keep_ij dO_i, over the query tiles that see j.
  b << phase(B * H * qTiles, rowsPer) << "    " << T << " (*qs)[" << D << "] = tileA;\n    "
    << T << " (*gs)[" << Dv << "] = tileB;\n    " << T << " (*kself)[" << D + 1
    << "] = selfA;\n    " << T << " (*vself)[" << Dv + 1 << "] = selfB;\n"
    << blockHead("j0") << "    const " << T << " *gh = " << names.headBase(3) << ";\n"
    << "    " << T << " *dk = " << names.headBase(1) << ", *dv = " << names.headBase(2) << ";\n"
    << "    const int64_t j = j0 + threadIdx.x;\n    const bool active = j < " << SK << ";\n"
    << "    for (int c = 0; c < " << D << "; ++c) kself[threadIdx.x][c] = active ? kh[j * "
    << names.rowStride(qi + 1) << " + c] : (" << T << ")0;\n"
    << "    for (int c = 0; c < " << Dv << "; ++c) vself[threadIdx.x][c] = active ? vh[j * "
    << names.rowStride(qi + 2) << " + c] : (" << T << ")0;\n"
    << "    " << T << " dkj[" << D << "], dvj[" << Dv << "];\n"
    << "    for (int c = 0; c < " << D << "; ++c) dkj[c] = 0;\n"
    << "    for (int c = 0; c < " << Dv << "; ++c) dvj[c] = 0;\n"
    << "    for (int64_t i0 = " << (causal ? "j0 / " + n2s(tile) + " * " + n2s(tile) : "0")
    << "; i0 < " << SQ << "; i0 += " << tile << ") {\n"
    << "      __syncthreads();\n"
    << loadTile("qs", "qh", qi, D, "i0", SQ, tile) << loadTile("gs", "gh", 3, Dv, "i0", SQ, tile)
    << "      __syncthreads();\n"
    << "      if (!active) continue;\n"
    << "      for (int t = 0; t < " << tile << "; ++t) {\n"
    << "        const int64_t i = i0 + t;\n"
    << "        if (i >= " << SQ << (causal ? " || j > i" : "") << ") continue;\n"
    << "        " << T << " s = 0, dp = 0;\n"
    << "        for (int c = 0; c < " << D << "; ++c) s += qs[t][c] * kself[threadIdx.x][c];\n"
    << "        s *= " << names.scale << ";\n"
    << "        for (int c = 0; c < " << Dv << "; ++c) dp += gs[t][c] * vself[threadIdx.x][c];\n"
    << maskAdd << grads("        ")
    << "        for (int c = 0; c < " << Dv << "; ++c) dvj[c] += pr * kp * gs[t][c];\n"
    << "        for (int c = 0; c < " << D << "; ++c) dkj[c] += ds * qs[t][c];\n"
    << "      }\n    }\n"
    << "    if (active) {\n"
    << "      for (int c = 0; c < " << D << "; ++c) dk[j * " << names.rowStride(1) << " + c] = dkj[c];\n"
    << "      for (int c = 0; c < " << Dv << "; ++c) dv[j * " << names.rowStride(2) << " + c] = dvj[c];\n"
    << "    }\n  }\n";
  // Phase 2: a thread per query row i: dQ_i = sum_j dS_ij k_j.
  b << phase(B * H * qTiles, rowsPer) << "    " << T << " (*ks)[" << D << "] = tileA;\n    "
    << T << " (*vs)[" << Dv << "] = tileB;\n    " << T << " (*qself)[" << D + 1
    << "] = selfA;\n    " << T << " (*gself)[" << Dv + 1 << "] = selfB;\n"
    << blockHead("i0") << "    const " << T << " *gh = " << names.headBase(3) << ";\n"
    << "    " << T << " *dq = " << names.headBase(0) << ";\n"
    << "    const int64_t i = i0 + threadIdx.x;\n    const bool active = i < " << SQ << ";\n"
    << "    for (int c = 0; c < " << D << "; ++c) qself[threadIdx.x][c] = active ? qh[i * "
    << names.rowStride(qi) << " + c] : (" << T << ")0;\n"
    << "    for (int c = 0; c < " << Dv << "; ++c) gself[threadIdx.x][c] = active ? gh[i * " << rg
    << " + c] : (" << T << ")0;\n"
    << "    " << T << " dqi[" << D << "];\n"
    << "    for (int c = 0; c < " << D << "; ++c) dqi[c] = 0;\n"
    << keyTiles()
    << "      for (int t = 0; t < " << tile << "; ++t) {\n"
    << "        const int64_t j = j0 + t;\n        if (j >= jn) continue;\n"
    << "        " << T << " s = 0, dp = 0;\n"
    << "        for (int c = 0; c < " << D << "; ++c) s += qself[threadIdx.x][c] * ks[t][c];\n"
    << "        s *= " << names.scale << ";\n"
    << "        for (int c = 0; c < " << Dv << "; ++c) dp += gself[threadIdx.x][c] * vs[t][c];\n"
    << maskAdd << grads("        ")
    << "        for (int c = 0; c < " << D << "; ++c) dqi[c] += ds * ks[t][c];\n"
    << "      }\n    }\n"
    << "    if (active)\n"
    << "      for (int c = 0; c < " << D << "; ++c) dq[i * " << names.rowStride(0) << " + c] = dqi[c];\n"
    << "  }\n";
  return b.str();
}

} // namespace

std::unique_ptr<KernelTarget> createCudaTarget(int64_t tokenCapacity) {
  return std::make_unique<CudaTarget>(tokenCapacity);
}

} // namespace mlc::lowering
