//===- KernelSet.h - the package's kernels, each once -----------*- C++ -*-===//
//
// Private to compiler/codegen: the kernels the lowering (LoweringImpl.h)
// collects while it lowers the graph functions, each distinct one once.
//
//===----------------------------------------------------------------------===//

#ifndef MLC_COMPILER_CODEGEN_KERNELSET_H
#define MLC_COMPILER_CODEGEN_KERNELSET_H

#include "compiler/codegen/LoweringMarks.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <vector>

namespace mlc::lowering {

using namespace mlir;

using plan::KernelTemplate;

/// The package's kernels, each once: a template kernel (KernelParams.h) by
/// its template and parameters, a kernel with a body by its IR. No target
/// is involved: the lowering is target-neutral.
class KernelSet {
public:
  KernelSet(MLIRContext *context, int64_t tokenCapacity)
      : tokenCapacity(tokenCapacity), scratch(ModuleOp::create(UnknownLoc::get(context))) {}
  /// The module's token capacity (the extent of a dynamic leading dimension).
  const int64_t tokenCapacity;
  struct Kernel {
    std::string name;
    KernelTemplate kind;
    int64_t numArgs;
    Attribute templ; // a template kernel: its template (#plan.NAME) and parameters
    DictionaryAttr params;
    plan::KernelOp body; // a kernel with a body: the op (in `scratch`)
  };
  /// The kernel's name (k<N>), the first kernel's equal to it if any (a
  /// kernel with a body equal to an earlier one's is erased).
  std::string add(Kernel k) {
    std::string key;
    if (k.body) {
      // A graph op cloned into the body leaves its mlc.buffers behind.
      k.body->walk([](Operation *op) { op->removeAttr(kBuffersAttr); });
      llvm::raw_string_ostream os(key);
      os << "body";
      k.body->print(os);
    } else {
      key = "template\0" + std::to_string(uintptr_t(k.templ.getAsOpaquePointer())) + '\0' +
            std::to_string(uintptr_t(k.params.getAsOpaquePointer()));
    }
    auto it = names.find(key);
    if (it != names.end()) {
      if (k.body)
        k.body->erase();
      return kernels[it->second].name;
    }
    k.name = "k" + std::to_string(kernels.size());
    if (k.body)
      k.body.setSymName(k.name);
    names.emplace(key, kernels.size());
    kernels.push_back(std::move(k));
    return kernels.back().name;
  }
  std::vector<Kernel> kernels;
  /// Where kernels with bodies are built before they join the plan.
  OwningOpRef<ModuleOp> scratch;

private:
  std::map<std::string, size_t> names;
};

} // namespace mlc::lowering

#endif // MLC_COMPILER_CODEGEN_KERNELSET_H
