//===- Package.h - the compiled package the runtime executes ----*- C++ -*-===//
//
// A package is a directory written by `mlc compile`:
//
//   manifest.json  format and version, model config, shapes, content hashes
//   plan.txt       parameters, inputs and, per function, buffers and steps
//                  (its grammar: runtime/core/PlanFormat.h)
//   kernels.cpp    the C++ kernels (compiled by the host compiler at load)
//   kernels.cu     the same kernels in CUDA C (compiled by NVRTC at load on
//                  a GPU; compiler/codegen/CudaPrelude.h documents its ABI)
//   graph.mlir     the final graph, for inspection
//   aliases.json   optional: parameter -> its other names (tied weights an
//                  ONNX export keeps once); --save writes each name
//
//===----------------------------------------------------------------------===//

#ifndef MLC_RUNTIME_PACKAGE_H
#define MLC_RUNTIME_PACKAGE_H

#include "support/Json.h"
#include "runtime/core/PlanFormat.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlc::rt {

constexpr int kPackageVersion = kPlanVersion;

/// The content hash of a manifest's descriptive fields (model, config, dtype,
/// micro-batch, seq-len), which its files' hashes do not cover: the manifest
/// stores it as "fields_hash", so an edited field is noticed.
std::string manifestFieldsHash(const std::string &model, const std::string &config,
                               const std::string &dtype, int64_t microBatch, int64_t seqLen);

struct Package {
  std::string dir;
  Json manifest;
  std::string dtype; // of parameters: f32 or f64
  std::vector<ParamInfo> params;
  std::vector<InputInfo> inputs;
  std::vector<ScalarsInfo> scalars;
  std::map<std::string, FunctionPlan> functions;
  std::string kernelsSource;
  /// kernels.cu: the same kernels in CUDA C ("" in a package without it).
  std::string cudaSource;
  /// The manifest's dtype: f32, f64, or bf16 (bf16 products, f32 parameters).
  std::string computeDtype;
  int64_t paramCount = 0;
  int64_t tokenCapacity = 0; // > 0 when inputs have a dynamic token dimension
  /// The ranks of a tensor-parallel group the plan is one rank of (1: none);
  /// split parameters carry ParamInfo::tpDim.
  int64_t tensorParallel = 1;
  /// --sequence-parallel: the residual stream holds 1/tensorParallel of the
  /// tokens (the plan's tp_allgather / tp_reducescatter steps).
  bool sequenceParallel = false;
  /// aliases.json: parameter -> its other names, each a name no parameter
  /// has and no other alias repeats.
  std::map<std::string, std::vector<std::string>> aliases;

  /// Reads and checks a package directory; errors name the file and line.
  static Package load(const std::string &dir);
  const FunctionPlan &function(const std::string &name) const;
  const ParamInfo *param(const std::string &name) const;
};


} // namespace mlc::rt

#endif // MLC_RUNTIME_PACKAGE_H
