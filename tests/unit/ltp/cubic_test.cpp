// CUBIC (RFC 9438), the kernel TCP the simulator's gloo stand-in runs: the cut to 0.7, the
// regrowth to the window of the loss K seconds later whatever the RTT, the Reno-friendly
// region, fast convergence and the timeout.
#include <gtest/gtest.h>

#include <cmath>

#include "ltp/cubic_controller.h"

namespace sg::ltp {
namespace {

constexpr uint32_t kMss = 1000;

// Feeds one window of ACKs per RTT (ten ACKs each), every chunk sent after the last loss.
struct Flow {
  CubicController c;
  Nanos now = 0;
  Flow() { c.reset(0, kMss); }
  void rtts(int n, Nanos rtt) {
    for (int r = 0; r < n; ++r) {
      const uint64_t window = c.cwnd_bytes();
      for (int k = 0; k < 10; ++k) {
        now += rtt / 10;
        AckEvent a;
        a.now = now;
        a.acked_bytes = window / 10;
        a.srtt = a.min_rtt = rtt;
        a.newest_acked_send = now - rtt / 2;
        c.on_ack(a);
      }
    }
  }
  void loss() { c.on_loss({now, kMss, now - 1, c.cwnd_bytes(), false}); }
  double segs() const { return static_cast<double>(c.cwnd_bytes()) / kMss; }
};

// Seconds from the loss until the window is back at W_max, at a given RTT.
double regrowth_s(Nanos rtt) {
  Flow f;
  while (f.c.cwnd_bytes() < 100 * kMss) f.rtts(1, rtt);
  f.loss();
  const double w_max = static_cast<double>(f.c.w_max_bytes());
  EXPECT_NEAR(f.segs(), 0.7 * w_max / kMss, 1.0) << "the cut is to 0.7 of the window";
  const Nanos t0 = f.now;
  while (static_cast<double>(f.c.cwnd_bytes()) < 0.99 * w_max && f.now - t0 < 60 * kSecond) f.rtts(1, rtt);
  return static_cast<double>(f.now - t0) / 1e9;
}

TEST(Cubic, RegrowsToTheLossWindowAfterKSecondsWhateverTheRtt) {
  // Slow start overshoots to 160 segments: K = cbrt(0.3 * 160 / 0.4) = 4.9 s (the curve is
  // aimed one RTT ahead, so the window is back a little sooner).
  const double at_100ms = regrowth_s(100 * kMilli), at_200ms = regrowth_s(200 * kMilli);
  EXPECT_GT(at_100ms, 3.0);
  EXPECT_LT(at_100ms, 5.5);
  // NewReno needs 0.3 W_max RTTs: twice as long at 200 ms as at 100 ms. CUBIC's curve is in
  // seconds. (On short paths the Reno-friendly region is faster still: next test.)
  EXPECT_GT(at_200ms / at_100ms, 0.7);
  EXPECT_LT(at_200ms / at_100ms, 1.3);
}

TEST(Cubic, NeverSlowerThanRenoOnShortPaths) {
  Flow f;
  f.rtts(1, kMilli);
  f.loss();  // 20 -> 14 segments; K is about 2 s, far beyond the 100 ms below
  const double after_cut = f.segs();
  f.rtts(100, kMilli);
  // Reno-friendly increase: 3 (1 - 0.7) / (1 + 0.7) = 0.53 segments per RTT.
  EXPECT_GE(f.segs(), after_cut + 0.9 * 0.53 * 100);
  EXPECT_LE(f.segs(), after_cut + 1.1 * 100);
}

TEST(Cubic, FastConvergenceLowersWmaxAndATimeoutRestartsFromOneSegment) {
  Flow f;
  while (f.c.cwnd_bytes() < 100 * kMss) f.rtts(1, 10 * kMilli);
  f.loss();
  const uint64_t first_w_max = f.c.w_max_bytes();
  f.rtts(1, 10 * kMilli);
  f.loss();  // below the previous W_max: release some of it
  EXPECT_LT(f.c.w_max_bytes(), f.c.cwnd_bytes() / 0.7 + kMss);
  EXPECT_LT(f.c.w_max_bytes(), first_w_max);
  EXPECT_EQ(f.c.reductions(), 2u);
  f.now += kSecond;
  f.c.on_loss({f.now, kMss, f.now - 1, f.c.cwnd_bytes(), true});
  EXPECT_EQ(f.c.cwnd_bytes(), kMss);
  EXPECT_EQ(f.c.loss_detection().min_rto, 200 * kMilli) << "the same SACK recovery as the NewReno baseline";
}

}  // namespace
}  // namespace sg::ltp
