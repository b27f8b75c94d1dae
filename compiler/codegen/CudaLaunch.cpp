//===- CudaLaunch.cpp - mlc-cuda-launch: the CUDA schedule on kernel IR ----===//
//
// The CUDA target's launch decisions, made once per kernel: a template's by
// its model's scheduleCuda (compiler/codegen/templates/) from the building
// blocks below, a body's here from its nest and mlc-cuda-vectorize's lanes:
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
#include "compiler/codegen/templates/TemplateModel.h"

#include "mlir/IR/Builders.h"

namespace mlc {
#define GEN_PASS_DEF_MLCCUDALAUNCH
#include "compiler/codegen/Passes.h.inc"
} // namespace mlc

using namespace mlir;

namespace mlc::lowering {

namespace {

using Phase = CudaSchedule::Phase;
constexpr int64_t kThreads = kCudaThreads; // a grid-stride or column phase's block

/// Blocks for `work` items of `per` items each, at least 1, at most `cap`.
int64_t blocksFor(int64_t work, int64_t per, int64_t cap) {
  int64_t g = (work + per - 1) / per;
  return std::max<int64_t>(1, std::min(g, cap));
}

} // namespace

Phase cudaStrided(int64_t work, int64_t perThread) {
  return {blocksFor(work, kThreads * perThread, 4096), kThreads};
}

Phase cudaPerRow(const Rows &rows, int64_t C) {
  return {std::max<int64_t>(1, std::min<int64_t>(rows.count, 1 << 20)),
          C <= 64 ? 64 : C <= 256 ? 128 : 256};
}

Phase cudaOneBlock() { return {1, kThreads}; }

int64_t cudaColumnSums(CudaSchedule &s, int64_t R, int64_t C) {
  const int64_t chunks = blocksFor(R, 16, 64), colBlocks = (C + kThreads - 1) / kThreads;
  s.phases.push_back({chunks * colBlocks, kThreads});
  s.phases.push_back({colBlocks, kThreads});
  return chunks;
}

namespace {

llvm::Error failure(plan::KernelOp k, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("kernel @" + k.getSymName() + ": " + why).str());
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
      s.phases = {cudaStrided(total, 4)};
    } else { // the gradient norm: per-block partial sums of squares, then their sum
      const int64_t blocks = blocksFor(total, kThreads * 8, 1024);
      s.phases = {{blocks, kThreads}, {1, kThreads}};
      s.scratch = blocks * 8;
    }
    break;
  }
  case plan::KernelTemplate::column_reduction: {
    const int64_t C = r.i64("columns");
    s.scratch = cudaColumnSums(s, r.rows().count, C) * C * 8;
    break;
  }
  case plan::KernelTemplate::rows: {
    Shape dims = r.i64s("dims");
    s.phases = {cudaPerRow(r.rows(), dims.empty() ? 1 : dims.back())};
    break;
  }
  default: {
    Shape dims = r.i64s("dims");
    if (!r.has("vector_lanes"))
      return failure(k, "no vector decision (run mlc-cuda-vectorize first)");
    s.phases = {cudaStrided(product(dims) / std::max<int64_t>(1, r.i64("vector_lanes")))};
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
  plan::TemplateAttrInterface t = k.getKernelTemplateAttr();
  if (!t)
    return failure(k, "neither a template nor a body: nothing to schedule");
  CudaSchedule s;
  if (auto err = t.scheduleCuda(k, s))
    return std::move(err);
  return s;
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
  /// The plan dialect and its templates' models (templates/).
  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    MlcCudaLaunchBase::getDependentDialects(registry);
    mlc::lowering::registerTemplateModels(registry);
  }
  void runOnOperation() final {
    bool failed = false;
    getOperation().walk([&](mlc::plan::KernelOp k) {
      auto phases = k->getAttrOfType<ArrayAttr>(mlc::plan::kCudaLaunch);
      auto s = mlc::lowering::decideCudaSchedule(k);
      if (!s && phases) {
        // Scheduled by hand where the pass could not decide (a nest
        // without its vector decision): the printer refuses it if need be.
        llvm::consumeError(s.takeError());
        return;
      }
      if (!s) {
        k.emitError(llvm::toString(s.takeError()));
        failed = true;
        return;
      }
      if (phases) {
        // Scheduled already (by hand, or an earlier run): it keeps its
        // schedule if it runs the phases the kernel has.
        if (phases.size() != s->phases.size()) {
          InFlightDiagnostic d = k.emitOpError("@")
                                 << k.getSymName() << ": cuda.launch has " << phases.size()
                                 << " phases where ";
          if (auto t = k.getKernelTemplateAttr())
            d << "template '" << t.getTemplateName() << "'"
              << (k.getParamsAttr() && k.getParamsAttr().get("backward") ? " (backward)" : "");
          else
            d << "its " << mlc::plan::stringifyKernelTemplate(k.getKind()) << " body";
          d << " runs " << s->phases.size();
          failed = true;
        }
        return;
      }
      mlc::lowering::writeCudaSchedule(k, *s);
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
