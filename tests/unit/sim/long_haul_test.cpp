// One transfer on a long fat pipe (1 Gbit/s, 150 ms RTT, a shallow buffer and 0.01% random
// loss, as on real long-haul paths): LTP's delivery-rate controller fills it by itself, the
// TCP-like AIMD baseline on the same sender/receiver does not.
#include <gtest/gtest.h>

#include "sim/single_transfer.h"

namespace sg::sim {
namespace {

LinkSpec long_haul(double loss) {
  LinkSpec l;
  l.bytes_per_s = 125e6;  // 1 Gbit/s
  l.delay = 75 * kMilli;  // 150 ms RTT
  l.queue_bytes = 4u << 20;  // ~0.2 BDP
  l.loss = loss;
  return l;
}

TEST(LongHaul, LtpFillsOneGigabitAt150msWhereAimdDoesNot) {
  const uint64_t bytes = 1000ull << 20;  // 1 GB: ~8 s at line rate
  const LinkSpec fwd = long_haul(1e-4), rev = long_haul(0);
  const auto ltp = run_single_transfer(fwd, rev, bytes, 8000, /*reliable=*/false, 11);
  const auto tcp = run_single_transfer(fwd, rev, bytes, 8000, /*reliable=*/true, 11);
  ASSERT_TRUE(ltp.ok);
  ASSERT_TRUE(tcp.ok);
  // Including startup and the final round trip, LTP averages > 80% of the link.
  EXPECT_GT(ltp.utilisation, 0.8) << ltp.seconds << " s";
  EXPECT_LE(ltp.utilisation, 1.0);
  EXPECT_LT(tcp.utilisation, 0.5) << tcp.seconds << " s, " << tcp.retransmits << " retransmits";
  EXPECT_GT(ltp.goodput_Bps, 2 * tcp.goodput_Bps);
}

TEST(LongHaul, WithoutLossAndADeepBufferAimdEventuallyFillsToo) {
  // The baseline is not crippled: on a clean path with a BDP of buffer it reaches the rate.
  LinkSpec clean = long_haul(0);
  clean.queue_bytes = 20u << 20;
  const auto tcp = run_single_transfer(clean, clean, 2000ull << 20, 8000, true, 3);
  ASSERT_TRUE(tcp.ok);
  EXPECT_GT(tcp.utilisation, 0.6);
}

}  // namespace
}  // namespace sg::sim
