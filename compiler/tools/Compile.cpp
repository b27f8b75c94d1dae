//===- Compile.cpp - mlc compile and mlc import ----------------------------===//
//
//   mlc compile MODEL [--emit=package|graph|mlir|plan|kernels|cuda|ptx] [-o PATH]
//   mlc compile MODEL --report [--report-json FILE] [--cuda-arch sm_90,...]
//   mlc compile MODEL [--report] --roofline h200|bw=TB/s,bf16=TFLOP/s,f32=TFLOP/s
//   mlc compile MODEL [--report] --device-memory SIZE|h100|h200  (MemoryReport.cpp)
//   mlc import MODEL.onnx [-o FILE]
//
//===----------------------------------------------------------------------===//

#include "compiler/tools/MemoryPlan.h"
#include "compiler/tools/Model.h"
#include "compiler/tools/Roofline.h"
#include "compiler/tools/Tool.h"

#include "contract/StepFunctions.h"
#include "dialects/plan/PlanDialect.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/Nvrtc.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <optional>
#include <sys/stat.h>

using namespace llvm;

namespace mlc::tool {
namespace {

enum class Emit { Package, Graph, Mlir, Plan, Kernels, Cuda, Ptx };
cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"),
    cl::values(clEnumValN(Emit::Package, "package", "a package directory (default)"),
               clEnumValN(Emit::Graph, "graph", "the forward graph as built, in the mlc dialect"),
               clEnumValN(Emit::Mlir, "mlir", "the final MLIR: @forward and @train_step"),
               clEnumValN(Emit::Plan, "plan", "the plan dialect: buffers, kernels and steps"),
               clEnumValN(Emit::Kernels, "kernels", "the generated C++ kernels"),
               clEnumValN(Emit::Cuda, "cuda", "the generated CUDA kernels (kernels.cu)"),
               clEnumValN(Emit::Ptx, "ptx",
                          "kernels.cu compiled to PTX by NVRTC, for the first --cuda-arch")),
    cl::init(Emit::Package), cl::sub(compileCmd()), cl::cat(category()));
cl::opt<std::string> output("o",
                            cl::desc("Package directory (default MODEL.mlcpkg), or the "
                                     "output file of --emit ('-' for stdout)"),
                            cl::value_desc("path"), cl::init(""), cl::sub(compileCmd()),
                            cl::sub(importCmd()),
                            cl::cat(category()));
cl::opt<bool> report("report",
                     cl::desc("Print kernel counts and bytes moved per step, unfused and "
                              "fused, and the memory each rank allocates"),
                     cl::sub(compileCmd()), cl::cat(category()));
cl::opt<std::string> cudaArch("cuda-arch",
                              cl::desc("--report: the GPU architectures whose ptxas statistics "
                                       "it prints (NVRTC, comma-separated), or none (or "
                                       "nothing) for no CUDA statistics; --emit=ptx: the first "
                                       "one's PTX"),
                              cl::value_desc("sm_XX,..."), cl::init("sm_90"), cl::sub(compileCmd()),
                              cl::cat(category()));
cl::opt<std::string> reportJson("report-json", cl::desc("Write the report as JSON"),
                                cl::value_desc("file"), cl::sub(compileCmd()),
                                cl::cat(category()));
cl::opt<std::string> roofline(
    "roofline",
    cl::desc("Print the step time the plan predicts at a GPU's limits, per kernel and GEMM: "
             "bytes, FLOPs, max(bytes / bandwidth, FLOPs / peak). A device (h200, h100), "
             "optionally with overrides (h200,launch=3), or one given whole: "
             "bw=TB/s,bf16=TFLOP/s,f32=TFLOP/s[,f32gemm=,peak-bf16=,peak-f32=TFLOP/s,"
             "launch=us]"),
    cl::value_desc("device"), cl::sub(compileCmd()), cl::cat(category()));
cl::opt<bool> inferenceOnly("inference", cl::desc("Compile @forward only (no training step)"),
                            cl::sub(compileCmd()), cl::cat(category()));
cl::opt<bool> printDebugInfo(
    "mlir-print-debuginfo",
    cl::desc("--emit=graph|mlir|plan and mlc import: print each op's location, the ONNX "
             "node or the builtin model's layer it comes from (gpt2.h.3.attn)"),
    cl::sub(compileCmd()), cl::sub(importCmd()), cl::cat(category()));


/// Writes `text` to `path`: a file by a temporary and a rename (a failure,
/// a full disk, leaves the previous one as it was); "-" and the names of an
/// open descriptor (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N)
/// through that descriptor, so that whatever it is (a file opened for
/// appending, a pipe) keeps its contents; a device or FIFO as a stream,
/// opened as it is. Either way a failed write is an error that names it.
int writeTextTo(const std::string &path, const std::string &text) {
  int fd = -1;
  StringRef p(path);
  if (p == "-" || p == "/dev/stdout")
    fd = 1;
  else if (p == "/dev/stderr")
    fd = 2;
  else if ((p.consume_front("/dev/fd/") || p.consume_front("/proc/self/fd/")) &&
           p.getAsInteger(10, fd))
    fd = -1;
  struct stat st;
  const bool device = fd < 0 && stat(path.c_str(), &st) == 0 &&
                      (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
  if (fd < 0 && !device) {
    try {
      mlc::rt::writeFileAtomically(path, text);
    } catch (const mlc::rt::Error &e) {
      return fail(e.what());
    }
    return 0;
  }
  std::error_code ec;
  std::optional<raw_fd_ostream> file;
  if (fd > 2)
    file.emplace(fd, /*shouldClose=*/false);
  else if (fd < 0)
    file.emplace(path, ec, sys::fs::CD_OpenExisting, sys::fs::FA_Write, sys::fs::OF_Append);
  if (ec)
    return fail(path + ": " + ec.message());
  raw_fd_ostream &os = file ? *file : fd == 2 ? errs() : outs();
  os << text;
  os.flush();
  if (os.has_error()) {
    std::string why = os.error().message();
    os.clear_error();
    return fail((path == "-" ? std::string("standard output") : path) + ": write failed: " +
                why);
  }
  return 0;
}

/// --cuda-arch none, or an empty list: no CUDA statistics in the report.
bool noCudaArch() { return cudaArch == "none" || StringRef(cudaArch).trim(" ,").empty(); }

int writeText(const std::string &text) {
  return writeTextTo(output.empty() ? std::string("-") : std::string(output), text);
}

/// Prints `module` for --emit, with locations under --mlir-print-debuginfo.
int writeModule(mlir::Operation *module) {
  std::string text;
  raw_string_ostream os(text);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo(printDebugInfo));
  return writeText(text + "\n");
}

/// Whether the report holds kernels of this template (kernels.cu's
/// `// mlc.kernel` line names it as the plan dialect spells it) to no
/// spills: the pointwise, row and optimizer kernels, the memory-bound bulk
/// of a step.
bool spillFreeTemplate(StringRef kind) {
  std::optional<plan::KernelTemplate> t = plan::symbolizeKernelTemplate(kind);
  if (!t)
    return false;
  switch (*t) {
  case plan::KernelTemplate::pointwise:
  case plan::KernelTemplate::rows:
  case plan::KernelTemplate::optimizer:
    return true;
  default:
    return false;
  }
}

/// The report's CUDA part: kernels.cu compiled by NVRTC for each of
/// --cuda-arch, and what ptxas made of every kernel. Spills in the
/// pointwise, row and optimizer kernels are the ones that cost bandwidth;
/// their total is its last line per architecture.
int cudaReport(const std::string &source) {
  if (noCudaArch())
    return 0;
  std::string why;
  try {
    // Read first, with or without NVRTC: a kernel CUDA cannot run fails here.
    auto kernels = mlc::rt::parseCudaKernels(source, "kernels.cu");
    mlc::rt::Nvrtc *nvrtc = mlc::rt::Nvrtc::get(&why);
    if (!nvrtc) {
      outs() << "  CUDA kernels: not compiled (" << why << ")\n";
      return 0;
    }
    SmallVector<StringRef> arches;
    StringRef(cudaArch).split(arches, ',', -1, false);
    for (StringRef arch : arches) {
      auto t0 = std::chrono::steady_clock::now();
      auto out = nvrtc->compile(source, "kernels.cu", arch.trim().str(), /*verbose=*/true);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      auto stats = mlc::rt::parsePtxasLog(out.log);
      outs() << formatv("  CUDA kernels for {0} (NVRTC {1}, {2:f1} s, {3} KB cubin): {4}\n",
                        arch.trim(), nvrtc->version(), seconds, out.image.size() / 1024,
                        kernels.size());
      outs() << formatv("    {0,-8} {1,-17} {2,5} {3,12} {4,8} {5,7} {6}\n", "kernel",
                        "template", "regs", "spill st/ld", "smem", "stack", "launches");
      int64_t hotSpills = 0, otherSpills = 0;
      std::vector<const mlc::rt::CudaKernelInfo *> order; // k0, k1, ..., k10
      for (auto &[name, k] : kernels)
        order.push_back(&k);
      std::stable_sort(order.begin(), order.end(), [](auto *a, auto *b) {
        return a->name.size() != b->name.size() ? a->name.size() < b->name.size()
                                                : a->name < b->name;
      });
      for (const mlc::rt::CudaKernelInfo *kp : order) {
        const mlc::rt::CudaKernelInfo &k = *kp;
        const std::string &name = k.name;
        auto it = stats.find(name);
        if (it == stats.end())
          return fail("ptxas reported nothing for kernel " + name + " (" + arch.str() + ")");
        const mlc::rt::PtxasStats &st = it->second;
        std::string launches;
        for (auto &l : k.launches)
          launches += (launches.empty() ? "" : ",") + std::to_string(l.grid) + "x" +
                      std::to_string(l.block);
        outs() << formatv("    {0,-8} {1,-17} {2,5} {3,12} {4,8} {5,7} {6}\n", name, k.kind,
                          st.registers,
                          std::to_string(st.spillStores) + "/" + std::to_string(st.spillLoads),
                          st.sharedBytes, st.stackBytes, launches);
        const bool hot = spillFreeTemplate(k.kind);
        (hot ? hotSpills : otherSpills) += st.spillStores + st.spillLoads;
      }
      outs() << formatv("  {0}: spill bytes in pointwise, rows and optimizer kernels: {1}; in "
                        "the others: {2}\n",
                        arch.trim(), hotSpills, otherSpills);
    }
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  return 0;
}

/// The report's counts: the model lowered with and without fusion (and
/// with one and two layers, to count per layer), kernels and bytes per
/// training step; `json` gets their fields. An ONNX model has one layer
/// count, its own: its per-layer figure is left out.
int countsReport(std::string &json) {
  const bool onnx = isOnnxModel();
  std::string title;
  auto countsFor = [&](int64_t layers, bool fused) -> Expected<mlc::LoweredPackage::Counts> {
    mlir::MLIRContext ctx;
    auto g = compileModel(ctx, /*training=*/true, layers, fused);
    if (!g)
      return g.takeError();
    const std::string &text = g->description.configText;
    title = g->description.family + " (" + text.substr(0, text.find(": ")) + ")";
    auto lowered = mlc::lowerModule(*g->module);
    if (!lowered)
      return lowered.takeError();
    mlc::LoweredPackage::Counts counts = lowered->counts[mlc::kTrainStepFn];
    // The optimizer's kernels (AdamW and the gradient norm), counted from the plan.
    counts.optimizerKernels =
        lowered->counts[mlc::kOptimizerFn].kernels + lowered->counts[mlc::kGradNormFn].kernels;
    return counts;
  };
  struct Side {
    mlc::LoweredPackage::Counts full, one, two;
  } sides[2];
  for (int fused = 0; fused < 2; ++fused) {
    for (auto [layers, out] : {std::pair<int64_t, mlc::LoweredPackage::Counts *>{0, &sides[fused].full},
                               {1, &sides[fused].one},
                               {2, &sides[fused].two}}) {
      if (onnx && layers > 0)
        continue;
      auto c = countsFor(layers, fused);
      if (!c)
        return fail(toString(c.takeError()));
      *out = *c;
    }
  }
  auto perLayer = [&](const Side &s) { return onnx ? int64_t(-1) : s.two.kernels - s.one.kernels; };
  const Side &u = sides[0], &f = sides[1];
  outs() << "mlc report: " << title << ", micro-batch " << microBatch << ", seq-len " << seqLen
         << ", " << dtype << "\n";
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "per training step", "unfused", "fused");
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "kernel launches (GEMMs excluded)",
                    u.full.kernels, f.full.kernels);
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "GEMMs", u.full.gemms, f.full.gemms);
  if (!onnx)
    outs() << formatv("  {0,-38} {1,12} {2,12}\n", "non-GEMM kernels per layer (fwd+bwd)",
                      perLayer(u), perLayer(f));
  outs() << formatv("  {0,-38} {1,12:f1} {2,12:f1}\n", "MB moved (estimate)",
                    u.full.bytes / 1e6, f.full.bytes / 1e6);
  outs() << formatv("  {0,-38} {1,12} {2,12}\n", "optimizer kernels (AdamW + norm)",
                    u.full.optimizerKernels, f.full.optimizerKernels);
  json = formatv("\"kernels_unfused\": {0}, \"kernels_fused\": {1}, "
                 "\"gemms\": {2}, \"nongemm_per_layer\": {3}, "
                 "\"nongemm_per_layer_unfused\": {4}, "
                 "\"optimizer_kernels\": {5}, \"bytes_unfused\": {6}, "
                 "\"bytes_fused\": {7}",
                 u.full.kernels, f.full.kernels, f.full.gemms, perLayer(f), perLayer(u),
                 f.full.optimizerKernels, u.full.bytes, f.full.bytes)
             .str();
  return 0;
}

/// --report: the counts, the memory per rank (MemoryPlan.h), then the CUDA
/// kernels of the package these flags compile (ptxas statistics);
/// --roofline: that package's step at a GPU's limits (Roofline.h).
/// --report-json writes what ran as one JSON object.
int runReport() {
  std::optional<RooflineDevice> device;
  if (!roofline.empty()) {
    auto d = parseRooflineDevice(roofline);
    if (!d)
      return fail(toString(d.takeError()));
    device = *d;
  }
  const bool counts = report || !device;
  std::string json;
  // The package's graph first: --recompute auto chooses on it, and the
  // counts' compiles (unfused, one and two layers) recompute what it chose.
  mlir::MLIRContext ctx;
  auto g = compileModel(ctx, /*training=*/true);
  if (!g)
    return fail(toString(g.takeError()));
  if (counts)
    if (int rc = countsReport(json))
      return rc;
  // -o: the package the report is of is written too (from a copy: the
  // report lowers the graph in place).
  mlir::OwningOpRef<mlir::ModuleOp> packaged;
  if (!output.empty() && emit == Emit::Package)
    packaged = g->module->clone();
  if (auto err = mlc::lowerToPlanPipeline(*g->module, g->description.dataParallel))
    return fail(toString(std::move(err)));
  if (device) {
    auto r = rooflineOf(*g->module, *device, ranksFlag);
    if (!r)
      return fail(toString(r.takeError()));
    if (!counts) {
      const std::string &text = g->description.configText;
      outs() << "mlc roofline: " << g->description.family << " ("
             << text.substr(0, text.find(": ")) << "), micro-batch " << microBatch
             << ", seq-len " << seqLen << ", " << dtype << (fuse && !noFuse ? ", fused" : "")
             << "\n";
    }
    outs() << formatRoofline(*r);
    json += (json.empty() ? "" : ", ") + std::string("\"roofline\": ") + rooflineJson(*r);
  }
  if (counts) {
    if (int rc = memoryReport(*g->module, json))
      return rc;
    auto lowered = mlc::serializePlan(*g->module);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    if (int rc = cudaReport(lowered->kernelsCu))
      return rc;
  }
  if (!reportJson.empty())
    if (int rc = writeTextTo(reportJson, "{" + json + "}\n"))
      return rc;
  if (auto err = checkDeviceMemory(*g->module)) // after the report that shows why
    return fail(toString(std::move(err)));
  if (packaged) {
    auto lowered = mlc::writePackage(*packaged, output, g->description);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    outs() << "mlc: wrote " << output << "\n";
  }
  return 0;
}

int printGraph() {
  mlir::MLIRContext ctx;
  auto g = buildGraph(ctx);
  if (!g)
    return fail(toString(g.takeError()));
  return writeModule(*g->module);
}

} // namespace

int runCompile() {
  // What is compiled is never overwritten by what it compiles to: -o (a
  // file, or a package directory that holds the model) or --report-json.
  try {
    mlc::rt::refuseOutputsOverInputs({{"the model", model}},
                                     {{"-o", output}, {"--report-json", reportJson}});
  } catch (const mlc::rt::Error &e) {
    return fail(e.what());
  }
  auto limited = deviceMemoryGiven(); // a bad --device-memory fails before compiling
  if (!limited)
    return fail(toString(limited.takeError()));
  // --cuda-arch: sm_XX names, or none (or nothing: --cuda-arch=) for no
  // CUDA statistics, checked before any work.
  if (noCudaArch() && emit == Emit::Ptx)
    return fail("--emit=ptx needs a --cuda-arch sm_XX to compile for, got '" +
                std::string(cudaArch) + "'");
  if (!noCudaArch()) {
    SmallVector<StringRef> arches;
    StringRef(cudaArch).split(arches, ',', -1, false);
    for (StringRef arch : arches)
      if (!arch.trim().starts_with("sm_"))
        return fail("--cuda-arch: expected sm_XX, got '" + arch.trim().str() +
                    "' (a list sm_XX,sm_YY, or none: no CUDA statistics)");
  }
  if (report || !reportJson.empty() || !roofline.empty())
    return runReport();
  if (emit == Emit::Graph)
    return printGraph();
  mlir::MLIRContext ctx;
  auto g = compileModel(ctx, !inferenceOnly);
  if (!g)
    return fail(toString(g.takeError()));
  mlir::ModuleOp module = *g->module;
  if (emit == Emit::Mlir)
    return writeModule(module);
  if (emit == Emit::Plan) {
    if (auto err = mlc::lowerToPlanPipeline(module, g->description.dataParallel))
      return fail(toString(std::move(err)));
    if (auto err = checkDeviceMemory(module))
      return fail(toString(std::move(err)));
    return writeModule(module);
  }
  if (emit == Emit::Kernels || emit == Emit::Cuda) {
    auto lowered = mlc::lowerModule(module, g->description.dataParallel);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    return writeText(emit == Emit::Cuda ? lowered->kernelsCu : lowered->kernelsCpp);
  }
  if (emit == Emit::Ptx) {
    auto lowered = mlc::lowerModule(module, g->description.dataParallel);
    if (!lowered)
      return fail(toString(lowered.takeError()));
    try {
      mlc::rt::parseCudaKernels(lowered->kernelsCu, "kernels.cu"); // a kernel CUDA refuses
    } catch (const mlc::rt::Error &e) {
      return fail(e.what());
    }
    std::string why;
    mlc::rt::Nvrtc *nvrtc = mlc::rt::Nvrtc::get(&why);
    if (!nvrtc)
      return fail("--emit=ptx needs NVRTC: " + why);
    StringRef arch = StringRef(cudaArch).split(',').first.trim();
    if (!arch.starts_with("sm_"))
      return fail("--cuda-arch: expected sm_XX, got '" + arch.str() + "'");
    try {
      std::string ptx = nvrtc->compile(lowered->kernelsCu, "kernels.cu",
                                       ("compute_" + arch.drop_front(3)).str(), false)
                            .image;
      while (!ptx.empty() && ptx.back() == '\0') // NVRTC's PTX ends in its terminator
        ptx.pop_back();
      return writeText(ptx);
    } catch (const mlc::rt::Error &e) {
      return fail(e.what());
    }
  }
  std::string dir = output.empty() ? model + ".mlcpkg" : std::string(output);
  if (*limited)
    g->description.checkPlan = checkDeviceMemory;
  auto lowered = mlc::writePackage(module, dir, g->description);
  if (!lowered)
    return fail(toString(lowered.takeError()));
  for (auto &[fn, c] : lowered->counts)
    outs() << "mlc: @" << fn << ": " << c.kernels << " kernel launches, " << c.gemms
           << " GEMMs\n";
  if (const RecomputeChoice *c = lastRecomputeChoice())
    outs() << "mlc: --recompute auto: " << c->describe() << "; saved activations "
           << humanBytes(c->savedNone) << " -> " << humanBytes(c->savedChosen) << ", total "
           << humanBytes(c->totalChosen) << " (--report for its cost)\n";
  outs() << "mlc: wrote " << dir << "\n";
  return 0;
}

int runImport() {
  if (!isOnnxModel())
    return fail("mlc import reads an ONNX model (MODEL.onnx)");
  return printGraph();
}

} // namespace mlc::tool
