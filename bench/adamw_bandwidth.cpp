//===- adamw_bandwidth.cpp - the fused AdamW against memory bandwidth ------===//
//
//   build/bin/mlc-bench-adamw [millions of parameters, default 32]
//
// Runs mlc's AdamW over flat f32 buffers laid out like GPT-2 small's
// parameters (matrices with decay, vectors without) and, in the same run, a
// STREAM-style triad over buffers of the same size. AdamW reads p, g, m, v
// and writes p, m, v: 28 bytes per parameter. Two triads over the same sizes:
// STREAM's a = b + s c (counted as 12 bytes per element, though the store
// also reads a's cache lines first), and the in-place a += s b, which moves
// exactly the 12 bytes it is counted for, like AdamW's updates. Prints the
// bandwidths and AdamW's ratio to each.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using Clock = std::chrono::steady_clock;

template <typename F> static double medianSeconds(F f, int reps = 9) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  int64_t millions = argc > 1 ? std::atoll(argv[1]) : 32;
  // GPT-2-small-like layer: 768x2304, 2304, 768x768, 768, 768x3072, 3072,
  // 3072x768, 768, and two LayerNorms; repeated until the size is reached.
  const int64_t shapes[][2] = {{768, 2304}, {2304, 1}, {768, 768}, {768, 1}, {768, 3072},
                               {3072, 1},   {3072, 768}, {768, 1}, {768, 1}, {768, 1}};
  std::vector<mlc::rt::ParamInfo> params;
  int64_t n = 0;
  while (n < millions * 1000000) {
    for (auto &s : shapes) {
      mlc::rt::ParamInfo p;
      p.numel = s[0] * s[1];
      p.offset = n;
      p.decay = s[1] > 1;
      n += p.numel;
      params.push_back(p);
    }
  }
  std::vector<float> p(n, 0.01f), g(n, 0.001f), m(n, 0.0f), v(n, 0.0f);
  mlc::rt::AdamWStep step;
  step.lr = 1e-4;
  step.weightDecay = 0.01;
  step.t = 0;
  double adamw = medianSeconds([&] {
    ++step.t;
    mlc::rt::adamwHost(params, 4, reinterpret_cast<char *>(p.data()),
                       reinterpret_cast<const char *>(g.data()),
                       reinterpret_cast<char *>(m.data()), reinterpret_cast<char *>(v.data()),
                       step);
  });
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  double triad = medianSeconds([&] {
    float *pa = a.data();
    const float *pb = b.data(), *pc = c.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      pa[i] = pb[i] + 3.0f * pc[i];
  });
  double inplace = medianSeconds([&] {
    float *pa = a.data();
    const float *pb = b.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      pa[i] += 3.0f * pb[i];
  });
  double adamwGBs = 28.0 * n / adamw / 1e9, triadGBs = 12.0 * n / triad / 1e9,
         inplaceGBs = 12.0 * n / inplace / 1e9;
  std::printf("adamw f32, %.1fM parameters in %zu tensors: %.2f ms, %.1f GB/s\n", n / 1e6,
              params.size(), 1e3 * adamw, adamwGBs);
  std::printf("triad a = b + s*c (STREAM counting): %.2f ms, %.1f GB/s; adamw / triad %.2f\n",
              1e3 * triad, triadGBs, adamwGBs / triadGBs);
  std::printf("triad a += s*b (in place): %.2f ms, %.1f GB/s; adamw / in-place triad %.2f\n",
              1e3 * inplace, inplaceGBs, adamwGBs / inplaceGBs);
  return 0;
}
