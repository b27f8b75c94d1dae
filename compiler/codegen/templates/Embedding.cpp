//===- Embedding.cpp - the gather of token rows and its scatter ------------===//
//
// p0[r] = table[ids[r]] for `rows` token ids of type `ids` in [0, vocab),
// rows of `columns` elements; its gradient zeroes the [vocab, columns]
// table gradient and adds each token's row to its id's, with no two
// threads adding to one element (on CUDA: column blocks per thread, rows
// split into at most 64 chunks of the vocabulary).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

using K = plan::ParamKind;

double bytesOf(Type t) { return double(plan::elementBytes(t)); }

struct EmbeddingModel : TemplateModel<EmbeddingModel, plan::EmbeddingTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, {"ids", K::Type, true}, MLC_TEMPLATE_ROWS,
      {"vocab", K::I64, true},    {"columns", K::I64, true}};

  /// Rows gathered from the table: each read and written once, and the ids.
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    const double R = double(r.rows().count), C = double(r.i64("columns"));
    plan::TemplateCost c;
    c.bytes = 2 * R * C * bytesOf(r.type("element")) + R * bytesOf(r.type("ids"));
    return checked(r, c);
  }
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    s.phases = {cudaStrided(r.rows().count * r.i64("columns"))};
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.embedding(r.type("element"), r.type("ids"), r.rows(),
                                       r.i64("vocab"), r.i64("columns")));
  }
};

/// `padding`: the row whose gradient stays zero (absent: none).
struct EmbeddingGradModel : TemplateModel<EmbeddingGradModel, plan::EmbeddingGradTemplateAttr> {
  static constexpr plan::TemplateParam kSchema[] = {
      {"element", K::Type, true}, {"ids", K::Type, true},     MLC_TEMPLATE_ROWS,
      {"vocab", K::I64, true},    {"columns", K::I64, true}, {"padding", K::I64, false},
      {"accumulate", K::Flag, false}};

  /// The table zeroed (not with `accumulate`: the rows add to it as it is),
  /// then each token's row added: grad read, table rows read and written.
  llvm::Expected<plan::TemplateCost> getCost(Attribute, Operation *k,
                                             const plan::CostContext &) const {
    ParamsReader r = reader(k);
    const double R = double(r.rows().count), C = double(r.i64("columns"));
    plan::TemplateCost c;
    c.bytes = ((r.flag("accumulate") ? 0 : double(r.i64("vocab")) * C) + 3 * R * C) *
                  bytesOf(r.type("element")) +
              R * bytesOf(r.type("ids"));
    c.flops = R * C;
    return checked(r, c);
  }
  /// [The zeroing,] then (vocabulary chunk, column block) blocks.
  llvm::Error scheduleCuda(Attribute, Operation *k, CudaSchedule &s) const {
    ParamsReader r = reader(k);
    const int64_t V = r.i64("vocab"), E = r.i64("columns");
    const int64_t chunks = std::min<int64_t>(V, 64);
    const int64_t colBlocks = (E + kCudaThreads - 1) / kCudaThreads;
    s.phases = {{chunks * colBlocks, kCudaThreads}}; // the scatter
    if (!r.flag("accumulate")) // into zeros
      s.phases.insert(s.phases.begin(), cudaStrided(V * E, 4));
    return r.error();
  }
  llvm::Expected<std::string> print(Attribute, Operation *k, KernelTarget &target) const {
    ParamsReader r = reader(k);
    return checked(r, target.embeddingGrad(r.type("element"), r.type("ids"), r.rows(),
                                           r.i64("vocab"), r.i64("columns"),
                                           r.has("padding") ? r.i64("padding") : -1,
                                           r.flag("accumulate")));
  }
};

} // namespace

void attachEmbeddingModels(MLIRContext *context) {
  plan::EmbeddingTemplateAttr::attachInterface<EmbeddingModel>(*context);
  plan::EmbeddingGradTemplateAttr::attachInterface<EmbeddingGradModel>(*context);
}

} // namespace mlc::lowering
