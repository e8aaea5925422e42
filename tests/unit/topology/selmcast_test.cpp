#include "topology/selmcast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace sg::topo {
namespace {

McastInstance uniform_instance(int n, double bw, double budget) {
  McastInstance in;
  in.n = n;
  in.bw.assign(n * n, bw);
  in.rtt.assign(n * n, 0.02);
  in.out_cap.assign(n, 1e12);
  in.in_cap.assign(n, 1e12);
  in.ready.assign(n, 0.0);
  in.update_bytes = 10e6;
  in.budget_s = budget;
  return in;
}

TEST(SelMcast, EverySenderGetsExactlyPDistinctReceivers) {
  McastInstance in = uniform_instance(10, 100e6, 1.0);
  Rng rng(1);
  for (const Selection& sel : {select_receivers(in, {3}), random_receivers(in, {3}, rng)})
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ(sel[i].size(), 3u);
      std::set<int> s(sel[i].begin(), sel[i].end());
      EXPECT_EQ(s.size(), 3u);
      EXPECT_FALSE(s.count(i));
    }
}

TEST(SelMcast, AvoidsSlowLinksAndOverloadedReceivers) {
  // Links into site 0 are slow; site 1's downlink is tiny. 10 MB in 1 s needs >= ~10 MB/s.
  McastInstance in = uniform_instance(6, 100e6, 1.0);
  for (int i = 0; i < 6; ++i) in.bw[i * 6 + 0] = 1e6;
  in.in_cap[1] = 12e6;  // one transfer fits, two do not
  const McastParams prm{3, SyncMode::kBsp, 0};
  const Selection sel = select_receivers(in, prm);
  const McastScore s = score_selection(in, prm, sel);
  // Site 0 is never reachable and site 1 by one sender only, but sites 2..5 leave every
  // sender 3 reachable receivers: a global choice reaches all of them.
  EXPECT_DOUBLE_EQ(s.mean_p, 3.0);
  int into1 = 0;
  for (int i = 0; i < 6; ++i)
    for (int j : sel[i]) into1 += j == 1;
  EXPECT_LE(into1, 1);
  Rng rng(4);
  double rnd = 0;
  for (int k = 0; k < 50; ++k) rnd += score_selection(in, prm, random_receivers(in, prm, rng)).mean_p / 50;
  EXPECT_GT(s.mean_p, rnd);
}

TEST(SelMcast, SspToleratesStragglersButNotSlowLinks) {
  McastInstance in = uniform_instance(4, 100e6, 1.0);
  in.ready[2] = 1.5;  // straggler: late by half a round
  const McastParams bsp{3, SyncMode::kBsp, 0}, ssp{3, SyncMode::kSsp, 1};
  const Selection all = {{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}};
  EXPECT_DOUBLE_EQ(score_selection(in, bsp, all).mean_p, 9.0 / 4);  // the straggler misses
  EXPECT_DOUBLE_EQ(score_selection(in, ssp, all).mean_p, 3.0);
  // A link too slow to carry one update per round never counts, however stale we allow.
  in.bw[0 * 4 + 1] = 5e6;
  const McastParams ssp5{3, SyncMode::kSsp, 5};
  EXPECT_DOUBLE_EQ(score_selection(in, ssp5, all).mean_p, 11.0 / 4);
}

TEST(SelMcast, RoundTimeIsTheLastSelectedFinish) {
  McastInstance in = uniform_instance(3, 100e6, 1.0);
  const Selection sel = {{1}, {2}, {0}};
  EXPECT_NEAR(score_selection(in, {1}, sel).round_time_s, 0.01 + 10e6 / 100e6, 1e-12);
}

// "More where bandwidth allows": extras beyond p only where they cost no predicted time.
TEST(SelMcast, ExtrasGoWhereTheyCostNoRoundTime) {
  // Sites 0-3 have fat uplinks, 4-7 thin ones: only the fat senders can afford more receivers.
  McastInstance in = uniform_instance(8, 100e6, 1e9);
  for (int i = 4; i < 8; ++i) in.out_cap[i] = 20e6;
  McastParams p_only{2, SyncMode::kBsp, 0};
  McastParams extras = p_only;
  extras.max_receivers = 7;
  const Selection a = select_receivers(in, p_only), b = select_receivers(in, extras);
  const double ta = score_selection(in, p_only, a).round_time_s, tb = score_selection(in, extras, b).round_time_s;
  EXPECT_LE(tb, ta * (1 + 1e-9)) << "extras never lengthen the predicted round";
  size_t fat = 0, thin = 0;
  for (int i = 0; i < 8; ++i) {
    EXPECT_GE(b[i].size(), 2u);
    std::set<int> s(b[i].begin(), b[i].end());
    EXPECT_EQ(s.size(), b[i].size());
    EXPECT_FALSE(s.count(i));
    (i < 4 ? fat : thin) += b[i].size();
  }
  EXPECT_GT(fat, 8u) << "fat senders got extras";
  EXPECT_EQ(thin, 8u) << "thin senders keep exactly p";
}

// Load-aware: a straggler's late update sets the round; the others' links carry extra
// receivers in that time, where a load-blind view sees no room for them.
TEST(SelMcast, AStragglersLoadLeavesRoomForExtras) {
  McastInstance in = uniform_instance(6, 100e6, 1e9);
  for (int i = 0; i < 6; ++i) in.out_cap[i] = in.in_cap[i] = 100e6;  // 10 MB: 0.1 s alone
  McastParams prm{1, SyncMode::kBsp, 0};
  prm.max_receivers = 5;
  const Selection blind = select_receivers(in, prm);
  McastInstance loaded = in;
  loaded.ready[3] = 1.0;  // site 3's update is ready 1 s into the round
  const Selection aware = select_receivers(loaded, prm);
  const McastScore sb = score_selection(loaded, prm, blind), sa = score_selection(loaded, prm, aware);
  EXPECT_GE(sa.round_time_s, 1.0) << "the round waits for the straggler's update";
  EXPECT_LE(sa.round_time_s, sb.round_time_s * (1 + 1e-9));
  EXPECT_GT(sa.mean_p, sb.mean_p * 1.5) << "the idle time carries more receivers";
}

}  // namespace
}  // namespace sg::topo
