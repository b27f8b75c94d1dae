//===- CpuTarget.cpp - kernels as C++ with OpenMP ---------------------------===//
//
// The CPU kernel target: each kernel is an extern "C" function of the
// package's kernels.cpp, compiled by the host compiler. Loops are shared out
// among OpenMP threads (large ones only); inner loops are written so that
// the compiler vectorizes them; reductions are deterministic (per-thread
// partials combined in thread order).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/AttentionSource.h"
#include "compiler/codegen/KernelPrelude.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/RowCalls.h"

#include <sstream>

namespace mlc::lowering {

namespace {

/// The CPU target's words for scalar code: C++ with the prelude's
/// vectorizable exp and tanh for f32 (libm for f64, whose results the
/// gradient checks compare) and its counter-based dropout generator.
class CpuScalarEmitter final : public CScalarEmitter {
public:
  using CScalarEmitter::CScalarEmitter;
  std::string call(llvm::StringRef fn, Type el, llvm::ArrayRef<std::string> args) override {
    return apply(fn == "exp" ? expFn(el) : fn == "tanh" ? tanhFn(el) : "std::" + fn.str(), args);
  }
};

class CpuTarget final : public KernelTarget {
public:
  using KernelTarget::KernelTarget;
  std::string name() const override { return "cpu"; }

  std::unique_ptr<ScalarEmitter> scalarEmitter(const std::string &index,
                                              std::string &prologue) override {
    return std::make_unique<CpuScalarEmitter>(index, prologue);
  }

  std::string prelude() override { return kernelPrelude(); }

  std::string function(const std::string &name, const std::string &kind,
                       const std::string &body, int64_t args) override {
    return "\nextern \"C\" const int64_t " + name + "_args = " + std::to_string(args) +
           ";\nextern \"C\" const char " + name + "_kind[] = \"" + kind + "\"" +
           ";\nextern \"C\" void " + name + "(char **b, MlcKernelCtx *ctx) {\n  (void)ctx;\n" +
           body + "}\n";
  }

  std::string arguments(const std::vector<KernelArg> &args) override {
    return bindArguments(args);
  }

  std::string pointwiseNest(const PointwiseNest &nest, const std::string &body,
                            const std::string &) override {
    return pointwise(nest.dims, nest.accs, body, nest.dynamic);
  }

private:
  /// A loop nest over `shape`. Unit dimensions are dropped and dimensions
  /// that are contiguous for every access merge, so most nests are one or
  /// two loops; nests of 8192 elements or more are shared out among threads.
  /// Memory: each operand read once and each result written once (a fused
  /// group's intermediates never touch memory); broadcast operands stay in
  /// cache.
  std::string pointwise(const Shape &shape, const std::vector<Access> &accs,
                        const std::string &body, bool dynamic) {
    auto [dims, strides] = mergeDims(shape, accs);
    std::ostringstream os;
    int64_t total = product(dims);
    if (!dims.empty() && total >= 8192)
      os << "#pragma omp parallel for"
         << (dims.size() > 1 ? " collapse(" + std::to_string(dims.size() - 1) + ")"
                             : std::string())
         << "\n";
    // With a dynamic leading dimension (always kept, capacity >= 2), the
    // outermost loop, which holds it, runs over the actual rows.
    for (size_t d = 0; d < dims.size(); ++d)
      os << "for (int64_t i" << d << " = 0; i" << d << " < "
         << (d == 0 ? leadingRows(dims[0], dynamic).expr() : std::to_string(dims[d])) << "; ++i" << d
         << ")\n";
    os << "{\n" << accessOffsets(accs, strides, "  ") << body << "}\n";
    return os.str();
  }


public:

  std::string columnReduction(const Rows &rows, int64_t columns,
                              const std::string &offsets, const std::string &body, int slot,
                              const std::string &type) override {
    // Rows are shared out among threads; each thread sums its rows into its
    // own partial, and the partials are added in thread order, so results
    // do not depend on timing.
    std::string C = std::to_string(columns);
    std::ostringstream k;
    k << "  const int nt = omp_get_max_threads();\n"
      << "  std::vector<double> part((size_t)nt * " << C << ", 0.0);\n"
      << "#pragma omp parallel\n  {\n"
      << "    double *acc = part.data() + (size_t)omp_get_thread_num() * " << C << ";\n"
      << "#pragma omp for schedule(static)\n"
      << "    for (int64_t r = 0; r < " << rows << "; ++r)\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) {\n"
      << "      const int64_t flat = r * " << C << " + c;\n"
      << "      double &sum = acc[c];\n"
      << offsets << body << "    }\n  }\n"
      << "  for (int64_t c = 0; c < " << C << "; ++c) {\n"
      << "    double s = 0;\n"
      << "    for (int t = 0; t < nt; ++t) s += part[(size_t)t * " << C << " + c];\n"
      << "    p" << slot << "[c] = (" << type << ")s;\n  }\n";
    return k.str();
  }

  /// One parallel region for every segment: the segments are work-shared
  /// loops without barriers between them, so the update is a single pass
  /// over the flat buffers. Memory (AdamW): parameter, moments and gradient
  /// read, parameter and moments written: 28 bytes per f32 parameter.
  /// Under the distributed optimizer each segment is cut to the launch's
  /// windows (ctx->win: this rank's shards), whose moments are this rank's.
  std::string optimizer(mlir::Type el, const std::vector<Segment> &segments,
                        const std::string &setup, const std::string &body) override {
    std::string T = cType(el);
    std::ostringstream k;
    k << "  " << T << " *P = (" << T << " *)b[0];\n  " << T << " *M = (" << T
      << " *)b[1];\n  " << T << " *V = (" << T << " *)b[2];\n  const " << T
      << " *G = (const " << T << " *)b[3];\n  const double *h = (const double *)b[4];\n"
      << setup << segmentTable(segments, true)
      << "  const int64_t nw = ctx->nwin ? ctx->nwin : 1;\n"
      << "#pragma omp parallel\n" << segmentWindowLoops(segments.size(), "  ")
      << "    const int64_t off = lo, n = hi - lo, moff = wm + (lo - w0);\n"
      << "    const " << T << " x4 = seg[s][2] ? decayOn : (" << T << ")1;\n"
      << "    " << T << " *__restrict pp = P + off;\n    " << T
      << " *__restrict mm = M + moff;\n    " << T << " *__restrict vv = V + moff;\n    const "
      << T << " *__restrict gg = G + off;\n"
      << "#pragma omp for simd schedule(static) nowait\n"
      << "    for (int64_t i = 0; i < n; ++i) {\n"
      << body << "    }\n  }\n";
    return k.str();
  }

  /// The global gradient norm: reads every gradient once (4 bytes each).
  std::string norm(mlir::Type el, const std::vector<Segment> &segments,
                   const std::string &body, const std::string &value) override {
    std::string T = cType(el);
    std::ostringstream k;
    k << "  double *out = (double *)b[0];\n  const " << T << " *G = (const " << T
      << " *)b[1];\n"
      << segmentTable(segments, false) << "  double sum = 0;\n"
      << "  const int64_t nw = ctx->nwin ? ctx->nwin : 1;\n"
      << "#pragma omp parallel reduction(+ : sum)\n" << segmentWindowLoops(segments.size(), "  ")
      << "    const " << T << " *__restrict gg = G + lo;\n"
      << "    const int64_t n = hi - lo;\n"
      // Chunks of 4096 shared out, each summed by a vector reduction (a
      // scalar chain of double adds would be latency-bound, not memory-bound).
      << "    const int64_t chunks = (n + 4095) / 4096;\n"
      << "#pragma omp for schedule(static) nowait\n"
      << "    for (int64_t q = 0; q < chunks; ++q) {\n"
      << "      const int64_t i1 = (q + 1) * 4096 < n ? (q + 1) * 4096 : n;\n"
      << "      double part = 0;\n"
      << "#pragma omp simd reduction(+ : part)\n"
      << "      for (int64_t i = q * 4096; i < i1; ++i) {\n"
      << body << "        part += " << value << ";\n      }\n      sum += part;\n    }\n"
      << "  }\n  out[0] = std::sqrt(sum);\n";
    return k.str();
  }

  /// Softmax (log-softmax) and its gradient: one call each of mlc_softmax
  /// and mlc_softmax_grad (prelude/rows.h).
  std::string softmax(mlir::Type el, const Rows &rows, int64_t C, bool log) override {
    return arguments({{el, true}, {el, false}}) + "  mlc_softmax<" + cType(el) + ", " +
           std::to_string(C) + ", " + rowFlags({{log, "MLC_ROW_LOG"}}) + ">(p0, p1, " +
           rows.expr() + ");\n";
  }

  std::string softmaxGrad(mlir::Type el, const Rows &rows, int64_t C) override {
    return arguments({{el, true}, {el, false}, {el, false}}) + "  mlc_softmax_grad<" +
           cType(el) + ", " + std::to_string(C) + ">(p0, p1, p2, " + rows.expr() + ");\n";
  }

  /// LayerNorm and RMSNorm, forward, and their gradient: one call each of
  /// mlc_layer_norm and mlc_layer_norm_grad (prelude/rows.h).
  std::string layerNorm(mlir::Type el, const Rows &rows, int64_t E, const std::string &eps,
                        bool rms, bool unit) override {
    const RowCall c = layerNormCall(el, E, rms, unit);
    return arguments(c.args) + "  mlc_layer_norm<" + c.types + ">(" + c.pointers + ", " +
           rows.expr() + ", " + eps + ");\n";
  }

  std::string layerNormGrad(mlir::Type el, const Rows &rows, int64_t capacity, int64_t E,
                            const std::string &eps, bool rms, bool residual,
                            bool unit, mlir::Type copy, mlir::Type grad,
                            bool plusOne) override {
    const RowCall c = layerNormGradCall(el, E, rms, residual, unit, copy, grad, plusOne);
    return arguments(c.args) + "  mlc_layer_norm_grad<" + c.types + ">(" + c.pointers + ", " +
           rows.expr() + ", " + std::to_string(capacity) + ", " + eps + ");\n";
  }

  /// Cross-entropy, with its gradient, and the gradient alone: one call
  /// each of mlc_cross_entropy, mlc_cross_entropy_with_grad and
  /// mlc_cross_entropy_grad (prelude/rows.h); the scale is the incoming
  /// gradient (a constant, or p3[0]).
  std::string crossEntropyWithGrad(mlir::Type el, mlir::Type lt, mlir::Type grad,
                                   const Rows &rows, int64_t C, int64_t ignore,
                                   const std::string &scale) override {
    return arguments({{el, true}, {grad, true}, {el, false}, {lt, false}}) +
           "  mlc_cross_entropy_with_grad<" + cType(el) + ", " + cType(grad) + ", " +
           cType(lt) + ", " + std::to_string(C) + ", " + std::to_string(ignore) +
           ">(p0, p1, p2, p3, (double)(" + scale + "), " + rows.expr() + ", ctx);\n";
  }

  std::string crossEntropy(mlir::Type el, mlir::Type lt, const Rows &rows, int64_t C,
                           int64_t ignore) override {
    return arguments({{el, true}, {el, false}, {lt, false}}) + "  mlc_cross_entropy<" +
           cType(el) + ", " + cType(lt) + ", " + std::to_string(C) + ", " +
           std::to_string(ignore) + ">(p0, p1, p2, " + rows.expr() + ", ctx);\n";
  }

  std::string crossEntropyGrad(mlir::Type el, mlir::Type lt, const Rows &rows, int64_t C,
                               int64_t ignore, const std::string &scale) override {
    std::vector<KernelArg> slots{{el, true}, {el, false}, {lt, false}};
    if (scale.empty())
      slots.push_back({el, false});
    return arguments(slots) + "  mlc_cross_entropy_grad<" + cType(el) + ", " + cType(lt) + ", " +
           std::to_string(C) + ", " + std::to_string(ignore) + ">(p0, p1, p2, (double)(" +
           (scale.empty() ? "p3[0]" : scale) + "), " + rows.expr() + ");\n";
  }

  /// Each row's prologue is computed once into a row buffer (values needed
  /// elsewhere are stored on the way), then normalized from that buffer.
  std::string layerNormFusion(mlir::Type el, const Rows &rows, int64_t E,
                              const std::string &eps, const std::string &bases,
                              const std::string &offsets, const std::string &body,
                              const std::string &input, llvm::ArrayRef<int> slots,
                              const std::string &weight,
                              const std::string &bias, bool rms,
                              const std::string &residual) override {
    std::string T = cType(el);
    std::ostringstream k;
    k << "#pragma omp parallel for\n"
      << "  for (int64_t r = 0; r < " << rows << "; ++r) {\n"
      << bases << "    " << T << " row[" << E << "];\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) {\n"
      << offsets << body << "      row[c] = " << input << ";\n    }\n"
      << "    double mean, rstd;\n    mlc_row_mean_rstd<" << E << ", "
      << rowFlags({{rms, "MLC_ROW_RMS"}}) << ">(row, " << eps << ", mean, rstd);\n"
      << "    const " << T << " rs = (" << T
      << ")rstd" << (rms ? "" : ", mu = (" + T + ")mean") << ";\n"
      << "    for (int64_t c = 0; c < " << E << "; ++c) {\n"
      << offsets << "      const " << T << " y = "
      << (rms ? "(" + T + ")(row[c] * rs) * " + weight
              : "(row[c] - mu) * rs * " + weight + " + " + bias)
      << (residual.empty() ? "" : " + " + residual) << ";\n";
    for (int slot : slots)
      k << "      p" << slot << "[o" << slot << "] = y;\n";
    k << "    }\n  }\n";
    return k.str();
  }

  /// Attention, forward or backward, as one call of a template of
  /// prelude/attention.h (where its math and memory traffic are stated):
  /// per (batch, head), tiles of 64 query rows whose products are mlc_gemm's.
  /// The sizes and strides travel as an MlcAttention literal; the element
  /// type, the variant flags and the head dimensions D, DV are the
  /// template's arguments.
  std::string attention(const AttentionKernel &a) override {
    return arguments(a.args) + attentionSizes(a, 0) + attentionBuffers(a) + "  mlc_attention_" +
           (a.backward ? "backward<" : "forward<") + cType(a.element) + ", " +
           attentionFlags(a) + ", " + std::to_string(a.headDim) + ", " +
           std::to_string(a.valueDim) + ">(s, x, ctx);\n";
  }

  /// Sums, means and maxima over rows, columns or a general set of axes, in
  /// double (int64 for integers). Memory: the input read once, the output
  /// written once; column sums keep a block of 256 accumulators per thread.
  std::string reduction(const ReductionKernel &r) override {
    mlir::Type el = r.element;
    bool isFloat = isa<mlir::FloatType>(el);
    bool max = r.kind == ReductionKernel::Max;
    std::string T = cType(el), acc = isFloat ? "double" : "int64_t";
    const std::string types = T + ", " + acc + ", " + std::to_string(r.length) + ", " +
                              reduceKind(r.kind) + ", " + std::to_string(r.count);
    std::ostringstream body;
    body << arguments({{el, true}, {el, false}});
    if (r.shape == ReductionKernel::Rows) {
      body << "  mlc_reduce_rows<" << types << ">(p0, p1, " << r.rows << ", "
           << (r.outputs >= 4 ? "true" : "false") << ");\n";
    } else if (r.shape == ReductionKernel::Columns) {
      body << "  mlc_reduce_columns<" << types << ">(p0, p1, " << r.rows << ");\n";
    } else {
      std::string init = max ? (isFloat ? "-std::numeric_limits<double>::infinity()"
                                        : "std::numeric_limits<int64_t>::min()")
                             : "0";
      std::string finish =
          r.kind == ReductionKernel::Mean ? "a / " + std::to_string(r.count) : "a";
      std::string combine = max ? "a = a > x ? a : x;" : "a += x;";
      body << (r.outputs >= 4 ? "#pragma omp parallel for\n" : "")
           << "  for (int64_t r = 0; r < " << r.outputs << "; ++r) {\n"
           << reductionOutput(r, acc, init, combine, finish, T, "    ") << "  }\n";
    }
    return body.str();
  }

  /// The embedding lookup and its gradient's scatter-add: one call each of
  /// mlc_embedding and mlc_embedding_grad (prelude/rows.h).
  std::string embedding(mlir::Type el, mlir::Type it, const Rows &rows, int64_t V,
                        int64_t E) override {
    return arguments({{el, true}, {el, false}, {it, false}}) + "  mlc_embedding<" + cType(el) +
           ", " + cType(it) + ", " + std::to_string(V) + ", " + std::to_string(E) +
           ">(p0, p1, p2, " + rows.expr() + ", ctx);\n";
  }

  std::string embeddingGrad(mlir::Type el, mlir::Type it, const Rows &rows, int64_t V,
                            int64_t E, int64_t pad, bool accumulate) override {
    return arguments({{el, true}, {el, false}, {it, false}}) + "  mlc_embedding_grad<" +
           cType(el) + ", " + cType(it) + ", " + std::to_string(V) + ", " + std::to_string(E) +
           ", " + std::to_string(pad) + ", " + (accumulate ? "true" : "false") + ">(p0, p1, p2, " +
           rows.expr() + ");\n";
  }

  std::string fill(mlir::Type el, int64_t n, const std::string &value) override {
    return arguments({{el, true}}) + "  for (int64_t i = 0; i < " + std::to_string(n) +
           "; ++i) p0[i] = " + value + ";\n";
  }

  std::string constant(mlir::Type el, const std::vector<std::string> &values) override {
    std::ostringstream b;
    b << arguments({{el, true}}) << "  static const " << cType(el) << " data["
      << values.size() << "] = {";
    for (size_t i = 0; i < values.size(); ++i)
      b << (i ? ", " : "") << values[i];
    b << "};\n  std::memcpy(p0, data, sizeof(data));\n";
    return b.str();
  }

  std::string rotaryTable(mlir::Type el, int64_t positions, const std::vector<std::string> &inv,
                          bool sine) override {
    const int64_t half = int64_t(inv.size()), D = 2 * half;
    std::ostringstream b;
    b << arguments({{el, true}}) << "  const double inv[" << half << "] = {";
    for (size_t i = 0; i < inv.size(); ++i)
      b << (i ? ", " : "") << inv[i];
    b << "};\n" << "  for (int64_t e = 0; e < " << positions * D << "; ++e) {\n" << "    const int64_t p = e / " << D << ", j = e % " << D
      << ", i = j % " << half << ";\n";
    if (el.isF32())
      b << "    const double a = (double)((float)p * (float)inv[i]);\n";
    else
      b << "    const double a = (double)p * inv[i];\n";
    if (sine)
      b << "    const " << cType(el) << " s = (" << cType(el) << ")sin(a);\n"
        << "    p0[e] = j < " << half << " ? -s : s;\n";
    else
      b << "    p0[e] = (" << cType(el) << ")cos(a);\n";
    b << "  }\n";
    return b.str();
  }

  std::string zero(int64_t bytes) override {
    return "  std::memset(p0, 0, " + std::to_string(bytes) + ");\n";
  }
};

} // namespace

std::unique_ptr<KernelTarget> createCpuTarget(int64_t tokenCapacity) {
  return std::make_unique<CpuTarget>(tokenCapacity);
}

} // namespace mlc::lowering
