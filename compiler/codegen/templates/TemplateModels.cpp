//===- TemplateModels.cpp - every template's model, attached ---------------===//

#include "compiler/codegen/templates/TemplateModel.h"

namespace mlc::lowering {

// Each template file's attach function: one line here per file.
void attachFillModels(mlir::MLIRContext *context);
void attachRowModels(mlir::MLIRContext *context);
void attachCrossEntropyModels(mlir::MLIRContext *context);
void attachEmbeddingModels(mlir::MLIRContext *context);
void attachCopyModels(mlir::MLIRContext *context);
void attachReductionModels(mlir::MLIRContext *context);
void attachAttentionModels(mlir::MLIRContext *context);

int64_t accessExtent(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> strides) {
  int64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (d >= strides.size() || strides[d] != 0)
      n *= dims[d];
  return n;
}

void registerTemplateModels(mlir::DialectRegistry &registry) {
  registry.addExtension(+[](mlir::MLIRContext *context, plan::PlanDialect *) {
    attachFillModels(context);
    attachRowModels(context);
    attachCrossEntropyModels(context);
    attachEmbeddingModels(context);
    attachCopyModels(context);
    attachReductionModels(context);
    attachAttentionModels(context);
  });
}


} // namespace mlc::lowering
