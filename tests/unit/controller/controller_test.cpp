// The controller with a fake clock: replan triggers and hysteresis, the configured planner on
// every replan, NetSenseML's codec choice, uplinks inferred from rows.
#include "controller/controller.h"
#include "controller/control_plane.h"

#include <gtest/gtest.h>

#include "topology/round_time.h"

namespace sg::controller {
namespace {

constexpr int kSites = 4;
constexpr double kGbit = 125e6;

ControllerConfig config(config::Planner planner = config::Planner::kFapt) {
  ControllerConfig c;
  c.sites = kSites;
  c.self = 0;
  c.plan.planner = planner;
  c.plan.model_bytes = 64ull << 20;
  c.plan.chunk_bytes = 1344;
  c.plan.shards = 4;
  c.plan.spread_to = 4;
  c.plan.multipath = false;
  c.recompute_change = 0.2;
  c.min_interval = 1 * kSecond;
  c.compression.mode = config::CompressionMode::kOff;
  return c;
}

// A row from `site`: every link into it at `rate` (bytes/s) except the ones in `slow`.
wire::MeasureRow row(int site, double rate, std::vector<std::pair<int, double>> slow = {}, double trend = 1.0) {
  wire::MeasureRow r;
  r.site = static_cast<uint16_t>(site);
  for (int k = 0; k < kSites; ++k) {
    if (k == site) continue;
    wire::LinkMeasure l;
    l.from = static_cast<uint16_t>(k);
    l.source = static_cast<uint8_t>(measure::Source::kTraffic);
    l.bytes_per_s = rate;
    for (auto [s, v] : slow)
      if (s == k) l.bytes_per_s = v;
    l.rtt_s = 0.02;
    l.rtt_trend = trend;
    r.links.push_back(l);
  }
  return r;
}

// Every link into site 0 crawls at a hundredth of the others' rate: trees through it are slow.
const std::vector<std::pair<int, double>> kInto0Crawls = {{1, kGbit / 100}, {2, kGbit / 100}, {3, kGbit / 100}};

void feed_all(Controller& c, double rate, Nanos now, std::vector<std::pair<int, double>> slow_into_0 = {}) {
  c.on_row(row(0, rate, slow_into_0), now);
  for (int s = 1; s < kSites; ++s) c.on_row(row(s, rate), now);
}

TEST(Controller, NothingToDecideBeforeEverySiteReported) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  ASSERT_FALSE(first.shards.empty());
  c.on_row(row(1, kGbit), 0);  // one site: 3 links known, fewer than the sites
  EXPECT_FALSE(c.decide(first, 0));
}

TEST(Controller, SameNetworkAsPlannedMeansNoNewPolicy) {
  // The first plan assumed links alike; measured links alike (at any rate) change nothing.
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  feed_all(c, 3 * kGbit, 10 * kSecond);
  EXPECT_FALSE(c.decide(first, 10 * kSecond));
  EXPECT_EQ(c.stats().replans_considered, 1u);
  EXPECT_LE(c.stats().last_gain, 0.2);
}

TEST(Controller, AMuchSlowerLinkTriggersAReplanThatAvoidsIt) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  // Trees through site 0 are slow now.
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto next = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(next);
  EXPECT_GT(c.stats().last_gain, 0.2);
  const topo::Network net = c.view();
  EXPECT_LT(topo::round_time(net, *next, 1344).total_s, topo::round_time(net, first, 1344).total_s / 1.2);
  EXPECT_EQ(next->shards.size(), 4u) << "spread to topology.shards";
}

// The round-time model picks plans from the view; the rounds say whether they were right.
// New trees that run slower than the ones before (median of 5 rounds, the switch round left
// out) are undone, and no new trees are proposed for regret_hold, even though the view still
// prefers them.
void time_rounds(Controller& c, const topo::Plan& p, double secs, int n) {
  for (int i = 0; i < n; ++i) c.on_round_done(p, static_cast<Nanos>(secs * kSecond));
}

TEST(Controller, NewTreesThatMeasureSlowerAreUndoneThenHeldOff) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  time_rounds(c, first, 1.0, 8);
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto next = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(next);
  ASSERT_NE(trees_signature(*next), trees_signature(first));
  time_rounds(c, *next, 1.5, 3);
  feed_all(c, kGbit, 11 * kSecond, kInto0Crawls);
  EXPECT_FALSE(c.decide(*next, 11 * kSecond)) << "three rounds are too few to judge";
  time_rounds(c, *next, 1.5, 4);
  feed_all(c, kGbit, 12 * kSecond, kInto0Crawls);
  auto back = c.decide(*next, 12 * kSecond);
  ASSERT_TRUE(back);
  EXPECT_EQ(trees_signature(*back), trees_signature(first));
  EXPECT_EQ(c.stats().regrets, 1u);
  time_rounds(c, first, 1.0, 8);
  feed_all(c, kGbit, 20 * kSecond, kInto0Crawls);
  EXPECT_FALSE(c.decide(first, 20 * kSecond)) << "held off for regret_hold (30 s)";
  feed_all(c, kGbit, 50 * kSecond, kInto0Crawls);
  auto again = c.decide(first, 50 * kSecond);
  feed_all(c, kGbit, 51 * kSecond, kInto0Crawls);
  if (!again) again = c.decide(first, 51 * kSecond);  // confirm_decisions: twice in a row
  ASSERT_TRUE(again) << "after the hold the view may try them again";
  EXPECT_EQ(trees_signature(*again), trees_signature(*next));
}

// Every switch is judged before the next, whether or not the trees before it were timed: the
// bandwidth-blind plan ran two rounds when the first measured trees replaced it, and the
// trees after those must still wait for them to be timed, and be judged against them.
TEST(Controller, NoNewTreesUntilTheTreesInForceWereTimed) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  time_rounds(c, first, 1.0, 2);
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto a = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(a) << "the first measured trees do not wait";
  time_rounds(c, *a, 0.5, 3);  // the switch round and two more
  // The view changes its mind: site 1 now crawls instead of site 0.
  auto feed_slow1 = [&](Nanos now) {
    for (int s = 0; s < kSites; ++s) {
      wire::MeasureRow r = row(s, kGbit);
      if (s == 1)
        for (auto& l : r.links) l.bytes_per_s = kGbit / 100;
      c.on_row(r, now);
    }
  };
  for (int k = 0; k < 3; ++k) {  // confirm_decisions would be met by the second
    feed_slow1((11 + k) * kSecond);
    EXPECT_FALSE(c.decide(*a, (11 + k) * kSecond)) << "the trees in force ran two rounds: not judged yet";
  }
  std::optional<topo::Plan> b;
  time_rounds(c, *a, 0.5, 6);
  for (int k = 0; k < 3 && !b; ++k) {
    feed_slow1((14 + k) * kSecond);
    b = c.decide(*a, (14 + k) * kSecond);
  }
  ASSERT_TRUE(b) << "timed: new trees may follow";
  ASSERT_NE(trees_signature(*b), trees_signature(*a));
  time_rounds(c, *b, 1.0, 8);  // twice as slow as the trees before
  feed_all(c, kGbit, 20 * kSecond);
  auto back = c.decide(*b, 20 * kSecond);
  ASSERT_TRUE(back) << "judged against the timed trees before it";
  EXPECT_EQ(trees_signature(*back), trees_signature(*a));
  EXPECT_EQ(c.stats().regrets, 1u);
}

// The first switch is judged too: the bandwidth-blind plan ran four rounds (two of them
// timed) when the first view replaced it; trees that then measure twice as slow are undone.
TEST(Controller, AFirstSwitchToSlowerTreesIsUndoneAgainstTheBlindPlansFewRounds) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  time_rounds(c, first, 0.5, 4);  // the switch-in and the first round are not timed
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto a = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(a) << "the first measured trees do not wait";
  ASSERT_NE(trees_signature(*a), trees_signature(first));
  time_rounds(c, *a, 1.0, 7);
  feed_all(c, kGbit, 12 * kSecond, kInto0Crawls);
  auto back = c.decide(*a, 12 * kSecond);
  ASSERT_TRUE(back) << "judged against the blind plan's two timed rounds";
  EXPECT_EQ(trees_signature(*back), trees_signature(first));
  EXPECT_EQ(c.stats().regrets, 1u);
}

// One timed round of the blind plan is no reference: the first trees stay, however they time.
TEST(Controller, ABlindPlanTimedOnceJudgesNothing) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  time_rounds(c, first, 0.5, 3);
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto a = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(a);
  time_rounds(c, *a, 1.0, 7);
  feed_all(c, kGbit, 12 * kSecond, kInto0Crawls);
  EXPECT_FALSE(c.decide(*a, 12 * kSecond));
  EXPECT_EQ(c.stats().regrets, 0u);
}

// Each regret doubles the hold, up to regret_hold_max: a view that was wrong seven times must
// still get its chance within minutes once the links change.
TEST(Controller, RegretHoldDoublesUpToItsCap) {
  ControllerConfig cfg = config();
  cfg.regret_hold = 30 * kSecond;
  cfg.regret_hold_max = 120 * kSecond;
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  Nanos t = 10 * kSecond;
  time_rounds(c, first, 1.0, 8);
  const Nanos expected[] = {30 * kSecond, 60 * kSecond, 120 * kSecond, 120 * kSecond, 120 * kSecond};
  for (const Nanos hold : expected) {
    std::optional<topo::Plan> next;
    for (int k = 0; k < 3 && !next; ++k, t += kSecond) {  // confirm_decisions: twice in a row
      feed_all(c, kGbit, t, kInto0Crawls);
      next = c.decide(first, t);
    }
    ASSERT_TRUE(next) << "after the hold the view may try its trees again";
    ASSERT_NE(trees_signature(*next), trees_signature(first));
    time_rounds(c, *next, 1.5, 8);
    feed_all(c, kGbit, t, kInto0Crawls);
    auto back = c.decide(*next, t);
    ASSERT_TRUE(back);
    ASSERT_EQ(trees_signature(*back), trees_signature(first));
    EXPECT_EQ(c.stats().regret_hold, hold);
    time_rounds(c, first, 1.0, 8);
    t += kSecond;
    feed_all(c, kGbit, t, kInto0Crawls);
    EXPECT_FALSE(c.decide(first, t)) << "held off";
    t += hold;
  }
  EXPECT_EQ(c.stats().regrets, 5u);
}

TEST(Controller, NewTreesThatMeasureFasterStay) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  time_rounds(c, first, 1.0, 8);
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto next = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(next);
  time_rounds(c, *next, 0.8, 8);
  feed_all(c, kGbit, 12 * kSecond, kInto0Crawls);
  EXPECT_FALSE(c.decide(*next, 12 * kSecond));
  EXPECT_EQ(c.stats().regrets, 0u);
}

// sync.mode selmcast: the plan carries receivers; a slow link out of site 1 makes the
// controller move site 1's update off it, and random / broadcast never change.
TEST(Controller, SelmcastReceiversAvoidASlowLinkAndBaselinesStayPut) {
  ControllerConfig cfg = config();
  cfg.sync.mode = config::SyncMode::kSelmcast;
  cfg.sync.p = 1;
  cfg.uplinks.assign(kSites, kGbit);  // known uplinks: extra receivers share them
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  ASSERT_EQ(first.receivers.size(), static_cast<size_t>(kSites));
  EXPECT_EQ(topo::validate(first), topo::PlanError::kOk);
  for (const auto& l : first.receivers) EXPECT_GE(l.size(), 1u);
  // Every link is fast except those out of site 1 to everybody but site 3.
  for (int s = 0; s < kSites; ++s) c.on_row(row(s, kGbit, s == 3 ? std::vector<std::pair<int, double>>{} : std::vector<std::pair<int, double>>{{1, kGbit / 100}}), 10 * kSecond);
  std::optional<topo::Plan> next;
  for (int k = 0; k < 3 && !next; ++k) {
    for (int s = 0; s < kSites; ++s) c.on_row(row(s, kGbit, s == 3 ? std::vector<std::pair<int, double>>{} : std::vector<std::pair<int, double>>{{1, kGbit / 100}}), (10 + 2 * k) * kSecond);
    next = c.decide(first, (10 + 2 * k) * kSecond);
  }
  ASSERT_NE(first.receivers[1], std::vector<topo::SiteId>{3}) << "blind, site 1 picks the lowest index";
  ASSERT_TRUE(next) << "a selection that avoids the slow links predicts a much shorter round";
  EXPECT_EQ(next->receivers[1], std::vector<topo::SiteId>{3});
  EXPECT_EQ(next->shards.size(), first.shards.size()) << "the trees stay as they were";
  for (auto choice : {config::ReceiverChoice::kRandom, config::ReceiverChoice::kBroadcast}) {
    cfg.sync.receivers = choice;
    Controller b(cfg);
    const topo::Plan f = b.initial_plan();
    EXPECT_EQ(f.receivers, Controller(cfg).initial_plan().receivers) << "every site computes the same";
    for (const auto& l : f.receivers) EXPECT_EQ(l.size(), choice == config::ReceiverChoice::kRandom ? 1u : kSites - 1u);
    for (int k = 0; k < 3; ++k) {
      for (int s = 0; s < kSites; ++s) b.on_row(row(s, kGbit, {{1, kGbit / 100}}), (10 + 2 * k) * kSecond);
      EXPECT_FALSE(b.decide(f, (10 + 2 * k) * kSecond));
    }
  }
}

// Receiver load: a straggler's update lag (from its rows) sets everyone's round, so the other
// sites' links have time for more receivers; the controller proposes them.
TEST(Controller, SelmcastGivesAStragglersIdleTimeToExtraReceivers) {
  ControllerConfig cfg = config();
  cfg.sync.mode = config::SyncMode::kSelmcast;
  cfg.sync.p = 1;
  cfg.uplinks.assign(kSites, kGbit);
  Controller c(cfg);
  topo::Plan cur = c.initial_plan();
  auto total = [](const topo::Plan& p) {
    size_t n = 0;
    for (const auto& l : p.receivers) n += l.size();
    return n;
  };
  Nanos now = 10 * kSecond;
  auto feed = [&](double lag_of_2) {
    for (int s = 0; s < kSites; ++s) {
      wire::MeasureRow r = row(s, kGbit);
      r.update_lag_s = s == 2 ? lag_of_2 : 0.01;
      c.on_row(r, now);
    }
  };
  // Equal loads: settle on what the measured view gives (64 MB over 1 Gbit/s: 0.5 s each).
  for (int k = 0; k < 4; ++k, now += 2 * kSecond) {
    feed(0.01);
    if (auto next = c.decide(cur, now)) cur = *next;
  }
  const size_t before = total(cur);
  std::optional<topo::Plan> next;
  for (int k = 0; k < 4 && !next; ++k, now += 2 * kSecond) {
    feed(5.0);  // site 2's workers take 5 s per update
    next = c.decide(cur, now);
  }
  ASSERT_TRUE(next) << "the straggler's round leaves room for more receivers";
  EXPECT_GT(total(*next), before);
  for (const auto& l : next->receivers) EXPECT_GE(l.size(), 1u);
  EXPECT_EQ(topo::validate(*next), topo::PlanError::kOk);
  ReceiverSettings rs;
  rs.p = 1;
  rs.update_bytes = static_cast<double>(cfg.plan.model_bytes);
  rs.ready = {0.01, 0.01, 5.0, 0.01};
  const topo::Network net = c.view();
  EXPECT_LE(receivers_score(net, rs, next->receivers).round_time_s,
            receivers_score(net, rs, cur.receivers).round_time_s * 1.02)
      << "no longer a round than before";
  // Without the lag in the rows (not measured), nothing changes.
  Controller blind(cfg);
  for (int k = 0; k < 4; ++k, now += 2 * kSecond) {
    for (int s = 0; s < kSites; ++s) blind.on_row(row(s, kGbit), now);
    if (auto n = blind.decide(cur, now)) {
      EXPECT_LE(total(*n), before);
    }
  }
}

TEST(Controller, MinIntervalAndFreshRowsGateDecisions) {
  Controller c(config());
  const topo::Plan first = c.initial_plan();
  feed_all(c, kGbit, 10 * kSecond, kInto0Crawls);
  auto next = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(next);
  c.on_proposed(10 * kSecond);
  // No new rows: nothing new to decide on.
  EXPECT_FALSE(c.decide(first, 20 * kSecond));
  // New rows, but within min_interval of the proposal: wait.
  feed_all(c, kGbit, 10 * kSecond + 500 * kMilli, kInto0Crawls);
  EXPECT_FALSE(c.decide(first, 10 * kSecond + 500 * kMilli));
  // After it, the same evidence proposes again (against a plan that did not change).
  EXPECT_TRUE(c.decide(first, 11 * kSecond + 1));
}

// A gateway alone (its workers, no peers) still runs its job: the one-site plan, spread over
// the configured shards so several engines can share it, whatever the planner.
TEST(Controller, OneSiteDeploymentGetsTheOneSitePlan) {
  for (config::Planner p : {config::Planner::kFapt, config::Planner::kStar, config::Planner::kBlindTree,
                            config::Planner::kNetStormRule}) {
    ControllerConfig cfg = config(p);
    cfg.sites = 1;
    std::string err;
    const topo::Plan plan = Controller(cfg).initial_plan(&err);
    ASSERT_EQ(plan.shards.size(), 4u) << planner_name(p) << ": " << err;
    EXPECT_EQ(topo::validate(plan), topo::PlanError::kOk);
    EXPECT_EQ(plan.num_sites, 1);
    EXPECT_EQ(plan.shards.front().byte_begin, 0u);
    EXPECT_EQ(plan.shards.back().byte_end, cfg.plan.model_bytes);
    for (const auto& t : plan.shards) {
      EXPECT_EQ(t.root, 0);
    }
  }
}

TEST(Controller, ConfiguredPlannerHoldsOnEveryReplan) {
  for (config::Planner p : {config::Planner::kStar, config::Planner::kBlindTree, config::Planner::kNetStormRule}) {
    ControllerConfig cfg = config(p);
    cfg.recompute_change = -1;  // any candidate is proposed: we look at what it is
    Controller c(cfg);
    const topo::Plan first = c.initial_plan();
    feed_all(c, kGbit, 10 * kSecond, {{2, kGbit / 50}});
    auto next = c.decide(first, 10 * kSecond);
    ASSERT_TRUE(next) << planner_name(p);
    PlanSettings ps = cfg.plan;
    const topo::Plan expect = build_plan(c.view(), ps);
    ASSERT_EQ(next->shards.size(), expect.shards.size()) << planner_name(p);
    for (size_t s = 0; s < expect.shards.size(); ++s) {
      EXPECT_EQ(next->shards[s].root, expect.shards[s].root) << planner_name(p);
      EXPECT_EQ(next->shards[s].parent, expect.shards[s].parent) << planner_name(p);
    }
    if (p == config::Planner::kStar) {
      for (const auto& t : next->shards)
        for (int v = 0; v < kSites; ++v)
          if (v != t.root) {
            EXPECT_EQ(t.parent[v], t.root) << "a star has every site under the root";
          }
    }
  }
}

TEST(Controller, AdaptiveCompressionPicksACodecForACongestedSlowLink) {
  ControllerConfig cfg = config();
  cfg.compression.mode = config::CompressionMode::kAdaptive;
  cfg.compression.codec = CodecId::kInt8;
  cfg.compression.compute_ms_per_round = 100;
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  // Every link carries its shard in ~2 s against 100 ms of compute, and RTTs are rising
  // (queues): communication is the bottleneck. Rows twice, so the rule sees a peak first.
  for (int k = 0; k < 2; ++k) {
    for (int s = 0; s < kSites; ++s) c.on_row(row(s, 10e6, {}, 2.0), (10 + k) * kSecond);
    if (auto next = c.decide(first, (10 + k) * kSecond)) {
      ASSERT_FALSE(next->codecs.empty());
      for (const auto& lc : next->codecs) EXPECT_NE(lc.codec, CodecId::kF32);
      EXPECT_EQ(c.stats().codec_proposals, 1u) << "same trees: a codec-only proposal";
      return;
    }
  }
  FAIL() << "no codec chosen for a congested link 20x slower than compute";
}

// Going back after a regret returns to the trees before, not to the codecs of their time: the
// plan recorded when those trees came into force had no compression yet, and returning it
// whole dropped every link's codec while the links were still congested.
TEST(Controller, GoingBackKeepsTheCodecsTheLinksNeedNow) {
  ControllerConfig cfg = config();
  cfg.compression.mode = config::CompressionMode::kAdaptive;
  cfg.compression.codec = CodecId::kInt8;
  cfg.compression.compute_ms_per_round = 100;
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  ASSERT_TRUE(first.codecs.empty());
  time_rounds(c, first, 1.0, 8);
  // Congested links (RTTs rising), every one far slower than the compute; into site 0 slower
  // still, so new trees are proposed too.
  auto rows = [&](Nanos at) {
    c.on_row(row(0, 10e6, {{1, 1e6}, {2, 1e6}, {3, 1e6}}, 2.0), at);
    for (int s = 1; s < kSites; ++s) c.on_row(row(s, 10e6, {}, 2.0), at);
  };
  rows(10 * kSecond);
  auto next = c.decide(first, 10 * kSecond);
  ASSERT_TRUE(next);
  ASSERT_NE(trees_signature(*next), trees_signature(first));
  time_rounds(c, *next, 1.5, 7);  // slower than the trees before: a regret
  rows(12 * kSecond);
  auto back = c.decide(*next, 12 * kSecond);
  ASSERT_TRUE(back);
  ASSERT_EQ(c.stats().regrets, 1u);
  EXPECT_EQ(trees_signature(*back), trees_signature(first));
  EXPECT_FALSE(back->codecs.empty()) << "the congested links stay compressed on the trees gone back to";
  for (const auto& lc : back->codecs) EXPECT_NE(lc.codec, CodecId::kF32);
  EXPECT_EQ(topo::validate(*back), topo::PlanError::kOk);
}

TEST(Controller, NoCompressionWithoutComputeTime) {
  ControllerConfig cfg = config();
  cfg.compression.mode = config::CompressionMode::kAdaptive;
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  for (int k = 0; k < 3; ++k) {
    for (int s = 0; s < kSites; ++s) c.on_row(row(s, 10e6, {}, 2.0), (10 + k) * kSecond);
    EXPECT_FALSE(c.decide(first, (10 + k) * kSecond)) << "unknown compute time: full precision stays";
  }
}

// Adaptive int8 with compute_ms_per_round unset: up to `decisions` rounds of rows from
// `make(site)`, one decision after each; the first plan proposed, if any.
template <class MakeRow>
std::optional<topo::Plan> adaptive_int8_proposal(int decisions, MakeRow make) {
  ControllerConfig cfg = config();
  cfg.compression.mode = config::CompressionMode::kAdaptive;
  cfg.compression.codec = CodecId::kInt8;
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  std::optional<topo::Plan> next;
  for (int k = 0; k < decisions && !next; ++k) {
    for (int s = 0; s < kSites; ++s) c.on_row(make(s), (10 + k) * kSecond);
    next = c.decide(first, (10 + k) * kSecond);
  }
  return next;
}

// compute_ms_per_round unset: the sites' measured update lag is the compute time. Clean links
// (no queueing, no loss) whose transfers take far longer than the lag are the bottleneck.
TEST(Controller, MeasuredUpdateLagStandsInForAnUnsetComputeTime) {
  for (const double lag_s : {0.1, 1000.0}) {
    const std::optional<topo::Plan> next = adaptive_int8_proposal(3, [&](int s) {
      wire::MeasureRow r = row(s, 10e6);
      r.update_lag_s = s == 2 ? lag_s : lag_s / 10;  // the slowest site's lag counts
      return r;
    });
    if (lag_s < 1) {
      // 16 MB shards over 10 MB/s: seconds against 0.1 s of compute.
      ASSERT_TRUE(next) << "no codec for links 16x slower than the measured compute";
      ASSERT_FALSE(next->codecs.empty());
      for (const auto& lc : next->codecs) EXPECT_EQ(lc.codec, CodecId::kInt8);
    } else {
      EXPECT_FALSE(next && !next->codecs.empty()) << "transfers hidden behind 1000 s of compute: full precision";
    }
  }
}

// The same lag and the same clean links, told apart by how the workers hand their update
// over: during backward (the transfer runs behind most of the compute) the links fit and stay
// at full precision; all at once (nothing hides the transfer) the links set every step's
// length and are compressed. An unmeasured overlap counts as the whole lag.
TEST(Controller, WorkersThatHandTheirUpdateOverAtOnceGetCompressedLinks) {
  for (const double overlap : {0.9, -1.0, 0.0}) {
    const std::optional<topo::Plan> next = adaptive_int8_proposal(4, [&](int s) {
      wire::MeasureRow r = row(s, 6e6);  // a 16 MB shard takes 2.8 s on a link
      r.update_lag_s = 4.0;
      r.overlap = overlap;
      return r;
    });
    if (overlap != 0.0) {
      EXPECT_FALSE(next && !next->codecs.empty()) << "overlap " << overlap << ": transfers fit behind the compute";
    } else {
      ASSERT_TRUE(next) << "no overlap: transfers of 2.8 s against the 1 s that hides them";
      ASSERT_FALSE(next->codecs.empty());
      for (const auto& lc : next->codecs) EXPECT_EQ(lc.codec, CodecId::kInt8);
    }
  }
}

TEST(Controller, AlwaysCompressesFromTheFirstPlan) {
  ControllerConfig cfg = config();
  cfg.compression.mode = config::CompressionMode::kAlways;
  cfg.compression.codec = CodecId::kBf16;
  const topo::Plan first = Controller(cfg).initial_plan();
  ASSERT_FALSE(first.codecs.empty());
  for (const auto& lc : first.codecs) EXPECT_EQ(lc.codec, CodecId::kBf16);
}

TEST(Controller, UplinkInferredWhenLinksTogetherExceedWhatTheSiteEverSent) {
  Controller c(config());
  // Site 2's three links each measure 300 Mbit/s, 900 together, but it never sent more than
  // 400 Mbit/s at once: they share a 400 Mbit/s uplink.
  for (int s = 0; s < kSites; ++s) {
    wire::MeasureRow r = row(s, s == 2 ? kGbit : 0.3 * kGbit);
    if (s == 2) r.egress_peak = 0.4 * kGbit;
    c.on_row(r, 0);
  }
  EXPECT_DOUBLE_EQ(c.uplink(2), 0.4 * kGbit);
  EXPECT_EQ(c.uplink(1), 0.0) << "no peak reported: nothing inferred";
  EXPECT_NEAR(c.view().egress_cap(2), 0.4 * kGbit, 1);
  // A configured uplink wins over any inference.
  ControllerConfig cfg = config();
  cfg.uplinks = {0, 0, 2 * kGbit, 0};
  Controller d(cfg);
  wire::MeasureRow r = row(2, kGbit);
  r.egress_peak = 0.4 * kGbit;
  d.on_row(r, 0);
  EXPECT_DOUBLE_EQ(d.uplink(2), 2 * kGbit);
}

// A peak below what one of the site's links carried alone is not the uplink's limit (the
// uplink carried that link's traffic): the site simply had less to send when it sent to
// several peers. Inferring from it capped a hub's fast links at a fraction of their rate.
TEST(Controller, NoUplinkInferredFromAPeakBelowOneLinksRate) {
  Controller c(config());
  for (int s = 0; s < kSites; ++s) {
    wire::MeasureRow r = row(s, s == 2 ? 0.5 * kGbit : 0.3 * kGbit);
    if (s == 2) r.egress_peak = 0.2 * kGbit;
    c.on_row(r, 0);
  }
  // Row s holds the links k -> s: site 2's outgoing links (300 Mbit/s each) are in the other
  // sites' rows, 900 together against a 200 Mbit/s peak.
  EXPECT_EQ(c.uplink(2), 0.0) << "one link from site 2 carried 300 Mbit/s: a 200 Mbit/s peak is no cap";
  EXPECT_EQ(c.view().egress_cap(2), 0.0);
}

TEST(Controller, RowsFromUnknownSitesAreRefused) {
  Controller c(config());
  wire::MeasureRow r = row(1, kGbit);
  r.site = kSites;
  c.on_row(r, 0);
  EXPECT_EQ(c.stats().rows, 0u);
  EXPECT_EQ(c.stats().rows_refused, 1u);
}

TEST(Controller, TrafficThroughASaturatedUplinkIsAShareNotTheLinksRate) {
  ControllerConfig cfg = config();
  cfg.uplinks = {100e6, 1000e6, 1000e6, 1000e6};
  Controller c(cfg);
  auto report = [&](int site, std::vector<std::pair<int, std::pair<double, double>>> links, double trend = 1.0) {
    wire::MeasureRow r;
    r.site = static_cast<uint16_t>(site);
    for (auto [from, tp] : links) {
      wire::LinkMeasure l;
      l.from = static_cast<uint16_t>(from);
      l.rtt_trend = from == 1 ? trend : 1.0;
      l.source = static_cast<uint8_t>(tp.first > 0 ? measure::Source::kTraffic : measure::Source::kProbe);
      l.bytes_per_s = tp.first > 0 ? tp.first : tp.second;
      l.probe_bytes_per_s = tp.second;
      l.windows = tp.first > 0 ? 3 : 0;  // carrying traffic now
      r.links.push_back(l);
    }
    c.on_row(r, 0);
  };
  // Site 0 sends to 1 and 2 at 50 MB/s each: its 100 MB/s uplink is full, so those are
  // shares; the links alone probed at 200 MB/s.
  report(1, {{0, {50e6, 200e6}}});
  // Site 1 sends to 2 at 50 MB/s with a 1 GB/s uplink to spare and no queue building: the
  // job offered no more (the probe stands) ...
  report(2, {{0, {50e6, 200e6}}, {1, {50e6, 200e6}}});
  topo::Network v = c.view();
  EXPECT_DOUBLE_EQ(v.link_bw(0, 1), 200e6);
  EXPECT_DOUBLE_EQ(v.link_bw(0, 2), 200e6);
  EXPECT_DOUBLE_EQ(v.link_bw(1, 2), 200e6);
  EXPECT_DOUBLE_EQ(v.egress_cap(0), 100e6) << "the uplink itself is modelled";
  // ... but with its RTT rising the link itself slowed down, whatever the older probe said.
  report(2, {{0, {50e6, 200e6}}, {1, {50e6, 200e6}}}, 1.6);
  v = c.view();
  EXPECT_DOUBLE_EQ(v.link_bw(1, 2), 50e6);
}

TEST(Controller, MakeRowCarriesTheEstimateAndTheLatestProbe) {
  measure::EstimatorConfig ec;
  ec.sites = 3;
  measure::LinkEstimator est(ec);
  est.set_prior(1, 0, 50e6);
  // A probe of link 1 -> 0 at 100 MB/s; no traffic on it.
  est.on_probe_pair(1, 0, 100000, 1 * kMilli, 5 * kSecond);
  const wire::MeasureRow r = make_row(est, 3, 0, 7, 1e6, 5 * kSecond);
  ASSERT_EQ(r.links.size(), 2u);
  EXPECT_EQ(r.round, 7u);
  EXPECT_EQ(r.links[0].from, 1);
  EXPECT_NEAR(r.links[0].bytes_per_s, 100e6, 1);
  EXPECT_NEAR(r.links[0].probe_bytes_per_s, 100e6, 1);
  EXPECT_EQ(r.links[0].source, static_cast<uint8_t>(measure::Source::kProbe));
  EXPECT_EQ(r.links[1].source, static_cast<uint8_t>(measure::Source::kNone));
}

TEST(EgressMeter, PeakOfBusyWindowsOnly) {
  EgressMeter m(100 * kMilli);
  uint64_t sent = 0;
  Nanos t = 0;
  for (int i = 0; i < 50; ++i) {  // 1 MB per 10 ms = 100 MB/s for half a second
    sent += 1000000;
    t += 10 * kMilli;
    m.on_total(sent, t);
  }
  for (int i = 0; i < 100; ++i) m.on_total(sent, t += 10 * kMilli);  // idle for a second
  EXPECT_NEAR(m.peak(), 100e6, 1e6);
}

// Given the bytes per peer, only windows in which several links carried a real part count:
// a site that sends to one peer at a time shows nothing about a shared uplink, so its links'
// summed rates (measured one after the other) must not make one up.
// Feeds an EgressMeter a site's cumulative bytes to 3 peers, one call per `tick`.
struct EgressFeed {
  EgressMeter& m;
  Nanos tick;
  std::vector<uint64_t> to = std::vector<uint64_t>(3, 0);
  uint64_t sent = 0;
  Nanos t = 0;
  // `n` ticks, each sending `per_tick[j]` bytes to peer j.
  void run(const std::vector<uint64_t>& per_tick, int n) {
    for (int i = 0; i < n; ++i) {
      for (size_t j = 0; j < to.size(); ++j) {
        to[j] += per_tick[j];
        sent += per_tick[j];
      }
      m.on_total(sent, t += tick, to);
    }
  }
};

TEST(EgressMeter, PeakCountsOnlyWindowsThatSeveralLinksShared) {
  EgressMeter m(100 * kMilli);
  EgressFeed f{m, 10 * kMilli};
  auto run = [&](const std::vector<uint64_t>& per10ms, int n) { f.run(per10ms, n); };
  run({0, 1000000, 0}, 30);  // 100 MB/s to peer 1 alone
  run({0, 0, 1000000}, 30);  // then to peer 2 alone
  run({0, 1000000, 20000}, 30);  // with a trickle to peer 2: not a shared window either
  EXPECT_EQ(m.peak(), 0.0);
  Controller c(config());
  for (int s = 0; s < kSites; ++s) {
    wire::MeasureRow r = row(s, kGbit);
    if (s == 2) r.egress_peak = m.peak();
    c.on_row(r, 0);
  }
  EXPECT_EQ(c.uplink(2), 0.0) << "no shared window: nothing inferred";
  run({0, 600000, 400000}, 30);  // both at once: 100 MB/s together
  EXPECT_NEAR(m.peak(), 100e6, 1e6);
}

// A round's burst to several peers is often shorter than a window: it counts when it ends,
// so the peak is what the site sent at once, not the pace of the slow trickles that alone
// filled whole windows.
TEST(EgressMeter, ShortSharedBurstsCountWhenTheyEnd) {
  EgressMeter m(200 * kMilli);
  EgressFeed f{m, kMilli};
  auto run = [&](const std::vector<uint64_t>& per_ms, int n) { f.run(per_ms, n); };
  for (int round = 0; round < 3; ++round) {
    run({0, 2000, 2000}, 300);     // results trickling to both at 4 MB/s for 300 ms
    run({0, 0, 0}, 5);             // idle
    run({0, 40000, 20000}, 40);    // a 40 ms burst at 60 MB/s to both
    run({0, 0, 0}, 5);
  }
  EXPECT_NEAR(m.peak(), 60e6, 3e6);
  EgressMeter tiny(200 * kMilli);
  EgressFeed g{tiny, kMilli};
  for (int i = 0; i < 10; ++i) {  // bursts of 5 ms say too little to count
    g.run({0, 50000, 50000}, 5);
    g.run({0, 0, 0}, 1);
  }
  EXPECT_EQ(tiny.peak(), 0.0);
}

}  // namespace
}  // namespace sg::controller

namespace sg::controller {
namespace {

TEST(GatewayConfigToController, EveryControllerKeyIsCarriedOver) {
  config::GatewayConfig g;
  g.site.id = 20;
  g.site.uplink_mbit = 400;
  config::PeerConfig a, b;
  a.id = 7;
  a.uplink_mbit = 80;
  b.id = 30;
  g.peers = {a, b};
  g.job.id = 9;
  g.job.model_bytes = 1 << 20;
  g.transport.chunk_bytes = 1024;
  g.topology.planner = config::Planner::kNetStormRule;
  g.topology.shards = 6;
  g.topology.multipath = false;
  g.topology.recompute_change = 0.35;
  g.topology.min_interval_ms = 2500;
  g.topology.probes = true;
  g.topology.probe_rate_kbit = 800;
  g.control.interval_ms = 40;
  g.control.switch_rounds_ahead = 5;
  g.compression.mode = config::CompressionMode::kAlways;
  g.compression.codec = CodecId::kInt8;
  const ControlPlaneConfig c = control_plane_config(g);
  EXPECT_EQ(c.nodes, (std::vector<uint16_t>{7, 20, 30})) << "plan order: sorted site ids";
  EXPECT_EQ(c.controller.sites, 3);
  EXPECT_EQ(c.controller.self, 1);
  EXPECT_EQ(c.controller.coordinator, 0) << "the lowest site id plans";
  EXPECT_EQ(c.job, 9u);
  EXPECT_EQ(c.switch_rounds_ahead, 5u);
  EXPECT_TRUE(c.probes);
  EXPECT_DOUBLE_EQ(c.probe.rate_bytes_per_s, 100e3);
  EXPECT_EQ(c.probe.packet_bytes, 1024u);
  EXPECT_EQ(c.controller.plan.planner, config::Planner::kNetStormRule);
  EXPECT_EQ(c.controller.plan.shards, 6);
  EXPECT_EQ(c.controller.plan.spread_to, 6);
  EXPECT_FALSE(c.controller.plan.multipath);
  EXPECT_EQ(c.controller.plan.model_bytes, 1u << 20);
  EXPECT_EQ(c.controller.plan.chunk_bytes, 1024u);
  EXPECT_DOUBLE_EQ(c.controller.recompute_change, 0.35);
  EXPECT_EQ(c.controller.min_interval, 2500 * kMilli);
  EXPECT_EQ(c.controller.decide_every, 40 * kMilli);
  EXPECT_EQ(c.controller.compression.mode, config::CompressionMode::kAlways);
  EXPECT_EQ(c.controller.uplinks, (std::vector<double>{10e6, 50e6, 0}));
}

TEST(Controller, PlanningTickSpacesDecisions) {
  ControllerConfig cfg = config();
  cfg.recompute_change = -1;  // every decision proposes
  cfg.min_interval = 0;
  cfg.decide_every = 100 * kMilli;
  Controller c(cfg);
  const topo::Plan first = c.initial_plan();
  feed_all(c, kGbit, 0);
  EXPECT_TRUE(c.decide(first, 1 * kSecond));
  feed_all(c, kGbit, 0);
  EXPECT_FALSE(c.decide(first, 1 * kSecond + 50 * kMilli)) << "within the planning tick";
  EXPECT_TRUE(c.decide(first, 1 * kSecond + 100 * kMilli));
}

}  // namespace
}  // namespace sg::controller
