// The anti-replay window: fresh, duplicate and too-old numbers against a reference model.
#include "crypto/replay_window.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace sg::crypto {
namespace {

TEST(ReplayWindow, AcceptsOnceAndInAnyOrderWithinTheWindow) {
  ReplayWindow w(1024);
  EXPECT_EQ(w.window(), 960u);
  for (uint64_t s : {5u, 3u, 9u, 4u}) {
    ASSERT_EQ(w.check(s), ReplayVerdict::kFresh);
    w.accept(s);
  }
  for (uint64_t s : {5u, 3u, 9u, 4u}) EXPECT_EQ(w.check(s), ReplayVerdict::kDuplicate);
  EXPECT_EQ(w.check(6), ReplayVerdict::kFresh);
  EXPECT_EQ(w.check(0), ReplayVerdict::kFresh);
}

TEST(ReplayWindow, TooOldBehindTheWindowAndClearedAfterAJump) {
  ReplayWindow w(128);
  w.accept(10);
  w.accept(10 + 1000);
  EXPECT_EQ(w.check(10), ReplayVerdict::kTooOld);
  EXPECT_EQ(w.check(1010 - 63), ReplayVerdict::kFresh) << "the jump cleared the old bits";
  EXPECT_EQ(w.check(1010 - 64), ReplayVerdict::kTooOld);
  EXPECT_EQ(w.check(1010), ReplayVerdict::kDuplicate);
}

TEST(ReplayWindow, RoundsItsSizeUp) {
  EXPECT_EQ(ReplayWindow(1).window(), 64u);
  EXPECT_EQ(ReplayWindow(5000).window(), 8192u - 64);
}

TEST(ReplayWindow, AgreesWithAReferenceModelOnRandomReorderingAndDuplicates) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    ReplayWindow w(256);
    std::set<uint64_t> seen;
    uint64_t top = 0;
    bool any = false;
    for (int i = 0; i < 20000; ++i) {
      // Mostly advancing, often behind by up to 300 (some beyond the window), some repeats.
      uint64_t s = top + (rng() % 8);
      if (rng() % 3 == 0 && top > 300) s = top - rng() % 300;
      const ReplayVerdict v = w.check(s);
      ReplayVerdict want;
      if (!any || s > top) want = ReplayVerdict::kFresh;
      else if (top - s >= w.window()) want = ReplayVerdict::kTooOld;
      else want = seen.count(s) ? ReplayVerdict::kDuplicate : ReplayVerdict::kFresh;
      ASSERT_EQ(v, want) << "seed " << seed << " step " << i << " seq " << s << " top " << top;
      if (v == ReplayVerdict::kFresh) {
        w.accept(s);
        seen.insert(s);
        if (!any || s > top) top = s;
        any = true;
      }
    }
  }
}

}  // namespace
}  // namespace sg::crypto
