//===- ShapesTest.cpp - broadcasting, axes and slices ----------------------===//

#include "dialects/mlc/MlcShapes.h"

#include <gtest/gtest.h>

using namespace mlc;
using Shape = std::vector<int64_t>;

TEST(Shapes, BroadcastAlignsOnTheRight) {
  EXPECT_EQ(broadcastShapes({8, 1024, 768}, {768}), Shape({8, 1024, 768}));
  EXPECT_EQ(broadcastShapes({8, 1, 1, 64}, {12, 64, 1}), Shape({8, 12, 64, 64}));
  EXPECT_EQ(broadcastShapes({}, {3, 4}), Shape({3, 4}));
}

TEST(Shapes, BroadcastRejectsConflictingSizes) {
  EXPECT_FALSE(broadcastShapes({3, 4}, {5}).has_value());
  EXPECT_FALSE(broadcastShapes({2, 3}, {3, 3}).has_value());
}

TEST(Shapes, BroadcastDynamicTakesTheStaticSize) {
  EXPECT_EQ(broadcastShapes({kDynamic, 768}, {4, 1}), Shape({4, 768}));
  EXPECT_EQ(broadcastShapes({kDynamic}, {1}), Shape({kDynamic}));
  EXPECT_EQ(broadcastShapes({kDynamic}, {kDynamic}), Shape({kDynamic}));
}

TEST(Shapes, NormalizeAxis) {
  EXPECT_EQ(normalizeAxis(-1, 3), 2);
  EXPECT_EQ(normalizeAxis(0, 3), 0);
  EXPECT_FALSE(normalizeAxis(3, 3).has_value());
  EXPECT_FALSE(normalizeAxis(-4, 3).has_value());
}

TEST(Shapes, SliceFollowsPython) {
  // Compare with Python's len(range(dim)[start:end:step]).
  EXPECT_EQ(sliceExtent(10, 0, -1, 1), 9);
  EXPECT_EQ(sliceExtent(10, 1, 100, 1), 9);
  EXPECT_EQ(sliceExtent(10, -3, 10, 2), 2);
  EXPECT_EQ(sliceExtent(10, 5, 2, 1), 0);
  EXPECT_EQ(sliceExtent(10, -100, 3, 1), 3);
  EXPECT_EQ(sliceExtent(7, 0, 7, 3), 3);
  EXPECT_EQ(sliceStart(10, -3), 7);
}

TEST(Shapes, Format) { EXPECT_EQ(formatShape({8, kDynamic, 768}), "[8, ?, 768]"); }
