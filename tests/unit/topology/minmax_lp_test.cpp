#include "topology/minmax_lp.h"

#include <gtest/gtest.h>

namespace sg::topo {
namespace {

TEST(MinMaxLp, IdentityGameSplitsEvenly) {
  // Two trees each loading a different link: half the model on each.
  MinMaxLp lp(2, 2);
  lp.set(0, 0, 1.0);
  lp.set(1, 1, 1.0);
  lp.enable(0);
  lp.enable(1);
  ASSERT_TRUE(lp.solve());
  EXPECT_NEAR(lp.value(), 0.5, 1e-12);
  EXPECT_NEAR(lp.shares()[0], 0.5, 1e-12);
  EXPECT_NEAR(lp.prices()[0] + lp.prices()[1], 1.0, 1e-12);
}

TEST(MinMaxLp, UnevenSpeedsBalanceFinishingTimes) {
  // Link 0 is 3x slower for tree 0 than link 1 is for tree 1: x0*3 = x1*1 -> x0 = 1/4.
  MinMaxLp lp(2, 2);
  lp.set(0, 0, 3.0);
  lp.set(1, 1, 1.0);
  lp.enable(0);
  lp.enable(1);
  ASSERT_TRUE(lp.solve());
  EXPECT_NEAR(lp.value(), 0.75, 1e-12);
  EXPECT_NEAR(lp.shares()[0], 0.25, 1e-12);
}

TEST(MinMaxLp, DominatedColumnGetsNothingAndEnableWarmStarts) {
  MinMaxLp lp(2, 3);
  lp.set(0, 0, 2.0);
  lp.set(1, 0, 2.0);  // tree 0 loads both links heavily
  lp.set(0, 1, 1.0);
  lp.set(1, 2, 1.0);
  lp.enable(0);
  ASSERT_TRUE(lp.solve());
  EXPECT_NEAR(lp.value(), 2.0, 1e-12);
  lp.enable(1);
  lp.enable(2);
  ASSERT_TRUE(lp.solve());
  EXPECT_NEAR(lp.value(), 0.5, 1e-12);
  EXPECT_NEAR(lp.shares()[0], 0.0, 1e-12);
}

TEST(MinMaxLp, NothingEnabledIsNotSolved) {
  MinMaxLp lp(1, 1);
  lp.set(0, 0, 1.0);
  EXPECT_FALSE(lp.solve());
}

}  // namespace
}  // namespace sg::topo
