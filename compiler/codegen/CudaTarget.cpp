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
//                      cross-entropy in one pass with a running log-sum-exp;
//                      LayerNorm (of a fused prologue too), softmax,
//                      cross-entropy, the embedding and the row and
//                      column reductions are templates in
//                      prelude/rows.cuh, a kernel one call (RowCalls.h)
//   column reduction   phase 0: blocks of (row chunk, column block), a
//   (and LayerNorm's   thread per column summing its chunk's rows into a
//    dw, db)           partial in scratch; phase 1: a thread per column sums
//                      the partials in chunk order (deterministic); a fused
//                      body's sums are mlc_column_sums (prelude/reduce.cuh)
//   norm, loss sums    per-block partials, then one block sums them in order
//   optimizer          a grid-stride loop per flat-buffer segment; AdamW and
//                      the norm are prelude/optimizer.cuh's templates, the
//                      fills and the rotary table prelude/fill.cuh's
//   attention          never writes the S x S scores: a thread per query row
//                      streams key/value tiles through shared memory with an
//                      online softmax; backward recomputes the probabilities
//                      (phase 0 row statistics, phase 1 dK and dV a thread
//                      per key row, phase 2 dQ a thread per query row); the
//                      kernels are templates in prelude/attention.cuh (and
//                      on tensor cores for bf16 products), a kernel one call
//
// How each kernel is launched (its phases' grids and blocks, its scratch,
// attention's tile) was decided by mlc-cuda-launch on the kernel's IR
// (CudaLaunch.cpp); the printer hands that schedule over before the body,
// the templates open phase after phase and take their chunk counts from
// it, and function() writes it as the kernel's `// mlc.kernel` line.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/AttentionSource.h"
#include "compiler/codegen/CudaPrelude.h"
#include "compiler/codegen/CudaSchedule.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/NormCalls.h"
#include "compiler/codegen/PreludeCalls.h"
#include "compiler/codegen/RowCalls.h"
#include "compiler/codegen/Vectorize.h"

#include "llvm/Support/ErrorHandling.h"

#include <sstream>

namespace mlc::lowering {

namespace {

std::string n2s(int64_t v) { return std::to_string(v); }

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
  /// The schedule of the kernel being printed, and the phases opened so far.
  CudaSchedule sched;
  size_t opened = 0;

  /// The launch of phase `k` of the schedule.
  const CudaSchedule::Phase &launch(size_t k) const {
    if (k >= sched.phases.size())
      llvm::report_fatal_error("a CUDA template opens more phases than its schedule has");
    return sched.phases[k];
  }
  /// The index of the next phase (a template's phases in schedule order).
  std::string nextPhase() {
    launch(opened);
    return n2s(opened++);
  }
  /// Opens the next phase: its code runs when the runtime launches it.
  std::string phase() { return "  if (phase == " + nextPhase() + ") {\n"; }

  /// Column sums as mlc-cuda-launch shaped them in phases k (row chunk x
  /// column block blocks) and k + 1 (column blocks).
  struct ColumnChunks {
    int64_t block, colBlocks, chunks;
  };
  ColumnChunks columnChunks(size_t k) const {
    const CudaSchedule::Phase &a = launch(k), &b = launch(k + 1);
    return {a.block, b.grid, a.grid / b.grid};
  }

public:
  using KernelTarget::KernelTarget;
  std::string name() const override { return "cuda"; }

  std::unique_ptr<ScalarEmitter> scalarEmitter(const std::string &index,
                                              std::string &prologue) override {
    return std::make_unique<CudaScalarEmitter>(index, prologue);
  }

  std::string prelude() override { return cudaKernelPrelude(); }

  void schedule(const CudaSchedule &s) override {
    sched = s;
    opened = 0;
  }

  std::string function(const std::string &name, const std::string &kind,
                       const std::string &body, int64_t args) override {
    if (sched.phases.empty() || opened != sched.phases.size())
      llvm::report_fatal_error(llvm::Twine("CUDA kernel ") + name + " opens " +
                               llvm::Twine(opened) + " phases, its schedule has " +
                               llvm::Twine(sched.phases.size()));
    std::string launches;
    int64_t maxBlock = 1;
    for (const CudaSchedule::Phase &p : sched.phases) {
      launches += (launches.empty() ? "" : ",") + n2s(p.grid) + "x" + n2s(p.block);
      maxBlock = std::max(maxBlock, p.block);
    }
    // A kernel CUDA cannot run: the readers of kernels.cu fail with why.
    const std::string refusal =
        sched.refusal.empty() ? "" : "\n// mlc.refuse " + name + " " + sched.refusal;
    return refusal + "\n// mlc.kernel " + name + " " + kind + " args=" + n2s(args) + " scratch=" +
           n2s(sched.scratch) + " launch=" + launches + "\nextern \"C\" __global__ void " +
           "__launch_bounds__(" + n2s(maxBlock) + ") " + name +
           "(char *const *b, const MlcKernelCtx *ctx, int phase) {\n" + body + "}\n";
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
    os << phase();
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
  /// A bias gradient fused into its producer: one call of mlc_column_sums
  /// (prelude/reduce.cuh), the element code its term, in the chunks
  /// mlc-cuda-launch chose.
  std::string columnReduction(const Rows &rows, int64_t columns,
                              const std::string &offsets, const std::string &body, int slot,
                              const std::string &type) override {
    const auto [block, colBlocks, chunks] = columnChunks(0);
    std::ostringstream k;
    k << "  // phase " << nextPhase() << ": partials, row chunk x column block\n"
      << "  // phase " << nextPhase() << ": the partials in chunk order\n"
      << "  mlc_column_sums<" << type << ", " << columns << ", " << chunks << ", " << colBlocks
      << ", " << block << ">(p" << slot << ", " << rows << ", (double *)ctx->scratch, phase, "
      << columnTerm(offsets, body) << ");\n";
    return k.str();
  }

  /// AdamW over the flat buffers and the gradient's norm: one call each of
  /// mlc_adamw and mlc_grad_norm (prelude/optimizer.cuh), the element code
  /// their lambda; the norm's partials are its phase 0's blocks.
  std::string optimizer(mlir::Type el, const std::vector<Segment> &segments,
                        const std::string &setup, const std::string &body) override {
    return optimizerPointers(el) + setup + segmentTable(segments, true) + "  // phase " +
           nextPhase() + ": a grid-stride loop per segment\n  mlc_adamw<" + cType(el) + ", " +
           n2s(segments.size()) + ">(P, M, V, G, seg, decayOn, ctx, " + adamwUpdate(el, body) +
           ");\n";
  }

  std::string norm(mlir::Type el, const std::vector<Segment> &segments,
                   const std::string &body, const std::string &value) override {
    const int64_t blocks = launch(0).grid;
    std::ostringstream k;
    k << normPointers(el) << segmentTable(segments, false) << "  // phase " << nextPhase()
      << ": a block sum per block\n  // phase " << nextPhase()
      << ": the blocks' sums in order, the root\n  mlc_grad_norm<" << cType(el) << ", "
      << segments.size() << ", " << blocks << ">(out, G, seg, (double *)ctx->scratch, ctx, phase, "
      << normValue(el, body, value) << ");\n";
    return k.str();
  }

  /// Softmax (log-softmax) and its gradient: one call each of mlc_softmax
  /// and mlc_softmax_grad (prelude/rows.cuh), a block per row.
  std::string softmax(mlir::Type el, const Rows &rows, int64_t C, bool log) override {
    return arguments({{el, true}, {el, false}}) + "  // phase " + nextPhase() +
           ": a block per row\n  mlc_softmax<" + cType(el) + ", " + n2s(C) + ", " +
           rowFlags({{log, "MLC_ROW_LOG"}}) + ">(p0, p1, " + rows.expr() + ");\n";
  }

  std::string softmaxGrad(mlir::Type el, const Rows &rows, int64_t C) override {
    return arguments({{el, true}, {el, false}, {el, false}}) + "  // phase " + nextPhase() +
           ": a block per row\n  mlc_softmax_grad<" + cType(el) + ", " + n2s(C) +
           ">(p0, p1, p2, " + rows.expr() + ");\n";
  }

  /// LayerNorm and RMSNorm, forward: one call of mlc_layer_norm
  /// (prelude/rows.cuh), a block per row.
  std::string layerNorm(mlir::Type el, const Rows &rows, int64_t E, const std::string &eps,
                        bool rms, bool unit) override {
    const RowCall c = layerNormCall(el, E, rms, unit);
    return arguments(c.args) + "  // phase " + nextPhase() + ": a block per row\n" +
           "  mlc_layer_norm<" + c.types + ">(" + c.pointers + ", " + rows.expr() + ", " + eps +
           ");\n";
  }

  /// Their gradient: one call of mlc_layer_norm_grad (prelude/rows.cuh),
  /// phase 0 dx a block per row, phases 1 and 2 dw and db as column sums in
  /// the chunks mlc-cuda-launch chose.
  std::string layerNormGrad(mlir::Type el, const Rows &rows, int64_t capacity, int64_t E,
                            const std::string &eps, bool rms, bool residual,
                            bool unit, mlir::Type copy, mlir::Type grad,
                            bool plusOne) override {
    const auto [block, colBlocks, chunks] = columnChunks(1);
    const RowCall c = layerNormGradCall(el, E, rms, residual, unit, copy, grad, plusOne);
    std::ostringstream b;
    b << arguments(c.args) << "  // phase " << nextPhase() << ": dx, a block per row\n"
      << "  // phase " << nextPhase() << ": dw, db partials, row chunk x column block\n"
      << "  // phase " << nextPhase() << ": dw, db, the partials in chunk order\n"
      << "  mlc_layer_norm_grad<" << c.types << ", " << chunks << ", " << colBlocks << ", "
      << block << ">(" << c.pointers << ", " << rows << ", " << capacity << ", " << eps
      << ", (double *)ctx->scratch, phase);\n";
    return b.str();
  }

  /// Cross-entropy, with its gradient, and the gradient alone: one call
  /// each of mlc_cross_entropy and mlc_cross_entropy_grad (prelude/rows.cuh);
  /// the scale is the incoming gradient (a constant, or p3[0]).
  std::string crossEntropy(mlir::Type el, mlir::Type lt, const Rows &rows, int64_t C,
                           int64_t ignore) override {
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {lt, false}}) << "  // phase " << nextPhase()
      << ": a block per row, its term\n  // phase " << nextPhase()
      << ": the terms' mean\n  mlc_cross_entropy<" << cType(el) << ", " << cType(lt) << ", " << C
      << ", " << ignore << ">(p0, p1, p2, " << rows << ", " << rows.count
      << ", (double *)ctx->scratch, ctx, phase);\n";
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

  /// LayerNorm (RMSNorm) of a pointwise prologue (a residual add, a bias):
  /// one call of mlc_layer_norm_fused (prelude/rows.cuh), a block per row,
  /// the prologue's element code and the element's stores its lambdas
  /// (NormCalls.h).
  std::string layerNormFusion(mlir::Type el, const Rows &rows, int64_t E,
                              const std::string &eps, const std::string &bases,
                              const std::string &offsets, const std::string &body,
                              const std::string &input, llvm::ArrayRef<int> slots,
                              const std::string &weight,
                              const std::string &bias, bool rms,
                              const std::string &residual) override {
    return "  // phase " + nextPhase() + ": a block per row\n" +
           layerNormFusionCall({el, E, rows.expr(), eps, bases, offsets, body, input, slots,
                                weight, bias, residual, rms});
  }

  std::string attention(const AttentionKernel &a) override;

  /// Sums, means and maxima (double accumulators; int64 for integers):
  /// Rows (a block per row) and Columns (the two-phase chunked column sums)
  /// one call of mlc_reduce_rows or mlc_reduce_columns (prelude/rows.cuh);
  /// General (a thread per output walking its reduced indices) one of
  /// mlc_reduce_axes (prelude/reduce.cuh).
  std::string reduction(const ReductionKernel &r) override {
    mlir::Type el = r.element;
    bool isFloat = isa<mlir::FloatType>(el);
    std::string T = cType(el), acc = isFloat ? "double" : "int64_t";
    const std::string types = T + ", " + acc + ", " + n2s(r.length) + ", " +
                              reduceKind(r.kind) + ", " + n2s(r.count);
    std::ostringstream body;
    body << arguments({{el, true}, {el, false}});
    if (r.shape == ReductionKernel::Rows) {
      body << "  // phase " << nextPhase() << ": a block per row\n  mlc_reduce_rows<" << types
           << ">(p0, p1, " << r.rows << ");\n";
    } else if (r.shape == ReductionKernel::Columns) {
      const auto [block, colBlocks, chunks] = columnChunks(0);
      body << "  // phase " << nextPhase() << ": partials, row chunk x column block\n"
           << "  // phase " << nextPhase() << ": the partials in chunk order\n"
           << "  mlc_reduce_columns<" << types << ", " << chunks << ", " << colBlocks << ", "
           << block << ">(p0, p1, " << r.rows << ", (" << acc << " *)ctx->scratch, phase);\n";
    } else {
      body << "  // phase " << nextPhase() << ": a thread per output\n" << reduceAxesCall(r);
    }
    return body.str();
  }

  /// The embedding lookup and its gradient's scatter-add: one call each of
  /// mlc_embedding and mlc_embedding_grad (prelude/rows.cuh), the scatter's
  /// blocks (vocabulary chunk, column block) as mlc-cuda-launch chose them.
  std::string embedding(mlir::Type el, mlir::Type it, const Rows &rows, int64_t V,
                        int64_t E) override {
    return arguments({{el, true}, {el, false}, {it, false}}) + "  // phase " + nextPhase() +
           ": a thread per element\n  mlc_embedding<" + cType(el) + ", " + cType(it) + ", " +
           n2s(V) + ", " + n2s(E) + ">(p0, p1, p2, " + rows.expr() + ", ctx);\n";
  }

  std::string embeddingGrad(mlir::Type el, mlir::Type it, const Rows &rows, int64_t V,
                            int64_t E, int64_t pad, bool accumulate) override {
    // The scatter's blocks (phase 1, or 0 when it adds to p0 as it is) are
    // (vocabulary chunk, column block) pairs.
    const size_t scatter = accumulate ? 0 : 1;
    const int64_t block = launch(scatter).block, colBlocks = (E + block - 1) / block;
    const int64_t chunks = launch(scatter).grid / colBlocks, per = (V + chunks - 1) / chunks;
    std::ostringstream b;
    b << arguments({{el, true}, {el, false}, {it, false}});
    if (!accumulate)
      b << "  // phase " << nextPhase() << ": zero the table\n";
    b << "  // phase " << nextPhase() << ": the scatter, (vocabulary chunk, column block)\n"
      << "  mlc_embedding_grad<" << cType(el) << ", " << cType(it) << ", " << V << ", " << E
      << ", " << pad << ", " << (accumulate ? "true" : "false") << ", " << per << ", "
      << colBlocks << ", " << block << ">(p0, p1, p2, " << rows << ", phase);\n";
    return b.str();
  }

  /// Fills, constant tables, the rotary table and zero bytes: one call
  /// each of mlc_fill, mlc_constant, mlc_rotary_table and mlc_zero
  /// (prelude/fill.cuh), a thread per element.
  std::string fill(mlir::Type el, int64_t n, const std::string &value) override {
    return arguments({{el, true}}) + "  // phase " + nextPhase() + ": a thread per element\n" +
           "  mlc_fill<" + cType(el) + ", " + n2s(n) + ">(p0, " + value + ");\n";
  }

  std::string constant(mlir::Type el, const std::vector<std::string> &values) override {
    return arguments({{el, true}}) + staticTable(cType(el), "data", values) + "  // phase " +
           nextPhase() + ": a thread per element\n  mlc_constant<" + cType(el) + ", " +
           n2s(values.size()) + ">(p0, data);\n";
  }

  std::string rotaryTable(mlir::Type el, int64_t positions, const std::vector<std::string> &inv,
                          bool sine) override {
    return arguments({{el, true}}) + staticTable("double", "inv", inv) + "  // phase " +
           nextPhase() + ": a thread per element\n  " +
           rotaryCall(el, positions, inv.size(), sine) + "(p0, inv);\n";
  }

  /// A phase of its kernel (a copy's destination cleared before its nests).
  std::string zero(int64_t bytes) override {
    return "  if (phase == " + nextPhase() + ")\n    mlc_zero<" + n2s(bytes) + ">(b[0]);\n";
  }

private:

  /// mlc_cross_entropy_grad's call: its slots (the loss first when
  /// `withLoss`; the incoming gradient's buffer last when no constant
  /// scale) and phases (count, rows, with the loss its sum).
  std::string crossEntropyGradient(mlir::Type el, mlir::Type lt, mlir::Type grad,
                                   const Rows &rows, int64_t C, int64_t ignore,
                                   const std::string &scale, bool withLoss) {
    std::vector<KernelArg> slots;
    if (withLoss)
      slots.push_back({el, true});
    slots.insert(slots.end(), {{grad, true}, {el, false}, {lt, false}});
    if (!withLoss && scale.empty())
      slots.push_back({el, false});
    const int d = withLoss ? 1 : 0;
    std::ostringstream b;
    b << arguments(slots) << "  // phase " << nextPhase() << ": count the labelled rows\n"
      << "  // phase " << nextPhase() << ": a block per row\n";
    if (withLoss)
      b << "  // phase " << nextPhase() << ": the loss terms' mean\n";
    b << "  mlc_cross_entropy_grad<" << cType(el) << ", " << cType(grad) << ", " << cType(lt)
      << ", " << C << ", " << ignore << ", " << rowFlags({{withLoss, "MLC_ROW_LOSS"}}) << ">("
      << (withLoss ? "p0" : "0") << ", p" << d << ", p" << d + 1 << ", p" << d + 2
      << ", (double)(" << (scale.empty() ? "p3[0]" : scale) << "), " << rows
      << ", (double *)ctx->scratch, ctx, phase);\n";
    return b.str();
  }
};

/// Attention, forward or backward, as one call of a template of
/// prelude/attention.cuh (where each kernel's math and memory traffic are
/// stated): on tensor cores (mlc_attention_tc_*) when the package's
/// products are bf16 and the head dimensions are multiples of 16 (8 for
/// the forward pass's values), else a thread per row (mlc_attention_*).
/// The call's template arguments are what must be known at compile time
/// (element type, head dimensions, tile sizes, variant flags); the sizes
/// and strides travel as an MlcAttention literal. Here only the launch is
/// decided: mlc-cuda-launch chose the blocks (a block of query rows per
/// batch and head, varlen per head and tile of the packed stream), the key
/// tile and the phases.
std::string CudaTarget::attention(const AttentionKernel &a) {
  const mlir::Type el = a.element;
  const bool tensorCores = attentionOnTensorCores(a);
  const std::string T = cType(el);
  const int64_t D = a.headDim, Dv = a.valueDim;
  // A thread per query row off tensor cores: the block's threads are its rows.
  const int64_t rowsPer = launch(0).block, tile = sched.tile;
  const int64_t qTiles = launch(0).grid / std::max<int64_t>(1, attentionGridHeads(a));

  std::ostringstream b;
  b << arguments(a.args) << attentionSizes(a, qTiles) << attentionBuffers(a);
  const std::string sizes = tensorCores ? n2s(D) + ", " + n2s(Dv)
                                        : T + ", " + n2s(D) + ", " + n2s(Dv) + ", " +
                                              n2s(rowsPer) + ", " + n2s(tile);
  const std::string call = std::string("mlc_attention_") + (tensorCores ? "tc_" : "") +
                           (a.backward ? "backward<" : "forward<") + sizes + ", " +
                           attentionFlags(a) + ">(s, x, ctx";
  if (!a.backward) {
    b << "  // phase " << nextPhase() << ": O\n  " << call << ");\n";
    return b.str();
  }
  // Scratch (cuda.scratch): (m, l, D_i) per query row, f64.
  b << "  // phase " << nextPhase() << ": the row statistics\n  // phase " << nextPhase()
    << ": dK, dV\n  // phase " << nextPhase() << ": dQ\n  " << call << ", phase);\n";
  return b.str();
}

} // namespace

std::unique_ptr<KernelTarget> createCudaTarget(int64_t tokenCapacity) {
  return std::make_unique<CudaTarget>(tokenCapacity);
}

} // namespace mlc::lowering
