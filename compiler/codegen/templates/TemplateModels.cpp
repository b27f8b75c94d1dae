//===- TemplateModels.cpp - every template's model, attached ---------------===//

#include "compiler/codegen/templates/TemplateModel.h"

namespace mlc::lowering {

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
