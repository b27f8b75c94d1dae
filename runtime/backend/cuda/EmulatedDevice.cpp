//===- EmulatedDevice.cpp - the CUDA emulator's driver, cuBLASLt and NCCL ----===//
//
// `--device cuda-emulator` runs the CUDA backend itself (CudaBackend.cpp:
// its buffers, argument tables, phases, scratch, error words, GEMM layouts,
// graph capture, bucket kernels and NCCL calls) on the CPU, through the
// tables of CudaApi.h filled here:
//
//   driver     device memory is host memory; one device ("sm_90", 4 SMs);
//              streams run in order and at once, so events and waits are
//              trivial; a stream capture records the launches, GEMMs and
//              sums it sees, and a graph launch replays them;
//   modules    kernels.cu compiled by the host compiler behind
//              CudaEmulation.h (each CUDA thread a fiber);
//   cuBLASLt   cublasLtMatmul as documented (column-major layouts,
//              transposes, strided batches; f32, f64 and bf16 in, TF32
//              rounding when asked, f32 or f64 accumulation), a plain loop;
//   NCCL       one rank (a sum over one rank is the buffer itself), or
//              several processes' emulators, summed by the host
//              Communicator of the same ranks (MPI);
//
// Slow, and meant for the tests' small shapes.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Comm.h"
#include "runtime/backend/KernelCache.h"
#include "runtime/backend/cuda/CudaApi.h"
#include "runtime/backend/cuda/CudaEmulation.h"
#include "support/Error.h"
#include "support/TensorIO.h"

#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <map>
#include <memory>
#include <unistd.h>
#include <vector>

namespace mlc::rt {

namespace {

// The stream's work: run at once, or recorded while a capture is open.
struct Capture {
  bool open = false;
  std::vector<std::function<void()>> ops;
};
Capture &capture() {
  static Capture c;
  return c;
}
void submit(std::function<void()> op) {
  if (capture().open)
    capture().ops.push_back(std::move(op));
  else
    op();
}

struct Graph {
  std::vector<std::function<void()>> ops;
};

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

using Launcher = void (*)(void (*)(void *, void *const *), void *, void *const *, int64_t,
                          int64_t);

struct Module {
  void *library;
  Launcher launch;
};

// How each kernel signature unpacks cuLaunchKernel's parameters.
void packageKernel(void *fn, void *const *p) {
  reinterpret_cast<void (*)(char *const *, const void *, int)>(fn)(
      *static_cast<char *const *const *>(p[0]), *static_cast<const void *const *>(p[1]),
      *static_cast<const int *>(p[2]));
}
void sumsqKernel(void *fn, void *const *p) {
  reinterpret_cast<void (*)(const void *, long long, double *)>(fn)(
      *static_cast<const void *const *>(p[0]), *static_cast<const long long *>(p[1]),
      *static_cast<double *const *>(p[2]));
}
void biasKernel(void *fn, void *const *p) {
  reinterpret_cast<void (*)(void *, const void *, long long, long long)>(fn)(
      *static_cast<void *const *>(p[0]), *static_cast<const void *const *>(p[1]),
      *static_cast<const long long *>(p[2]), *static_cast<const long long *>(p[3]));
}
void geluKernel(void *fn, void *const *p) {
  reinterpret_cast<void (*)(void *, const void *, long long)>(fn)(
      *static_cast<void *const *>(p[0]), *static_cast<const void *const *>(p[1]),
      *static_cast<const long long *>(p[2]));
}
void scaleKernel(void *fn, void *const *p) {
  reinterpret_cast<void (*)(void *, long long, const double *, int, double, double)>(fn)(
      *static_cast<void *const *>(p[0]), *static_cast<const long long *>(p[1]),
      *static_cast<const double *const *>(p[2]), *static_cast<const int *>(p[3]),
      *static_cast<const double *>(p[4]), *static_cast<const double *>(p[5]));
}

struct Function {
  Module *module;
  void *fn;
  void (*thunk)(void *, void *const *);
  std::vector<size_t> sizes; // each parameter's bytes
};

class HostModuleLoader final : public ModuleLoader {
public:
  CUmodule load(const std::string &source, const std::string &name, bool verbose) override {
    auto *m = new Module();
    // Compiled as the CPU target's kernels are, without FMA contraction
    // (loadHostKernelLibrary): --recompute trains bit for bit as keeping
    // every value does.
    m->library = loadHostKernelLibrary(cudaEmulationHeader() + source, verbose);
    m->launch = reinterpret_cast<Launcher>(dlsym(m->library, "mlc_emu_launch"));
    if (!m->launch)
      fail("internal: the CUDA emulator's launcher is missing from " + name);
    return reinterpret_cast<CUmodule>(m);
  }
};

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult errorString(CUresult rc, const char **msg) {
  static const std::map<CUresult, const char *> names = {
      {CUDA_ERROR_INVALID_VALUE, "invalid argument"},
      {CUDA_ERROR_OUT_OF_MEMORY, "out of memory"},
      {CUDA_ERROR_NOT_FOUND, "named symbol not found"},
      {CUDA_ERROR_NOT_SUPPORTED, "operation not supported by the CUDA emulator"}};
  auto it = names.find(rc);
  *msg = it == names.end() ? "CUDA emulator error" : it->second;
  return CUDA_SUCCESS;
}
CUresult deviceCount(int *n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult deviceGet(CUdevice *d, int ordinal) {
  *d = 0;
  return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult deviceName(char *name, int len, CUdevice) {
  std::snprintf(name, size_t(len), "mlc CUDA emulator");
  return CUDA_SUCCESS;
}
CUresult attribute(int *v, CUdevice_attribute a, CUdevice) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *v = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *v = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *v = 4;
    break;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
    *v = 1000000; // kHz
    break;
  default:
    *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult totalMem(size_t *bytes, CUdevice) {
  *bytes = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE));
  return CUDA_SUCCESS;
}
CUresult retain(CUcontext *c, CUdevice) {
  static int context;
  *c = reinterpret_cast<CUcontext>(&context);
  return CUDA_SUCCESS;
}
CUresult setCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult loadModule(CUmodule *, const void *) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult getFunction(CUfunction *f, CUmodule mod, const char *name) {
  auto *m = reinterpret_cast<Module *>(mod);
  void *fn = dlsym(m->library, name);
  if (!fn)
    return CUDA_ERROR_NOT_FOUND;
  std::string n = name;
  auto *k = new Function{m, fn, packageKernel, {8, 8, 4}};
  if (n.rfind("mlc_sumsq", 0) == 0)
    *k = Function{m, fn, sumsqKernel, {8, 8, 8}};
  else if (n.rfind("mlc_scale", 0) == 0)
    *k = Function{m, fn, scaleKernel, {8, 8, 8, 4, 8, 8}};
  else if (n.rfind("mlc_bias", 0) == 0)
    *k = Function{m, fn, biasKernel, {8, 8, 8, 8}};
  else if (n.rfind("mlc_gelu", 0) == 0)
    *k = Function{m, fn, geluKernel, {8, 8, 8}};
  *f = reinterpret_cast<CUfunction>(k);
  return CUDA_SUCCESS;
}
CUresult alloc(CUdeviceptr *p, size_t bytes) {
  void *m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
CUresult freeMem(CUdeviceptr p) {
  std::free(reinterpret_cast<void *>(p));
  return CUDA_SUCCESS;
}
CUresult htod(CUdeviceptr dst, const void *src, size_t n) {
  std::memcpy(reinterpret_cast<void *>(dst), src, n);
  return CUDA_SUCCESS;
}
CUresult dtoh(void *dst, CUdeviceptr src, size_t n) {
  std::memcpy(dst, reinterpret_cast<const void *>(src), n);
  return CUDA_SUCCESS;
}
CUresult memset8(CUdeviceptr p, unsigned char v, size_t n) {
  std::memset(reinterpret_cast<void *>(p), v, n);
  return CUDA_SUCCESS;
}
CUresult memset8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  submit([=] { std::memset(reinterpret_cast<void *>(p), v, n); });
  return CUDA_SUCCESS;
}
CUresult htodAsync(CUdeviceptr dst, const void *src, size_t n, CUstream) {
  // The host data is copied now: a replayed capture must not read it later.
  auto bytes = std::make_shared<std::vector<char>>(static_cast<const char *>(src),
                                                    static_cast<const char *>(src) + n);
  submit([=] { std::memcpy(reinterpret_cast<void *>(dst), bytes->data(), n); });
  return CUDA_SUCCESS;
}
CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned, CUstream, void **params, void **) {
  auto *k = reinterpret_cast<Function *>(f);
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || bx % 32 != 0 || bx > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  // The parameters' values are taken now, as cuLaunchKernel does.
  std::vector<uint64_t> values(k->sizes.size());
  for (size_t i = 0; i < k->sizes.size(); ++i)
    std::memcpy(&values[i], params[i], k->sizes[i]);
  submit([k, values, gx, bx] {
    std::vector<void *> p;
    std::vector<uint64_t> v = values;
    for (uint64_t &x : v)
      p.push_back(&x);
    k->module->launch(k->thunk, k->fn, p.data(), gx, bx);
  });
  return CUDA_SUCCESS;
}
CUresult streamCreate(CUstream *s, unsigned) {
  static int streams[64];
  static int next = 0;
  *s = reinterpret_cast<CUstream>(&streams[next++ % 64]);
  return CUDA_SUCCESS;
}
CUresult streamSync(CUstream) { return CUDA_SUCCESS; }
struct Event {
  std::chrono::steady_clock::time_point at;
};
CUresult eventCreate(CUevent *e, unsigned) {
  *e = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}
CUresult eventRecord(CUevent e, CUstream) {
  auto *ev = reinterpret_cast<Event *>(e);
  submit([ev] { ev->at = std::chrono::steady_clock::now(); });
  return CUDA_SUCCESS;
}
CUresult eventSync(CUevent) { return CUDA_SUCCESS; }
CUresult elapsed(float *ms, CUevent a, CUevent b) {
  *ms = std::chrono::duration<float, std::milli>(reinterpret_cast<Event *>(b)->at -
                                                 reinterpret_cast<Event *>(a)->at)
            .count();
  return CUDA_SUCCESS;
}
CUresult beginCapture(CUstream, CUstreamCaptureMode) {
  if (capture().open)
    return CUDA_ERROR_INVALID_VALUE;
  capture().open = true;
  capture().ops.clear();
  return CUDA_SUCCESS;
}
CUresult endCapture(CUstream, CUgraph *g) {
  if (!capture().open)
    return CUDA_ERROR_INVALID_VALUE;
  capture().open = false;
  *g = reinterpret_cast<CUgraph>(new Graph{std::move(capture().ops)});
  return CUDA_SUCCESS;
}
CUresult instantiate(CUgraphExec *e, CUgraph g, unsigned long long) {
  *e = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph *>(g)));
  return CUDA_SUCCESS;
}
CUresult graphLaunch(CUgraphExec e, CUstream) {
  for (auto &op : reinterpret_cast<Graph *>(e)->ops)
    submit(op);
  return CUDA_SUCCESS;
}
CUresult graphDestroy(CUgraph g) {
  delete reinterpret_cast<Graph *>(g);
  return CUDA_SUCCESS;
}
CUresult graphExecDestroy(CUgraphExec e) {
  delete reinterpret_cast<Graph *>(e);
  return CUDA_SUCCESS;
}
CUresult funcSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult streamWaitEvent(CUstream, CUevent, unsigned) { return CUDA_SUCCESS; }

//===----------------------------------------------------------------------===//
// cuBLASLt: cublasLtMatmul's definition, column-major.
//===----------------------------------------------------------------------===//

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr; // D's type, one per row of D
  void *aux = nullptr;        // GELU_AUX: the GELU's input, D's type
  int64_t auxLd = 0, auxStride = 0;
};
struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

double load(const void *base, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_64F)
    return static_cast<const double *>(base)[i];
  if (t == CUDA_R_32F)
    return static_cast<const float *>(base)[i];
  return bf16ToFloat(static_cast<const uint16_t *>(base)[i]);
}
void store(void *base, cudaDataType_t t, int64_t i, double v) {
  if (t == CUDA_R_64F) {
    static_cast<double *>(base)[i] = v;
  } else if (t == CUDA_R_32F) {
    static_cast<float *>(base)[i] = float(v);
  } else {
    static_cast<uint16_t *>(base)[i] = floatToBf16(float(v));
  }
}
int64_t elementSize(cudaDataType_t t) { return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2; }
/// TF32: an f32 operand keeps 10 of its 23 mantissa bits (rounded).
double toTf32(double x) {
  float f = float(x);
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

cublasStatus_t ltCreate(cublasLtHandle_t *h) {
  static int handle;
  *h = reinterpret_cast<cublasLtHandle_t>(&handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t descCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{c, s});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t descSet(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v,
                       size_t n) {
  auto *desc = reinterpret_cast<Desc *>(d);
  auto set = [&](auto &field) {
    if (n != sizeof field)
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, v, n);
    return CUBLAS_STATUS_SUCCESS;
  };
  if (a == CUBLASLT_MATMUL_DESC_TRANSA)
    return set(desc->ta);
  if (a == CUBLASLT_MATMUL_DESC_TRANSB)
    return set(desc->tb);
  if (a == CUBLASLT_MATMUL_DESC_EPILOGUE) {
    uint32_t e = 0;
    if (n != sizeof e)
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&e, v, n);
    if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS &&
        e != CUBLASLT_EPILOGUE_GELU_AUX && e != CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
      return CUBLAS_STATUS_NOT_SUPPORTED; // the emulator knows these four
    desc->epilogue = e;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (a == CUBLASLT_MATMUL_DESC_BIAS_POINTER)
    return set(desc->bias);
  if (a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER)
    return set(desc->aux);
  if (a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD)
    return set(desc->auxLd);
  if (a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE)
    return set(desc->auxStride);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}
cublasStatus_t descDestroy(cublasLtMatmulDesc_t d) {
  delete reinterpret_cast<Desc *>(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t layoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                            uint64_t cols, int64_t ld) {
  if (ld < int64_t(rows))
    return CUBLAS_STATUS_INVALID_VALUE; // column-major: ld >= rows
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{t, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t layoutSet(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                         const void *v, size_t n) {
  auto *layout = reinterpret_cast<Layout *>(l);
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && n == sizeof(int32_t))
    std::memcpy(&layout->batch, v, n);
  else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && n == sizeof(int64_t))
    std::memcpy(&layout->stride, v, n);
  else
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t layoutDestroy(cublasLtMatrixLayout_t l) {
  delete reinterpret_cast<Layout *>(l);
  return CUBLAS_STATUS_SUCCESS;
}
/// The alignments (A, B, C, D, in bytes) an algorithm may assume: 256
/// unless the preference says less, as in cuBLASLt. The chosen algorithm
/// carries them, and a product whose pointers are less aligned is refused,
/// which on a GPU would be a misaligned access or a failed launch.
struct Pref {
  uint32_t align[5] = {256, 256, 256, 256, 256}; // A, B, C, D, and the bias
};
cublasStatus_t prefCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Pref());
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t prefSet(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a,
                       const void *v, size_t n) {
  auto *pref = reinterpret_cast<Pref *>(p);
  int i = a == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES   ? 0
          : a == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES ? 1
          : a == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES ? 2
          : a == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES ? 3
                                                            : -1;
  if (i >= 0) {
    if (n != sizeof(uint32_t))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&pref->align[i], v, n);
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t prefDestroy(cublasLtMatmulPreference_t p) {
  delete reinterpret_cast<Pref *>(p);
  return CUBLAS_STATUS_SUCCESS;
}
/// The shapes must agree as cuBLASLt requires: op(A) is M x K, op(B) K x N,
/// C and D M x N, one batch count; and the types must be a combination it
/// lists: A, B and C of one type (f64 computing in f64, f32 or bf16 in f32),
/// or bf16 A and B with an f32 C computing in f32.
bool shapesAgree(const Desc &d, const Layout &a, const Layout &b, const Layout &c) {
  uint64_t m = d.ta == CUBLAS_OP_N ? a.rows : a.cols, ka = d.ta == CUBLAS_OP_N ? a.cols : a.rows;
  uint64_t kb = d.tb == CUBLAS_OP_N ? b.rows : b.cols, n = d.tb == CUBLAS_OP_N ? b.cols : b.rows;
  const bool f64 = d.compute == CUBLAS_COMPUTE_64F;
  const bool types = a.type == b.type && (f64 ? a.type == CUDA_R_64F && c.type == CUDA_R_64F
                                              : a.type != CUDA_R_64F &&
                                                    (c.type == a.type || (a.type == CUDA_R_16BF &&
                                                                          c.type == CUDA_R_32F)));
  return m == c.rows && n == c.cols && ka == kb && a.batch == b.batch && b.batch == c.batch &&
         types;
}
cublasStatus_t heuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                         cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                         cublasLtMatrixLayout_t, cublasLtMatmulPreference_t p, int,
                         cublasLtMatmulHeuristicResult_t *result, int *found) {
  *found = 0;
  if (!shapesAgree(*reinterpret_cast<Desc *>(d), *reinterpret_cast<Layout *>(a),
                   *reinterpret_cast<Layout *>(b), *reinterpret_cast<Layout *>(c)))
    return CUBLAS_STATUS_INVALID_VALUE;
  const Desc &desc = *reinterpret_cast<Desc *>(d);
  const Layout &cl = *reinterpret_cast<Layout *>(c);
  if ((desc.epilogue & CUBLASLT_EPILOGUE_BIAS) && !desc.bias)
    return CUBLAS_STATUS_INVALID_VALUE;
  // GELU_AUX as cuBLASLt documents it: an aux pointer, its leading dimension
  // and batch stride multiples of 8 (ld >= D's rows); here f32 and bf16
  // results (aux in D's type; f64 products take the runtime's GELU kernel).
  if ((desc.epilogue & CUBLASLT_EPILOGUE_GELU) &&
      (!desc.aux || desc.auxLd % 8 || desc.auxLd < int64_t(cl.rows) || desc.auxStride % 8 ||
       (cl.batch > 1 && desc.auxStride < desc.auxLd * int64_t(cl.cols)) ||
       (cl.type != CUDA_R_32F && cl.type != CUDA_R_16BF)))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(result, 0, sizeof *result);
  static_assert(sizeof result->algo >= sizeof(Pref), "the algorithm holds the alignments");
  Pref assumed = *reinterpret_cast<Pref *>(p);
  // As cuBLASLt, the bias pointer's value sets the alignment the
  // algorithm assumes of it.
  uintptr_t bits = reinterpret_cast<uintptr_t>(desc.bias) | 256;
  assumed.align[4] = uint32_t(bits & (~bits + 1));
  std::memcpy(&result->algo, assumed.align, sizeof(Pref));
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t matmul(cublasLtHandle_t, cublasLtMatmulDesc_t dd, const void *alpha,
                      const void *A, cublasLtMatrixLayout_t al, const void *B,
                      cublasLtMatrixLayout_t bl, const void *beta, const void *C,
                      cublasLtMatrixLayout_t cl, void *D, cublasLtMatrixLayout_t dl,
                      const cublasLtMatmulAlgo_t *algo, void *, size_t, cudaStream_t) {
  const Desc d = *reinterpret_cast<Desc *>(dd);
  const Layout a = *reinterpret_cast<Layout *>(al), b = *reinterpret_cast<Layout *>(bl),
               c = *reinterpret_cast<Layout *>(cl), o = *reinterpret_cast<Layout *>(dl);
  if (!shapesAgree(d, a, b, c))
    return CUBLAS_STATUS_INVALID_VALUE;
  Pref assumed;
  std::memcpy(assumed.align, algo, sizeof assumed.align);
  auto aligned = [](const void *base, const Layout &l, uint32_t to) {
    for (int32_t t = 0; t < l.batch; ++t)
      if ((reinterpret_cast<uintptr_t>(base) + uintptr_t(t * l.stride * elementSize(l.type))) % to)
        return false;
    return true;
  };
  if (!aligned(A, a, assumed.align[0]) || !aligned(B, b, assumed.align[1]) ||
      !aligned(C, c, assumed.align[2]) || !aligned(D, o, assumed.align[3]))
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool biased = d.epilogue & CUBLASLT_EPILOGUE_BIAS, gelu = d.epilogue & CUBLASLT_EPILOGUE_GELU;
  if (gelu && !d.aux)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (biased && (!d.bias || reinterpret_cast<uintptr_t>(d.bias) % assumed.align[4]))
    return CUBLAS_STATUS_INVALID_VALUE;
  const char *bias = static_cast<const char *>(d.bias);
  const bool f64 = d.scale == CUDA_R_64F, tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const double al64 = f64 ? *static_cast<const double *>(alpha) : *static_cast<const float *>(alpha);
  const double be64 = f64 ? *static_cast<const double *>(beta) : *static_cast<const float *>(beta);
  submit([=] {
    const int64_t M = int64_t(c.rows), N = int64_t(c.cols);
    const int64_t K = int64_t(d.ta == CUBLAS_OP_N ? a.cols : a.rows);
    for (int32_t t = 0; t < a.batch; ++t) {
      const char *Ab = static_cast<const char *>(A) + t * a.stride * elementSize(a.type);
      const char *Bb = static_cast<const char *>(B) + t * b.stride * elementSize(b.type);
      const char *Cb = static_cast<const char *>(C) + t * c.stride * elementSize(c.type);
      char *Db = static_cast<char *>(D) + t * o.stride * elementSize(o.type);
#pragma omp parallel for
      for (int64_t j = 0; j < N; ++j)
        for (int64_t i = 0; i < M; ++i) {
          double s = 0; // f32 accumulation is emulated in f64: closer, never farther
          for (int64_t k = 0; k < K; ++k) {
            double x = load(Ab, a.type, d.ta == CUBLAS_OP_N ? i + k * a.ld : k + i * a.ld);
            double y = load(Bb, b.type, d.tb == CUBLAS_OP_N ? k + j * b.ld : j + k * b.ld);
            if (tf32) {
              x = toTf32(x);
              y = toTf32(y);
            }
            s += x * y;
          }
          double v = al64 * s + (be64 != 0 ? be64 * load(Cb, c.type, i + j * c.ld) : 0.0);
          if (biased)
            v += load(bias, o.type, i);
          if (gelu) { // the GELU's input (as stored) to aux, its GELU to D
            char *aux = static_cast<char *>(d.aux) + t * d.auxStride * elementSize(o.type);
            store(aux, o.type, i + j * d.auxLd, v);
            v = load(aux, o.type, i + j * d.auxLd);
            v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          }
          store(Db, o.type, i + j * o.ld, v);
        }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// NCCL: one rank, or the ranks of a host Communicator
//===----------------------------------------------------------------------===//

// An emulated communicator: one rank alone (no group), or this process's
// rank of `group`, the host Communicator of the same processes (MPI), which
// carries the sums. Streams run in order and at once, so a collective is a
// blocking call of every rank in the same order, as the backend issues them.
struct EmulatedComm {
  Communicator *group = nullptr;
  int rank = 0, size = 1;
};

// The groups the backend bound to unique ids, until their ncclCommInitRank.
std::map<std::string, Communicator *> &boundGroups() {
  static std::map<std::string, Communicator *> groups;
  return groups;
}
std::string idKey(const ncclUniqueId &id) { return std::string(id.internal, sizeof id.internal); }

// A unique id names this process and a count: the group's first rank makes
// it and the backend sends it to the others.
ncclResult_t uniqueId(ncclUniqueId *id) {
  static int64_t next = 0;
  std::memset(id, 0, sizeof *id);
  int64_t words[2] = {int64_t(getpid()), ++next};
  std::memcpy(id->internal, words, sizeof words);
  return ncclSuccess;
}
void bindGroup(const ncclUniqueId &id, Communicator *group) { boundGroups()[idKey(id)] = group; }

ncclResult_t initRank(ncclComm_t *comm, int ranks, ncclUniqueId id, int rank) {
  Communicator *group = nullptr;
  if (ranks > 1) {
    auto it = boundGroups().find(idKey(id));
    if (it == boundGroups().end() || it->second->size() != ranks || it->second->rank() != rank)
      return ncclInvalidUsage; // no host group of these ranks to carry the sums
    group = it->second;
    boundGroups().erase(it);
  } else if (ranks != 1 || rank != 0) {
    return ncclInvalidUsage;
  }
  *comm = reinterpret_cast<ncclComm_t>(new EmulatedComm{group, rank, ranks});
  return ncclSuccess;
}
const EmulatedComm &emulated(ncclComm_t comm) { return *reinterpret_cast<EmulatedComm *>(comm); }
size_t elementBytes(ncclDataType_t type) {
  return type == ncclFloat64 ? 8 : type == ncclFloat32 ? 4 : 2;
}
// The host Communicator sums f32 and f64 (the backend's flat buffers and
// tensor-parallel sums); a group refuses any other type.
bool summable(const EmulatedComm &c, ncclDataType_t type) {
  return c.size == 1 || type == ncclFloat32 || type == ncclFloat64;
}

ncclResult_t allReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  const EmulatedComm c = emulated(comm);
  if (!summable(c, type) || (op != ncclSum && op != ncclMax))
    return ncclInvalidUsage;
  size_t bytes = count * elementBytes(type);
  submit([=] {
    if (send != recv)
      std::memcpy(recv, send, bytes);
    if (c.group)
      c.group->allReduce(recv, int64_t(count), type == ncclFloat64, op == ncclMax);
  });
  return ncclSuccess;
}
// A reduction to `root`: the sum lands there; every other rank's receive
// buffer is left as it was (as NCCL leaves it).
ncclResult_t reduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const EmulatedComm c = emulated(comm);
  if (root < 0 || root >= c.size)
    return ncclInvalidUsage;
  if (!c.group)
    return allReduce(send, recv, count, type, op, comm, stream);
  if (!summable(c, type) || (op != ncclSum && op != ncclMax))
    return ncclInvalidUsage;
  size_t bytes = count * elementBytes(type);
  submit([=] {
    std::vector<char> sum(static_cast<const char *>(send), static_cast<const char *>(send) + bytes);
    c.group->allReduce(sum.data(), int64_t(count), type == ncclFloat64, op == ncclMax);
    if (c.rank == root)
      std::memcpy(recv, sum.data(), bytes);
  });
  return ncclSuccess;
}
ncclResult_t broadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  const EmulatedComm c = emulated(comm);
  if (root < 0 || root >= c.size)
    return ncclInvalidUsage;
  size_t bytes = count * elementBytes(type);
  submit([=] {
    if (c.rank == root && send != recv)
      std::memcpy(recv, send, bytes);
    if (c.group)
      c.group->broadcast(recv, int64_t(bytes), root);
  });
  return ncclSuccess;
}
// Sequence parallelism's collectives, `count` elements per rank: at one
// rank each is a copy (the gather of one slice, the scatter of one sum).
ncclResult_t allGather(const void *send, void *recv, size_t count, ncclDataType_t type,
                       ncclComm_t comm, cudaStream_t) {
  const EmulatedComm c = emulated(comm);
  if (!summable(c, type))
    return ncclInvalidUsage;
  size_t bytes = count * elementBytes(type);
  submit([=] {
    if (!c.group) {
      std::memmove(recv, send, bytes);
      return;
    }
    // NCCL's in place form (send at the rank's slice of recv) as well.
    std::vector<char> mine(static_cast<const char *>(send),
                           static_cast<const char *>(send) + bytes);
    c.group->allGather(mine.data(), recv, int64_t(count), type == ncclFloat64);
  });
  return ncclSuccess;
}
ncclResult_t reduceScatter(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  const EmulatedComm c = emulated(comm);
  if (!summable(c, type) || op != ncclSum)
    return ncclInvalidUsage;
  size_t bytes = count * elementBytes(type);
  submit([=] {
    if (!c.group) {
      std::memmove(recv, send, bytes);
      return;
    }
    std::vector<char> sums(bytes);
    c.group->reduceScatter(send, sums.data(), int64_t(count), type == ncclFloat64);
    std::memcpy(recv, sums.data(), bytes);
  });
  return ncclSuccess;
}
ncclResult_t groupStart() { return ncclSuccess; }
ncclResult_t groupEnd() { return ncclSuccess; }
ncclResult_t destroy(ncclComm_t comm) {
  delete reinterpret_cast<EmulatedComm *>(comm);
  return ncclSuccess;
}
const char *ncclError(ncclResult_t rc) {
  return rc == ncclInvalidUsage
             ? "the CUDA emulator's NCCL: a communicator of several ranks needs the host "
               "group of the same ranks (mpirun), and sums f32 or f64 only"
             : "NCCL emulator error";
}

} // namespace

EmulatedDevice &emulatedDevice() {
  static Driver driver = {init,         errorString,   deviceCount, deviceGet,   deviceName,
                          attribute,    totalMem,      retain,      setCurrent,  loadModule,
                          getFunction,  alloc,         freeMem,     htod,        dtoh,
                          memset8,      memset8Async,  htodAsync,   launch,      streamCreate,
                          streamSync,   eventCreate,   eventRecord, eventSync,   elapsed,
                          beginCapture, endCapture,    instantiate, graphLaunch, graphDestroy,
                          graphExecDestroy, funcSetAttribute, streamWaitEvent};
  static BlasLt blasLt = {ltCreate,   descCreate,  descSet,     descDestroy,
                          layoutCreate, layoutSet, layoutDestroy, prefCreate,
                          prefSet,    prefDestroy, heuristic,   matmul};
  static Nccl nccl = {uniqueId,  initRank,  allReduce, destroy,   ncclError, reduce,
                      broadcast, groupStart, groupEnd, allGather, reduceScatter};
  static HostModuleLoader loader;
  static EmulatedDevice device = {&driver, &blasLt, &nccl, &loader, bindGroup};
  return device;
}

} // namespace mlc::rt
