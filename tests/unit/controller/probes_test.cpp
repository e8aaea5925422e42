// Probe scheduling (idle links only, each at most once per period, all within the rate
// budget) and the receiver's train dispersion.
#include "controller/probes.h"

#include <gtest/gtest.h>

#include <vector>

namespace sg::controller {
namespace {

TEST(ProbeScheduler, OnlyIdleLinksWithinTheBudget) {
  ProbeSettings s;
  s.rate_bytes_per_s = 100e3;  // 100 kB/s for the whole site
  s.packet_bytes = 1000;
  s.train_packets = 10;        // 10 kB a train
  s.idle_after = 500 * kMilli;
  s.min_period = 1 * kSecond;
  ProbeScheduler p(4, 0, s);
  std::vector<uint64_t> sent(4, 0);
  std::vector<int> trains(4, 0);
  std::vector<Nanos> last(4, -1);
  const Nanos step = 1 * kMilli, end = 20 * kSecond;
  for (Nanos t = 0; t <= end; t += step) {
    sent[1] += 1000;  // link 0 -> 1 carries job traffic all the time
    for (const ProbeOrder& o : p.due(t, sent)) {
      ASSERT_NE(o.to, 0) << "never itself";
      ASSERT_NE(o.to, 1) << "a busy link needs no probe";
      EXPECT_EQ(o.packets, 10);
      if (last[o.to] >= 0) {
        EXPECT_GE(t - last[o.to], s.min_period);
      }
      last[o.to] = t;
      ++trains[o.to];
    }
  }
  EXPECT_GT(trains[2], 5);
  EXPECT_GT(trains[3], 5);
  // The budget: at most one train up front plus the rate over the time.
  EXPECT_LE(static_cast<double>(p.probe_bytes()), 10e3 + s.rate_bytes_per_s * seconds(end));
  EXPECT_EQ(p.probe_bytes(), p.trains() * 10000u);
}

TEST(ProbeScheduler, ATightBudgetSpacesTrainsOut) {
  ProbeSettings s;
  s.rate_bytes_per_s = 1000;  // one 10 kB train every 10 s
  s.packet_bytes = 1000;
  s.train_packets = 10;
  s.min_period = 0;
  s.idle_after = 0;
  ProbeScheduler p(3, 1, s);
  std::vector<uint64_t> sent(3, 0);
  for (Nanos t = 0; t <= 60 * kSecond; t += 100 * kMilli) p.due(t, sent);
  EXPECT_GE(p.trains(), 6u);
  EXPECT_LE(p.trains(), 7u);
}

TEST(ProbeScheduler, ZeroRateProbesNothing) {
  ProbeSettings s;
  s.rate_bytes_per_s = 0;
  ProbeScheduler p(3, 0, s);
  std::vector<uint64_t> sent(3, 0);
  for (Nanos t = 0; t < 10 * kSecond; t += 10 * kMilli) EXPECT_TRUE(p.due(t, sent).empty());
}

TEST(ProbeReceiver, DispersionOfACompleteTrain) {
  ProbeReceiver r(3);
  ProbeResult out;
  // 8 packets of 1000 B spaced 10 us: the path carried 1000 B per 10 us = 100 MB/s.
  for (uint16_t k = 0; k < 7; ++k) EXPECT_FALSE(r.on_packet(2, 5, k, 8, 1000, 1000 + k * 10 * kMicro, out));
  ASSERT_TRUE(r.on_packet(2, 5, 7, 8, 1000, 1000 + 7 * 10 * kMicro, out));
  EXPECT_EQ(out.from, 2);
  EXPECT_EQ(out.bytes, 4000u) << "the second half: packets 4-7 after the 4th";
  EXPECT_EQ(out.spread, 40 * kMicro);
  EXPECT_NEAR(out.bytes / seconds(out.spread), 100e6, 1);
}

TEST(ProbeReceiver, ATrainWhoseStartWasReadInOneBatchStillMeasuresTheLink) {
  // The receiving engine slept: packets 0-2 were read together at 20 us, the rest as they
  // came, every 10 us. Measured over the whole train the link would look 40% faster.
  ProbeReceiver r(2);
  ProbeResult out;
  for (uint16_t k = 0; k < 3; ++k) r.on_packet(1, 1, k, 8, 1000, 20 * kMicro, out);
  bool done = false;
  for (uint16_t k = 3; k < 8; ++k) done = r.on_packet(1, 1, k, 8, 1000, k * 10 * kMicro, out);
  ASSERT_TRUE(done);
  EXPECT_NEAR(out.bytes / seconds(out.spread), 100e6, 1);
}

TEST(ProbeReceiver, ALossyTrainIsReportedWhenItGoesQuiet) {
  ProbeReceiver r(2, 100 * kMilli);
  ProbeResult out;
  r.on_packet(1, 9, 0, 8, 1000, 0, out);
  r.on_packet(1, 9, 3, 8, 1000, 30 * kMicro, out);
  r.on_packet(1, 9, 5, 8, 1000, 50 * kMicro, out);  // 5 of 8 lost
  EXPECT_TRUE(r.expire(50 * kMilli).empty()) << "not quiet yet";
  auto res = r.expire(200 * kMilli);
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].bytes, 2000u) << "too few for a second half: every packet counts";
  EXPECT_EQ(res[0].spread, 50 * kMicro);
}

TEST(ProbeReceiver, NonsenseIsDroppedAndCounted) {
  ProbeReceiver r(2);
  ProbeResult out;
  EXPECT_FALSE(r.on_packet(5, 1, 0, 8, 1000, 0, out));   // unknown site
  EXPECT_FALSE(r.on_packet(1, 1, 9, 8, 1000, 0, out));   // seq beyond count
  EXPECT_FALSE(r.on_packet(1, 1, 0, 1, 1000, 0, out));   // a train of one
  EXPECT_EQ(r.dropped(), 3u);
  // All arrivals at the same instant: no spread, no rate.
  for (uint16_t k = 0; k < 4; ++k) EXPECT_FALSE(r.on_packet(1, 2, k, 4, 1000, 77, out));
  EXPECT_EQ(r.dropped(), 4u);
}

}  // namespace
}  // namespace sg::controller
