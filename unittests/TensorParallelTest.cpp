//===- TensorParallelTest.cpp - slices of split parameters, plan.txt's tp lines -===//

#include "runtime/core/PlanFormat.h"
#include "runtime/train/TensorParallel.h"
#include "runtime/train/WholeTensors.h"
#include "support/Error.h"

#include <gtest/gtest.h>
#include <unistd.h>

using namespace mlc::rt;

namespace {

std::string errorOf(const std::string &text) {
  try {
    parsePlan(text, "plan.txt");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

// GPT-2's c_attn over a group of 2: three blocks (Q, K, V) along the output
// dim; rank r keeps the r-th half of each.
ParamInfo cAttn() {
  ParamInfo p;
  p.name = "c_attn.weight";
  p.shape = {2, 6};
  p.numel = 12;
  p.tpDim = 1;
  p.tpBlocks = {4, 4, 4};
  return p;
}

/// The whole f32 tensor 0, 1, 2, ... of `shape`.
HostTensor counting(const std::vector<int64_t> &shape) {
  HostTensor t{"f32", shape, {}};
  t.data.resize(size_t(t.numel() * 4));
  for (int64_t i = 0; i < t.numel(); ++i)
    reinterpret_cast<float *>(t.data.data())[i] = float(i);
  return t;
}

} // namespace

TEST(TensorParallel, PlanRecordsTheGroupAndEachSplit) {
  const std::string text = "mlc-plan " + std::to_string(kPlanVersion) +
                           "\ntensor_parallel 2\n"
                           "param qkv f32 4x6 1 normal:0.02 tp 1 4,4,4\n"
                           "param ln f32 4 0 ones\n";
  PlanData plan = parsePlan(text, "plan.txt");
  EXPECT_EQ(plan.tensorParallel, 2);
  ASSERT_EQ(plan.params.size(), 2u);
  EXPECT_EQ(plan.params[0].tpDim, 1);
  EXPECT_EQ(plan.params[0].tpBlocks, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(plan.params[1].tpDim, -1);
  EXPECT_EQ(writePlan(plan), text);
}

TEST(TensorParallel, MalformedSplitsNameTheParameter) {
  const std::string head = "mlc-plan " + std::to_string(kPlanVersion) + "\n";
  EXPECT_NE(errorOf(head + "tensor_parallel 2\nparam w f32 4x6 1 zeros tp 1 4,4,3\n")
                .find("plan.txt:3: parameter w: tp block '3' is not a positive multiple of 2"),
            std::string::npos);
  EXPECT_NE(errorOf(head + "tensor_parallel 2\nparam w f32 4x6 1 zeros tp 1 4,4\n")
                .find("tp blocks of 8 do not make its dim 1 of 6 on each of 2 ranks"),
            std::string::npos);
  EXPECT_NE(errorOf(head + "param w f32 4x6 1 zeros tp 1 4,4,4\n").find("malformed tp split"),
            std::string::npos);
  EXPECT_NE(errorOf(head + "tensor_parallel 1\n").find("malformed tensor_parallel line"),
            std::string::npos);
}

TEST(TensorParallel, EachRankTakesItsPartOfEveryBlock) {
  ParamInfo p = cAttn();
  EXPECT_EQ(wholeShape(p, 2), (std::vector<int64_t>{2, 12}));
  HostTensor whole = counting({2, 12});
  const std::vector<double> expected[2] = {{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21},
                                           {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23}};
  for (int r = 0; r < 2; ++r) {
    HostTensor slice = sliceOfWhole(whole, p, r, 2);
    EXPECT_EQ(slice.shape, p.shape);
    std::vector<double> got;
    for (int64_t i = 0; i < slice.numel(); ++i)
      got.push_back(slice.getDouble(i));
    EXPECT_EQ(got, expected[r]) << "rank " << r;
  }
  // A row-parallel weight: split along dim 0, one block.
  p.shape = {3, 2};
  p.numel = 6;
  p.tpDim = 0;
  p.tpBlocks = {12};
  whole.shape = {12, 2};
  HostTensor slice = sliceOfWhole(whole, p, 1, 4);
  EXPECT_EQ(slice.getDouble(0), 6);
  EXPECT_EQ(slice.getDouble(5), 11);
}

// The runs in the whole's order cover it exactly once, and a rank's slice
// read from a file (SafetensorsFile::readSlice, a checkpoint's moments) is
// the slice cut in memory.
TEST(TensorParallel, ASliceReadFromAFileIsTheSliceCutInMemory) {
  const ParamInfo p = cAttn();
  const HostTensor whole = counting({2, 12});
  const std::vector<char> slices[2] = {sliceOfWhole(whole, p, 0, 2).data,
                                       sliceOfWhole(whole, p, 1, 2).data};
  std::string joined;
  int64_t at = 0;
  forEachSliceRun(p, 2, 4, [&](int rank, int64_t w, int64_t s, int64_t bytes) {
    EXPECT_EQ(w, at);
    joined.append(slices[rank].data() + s, size_t(bytes));
    at += bytes;
  });
  EXPECT_EQ(joined, std::string(whole.data.begin(), whole.data.end()));
  const std::string path = "/tmp/mlc-tensorparalleltest-" + std::to_string(getpid());
  writeSafetensors(path, {{p.name, whole}});
  SafetensorsFile file(path);
  for (int r = 0; r < 2; ++r) {
    std::vector<char> got(48);
    file.readSlice(*file.find(p.name), p, r, 2, got.data());
    EXPECT_EQ(got, slices[r]) << "rank " << r;
  }
  std::remove(path.c_str());
}
