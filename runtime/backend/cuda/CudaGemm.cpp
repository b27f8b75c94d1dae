//===- CudaGemm.cpp - the CUDA backend's GEMMs through cuBLASLt ------------===//
//
// A GEMM step becomes a plan per shape (cuBLASLt's description, layouts and
// algorithm, made once and reused by every step and graph capture) with
// the most folded epilogue cuBLASLt has for it (GELU and bias, bias, none);
// what the chosen epilogue left out runs after the product as the
// runtime's own kernels.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackendImpl.h"

#include <algorithm>
#include <cstdio>

namespace mlc::rt {

CudaBackend::GemmShape CudaBackend::gemmShape(const StepDecl &s0, const std::string &dtype,
                                              CUdeviceptr out, CUdeviceptr lhs,
                                              CUdeviceptr rhs, CUdeviceptr bias,
                                              CUdeviceptr pre) const {
  GemmShape g;
  StepDecl &s = g.s;
  s = s0;
  if (s.m < 0)
    s.m = rows_;
  if (s.k < 0)
    s.k = rows_;
  for (int64_t d : s.batch)
    g.batches *= d;
  // Operand and result element types: one, except bf16 operands with an
  // f32 result ("bf16-f32").
  g.f64 = dtype == "f64";
  g.bf16 = dtype == "bf16" || dtype == "bf16-f32";
  g.size = g.f64 ? 8 : g.bf16 ? 2 : 4;
  g.outSize = dtype == "bf16" ? 2 : g.f64 ? 8 : 4;
  g.n = uint64_t(s.n);
  g.m = uint64_t(s.m);
  g.k = uint64_t(s.k);
  g.strided = s.batch.size() <= 1;
  g.tf32 = tf32_ && dtype == "f32";
  // Each operand's alignment, which cuBLASLt assumes to be 256 bytes unless
  // told: the largest power of two (up to 256) dividing its address and its
  // batch strides. Arena slices are 64-byte aligned; a weight's slice of the
  // flat parameters is aligned to its element offset.
  auto alignment = [&](CUdeviceptr base, const std::vector<int64_t> &strides, int64_t matrix,
                       int64_t bytes) {
    uint64_t bits = uint64_t(base) | 256;
    for (int64_t st : strides)
      bits |= uint64_t(st * bytes);
    if (g.batches > 1)
      bits |= uint64_t(matrix * bytes);
    return uint32_t(bits & (~bits + 1));
  };
  const int64_t mn = int64_t(g.m * g.n);
  // (With a GELU the product may go to pre instead of out: C and D are
  // assumed aligned as the less aligned of the two.)
  g.alignA = alignment(rhs, s.rhsStrides, 0, g.size);
  g.alignB = alignment(lhs, s.lhsStrides, 0, g.size);
  g.alignC = std::min(alignment(out, {}, mn, g.outSize),
                      pre ? alignment(pre, {}, mn, g.outSize) : 256u);
  // The heuristic reads the bias pointer's alignment (its value, not the
  // data): a plan holds for biases aligned alike.
  g.alignBias = bias ? alignment(bias, {}, 0, g.outSize) : 0;
  g.alignPre = pre ? alignment(pre, {}, mn, g.outSize) : 0;
  g.key = {s.m,       s.n,    s.k,      s.transA, s.transB, g.batches,   g.size,
           g.outSize, g.tf32, g.alignA, g.alignB, g.alignC, g.alignBias, g.alignPre};
  g.key.insert(g.key.end(), s.lhsStrides.begin(), s.lhsStrides.end());
  g.key.insert(g.key.end(), s.rhsStrides.begin(), s.rhsStrides.end());
  return g;
}

void CudaBackend::makeGemmPlan(const GemmShape &g, GemmPlan &plan, CUdeviceptr bias,
                               CUdeviceptr pre) {
  const StepDecl &s = g.s;
  const uint64_t m = g.m, n = g.n, k = g.k;
  const cudaDataType_t type = g.f64 ? CUDA_R_64F : g.bf16 ? CUDA_R_16BF : CUDA_R_32F,
                       outType = g.outSize == 2 ? CUDA_R_16BF : g.f64 ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute = g.f64    ? CUBLAS_COMPUTE_64F
                                      : g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  checkBlas(lt_->descCreate(&plan.desc, compute, g.f64 ? CUDA_R_64F : CUDA_R_32F),
            "creating a matmul description");
  cublasOperation_t ta = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    tb = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  // Stored shapes (column-major): B^T is n x k (k x n when transposed).
  checkBlas(lt_->layoutCreate(&plan.a, type, s.transB ? k : n, s.transB ? n : k,
                              int64_t(s.transB ? k : n)),
            "creating a layout");
  checkBlas(lt_->layoutCreate(&plan.b, type, s.transA ? m : k, s.transA ? k : m,
                              int64_t(s.transA ? m : k)),
            "creating a layout");
  checkBlas(lt_->layoutCreate(&plan.c, outType, n, m, int64_t(n)), "creating a layout");
  // One strided batch when the batch is one dimension (or absent); other
  // batch shapes loop.
  plan.strided = g.strided;
  if (g.strided && g.batches > 1) {
    int32_t count = int32_t(g.batches);
    int64_t sa = s.rhsStrides[0], sb = s.lhsStrides[0], sc = int64_t(m * n);
    for (auto [layout, stride] : {std::pair{plan.a, sa}, {plan.b, sb}, {plan.c, sc}}) {
      lt_->layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      lt_->layoutSet(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                     sizeof stride);
    }
  }
  const uint64_t ws = uint64_t(workspaceBytes_);
  cublasLtMatmulPreference_t pref = nullptr;
  lt_->prefCreate(&pref);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &g.alignA, sizeof g.alignA);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &g.alignB, sizeof g.alignB);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &g.alignC, sizeof g.alignC);
  lt_->prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &g.alignC, sizeof g.alignC);
  const bool found = chooseGemmAlgorithm(g, plan, pref, bias, pre);
  lt_->prefDestroy(pref);
  if (!found)
    fail("cuBLASLt has no algorithm for a " + std::to_string(s.m) + " x " +
         std::to_string(s.n) + " x " + std::to_string(s.k) + " product");
}

bool CudaBackend::chooseGemmAlgorithm(const GemmShape &g, GemmPlan &plan,
                                      cublasLtMatmulPreference_t pref, CUdeviceptr bias,
                                      CUdeviceptr pre) {
  // Epilogues, the most folded first; the plain product always.
  std::vector<uint32_t> epilogues;
  if (epilogues_ && pre)
    epilogues.push_back(bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX);
  if (epilogues_ && bias)
    epilogues.push_back(CUBLASLT_EPILOGUE_BIAS);
  epilogues.push_back(CUBLASLT_EPILOGUE_DEFAULT);
  const void *biasPtr = reinterpret_cast<const void *>(bias),
             *auxPtr = reinterpret_cast<const void *>(pre);
  const int64_t auxLd = int64_t(g.n), auxStride = int64_t(g.m * g.n);
  auto set = [&](cublasLtMatmulDescAttributes_t a, const void *v, size_t bytes) {
    return lt_->descSet(plan.desc, a, v, bytes) == CUBLAS_STATUS_SUCCESS;
  };
  for (uint32_t e : epilogues) {
    const bool withBias = e & CUBLASLT_EPILOGUE_BIAS, withGelu = e & CUBLASLT_EPILOGUE_GELU;
    bool ok = set(CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    if (withBias)
      ok = ok && set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPtr, sizeof biasPtr);
    if (withGelu) {
      ok = ok && set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &auxPtr, sizeof auxPtr) &&
           set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof auxLd);
      if (g.strided && g.batches > 1)
        ok = ok && set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &auxStride,
                       sizeof auxStride);
    }
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (e == CUBLASLT_EPILOGUE_DEFAULT)
      checkBlas(lt_->heuristic(ltHandle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                               &result, &found),
                "choosing a GEMM algorithm");
    else if (ok)
      ok = lt_->heuristic(ltHandle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                          &result, &found) == CUBLAS_STATUS_SUCCESS;
    if (found >= 1) {
      plan.biasKernel = bias && !withBias;
      plan.geluKernel = pre && !withGelu;
      plan.algo = result.algo;
      return true;
    }
    if (verbose_)
      std::fprintf(stderr,
                   "mlc: cuBLASLt has no algorithm with epilogue %u for a %lld x %lld x %lld "
                   "product; trying a simpler one\n",
                   e, (long long)g.s.m, (long long)g.s.n, (long long)g.s.k);
  }
  return false;
}

void CudaBackend::runGemmProducts(const GemmShape &g, GemmPlan &plan, CUdeviceptr product,
                                  CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr pre) {
  const StepDecl &s = g.s;
  const int64_t mn = int64_t(g.m * g.n);
  const bool geluEpilogue = pre && !plan.geluKernel;
  const double oneD = 1.0, zeroD = 0.0;
  const float oneF = 1.0f, zeroF = 0.0f;
  const void *alpha = g.f64 ? static_cast<const void *>(&oneD) : &oneF;
  // beta = 1: an accumulating GEMM adds its product to C (= D, in place).
  const void *beta = s.accumulate ? (g.f64 ? static_cast<const void *>(&oneD) : &oneF)
                                  : (g.f64 ? static_cast<const void *>(&zeroD) : &zeroF);
  const int64_t loops = g.strided ? 1 : g.batches;
  for (int64_t b = 0; b < loops; ++b) {
    int64_t lo = 0, ro = 0, rem = b;
    for (size_t dd = s.batch.size(); !g.strided && dd-- > 0;) {
      int64_t i = rem % s.batch[dd];
      rem /= s.batch[dd];
      lo += i * s.lhsStrides[dd];
      ro += i * s.rhsStrides[dd];
    }
    const CUdeviceptr A = rhs + ro * g.size, B = lhs + lo * g.size,
                      C = product + b * mn * g.outSize;
    if (geluEpilogue) { // this step's (and batch's) pre-activation
      const void *aux = reinterpret_cast<const void *>(pre + b * mn * g.outSize);
      checkBlas(lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                             sizeof aux),
                "setting a GEMM's GELU input");
    }
    checkBlas(lt_->matmul(ltHandle_, plan.desc, alpha, reinterpret_cast<const void *>(A), plan.a,
                          reinterpret_cast<const void *>(B), plan.b, beta,
                          reinterpret_cast<void *>(C), plan.c, reinterpret_cast<void *>(C),
                          plan.c, &plan.algo, reinterpret_cast<void *>(workspace_),
                          uint64_t(workspaceBytes_), stream_),
              "a " + std::to_string(s.m) + " x " + std::to_string(s.n) + " x " +
                  std::to_string(s.k) + " product");
  }
}

void CudaBackend::gemmEpilogueKernels(const GemmShape &g, const GemmPlan &plan,
                                      CUdeviceptr out, CUdeviceptr product, CUdeviceptr bias,
                                      CUdeviceptr pre) {
  long long rows = (long long)(g.batches * g.s.m), cols = (long long)g.s.n,
            count = rows * cols;
  const unsigned blocks = unsigned(std::min<long long>(4096, (count + 255) / 256));
  CUdeviceptr target = product;
  if (bias && plan.biasKernel) {
    CUfunction fn = g.outSize == 8 ? biasF64_ : g.outSize == 4 ? biasF32_ : biasBf16_;
    void *args[] = {&target, &bias, &rows, &cols};
    check(d_->launch(fn, blocks, 1, 1, 256, 1, 1, 0, stream_, args, nullptr),
          "adding a GEMM's bias");
  }
  if (pre && plan.geluKernel) {
    void *args[] = {&out, &pre, &count};
    check(d_->launch(g.outSize == 8 ? geluF64_ : g.outSize == 2 ? geluBf16_ : geluF32_, blocks, 1,
                     1, 256, 1, 1, 0, stream_,
                     args, nullptr),
          "a GEMM's GELU");
  }
}

/// C = op(A) op(B) in row-major storage is, in cuBLASLt's column-major
/// terms, C^T = op(B)^T op(A)^T: B is the first operand, A the second, and
/// the product is n x m. f32 products accumulate in f32, without TF32
/// unless --tf32 on; bf16 products run on tensor cores, accumulating in f32.
/// A bias (n elements of the result's type, 0 for none) is cuBLASLt's BIAS
/// epilogue: added to every row of the row-major result (a column of the
/// column-major D, whose rows it matches) before the result is rounded.
/// With `pre` (f32, f64, bf16), GELU_AUX(_BIAS): the product (+ bias) goes to
/// pre, its tanh GELU to out. Where cuBLASLt has no algorithm with an
/// epilogue, the next simpler one is asked for and the runtime's kernels
/// add what it left out after the product. With `accumulate` the product
/// is added to out (beta = 1, C = D), before any bias kernel.
void CudaBackend::gemm(const StepDecl &s, const std::string &dtype, CUdeviceptr out,
                       CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr bias, CUdeviceptr pre) {
  const GemmShape g = gemmShape(s, dtype, out, lhs, rhs, bias, pre);
  // One plan per shape, strides and transposes: made once, reused by every
  // step (and by graph captures).
  GemmPlan &plan = gemmPlans_[g.key];
  if (!plan.desc)
    makeGemmPlan(g, plan, bias, pre);
  if (bias && !plan.biasKernel) { // this step's bias (plans are shared by products of one shape)
    const void *ptr = reinterpret_cast<const void *>(bias);
    checkBlas(lt_->descSet(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr),
              "setting a GEMM's bias");
  }
  // The product's destination: out, or with a GELU left to the kernel, pre.
  const CUdeviceptr product = pre && plan.geluKernel ? pre : out;
  runGemmProducts(g, plan, product, lhs, rhs, pre);
  gemmEpilogueKernels(g, plan, out, product, bias, pre);
}

} // namespace mlc::rt
