//===- TemplateModels.cpp - every template's model, attached ---------------===//

#include "compiler/codegen/templates/TemplateModel.h"

namespace mlc::lowering {

// Each template file's attach function, attach<File>Models: CMake lists
// the files of templates/ in TemplateFamilies.inc (compiler/codegen/
// CMakeLists.txt), so a new file is attached without an edit here.
#define MLC_TEMPLATE_FAMILY(File) void attach##File##Models(mlir::MLIRContext *context);
#include "compiler/codegen/templates/TemplateFamilies.inc"
#undef MLC_TEMPLATE_FAMILY

int64_t accessExtent(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> strides) {
  int64_t n = 1;
  for (size_t d = 0; d < dims.size(); ++d)
    if (d >= strides.size() || strides[d] != 0)
      n *= dims[d];
  return n;
}

void registerTemplateModels(mlir::DialectRegistry &registry) {
  registry.addExtension(+[](mlir::MLIRContext *context, plan::PlanDialect *) {
#define MLC_TEMPLATE_FAMILY(File) attach##File##Models(context);
#include "compiler/codegen/templates/TemplateFamilies.inc"
#undef MLC_TEMPLATE_FAMILY
  });
}

} // namespace mlc::lowering
