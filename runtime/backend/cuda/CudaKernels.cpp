//===- CudaKernels.cpp - the kernel lines of kernels.cu ---------------------===//

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/Backend.h"
#include "support/Error.h"

#include <sstream>

namespace mlc::rt {

std::map<std::string, CudaKernelInfo> parseCudaKernels(const std::string &source,
                                                       const std::string &path) {
  std::map<std::string, CudaKernelInfo> out;
  std::istringstream in(source);
  std::string line;
  const std::string tag = "// mlc.kernel ", refuse = "// mlc.refuse ";
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (line.compare(0, refuse.size(), refuse) == 0) { // "// mlc.refuse NAME WHY"
      const size_t why = line.find(' ', refuse.size());
      fail(path + ": " +
           (why == std::string::npos ? "CUDA cannot run kernel " + line.substr(refuse.size())
                                     : line.substr(why + 1)));
    }
    if (line.compare(0, tag.size(), tag) != 0)
      continue;
    auto bad = [&](const std::string &why) {
      fail(path + ":" + std::to_string(lineNo) + ": malformed kernel line (" + why + "): " + line);
    };
    std::istringstream fields(line.substr(tag.size()));
    CudaKernelInfo k;
    fields >> k.name >> k.kind;
    if (k.name.empty() || k.kind.empty())
      bad("no name or kind");
    std::string field;
    bool haveArgs = false, haveLaunch = false;
    while (fields >> field) {
      size_t eq = field.find('=');
      if (eq == std::string::npos)
        bad("'" + field + "' is not key=value");
      std::string key = field.substr(0, eq), value = field.substr(eq + 1);
      auto number = [&](const std::string &s) -> int64_t {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(s, &used);
        } catch (...) {
          used = 0;
        }
        if (used != s.size() || s.empty() || v < 0)
          bad("'" + s + "' is not a count");
        return v;
      };
      if (key == "args") {
        k.args = number(value);
        haveArgs = true;
      } else if (key == "scratch") {
        k.scratch = number(value);
      } else if (key == "launch") {
        std::istringstream list(value);
        std::string item;
        while (std::getline(list, item, ',')) {
          size_t x = item.find('x');
          if (x == std::string::npos)
            bad("launch '" + item + "' is not GRIDxBLOCK");
          CudaKernelInfo::Launch l{number(item.substr(0, x)), number(item.substr(x + 1))};
          if (l.grid < 1 || l.grid > 0x7fffffff || l.block < 1 || l.block > 1024 ||
              l.block % 32 != 0)
            bad("launch '" + item + "' is outside 1..2^31-1 blocks of 32..1024 threads");
          k.launches.push_back(l);
        }
        haveLaunch = true;
      }
    }
    if (!haveArgs || !haveLaunch || k.launches.empty())
      bad("args= and launch= are required");
    if (out.count(k.name))
      bad("kernel " + k.name + " is announced twice");
    out[k.name] = k;
  }
  return out;
}

/// The runtime's own CUDA kernels, beside each package's: a gradient
/// bucket's sum of squares (per-block partials) and its scaling before its
/// all-reduce, by the rank's weight and, with bucket-wise clipping, by
/// mlcClipFactor(threshold, weight * norm) (Backend::setBucketClip), the
/// factor computed on the device from the partials so nothing waits for
/// the host; and a GEMM's bias added to every row of its result and the
/// tanh GELU of it, where cuBLASLt has no epilogue for the product (bf16
/// rounded to nearest even, as the package's kernels do).
const char *cudaBucketKernels() {
  return MLC_SOURCE_TEXT(MLC_CLIP_FACTOR(__device__)) R"CU(
template <typename T>
__device__ void sumsq(const T *g, long long n, double *part) {
  __shared__ double red[256];
  double s = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    s += (double)g[i] * (double)g[i];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    part[blockIdx.x] = red[0];
}
template <typename T>
__device__ void scale(T *g, long long n, const double *part, int parts, double weight,
                      double threshold) {
  double factor = weight;
  if (threshold > 0) {
    double s = 0;
    for (int p = 0; p < parts; ++p)
      s += part[p];
    factor *= mlcClipFactor(threshold, weight * sqrt(s));
  }
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    g[i] = (T)(g[i] * factor);
}
template <typename T, typename L>
__device__ void addBias(T *c, const T *bias, long long rows, long long n, L load) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < rows * n;
       i += (long long)gridDim.x * blockDim.x)
    c[i] = load(c[i], bias[i % n]);
}
__device__ float bf16ToF32(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
__device__ unsigned short f32ToBf16(float f) {
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (unsigned short)((u >> 16) | 0x40); // NaN stays NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
extern "C" __global__ void __launch_bounds__(256) mlc_bias_f32(float *c, const float *bias, long long rows, long long n) { addBias(c, bias, rows, n, [](float x, float b) { return x + b; }); }
extern "C" __global__ void __launch_bounds__(256) mlc_bias_f64(double *c, const double *bias, long long rows, long long n) { addBias(c, bias, rows, n, [](double x, double b) { return x + b; }); }
extern "C" __global__ void __launch_bounds__(256) mlc_bias_bf16(unsigned short *c, const unsigned short *bias, long long rows, long long n) {
  addBias(c, bias, rows, n, [](unsigned short x, unsigned short b) { return f32ToBf16(bf16ToF32(x) + bf16ToF32(b)); });
}
__device__ float geluTanhOf(float x) { return tanhf(x); }
__device__ double geluTanhOf(double x) { return tanh(x); }
// The tanh GELU of a GEMM without cuBLASLt's epilogue: the formula of the
// generated kernels (mlc_shared.h's mlc_gelu_tanh), bf16 in f32.
template <typename T> __device__ T geluTanhValue(T v) {
  return (T)0.5 * v * ((T)1 + geluTanhOf((T)0.7978845608028654 * (v + (T)0.044715 * v * v * v)));
}
template <typename T, typename Load, typename Store>
__device__ void geluTanh(T *out, const T *x, long long n, Load load, Store store) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = store(geluTanhValue(load(x[i])));
}
extern "C" __global__ void __launch_bounds__(256) mlc_gelu_f32(float *out, const float *x, long long n) {
  geluTanh(out, x, n, [](float v) { return v; }, [](float v) { return v; });
}
extern "C" __global__ void __launch_bounds__(256) mlc_gelu_f64(double *out, const double *x, long long n) {
  geluTanh(out, x, n, [](double v) { return v; }, [](double v) { return v; });
}
extern "C" __global__ void __launch_bounds__(256) mlc_gelu_bf16(unsigned short *out, const unsigned short *x, long long n) {
  geluTanh(out, x, n, [](unsigned short v) { return bf16ToF32(v); }, [](float v) { return f32ToBf16(v); });
}
extern "C" __global__ void __launch_bounds__(256) mlc_sumsq_f32(const float *g, long long n, double *part) { sumsq(g, n, part); }
extern "C" __global__ void __launch_bounds__(256) mlc_sumsq_f64(const double *g, long long n, double *part) { sumsq(g, n, part); }
extern "C" __global__ void mlc_scale_f32(float *g, long long n, const double *part, int parts, double weight, double threshold) { scale(g, n, part, parts, weight, threshold); }
extern "C" __global__ void mlc_scale_f64(double *g, long long n, const double *part, int parts, double weight, double threshold) { scale(g, n, part, parts, weight, threshold); }
)CU";
}

void resetCudaErrorWords(int64_t words[3]) {
  words[0] = 0;
  words[1] = -1; // all ones: no row yet
  words[2] = 0;
}

void checkCudaErrorWords(const int64_t words[3], const GatheredIds &ids) {
  if (words[0] == 0)
    return;
  uint64_t key = uint64_t(words[1]);
  failKernelReport(words[0], int64_t(key >> 32), int32_t(uint32_t(key & 0xffffffffu)), words[2],
                   ids);
}

} // namespace mlc::rt
