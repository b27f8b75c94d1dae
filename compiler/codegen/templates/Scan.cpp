//===- Scan.cpp - running sums ---------------------------------------------===//
//
// `scan` (mlc.cumsum): p0 = the running sum of p1 along the middle dimension
// of [rows, length, inner]. Each of the rows x inner lines is one element of
// a target pointwise nest (a CUDA thread, a CPU loop iteration) that walks
// its `length` elements in order, so the sum is sequential and exact for
// integers: position ids from an attention mask are `length` (the sequence)
// long and there are batch x 1 lines. Memory: p1 read once, p0 written once.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/LoweringImpl.h"
#include "compiler/codegen/templates/TemplateModel.h"

using namespace mlir;

namespace mlc::lowering {

namespace {

struct ScanModel : TemplateModel<ScanModel, plan::ScanTemplateAttr> {
  /// Its lines are counts; the sum is kept in the element's C type, which
  /// adds: f32, f64, i32, i64.
  LogicalResult verifyKernel(Attribute attr, Operation *op) const {
    auto scan = cast<plan::ScanTemplateAttr>(attr);
    if (failed(refuseParams(op)))
      return mlir::failure();
    if (int64_t args = kernelOf(op).getNumArgs(); args != 2)
      return kernelError(op) << "takes 2 arguments (the sums, the input), got " << args;
    Type el = scan.getElement();
    if (!el.isF32() && !el.isF64() && !el.isInteger(32) && !el.isInteger(64))
      return kernelError(op) << "parameter 'element' must be f32, f64, i32 or i64, got " << el;
    return success(succeeded(verifyRowParams(op, scan)) &&
                   succeeded(verifyCount(op, "length", scan.getLength(), true)) &&
                   succeeded(verifyCount(op, "inner", scan.getInner(), true)));
  }

  static int64_t lines(plan::ScanTemplateAttr scan) { return scan.getRows() * scan.getInner(); }

  /// Each element read and written once, one add each.
  llvm::Expected<plan::TemplateCost> getCost(Attribute attr, Operation *,
                                             const plan::CostContext &) const {
    auto scan = cast<plan::ScanTemplateAttr>(attr);
    const double n = double(lines(scan)) * double(scan.getLength());
    plan::TemplateCost c;
    c.bytes = 2 * n * plan::elementBytes(scan.getElement()), c.flops = n;
    return c;
  }

  /// One grid-stride phase, a thread per line.
  llvm::Error scheduleCuda(Attribute attr, Operation *, CudaSchedule &s) const {
    s.phases = {cudaStrided(lines(cast<plan::ScanTemplateAttr>(attr)))};
    return llvm::Error::success();
  }

  /// The target's pointwise nest over the lines ([rows] or [rows, inner]:
  /// o0, o1 at each line's first element), its body the walk along it.
  llvm::Expected<std::string> print(Attribute attr, Operation *, KernelTarget &target) const {
    auto scan = cast<plan::ScanTemplateAttr>(attr);
    Type el = scan.getElement();
    const int64_t L = scan.getLength(), inner = scan.getInner();
    PointwiseNest n;
    n.dims = {scan.getRows()};
    Shape strides = {L * inner};
    if (inner > 1) {
      n.dims.push_back(inner);
      strides.push_back(1);
    }
    n.dynamic = scan.getRowsPerToken() != 0;
    n.accs = {{0, 0, strides, el}, {1, 0, strides, el}};
    n.vector = {false, false};
    n.read = {false, true};
    n.written = {true, false};
    n.offsetUsed = {true, true};
    const std::string T = cType(el), step = std::to_string(inner), last = std::to_string(L - 1);
    // From the end with `reverse`; an exclusive sum stores before it adds.
    // Each element is read before its result is stored (p0 may be p1).
    const std::string at = scan.getReverse() ? "(" + last + " - j) * " + step : "j * " + step;
    const std::string store = "      p0[o0 + k] = s;\n", add = "      s += x;\n";
    const std::string body = "    " + T + " s = 0;\n" + "    for (int64_t j = 0; j < " +
                             std::to_string(L) + "; ++j) {\n      const int64_t k = " + at +
                             ";\n      const " + T + " x = p1[o1 + k];\n" +
                             (scan.getExclusive() ? store + add : add + store) + "    }\n";
    return target.arguments({{el, true}, {el, false}}) + target.pointwiseNest(n, body, body);
  }
};

} // namespace

void attachScanModels(MLIRContext *context) {
  plan::ScanTemplateAttr::attachInterface<ScanModel>(*context);
}

} // namespace mlc::lowering
