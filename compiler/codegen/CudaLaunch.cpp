//===- CudaLaunch.cpp - mlc-cuda-launch: the CUDA schedule on kernel IR ----===//
//
// The CUDA target's launch decisions, made once per kernel on its template
// and params (and, for a body, its nest and mlc-cuda-vectorize's lanes):
//
//   grid-stride phases (pointwise nests, fills, embeddings, the optimizer)
//       256 threads a block, enough blocks for the work at `per` items a
//       thread (4 for a simple store loop), at most 4096 (the loop covers
//       the rest)
//   a block per row (softmax, LayerNorm, cross-entropy, row reductions)
//       64 threads for rows of at most 64, 128 up to 256, else 256 (every
//       warp has work; block-wide sums cost log2 of the block); one block
//       per row up to 2^20 rows
//   column sums (bias gradients, LayerNorm's dw/db, column reductions)
//       phase A: (row chunk, column block) blocks, a thread per column, the
//       rows split into ceil(R / 16) chunks, at most 64; phase B: a thread
//       per column adds the chunks' partials (chunks x C doubles of
//       scratch) in order, so the sums are reproducible
//   sums of partials (the gradient norm, the loss)
//       per-block partials in scratch, then one block of 256 adds them
//   attention
//       a block per (batch, head, query tile), varlen per (head, tile of the
//       packed stream: the token capacity's); tensor cores: 64 query
//       rows on 128 threads, key tiles of 32; else a thread per query row,
//       64 or 32 rows and as many key rows per tile as keep the tiles (and,
//       in backward, the block's own rows) within 40 KB of shared memory;
//       backward: three phases (row statistics, dK/dV, dQ) over (m, l, D)
//       per query row in f64 scratch. A block still beyond CUDA's 48 KB of
//       static shared memory (in backward, f64 heads above 92, f32 above
//       185 off tensor cores, above 160 on them) is recorded as refused
//       (cuda.refusal: the kernel, D, Dv, its element type and what fits),
//       for the CUDA readers of kernels.cu; the CPU runs it
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CudaSchedule.h"
#include "compiler/codegen/KernelParams.h"
#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCCUDALAUNCH
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;

namespace mlc::lowering {

namespace {

using Phase = CudaSchedule::Phase;
constexpr int64_t kThreads = 256; // a grid-stride or column phase's block

/// Blocks for `work` items of `per` items each, at least 1, at most `cap`.
int64_t blocksFor(int64_t work, int64_t per, int64_t cap) {
  int64_t g = (work + per - 1) / per;
  return std::max<int64_t>(1, std::min(g, cap));
}

/// A grid-stride phase over `work` items, `perThread` a thread.
Phase strided(int64_t work, int64_t perThread = 1) {
  return {blocksFor(work, kThreads * perThread, 4096), kThreads};
}

/// A block per row of C elements.
Phase perRow(const Rows &rows, int64_t C) {
  return {std::max<int64_t>(1, std::min<int64_t>(rows.count, 1 << 20)),
          C <= 64 ? 64 : C <= 256 ? 128 : 256};
}

/// The two column-sum phases over R rows of C columns; returns the chunks.
int64_t columnSums(CudaSchedule &s, int64_t R, int64_t C) {
  const int64_t chunks = blocksFor(R, 16, 64), colBlocks = (C + kThreads - 1) / kThreads;
  s.phases.push_back({chunks * colBlocks, kThreads});
  s.phases.push_back({colBlocks, kThreads});
  return chunks;
}

/// An attention kernel's CUDA block: query rows, threads, key rows per
/// tile, and the static shared memory of its template (attention.cuh).
struct AttentionBlock {
  int64_t rows = 64, threads = 128, tile = 32, sharedBytes = 0;
};

AttentionBlock attentionBlock(const AttentionKernel &a) {
  const int64_t D = a.headDim, Dv = a.valueDim, bytes = plan::elementBytes(a.element);
  AttentionBlock b;
  if (attentionOnTensorCores(a)) {
    // MlcAttentionTcTile: 32 rows of W / 2 + 4 words and W columns of
    // 16 + 4; backward two of them and three statistics per tile row (or,
    // in their place, 64 rows of D + 1 floats).
    const int64_t W = std::max(D, Dv), tileBytes = (32 * (W / 2 + 4) + W * (16 + 4)) * 4;
    b.sharedBytes =
        a.backward ? std::max(2 * tileBytes + 3 * 32 * 4, 64 * (D + 1) * 4) : tileBytes;
    return b;
  }
  // The block's own rows (backward: q, dO, dQ and two statistics, padded)
  // and a key/value tile within 40 KB: fewer rows first, down to a warp
  // (a block is whole warps), then a smaller tile, down to one key row
  // (f64 heads of 64 in backward: 32 rows, tiles of 4).
  const int64_t own = a.backward ? D + Dv + 2 : 0;
  auto shared = [&] { return (b.rows * own + b.tile * (D + Dv)) * bytes; };
  while (b.rows > 32 && shared() > 40 * 1024)
    b.rows /= 2;
  while (b.tile > 1 && shared() > 40 * 1024)
    b.tile /= 2;
  b.threads = b.rows;
  b.sharedBytes = shared();
  return b;
}

/// Why CUDA cannot run attention kernel `name` (its block over 48 KB of
/// shared memory even at its smallest), and what would fit; "" if it can.
std::string attentionRefusal(const AttentionKernel &a, int64_t sharedBytes,
                             llvm::StringRef name) {
  if (sharedBytes <= kCudaStaticSharedBytes)
    return "";
  auto fits = [&](AttentionKernel k) {
    return attentionBlock(k).sharedBytes <= kCudaStaticSharedBytes;
  };
  // The largest D = Dv that fits on the same kind of kernel (tensor cores or not).
  int64_t most = std::max(a.headDim, a.valueDim);
  for (; most > 1; --most) {
    AttentionKernel smaller = a;
    smaller.headDim = smaller.valueDim = most;
    if (attentionOnTensorCores(smaller) == attentionOnTensorCores(a) && fits(smaller))
      break;
  }
  AttentionKernel bf16 = a;
  bf16.element = Float32Type::get(a.element.getContext());
  bf16.bf16Products = true;
  const std::string type = plan::dtypeName(a.element) + (a.bf16Products ? ", bf16 products" : "");
  return ("kernel @" + name + ": attention" + (a.backward ? " backward" : "") + " (" + type +
          ", D = " + llvm::Twine(a.headDim) + ", Dv = " + llvm::Twine(a.valueDim) + ") needs " +
          llvm::Twine(sharedBytes) + " bytes of shared memory a block, more than CUDA's " +
          llvm::Twine(kCudaStaticSharedBytes) +
          ": it runs on the CPU only (for CUDA, a head dimension of at most " +
          llvm::Twine(most) + (fits(bf16) && !a.bf16Products ? ", or --dtype bf16" : "") + ")")
      .str();
}

void attentionSchedule(const AttentionKernel &a, CudaSchedule &s, llvm::StringRef name) {
  const AttentionBlock b = attentionBlock(a);
  const int64_t rowsPer = b.rows, tile = b.tile, threads = b.threads;
  s.refusal = attentionRefusal(a, b.sharedBytes, name);
  // Varlen: tiles of the packed stream, whatever its sequences.
  const int64_t maxLen = a.varlen ? a.tokenCapacity : std::max(a.seqQ, a.seqK);
  const int64_t qTiles = (maxLen + rowsPer - 1) / rowsPer;
  const Phase launch{attentionGridHeads(a) * qTiles, threads};
  s.phases.assign(a.backward ? 3 : 1, launch);
  s.tile = tile;
  if (a.backward) {
    const int64_t statRows = a.varlen ? a.heads * a.tokenCapacity : a.batch * a.heads * a.seqQ;
    s.scratch = statRows * 3 * 8;
  }
}

llvm::Error failure(plan::KernelOp k, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("kernel @" + k.getSymName() + ": " + why).str());
}

/// The schedule of a template kernel, from its params.
llvm::Expected<CudaSchedule> templateSchedule(plan::KernelOp k, llvm::StringRef t) {
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  CudaSchedule s;
  auto rowsOf = [&](int64_t C) { s.phases.push_back(perRow(r.rows(), C)); };
  if (t == "fill") {
    s.phases = {strided(r.i64("count"))};
  } else if (t == "constant") {
    auto values = dyn_cast_or_null<DenseElementsAttr>(r.attr("values"));
    s.phases = {strided(values ? values.getNumElements() : 0)};
  } else if (t == "rotary_table") {
    auto inv = dyn_cast_or_null<DenseElementsAttr>(r.attr("inv_freq"));
    s.phases = {strided(r.i64("positions") * 2 * (inv ? inv.getNumElements() : 0))};
  } else if (t == "softmax" || t == "softmax_grad" || t == "layer_norm") {
    rowsOf(r.i64("columns"));
  } else if (t == "layer_norm_grad") {
    const int64_t cap = r.i64("capacity"), E = r.i64("columns");
    rowsOf(E);
    s.scratch = (2 * cap + 2 * columnSums(s, cap, E) * E) * 8; // (mean, rstd), dw, db
  } else if (t == "cross_entropy") {
    rowsOf(r.i64("columns"));
    s.phases.push_back({1, kThreads});
    s.scratch = 2 * r.rows().count * 8; // loss and used per row
  } else if (t == "cross_entropy_with_grad" || t == "cross_entropy_grad") {
    s.phases.push_back({1, kThreads}); // the labelled rows' count
    rowsOf(r.i64("columns"));
    if (t == "cross_entropy_with_grad")
      s.phases.push_back({1, kThreads}); // the loss terms' sum
    s.scratch = (1 + r.rows().count) * 8;
  } else if (t == "embedding") {
    s.phases = {strided(r.rows().count * r.i64("columns"))};
  } else if (t == "embedding_grad") {
    const int64_t V = r.i64("vocab"), E = r.i64("columns");
    const int64_t chunks = std::min<int64_t>(V, 64), colBlocks = (E + kThreads - 1) / kThreads;
    s.phases = {{chunks * colBlocks, kThreads}}; // the scatter
    if (!r.flag("accumulate")) // into zeros
      s.phases.insert(s.phases.begin(), strided(V * E, 4));
  } else if (t == "copies" || t == "iota") {
    if (auto zero = k.getParamsAttr().getAs<IntegerAttr>("zero_bytes"))
      s.phases.push_back(strided(zero.getInt(), 4));
    auto nests = k.getParamsAttr().getAs<ArrayAttr>("nests");
    for (Attribute a : nests ? nests : ArrayAttr::get(k.getContext(), {})) {
      ParamsReader n(dyn_cast<DictionaryAttr>(a), k.getSymName());
      Shape dims = n.i64s("dims");
      int64_t lanes = n.i64("vector_lanes");
      if (auto err = n.error())
        return std::move(err);
      s.phases.push_back(strided(product(dims) / std::max<int64_t>(1, lanes)));
    }
  } else if (t == "reduction") {
    ReductionKernel red = decodeReduction(r);
    if (red.shape == ReductionKernel::Rows)
      s.phases = {perRow(red.rows, red.length)};
    else if (red.shape == ReductionKernel::Columns)
      s.scratch = columnSums(s, red.rows.count, red.length) * red.length * 8;
    else
      s.phases = {strided(red.outputs)};
  } else if (t == "attention") {
    AttentionKernel a = decodeAttention(r);
    if (auto err = r.error())
      return std::move(err);
    attentionSchedule(a, s, k.getSymName());
  } else {
    return failure(k, "no CUDA schedule for template '" + t + "'");
  }
  if (auto err = r.error())
    return std::move(err);
  return s;
}

/// The schedule of a kernel with a body, from its nest or segments.
llvm::Expected<CudaSchedule> bodySchedule(plan::KernelOp k) {
  ParamsReader r(k.getParamsAttr(), k.getSymName());
  CudaSchedule s;
  switch (k.getKind()) {
  case plan::KernelTemplate::optimizer:
  case plan::KernelTemplate::reduction: {
    const bool optimizer = k.getKind() == plan::KernelTemplate::optimizer;
    Shape flat = r.i64s("segments");
    int64_t total = 0;
    for (size_t i = 1; i < flat.size(); i += optimizer ? 3 : 2)
      total += flat[i];
    if (optimizer) {
      s.phases = {strided(total, 4)};
    } else { // the gradient norm: per-block partial sums of squares, then their sum
      const int64_t blocks = blocksFor(total, kThreads * 8, 1024);
      s.phases = {{blocks, kThreads}, {1, kThreads}};
      s.scratch = blocks * 8;
    }
    break;
  }
  case plan::KernelTemplate::column_reduction: {
    const int64_t C = r.i64("columns");
    s.scratch = columnSums(s, r.rows().count, C) * C * 8;
    break;
  }
  case plan::KernelTemplate::rows: {
    Shape dims = r.i64s("dims");
    s.phases = {perRow(r.rows(), dims.empty() ? 1 : dims.back())};
    break;
  }
  default: {
    Shape dims = r.i64s("dims");
    if (!r.has("vector_lanes"))
      return failure(k, "no vector decision (run mlc-cuda-vectorize first)");
    s.phases = {strided(product(dims) / std::max<int64_t>(1, r.i64("vector_lanes")))};
  }
  }
  if (auto err = r.error())
    return std::move(err);
  return s;
}

} // namespace

int64_t attentionGridHeads(const AttentionKernel &a) {
  return (a.varlen ? 1 : a.batch) * a.heads;
}

bool attentionOnTensorCores(const AttentionKernel &a) {
  return a.bf16Products && a.element.isF32() && a.headDim % 16 == 0 && a.headDim <= 256 &&
         a.valueDim <= 256 && a.valueDim % (a.backward ? 16 : 8) == 0;
}

llvm::Expected<CudaSchedule> decideCudaSchedule(plan::KernelOp k) {
  if (!k.getBody().empty())
    return bodySchedule(k);
  if (auto t = k.getTemplateName())
    return templateSchedule(k, *t);
  return failure(k, "neither a template nor a body: nothing to schedule");
}

std::optional<CudaSchedule> readCudaSchedule(plan::KernelOp k) {
  auto launch = k->getAttrOfType<ArrayAttr>(plan::kCudaLaunch);
  if (!launch)
    return std::nullopt;
  CudaSchedule s;
  for (Attribute a : launch) {
    ArrayRef<int64_t> gb = cast<DenseI64ArrayAttr>(a).asArrayRef();
    s.phases.push_back({gb[0], gb[1]});
  }
  if (auto scratch = k->getAttrOfType<IntegerAttr>(plan::kCudaScratch))
    s.scratch = scratch.getInt();
  if (auto tile = k->getAttrOfType<IntegerAttr>(plan::kCudaTile))
    s.tile = tile.getInt();
  if (auto refusal = k->getAttrOfType<StringAttr>(kCudaRefusal))
    s.refusal = refusal.str();
  return s;
}

void writeCudaSchedule(plan::KernelOp k, const CudaSchedule &s) {
  Builder b(k.getContext());
  SmallVector<Attribute> phases;
  for (const Phase &p : s.phases)
    phases.push_back(b.getDenseI64ArrayAttr({p.grid, p.block}));
  k->setAttr(plan::kCudaLaunch, b.getArrayAttr(phases));
  k->setAttr(plan::kCudaScratch, b.getI64IntegerAttr(s.scratch));
  if (s.tile)
    k->setAttr(plan::kCudaTile, b.getI64IntegerAttr(s.tile));
  if (!s.refusal.empty())
    k->setAttr(kCudaRefusal, b.getStringAttr(s.refusal));
}

} // namespace mlc::lowering

namespace {

class CudaLaunchPass : public mlc::impl::MlcCudaLaunchBase<CudaLaunchPass> {
public:
  void runOnOperation() final {
    bool failed = false;
    getOperation().walk([&](mlc::plan::KernelOp k) {
      if (k->hasAttr(mlc::plan::kCudaLaunch))
        return; // scheduled already (by hand, or an earlier run)
      auto s = mlc::lowering::decideCudaSchedule(k);
      if (!s) {
        k.emitError(llvm::toString(s.takeError()));
        failed = true;
        return;
      }
      mlc::lowering::writeCudaSchedule(k, *s);
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
