//===- CpuTarget.cpp - kernels as C++ with OpenMP ---------------------------===//
//
// The CPU kernel target: each kernel is an extern "C" function of the
// package's kernels.cpp, compiled by the host compiler. Loops are shared out
// among OpenMP threads (large ones only); inner loops are written so that
// the compiler vectorizes them; reductions are deterministic (per-thread
// partials combined in thread order).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelPrelude.h"
#include "compiler/codegen/LoweringImpl.h"

#include <sstream>

namespace mlc::lowering {

namespace {

/// The CPU target's words for scalar code: C++ with the prelude's
/// vectorizable exp and tanh for f32 (libm for f64, whose results the
/// gradient checks compare) and its counter-based dropout generator.
class CpuScalarEmitter final : public ScalarEmitter {
public:
  CpuScalarEmitter(const std::string &index, std::string &prologue)
      : index(index), prologue(prologue) {}
  std::string literal(double value, Type el) override { return lowering::literal(value, el); }
  std::string call(llvm::StringRef fn, Type el, llvm::ArrayRef<std::string> args) override {
    std::string f = fn == "exp"    ? expFn(el)
                    : fn == "tanh" ? tanhFn(el)
                                   : "std::" + fn.str();
    std::string out = f + "(";
    for (size_t i = 0; i < args.size(); ++i)
      out += (i ? ", " : "") + args[i];
    return out + ")";
  }
  std::string typeName(Type el) override { return cType(el); }
  std::string uniform(int64_t seed) override {
    // The key of (seed, step), declared once per kernel.
    std::string key = "key" + std::to_string(seed);
    std::string decl = "  const uint64_t " + key + " = mlc_key(" + std::to_string(seed) +
                       "ull, (uint64_t)ctx->step);\n";
    if (prologue.find(decl) == std::string::npos)
      prologue += decl;
    return "mlc_uniform(" + key + ", " + index + ")";
  }

private:
  const std::string &index;
  std::string &prologue;
};

class CpuTarget final : public KernelTarget {
public:
  std::string name() const override { return "cpu"; }

  std::unique_ptr<ScalarEmitter> scalarEmitter(const std::string &index,
                                              std::string &prologue) override {
    return std::make_unique<CpuScalarEmitter>(index, prologue);
  }

  std::string prelude() override { return kernelPrelude(); }

  std::string function(const std::string &name, const std::string &body) override {
    return "\nextern \"C\" void " + name + "(char **b, MlcKernelCtx *ctx) {\n  (void)ctx;\n" +
           body + "}\n";
  }

  std::string arguments(const std::vector<KernelArg> &args) override {
    std::string s;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string c = args[i].written ? "" : "const ";
      std::string t = cType(args[i].element);
      s += "  " + c + t + " *p" + std::to_string(i) + " = (" + c + t + " *)b[" +
           std::to_string(i) + "];\n";
    }
    return s;
  }

  /// A loop nest over `shape`. Unit dimensions are dropped and dimensions
  /// that are contiguous for every access merge, so most nests are one or
  /// two loops; nests of 8192 elements or more are shared out among threads.
  std::string pointwise(const Shape &shape, const std::vector<Access> &accs,
                        const std::string &body, bool dynamic) override {
  Shape dims;
  std::vector<Shape> strides(accs.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < accs.size() && merge; ++k)
      merge = strides[k].back() == accs[k].strides[d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < accs.size(); ++k)
        strides[k].back() = accs[k].strides[d];
    } else {
      dims.push_back(shape[d]);
      for (size_t k = 0; k < accs.size(); ++k)
        strides[k].push_back(accs[k].strides[d]);
    }
  }
  std::ostringstream os;
  int64_t total = product(dims);
  if (!dims.empty() && total >= 8192)
    os << "#pragma omp parallel for"
       << (dims.size() > 1 ? " collapse(" + std::to_string(dims.size() - 1) + ")"
                           : std::string())
       << "\n";
  // With a dynamic leading dimension (always kept, capacity >= 2), the
  // outermost loop, which holds it, runs over the actual rows.
  for (size_t d = 0; d < dims.size(); ++d)
    os << "for (int64_t i" << d << " = 0; i" << d << " < "
       << (d == 0 ? rowsExpr(dims[0], dynamic) : std::to_string(dims[d])) << "; ++i" << d
       << ")\n";
  os << "{\n";
  for (size_t k = 0; k < accs.size(); ++k) {
    os << "  const int64_t o" << k << " = " << accs[k].base;
    for (size_t d = 0; d < dims.size(); ++d)
      if (strides[k][d])
        os << " + i" << d << " * " << strides[k][d];
    os << ";\n";
  }
  os << body << "}\n";
  return os.str();
}


  std::string columnReduction(const std::string &rows, int64_t columns,
                              const std::string &offsets, const std::string &body, int slot,
                              const std::string &type) override {
    // Rows are shared out among threads; each thread sums its rows into its
    // own partial, and the partials are added in thread order, so results
    // do not depend on timing.
    std::string C = std::to_string(columns);
    std::ostringstream k;
    k << "  const int nt = omp_get_max_threads();\n"
      << "  std::vector<double> part((size_t)nt * " << C << ", 0.0);\n"
      << "#pragma omp parallel\n  {\n"
      << "    double *acc = part.data() + (size_t)omp_get_thread_num() * " << C << ";\n"
      << "#pragma omp for schedule(static)\n"
      << "    for (int64_t r = 0; r < " << rows << "; ++r)\n"
      << "    for (int64_t c = 0; c < " << C << "; ++c) {\n"
      << "      const int64_t flat = r * " << C << " + c;\n"
      << offsets << body << "    }\n  }\n"
      << "  for (int64_t c = 0; c < " << C << "; ++c) {\n"
      << "    double s = 0;\n"
      << "    for (int t = 0; t < nt; ++t) s += part[(size_t)t * " << C << " + c];\n"
      << "    p" << slot << "[c] = (" << type << ")s;\n  }\n";
    return k.str();
  }

  /// One parallel region for every segment: the segments are work-shared
  /// loops without barriers between them, so the update is a single pass
  /// over the flat buffers.
  std::string optimizer(mlir::Type el, const std::vector<Segment> &segments,
                        const std::string &setup, const std::string &body) override {
    std::string T = cType(el);
    std::ostringstream k;
    k << "  " << T << " *P = (" << T << " *)b[0];\n  " << T << " *M = (" << T
      << " *)b[1];\n  " << T << " *V = (" << T << " *)b[2];\n  const " << T
      << " *G = (const " << T << " *)b[3];\n  const double *h = (const double *)b[4];\n"
      << setup << segmentTable(segments, true)
      << "#pragma omp parallel\n"
      << "  for (int s = 0; s < " << segments.size() << "; ++s) {\n"
      << "    const int64_t off = seg[s][0], n = seg[s][1];\n"
      << "    const " << T << " x4 = seg[s][2] ? decayOn : (" << T << ")1;\n"
      << "    " << T << " *__restrict pp = P + off;\n    " << T
      << " *__restrict mm = M + off;\n    " << T << " *__restrict vv = V + off;\n    const "
      << T << " *__restrict gg = G + off;\n"
      << "#pragma omp for simd schedule(static) nowait\n"
      << "    for (int64_t i = 0; i < n; ++i) {\n"
      << body << "    }\n  }\n";
    return k.str();
  }

  std::string norm(mlir::Type el, const std::vector<Segment> &segments,
                   const std::string &body, const std::string &value) override {
    std::string T = cType(el);
    std::ostringstream k;
    k << "  double *out = (double *)b[0];\n  const " << T << " *G = (const " << T
      << " *)b[1];\n"
      << segmentTable(segments, false) << "  double sum = 0;\n"
      << "#pragma omp parallel reduction(+ : sum)\n"
      << "  for (int s = 0; s < " << segments.size() << "; ++s) {\n"
      << "    const " << T << " *__restrict gg = G + seg[s][0];\n"
      << "    const int64_t n = seg[s][1];\n"
      << "#pragma omp for schedule(static) nowait\n"
      << "    for (int64_t i = 0; i < n; ++i) {\n"
      << body << "      sum += " << value << ";\n    }\n  }\n  out[0] = std::sqrt(sum);\n";
    return k.str();
  }

private:
  static std::string segmentTable(const std::vector<Segment> &segments, bool decay) {
    std::ostringstream k;
    k << "  static const int64_t seg[" << segments.size() << "][" << (decay ? 3 : 2) << "] = {";
    for (size_t s = 0; s < segments.size(); ++s) {
      k << (s ? ", " : "") << "{" << segments[s].offset << ", " << segments[s].numel;
      if (decay)
        k << ", " << (segments[s].decay ? 1 : 0);
      k << "}";
    }
    k << "};\n";
    return k.str();
  }
};

} // namespace

std::unique_ptr<KernelTarget> createCpuTarget() { return std::make_unique<CpuTarget>(); }

} // namespace mlc::lowering
