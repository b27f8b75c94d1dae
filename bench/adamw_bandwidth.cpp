//===- adamw_bandwidth.cpp - the compiled AdamW against memory bandwidth ---===//
//
//   build/bin/mlc-bench-adamw PACKAGE
//
// Runs the package's @optimizer (the AdamW kernel the compiler generated,
// one pass over the flat buffers) through the CPU backend and, in the same
// run, two STREAM-style triads over buffers of the same size. AdamW reads
// p, g, m, v and writes p, m, v: 28 bytes per f32 parameter. The triads:
// STREAM's a = b + s c (counted as 12 bytes per element, though the store
// also reads a's cache lines first), and the in-place a += s b, which moves
// exactly the 12 bytes it is counted for, like AdamW's updates. Prints the
// bandwidths and AdamW's ratio to each. bench/adamw.sh compiles a GPT-2
// package of about 35M parameters and runs this.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "support/Error.h"
#include "contract/OptimizerScalars.h"
#include "runtime/train/Trainer.h"

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
  if (argc != 2) {
    std::fprintf(stderr, "usage: mlc-bench-adamw PACKAGE\n");
    return 2;
  }
  try {
    mlc::rt::Package pkg = mlc::rt::Package::load(argv[1]);
    if (pkg.dtype != "f32")
      mlc::rt::fail("the benchmark counts f32 bytes; compile the package with --dtype f32");
    auto backend = mlc::rt::createBackend("cpu", pkg, /*verbose=*/true);
    const int64_t n = pkg.paramCount;
    mlc::rt::initializeParameters(*backend, 1);
    std::vector<float> g(n, 0.001f);
    backend->upload(mlc::rt::FlatBuffer::Grads, 0, g.data(), n * 4);
    mlc::rt::TrainOptions o;
    int64_t t = 0;
    double adamw = medianSeconds([&] {
      ++t;
      backend->setScalars(mlc::kAdamWScalarsName, mlc::rt::adamwScalars(o, 1e-4, t, 1.0));
      backend->run("optimizer", t);
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
    std::printf("adamw f32 (compiled @optimizer), %.1fM parameters in %zu tensors: %.2f ms, "
                "%.1f GB/s\n",
                n / 1e6, pkg.params.size(), 1e3 * adamw, adamwGBs);
    std::printf("triad a = b + s*c (STREAM counting): %.2f ms, %.1f GB/s; adamw / triad %.2f\n",
                1e3 * triad, triadGBs, adamwGBs / triadGBs);
    std::printf("triad a += s*b (in place): %.2f ms, %.1f GB/s; adamw / in-place triad %.2f\n",
                1e3 * inplace, inplaceGBs, adamwGBs / inplaceGBs);
  } catch (const mlc::rt::Error &e) {
    std::fprintf(stderr, "mlc-bench-adamw: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
