// Fuzz target: the ONNX importer. Any bytes give an imported, verified
// module or an llvm::Error naming the problem; never a crash or a hang.
#include "frontend/onnx/OnnxImporter.h"

#include "mlir/IR/MLIRContext.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *ctx = [] {
    auto *c = new mlir::MLIRContext();
    c->disableMultithreading();
    return c;
  }();
  mlc::OnnxImportOptions options;
  options.microBatch = 2;
  options.seqLen = 8;
  options.foldLimit = int64_t(1) << 16; // keeps every input fast
  auto imported = mlc::importOnnxBytes(
      *ctx, llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx", options);
  if (!imported)
    llvm::consumeError(imported.takeError());
  return 0;
}
