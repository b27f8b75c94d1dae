//===- CpuBackend.cpp - runs a package's plan on the host ------------------===//

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/backend/KernelCache.h"
#include "support/Error.h"
#include "contract/DeviceMemory.h"
#include "contract/StepFunctions.h"

#ifdef MLC_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef MLC_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <map>
#include <omp.h>
#include <sched.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace mlc::rt {

namespace {

/// prelude/cpu.h's MlcKernelCtx.
struct KernelCtx {
  int64_t step;
  int64_t *error;
  int64_t rows;
  const int64_t *win; // a sharded launch's windows (nwin triples), else null
  int64_t nwin;
};

/// C = op(A) op(B) (+ C with `accumulate`: beta = 1), row-major (C is m x
/// n, ldc = n): the CPU BLAS, or in a build without one (a GPU machine's
/// runtime-only build) a plain loop.
template <typename T>
void rowMajorGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *A, int64_t lda,
                  const T *B, int64_t ldb, T *C, bool accumulate) {
#ifdef MLC_HAVE_CBLAS
  const auto opA = ta ? CblasTrans : CblasNoTrans, opB = tb ? CblasTrans : CblasNoTrans;
  const T beta = accumulate ? 1 : 0;
  if constexpr (sizeof(T) == 4)
    cblas_sgemm(CblasRowMajor, opA, opB, m, n, k, 1.0f, A, lda, B, ldb, beta, C, n);
  else
    cblas_dgemm(CblasRowMajor, opA, opB, m, n, k, 1.0, A, lda, B, ldb, beta, C, n);
#else
#pragma omp parallel for
  for (int64_t i = 0; i < m; ++i) {
    T *c = C + i * n;
    for (int64_t j = 0; j < n && !accumulate; ++j)
      c[j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      const T a = ta ? A[p * lda + i] : A[i * lda + p];
      for (int64_t j = 0; j < n; ++j)
        c[j] += a * (tb ? B[j * ldb + p] : B[p * ldb + j]);
    }
  }
#endif
}


} // namespace

CpuBackend::CpuBackend(const Package &pkg, bool verbose) : Backend(pkg) {
  profile.enabled = std::getenv("MLC_PROFILE") != nullptr;
  // Everything this backend allocates, checked against the machine first.
  {
    double need = 4.0 * double(pkg.paramCount) * double(elementSize_);
    int64_t arena = 0;
    for (auto &[_, fn] : pkg.functions)
      arena = std::max(arena, fn.arenaBytes);
    need += double(arena);
    for (const InputInfo &in : pkg.inputs)
      need += double(in.numel) * double(dtypeSize(in.dtype));
    double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (have > 0 && need > have)
      fail(pkg.dir + ": training this package needs " + std::to_string(int64_t(need / (1 << 20))) +
           " MiB (parameters, gradients, AdamW moments, activations, inputs); this machine "
           "has " + std::to_string(int64_t(have / (1 << 20))) + " MiB");
  }
  namespace mem = mlc::memory;
  for (auto *flat : {&flats_[FlatBuffer::Params], &flats_[FlatBuffer::Grads]})
    flat->assign(pkg.paramCount * elementSize_, 0);
  for (auto *flat : {&flats_[FlatBuffer::AdamM], &flats_[FlatBuffer::AdamV]})
    flat->assign(momentCapacity() * elementSize_, 0);
  account(mem::kParameters, int64_t(flats_[FlatBuffer::Params].size()));
  account(mem::kGradients, int64_t(flats_[FlatBuffer::Grads].size()));
  account(mem::kMoments,
          int64_t(flats_[FlatBuffer::AdamM].size() + flats_[FlatBuffer::AdamV].size()));
  for (const InputInfo &in : pkg.inputs) {
    inputs_[in.name].assign(in.numel * dtypeSize(in.dtype), 0);
    account(mem::kInputs, int64_t(inputs_[in.name].size()));
  }
  for (const ScalarsInfo &s : pkg.scalars) {
    scalars_[s.name].assign(s.size, 0.0);
    account(mem::kRuntime, int64_t(s.size * sizeof(double)));
  }
  const int64_t align = mem::kCpuArenaAlignment;
  int64_t arena = align;
  for (auto &[_, fn] : pkg.functions)
    arena = std::max(arena, fn.arenaBytes);
  arena = (arena + align - 1) / align * align;
  arena_ = static_cast<char *>(std::aligned_alloc(align, arena));
  if (!arena_)
    fail("cannot allocate the " + std::to_string(arena >> 20) + " MiB activation arena");
  account(mem::kArena, arena);
  library_ = loadHostKernelLibrary(pkg.kernelsSource, verbose);

  bindPointers();
  for (auto &[name, fn] : pkg.functions) {
    Bound &b = bound_[name];
    for (const StepDecl &s : fn.steps) {
      b.gemmTypes.push_back(s.kind == StepDecl::Gemm ? gemmDtype(fn, s) : "");
      if (s.kind == StepDecl::Gemm && s.gelu && !geluF32_) {
        geluF32_ = reinterpret_cast<decltype(geluF32_)>(dlsym(library_, "mlc_gemm_gelu_f32"));
        geluF64_ = reinterpret_cast<decltype(geluF64_)>(dlsym(library_, "mlc_gemm_gelu_f64"));
        if (!geluF32_ || !geluF64_)
          fail(pkg.dir + ": kernels.cpp has no mlc_gemm_gelu_f32/f64 for the GEMMs' GELU "
                         "epilogue (written by an older mlc); recompile the package");
      }
      if (s.kind != StepDecl::Kernel) {
        b.calls.push_back(nullptr);
        b.labels.push_back(s.kind == StepDecl::Gemm                 ? "gemm"
                           : s.kind == StepDecl::ReduceScatterStart ? "reduce-scatter"
                           : s.kind == StepDecl::AllGatherStart     ? "all-gather"
                           : s.kind == StepDecl::TpWait             ? "tp-wait"
                                                                    : "all-reduce");
        continue;
      }
      void *sym = dlsym(library_, s.kernel.c_str());
      auto *argCount = static_cast<const int64_t *>(dlsym(library_, (s.kernel + "_args").c_str()));
      if (!sym || !argCount)
        fail(pkg.dir + ": kernel '" + s.kernel + "' is missing from kernels.cpp");
      if (*argCount != int64_t(s.buffers.size()))
        fail(pkg.dir + "/plan.txt: function " + name + " launches kernel " + s.kernel +
             " with " + std::to_string(s.buffers.size()) + " buffers; it takes " +
             std::to_string(*argCount));
      b.calls.push_back(reinterpret_cast<void (*)(char **, void *)>(sym));
      // The profile names a kernel with its template (absent in packages
      // written before kinds were recorded).
      auto *kind = static_cast<const char *>(dlsym(library_, (s.kernel + "_kind").c_str()));
      b.labels.push_back(kind ? s.kernel + " " + kind : s.kernel);
    }
  }
}

void CpuBackend::bindPointers() {
  for (auto &[name, fn] : pkg_.functions) {
    Bound &b = bound_[name];
    b.pointers.clear();
    b.args.clear();
    for (size_t i = 0; i < fn.buffers.size(); ++i) {
      BufferPlace p = place(fn, int(i));
      b.usesGradSums |= p.kind == BufferPlace::Flat && p.flat == FlatBuffer::GradSum;
      b.pointers.push_back(resolve(fn, int(i)));
    }
    for (const StepDecl &s : fn.steps) {
      std::vector<char *> args;
      for (int id : s.buffers)
        args.push_back(b.pointers[size_t(id)]);
      b.args.push_back(args);
    }
  }
}

void CpuBackend::allocateGradSums() {
  flats_[FlatBuffer::GradSum].assign(pkg_.paramCount * elementSize_, 0);
  account(mlc::memory::kGradientSums, int64_t(flats_[FlatBuffer::GradSum].size()));
  bindPointers();
}

void CpuBackend::shardsLaidOut() {
  if (int64_t(flats_[FlatBuffer::AdamM].size()) == momentCapacity() * elementSize_)
    return;
  for (auto *flat : {&flats_[FlatBuffer::AdamM], &flats_[FlatBuffer::AdamV]})
    flat->assign(momentCapacity() * elementSize_, 0);
  allocated_[mlc::memory::kMoments] =
      int64_t(flats_[FlatBuffer::AdamM].size() + flats_[FlatBuffer::AdamV].size());
  bindPointers();
}

// The kernel library stays loaded: OpenMP's worker threads may still be
// leaving a parallel region of its code when the backend goes away, and
// unmapping it under them crashes. dlopen reference-counts, so loading the
// same package again costs nothing.
CpuBackend::~CpuBackend() { std::free(arena_); }

std::vector<char> &CpuBackend::flat(FlatBuffer which) {
  if (which == FlatBuffer::GradSum && flats_[which].empty())
    allocateGradSums();
  return flats_[which];
}

void CpuBackend::upload(FlatBuffer which, int64_t offset, const void *src, int64_t bytes) {
  std::vector<char> &buf = flat(which);
  if (offset < 0 || bytes < 0 || offset + bytes > int64_t(buf.size()))
    fail("internal: a copy of " + std::to_string(bytes) + " bytes at " +
         std::to_string(offset) + " overruns a flat buffer of " + std::to_string(buf.size()));
  std::memcpy(buf.data() + offset, src, bytes);
}

void CpuBackend::download(FlatBuffer which, int64_t offset, void *dst, int64_t bytes) {
  std::vector<char> &buf = flat(which);
  if (offset < 0 || bytes < 0 || offset + bytes > int64_t(buf.size()))
    fail("internal: a copy of " + std::to_string(bytes) + " bytes at " +
         std::to_string(offset) + " overruns a flat buffer of " + std::to_string(buf.size()));
  std::memcpy(dst, buf.data() + offset, bytes);
}

void CpuBackend::zero(FlatBuffer which) {
  std::vector<char> &buf = flat(which);
  std::memset(buf.data(), 0, buf.size());
}

char *CpuBackend::resolve(const FunctionPlan &fn, int id) {
  BufferPlace p = place(fn, id);
  switch (p.kind) {
  case BufferPlace::Flat:
    if (p.flat == FlatBuffer::GradSum && flats_[FlatBuffer::GradSum].empty())
      return nullptr; // bound when a run first accumulates (allocateGradSums)
    return flat(p.flat).data() + p.offset;
  case BufferPlace::Scalars:
    return reinterpret_cast<char *>(scalars_.at(p.name).data()) + p.offset;
  case BufferPlace::Input:
    return inputs_.at(p.name).data() + p.offset;
  case BufferPlace::Arena:
    return arena_ + p.offset;
  }
  return nullptr;
}

void CpuBackend::setInput(const std::string &name, const HostTensor &t) {
  std::vector<char> data = prepareInput(name, t);
  std::memcpy(inputs_[name].data(), data.data(), data.size());
}

/// An f32 product: oneDNN's sgemm where it is built in (the fastest on the
/// step's shapes, bench/blas_compare.py, and threaded on the kernels'
/// OpenMP pool; MLC_BLAS=openblas measures the alternative), else the BLAS.
static void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float *C, bool accumulate) {
#ifdef MLC_HAVE_DNNL
  static const bool dnnl = [] {
    const char *v = std::getenv("MLC_BLAS");
    return !v || std::string(v) != "openblas";
  }();
  if (dnnl) {
    if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, A, lda, B, ldb,
                   accumulate ? 1.0f : 0.0f, C, n) != dnnl_success)
      fail("oneDNN sgemm failed on a " + std::to_string(m) + " x " + std::to_string(n) + " x " +
           std::to_string(k) + " product");
    return;
  }
#endif
  rowMajorGemm(ta, tb, m, n, k, A, lda, B, ldb, C, accumulate);
}

/// c[r][j] += bias[j] over an m x n block (a GEMM's bias, added while the
/// block is fresh from the product).
template <typename T> static void addBias(T *c, const T *bias, int64_t m, int64_t n) {
#pragma omp parallel for if (m * n >= 65536)
  for (int64_t r = 0; r < m; ++r) {
    T *row = c + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      row[j] += bias[j];
  }
}

/// One GEMM step of element type `dtype`. bf16 operands are widened to f32
/// (exactly), multiplied in f32 and the product rounded to bf16 ("bf16-f32":
/// stored in f32): what a tensor core computes, up to the order of the sums.
/// A bias (of the result's type; null for none) is added to every row before
/// any rounding to bf16, as cuBLASLt's epilogue does. With `accumulate`
/// the product is added to out (bf16: widened, summed in f32, rounded once).
static void gemm(StepDecl s, char *out, const char *lhs, const char *rhs, const char *bias,
                 const std::string &dtype, int64_t rows) {
  if (s.m < 0)
    s.m = rows;
  if (s.k < 0)
    s.k = rows;
  int64_t batches = 1;
  for (int64_t d : s.batch)
    batches *= d;
  // Leading dimensions follow the stored (row-major) shapes.
  const int lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  static thread_local std::vector<float> wa, wb, wc;
  for (int64_t b = 0; b < batches; ++b) {
    int64_t lo = 0, ro = 0, rem = b;
    for (size_t d = s.batch.size(); d-- > 0;) {
      int64_t i = rem % s.batch[d];
      rem /= s.batch[d];
      lo += i * s.lhsStrides[d];
      ro += i * s.rhsStrides[d];
    }
    int64_t oo = b * s.m * s.n;
    if (dtype == "f32") {
      sgemm(s.transA, s.transB, s.m, s.n, s.k, reinterpret_cast<const float *>(lhs) + lo, lda,
            reinterpret_cast<const float *>(rhs) + ro, ldb, reinterpret_cast<float *>(out) + oo,
            s.accumulate);
      if (bias)
        addBias(reinterpret_cast<float *>(out) + oo, reinterpret_cast<const float *>(bias), s.m,
                s.n);
    } else if (dtype == "bf16" || dtype == "bf16-f32") {
      // (Plain pointers into the scratch: a thread_local named inside a
      // parallel loop would be each worker's own.)
      auto widen = [](std::vector<float> &w, const char *base, int64_t offset, int64_t n) {
        w.resize(size_t(n));
        float *dst = w.data();
        const uint16_t *p = reinterpret_cast<const uint16_t *>(base) + offset;
#pragma omp parallel for simd
        for (int64_t i = 0; i < n; ++i)
          dst[i] = bf16ToFloat(p[i]);
      };
      widen(wa, lhs, lo, s.m * s.k);
      widen(wb, rhs, ro, s.k * s.n);
      if (dtype == "bf16-f32") {
        sgemm(s.transA, s.transB, s.m, s.n, s.k, wa.data(), lda, wb.data(), ldb,
              reinterpret_cast<float *>(out) + oo, s.accumulate);
        if (bias)
          addBias(reinterpret_cast<float *>(out) + oo, reinterpret_cast<const float *>(bias),
                  s.m, s.n);
        continue;
      }
      if (s.accumulate)
        widen(wc, out, oo, s.m * s.n);
      else
        wc.resize(size_t(s.m * s.n));
      sgemm(s.transA, s.transB, s.m, s.n, s.k, wa.data(), lda, wb.data(), ldb, wc.data(),
            s.accumulate);
      if (bias) {
        static thread_local std::vector<float> wbias;
        widen(wbias, bias, 0, s.n);
        addBias(wc.data(), static_cast<const float *>(wbias.data()), s.m, s.n);
      }
      uint16_t *o = reinterpret_cast<uint16_t *>(out) + oo;
      const float *c = wc.data();
      const int64_t n = s.m * s.n;
#pragma omp parallel for simd
      for (int64_t i = 0; i < n; ++i)
        o[i] = floatToBf16(c[i]);
    } else {
      rowMajorGemm(s.transA, s.transB, s.m, s.n, s.k, reinterpret_cast<const double *>(lhs) + lo,
                   lda, reinterpret_cast<const double *>(rhs) + ro, ldb,
                   reinterpret_cast<double *>(out) + oo, s.accumulate);
      if (bias)
        addBias(reinterpret_cast<double *>(out) + oo, reinterpret_cast<const double *>(bias),
                s.m, s.n);
    }
  }
}

/// A GEMM step with its epilogues: the product (+ bias) into out, or with
/// gelu into the pre-activation and its GELU (kernels.cpp's) into out.
void CpuBackend::runGemm(const StepDecl &s, char *const *args, const std::string &dtype) {
  char *product = s.gelu ? args[s.buffers.size() - 1] : args[0];
  gemm(s, product, args[1], args[2], s.bias ? args[3] : nullptr, dtype, rows_);
  if (!s.gelu)
    return;
  int64_t n = (s.m < 0 ? rows_ : s.m) * s.n;
  for (int64_t d : s.batch)
    n *= d;
  if (dtype == "f64") {
    geluF64_(reinterpret_cast<double *>(args[0]), reinterpret_cast<const double *>(product), n);
  } else if (dtype == "bf16") {
    // From the stored bf16 pre-activation, in f32, rounded once (the
    // package's GELU over widened values).
    static thread_local std::vector<float> wide;
    wide.resize(size_t(n));
    float *w = wide.data();
    const uint16_t *x = reinterpret_cast<const uint16_t *>(product);
    uint16_t *o = reinterpret_cast<uint16_t *>(args[0]);
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i)
      w[i] = bf16ToFloat(x[i]);
    geluF32_(w, w, n);
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i)
      o[i] = floatToBf16(w[i]);
  } else {
    geluF32_(reinterpret_cast<float *>(args[0]), reinterpret_cast<const float *>(product), n);
  }
}

/// Before a bucket's sum: this rank's weight, then (bucket-wise clipping)
/// mlcClipFactor(threshold, norm) of what is left.
template <typename T>
static void prepareSlice(T *g, int64_t count, double weight, double clipThreshold) {
  double factor = weight;
  if (clipThreshold > 0) {
    double sum = 0;
#pragma omp parallel for simd reduction(+ : sum)
    for (int64_t i = 0; i < count; ++i)
      sum += double(g[i]) * double(g[i]);
    factor *= mlcClipFactor(clipThreshold, weight * std::sqrt(sum));
  }
  if (factor == 1.0)
    return;
  const T f = T(factor);
#pragma omp parallel for simd
  for (int64_t i = 0; i < count; ++i)
    g[i] *= f;
}

void CpuBackend::prepareBucket(int64_t offset, int64_t count, bool clip) {
  double threshold =
      clip ? bucketClip_ * std::sqrt(double(count) / double(pkg_.paramCount)) : 0.0;
  if (gradWeight_ == 1.0 && threshold <= 0)
    return;
  std::vector<char> &grads = flats_[FlatBuffer::Grads];
  if (offset < 0 || count < 1 || (offset + count) * elementSize_ > int64_t(grads.size()))
    fail("internal: a gradient bucket past the end of the gradients");
  char *base = grads.data() + offset * elementSize_;
  if (elementSize_ == 8)
    prepareSlice(reinterpret_cast<double *>(base), count, gradWeight_, threshold);
  else
    prepareSlice(reinterpret_cast<float *>(base), count, gradWeight_, threshold);
}

char *CpuBackend::bucket(FlatBuffer which, int64_t offset, int64_t count, const char *what) {
  std::vector<char> &buf = flat(which);
  if (offset < 0 || count < 0 || (offset + count) * elementSize_ > int64_t(buf.size()))
    fail(std::string("internal: ") + what + " past the end of a flat buffer");
  return buf.data() + offset * elementSize_;
}

void CpuBackend::reduceScatterStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  if (!comm_ || comm_->size() == 1)
    return;
  comm_->reduceScatterStart(bucket(which, offset, count, "a reduce-scatter"), count,
                            elementSize_ == 8, tag);
  ++outstanding_;
}

void CpuBackend::reduceScatterWait(int tag) {
  if (!comm_ || comm_->size() == 1)
    return;
  auto start = std::chrono::steady_clock::now();
  comm_->reduceScatterWait(tag);
  profile.commWaitSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  --outstanding_;
}

void CpuBackend::allGatherStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  if (!comm_ || comm_->size() == 1)
    return;
  comm_->allGatherStart(bucket(which, offset, count, "an all-gather"), count,
                        elementSize_ == 8, tag);
  ++outstanding_;
}

void CpuBackend::allGatherWait(int tag) {
  if (!comm_ || comm_->size() == 1)
    return;
  auto start = std::chrono::steady_clock::now();
  comm_->allGatherWait(tag);
  profile.commWaitSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  --outstanding_;
}

void CpuBackend::allReduceStart(FlatBuffer which, int64_t offset, int64_t count, int tag) {
  if (!comm_ || comm_->size() == 1)
    return;
  std::vector<char> &buf = flat(which);
  if (offset < 0 || count < 0 || (offset + count) * elementSize_ > int64_t(buf.size()))
    fail("internal: an all-reduce past the end of a flat buffer");
  comm_->allReduceStart(buf.data() + offset * elementSize_, count, elementSize_ == 8, tag);
  ++outstanding_;
}

void CpuBackend::allReduceWait(int tag) {
  if (!comm_ || comm_->size() == 1)
    return;
  auto start = std::chrono::steady_clock::now();
  comm_->allReduceWait(tag);
  profile.commWaitSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  --outstanding_;
}

void CpuBackend::run(const std::string &function, int64_t step) {
  const FunctionPlan &fn = pkg_.function(function);
  Bound &b = bound_.at(function);
  if (b.usesGradSums && flats_[FlatBuffer::GradSum].empty())
    allocateGradSums();
  checkRows();
  int64_t error[4] = {0, 0, 0, 0};
  KernelCtx ctx{step, error, rows_, nullptr, 0};
  using Clock = std::chrono::steady_clock;
  for (size_t i = 0; i < fn.steps.size(); ++i) {
    Clock::time_point t0;
    if (profile.enabled)
      t0 = Clock::now();
    const StepDecl &s = fn.steps[i];
    if (b.calls[i] && s.shard != StepDecl::kNoShard) {
      const std::vector<int64_t> w = windows(s.shard);
      KernelCtx sharded = ctx;
      sharded.win = w.data();
      sharded.nwin = int64_t(w.size() / 3);
      b.calls[i](b.args[i].data(), &sharded);
    } else if (b.calls[i]) {
      b.calls[i](b.args[i].data(), &ctx);
    } else if (s.kind == StepDecl::Gemm) {
      runGemm(s, b.args[i].data(), b.gemmTypes[i]);
    } else if (s.kind == StepDecl::AllReduceNorm) {
      // The norm of every rank's shard from each rank's: sqrt(sum of squares).
      double *norm = reinterpret_cast<double *>(b.args[i][0]);
      if (comm_ && comm_->size() > 1) {
        double squares = *norm * *norm;
        comm_->sum(&squares, 1);
        *norm = std::sqrt(squares);
      }
    } else if (s.kind == StepDecl::TpAllReduce) {
      tpAllReduce(fn, s, b.args[i][0]);
    } else if (s.kind == StepDecl::TpWait) {
      tpWait(s);
    } else if (s.kind == StepDecl::TpAllGather || s.kind == StepDecl::TpReduceScatter) {
      tpSlices(fn, s, b.args[i][0], b.args[i][1]);
    } else {
      startOrWaitCollective(s);
    }
    // MPI moves a non-blocking sum forward only inside MPI calls.
    if (outstanding_ > 0)
      comm_->progress();
    if (tpOutstanding_ > 0)
      tensorParallel()->progress();
    if (profile.enabled) {
      double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      (b.calls[i] ? profile.kernelSeconds : profile.gemmSeconds) += dt;
      profile.secondsByKernel[b.labels[i]] += dt;
    }
  }
  if (weighsAfterRun(function))
    prepareBucket(0, pkg_.paramCount, /*clip=*/false); // the weight, where not 1
  if (error[0])
    failKernelReport(error[0], error[1], error[2], error[3], gatheredIds_);
}

HostTensor CpuBackend::output(const std::string &function, const std::string &name) {
  int id = 0;
  HostTensor t = outputTensor(function, name, id);
  std::memcpy(t.data.data(), bound_.at(function).pointers[id], t.data.size());
  return t;
}

namespace {

/// One logical CPU's fields in /proc/cpuinfo.
using CpuFields = std::map<std::string, std::string>;

std::vector<CpuFields> readCpuinfo() {
  std::vector<CpuFields> cpus(1);
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (!cpus.back().empty())
        cpus.emplace_back();
      continue;
    }
    auto trim = [](std::string t) {
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      return t;
    };
    cpus.back()[trim(line.substr(0, colon))] = trim(line.substr(colon + 1));
  }
  if (cpus.back().empty())
    cpus.pop_back();
  return cpus;
}

/// The clock in GHz from the CPU's own description: the "@ 2.10GHz" of its
/// model name, else cpufreq's maximum, else the MHz cpuinfo reports.
double clockGHz(const CpuFields &cpu) {
  auto field = [&](const char *key) {
    auto it = cpu.find(key);
    return it == cpu.end() ? std::string() : it->second;
  };
  std::string model = field("model name");
  if (auto at = model.rfind('@'); at != std::string::npos) {
    char *unit = nullptr;
    double clock = std::strtod(model.c_str() + at + 1, &unit);
    while (unit && *unit == ' ')
      ++unit;
    if (clock > 0)
      return unit && (*unit == 'M' || *unit == 'm') ? clock / 1e3 : clock; // "@ 2400MHz"
  }
  std::ifstream freq("/sys/devices/system/cpu/cpu" + field("processor") +
                     "/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (freq >> khz && khz > 0)
    return khz / 1e6;
  return std::atof(field("cpu MHz").c_str()) / 1e3;
}

/// The physical cores (physical id, core id) among the CPUs this process may
/// run on, and the first of those CPUs; no CPUs when cpuinfo cannot tell.
std::pair<int64_t, const CpuFields *> allowedCores(const std::vector<CpuFields> &cpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  std::set<std::pair<std::string, std::string>> cores;
  const CpuFields *first = nullptr;
  for (const CpuFields &cpu : cpus) {
    auto p = cpu.find("processor");
    if (p == cpu.end() || !CPU_ISSET(std::atoi(p->second.c_str()), &allowed))
      continue;
    first = first ? first : &cpu;
    auto id = [&](const char *key) {
      auto it = cpu.find(key);
      return it == cpu.end() ? p->second : it->second; // no topology: each CPU a core
    };
    cores.insert({id("physical id"), id("core id")});
  }
  return {int64_t(cores.size()), first};
}

/// A core's vector arithmetic: f32 lanes of its widest ISA and how many
/// FMAs (or a multiply and an add) it issues per cycle.
struct VectorUnits {
  int lanes = 4, units = 1;
  const char *unit = "mul+add units";
};

/// Server cores with AVX-512 or AVX2 have two FMA units (a few low-end
/// AVX-512 parts have one: their MFU reads low, never above 1).
VectorUnits vectorUnits(const CpuFields &cpu) {
  auto it = cpu.find("flags");
  if (it == cpu.end())
    it = cpu.find("Features"); // aarch64
  std::set<std::string> flags;
  std::istringstream words(it == cpu.end() ? "" : it->second);
  for (std::string w; words >> w;)
    flags.insert(w);
  if (flags.count("avx512f"))
    return {16, 2, "FMA units"};
  if (flags.count("avx2") && flags.count("fma"))
    return {8, 2, "FMA units"};
  if (flags.count("avx"))
    return {8, 1, "mul+add units"};
  if (flags.count("asimd"))
    return {4, 2, "FMA units"};
  return {};
}

} // namespace

/// cores x FMA units x lanes x 2 FLOPs (an FMA) x clock, from the CPU's own
/// description: the physical cores this process may run on (at most one
/// per OpenMP thread), the lanes of the package's element type (f64: half).
PeakRate CpuBackend::peakRate() {
  const std::vector<CpuFields> cpus = readCpuinfo();
  auto [cores, first] = allowedCores(cpus);
  if (!first)
    return {};
  const int64_t used = std::min<int64_t>(cores, omp_get_max_threads());
  const VectorUnits v = vectorUnits(*first);
  const int lanes = elementSize_ == 8 ? v.lanes / 2 : v.lanes;
  const double ghz = clockGHz(*first);
  if (!(ghz > 0))
    return {};
  char basis[160];
  std::snprintf(basis, sizeof basis, "%lld core%s x %d %s x %d %s lanes x 2 FLOPs x %.3g GHz",
                (long long)used, used == 1 ? "" : "s", v.units, v.unit, lanes,
                elementSize_ == 8 ? "f64" : "f32", ghz);
  return {double(used) * v.units * lanes * 2.0 * ghz * 1e9, basis};
}

void CpuBackend::setScalars(const std::string &name, const std::vector<double> &values) {
  auto it = scalars_.find(name);
  if (it == scalars_.end())
    fail("the package has no scalars named '" + name + "'");
  if (values.size() != it->second.size())
    fail("scalars '" + name + "' take " + std::to_string(it->second.size()) + " values, got " +
         std::to_string(values.size()));
  it->second = values;
}

} // namespace mlc::rt
