// The link model: serialisation at the (traced) rate, propagation delay, drop-tail queue,
// random and Gilbert-Elliott loss rates.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/link.h"

namespace sg::sim {
namespace {

LinkSpec spec(double Bps, Nanos delay, uint64_t queue) {
  LinkSpec s;
  s.bytes_per_s = Bps;
  s.delay = delay;
  s.queue_bytes = queue;
  return s;
}

TEST(Link, SerialisesAtItsRateAndAddsTheDelay) {
  Link l(spec(1e6, 30 * kMilli, 1u << 30), 1);  // 1 MB/s: 1000 B take 1 ms
  Link::Outcome o{};
  for (int i = 0; i < 100; ++i) o = l.send(0, 1000);
  EXPECT_EQ(o.depart, 100 * kMilli);
  EXPECT_EQ(o.arrive, 130 * kMilli);
  // An idle link starts at once.
  const auto late = l.send(1 * kSecond, 500);
  EXPECT_EQ(late.depart, 1 * kSecond + 500 * kMicro);
  EXPECT_EQ(l.stats().delivered_bytes, 100000u + 500u);
}

TEST(Link, DropTailQueueBoundsTheBacklog) {
  Link l(spec(1e6, 0, 10000), 1);
  int dropped = 0;
  for (int i = 0; i < 30; ++i) dropped += l.send(0, 1000).dropped;
  EXPECT_EQ(dropped, 20);  // ten 1000-byte packets fit in 10000 bytes
  EXPECT_EQ(l.stats().queue_drops, 20u);
  // After 5 ms, five have left: five more fit.
  int ok = 0;
  for (int i = 0; i < 10; ++i) ok += !l.send(5 * kMilli, 1000).dropped;
  EXPECT_EQ(ok, 5);
}

TEST(Link, TraceChangesTheRateMidPacket) {
  LinkSpec s = spec(1e6, 0, 1u << 30);
  s.trace.kind = TraceSpec::Kind::kSteps;
  s.trace.steps = {{1 * kMilli, 0.5}};
  Link l(s, 1);
  // 2000 B: 1000 B in the first ms at 1 MB/s, the other 1000 B at 0.5 MB/s take 2 ms.
  EXPECT_EQ(l.send(0, 2000).depart, 3 * kMilli);
  EXPECT_DOUBLE_EQ(l.rate_at(0), 1e6);
  EXPECT_DOUBLE_EQ(l.rate_at(5 * kMilli), 0.5e6);
}

TEST(Link, PeriodicAndWalkTracesStayInTheirBounds) {
  TraceSpec p;
  p.kind = TraceSpec::Kind::kPeriodic;
  p.period = 10 * kSecond;
  p.dip_length = 2 * kSecond;
  p.phase = 5 * kSecond;
  p.dip_factor = 0.2;
  BandwidthTrace tp(p);
  EXPECT_DOUBLE_EQ(tp.factor_at(1 * kSecond), 1.0);
  EXPECT_DOUBLE_EQ(tp.factor_at(6 * kSecond), 0.2);
  EXPECT_DOUBLE_EQ(tp.factor_at(8 * kSecond), 1.0);
  EXPECT_DOUBLE_EQ(tp.factor_at(16 * kSecond), 0.2);
  TraceSpec w;
  w.kind = TraceSpec::Kind::kWalk;
  w.interval = 1 * kSecond;
  w.sigma = 0.3;
  w.lo = 0.3;
  w.hi = 0.9;
  w.seed = 4;
  BandwidthTrace tw(w);
  double lo = 1, hi = 0;
  for (Nanos t = 0; t < 600 * kSecond; t += kSecond / 2) {
    lo = std::min(lo, tw.factor_at(t));
    hi = std::max(hi, tw.factor_at(t));
  }
  EXPECT_GE(lo, 0.3);
  EXPECT_LE(hi, 0.9);
  EXPECT_LT(lo, 0.45) << "the walk should wander";
  EXPECT_GT(hi, 0.75);
  EXPECT_EQ(BandwidthTrace(w).segments(), tw.segments()) << "same seed, same walk";
}

TEST(Link, RandomLossRate) {
  LinkSpec s = spec(1e12, 0, 1ull << 40);
  s.loss = 0.02;
  Link l(s, 7);
  const int n = 200000;
  for (int i = 0; i < n; ++i) l.send(i, 100);
  EXPECT_NEAR(static_cast<double>(l.stats().lost) / n, 0.02, 0.002);
}

TEST(Link, GilbertElliottLossRateAndBurstiness) {
  LinkSpec s = spec(1e12, 0, 1ull << 40);
  s.ge.enabled = true;
  s.ge.p_good_to_bad = 0.001;
  s.ge.p_bad_to_good = 0.1;
  s.ge.loss_good = 0.0;
  s.ge.loss_bad = 0.5;
  const double expect = s.ge.mean_loss();  // 0.001/0.101 * 0.5 ~ 0.00495
  EXPECT_NEAR(expect, 0.00495, 1e-4);
  Link l(s, 9);
  const int n = 2000000;
  int lost = 0, runs = 0;
  bool prev = false;
  for (int i = 0; i < n; ++i) {
    const bool x = l.send(i, 100).lost;
    lost += x;
    runs += x && prev;  // consecutive losses: bursts
    prev = x;
  }
  EXPECT_NEAR(static_cast<double>(lost) / n, expect, 0.15 * expect);
  // Random loss at the same rate would make a loss followed by a loss ~0.5% likely; in the
  // bad state it is ~50%.
  EXPECT_GT(static_cast<double>(runs) / lost, 0.2);
}

}  // namespace
}  // namespace sg::sim
