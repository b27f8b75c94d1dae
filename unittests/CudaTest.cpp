//===- CudaTest.cpp - kernels.cu's kernel lines and ptxas's statistics -----===//

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/Nvrtc.h"
#include "runtime/core/Error.h"

#include <gtest/gtest.h>

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
    for (const char *k : {"mlc_sumsq_f32", "mlc_sumsq_f64", "mlc_scale_f32", "mlc_scale_f64"}) {
      ASSERT_TRUE(stats.count(k)) << k << " for " << arch << ":\n" << out.log;
      EXPECT_EQ(stats[k].spillStores + stats[k].spillLoads, 0) << k << " for " << arch;
    }
  }
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
