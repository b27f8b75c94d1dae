//===- Embedding.cpp - the gather of token rows and its scatter ------------===//
//
// p0[r] = table[ids[r]] for `rows` token ids of type `ids` in [0, vocab),
// rows of `columns` elements; its gradient zeroes the [vocab, columns]
// table gradient and adds each token's row to its id's, with no two
// threads adding to one element (on CUDA: column blocks per thread, rows
// split into at most 64 chunks of the vocabulary). Typed templates: their
// parameters are the attributes' own (#plan.embedding<...>, PlanTemplates.td).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

double bytesOf(Type t) { return double(plan::elementBytes(t)); }

/// What both templates' verifyKernel checks beyond the types: integer ids,
/// a row count, a table of at least one row and one column.
template <typename Model, typename Attr> struct TableModel : TemplateModel<Model, Attr> {
  using Base = TemplateModel<Model, Attr>;
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto a = cast<Attr>(attr);
    if (failed(Base::refuseParams(op)))
      return failure();
    if (!isa<IntegerType>(a.getIds()))
      return Base::kernelError(op) << "parameter 'ids' must be an integer type, got "
                                   << a.getIds();
    return success(succeeded(Base::verifyRowParams(op, a)) &&
                   succeeded(Base::verifyCount(op, "vocab", a.getVocab(), true)) &&
                   succeeded(Base::verifyCount(op, "columns", a.getColumns(), true)));
  }
};

struct EmbeddingModel : TableModel<EmbeddingModel, plan::EmbeddingTemplateAttr> {
  /// Rows gathered from the table: each read and written once, and the ids.
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto a = cast<plan::EmbeddingTemplateAttr>(attr);
    const double R = double(a.getRows()), C = double(a.getColumns());
    plan::TemplateCost c;
    c.bytes = 2 * R * C * bytesOf(a.getElement()) + R * bytesOf(a.getIds());
    return c;
  }
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto a = cast<plan::EmbeddingTemplateAttr>(attr);
    s.phases = {cudaStrided(a.getRows() * a.getColumns())};
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto a = cast<plan::EmbeddingTemplateAttr>(attr);
    return target.embedding(a.getElement(), a.getIds(), rowsOf(a), a.getVocab(),
                            a.getColumns());
  }
};

/// `padding`: the row whose gradient stays zero (absent: none).
struct EmbeddingGradModel : TableModel<EmbeddingGradModel, plan::EmbeddingGradTemplateAttr> {
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto a = cast<plan::EmbeddingGradTemplateAttr>(attr);
    if (failed(TableModel::verifyKernel(attr, op)))
      return failure();
    if (auto pad = a.getPadding(); pad && (*pad < 0 || *pad >= a.getVocab()))
      return kernelError(op) << "parameter 'padding' must be a row of the " << a.getVocab()
                             << "-row table, got " << *pad;
    return success();
  }
  /// The table zeroed (not with `accumulate`: the rows add to it as it is),
  /// then each token's row added: grad read, table rows read and written.
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto a = cast<plan::EmbeddingGradTemplateAttr>(attr);
    const double R = double(a.getRows()), C = double(a.getColumns());
    plan::TemplateCost c;
    c.bytes = ((a.getAccumulate() ? 0 : double(a.getVocab()) * C) + 3 * R * C) *
                  bytesOf(a.getElement()) +
              R * bytesOf(a.getIds());
    c.flops = R * C;
    return c;
  }
  /// [The zeroing,] then (vocabulary chunk, column block) blocks.
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    auto a = cast<plan::EmbeddingGradTemplateAttr>(attr);
    const int64_t V = a.getVocab(), E = a.getColumns();
    const int64_t chunks = std::min<int64_t>(V, 64);
    const int64_t colBlocks = (E + kCudaThreads - 1) / kCudaThreads;
    s.phases = {{chunks * colBlocks, kCudaThreads}}; // the scatter
    if (!a.getAccumulate()) // into zeros
      s.phases.insert(s.phases.begin(), cudaStrided(V * E, 4));
    return llvm::Error::success();
  }
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto a = cast<plan::EmbeddingGradTemplateAttr>(attr);
    return target.embeddingGrad(a.getElement(), a.getIds(), rowsOf(a), a.getVocab(),
                                a.getColumns(), a.getPadding().value_or(-1),
                                a.getAccumulate());
  }
};

} // namespace

void attachEmbeddingModels(MLIRContext *context) {
  plan::EmbeddingTemplateAttr::attachInterface<EmbeddingModel>(*context);
  plan::EmbeddingGradTemplateAttr::attachInterface<EmbeddingGradModel>(*context);
}

} // namespace mlc::lowering
