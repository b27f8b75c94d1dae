//===- ExportOnnx.cpp - mlc export-onnx ------------------------------------===//
//
//   mlc export-onnx --model model.onnx --weights W.safetensors -o trained.onnx
//
// The model with its initializers replaced by trained values: the weights
// `mlc train model.onnx --save W.safetensors` wrote (frontend/onnx/OnnxExport.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/Tool.h"

#include "frontend/onnx/OnnxExport.h"

using namespace llvm;

namespace mlc::tool {
namespace {

cl::opt<std::string> exportModel("model", cl::desc("The ONNX model that was trained"),
                                 cl::value_desc("model.onnx"), cl::sub(exportOnnxCmd()),
                                 cl::cat(category()));
cl::opt<std::string> exportWeights("weights",
                                   cl::desc("The trained weights (mlc train --save), under "
                                            "the model's initializer names"),
                                   cl::value_desc("W.safetensors"), cl::sub(exportOnnxCmd()),
                                   cl::cat(category()));
cl::opt<std::string> exportOutput("o", cl::desc("The trained model to write"),
                                  cl::value_desc("trained.onnx"), cl::sub(exportOnnxCmd()),
                                  cl::cat(category()));

} // namespace

int runExportOnnx() {
  if (exportModel.empty() || exportWeights.empty() || exportOutput.empty())
    return fail("usage: mlc export-onnx --model model.onnx --weights W.safetensors -o "
                "trained.onnx");
  auto result = mlc::exportOnnxFile(exportModel, exportWeights, exportOutput);
  if (!result)
    return fail(toString(result.takeError()));
  outs() << "mlc export-onnx: " << result->replaced << " initializers replaced";
  if (result->untied)
    outs() << " (" << result->untied << " of them in place of Identity nodes)";
  outs() << ", " << result->kept << " kept; ";
  if (result->recovered)
    outs() << result->recovered
           << " parameters the exporter's optimizer had folded or merged given back, each read "
              "by a node of its own; ";
  outs() << "wrote " << exportOutput << "\n";
  return 0;
}

} // namespace mlc::tool
