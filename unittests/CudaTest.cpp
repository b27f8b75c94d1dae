//===- CudaTest.cpp - kernels.cu's kernel lines, ptxas, tensor cores -------===//

#include "compiler/Pipeline.h"
#include "compiler/codegen/CudaPrelude.h"
#include "dialects/mlc/MlcDialect.h"
#include "runtime/backend/Backend.h"
#include "runtime/backend/KernelCache.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/Nvrtc.h"
#include "support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <unistd.h>
#include <utility>

using namespace mlc::rt;

TEST(CudaKernels, ParsesLaunchesAndScratch) {
  auto k = parseCudaKernels("// preamble\n"
                            "// mlc.kernel k3 rows args=4 scratch=8200 launch=1x256,1024x128,1x256\n"
                            "extern \"C\" __global__ void k3(...) {}\n"
                            "// mlc.kernel k4 pointwise args=2 scratch=0 launch=64x256\n",
                            "kernels.cu");
  ASSERT_EQ(k.size(), 2u);
  const CudaKernelInfo &rows = k.at("k3");
  EXPECT_EQ(rows.kind, "rows");
  EXPECT_EQ(rows.args, 4);
  EXPECT_EQ(rows.scratch, 8200);
  ASSERT_EQ(rows.launches.size(), 3u);
  EXPECT_EQ(rows.launches[1].grid, 1024);
  EXPECT_EQ(rows.launches[1].block, 128);
  EXPECT_EQ(k.at("k4").launches.size(), 1u);
}

TEST(CudaKernels, RefusesKernelsCudaCannotRun) {
  auto message = [](const std::string &source) {
    try {
      parseCudaKernels(source, "pkg/kernels.cu");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message("// mlc.refuse k7 kernel @k7: too much shared memory\n"
                    "// mlc.kernel k7 attention args=4 scratch=0 launch=1x32\n"),
            "pkg/kernels.cu: kernel @k7: too much shared memory");
  EXPECT_EQ(message("// mlc.refuse k7\n"), "pkg/kernels.cu: CUDA cannot run kernel k7");
}

TEST(CudaKernels, RefusesMalformedLines) {
  auto message = [](const std::string &line) {
    try {
      parseCudaKernels("\n" + line + "\n", "pkg/kernels.cu");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // Names the file and line.
  EXPECT_NE(message("// mlc.kernel k1 rows args=2").find("pkg/kernels.cu:2: malformed kernel line"),
            std::string::npos);
  EXPECT_NE(message("// mlc.kernel k1 rows args=x launch=1x32").find("'x' is not a count"),
            std::string::npos);
  EXPECT_NE(message("// mlc.kernel k1 rows args=1 launch=1x33").find("32..1024 threads"),
            std::string::npos);
  EXPECT_NE(message("// mlc.kernel k1 rows args=1 launch=0x32").find("1..2^31-1 blocks"),
            std::string::npos);
  EXPECT_NE(message("// mlc.kernel k1 rows args=1 launch=4").find("is not GRIDxBLOCK"),
            std::string::npos);
  EXPECT_NE(message("// mlc.kernel k1 rows args=1 launch=1x32\n// mlc.kernel k1 rows args=1 "
                    "launch=1x32")
                .find("announced twice"),
            std::string::npos);
}

TEST(CudaKernels, DecodesErrorWords) {
  int64_t words[3];
  resetCudaErrorWords(words);
  EXPECT_NO_THROW(checkCudaErrorWords(words));
  // Label -7 at row 21, limit 256: key = (21 << 32) | uint32(-7).
  words[0] = 2;
  words[1] = int64_t((uint64_t(21) << 32) | uint64_t(uint32_t(-7)));
  words[2] = 256;
  try {
    checkCudaErrorWords(words);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "label -7 at row 21 is outside [0, 256) and is not the ignore "
                           "index -100");
  }
}

TEST(Ptxas, ParsesVerboseLog) {
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k7' for 'sm_90'\n"
      "ptxas info    : Function properties for k7\n"
      "ptxas         .     8 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 3328 bytes smem\n"
      "ptxas info    : Compiling entry function 'k8' for 'sm_90'\n"
      "ptxas info    : Function properties for k8\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 16 registers, used 0 barriers\n";
  auto stats = parsePtxasLog(log);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats["k7"].registers, 40);
  EXPECT_EQ(stats["k7"].spillStores, 8);
  EXPECT_EQ(stats["k7"].spillLoads, 4);
  EXPECT_EQ(stats["k7"].sharedBytes, 3328);
  EXPECT_EQ(stats["k7"].stackBytes, 8);
  EXPECT_EQ(stats["k8"].registers, 16);
  EXPECT_EQ(stats["k8"].sharedBytes, 0);
}

TEST(CudaKernels, BucketKernelsCompile) {
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    GTEST_SKIP() << why;
  for (const char *arch : {"sm_80", "sm_90"}) {
    Nvrtc::Output out = nvrtc->compile(cudaBucketKernels(), "bucket kernels", arch, true);
    auto stats = parsePtxasLog(out.log);
    for (const char *k : {"mlc_sumsq_f32", "mlc_sumsq_f64", "mlc_scale_f32", "mlc_scale_f64",
                          "mlc_bias_f32", "mlc_bias_f64", "mlc_bias_bf16", "mlc_gelu_f32",
                          "mlc_gelu_f64", "mlc_gelu_bf16"}) {
      ASSERT_TRUE(stats.count(k)) << k << " for " << arch << ":\n" << out.log;
      EXPECT_EQ(stats[k].spillStores + stats[k].spillLoads, 0) << k << " for " << arch;
    }
  }
}

TEST(CudaKernels, PreludeCompilesAlone) {
  // prelude/cuda.cuh, as embedded, is a translation unit NVRTC compiles on
  // its own (a package's kernels.cu adds only kernels after it).
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    GTEST_SKIP() << why;
  for (const char *arch : {"sm_80", "sm_90"})
    EXPECT_NO_THROW(nvrtc->compile(mlc::cudaKernelPrelude(), "prelude/cuda.cuh", arch, true))
        << arch;
}

TEST(CudaKernels, AttentionCompilesAlone) {
  // prelude/attention.cuh after the prelude, as kernels.cu has them,
  // instantiated for a few parameter sets: a thread per row (f32 and f64,
  // padded and varlen, every flag) and tensor cores (bf16 products); NVRTC
  // compiles them and ptxas reports each kernel, none spilling (at head
  // dimension 64 the f32 backward's phase 1 holds 128 accumulators: its
  // tile values are read again from shared memory, see
  // mlc_attention_reload_shared).
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    GTEST_SKIP() << why;
  struct Instance {
    const char *name, *threads, *call;
  };
  const Instance instances[] = {
      {"rows_fwd_f32", "64",
       "mlc_attention_forward<float, 64, 64, 64, 32, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT>"},
      {"rows_bwd_f32", "32",
       "mlc_attention_backward<float, 32, 32, 32, 16, MLC_ATTN_MASK | MLC_ATTN_DROPOUT>"},
      {"rows_bwd_f32_d64", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT>"},
      {"rows_bwd_f32_d64_grouped", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_MASK | MLC_ATTN_GROUPED>"},
      {"rows_bwd_f64_varlen", "32",
       "mlc_attention_backward<double, 32, 16, 32, 8, MLC_ATTN_CAUSAL | MLC_ATTN_VARLEN>"},
      {"tc_fwd", "128", "mlc_attention_tc_forward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT>"},
      {"tc_bwd", "128",
       "mlc_attention_tc_backward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_MASK | MLC_ATTN_DROPOUT>"},
      {"tc_bwd_varlen", "128", "mlc_attention_tc_backward<32, 16, MLC_ATTN_VARLEN>"},
      // Grouped-query attention (phase 1 sums a kv head's query heads).
      {"rows_bwd_f32_grouped", "32",
       "mlc_attention_backward<float, 32, 32, 32, 16, MLC_ATTN_CAUSAL | MLC_ATTN_GROUPED>"},
      {"rows_fwd_f32_grouped_varlen", "64",
       "mlc_attention_forward<float, 64, 64, 64, 32, MLC_ATTN_VARLEN | MLC_ATTN_GROUPED>"},
      {"tc_bwd_grouped", "128",
       "mlc_attention_tc_backward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_MASK | MLC_ATTN_GROUPED>"},
      {"tc_bwd_grouped_varlen", "128",
       "mlc_attention_tc_backward<32, 16, MLC_ATTN_VARLEN | MLC_ATTN_GROUPED>"},
      // Rotary embedding of Q and K where they are staged (rotate-half and
      // interleaved; at D = 64 the f32 backward too spills nothing).
      {"rows_fwd_f32_rotary", "64",
       "mlc_attention_forward<float, 64, 64, 64, 32, MLC_ATTN_CAUSAL | MLC_ATTN_ROTARY>"},
      {"rows_bwd_f32_d64_rotary", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT | "
       "MLC_ATTN_ROTARY>"},
      {"rows_bwd_f32_d64_grouped_interleaved", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_MASK | MLC_ATTN_GROUPED | "
       "MLC_ATTN_ROTARY | MLC_ATTN_INTERLEAVED>"},
      {"rows_bwd_f64_varlen_rotary", "32",
       "mlc_attention_backward<double, 32, 16, 32, 8, MLC_ATTN_CAUSAL | MLC_ATTN_VARLEN | "
       "MLC_ATTN_ROTARY>"},
      {"tc_fwd_rotary", "128",
       "mlc_attention_tc_forward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_VARLEN | MLC_ATTN_ROTARY>"},
      {"tc_bwd_rotary", "128",
       "mlc_attention_tc_backward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_ROTARY | "
       "MLC_ATTN_INTERLEAVED>"},
      {"tc_bwd_grouped_varlen_rotary", "128",
       "mlc_attention_tc_backward<32, 16, MLC_ATTN_VARLEN | MLC_ATTN_GROUPED | MLC_ATTN_ROTARY>"},
      // Soft-capped scores (Gemma 2): the tanh where each score is formed,
      // 1 - tanh^2 in dS (the backward's phase 0 is the forward's code).
      {"rows_bwd_f32_d64_softcap", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_CAUSAL | MLC_ATTN_GROUPED | "
       "MLC_ATTN_ROTARY | MLC_ATTN_SOFTCAP>"},
      {"tc_bwd_softcap", "128",
       "mlc_attention_tc_backward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_GROUPED | MLC_ATTN_DROPOUT | "
       "MLC_ATTN_SOFTCAP>"},
      // Mistral's sliding window: the spans of keys (queries) a row sees
      // start (end) at the window's edge.
      {"rows_fwd_f32_window", "64",
       "mlc_attention_forward<float, 64, 64, 64, 32, MLC_ATTN_CAUSAL | MLC_ATTN_GROUPED | "
       "MLC_ATTN_ROTARY | MLC_ATTN_WINDOW>"},
      {"rows_bwd_f32_d64_window", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_CAUSAL | MLC_ATTN_GROUPED | "
       "MLC_ATTN_ROTARY | MLC_ATTN_WINDOW>"},
      {"tc_fwd_window", "128",
       "mlc_attention_tc_forward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_VARLEN | MLC_ATTN_WINDOW>"},
      {"tc_bwd_window", "128",
       "mlc_attention_tc_backward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_GROUPED | MLC_ATTN_ROTARY | "
       "MLC_ATTN_WINDOW>"},
      // Dropout on a block of one process's probabilities (tensor
      // parallelism's heads): each row's first counter mapped to the whole's.
      {"rows_bwd_f32_d64_block", "32",
       "mlc_attention_backward<float, 64, 64, 32, 32, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT | "
       "MLC_ATTN_BLOCK>"},
      {"tc_bwd_block", "128",
       "mlc_attention_tc_backward<64, 64, MLC_ATTN_CAUSAL | MLC_ATTN_DROPOUT | MLC_ATTN_BLOCK>"},
  };
  std::string source = mlc::cudaKernelPrelude();
  for (const Instance &k : instances) {
    const bool f64 = std::strstr(k.call, "<double") != nullptr;
    const std::string T = f64 ? "double" : "float";
    source += std::string("\nextern \"C\" __global__ void __launch_bounds__(") + k.threads + ") " +
              k.name + "(const MlcAttention<" + T + "> s, const MlcAttentionArgs<" + T +
              ", int32_t> x, const MlcKernelCtx *ctx, int phase) {\n  " + k.call + "(s, x, ctx" +
              (std::strstr(k.call, "backward") ? ", phase" : "") + ");\n}\n";
  }
  for (const char *arch : {"sm_80", "sm_90"}) {
    Nvrtc::Output out;
    ASSERT_NO_THROW(out = nvrtc->compile(source, "prelude/attention.cuh", arch, true)) << arch;
    auto stats = parsePtxasLog(out.log);
    for (const Instance &k : instances) {
      ASSERT_TRUE(stats.count(k.name)) << k.name << " for " << arch << ":\n" << out.log;
      EXPECT_GT(stats[k.name].registers, 0) << k.name;
      EXPECT_EQ(stats[k.name].spillStores + stats[k.name].spillLoads, 0) << k.name << " for " << arch;
    }
  }
}

/// A prelude template's instantiation as a kernel of its own: its name and
/// body (b: the argument buffers).
struct PreludeInstance {
  const char *name, *body;
};

/// The prelude with each instance as a kernel after it, as kernels.cu has
/// them: NVRTC compiles it for sm_80 and sm_90 and ptxas reports every
/// kernel, none spilling.
template <size_t N>
void compileAloneWithoutSpills(Nvrtc &nvrtc, const PreludeInstance (&instances)[N],
                               const char *name) {
  std::string source = mlc::cudaKernelPrelude();
  for (const PreludeInstance &k : instances)
    source += std::string("\nextern \"C\" __global__ void __launch_bounds__(256) ") + k.name +
              "(char *const *b, const MlcKernelCtx *ctx, int phase) {\n  (void)phase;\n  " +
              k.body + "\n}\n";
  for (const char *arch : {"sm_80", "sm_90"}) {
    Nvrtc::Output out;
    ASSERT_NO_THROW(out = nvrtc.compile(source, name, arch, true)) << arch;
    auto stats = parsePtxasLog(out.log);
    for (const PreludeInstance &k : instances) {
      ASSERT_TRUE(stats.count(k.name)) << k.name << " for " << arch << ":\n" << out.log;
      EXPECT_EQ(stats[k.name].spillStores + stats[k.name].spillLoads, 0) << k.name << " for " << arch;
    }
  }
}

TEST(CudaKernels, RowsCompileAlone) {
  // prelude/rows.cuh after the prelude, as kernels.cu has them: each row
  // and column template instantiated (f32, f64, bf16 gradients and copies,
  // every flag) in a kernel as a package calls it; NVRTC compiles them and
  // ptxas reports each kernel, none spilling.
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    GTEST_SKIP() << why;
  const PreludeInstance instances[] = {
      {"ln_f32", "mlc_layer_norm<float, 768, 0>((float *)b[0], (const float *)b[1], (const "
                 "float *)b[2], (const float *)b[3], ctx->rows, 1e-5);"},
      {"rms_f64_unit", "mlc_layer_norm<double, 64, MLC_ROW_RMS | MLC_ROW_UNIT>((double *)b[0], "
                       "(const double *)b[1], 0, 0, 32, 1e-6);"},
      {"ln_grad_f32", "mlc_layer_norm_grad<float, float, float, 768, MLC_ROW_RESIDUAL, 4, 3, "
                      "256>((float *)b[0], (float *)b[1], (float *)b[2], (const float *)b[3], "
                      "(const float *)b[4], (const float *)b[5], (const float *)b[6], 0, "
                      "ctx->rows, 1024, 1e-5, (double *)ctx->scratch, phase);"},
      {"rms_grad_bf16", "mlc_layer_norm_grad<float, mlc_bf16, mlc_bf16, 64, MLC_ROW_RMS | "
                        "MLC_ROW_UNIT | MLC_ROW_COPY, 2, 1, 64>((float *)b[0], (float *)b[1], 0, "
                        "(const mlc_bf16 *)b[2], (const float *)b[3], 0, 0, (mlc_bf16 *)b[4], "
                        "32, 32, 1e-6, (double *)ctx->scratch, phase);"},
      {"softmax_f32", "mlc_softmax<float, 1024, 0>((float *)b[0], (const float *)b[1], 64);"},
      {"log_softmax_f64", "mlc_softmax<double, 300, MLC_ROW_LOG>((double *)b[0], (const double "
                          "*)b[1], ctx->rows);"},
      {"softmax_grad_f32", "mlc_softmax_grad<float, 64>((float *)b[0], (const float *)b[1], "
                           "(const float *)b[2], 32);"},
      {"xent_f32", "mlc_cross_entropy<float, int32_t, 50257, -100>((float *)b[0], (const float "
                   "*)b[1], (const int32_t *)b[2], 64, 64, (double *)ctx->scratch, ctx, phase);"},
      {"xent_grad_loss_bf16", "mlc_cross_entropy_grad<float, mlc_bf16, int64_t, 256, -1, "
                              "MLC_ROW_LOSS>((float *)b[0], (mlc_bf16 *)b[1], (const float "
                              "*)b[2], (const int64_t *)b[3], 1.0, ctx->rows, (double "
                              "*)ctx->scratch, ctx, phase);"},
      {"xent_grad_f64", "mlc_cross_entropy_grad<double, double, int32_t, 300, -100, 0>(0, "
                        "(double *)b[0], (const double *)b[1], (const int32_t *)b[2], (double)"
                        "((const double *)b[3])[0], 32, (double *)ctx->scratch, ctx, phase);"},
      {"embedding_f32", "mlc_embedding<float, int32_t, 50257, 768>((float *)b[0], (const float "
                        "*)b[1], (const int32_t *)b[2], ctx->rows, ctx);"},
      {"embedding_grad_f64", "mlc_embedding_grad<double, int64_t, 300, 40, 0, false, 100, 1, "
                             "64>((double *)b[0], (const double *)b[1], (const int64_t *)b[2], "
                             "64, phase);"},
      {"reduce_rows_mean", "mlc_reduce_rows<float, double, 1000, MLC_REDUCE_MEAN, 1000>((float "
                           "*)b[0], (const float *)b[1], 64);"},
      {"reduce_rows_max_i64", "mlc_reduce_rows<int64_t, int64_t, 7, MLC_REDUCE_MAX, 7>((int64_t "
                              "*)b[0], (const int64_t *)b[1], 64);"},
      {"reduce_columns", "mlc_reduce_columns<float, double, 300, MLC_REDUCE_SUM, 64, 4, 2, "
                         "256>((float *)b[0], (const float *)b[1], 64, (double *)ctx->scratch, "
                         "phase);"},
      // A fused norm as the printers call it: the prologue (a residual add
      // stored on the way) and the stores are lambdas; LayerNorm from a
      // shared-memory row, RMSNorm of a row too long for it (the prologue
      // recomputed per pass) adding a post-norm's residual, and a bf16 copy.
      {"ln_fused_f32",
       "float *p0 = (float *)b[0], *p1 = (float *)b[1];\n  const float *p2 = (const float "
       "*)b[2], *p3 = (const float *)b[3], *p4 = (const float *)b[4], *p5 = (const float "
       "*)b[5];\n  mlc_layer_norm_fused<float, 768, 0>(ctx->rows, 1e-5, [&](const int64_t r, "
       "const int64_t c) {\n    const float t0 = p2[r * 768 + c] + p3[r * 768 + c];\n    p0[r "
       "* 768 + c] = t0;\n    return t0;\n  }, [&](const int64_t r, const int64_t c, const "
       "MlcRowNorm<float, 0> &norm) {\n    const float y = norm(p4[c], p5[c], 0);\n    p1[r * "
       "768 + c] = y;\n  });"},
      {"rms_fused_long_residual_f32",
       "float *p0 = (float *)b[0];\n  const float *p1 = (const float *)b[1], *p2 = (const float "
       "*)b[2], *p3 = (const float *)b[3];\n  mlc_layer_norm_fused<float, 16384, MLC_ROW_RMS | "
       "MLC_ROW_RESIDUAL>(32, 1e-6, [&](const int64_t r, const int64_t c) {\n    return p1[r * "
       "16384 + c] * 2.0f;\n  }, [&](const int64_t r, const int64_t c, const MlcRowNorm<float, "
       "MLC_ROW_RMS | MLC_ROW_RESIDUAL> &norm) {\n    const float y = norm(p2[c], 0, p3[r * "
       "16384 + c]);\n    p0[r * 16384 + c] = y;\n  });"},
      {"ln_fused_bf16_copy",
       "float *p0 = (float *)b[0];\n  mlc_bf16 *p1 = (mlc_bf16 *)b[1];\n  const float *p2 = "
       "(const float *)b[2], *p3 = (const float *)b[3], *p4 = (const float *)b[4];\n  "
       "mlc_layer_norm_fused<float, 1024, 0>(ctx->rows, 1e-5, [&](const int64_t r, const int64_t "
       "c) {\n    return p2[r * 1024 + c];\n  }, [&](const int64_t r, const int64_t c, const "
       "MlcRowNorm<float, 0> &norm) {\n    const float y = norm(p3[c], p4[c], 0);\n    p0[r * "
       "1024 + c] = y;\n    p1[r * 1024 + c] = y;\n  });"},
  };
  compileAloneWithoutSpills(*nvrtc, instances, "prelude/rows.cuh");
}

TEST(CudaKernels, FlatReduceFillCompileAlone) {
  // prelude/optimizer.cuh, reduce.cuh and fill.cuh after the prelude, as
  // kernels.cu has them: each template instantiated as a package calls it
  // (the element code a lambda, f32, f64, bf16); NVRTC compiles them and
  // ptxas reports each kernel, none spilling.
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    GTEST_SKIP() << why;
  const char *adamw =
      "  T *P = (T *)b[0], *M = (T *)b[1], *V = (T *)b[2];\n  const T *G = (const T *)b[3];\n"
      "  const double *h = (const double *)b[4];\n  const T x5 = (T)h[0], x6 = (T)h[1];\n"
      "  static const int64_t seg[2][3] = {{0, 1000, 1}, {1000, 24, 0}};\n"
      "  mlc_adamw<T, 2>(P, M, V, G, seg, (T)h[8], ctx, [&](T &p, T &m, T &v, const T g, "
      "const T x4) {\n    m = x6 * m + g;\n    v = x6 * v + g * g;\n"
      "    p = p * x4 - x5 * m / (sqrt(v) + x6);\n  });";
  const std::string adamwF32 = std::string("  typedef float T;\n") + adamw;
  const std::string adamwF64 = std::string("  typedef double T;\n") + adamw;
  const PreludeInstance instances[] = {
      {"adamw_f32", adamwF32.c_str()},
      {"adamw_f64", adamwF64.c_str()},
      {"grad_norm_f32",
       "static const int64_t seg[3][2] = {{0, 100}, {200, 50}, {300, 7}};\n  "
       "mlc_grad_norm<float, 3, 264>((double *)b[0], (const float *)b[1], seg, (double "
       "*)ctx->scratch, ctx, phase, [&](const float g) -> double { return (double)g * g; });"},
      {"column_sums_bf16",
       "const mlc_bf16 *p1 = (const mlc_bf16 *)b[1];\n  mlc_column_sums<float, 768, 4, 3, 256>("
       "(float *)b[0], ctx->rows, (double *)ctx->scratch, phase, [&](const int64_t r, const "
       "int64_t c, const int64_t flat, double &sum) {\n    const int64_t o1 = r * 768 + c;\n"
       "    sum += mlc_uniform(7, flat) < 0.9f ? (float)p1[o1] : 0.0f;\n  });"},
      {"reduce_axes_max_f32",
       "static const int64_t axes[4][2] = {{3, 1}, {5, 30}, {2, 3}, {5, 6}};\n  "
       "mlc_reduce_axes<float, double, MLC_REDUCE_MAX, 50, 15, 10, 2, 2>((float *)b[0], (const "
       "float *)b[1], axes);"},
      {"reduce_axes_mean_i64",
       "static const int64_t axes[1][2] = {{7, 1}};\n  mlc_reduce_axes<int64_t, int64_t, "
       "MLC_REDUCE_MEAN, 7, 1, 7, 0, 1>((int64_t *)b[0], (const int64_t *)b[1], axes);"},
      {"fill_bf16", "mlc_fill<mlc_bf16, 4096>((mlc_bf16 *)b[0], (mlc_bf16)1.0f);"},
      {"constant_f64", "static const double data[3] = {1, 2, 3};\n  mlc_constant<double, 3>("
                       "(double *)b[0], data);"},
      {"zero", "mlc_zero<1000>(b[0]);"},
      {"rotary_sin_f32", "static const double inv[4] = {1, 0.1, 0.01, 0.001};\n  "
                         "mlc_rotary_table<float, 2048, 4, MLC_ROTARY_SIN>((float *)b[0], inv);"},
      {"rotary_cos_f64", "static const double inv[2] = {1, 0.01};\n  "
                         "mlc_rotary_table<double, 16, 2, 0>((double *)b[0], inv);"},
  };
  compileAloneWithoutSpills(*nvrtc, instances, "prelude/optimizer.cuh");
}

TEST(CudaKernels, LoaderOptionsCompile) {
  // The options the CUDA backend compiles with (not verbose: split compile).
  std::string why;
  Nvrtc *nvrtc = Nvrtc::get(&why);
  if (!nvrtc)
    GTEST_SKIP() << why;
  Nvrtc::Output out = nvrtc->compile(cudaBucketKernels(), "bucket kernels", "sm_90", false);
  EXPECT_GT(out.image.size(), 1000u);
}

//===----------------------------------------------------------------------===//
// Attention on tensor cores (bf16 packages), run on the emulated device.
//===----------------------------------------------------------------------===//

namespace {

/// The attention output of a forward-only module, on `device`, for the same
/// q, k, v (and mask) drawn from [-1, 1].
/// Whether `e` says this build has no CUDA backend (no emulated device to
/// compare with: the test skips); any other error fails it.
bool noCudaBackend(const Error &e) {
  return std::string(e.what()).find("unknown device") != std::string::npos;
}

/// Sets every input: float ones from [-1, 1] (the additive mask "m": 0 or
/// -1e4), "cu" (cu_seqlens) to `cu`, the sequences' boundaries (by default
/// kSequences'), i64 ones (labels) to classes below 64, a dynamic token
/// dimension to their total.
const std::vector<int32_t> kSequences = {0, 30, 70, 75};
void setInputs(Backend &backend, const Package &pkg, std::mt19937_64 &rng,
               const std::vector<int32_t> &cu = kSequences) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (const InputInfo &in : pkg.inputs) {
    HostTensor t;
    t.dtype = in.dtype;
    t.shape = in.shape;
    if (in.dynamic())
      t.shape[0] = cu.back();
    t.data.resize(t.numel() * dtypeSize(in.dtype));
    if (in.name == "cu") {
      ASSERT_EQ(t.numel(), int64_t(cu.size())) << "cu_seqlens' entries";
      std::memcpy(t.data.data(), cu.data(), cu.size() * 4);
    } else if (in.dtype == "i64") { // labels
      for (int64_t i = 0; i < t.numel(); ++i)
        reinterpret_cast<int64_t *>(t.data.data())[i] = (i * 7) % 64;
    } else {
      for (int64_t i = 0; i < t.numel(); ++i)
        reinterpret_cast<float *>(t.data.data())[i] =
            in.name == "m" ? (i % 7 == 3 ? -1e4f : 0.0f) : uni(rng);
    }
    backend.setInput(in.name, t);
  }
}

/// Output "o" of one forward run on `device`, the sequences `cu`.
std::vector<float> attentionOutputOver(const std::string &dir, const std::string &device,
                                       const std::vector<int32_t> &cu) {
  Package pkg = Package::load(dir);
  std::unique_ptr<Backend> backend = createBackend(device, pkg, /*verbose=*/false);
  std::mt19937_64 rng(7);
  setInputs(*backend, pkg, rng, cu);
  backend->run("forward", 5);
  HostTensor o = backend->output("forward", "o");
  const float *f = reinterpret_cast<const float *>(o.data.data());
  return std::vector<float>(f, f + o.numel());
}
std::vector<float> attentionOutput(const std::string &dir, const std::string &device) {
  return attentionOutputOver(dir, device, kSequences);
}

/// The package at `dir` on `device`, its parameters and inputs drawn from
/// [-1, 1] (setInputs) by a generator seeded with `seed`.
std::unique_ptr<Backend> backendWithRandomData(const std::string &dir, const std::string &device,
                                               uint64_t seed, Package &pkg,
                                               const std::vector<int32_t> &cu = kSequences) {
  pkg = Package::load(dir);
  std::unique_ptr<Backend> backend = createBackend(device, pkg, /*verbose=*/false);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> params(pkg.paramCount);
  for (float &x : params)
    x = uni(rng);
  backend->upload(FlatBuffer::Params, 0, params.data(), int64_t(params.size()) * 4);
  setInputs(*backend, pkg, rng, cu);
  return backend;
}

/// The gradients of the package's loss with respect to its parameters (one
/// flat buffer) on `device`, the sequences `cu`.
std::vector<float> attentionGradientsOver(const std::string &dir, const std::string &device,
                                          const std::vector<int32_t> &cu) {
  Package pkg;
  std::unique_ptr<Backend> backend = backendWithRandomData(dir, device, 11, pkg, cu);
  backend->run("train_step", 3);
  std::vector<float> grads(pkg.paramCount);
  backend->download(FlatBuffer::Grads, 0, grads.data(), int64_t(grads.size()) * 4);
  return grads;
}
std::vector<float> attentionGradients(const std::string &dir, const std::string &device) {
  return attentionGradientsOver(dir, device, kSequences);
}

/// Compiles a module (bf16 products with `autocast` "bf16") into a package
/// and checks that its CUDA kernels hold `kernel`.
std::string compilePackage(const std::string &text, bool training, const std::string &autocast,
                           const std::string &kernel) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlc::MlcDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(bool(module));
  if (!module)
    return "";
  if (auto err = mlc::runPipeline(*module, training, /*fuse=*/true, autocast)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return "";
  }
  char tmpl[] = "/tmp/mlc-cuda-test-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  mlc::PackageDescription description{"test", "", mlc::BuildOptions()};
  if (!autocast.empty())
    description.options.dtype = autocast;
  auto lowered = mlc::writePackage(*module, dir, description);
  if (!lowered) {
    ADD_FAILURE() << llvm::toString(lowered.takeError());
    return "";
  }
  EXPECT_NE(lowered->kernelsCu.find(kernel), std::string::npos)
      << "no " << kernel << " in kernels.cu:\n" << lowered->kernelsCu;
  return dir;
}

/// A bf16 package whose attention runs on tensor cores (`kernel` names the
/// template call that shows it).
std::string compileBf16(const std::string &text, bool training, const std::string &kernel) {
  return compilePackage(text, training, "bf16", kernel);
}

/// max |a - b| and max |a| over elements [begin, end) of a and b. A NaN
/// difference (an element never written, left NaN) makes the worst +inf for
/// good: no later finite difference hides it.
std::pair<double, double> worstDifference(const std::vector<float> &a,
                                          const std::vector<float> &b, size_t begin,
                                          size_t end) {
  double worst = 0, scale = 0;
  for (size_t i = begin; i < end; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    worst = std::isnan(d) ? HUGE_VAL : std::max(worst, d);
    scale = std::max(scale, double(std::fabs(a[i])));
  }
  return {worst, scale};
}

/// `emu` (tensor cores: bf16 products) against `cpu` (f32), part by part:
/// close, but not equal (the products did round).
void expectClose(const std::vector<float> &cpu, const std::vector<float> &emu, size_t parts,
                 double tolerance, const std::string &what, bool rounded = true) {
  ASSERT_EQ(cpu.size(), emu.size());
  const size_t n = cpu.size() / parts;
  for (size_t part = 0; part < parts; ++part) {
    const auto [worst, scale] = worstDifference(cpu, emu, part * n, (part + 1) * n);
    EXPECT_GT(scale, 0.0) << what;
    EXPECT_LT(worst, tolerance * scale) << what << ", part " << part;
    if (rounded) {
      EXPECT_GT(worst, 1e-7 * scale) << what << ": bit-equal to f32, were the products rounded?";
    }
  }
}

/// run(dir, device) on the CPU and on the emulated device, compared; skips
/// when this build has no CUDA backend.
template <typename Run>
void compareDevices(Run run, const std::string &dir, size_t parts, double tolerance,
                    const std::string &what, bool rounded = true) {
  std::vector<float> cpu = run(dir, "cpu"), emu;
  try {
    emu = run(dir, "cuda-emulator");
  } catch (const Error &e) {
    if (!noCudaBackend(e))
      throw;
    GTEST_SKIP() << e.what();
  }
  expectClose(cpu, emu, parts, tolerance, what, rounded);
}

/// A module's @forward over q, k, v of `type` (`role`: "input" or "param"),
/// [the mask %m of type `mask`] and `extra` arguments: `%o = attention(q, k,
/// v)` with `attrs`, then `body`, returning `results`.
/// K and V have type `kv` (`type` where empty; fewer heads: grouped-query).
std::string attentionModule(const std::string &type, const std::string &role,
                            const std::string &attrs, const std::string &mask,
                            const std::string &extra, const std::string &results,
                            const std::string &body, std::string kv = "") {
  if (kv.empty())
    kv = type;
  std::string args;
  for (const char *n : {"q", "k", "v"})
    args += std::string(args.empty() ? "" : ", ") + "%" + n + ": " + (*n == 'q' ? type : kv) +
            " {mlc." + role + " = \"" + n + "\"}";
  if (!mask.empty())
    args += ", %m: " + mask + " {mlc.input = \"m\"}";
  return "func.func @forward(" + args + extra + ") -> (" + results + ") {\n" +
         "  %o = mlc.attention %q, %k, %v" + (mask.empty() ? "" : " mask %m") + " " + attrs +
         " : " + type + ", " + kv + ", " + kv + (mask.empty() ? "" : ", " + mask) + "\n" +
         body + "}\n";
}

/// attention(q, k, v) over `type` (inputs), forward only.
void checkTensorCoreAttention(const std::string &type, const std::string &attrs,
                              const std::string &mask = "") {
  std::string text = attentionModule(type, "input", attrs, mask, "",
                                     type + " {mlc.output = \"o\"}",
                                     "  return %o : " + type + "\n");
  std::string dir = compileBf16(text, /*training=*/false, "  mlc_attention_tc_forward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(attentionOutput, dir, 1, 2e-2, type + " " + attrs);
}

/// loss = sum(attention(q, k, v) * r) over parameters q, k, v: their
/// gradients.
/// The module of that loss; K and V of type `kv` (grouped-query) if given.
std::string attentionLossModule(const std::string &type, const std::string &attrs,
                                const std::string &mask, const std::string &kv = "") {
  return attentionModule(type, "param", attrs, mask, ", %r: " + type + " {mlc.input = \"r\"}",
                         "tensor<f32> {mlc.output = \"loss\"}",
                         "  %y = mlc.mul %o, %r : " + type + ", " + type +
                             "\n  %l = mlc.reduce_sum %y axes = [0, 1, 2, 3] : " + type +
                             "\n  return %l : tensor<f32>\n",
                         kv);
}

void checkTensorCoreAttentionGrad(const std::string &type, const std::string &attrs,
                                  const std::string &mask = "") {
  std::string dir = compileBf16(attentionLossModule(type, attrs, mask), /*training=*/true,
                                "  mlc_attention_tc_backward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(attentionGradients, dir, 3, 3e-2, type + " " + attrs + " (dq, dk, dv)");
}

/// Grouped-query attention's gradients (q of `type`, k and v of `kv`) on
/// the emulated device against the CPU: the thread-per-row kernels in f32
/// (to 1e-5) and the tensor-core ones with bf16 products (to 3e-2). One
/// part: the flat gradients are dQ, then the smaller dK, dV.
void checkGroupedQueryGrad(const std::string &type, const std::string &kv,
                           const std::string &attrs, const std::string &mask = "") {
  const std::string text = attentionLossModule(type, attrs, mask, kv);
  std::string dir = compilePackage(text, /*training=*/true, "", "  mlc_attention_backward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(attentionGradients, dir, 1, 1e-5, type + " over " + kv + " " + attrs + " f32",
                 /*rounded=*/false);
  dir = compileBf16(text, /*training=*/true, "  mlc_attention_tc_backward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(attentionGradients, dir, 1, 3e-2, type + " over " + kv + " " + attrs + " bf16");
}

} // namespace

// Sequences of 150: query blocks of 64 rows (the last partial), key tiles of
// 32 (the last partial), causal rows that see a few keys of a tile.
TEST(TensorCoreAttention, CausalAcrossTiles) {
  checkTensorCoreAttention("tensor<2x2x150x32xf32>", "causal");
  checkTensorCoreAttention("tensor<1x2x70x64xf32>", "causal dropout = 0.2 seed = 3");
}

TEST(TensorCoreAttention, MaskAndScale) {
  checkTensorCoreAttention("tensor<2x2x40x16xf32>", "scale = 0.7", "tensor<2x1x1x40xf32>");
}

TEST(TensorCoreAttention, Gradients) {
  checkTensorCoreAttentionGrad("tensor<1x2x150x32xf32>", "causal");
  checkTensorCoreAttentionGrad("tensor<2x2x70x16xf32>", "causal dropout = 0.2 seed = 3");
  checkTensorCoreAttentionGrad("tensor<2x2x40x32xf32>", "scale = 0.7", "tensor<2x1x1x40xf32>");
}

// 4 query heads over 2 kv heads (and over 1): dK, dV of a kv head summed
// over its group in phase 1; causal across query blocks, a per-head mask.
TEST(GroupedQueryAttention, Gradients) {
  checkGroupedQueryGrad("tensor<1x4x150x32xf32>", "tensor<1x2x150x32xf32>", "causal");
  checkGroupedQueryGrad("tensor<2x4x40x16xf32>", "tensor<2x1x40x16xf32>",
                        "causal dropout = 0.2 seed = 3", "tensor<2x4x40x40xf32>");
}

// Mistral's sliding window (query i sees keys i - W + 1 .. i) across query
// blocks and key tiles (a window of 37 crosses them; one of 7, shorter than
// a tile, with dropout), grouped-query: the thread-per-row kernels (f32)
// and the tensor-core ones (bf16) against the CPU's.
TEST(SlidingWindowAttention, AcrossTiles) {
  checkTensorCoreAttention("tensor<2x2x150x32xf32>", "causal window = 37");
  checkGroupedQueryGrad("tensor<1x4x150x32xf32>", "tensor<1x2x150x32xf32>", "causal window = 37");
  checkGroupedQueryGrad("tensor<2x4x40x16xf32>", "tensor<2x1x40x16xf32>",
                        "causal window = 7 dropout = 0.2 seed = 3");
}

// Packed sequences of 30, 40 and 5 tokens (cu_seqlens), forward on inputs
// and backward through projections of a packed [tokens, 64] input: each
// sequence's rows start at its own offset, and its keys end at its end.
TEST(TensorCoreAttention, Varlen) {
  const std::string t = "tensor<?x2x32xf32>";
  std::string forward =
      "module attributes {mlc.token_capacity = 80 : i64} {\n"
      "func.func @forward(%q: " + t + " {mlc.input = \"q\"}, %k: " + t +
      " {mlc.input = \"k\"}, %v: " + t + " {mlc.input = \"v\"}, %cu: tensor<4xi32> "
      "{mlc.input = \"cu\"}) -> (" + t + " {mlc.output = \"o\"}) {\n"
      "  %o = mlc.attention %q, %k, %v cu_seqlens %cu : " + t + ", " + t + ", " + t +
      ", tensor<4xi32>\n  return %o : " + t + "\n}\n}\n";
  std::string dir = compileBf16(forward, /*training=*/false, "  mlc_attention_tc_forward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(attentionOutput, dir, 1, 2e-2, "varlen forward");

  const std::string x = "tensor<?x64xf32>", w = "tensor<64x64xf32>";
  std::string project;
  for (const char *n : {"q", "k", "v"})
    project += std::string("  %") + n + "f = mlc.matmul %x, %w" + n + " : " + x + ", " + w +
               "\n  %" + n + " = mlc.reshape %" + n + "f : " + x + " -> " + t + "\n";
  std::string training =
      "module attributes {mlc.token_capacity = 80 : i64} {\n"
      "func.func @forward(%wq: " + w + " {mlc.param = \"wq\"}, %wk: " + w +
      " {mlc.param = \"wk\"}, %wv: " + w + " {mlc.param = \"wv\"}, %x: " + x +
      " {mlc.input = \"x\"}, %labels: tensor<?xi64> {mlc.input = \"labels\"}, %cu: "
      "tensor<4xi32> {mlc.input = \"cu\"}) -> (tensor<f32> {mlc.output = \"loss\"}) {\n" +
      project + "  %o = mlc.attention %q, %k, %v cu_seqlens %cu causal dropout = 0.1 seed = 5 : " +
      t + ", " + t + ", " + t + ", tensor<4xi32>\n  %y = mlc.reshape %o : " + t + " -> " + x +
      "\n  %l = mlc.cross_entropy %y, %labels ignore_index = -100 : " + x +
      ", tensor<?xi64>\n  return %l : tensor<f32>\n}\n}\n";
  dir = compileBf16(training, /*training=*/true, "  mlc_attention_tc_backward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(attentionGradients, dir, 3, 3e-2, "varlen gradients (wq, wk, wv)");
}

namespace {

/// Packed documents of very different lengths: 1 token, an empty slot, 138
/// tokens (past two 64-row tiles, crossing the stream's tile boundaries at
/// 64 and 128), 1 token, 65 tokens, then two empty trailing slots (entries
/// equal to the token count, as cu_seqlens pads its B x S + 1 slots). Tiles
/// of the packed stream hold parts of several documents.
const std::vector<int32_t> kDocuments = {0, 1, 1, 139, 140, 205, 205, 205};

/// Varlen attention with `attrs` over kDocuments, `heads` query heads over
/// `kvHeads` (grouped-query when fewer), head dim 32, both CUDA kernel
/// kinds on the emulated device against the CPU: the forward pass (q, k, v
/// inputs of a dynamic token count, capacity 256: the stream's last tiles
/// are past its tokens) and the gradients dQ, dK, dV of sum(o * r) (q, k,
/// v parameters of 205 tokens).
void checkVarlenDocuments(const std::string &attrs, int heads, int kvHeads) {
  const std::string cu = "tensor<" + std::to_string(kDocuments.size()) + "xi32>";
  auto module = [&](const std::string &tokens, const char *role, const std::string &extra,
                    const std::string &result, const std::string &body) {
    const std::string tq = "tensor<" + tokens + "x" + std::to_string(heads) + "x32xf32>";
    const std::string tkv = "tensor<" + tokens + "x" + std::to_string(kvHeads) + "x32xf32>";
    std::string args;
    for (const char *n : {"q", "k", "v"})
      args += std::string("%") + n + ": " + (*n == 'q' ? tq : tkv) + " {mlc." + role + " = \"" +
              n + "\"}, ";
    return "module attributes {mlc.token_capacity = 256 : i64} {\nfunc.func @forward(" + args +
           "%cu: " + cu + " {mlc.input = \"cu\"}" + extra + ") -> (" + result + ") {\n" +
           "  %o = mlc.attention %q, %k, %v cu_seqlens %cu " + attrs + " : " + tq + ", " + tkv +
           ", " + tkv + ", " + cu + "\n" + body + "}\n}\n";
  };
  const std::string tq = "tensor<205x" + std::to_string(heads) + "x32xf32>";
  const std::string forward =
      module("?", "input", "", "tensor<?x" + std::to_string(heads) + "x32xf32> {mlc.output = \"o\"}",
             "  return %o : tensor<?x" + std::to_string(heads) + "x32xf32>\n");
  const std::string training = module(
      "205", "param", ", %r: " + tq + " {mlc.input = \"r\"}", "tensor<f32> {mlc.output = \"loss\"}",
      "  %y = mlc.mul %o, %r : " + tq + ", " + tq + "\n  %l = mlc.reduce_sum %y axes = [0, 1, 2] : " +
          tq + "\n  return %l : tensor<f32>\n");
  auto output = [](const std::string &dir, const std::string &device) {
    return attentionOutputOver(dir, device, kDocuments);
  };
  auto gradients = [](const std::string &dir, const std::string &device) {
    return attentionGradientsOver(dir, device, kDocuments);
  };
  // dQ, dK, dV as parts when of one size; else (grouped) one part.
  const size_t parts = heads == kvHeads ? 3 : 1;
  const std::string what = "documents " + attrs + ", " + std::to_string(heads) + " over " +
                           std::to_string(kvHeads) + " heads";
  std::string dir = compilePackage(forward, /*training=*/false, "", "  mlc_attention_forward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(output, dir, 1, 1e-5, what + ": f32 forward", /*rounded=*/false);
  dir = compilePackage(training, /*training=*/true, "", "  mlc_attention_backward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(gradients, dir, parts, 1e-5, what + ": f32 (dq, dk, dv)", /*rounded=*/false);
  dir = compileBf16(forward, /*training=*/false, "  mlc_attention_tc_forward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(output, dir, 1, 2e-2, what + ": tensor-core forward");
  dir = compileBf16(training, /*training=*/true, "  mlc_attention_tc_backward<");
  ASSERT_FALSE(dir.empty());
  compareDevices(gradients, dir, parts, 3e-2, what + ": tensor-core (dq, dk, dv)");
}

} // namespace

// The grid tiles the packed stream (a block per head and 64 tokens, or the
// thread-per-row kernel's rows), whatever the documents: each row finds its
// document in cu_seqlens, each block streams the union of its rows' keys
// (phase 1: of its key rows' queries) and each row sees its own document's
// only. Causal with dropout (the counters the CPU's), and non-causal.
TEST(VarlenAttention, DocumentsOfMixedLengths) {
  checkVarlenDocuments("causal dropout = 0.1 seed = 5", 2, 2);
  checkVarlenDocuments("", 2, 2);
}

// Grouped-query over the packed stream: phase 1's kv-head blocks sum their
// group's query heads over the same stream tiles.
TEST(VarlenAttention, GroupedDocuments) {
  checkVarlenDocuments("causal", 4, 2);
  checkVarlenDocuments("dropout = 0.2 seed = 3", 4, 1);
}

//===----------------------------------------------------------------------===//
// Rotary embedding inside the attention kernels (MLC_ATTN_ROTARY), the
// templates called directly on the emulated device: the kernel that rotates
// Q and K where it reads them equals the kernel without the flag on Q and K
// rotated beforehand (mlc.rotary's formula, here on the host); its dQ and
// dK are the transposed rotation of that kernel's (dV equal).
//===----------------------------------------------------------------------===//

namespace {

/// What the emulated kernels below are built from: each instance is
/// `extern "C" NAME(const int64_t *p, void *const *b, double scale, int
/// phase)` calling one template with the sizes p (MlcAttention's fields in
/// order, the rotary ones last) and the buffers b (O or dQ, dK, dV, dO, Q,
/// K, V, cu_seqlens, cos, sin, scratch), so that the struct layouts are the
/// prelude's own.
const char *kRotaryHarness = R"(
MLC_FN MlcAttention<float> mlc_test_sizes(const int64_t *p, double scale) {
  MlcAttention<float> s = {};
  s.batch = p[0], s.heads = p[1], s.kvHeads = p[2], s.seqQ = p[3], s.seqK = p[4];
  s.tokenCapacity = p[5], s.queryBlocks = p[6];
  for (int r = 0; r < 7; ++r)
    s.t[r] = {p[7 + 4 * r], p[8 + 4 * r], p[9 + 4 * r], p[10 + 4 * r]};
  s.scale = (float)scale, s.dropout = 0, s.keepScale = 1, s.seed = 0;
  s.rot = {p[35], p[36], p[37]};
  return s;
}
MLC_FN MlcAttentionArgs<float, int32_t> mlc_test_args(void *const *b) {
  return {(float *)b[0], (float *)b[1], (float *)b[2], (const float *)b[3],
          (const float *)b[4], (const float *)b[5], (const float *)b[6], nullptr,
          (const int32_t *)b[7], (const float *)b[8], (const float *)b[9]};
}
)";

void rotaryKernelThunk(void *fn, void *const *p) {
  reinterpret_cast<void (*)(const int64_t *, void *const *, double, int)>(fn)(
      *static_cast<const int64_t *const *>(p[0]), *static_cast<void *const *const *>(p[1]),
      *static_cast<const double *>(p[2]), *static_cast<const int *>(p[3]));
}

/// The instances (name, template call) compiled as the CUDA emulator
/// compiles a package's kernels.cu: its header (backend/cuda/emulation.h),
/// then the prelude with the attention templates, then the kernels.
class EmulatedKernels {
public:
  explicit EmulatedKernels(const std::vector<std::pair<std::string, std::string>> &instances) {
    std::ifstream in(std::string(MLC_SOURCE_DIR) + "/runtime/backend/cuda/emulation.h");
    std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(source.empty()) << "no runtime/backend/cuda/emulation.h";
    source += mlc::cudaKernelPrelude() + kRotaryHarness;
    for (const auto &[name, call] : instances)
      source += "extern \"C\" __global__ void " + name +
                "(const int64_t *p, void *const *b, double scale, int phase) {\n"
                "  const MlcKernelCtx ctx = {0, nullptr, 0, (char *)b[10]};\n  " + call +
                "(mlc_test_sizes(p, scale), mlc_test_args(b), &ctx" +
                (call.find("backward") != std::string::npos ? ", phase" : "") + ");\n}\n";
    library_ = loadHostKernelLibrary(source, /*verbose=*/false);
    launch_ = reinterpret_cast<Launch>(dlsym(library_, "mlc_emu_launch"));
  }
  /// Kernel `name`'s phase on `grid` blocks of `threads`.
  void run(const std::string &name, const std::vector<int64_t> &p, void *const *b, double scale,
           int phase, int64_t grid, int64_t threads) {
    void *fn = dlsym(library_, name.c_str());
    ASSERT_TRUE(fn && launch_) << name;
    const int64_t *pp = p.data();
    void *const params[4] = {&pp, &b, &scale, &phase};
    launch_(rotaryKernelThunk, fn, params, grid, threads);
  }

private:
  using Launch = void (*)(void (*)(void *, void *const *), void *, void *const *, int64_t,
                          int64_t);
  void *library_ = nullptr;
  Launch launch_ = nullptr;
};

/// One layout of the rotary checks: the kernel kind (tensor cores or a
/// thread per row), packed sequences (kSequences) or padded [2, H, 70, D],
/// grouped-query (4 query heads over 2 kv heads; else 2 over 2), causal.
struct RotaryCase {
  bool tc, varlen, grouped, causal;
  std::string name() const {
    return std::string(tc ? "tc" : "rows") + (varlen ? "_varlen" : "_padded") +
           (grouped ? "_grouped" : "") + (causal ? "_causal" : "");
  }
  int flags() const {
    return (varlen ? 4 : 0) | (grouped ? 16 : 0) | (causal ? 1 : 0);
  }
};
constexpr int64_t kRotD = 32, kRotDV = 16, kRotS = 70, kRotB = 2;

/// The template calls of case c: forward and backward, without rotary
/// ("plain"), rotate-half ("half") and interleaved ("inter").
std::vector<std::pair<std::string, std::string>> rotaryInstances(const RotaryCase &c) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string dims = c.tc ? "32, 16" : "float, 32, 16, 32, 16";
  for (const char *dir : {"forward", "backward"})
    for (int rot : {0, 32, 32 | 64})
      out.push_back({c.name() + "_" + dir + (rot == 0 ? "_plain" : rot == 32 ? "_half" : "_inter"),
                     std::string("mlc_attention_") + (c.tc ? "tc_" : "") + dir + "<" + dims +
                         ", " + std::to_string(c.flags() | rot) + ">"});
  return out;
}

/// A layout's tensors: Q, O (query heads, widths D and DV), K, V (kv
/// heads), the rows' tables (R wide) and every row's place.
struct RotaryLayout {
  RotaryCase c;
  int64_t H, KH, N, seqs, maxLen, capacity; // N: tokens (varlen) or B * S
  /// The element offset of (token-or-(batch, position) n, head h) of a
  /// tensor with `heads` heads of width W; n runs over [0, N).
  int64_t row(int64_t n, int64_t h, int64_t heads, int64_t W) const {
    if (c.varlen)
      return (n * heads + h) * W;
    const int64_t b = n / kRotS, i = n % kRotS;
    return ((b * heads + h) * kRotS + i) * W;
  }
  int64_t position(int64_t n) const {
    if (!c.varlen)
      return n % kRotS + 3 * (n / kRotS); // per-batch tables: positions differ
    int64_t q = 0;
    while (kSequences[q + 1] <= n)
      ++q;
    return n - kSequences[q];
  }
  /// MlcAttention's fields (mlc_test_sizes) for rotated dims R: the
  /// tensors' strides in role order (O DV wide, or dQ D wide; dK D, dV DV,
  /// dO DV, Q D, K D, V DV).
  std::vector<int64_t> sizes(int64_t R, int64_t rowsPerBlock, bool backward) const {
    const int64_t S = c.varlen ? 0 : kRotS;
    std::vector<int64_t> p = {c.varlen ? seqs : kRotB, H, KH, S, S, capacity,
                              ((c.varlen ? capacity : maxLen) + rowsPerBlock - 1) / rowsPerBlock};
    const int64_t widths[7] = {backward ? kRotD : kRotDV, kRotD, kRotDV, kRotDV,
                               kRotD,                     kRotD, kRotDV};
    for (int role = 0; role < 7; ++role) {
      const int64_t heads = role == 1 || role == 2 || role == 5 || role == 6 ? KH : H,
                    W = widths[role];
      if (c.varlen)
        p.insert(p.end(), {0, heads * W, W, heads * W});
      else
        p.insert(p.end(), {0, heads * kRotS * W, kRotS * W, W});
    }
    p.insert(p.end(), {R, c.varlen ? 0 : kRotS * R, R});
    return p;
  }
};

RotaryLayout rotaryLayout(const RotaryCase &c) {
  RotaryLayout l{c};
  l.H = c.grouped ? 4 : 2;
  l.KH = 2;
  l.seqs = int64_t(kSequences.size()) - 1;
  l.N = c.varlen ? kSequences.back() : kRotB * kRotS;
  l.maxLen = c.varlen ? 40 : kRotS;
  l.capacity = c.varlen ? 80 : 0;
  return l;
}

/// mlc.rotary's tables for rows [0, N) of layout l, R wide: cos, and sin
/// with rotate-half's sign (or the interleaved pairs').
void rotaryTables(const RotaryLayout &l, int64_t R, bool interleaved, std::vector<float> &cs,
                  std::vector<float> &sn) {
  cs.assign(l.N * R, 0);
  sn.assign(l.N * R, 0);
  for (int64_t n = 0; n < l.N; ++n)
    for (int64_t d = 0; d < R; ++d) {
      const int64_t i = interleaved ? d / 2 : d % (R / 2);
      const bool first = interleaved ? d % 2 == 0 : d < R / 2;
      const double theta = double(l.position(n)) * std::pow(10000.0, -2.0 * double(i) / double(R));
      cs[n * R + d] = float(std::cos(theta));
      sn[n * R + d] = float(first ? -std::sin(theta) : std::sin(theta));
    }
}

/// x's rows (`heads` heads, D wide) rotated by mlc.rotary's formula
/// (transpose: by its transpose), the first R elements of each row.
std::vector<float> rotateRows(const RotaryLayout &l, const std::vector<float> &x, int64_t heads,
                              int64_t R, bool interleaved, bool transpose,
                              const std::vector<float> &cs, const std::vector<float> &sn) {
  std::vector<float> y = x;
  for (int64_t n = 0; n < l.N; ++n)
    for (int64_t h = 0; h < heads; ++h) {
      const float *a = x.data() + l.row(n, h, heads, kRotD);
      float *b = y.data() + l.row(n, h, heads, kRotD);
      const float *c = cs.data() + n * R, *s = sn.data() + n * R;
      for (int64_t d = 0; d < R; ++d) {
        const int64_t p = interleaved ? (d ^ 1) : d < R / 2 ? d + R / 2 : d - R / 2;
        b[d] = a[d] * c[d] + a[p] * (transpose ? s[p] : s[d]);
      }
    }
  return y;
}

/// max |a - b| / max |a|; +inf where a difference is NaN (an unwritten
/// element never passes, wherever it lies).
double relativeError(const std::vector<float> &a, const std::vector<float> &b) {
  EXPECT_EQ(a.size(), b.size());
  const auto [worst, scale] = worstDifference(a, b, 0, std::min(a.size(), b.size()));
  return worst == HUGE_VAL ? HUGE_VAL : worst / scale;
}

/// The outputs of one kernel run: O (forward) or dQ, dK, dV.
struct AttentionRun {
  std::vector<float> o, dk, dv;
};

/// Kernel `name` of layout l on q, k, v (and dO for the backward's three
/// phases), with tables cs, sn of R dims.
AttentionRun runAttention(EmulatedKernels &kernels, const RotaryLayout &l,
                          const std::string &name, bool backward, int64_t R,
                          const std::vector<float> &q, const std::vector<float> &k,
                          const std::vector<float> &v, const std::vector<float> &go,
                          const std::vector<float> &cs, const std::vector<float> &sn) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  AttentionRun r{std::vector<float>(l.N * l.H * (backward ? kRotD : kRotDV), nan),
                 std::vector<float>(backward ? l.N * l.KH * kRotD : 0, nan),
                 std::vector<float>(backward ? l.N * l.KH * kRotDV : 0, nan)};
  std::vector<double> scratch(3 * l.H * std::max(l.N, l.capacity), 0.0);
  const int64_t rowsPerBlock = l.c.tc ? 64 : 32, threads = l.c.tc ? 128 : 32;
  const std::vector<int64_t> p = l.sizes(R, rowsPerBlock, backward);
  void *const b[11] = {r.o.data(),       r.dk.data(),      r.dv.data(),
                       (void *)go.data(), (void *)q.data(), (void *)k.data(),
                       (void *)v.data(),  (void *)kSequences.data(), (void *)cs.data(),
                       (void *)sn.data(), scratch.data()};
  // Padded: a block per (batch, head, query tile); varlen: per (head, tile
  // of the packed stream).
  const int64_t grid = (l.c.varlen ? 1 : p[0]) * l.H * p[6];
  const double scale = 1.0 / std::sqrt(double(kRotD));
  for (int phase = 0; phase < (backward ? 3 : 1); ++phase)
    kernels.run(name, p, b, scale, phase, grid, threads);
  return r;
}

/// Case c's checks, forward and backward, for rotate-half and interleaved
/// pairs at R = D and R < D (20: rotate-half's partners 10 apart, across
/// the tensor cores' 8-column tiles). Tolerances: those of the
/// neighbouring tests (f32 1e-5; bf16 products 2e-2, gradients 3e-2).
void checkRotaryAttention(const RotaryCase &c) {
  EmulatedKernels kernels(rotaryInstances(c));
  const RotaryLayout l = rotaryLayout(c);
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto draw = [&](int64_t n) {
    std::vector<float> x(n);
    for (float &e : x)
      e = uni(rng);
    return x;
  };
  const std::vector<float> q = draw(l.N * l.H * kRotD), k = draw(l.N * l.KH * kRotD),
                           v = draw(l.N * l.KH * kRotDV);
  const std::vector<float> go = draw(l.N * l.H * kRotDV);
  const double tolForward = c.tc ? 2e-2 : 1e-5, tolGrad = c.tc ? 3e-2 : 1e-5;
  for (bool interleaved : {false, true})
    for (int64_t R : {kRotD, int64_t(20)}) {
      const std::string what = c.name() + (interleaved ? " interleaved" : " rotate-half") +
                               " R=" + std::to_string(R);
      const std::string rot = interleaved ? "_inter" : "_half";
      std::vector<float> cs, sn;
      rotaryTables(l, R, interleaved, cs, sn);
      const std::vector<float> qr = rotateRows(l, q, l.H, R, interleaved, false, cs, sn),
                               kr = rotateRows(l, k, l.KH, R, interleaved, false, cs, sn);
      // Forward: O.
      const AttentionRun want = runAttention(kernels, l, c.name() + "_forward_plain", false, R,
                                             qr, kr, v, go, cs, sn);
      const AttentionRun got = runAttention(kernels, l, c.name() + "_forward" + rot, false, R,
                                            q, k, v, go, cs, sn);
      const AttentionRun unrotated = runAttention(kernels, l, c.name() + "_forward_plain", false,
                                                  R, q, k, v, go, cs, sn);
      EXPECT_LT(relativeError(want.o, got.o), tolForward) << what << ": O";
      // (the tables rotate: O of the unrotated Q and K differs by 10% or so)
      EXPECT_GT(relativeError(want.o, unrotated.o), 0.05) << what << ": rotation seen";
      // Backward: dQ, dK of the unrotated inputs, dV.
      const AttentionRun plain = runAttention(kernels, l, c.name() + "_backward_plain", true, R,
                                              qr, kr, v, go, cs, sn);
      const AttentionRun grads = runAttention(kernels, l, c.name() + "_backward" + rot, true, R,
                                              q, k, v, go, cs, sn);
      EXPECT_LT(relativeError(rotateRows(l, plain.o, l.H, R, interleaved, true, cs, sn), grads.o),
                tolGrad)
          << what << ": dQ";
      EXPECT_LT(relativeError(rotateRows(l, plain.dk, l.KH, R, interleaved, true, cs, sn),
                              grads.dk),
                tolGrad)
          << what << ": dK";
      EXPECT_LT(relativeError(plain.dv, grads.dv), tolGrad) << what << ": dV";
    }
}

} // namespace

TEST(RotaryAttention, ThreadPerRow) {
  for (bool varlen : {false, true})
    for (bool grouped : {false, true})
      checkRotaryAttention({false, varlen, grouped, /*causal=*/varlen || !grouped});
}

TEST(RotaryAttention, TensorCores) {
  for (bool varlen : {false, true})
    for (bool grouped : {false, true})
      checkRotaryAttention({true, varlen, grouped, /*causal=*/varlen || !grouped});
}

//===----------------------------------------------------------------------===//
// Pointwise kernels' vector path (16-byte loads and stores), on the emulated
// device against the CPU.
//===----------------------------------------------------------------------===//

namespace {

/// @forward's outputs `names`, concatenated, after one run on `device` for
/// parameters and inputs drawn from [-1, 1] by a generator seeded `seed`.
std::vector<float> forwardOutputs(const std::string &dir, const std::string &device,
                                  uint64_t seed, std::initializer_list<const char *> names) {
  Package pkg;
  std::unique_ptr<Backend> backend = backendWithRandomData(dir, device, seed, pkg);
  backend->run("forward", 1);
  std::vector<float> all;
  for (const char *name : names) {
    HostTensor o = backend->output("forward", name);
    const float *f = reinterpret_cast<const float *>(o.data.data());
    all.insert(all.end(), f, f + o.numel());
  }
  return all;
}

/// Element by element within `tolerance` relative (to 1 + |cpu|).
void expectNear(const std::vector<float> &cpu, const std::vector<float> &emu, double tolerance,
                const std::string &what) {
  ASSERT_EQ(cpu.size(), emu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(cpu[i], emu[i], tolerance * (1 + std::fabs(cpu[i]))) << "element " << i << what;
}

/// The lines of package `dir`'s plan.txt inside `func forward`.
std::vector<std::string> forwardPlanLines(const std::string &dir) {
  std::ifstream in(dir + "/plan.txt");
  std::vector<std::string> lines;
  bool forward = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("func ", 0) == 0)
      forward = line.rfind("func forward ", 0) == 0;
    if (forward)
      lines.push_back(line);
  }
  return lines;
}

/// The emulated device's outputs against the CPU's, with cuBLASLt's
/// epilogues and without (MLC_CUBLASLT_EPILOGUE 1 and 0); false (the test
/// skipped) where the build has no CUDA backend.
bool expectEmulatorMatchesCpu(const std::function<std::vector<float>(const std::string &)> &outputs,
                              const char *autocast) {
  std::vector<float> cpu = outputs("cpu");
  for (const char *epilogue : {"1", "0"}) {
    setenv("MLC_CUBLASLT_EPILOGUE", epilogue, 1);
    std::vector<float> emu;
    try {
      emu = outputs("cuda-emulator");
    } catch (const Error &e) {
      unsetenv("MLC_CUBLASLT_EPILOGUE");
      if (!noCudaBackend(e))
        throw;
      [&] { GTEST_SKIP() << e.what(); }();
      return false;
    }
    unsetenv("MLC_CUBLASLT_EPILOGUE");
    expectNear(cpu, emu, 1e-5, std::string(", autocast '") + autocast + "', epilogue " + epilogue);
  }
  return true;
}

} // namespace

// Vectors of 4 f32 (bias + GELU over rows of 8, the parameters at element
// offsets 3 and 35: unaligned, so their loads stay scalar or the kernel
// takes its element loop), of 2 (rows of 6), none (rows of 7, and a
// 3-vector), and a row broadcast over rows of 12 read as one vector per
// lane group. The emulated device's results equal the CPU's.
TEST(VectorizedPointwise, MatchesCpu) {
  const std::string text =
      "func.func @forward(%a: tensor<3xf32> {mlc.param = \"a\"}, "
      "%w: tensor<4x8xf32> {mlc.param = \"w\"}, %b: tensor<8xf32> {mlc.param = \"b\"}, "
      "%x: tensor<4x8xf32> {mlc.input = \"x\"}, %y: tensor<5x6xf32> {mlc.input = \"y\"}, "
      "%z: tensor<3x7xf32> {mlc.input = \"z\"}, %u: tensor<3x4x12xf32> {mlc.input = \"u\"}, "
      "%e: tensor<1x12xf32> {mlc.input = \"e\"}) -> (tensor<4x8xf32> {mlc.output = \"s\"}, "
      "tensor<5x6xf32> {mlc.output = \"g\"}, tensor<3x7xf32> {mlc.output = \"h\"}, "
      "tensor<3xf32> {mlc.output = \"c\"}, tensor<3x4x12xf32> {mlc.output = \"r\"}) {\n"
      "  %0 = mlc.mul %w, %x : tensor<4x8xf32>, tensor<4x8xf32>\n"
      "  %1 = mlc.add %0, %b : tensor<4x8xf32>, tensor<8xf32>\n"
      "  %s = mlc.gelu %1 approximate = tanh : tensor<4x8xf32>\n"
      "  %g = mlc.tanh %y : tensor<5x6xf32>\n"
      "  %h = mlc.tanh %z : tensor<3x7xf32>\n"
      "  %c = mlc.mul %a, %a : tensor<3xf32>, tensor<3xf32>\n"
      "  %r = mlc.sub %u, %e : tensor<3x4x12xf32>, tensor<1x12xf32>\n"
      "  return %s, %g, %h, %c, %r : tensor<4x8xf32>, tensor<5x6xf32>, tensor<3x7xf32>, "
      "tensor<3xf32>, tensor<3x4x12xf32>\n}\n";
  std::string dir = compilePackage(text, /*training=*/false, "", "mlc_vload<4>");
  ASSERT_FALSE(dir.empty());
  auto outputs = [&](const std::string &device) {
    return forwardOutputs(dir, device, 5, {"s", "g", "h", "c", "r"});
  };
  std::vector<float> cpu = outputs("cpu"), emu;
  try {
    emu = outputs("cuda-emulator");
  } catch (const Error &e) {
    if (!noCudaBackend(e))
      throw;
    GTEST_SKIP() << e.what();
  }
  expectNear(cpu, emu, 1e-6, "");
}

//===----------------------------------------------------------------------===//
// A GEMM's bias and GELU: cuBLASLt's epilogues, or the runtime's kernels
// after the product where there is no epilogue (MLC_CUBLASLT_EPILOGUE=0
// forces them).
//===----------------------------------------------------------------------===//

// Activations [2, 3, 8] x a shared weight (one product over 6 rows) and a
// transposed one, each with its bias; the tanh GELU of the first (whose
// input is an output too) and of an unbiased product (8 and 16 columns: the
// GELU's input a multiple of 8 wide, as cuBLASLt's GELU epilogue needs). In
// f32 and with bf16 products (f32 results and biases): the emulated
// cuBLASLt's epilogues and the runtime's kernels both give the CPU's
// results. Also a batched product (a weight per batch: a strided batch)
// with a bias and a GELU, its pre-activation an output (per batch at the
// aux batch stride).
TEST(GemmEpilogues, MatchCpu) {
  const std::string text =
      "func.func @forward(%w: tensor<8x8xf32> {mlc.param = \"w\"}, %b: tensor<8xf32> "
      "{mlc.param = \"b\"}, %u: tensor<6x8xf32> {mlc.param = \"u\"}, %c: tensor<6xf32> "
      "{mlc.param = \"c\"}, %v: tensor<8x16xf32> {mlc.param = \"v\"}, %s: tensor<2x8x8xf32> "
      "{mlc.param = \"s\"}, %x: tensor<2x3x8xf32> {mlc.input = \"x\"}) -> "
      "(tensor<2x3x8xf32> {mlc.output = \"y\"}, tensor<2x3x6xf32> {mlc.output = \"z\"}, "
      "tensor<2x3x8xf32> {mlc.output = \"g\"}, tensor<2x3x16xf32> {mlc.output = \"h\"}, "
      "tensor<2x3x8xf32> {mlc.output = \"k\"}, tensor<2x3x8xf32> {mlc.output = \"tb\"}) {\n"
      "  %p = mlc.matmul %x, %w : tensor<2x3x8xf32>, tensor<8x8xf32>\n"
      "  %y = mlc.add %p, %b : tensor<2x3x8xf32>, tensor<8xf32>\n"
      "  %q = mlc.matmul %x, %u transpose_rhs : tensor<2x3x8xf32>, tensor<6x8xf32>\n"
      "  %z = mlc.add %c, %q : tensor<6xf32>, tensor<2x3x6xf32>\n"
      "  %g = mlc.gelu %y approximate = tanh : tensor<2x3x8xf32>\n"
      "  %r = mlc.matmul %x, %v : tensor<2x3x8xf32>, tensor<8x16xf32>\n"
      "  %h = mlc.gelu %r approximate = tanh : tensor<2x3x16xf32>\n"
      "  %t = mlc.matmul %x, %s : tensor<2x3x8xf32>, tensor<2x8x8xf32>\n"
      "  %tb = mlc.add %t, %b : tensor<2x3x8xf32>, tensor<8xf32>\n"
      "  %k = mlc.gelu %tb approximate = tanh : tensor<2x3x8xf32>\n"
      "  return %y, %z, %g, %h, %k, %tb : tensor<2x3x8xf32>, tensor<2x3x6xf32>, "
      "tensor<2x3x8xf32>, tensor<2x3x16xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>\n}\n";
  for (const char *autocast : {"", "bf16"}) {
    std::string dir = compilePackage(text, /*training=*/false, autocast, "");
    ASSERT_FALSE(dir.empty());
    // Three products with a bias, three with a GELU; in f32 no kernel at
    // all (bf16: the operands' casts).
    int biased = 0, gelus = 0, kernels = 0;
    for (const std::string &line : forwardPlanLines(dir)) {
      kernels += line.rfind("kernel ", 0) == 0;
      biased += line.rfind("gemm ", 0) == 0 && line.find(" bias ") != std::string::npos;
      gelus += line.rfind("gemm ", 0) == 0 && line.find(" gelu ") != std::string::npos;
    }
    EXPECT_EQ(biased, 3) << dir;
    // (bf16: the unbiased product stays bf16, its widening fused with the GELU.)
    EXPECT_EQ(gelus, *autocast ? 2 : 3) << dir;
    if (!*autocast) {
      EXPECT_EQ(kernels, 0) << dir;
    }
    auto outputs = [&](const std::string &device) {
      return forwardOutputs(dir, device, 9, {"y", "z", "g", "h", "k", "tb"});
    };
    if (!expectEmulatorMatchesCpu(outputs, autocast))
      return;
  }
}

// --dtype bf16's MLP: the first product in bf16 with its bias in bf16 and
// its tanh GELU as the epilogue over the bf16 pre-activation (plan.gemm
// ... gelu over bf16 buffers), read by the second product. The emulated
// cuBLASLt's GELU_AUX and the runtime's bf16 GELU kernel (epilogues off)
// give the CPU's results: the GELU of the stored pre-activation, rounded
// once (2^-8: a GELU a rounding apart may round to a neighbouring bf16).
TEST(GemmEpilogues, Bf16Gelu) {
  const std::string text =
      "func.func @forward(%w: tensor<8x16xf32> {mlc.param = \"w\"}, %b: tensor<16xf32> "
      "{mlc.param = \"b\"}, %v: tensor<16x8xf32> {mlc.param = \"v\"}, %x: tensor<2x3x8xf32> "
      "{mlc.input = \"x\"}) -> (tensor<2x3x8xf32> {mlc.output = \"y\"}) {\n"
      "  %p = mlc.matmul %x, %w : tensor<2x3x8xf32>, tensor<8x16xf32>\n"
      "  %h = mlc.add %p, %b : tensor<2x3x16xf32>, tensor<16xf32>\n"
      "  %g = mlc.gelu %h approximate = tanh : tensor<2x3x16xf32>\n"
      "  %y = mlc.matmul %g, %v : tensor<2x3x16xf32>, tensor<16x8xf32>\n"
      "  return %y : tensor<2x3x8xf32>\n}\n";
  std::string dir = compilePackage(text, /*training=*/false, "bf16", "");
  ASSERT_FALSE(dir.empty());
  int gelus = 0;
  for (const std::string &line : forwardPlanLines(dir))
    gelus += line.rfind("gemm ", 0) == 0 && line.find(" gelu ") != std::string::npos;
  EXPECT_EQ(gelus, 1) << dir;
  auto outputs = [&](const std::string &device) {
    return forwardOutputs(dir, device, 13, {"y"});
  };
  std::vector<float> cpu = outputs("cpu");
  for (const char *epilogue : {"1", "0"}) {
    setenv("MLC_CUBLASLT_EPILOGUE", epilogue, 1);
    std::vector<float> emu;
    try {
      emu = outputs("cuda-emulator");
    } catch (const Error &e) {
      unsetenv("MLC_CUBLASLT_EPILOGUE");
      if (!noCudaBackend(e))
        throw;
      GTEST_SKIP() << e.what();
    }
    unsetenv("MLC_CUBLASLT_EPILOGUE");
    expectNear(cpu, emu, 1e-2, std::string("epilogue ") + epilogue);
  }
}

// Sums of products accumulating in the GEMMs (beta = 1): two products, a
// chain of three (a transposed and a batched one among them: a strided
// batch) and a biased one accumulating into another. In f32 and with bf16 products (f32_result
// products accumulating in f32): the plan has the accumulating GEMMs and
// no kernel, and the emulated cuBLASLt gives the CPU's results.
TEST(GemmAccumulate, MatchCpu) {
  const std::string text =
      "func.func @forward(%w: tensor<8x8xf32> {mlc.param = \"w\"}, %u: tensor<8x8xf32> "
      "{mlc.param = \"u\"}, %s: tensor<2x8x8xf32> {mlc.param = \"s\"}, %b: tensor<8xf32> "
      "{mlc.param = \"b\"}, %x: tensor<2x3x8xf32> {mlc.input = \"x\"}, %y: tensor<2x3x8xf32> "
      "{mlc.input = \"y\"}) -> (tensor<2x3x8xf32> {mlc.output = \"two\"}, tensor<2x3x8xf32> "
      "{mlc.output = \"three\"}, tensor<2x3x8xf32> {mlc.output = \"biased\"}) {\n"
      "  %a = mlc.matmul %x, %w : tensor<2x3x8xf32>, tensor<8x8xf32>\n"
      "  %c = mlc.matmul %y, %u : tensor<2x3x8xf32>, tensor<8x8xf32>\n"
      "  %two = mlc.add %a, %c : tensor<2x3x8xf32>, tensor<2x3x8xf32>\n"
      "  %d = mlc.matmul %x, %u transpose_rhs : tensor<2x3x8xf32>, tensor<8x8xf32>\n"
      "  %e = mlc.matmul %y, %s : tensor<2x3x8xf32>, tensor<2x8x8xf32>\n"
      "  %f = mlc.matmul %y, %w : tensor<2x3x8xf32>, tensor<8x8xf32>\n"
      "  %de = mlc.add %d, %e : tensor<2x3x8xf32>, tensor<2x3x8xf32>\n"
      "  %three = mlc.add %de, %f : tensor<2x3x8xf32>, tensor<2x3x8xf32>\n"
      "  %h = mlc.matmul %y, %w transpose_rhs : tensor<2x3x8xf32>, tensor<8x8xf32>\n"
      "  %g = mlc.matmul %x, %s : tensor<2x3x8xf32>, tensor<2x8x8xf32>\n"
      "  %gb = mlc.add %g, %b : tensor<2x3x8xf32>, tensor<8xf32>\n"
      "  %biased = mlc.add %h, %gb : tensor<2x3x8xf32>, tensor<2x3x8xf32>\n"
      "  return %two, %three, %biased : tensor<2x3x8xf32>, tensor<2x3x8xf32>, "
      "tensor<2x3x8xf32>\n}\n";
  for (const char *autocast : {"", "bf16"}) {
    std::string dir = compilePackage(text, /*training=*/false, autocast, "");
    ASSERT_FALSE(dir.empty());
    int accumulating = 0, kernels = 0;
    for (const std::string &line : forwardPlanLines(dir)) {
      kernels += line.rfind("kernel ", 0) == 0;
      accumulating += line.rfind("gemm ", 0) == 0 && line.find(" accumulate ") != std::string::npos;
    }
    EXPECT_EQ(accumulating, 4) << dir;
    if (!*autocast) {
      EXPECT_EQ(kernels, 0) << dir;
    }
    auto outputs = [&](const std::string &device) {
      return forwardOutputs(dir, device, 11, {"two", "three", "biased"});
    };
    if (!expectEmulatorMatchesCpu(outputs, autocast))
      return;
  }
}
