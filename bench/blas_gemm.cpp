//===- blas_gemm.cpp - one BLAS on the GEMM shapes of a training step --------===//
//
//   mlc-bench-blas LIBRARY cblas|dnnl [THREADS]
//
// Loads a BLAS with dlopen (so one binary measures OpenBLAS, BLIS and oneDNN
// alike) and times row-major sgemm on the shapes of bench/train_step.py's
// GPT-2 step (micro-batch 8 x 256 tokens, n_embd 256, vocab 8192): each
// layer's forward GEMMs and their two backward GEMMs. Prints one line per
// shape (best of 5 after a warm-up) and the step's total.
//
//===----------------------------------------------------------------------===//

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace {

enum Order { RowMajor = 101 };
enum Trans { NoTrans = 111, Transpose = 112 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float *, int,
                            const float *, int, float, float *, int);
using DnnlSgemm = int (*)(char, char, long, long, long, float, const float *, long,
                          const float *, long, float, float *, long);

struct Shape {
  const char *what;
  int m, n, k;
  bool ta, tb;
  int perStep; // how many times a step runs it
};

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LIBRARY cblas|dnnl\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  bool dnnl = std::strcmp(argv[2], "dnnl") == 0;
  CblasSgemm cblas = dnnl ? nullptr : (CblasSgemm)dlsym(lib, "cblas_sgemm");
  DnnlSgemm dsgemm = dnnl ? (DnnlSgemm)dlsym(lib, "dnnl_sgemm") : nullptr;
  if (!cblas && !dsgemm) {
    std::fprintf(stderr, "%s has no %s\n", argv[1], dnnl ? "dnnl_sgemm" : "cblas_sgemm");
    return 1;
  }
  const int T = 8 * 256, E = 256, V = 8192, L = 4;
  // Forward y = x W (m = tokens), backward dx = dy W^T and dW = x^T dy.
  std::vector<Shape> shapes;
  auto linear = [&](const char *what, int in, int out, int times) {
    shapes.push_back({what, T, out, in, false, false, times});
    shapes.push_back({"  dx", T, in, out, false, true, times});
    shapes.push_back({"  dW", in, out, T, true, false, times});
  };
  linear("qkv", E, 3 * E, L);
  linear("attn proj", E, E, L);
  linear("mlp fc", E, 4 * E, L);
  linear("mlp proj", 4 * E, E, L);
  // The tied output projection: logits = x wte^T.
  shapes.push_back({"lm head", T, V, E, false, true, 1});
  shapes.push_back({"  dx", T, E, V, false, false, 1});
  shapes.push_back({"  dW", V, E, T, true, false, 1});

  double total = 0, flops = 0;
  for (const Shape &s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k, 0.5f), b(size_t(s.k) * s.n, 0.25f),
        c(size_t(s.m) * s.n);
    int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    auto run = [&] {
      if (cblas)
        cblas(RowMajor, s.ta ? Transpose : NoTrans, s.tb ? Transpose : NoTrans, s.m, s.n, s.k,
              1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
      else
        dsgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda,
               b.data(), ldb, 0.0f, c.data(), s.n);
    };
    run();
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      run();
      best = std::min(
          best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    double f = 2.0 * s.m * s.n * s.k;
    std::printf("%-10s %5d x %5d x %5d %s%s %8.3f ms %7.1f GFLOP/s\n", s.what, s.m, s.n, s.k,
                s.ta ? "T" : "N", s.tb ? "T" : "N", 1e3 * best, f / best / 1e9);
    total += best * s.perStep;
    flops += f * s.perStep;
  }
  std::printf("step %.2f ms %.1f GFLOP/s\n", 1e3 * total, flops / total / 1e9);
  return 0;
}
