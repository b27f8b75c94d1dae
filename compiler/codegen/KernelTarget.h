//===- KernelTarget.h - how a target wraps scalar code into kernels -*- C++ -*-===//
//
// The kernel emitters (KernelEmitters.cpp) write what a kernel computes once,
// as scalar code: each element's (or row's) statements over the kernel's
// arguments p0..pN (outputs first), with o<k> the element offset of access
// k. A KernelTarget wraps that code into a whole kernel of one template: its
// argument binding, its loops and how they are shared out among threads,
// and the language's words for math and random numbers (ScalarEmitter).
//
//   template           wrapper (the CPU target's)       used by
//   pointwise          strided loop nest over a shape   ops, pointwise fusions,
//                                                      copies (views, concat, pad)
//   column_reduction   rows shared out, per-thread      bias gradients fused into
//                      column partials, summed in a     their producer
//                      fixed order (deterministic)
//   rows               a row per iteration              softmax, LayerNorm, cross-
//                                                      entropy, their gradients,
//                                                      the fused LayerNorm
//   reduction          rows, columns or any axes        reduce_sum/mean/max
//   attention          a (batch, head) per iteration    attention and its gradient
//   optimizer          one pass over flat-buffer        the compiled AdamW
//                      segments
//   norm               a sum over flat-buffer segments  the gradient norm
//   gather / scatter   a token per iteration / column   embedding and its gradient
//                      blocks per thread
//   fill               a loop or a static table         constants
//
// The CPU target (CpuTarget.cpp) writes C++ with OpenMP; the CUDA target
// (CudaTarget.cpp) writes the same kernels in CUDA C (grid-stride pointwise
// loops, block-per-row kernels with warp shuffles, two-pass deterministic
// reductions, an attention that streams tiles through shared memory). The
// methods run only when the package's kernels.cpp / kernels.cu are printed
// (KernelPrinter.cpp), from each plan.kernel's body or through its
// template's model (compiler/codegen/templates/);
// the lowering (one, target-neutral) never calls them. Where a method takes
// scalar code (pointwise bodies, fused prologues, the optimizer's update),
// the printer wrote that code from the kernel's body in the target's own
// spelling (its ScalarEmitter), in C syntax both targets share.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_KERNELTARGET_H
#define MLC_COMPILER_CODEGEN_KERNELTARGET_H

#include "dialects/mlc/ScalarEmitter.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace mlc::lowering {

using Shape = std::vector<int64_t>;

/// A row count: static, or the batch's token count times `perToken` (the
/// dynamic leading dimension). `count` is the most rows the kernel sees
/// (for a dynamic count, at the module's token capacity).
struct Rows {
  int64_t count = 0;
  int64_t perToken = 0; // 0: static
  bool dynamic() const { return perToken != 0; }
  /// The count as a C expression over the kernel context (ctx->rows).
  std::string expr() const {
    if (!perToken)
      return std::to_string(count);
    return perToken == 1 ? "ctx->rows" : "(ctx->rows * " + std::to_string(perToken) + ")";
  }
};
inline std::ostream &operator<<(std::ostream &os, const Rows &r) { return os << r.expr(); }

/// A strided view of one kernel argument inside a loop nest; `element` is
/// the argument's element type (null where unknown: such an access is never
/// loaded as a vector).
struct Access {
  int slot;
  int64_t base;
  Shape strides;
  mlir::Type element = {};
};

/// A pointwise nest whose structure was decided on IR: `dims` merged (no
/// unit dimensions, no two that every access could walk as one), each
/// access's strides along them; the target's decisions about it (the
/// CUDA target's vector lanes, and which access is a vector) and, per
/// access, whether the body reads or writes it and whether the vector body
/// uses its offset o<k>.
struct PointwiseNest {
  Shape dims;
  std::vector<Access> accs;
  bool dynamic = false;
  int64_t lanes = 1;
  std::vector<bool> vector, read, written, offsetUsed;
};

/// One kernel argument: its element type and whether the kernel writes it.
struct KernelArg {
  mlir::Type element;
  bool written;
};

/// A range of the flat parameter buffers (elements), for the optimizer's
/// kernels; `decay` selects the decay factor of the parameters in it.
struct Segment {
  int64_t offset = 0, numel = 0;
  bool decay = false;
};

/// An attention kernel (forward, or backward when `backward`): arguments
/// outputs (o; or dq, dk, dv), [the output gradient], q, k, v, [an additive
/// mask], [cu_seqlens], [the rotary tables cos, sin]. Padded: [B, H, S, D] per tensor; variable-length
/// (`varlen`): [T, H, D] packed tokens, sequence n being tokens
/// cu_seqlens[n] .. cu_seqlens[n + 1].
struct AttentionKernel {
  mlir::Type element;
  bool backward = false, varlen = false, causal = false, mask = false;
  int64_t batch = 0, heads = 0, seqQ = 0, seqK = 0, headDim = 0, valueDim = 0;
  /// Key/value heads (grouped-query attention; kvHeads divides heads and
  /// query head h reads kv head h / (heads / kvHeads)); heads without it.
  int64_t kvHeads = 0;
  int64_t tokenCapacity = 0; // varlen: the most tokens (dropout's counters)
  double scale = 1, dropout = 0;
  /// Soft-capping of the scores, c * tanh(s / c) before the mask
  /// (MLC_ATTN_SOFTCAP); 0: none.
  double softcap = 0;
  /// Sliding window (causal only): query i sees keys i - window + 1 .. i
  /// (MLC_ATTN_WINDOW); 0: none.
  int64_t window = 0;
  int64_t seed = 0;
  /// Per tensor argument, in argument order up to v: the element offset,
  /// the stride between batches (varlen: tokens), heads and query rows.
  struct Tensor {
    int64_t offset, batchStride, headStride, rowStride;
  };
  std::vector<Tensor> tensors;
  std::vector<KernelArg> args;
  int query = 0;                     // argument index of q (k, v follow)
  std::vector<int64_t> maskStrides;  // [B, H, Sq, Sk] broadcast strides
  int cuSlot = -1;                   // argument index of cu_seqlens
  /// The package's products are bf16 (--dtype bf16): a target may run the
  /// attention's products in bf16 too (tensor cores), keeping f32 storage.
  bool bf16Products = false;
  /// Rotary embedding read inside (MLC_ATTN_ROTARY): the rotated dims R
  /// (0: none), interleaved pairs, the tables' batch and row strides
  /// (MlcAttentionRotary's), and the argument index of cos (sin follows).
  int64_t rotaryDim = 0, rotaryBatch = 0, rotaryRow = 0;
  bool interleaved = false;
  int rotarySlot = -1;
  /// Dropout on a block of one process's probabilities (the op's `block
  /// %rank of blocks along blockAxis`): the argument index of the rank
  /// (one f64), -1 where the probabilities are whole.
  int64_t blocks = 0, blockAxis = 0;
  int blockSlot = -1;
};

/// A reduction p0 = reduce(p1) of `kind` over some axes, in one of three
/// shapes: Rows (`outputs` rows of `length` contiguous elements; `rows` the
/// row count expression), Columns (sums over `rows` rows of `length`
/// contiguous columns), General (any axes: each output decomposes its kept
/// and reduced indices). `count` is the reduced element count (the mean's
/// divisor).
struct ReductionKernel {
  enum Kind { Sum, Mean, Max } kind = Sum;
  enum Layout { Rows, Columns, General } shape = Rows;
  mlir::Type element;
  lowering::Rows rows;
  int64_t outputs = 0, length = 0, count = 1;
  Shape keptDims, keptStrides, reducedDims, reducedStrides;
};

/// How the CUDA target runs one kernel, decided by mlc-cuda-launch on the
/// kernel's IR (its `cuda.launch`, `cuda.scratch` and `cuda.tile`): a grid
/// and block per phase in phase order, the scratch bytes the phases share,
/// and attention's key rows per shared-memory tile (0 elsewhere); and, for
/// a kernel CUDA cannot run (`cuda.refusal`: an attention block beyond 48 KB
/// of shared memory), why, naming the kernel (empty: it can).
struct CudaSchedule {
  struct Phase {
    int64_t grid = 1, block = 1;
  };
  std::vector<Phase> phases;
  int64_t scratch = 0, tile = 0;
  std::string refusal;
};

class KernelTarget {
public:
  /// `tokenCapacity`: the module's most tokens per batch (the static extent
  /// of a dynamic leading dimension; 0 when it has none).
  explicit KernelTarget(int64_t tokenCapacity) : tokenCapacity(tokenCapacity) {}
  virtual ~KernelTarget() = default;
  const int64_t tokenCapacity;
  /// `n` leading rows (at the capacity when `dynamic`) as a row count.
  Rows leadingRows(int64_t n, bool dynamic) const {
    return {n, dynamic && tokenCapacity ? n / tokenCapacity : 0};
  }
  virtual std::string name() const = 0;

  /// The words for scalar code in one kernel: `index` is the flat element
  /// index expression (dropout's counter); once-per-kernel declarations the
  /// expressions need go to `prologue`.
  virtual std::unique_ptr<ScalarEmitter> scalarEmitter(const std::string &index,
                                                      std::string &prologue) = 0;

  /// The source file's head (types, helpers) and one kernel as a function.
  virtual std::string prelude() = 0;
  /// One kernel as a function of `args` buffers (the runtime checks the
  /// count against the plan's launch); `kind` names its template for
  /// profiles.
  virtual std::string function(const std::string &name, const std::string &kind,
                               const std::string &body, int64_t args) = 0;
  /// The schedule of the kernel printed next (the CUDA target's; others
  /// ignore it).
  virtual void schedule(const CudaSchedule &) {}

  /// Binds the typed arguments p0..pN.
  virtual std::string arguments(const std::vector<KernelArg> &args) = 0;

  /// Runs `body` once per element of a pointwise nest (PointwiseNest: its
  /// dims and accesses as the lowering merged them, and the target's
  /// decisions on it); in the body, o<k> is access k's offset and access
  /// k's element is `p<slot>[o<k>]`. With a dynamic nest, the leading
  /// dimension is the batch's token count times dims[0] / capacity.
  /// `vectorBody` is the body with each vector access's element written
  /// `v<k>[u]` (lane u of its vector), for the targets that move vectors.
  virtual std::string pointwiseNest(const PointwiseNest &nest, const std::string &body,
                                    const std::string &vectorBody) = 0;

  /// A pointwise body over rows x columns whose column sums (of `acc[c]
  /// += ...` in `body`) land in argument `slot`, of C type `type`. `rows`
  /// is the row count expression; `offsets` computes the o<k> from r and c.
  virtual std::string columnReduction(const Rows &rows, int64_t columns,
                                      const std::string &offsets, const std::string &body,
                                      int slot, const std::string &type) = 0;

  /// The optimizer's update over flat-buffer segments of arguments
  /// P, M, V (written) and G of element type `el`; `setup` runs once;
  /// `body` once per element i, with the segment's decay factor in `x4`
  /// (`decayOn` where the segment decays, else 1) and pointers pp, gg,
  /// mm, vv at the segment.
  virtual std::string optimizer(mlir::Type el, const std::vector<Segment> &segments,
                                const std::string &setup, const std::string &body) = 0;

  /// sqrt(sum over flat-buffer segments of G of `value`) into out[0] (f64);
  /// `body` computes `value` for element i from gg[i].
  virtual std::string norm(mlir::Type el, const std::vector<Segment> &segments,
                           const std::string &body, const std::string &value) = 0;

  // Row kernels: `rows` rows (an expression: the token count where it is
  // dynamic) of C (or E) contiguous elements, of element type `el`; the
  // whole kernel, arguments included, in the order given.

  /// p0 = softmax(p1) (or log_softmax) along each row.
  virtual std::string softmax(mlir::Type el, const Rows &rows, int64_t C, bool log) = 0;
  /// p0 = y * (g - sum(g * y)) with g = p1, y = p2 (the softmax output).
  virtual std::string softmaxGrad(mlir::Type el, const Rows &rows, int64_t C) = 0;
  /// p0 = LayerNorm(p1) * p2 + p3; `eps` a literal. With `rms`, RMSNorm:
  /// p0 = (p1 * rstd) * p2, rstd = 1 / sqrt(mean(p1^2) + eps), no bias.
  /// With `unit`, the weight is 1 and the bias 0: neither is an argument.
  virtual std::string layerNorm(mlir::Type el, const Rows &rows, int64_t E,
                                const std::string &eps, bool rms, bool unit) = 0;
  /// LayerNorm's gradient: p0 = dx, p1 = dweight, p2 = dbias from the
  /// output gradient p3, the input p4 and the weight p5; `capacity` bounds
  /// the rows (for the per-row statistics kept between the two passes).
  /// With `rms`, RMSNorm's: p0 = dx, p1 = dweight from p2, p3, p4. With
  /// `residual`, the residual stream's gradient r, the argument after the
  /// weight (p6; RMSNorm's p5), is added: p0 = r + dx. With `unit`, the
  /// weight is 1 and no argument (r moves up one). With a `copy` type
  /// (bf16; null: none) the last argument gets dx in it too, converted at
  /// the store (mlc-fuse-elementwise's `mlc.producer_copy`). The output
  /// gradient is of type `grad` (bf16 where its product stores it so,
  /// mlc-fold-casts' `mlc.consumer_load`; el otherwise), widened at its loads.
  /// With `plusOne` the weight is 1 + the argument (Gemma's RMSNorm), added
  /// in the element type at the load.
  virtual std::string layerNormGrad(mlir::Type el, const Rows &rows, int64_t capacity,
                                    int64_t E, const std::string &eps, bool rms,
                                    bool residual, bool unit, mlir::Type copy,
                                    mlir::Type grad, bool plusOne = false) = 0;
  /// p0 = mean cross-entropy of logits p1 against labels p2 (of type
  /// `labels`), rows whose label is `ignore` skipped; a label out of range
  /// is reported through the kernel context.
  virtual std::string crossEntropy(mlir::Type el, mlir::Type labels, const Rows &rows,
                                   int64_t C, int64_t ignore) = 0;
  /// The loss p0 and its gradient p1 (of type `grad`: el, or bf16 when only
  /// a bf16 copy of it is read) in one pass over logits p2, labels p3;
  /// `scale` is the loss's incoming gradient (a literal).
  virtual std::string crossEntropyWithGrad(mlir::Type el, mlir::Type labels, mlir::Type grad,
                                           const Rows &rows, int64_t C, int64_t ignore,
                                           const std::string &scale) = 0;
  /// The gradient p0 from logits p1, labels p2 and the incoming gradient:
  /// `scale` (a literal), or p3[0] when it is empty.
  virtual std::string crossEntropyGrad(mlir::Type el, mlir::Type labels,
                                       const Rows &rows, int64_t C, int64_t ignore,
                                       const std::string &scale) = 0;
  /// A LayerNorm fused with the pointwise prologue of its input (a `rows`
  /// fusion): per row, `bases` computes b<k> (access k's row base); per
  /// element c, `offsets` computes o<k> from b<k>, `body` the prologue whose
  /// value `input` is normalized; the result goes to p<slot>[o<slot>] for
  /// each of `slots` (a second: its bf16 copy, converted at the store), with
  /// `weight` and `bias` the element's LayerNorm parameters. With `rms`
  /// the norm is RMSNorm's, `(T)(input * rstd) * weight` (`bias` unused).
  /// A `residual` (an element read at the offsets, or empty) is added to the
  /// normalized value before it is stored (a post-norm's `h + norm(y)`).
  virtual std::string layerNormFusion(mlir::Type el, const Rows &rows, int64_t E,
                                      const std::string &eps, const std::string &bases,
                                      const std::string &offsets, const std::string &body,
                                      const std::string &input, llvm::ArrayRef<int> slots,
                                      const std::string &weight, const std::string &bias,
                                      bool rms, const std::string &residual) = 0;

  /// Attention, forward or backward (AttentionKernel).
  virtual std::string attention(const AttentionKernel &kernel) = 0;

  /// A reduction (ReductionKernel).
  virtual std::string reduction(const ReductionKernel &kernel) = 0;

  /// p0[r] = p1[p2[r]] (rows of E elements) for `rows` token ids of type
  /// `ids` in [0, V); an id out of range is reported and row 0 used.
  virtual std::string embedding(mlir::Type el, mlir::Type ids, const Rows &rows,
                                int64_t V, int64_t E) = 0;
  /// The gradient: p0 = zeros [V, E], then p0[p2[r]] += p1[r] for every
  /// token (ids out of range skipped, and the padding row `pad` when it is
  /// >= 0), with no two threads adding to one element. With `accumulate`
  /// the rows are added to p0 as it is (a tied head's gradient), not zeroed.
  virtual std::string embeddingGrad(mlir::Type el, mlir::Type ids, const Rows &rows,
                                    int64_t V, int64_t E, int64_t pad, bool accumulate) = 0;

  /// p0 = n copies of `value` (a literal), or the constant `values`
  /// (literals) when it is not a splat.
  virtual std::string fill(mlir::Type el, int64_t n, const std::string &value) = 0;
  virtual std::string constant(mlir::Type el, const std::vector<std::string> &values) = 0;
  /// p0 = a rotary embedding's cosine (or, with `sine`, signed sine) table
  /// over `positions` rows of 2 * inv.size() columns (mlc.rotary_table): in
  /// f32 the angle is the f32 product of the position and the f32 inv[i],
  /// its cos/sin taken in f64 and rounded; otherwise all in f64. `inv`
  /// holds the frequencies as exact f64 literals.
  virtual std::string rotaryTable(mlir::Type el, int64_t positions,
                                  const std::vector<std::string> &inv, bool sine) = 0;
  /// Sets the first `bytes` bytes of p0 to zero (a statement in a kernel).
  virtual std::string zero(int64_t bytes) = 0;
};

std::unique_ptr<KernelTarget> createCpuTarget(int64_t tokenCapacity);
std::unique_ptr<KernelTarget> createCudaTarget(int64_t tokenCapacity);

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_KERNELTARGET_H
