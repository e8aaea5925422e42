// Measurement rows between gateways: round trip, splitting over messages, and every kind of
// malformed input refused by name.
#include "wire/measure_row.h"

#include <gtest/gtest.h>

#include <cstring>

namespace sg::wire {
namespace {

MeasureRow sample_row(uint16_t site, int links) {
  MeasureRow r;
  r.site = site;
  r.round = 42;
  r.egress_peak = 12.5e6;
  r.update_lag_s = 0.2505;
  r.overlap = 0.6;
  for (int k = 0; k <= links; ++k) {
    if (k == site) continue;
    LinkMeasure l;
    l.from = static_cast<uint16_t>(k);
    l.source = 1;
    l.bytes_per_s = 1e6 * (k + 1);
    l.rtt_s = 0.0125;
    l.rtt_trend = 1.25;
    l.loss = 0.001;
    r.links.push_back(l);
  }
  return r;
}

TEST(MeasureRow, RoundTripInFixedUnits) {
  const MeasureRow r = sample_row(1, 4);
  const auto parts = encode_measure_row(r, 1200);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].size(), sizeof(MeasureRowHeader) + 4 * sizeof(MeasureEntry));
  EXPECT_EQ(parts[0][0], 'M');
  EXPECT_EQ(parts[0][1], 'R');
  auto p = parse_measure_row(parts[0], 5);
  ASSERT_TRUE(p.ok()) << to_string(p.error());
  EXPECT_EQ(p->site, 1);
  EXPECT_EQ(p->round, 42u);
  EXPECT_DOUBLE_EQ(p->egress_peak, 12.5e6);
  EXPECT_NEAR(p->update_lag_s, 0.2505, 1e-6);
  EXPECT_NEAR(p->overlap, 0.6, 0.5 / kOverlapSteps);
  ASSERT_EQ(p->links.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p->links[i].from, r.links[i].from);
    EXPECT_DOUBLE_EQ(p->links[i].bytes_per_s, r.links[i].bytes_per_s);
    EXPECT_NEAR(p->links[i].rtt_s, 0.0125, 1e-6);
    EXPECT_NEAR(p->links[i].rtt_trend, 1.25, 1e-4);
    EXPECT_NEAR(p->links[i].loss, 0.001, 1e-6);
  }
}

TEST(MeasureRow, LongRowsSplitIntoMessagesThatStandAlone) {
  const MeasureRow r = sample_row(0, 120);  // 120 links: more than one message holds
  const auto parts = encode_measure_row(r, 1200);
  ASSERT_GT(parts.size(), 1u);
  size_t links = 0;
  for (const auto& part : parts) {
    EXPECT_LE(part.size(), 1200u);
    auto p = parse_measure_row(part, 121);
    ASSERT_TRUE(p.ok());
    links += p->links.size();
  }
  EXPECT_EQ(links, 120u);
}

TEST(MeasureRow, AnEmptyRowNeedsOnlyTheHeader) {
  MeasureRow r;  // a site that has measured nothing yet still reports its egress peak
  r.site = 1;
  r.egress_peak = 1e6;
  const auto parts = encode_measure_row(r, sizeof(MeasureRowHeader));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].size(), sizeof(MeasureRowHeader));
  EXPECT_TRUE(parse_measure_row(parts[0], 2).ok());
  EXPECT_TRUE(encode_measure_row(r, sizeof(MeasureRowHeader) - 1).empty());
  EXPECT_TRUE(encode_measure_row(sample_row(0, 1), sizeof(MeasureRowHeader) + 1).empty()) << "an entry does not fit";
}

TEST(MeasureRow, ValuesOutsideTheWireRangeAreClamped) {
  MeasureRow r = sample_row(0, 1);
  r.links[0].loss = 7;           // > 1
  r.links[0].bytes_per_s = -5;   // < 0
  r.links[0].rtt_s = -1;         // unknown
  auto p = parse_measure_row(encode_measure_row(r, 1200)[0], 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->links[0].loss, 1.0);
  EXPECT_EQ(p->links[0].bytes_per_s, 0.0);
  EXPECT_LT(p->links[0].rtt_s, 0);
  EXPECT_NEAR(p->update_lag_s, 0.2505, 1e-6);
  r.update_lag_s = -1;  // not measured
  EXPECT_LT(parse_measure_row(encode_measure_row(r, 1200)[0], 2)->update_lag_s, 0);
  r.update_lag_s = 1e7;  // beyond an hour
  EXPECT_NEAR(parse_measure_row(encode_measure_row(r, 1200)[0], 2)->update_lag_s, kMaxLagUs * 1e-6, 1e-6);
  r.overlap = -1;  // not measured
  EXPECT_LT(parse_measure_row(encode_measure_row(r, 1200)[0], 2)->overlap, 0);
  r.overlap = 3;  // more than the whole lag
  EXPECT_EQ(parse_measure_row(encode_measure_row(r, 1200)[0], 2)->overlap, 1.0);
}

TEST(MeasureRow, MalformedRowsAreRefused) {
  const auto good = encode_measure_row(sample_row(1, 3), 1200)[0];
  auto bad = good;
  EXPECT_EQ(parse_measure_row(std::span(good).first(10), 4).error(), WireError::kTruncated);
  bad[0] = 'X';
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadMagic);
  bad = good;
  bad[2] = 9;
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadVersion);
  bad = good;
  bad.push_back(0);
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadLength);
  EXPECT_EQ(parse_measure_row(good, 2).error(), WireError::kBadField) << "site 1 with entries for site 3 of 2";
  bad = good;  // the first entry names the reporting site itself
  bad[sizeof(MeasureRowHeader) + 1] = 1;
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadField);
  bad = good;  // two entries for the same link
  bad[sizeof(MeasureRowHeader) + sizeof(MeasureEntry) + 1] = bad[sizeof(MeasureRowHeader) + 1];
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadField);
  bad = good;  // loss above a million ppm
  std::memset(bad.data() + sizeof(MeasureRowHeader) + offsetof(MeasureEntry, loss_ppm), 0xff, 4);
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadField);
  bad = good;  // an update lag beyond an hour (and not the "unknown" mark)
  std::memset(bad.data() + offsetof(MeasureRowHeader, update_lag_us), 0xf0, 4);
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadField);
  bad = good;  // an overlap above the whole lag (and not the "unknown" mark)
  bad[offsetof(MeasureRowHeader, overlap)] = kOverlapSteps + 1;
  EXPECT_EQ(parse_measure_row(bad, 4).error(), WireError::kBadField);
}

}  // namespace
}  // namespace sg::wire
