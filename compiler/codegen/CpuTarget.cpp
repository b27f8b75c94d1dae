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
#include "compiler/codegen/NormCalls.h"
#include "compiler/codegen/PreludeCalls.h"
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

  /// A bias gradient fused into its producer: one call of mlc_column_sums
  /// (prelude/reduce.h), the element code its term.
  std::string columnReduction(const Rows &rows, int64_t columns,
                              const std::string &offsets, const std::string &body, int slot,
                              const std::string &type) override {
    return "  mlc_column_sums<" + type + ", " + std::to_string(columns) + ">(p" +
           std::to_string(slot) + ", " + rows.expr() + ", " + columnTerm(offsets, body) + ");\n";
  }

  /// AdamW over the flat buffers and the gradient's norm: one call each of
  /// mlc_adamw and mlc_grad_norm (prelude/optimizer.h), the element code
  /// their lambda.
  std::string optimizer(mlir::Type el, const std::vector<Segment> &segments,
                        const std::string &setup, const std::string &body) override {
    return optimizerPointers(el) + setup + segmentTable(segments, true) + "  mlc_adamw<" +
           cType(el) + ", " + std::to_string(segments.size()) +
           ">(P, M, V, G, seg, decayOn, ctx, " + adamwUpdate(el, body) + ");\n";
  }

  std::string norm(mlir::Type el, const std::vector<Segment> &segments,
                   const std::string &body, const std::string &value) override {
    return normPointers(el) + segmentTable(segments, false) + "  mlc_grad_norm<" + cType(el) +
           ", " + std::to_string(segments.size()) + ">(out, G, seg, ctx, " +
           normValue(el, body, value) + ");\n";
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

  /// LayerNorm (RMSNorm) of a pointwise prologue: one call of
  /// mlc_layer_norm_fused (prelude/rows.h), the prologue's element code and
  /// the element's stores its lambdas (NormCalls.h).
  std::string layerNormFusion(mlir::Type el, const Rows &rows, int64_t E,
                              const std::string &eps, const std::string &bases,
                              const std::string &offsets, const std::string &body,
                              const std::string &input, llvm::ArrayRef<int> slots,
                              const std::string &weight,
                              const std::string &bias, bool rms,
                              const std::string &residual) override {
    return layerNormFusionCall(
        {el, E, rows.expr(), eps, bases, offsets, body, input, slots, weight, bias, residual, rms});
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
  /// double (int64 for integers): one call of mlc_reduce_rows,
  /// mlc_reduce_columns (prelude/rows.h) or mlc_reduce_axes
  /// (prelude/reduce.h).
  std::string reduction(const ReductionKernel &r) override {
    mlir::Type el = r.element;
    bool isFloat = isa<mlir::FloatType>(el);
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
      body << reduceAxesCall(r);
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

  /// Fills, constant tables and the rotary table: one call each of
  /// mlc_fill, mlc_constant and mlc_rotary_table (prelude/fill.h).
  std::string fill(mlir::Type el, int64_t n, const std::string &value) override {
    return arguments({{el, true}}) + "  mlc_fill<" + cType(el) + ", " + std::to_string(n) +
           ">(p0, " + value + ");\n";
  }

  std::string constant(mlir::Type el, const std::vector<std::string> &values) override {
    return arguments({{el, true}}) + staticTable(cType(el), "data", values) + "  mlc_constant<" +
           cType(el) + ", " + std::to_string(values.size()) + ">(p0, data);\n";
  }

  std::string rotaryTable(mlir::Type el, int64_t positions, const std::vector<std::string> &inv,
                          bool sine) override {
    return arguments({{el, true}}) + staticTable("double", "inv", inv) + "  " +
           rotaryCall(el, positions, inv.size(), sine) + "(p0, inv);\n";
  }

  std::string zero(int64_t bytes) override {
    return "  mlc_zero<" + std::to_string(bytes) + ">(p0);\n";
  }
};

} // namespace

std::unique_ptr<KernelTarget> createCpuTarget(int64_t tokenCapacity) {
  return std::make_unique<CpuTarget>(tokenCapacity);
}

} // namespace mlc::lowering
