#include "ltp/early_close.h"

#include <gtest/gtest.h>

namespace sg::ltp {
namespace {

TEST(EarlyClose, ThresholdAdaptsToLossWithinBounds) {
  EarlyCloseConfig c;
  EarlyClose e(c);
  EXPECT_DOUBLE_EQ(e.threshold(), c.threshold_max) << "no loss measured: nearly everything";
  c.initial_loss = 0.02;
  EXPECT_DOUBLE_EQ(EarlyClose(c).threshold(), 0.99);
  c.initial_loss = 0.9;
  EXPECT_DOUBLE_EQ(EarlyClose(c).threshold(), 1.0 - c.max_loss_fraction) << "never below the hard bound";
}

TEST(EarlyClose, MinFractionIsAFloorUnderTheThreshold) {
  // transport.early_close.min_fraction: however much loss was measured, never close a
  // transfer with less than this fraction of it.
  EarlyCloseConfig c;
  c.max_loss_fraction = 0.2;
  c.initial_loss = 0.5;  // the adaptive rule alone would accept 75%, the hard bound 80%
  EXPECT_DOUBLE_EQ(EarlyClose(c).threshold(), 0.8);
  c.min_fraction = 0.95;
  EXPECT_DOUBLE_EQ(EarlyClose(c).threshold(), 0.95);
  c.initial_loss = 0;
  EXPECT_DOUBLE_EQ(EarlyClose(c).threshold(), c.threshold_max) << "a floor, not a target";
}

TEST(EarlyClose, LossEstimateIsAnEwmaOverTransfers) {
  EarlyCloseConfig c;
  EarlyClose e(c);
  e.on_transfer_loss(0.04);
  EXPECT_DOUBLE_EQ(e.loss_estimate(), 0.01);
  for (int i = 0; i < 100; ++i) e.on_transfer_loss(0.04);
  EXPECT_NEAR(e.loss_estimate(), 0.04, 1e-9);
  EXPECT_NEAR(e.threshold(), 0.98, 1e-9);
  e.on_transfer_loss(7.0);  // nonsense is clamped
  EXPECT_LE(e.loss_estimate(), 1.0);
}

TEST(EarlyClose, QuietTimeFromRttAndGapIsClamped) {
  EarlyCloseConfig c;
  EarlyClose e(c);
  EXPECT_EQ(e.quiet(10 * kMilli, 100 * kMicro), 2 * 10 * kMilli + 8 * 100 * kMicro);
  EXPECT_EQ(e.quiet(0, 0), 2 * c.quiet_unknown_rtt) << "no RTT yet: assume one";
  EXPECT_EQ(e.quiet(1, 1), c.quiet_min);
  EXPECT_EQ(e.quiet(10 * kSecond, 0), c.quiet_max);
}

}  // namespace
}  // namespace sg::ltp
