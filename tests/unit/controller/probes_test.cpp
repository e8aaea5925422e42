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

// The receivers below time trains of tens of microseconds: their stamps are exact (a NIC's
// arrival timestamps), so their resolution is 5 us.
constexpr Nanos kExact = 5 * kMicro;

TEST(ProbeReceiver, DispersionOfACompleteTrain) {
  ProbeReceiver r(3, kExact);
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
  ProbeReceiver r(2, kExact);
  ProbeResult out;
  for (uint16_t k = 0; k < 3; ++k) r.on_packet(1, 1, k, 8, 1000, 20 * kMicro, out);
  bool done = false;
  for (uint16_t k = 3; k < 8; ++k) done = r.on_packet(1, 1, k, 8, 1000, k * 10 * kMicro, out);
  ASSERT_TRUE(done);
  EXPECT_NEAR(out.bytes / seconds(out.spread), 100e6, 1);
}

TEST(ProbeReceiver, ATrainReadInBatchesIsALowerBound) {
  // 16 packets on a 100 MB/s link (10 us apart), but the reader slept: it read them in two
  // bursts, each packet stamped with its burst's time. Timed, the second half would read
  // 8000 B in 0 s (or, with the split at its middle, in whatever the sleep lasted). All it
  // says: 15000 B took at most the 80 us between the reads plus the reader's noise (1 ms).
  ProbeReceiver r(2, kMilli);
  ProbeResult out;
  bool done = false;
  for (uint16_t k = 0; k < 16; ++k) done = r.on_packet(1, 3, k, 16, 1000, (k < 10 ? 90 : 170) * kMicro, out);
  ASSERT_TRUE(done);
  EXPECT_TRUE(out.bound);
  EXPECT_EQ(out.bytes, 15000u);
  EXPECT_EQ(out.spread, 80 * kMicro + kMilli);
  EXPECT_LT(out.bytes / seconds(out.spread), 1e8) << "no more than the link";
  EXPECT_EQ(r.bounds(), 1u);
  // Released four at a time (an emulator's quantum, a NIC's interrupt moderation): after the
  // middle, eight packets in two reads. Each read's packets arrived anywhere since the read
  // before, so the spread is known only to within a batch's interval: half the figure.
  ProbeReceiver exact(2, kExact);
  for (uint16_t k = 0; k < 16; ++k) done = exact.on_packet(1, 4, k, 16, 1000, kMilli + (k / 4) * 40 * kMicro, out);
  ASSERT_TRUE(done);
  EXPECT_TRUE(out.bound);
  EXPECT_EQ(exact.bounds(), 1u);
  // Pairs read together (a fast link, a reader polling about once per packet) still time it.
  for (uint16_t k = 0; k < 16; ++k) done = exact.on_packet(1, 5, k, 16, 1000, 2 * kMilli + (k / 2) * 20 * kMicro, out);
  ASSERT_TRUE(done);
  EXPECT_FALSE(out.bound);
  EXPECT_EQ(exact.bounds(), 1u);
  EXPECT_EQ(out.bytes, 8000u) << "packets 8-15, read after the middle packet's read";
  EXPECT_NEAR(out.bytes / seconds(out.spread), 100e6, 1);
  EXPECT_EQ(r.dropped() + exact.dropped(), 0u);
}

TEST(ProbeReceiver, ATrainQuickerThanTheResolutionIsALowerBound) {
  // 70 us of dispersion against a millisecond of timing noise (a reader's idle sleep, the
  // path's jitter): the figure could be anything above 8 MB/s, so that is all it says.
  ProbeReceiver r(2, kMilli);
  ProbeResult out;
  bool done = false;
  for (uint16_t k = 0; k < 8; ++k) done = r.on_packet(1, 6, k, 8, 1000, k * 10 * kMicro, out);
  ASSERT_TRUE(done);
  EXPECT_TRUE(out.bound);
  EXPECT_EQ(out.bytes, 7000u);
  EXPECT_EQ(out.spread, 70 * kMicro + kMilli);
  // The same train on a 1 MB/s link (1 ms apart) outlasts the noise and is timed.
  for (uint16_t k = 0; k < 8; ++k) done = r.on_packet(1, 7, k, 8, 1000, k * kMilli, out);
  ASSERT_TRUE(done);
  EXPECT_FALSE(out.bound);
  EXPECT_NEAR(out.bytes / seconds(out.spread), 1e6, 1);
  EXPECT_EQ(r.bounds(), 1u);
}

TEST(ProbeReceiver, ALossyTrainIsReportedWhenItGoesQuiet) {
  ProbeReceiver r(2, kExact, 100 * kMilli);
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
  ProbeReceiver r(2, kExact);
  ProbeResult out;
  EXPECT_FALSE(r.on_packet(5, 1, 0, 8, 1000, 0, out));   // unknown site
  EXPECT_FALSE(r.on_packet(1, 1, 9, 8, 1000, 0, out));   // seq beyond count
  EXPECT_FALSE(r.on_packet(1, 1, 0, 1, 1000, 0, out));   // a train of one
  EXPECT_FALSE(r.on_packet(1, 1, 0, 65, 1000, 0, out));  // longer than any train
  EXPECT_EQ(r.dropped(), 4u);
  // All arrivals read at one instant: no spread, only a bound (3000 B within the resolution).
  bool done = false;
  for (uint16_t k = 0; k < 4; ++k) done = r.on_packet(1, 2, k, 4, 1000, 77, out);
  ASSERT_TRUE(done);
  EXPECT_TRUE(out.bound);
  EXPECT_EQ(out.spread, kExact);
  EXPECT_EQ(r.dropped(), 4u);
  EXPECT_EQ(r.bounds(), 1u);
}

}  // namespace
}  // namespace sg::controller
