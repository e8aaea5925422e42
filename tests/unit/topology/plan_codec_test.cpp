#include "topology/plan_codec.h"

#include <gtest/gtest.h>

#include "topology/fapt.h"

namespace sg::topo {
namespace {

Plan sample_plan() {
  Plan p = plan_from_trees(4, 1 << 20, {{Parents{kNoSite, 0, 0, 1}, 0, 1.0}, {Parents{2, 2, kNoSite, 2}, 2, 2.0}}, 4);
  p.splits.push_back({0, 1, 40000, {{2, 20000}, {3, 5535}}});
  p.splits.push_back({3, 1, 1, {{0, 1}}});
  p.codecs.push_back({1, 0, CodecId::kInt8});
  p.codecs.push_back({2, 3, CodecId::kTopK});
  return p;
}

bool same(const Plan& a, const Plan& b) {
  if (!same_trees(a, b) || a.splits.size() != b.splits.size() || a.codecs.size() != b.codecs.size() ||
      a.receivers != b.receivers)
    return false;
  for (size_t i = 0; i < a.splits.size(); ++i) {
    const LinkSplit &x = a.splits[i], &y = b.splits[i];
    if (x.from != y.from || x.to != y.to || x.direct_weight != y.direct_weight || x.relays.size() != y.relays.size())
      return false;
    for (size_t k = 0; k < x.relays.size(); ++k)
      if (x.relays[k].via != y.relays[k].via || x.relays[k].weight != y.relays[k].weight) return false;
  }
  for (size_t i = 0; i < a.codecs.size(); ++i)
    if (a.codecs[i].from != b.codecs[i].from || a.codecs[i].to != b.codecs[i].to || a.codecs[i].codec != b.codecs[i].codec)
      return false;
  return true;
}

// The operator's one-line view names sites by id, every shard's root and parents, the
// splits and the codecs, and caps the shards it lists.
TEST(Plan, DescribeNamesSitesByIdAndCapsTheShards) {
  const Plan p = sample_plan();
  const std::string d = describe(p, {11, 12, 13, 14});
  EXPECT_EQ(d.substr(0, d.find(';')), "root=11 bytes=" + std::to_string(p.shards[0].bytes()) + " parents=-,11,11,12");
  EXPECT_NE(d.find("root=13 bytes=" + std::to_string(p.shards[1].bytes()) + " parents=13,13,-,13"), std::string::npos);
  EXPECT_NE(d.find("split 11>12 direct:40000 via 13:20000 via 14:5535"), std::string::npos);
  EXPECT_NE(d.find("12>11:int8"), std::string::npos);
  EXPECT_NE(d.find("13>14:" + std::string(codec_name(CodecId::kTopK))), std::string::npos);
  const std::string one = describe(p, {11, 12, 13, 14}, 1);
  EXPECT_EQ(one.find("root=13"), std::string::npos);
  EXPECT_NE(one.find("(+1 more)"), std::string::npos);
  // Too few ids (never for a validated plan and its config): marked, not read out of bounds.
  EXPECT_NE(describe(p, {11}).find("?1"), std::string::npos);
  EXPECT_EQ(describe_shard(p.shards[0], {11}), "root=11 bytes=" + std::to_string(p.shards[0].bytes()) + " parents=-,11,11,?1");
}

// A codec-only switch keeps the sites' transfer state (SiteSync::set_plan): only trees count.
TEST(Plan, SameTreesIgnoresCodecsAndSplitsOnly) {
  const Plan a = sample_plan();
  Plan b = a;
  b.codecs.clear();
  b.splits.clear();
  EXPECT_TRUE(same_trees(a, b));
  b = a;
  b.shards[0].parent[3] = 0;
  EXPECT_FALSE(same_trees(a, b));
  b = a;
  b.shards[0].byte_end -= 4;
  b.shards[1].byte_begin -= 4;
  EXPECT_FALSE(same_trees(a, b));
  b = a;
  b.shards.pop_back();
  EXPECT_FALSE(same_trees(a, b));
}

TEST(PlanCodec, RoundTripsAndSizeIsExact) {
  const Plan p = sample_plan();
  ASSERT_EQ(validate(p), PlanError::kOk);
  std::vector<uint8_t> bytes;
  ASSERT_EQ(encode(p, bytes), PlanError::kOk);
  EXPECT_EQ(bytes.size(), encoded_size(p));
  Plan back;
  ASSERT_EQ(decode(bytes, back), PlanError::kOk);
  EXPECT_TRUE(same(p, back));
  EXPECT_EQ(back.codec_for(1, 0), CodecId::kInt8);
  EXPECT_EQ(back.codec_for(0, 1), CodecId::kF32);  // unlisted links are uncompressed
}

TEST(PlanCodec, MulticastReceiversRoundTripAndAreChecked) {
  Plan p = sample_plan();
  p.receivers = {{1, 2}, {2}, {0, 1, 3}, {0}};
  std::vector<uint8_t> bytes;
  ASSERT_EQ(encode(p, bytes), PlanError::kOk);
  EXPECT_EQ(bytes.size(), encoded_size(p));
  Plan back;
  ASSERT_EQ(decode(bytes, back), PlanError::kOk);
  EXPECT_EQ(back.receivers, p.receivers);
  for (size_t len = 0; len < bytes.size(); ++len)
    EXPECT_EQ(decode(std::span(bytes.data(), len), back), PlanError::kTruncated) << len;
  // The last list names its own site (3): refused on decode.
  bytes.back() = 3;
  EXPECT_EQ(decode(bytes, back), PlanError::kBadReceivers);
  for (auto bad : std::vector<std::vector<std::vector<SiteId>>>{{{1}, {0}}, {{0}, {0}, {0}, {0}}, {{1, 1}, {0}, {0}, {0}},
                                                                 {{4}, {0}, {0}, {0}}}) {
    p.receivers = bad;
    EXPECT_EQ(validate(p), PlanError::kBadReceivers);
  }
}

TEST(PlanCodec, EveryTruncationIsReportedAsTruncated) {
  std::vector<uint8_t> bytes;
  ASSERT_EQ(encode(sample_plan(), bytes), PlanError::kOk);
  for (size_t len = 0; len < bytes.size(); ++len) {
    Plan out;
    EXPECT_EQ(decode(std::span(bytes.data(), len), out), PlanError::kTruncated) << len;
  }
}

TEST(PlanCodec, HeaderErrorsAreTyped) {
  std::vector<uint8_t> good;
  ASSERT_EQ(encode(sample_plan(), good), PlanError::kOk);
  Plan out;
  auto b = good;
  b[0] = 'X';
  EXPECT_EQ(decode(b, out), PlanError::kBadMagic);
  b = good;
  b[4] = kPlanFormat + 1;  // format version
  EXPECT_EQ(decode(b, out), PlanError::kBadVersion);
  b = good;
  b.push_back(0);
  EXPECT_EQ(decode(b, out), PlanError::kTrailingBytes);
  b = good;
  b[6] = b[7] = 0;  // zero sites
  EXPECT_EQ(decode(b, out), PlanError::kBadSiteCount);
  b = good;
  b[16] = b[17] = 0;  // zero shards
  EXPECT_EQ(decode(b, out), PlanError::kBadShardCount);
}

TEST(PlanCodec, SemanticErrorsAreTyped) {
  Plan out;
  std::vector<uint8_t> b;
  auto enc_raw = [&](Plan p) {
    // Encode a plan that validate() would refuse by encoding a valid one and patching it.
    b.clear();
    EXPECT_EQ(encode(p, b), PlanError::kOk);
  };
  const size_t shard0 = kPlanHeaderBytes;  // root u16 | end u64 | parents
  // A cycle: site 1's parent becomes 3 while 3's parent is 1.
  enc_raw(sample_plan());
  b[shard0 + 10 + 2 * 1 + 1] = 3;
  EXPECT_EQ(decode(b, out), PlanError::kBadTree);
  // Shard end beyond the model.
  enc_raw(sample_plan());
  b[shard0 + 2] = 0xFF;
  EXPECT_EQ(decode(b, out), PlanError::kBadShardRange);
  // Relay on an endpoint: first split 0->1 relays via 1.
  enc_raw(sample_plan());
  const size_t split0 = kPlanHeaderBytes + 2 * (10 + 2 * 4);
  b[split0 + 7 + 1] = 1;
  EXPECT_EQ(decode(b, out), PlanError::kBadSplit);
  // Unknown codec id on the last entry (before the empty receivers count).
  enc_raw(sample_plan());
  b[b.size() - 3] = 99;
  EXPECT_EQ(decode(b, out), PlanError::kBadCodec);
  // Too many relays in the count byte.
  enc_raw(sample_plan());
  b[split0 + 6] = kMaxRelays + 1;
  EXPECT_EQ(decode(b, out), PlanError::kBadSplit);
}

TEST(PlanCodec, EncodeRefusesInvalidPlans) {
  Plan p = sample_plan();
  p.splits.push_back(p.splits[0]);  // duplicate link
  std::vector<uint8_t> b;
  EXPECT_EQ(encode(p, b), PlanError::kBadSplit);
  EXPECT_TRUE(b.empty());
  p = sample_plan();
  p.codecs.push_back({1, 1, CodecId::kF16});
  EXPECT_EQ(encode(p, b), PlanError::kBadCodec);
}

TEST(PlanCodec, SixtyFourSitePlanIsCompact) {
  Plan p = plan_from_trees(64, 100 << 20, {}, 4);
  std::vector<WeightedTree> t;
  for (int s = 0; s < 8; ++s) t.push_back({star_tree(64, s), s, 1.0});
  p = plan_from_trees(64, 100 << 20, t, 4);
  std::vector<uint8_t> b;
  ASSERT_EQ(encode(p, b), PlanError::kOk);
  EXPECT_LE(b.size(), 1200u);  // fits one jumbo CONTROL message
}

}  // namespace
}  // namespace sg::topo
