#include <gtest/gtest.h>

#include "ltp/aimd_controller.h"
#include "ltp/delivery_rate_controller.h"

namespace sg::ltp {
namespace {

constexpr uint32_t kMss = 1000;

TEST(Aimd, SlowStartThenHalvesOncePerEpisode) {
  AimdController c;
  c.reset(0, kMss);
  EXPECT_EQ(c.cwnd_bytes(), 10u * kMss);
  AckEvent a;
  a.now = 10;
  a.acked_bytes = 10 * kMss;
  c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 20u * kMss) << "slow start doubles per window";
  c.on_loss({100, kMss, 50, 20 * kMss, false});
  EXPECT_EQ(c.cwnd_bytes(), 10u * kMss);
  c.on_loss({101, kMss, 60, 20 * kMss, false});  // sent before the reduction: same episode
  EXPECT_EQ(c.cwnd_bytes(), 10u * kMss);
  c.on_loss({300, kMss, 200, 10 * kMss, false});  // sent after: a new episode
  EXPECT_EQ(c.cwnd_bytes(), 5u * kMss);
  EXPECT_EQ(c.reductions(), 2u);
}

TEST(Aimd, CongestionAvoidanceAddsOneMssPerWindow) {
  AimdController c;
  c.reset(0, kMss);
  c.on_loss({1, kMss, 1, 10 * kMss, false});  // ssthresh = cwnd = 5 MSS
  AckEvent a;
  a.now = 10;
  a.newest_acked_send = 5;  // sent after the episode began
  a.acked_bytes = 5 * kMss;
  c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 6u * kMss);
}

TEST(Aimd, TimeoutCollapsesToOneMssAndLinuxRtoFloor) {
  AimdController c;
  c.reset(0, kMss);
  c.on_loss({1, 10 * kMss, 0, 10 * kMss, true});
  EXPECT_EQ(c.cwnd_bytes(), kMss);
  EXPECT_EQ(c.ssthresh(), 5u * kMss);
  const auto ld = c.loss_detection();
  EXPECT_EQ(ld.min_rto, 200 * kMilli);
  EXPECT_EQ(ld.dup_threshold, 3u);
  EXPECT_EQ(c.pacing_rate(), 0.0);
}

TEST(DeliveryRate, IgnoresRandomLossAndFollowsDeliveryRate) {
  DeliveryRateController c;
  c.reset(0, kMss);
  uint64_t delivered = 0;
  for (int i = 1; i <= 40; ++i) {
    AckEvent a;
    a.now = i * kMilli;
    a.acked_bytes = 10 * kMss;
    a.prior_delivered = delivered;
    delivered += a.acked_bytes;
    a.delivered = delivered;
    a.delivery_rate = 1e7;  // 10 MB/s
    a.rtt = 2 * kMilli;
    a.inflight_bytes = 5 * kMss;
    c.on_ack(a);
  }
  EXPECT_DOUBLE_EQ(c.btlbw(), 1e7);
  EXPECT_EQ(c.min_rtt(), 2 * kMilli);
  const double rate = c.pacing_rate();
  const uint64_t cwnd = c.cwnd_bytes();
  for (int i = 0; i < 50; ++i) c.on_loss({50 * kMilli, kMss, 40 * kMilli, cwnd, false});
  EXPECT_DOUBLE_EQ(c.pacing_rate(), rate) << "loss alone changes nothing";
  EXPECT_EQ(c.cwnd_bytes(), cwnd);
  EXPECT_GE(cwnd, static_cast<uint64_t>(2 * 1e7 * 0.002 * 0.99));
  c.on_loss({60 * kMilli, cwnd, 50 * kMilli, cwnd, true});
  EXPECT_DOUBLE_EQ(c.btlbw(), 5e6) << "a timeout halves the estimate";
}

TEST(DeliveryRate, LeavesStartupWhenBandwidthPlateaus) {
  DeliveryRateController c;
  c.reset(0, kMss);
  uint64_t delivered = 0;
  for (int i = 1; i <= 20; ++i) {
    AckEvent a;
    a.now = i * kMilli;
    a.acked_bytes = kMss;
    a.prior_delivered = delivered;  // every ACK starts a new round in this synthetic feed
    delivered += kMss;
    a.delivered = delivered;
    a.delivery_rate = 5e6;
    a.rtt = kMilli;
    a.inflight_bytes = 0;
    c.on_ack(a);
  }
  EXPECT_NE(c.mode(), 0) << "no longer in startup";
  EXPECT_LE(c.pacing_rate(), 1.25 * 5e6 + 1);
}

}  // namespace
}  // namespace sg::ltp
