// LinkCodecs: NetSenseML's rule per link, and the round's slowest link compressed along with
// the others once the rule compresses any (a round waits for its slowest link).
#include <gtest/gtest.h>

#include "controller/link_codecs.h"

namespace sg::controller {
namespace {

constexpr uint64_t kModel = 1'000'000;  // every tree link below carries the whole model
constexpr int kCompute = 100;           // ms per round

// Three sites, one shard rooted at site 0: links 1->0, 2->0 up and 0->1, 0->2 down.
topo::Plan star() {
  topo::Plan p;
  p.num_sites = 3;
  p.model_bytes = kModel;
  p.shards.push_back({0, 0, kModel, {topo::kNoSite, 0, 0}});
  return p;
}

config::CompressionConfig adaptive_int8() {
  config::CompressionConfig c;
  c.mode = config::CompressionMode::kAdaptive;
  c.codec = CodecId::kInt8;
  c.compute_ms_per_round = kCompute;
  return c;
}

// A link whose full-precision transfer takes `exposure` times the compute.
LinkView link(double exposure, double loss = 0) {
  return {static_cast<double>(kModel) / (exposure * kCompute / 1000.0) / (1.0 - loss), 1.0, loss};
}

std::vector<LinkView> views(LinkView up1, LinkView up2) {
  std::vector<LinkView> v(9, link(0.5));  // down links: fast and clear
  v[1 * 3 + 0] = up1;
  v[2 * 3 + 0] = up2;
  return v;
}

CodecId codec_of(const std::vector<topo::LinkCodec>& cs, int from, int to) {
  for (const auto& c : cs)
    if (c.from == from && c.to == to) return c.codec;
  return CodecId::kF32;
}

TEST(LinkCodecs, ClearLinksSlowerThanComputeStayAtFullPrecision) {
  LinkCodecs lc(adaptive_int8(), 3);
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(lc.decide(star(), views(link(1.4), link(1.4))).empty())
        << "no congestion and under bottleneck_exposure: NetSenseML keeps f32";
}

TEST(LinkCodecs, TheRoundsSlowestLinkIsCompressedWithTheCongestedOne) {
  LinkCodecs lc(adaptive_int8(), 3);
  // 1->0 congested (2% loss) at 3x the compute: int8 (need(3 x up_margin) = 4x). 2->0 clear at
  // 1.4x: the rule alone keeps it at f32, where it would set the round (1.4 > 3 / 4).
  const auto v = views(link(3.0, 0.02), link(1.4));
  const auto first = lc.decide(star(), v);
  EXPECT_EQ(codec_of(first, 1, 0), CodecId::kInt8);
  EXPECT_EQ(codec_of(first, 2, 0), CodecId::kBf16) << "1.4 / 2 = 0.7 fits behind the compute";
  EXPECT_EQ(codec_of(first, 0, 1), CodecId::kF32);
  EXPECT_EQ(codec_of(first, 0, 2), CodecId::kF32);
  EXPECT_EQ(first.size(), 2u);
  for (int i = 0; i < 10; ++i)  // past hold_rounds: the rule's wish to go down is overruled, no flapping
    EXPECT_TRUE(same_codecs(lc.decide(star(), v), first)) << "decision " << i;
}

TEST(LinkCodecs, StopsAtTheTopWhenTheSlowestLinkCannotBeCompressedFurther) {
  LinkCodecs lc(adaptive_int8(), 3);
  // 1->0 at 8x: int8 leaves it at 2x the compute, the round's slowest. 2->0 at 1.5x clear
  // is then not the slowest (1.5 < 2): left at f32, since compressing it shortens nothing.
  const auto cs = lc.decide(star(), views(link(8.0, 0.02), link(1.5)));
  EXPECT_EQ(codec_of(cs, 1, 0), CodecId::kInt8);
  EXPECT_EQ(codec_of(cs, 2, 0), CodecId::kF32);
}

TEST(LinkCodecs, BackToFullPrecisionOnceTheCongestionClears) {
  LinkCodecs lc(adaptive_int8(), 3);
  const auto congested = views(link(3.0, 0.02), link(1.4));
  for (int i = 0; i < 5; ++i) lc.decide(star(), congested);
  const auto cleared = views(link(0.5), link(1.4));
  const int hold = compress::AdaptiveConfig{}.hold_rounds;
  bool back = false;
  for (int i = 0; i < 2 * hold + 1 && !back; ++i) back = lc.decide(star(), cleared).empty();
  EXPECT_TRUE(back) << "congested link clear: the straggler goes back to f32 with it";
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(lc.decide(star(), cleared).empty());
}

// What a measured update lag counts for: its overlap, never below a quarter of it; all of it
// where the overlap was not measured; nothing where no lag was.
TEST(LinkCodecs, HideableComputeIsTheOverlappedShareOfTheLag) {
  EXPECT_EQ(hideable_compute(0.4, 0.9), 360 * kMilli);
  EXPECT_EQ(hideable_compute(0.4, 0.0), static_cast<Nanos>(0.4 * kMinHideableShare * kSecond));
  EXPECT_EQ(hideable_compute(0.4, 0.1), static_cast<Nanos>(0.4 * kMinHideableShare * kSecond));
  EXPECT_EQ(hideable_compute(0.4, 1.5), 400 * kMilli);
  EXPECT_EQ(hideable_compute(0.4, -1), 400 * kMilli);
  EXPECT_EQ(hideable_compute(0.0, 0.5), 0);
  EXPECT_EQ(hideable_compute(-1.0, 0.5), 0);
}

}  // namespace
}  // namespace sg::controller
