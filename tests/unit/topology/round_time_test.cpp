#include "topology/round_time.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "topology/chunk_sim.h"
#include "topology/fapt.h"
#include "topology/multipath.h"
#include "topology/testing/random_net.h"
#include "topology/testing/uplink_nets.h"
#include "topology/trees.h"

namespace sg::topo {
namespace {

constexpr double kChunk = 64 * 1024;

// A random spanning tree per shard (each site, in random order, under an earlier one).
Plan random_plan(int n, uint64_t model, Rng& rng) {
  std::vector<WeightedTree> trees;
  const int shards = 1 + static_cast<int>(rng.below(3));
  for (int s = 0; s < shards; ++s) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    Parents p(n, kNoSite);
    for (int i = 1; i < n; ++i) p[order[i]] = static_cast<SiteId>(order[rng.below(i)]);
    trees.push_back({p, order[0], 0.5 + rng.uniform()});
  }
  return plan_from_trees(n, model, trees, 4);
}

TEST(RoundTime, TwoSitesByHand) {
  // Site 1 sends M up at 100 MB/s, gets it back at 50 MB/s; site 0 adds once at 1 GB/s.
  Network net = Network::uniform(2, 100e6, 0.020, 1e9);
  net.link_bw(0, 1) = 50e6;
  const Plan plan = plan_from_trees(2, 10'000'000, {{star_tree(2, 0), 0, 1.0}}, 4);
  const RoundCost c = round_time(net, plan, kChunk);
  EXPECT_DOUBLE_EQ(c.bottleneck_s, 10e6 / 50e6);
  EXPECT_EQ(c.bottleneck_resource, link_resource(net, 0, 1));
  const double lat = (kChunk / 100e6 + 0.010 + kChunk / 1e9) + (kChunk / 50e6 + 0.010);
  EXPECT_NEAR(c.latency_s, lat, 1e-12);
  EXPECT_NEAR(c.total_s, 0.2 + lat, 1e-12);
}

TEST(RoundTime, SharedLinkAddsShardsTogether) {
  Network net = Network::uniform(3, 100e6, 0.0, 1e12);
  // Two shards on the same chain 2->1->0: link 2->1 carries both halves.
  Parents chain = {kNoSite, 0, 1};
  const Plan plan = plan_from_trees(3, 8'000'000, {{chain, 0, 1.0}, {chain, 0, 1.0}}, 4);
  EXPECT_NEAR(round_time(net, plan, kChunk).bottleneck_s, 8e6 / 100e6, 1e-12);
  // Moving one shard to the reversed chain puts the halves on different links.
  Parents rev = {1, 2, kNoSite};
  const Plan spread = plan_from_trees(3, 8'000'000, {{chain, 0, 1.0}, {rev, 2, 1.0}}, 4);
  EXPECT_NEAR(round_time(net, spread, kChunk).bottleneck_s, 8e6 / 100e6, 1e-12);  // links used in both directions
  const Plan star = plan_from_trees(3, 8'000'000, {{star_tree(3, 0), 0, 1.0}, {star_tree(3, 2), 2, 1.0}}, 4);
  EXPECT_NEAR(round_time(net, star, kChunk).bottleneck_s, 8e6 / 100e6, 1e-12);
}

TEST(RoundTime, AggregationCanBeTheBottleneck) {
  Network net = Network::uniform(5, 1e9, 0.0, 100e6);  // slow adder at every site
  const Plan plan = plan_from_trees(5, 1'000'000, {{star_tree(5, 0), 0, 1.0}}, 4);
  const RoundCost c = round_time(net, plan, kChunk);
  EXPECT_EQ(c.bottleneck_resource, agg_resource(net, 0));
  EXPECT_NEAR(c.bottleneck_s, 4 * 1e6 / 100e6, 1e-12);
}

// Random plans (multipath on every other one) on 48 networks of 2-5 sites from make_net:
// the bottleneck term never exceeds the chunk-level time, and the whole metric stays within
// [lo, hi] of it (relative), with >= 32 chunks in the smallest shard.
template <typename MakeNet>
void expect_metric_near_simulation(const char* label, MakeNet make_net, Rng& rng, double lo_ok, double hi_ok) {
  double lo = 0, hi = 0, sum = 0;
  int cases = 0;
  for (int n = 2; n <= 5; ++n)
    for (int rep = 0; rep < 12; ++rep) {
      const Network net = make_net(n);
      const uint64_t model = 64ull << 20;
      Plan plan = random_plan(n, model, rng);
      if (rep % 2) add_multipath(net, plan, 2, kChunk);
      uint64_t smallest = model;
      for (const ShardTree& s : plan.shards) smallest = std::min(smallest, s.bytes());
      const double chunk = static_cast<double>(smallest) / 32;
      const RoundCost c = round_time(net, plan, chunk);
      const double exact = simulate_round(net, plan, chunk);
      EXPECT_GE(exact, c.bottleneck_s * (1 - 1e-9)) << "n=" << n << " rep=" << rep;
      const double err = (c.total_s - exact) / exact;
      lo = std::min(lo, err);
      hi = std::max(hi, err);
      sum += err;
      EXPECT_GE(err, lo_ok) << "n=" << n << " rep=" << rep << " model=" << c.total_s << " exact=" << exact;
      EXPECT_LE(err, hi_ok) << "n=" << n << " rep=" << rep << " model=" << c.total_s << " exact=" << exact;
      ++cases;
    }
  std::printf("metric vs chunk-level simulation%s: %d cases, error mean %+.3f min %+.3f max %+.3f\n", label, cases,
              sum / cases, lo, hi);
}

// The analytic metric against the chunk-by-chunk event computation. The bottleneck term is
// a lower bound of any schedule. The whole metric may err both ways: below the exact time
// where interleaved shards leave the bottleneck idle for a while (seen -4%), above it where
// the bottleneck sits off the deepest path so part of the fill term overlaps it (seen +21%
// with RTTs up to 150 ms). Asserted with >= 32 chunks per shard: -8%..+25%.
TEST(RoundTime, MatchesChunkLevelSimulationOnSmallCases) {
  Rng rng(7);
  expect_metric_near_simulation("", [&](int n) { return testing::random_net(n, rng); }, rng, -0.08, 0.25);
}

TEST(RoundTimeUplinks, ASitesCapIsSharedByAllItsLinks) {
  // Star at site 0 over fast links: every link carries M once, but site 0 sends M to each
  // of its two children and receives M from each, all through its one uplink.
  Network net = Network::uniform(3, 1e9, 0.0, 1e12);
  const double M = 10e6;
  const Plan plan = plan_from_trees(3, 10'000'000, {{star_tree(3, 0), 0, 1.0}}, 4);
  EXPECT_NEAR(round_time(net, plan, kChunk).bottleneck_s, M / 1e9, 1e-12);
  net.egress = {100e6, 0, 0};
  RoundCost c = round_time(net, plan, kChunk);
  EXPECT_NEAR(c.bottleneck_s, 2 * M / 100e6, 1e-12);
  EXPECT_EQ(c.bottleneck_resource, egress_resource(net, 0));
  // A leaf's uplink carries only its own edge.
  net.egress.clear();
  net.ingress = {0, 0, 100e6};
  c = round_time(net, plan, kChunk);
  EXPECT_NEAR(c.bottleneck_s, M / 100e6, 1e-12);
  EXPECT_EQ(c.bottleneck_resource, ingress_resource(net, 2));
  // The cap also slows a chunk's crossing (the fill term), as a slower link would.
  Network slow = Network::uniform(3, 1e9, 0.0, 1e12);
  slow.link_bw(0, 2) = 100e6;
  EXPECT_NEAR(c.latency_s, round_time(slow, plan, kChunk).latency_s, 1e-15);
}

TEST(RoundTimeUplinks, RelayedBytesLoadTheRelaysUplinkBothWays) {
  // Star at 0; the reduce edge 1->0 is split half direct, half through site 2. Site 2 then
  // sends its own M plus half of site 1's, and receives the result's M plus that half.
  Network net = Network::uniform(3, 1e9, 0.0, 1e12);
  net.set_uplinks({0, 0, 100e6});
  Plan plan = plan_from_trees(3, 10'000'000, {{star_tree(3, 0), 0, 1.0}}, 4);
  plan.splits.push_back({1, 0, 100, {{2, 100}}});
  std::vector<double> load(resource_count(net), 0.0);
  add_tree_load(net, plan.shards[0].parent, 10e6, &plan, load);
  EXPECT_NEAR(load[egress_resource(net, 2)], 1.5 * 10e6 / 100e6, 1e-12);
  EXPECT_NEAR(load[ingress_resource(net, 2)], 1.5 * 10e6 / 100e6, 1e-12);
  EXPECT_EQ(round_time(net, plan, kChunk).bottleneck_resource, egress_resource(net, 2));
}

TEST(RoundTimeUplinks, TimeGrowsOnlyOnceACapFallsBelowTheSitesLoad) {
  Rng rng(21);
  for (int rep = 0; rep < 20; ++rep) {
    const int n = 3 + static_cast<int>(rng.below(6));
    Network net = testing::random_net(n, rng);
    Plan plan = random_plan(n, 64ull << 20, rng);
    if (rep % 2) add_multipath(net, plan, 2, kChunk);
    const RoundCost base = round_time(net, plan, kChunk);
    const int v = static_cast<int>(rng.below(n));
    const double sent = testing::bytes_sent(net, plan, v);
    // A cap at or above the rate the round already needs from v changes no resource's load
    // beyond the bottleneck.
    net.egress.assign(n, 0.0);
    net.egress[v] = sent / base.bottleneck_s;
    EXPECT_NEAR(round_time(net, plan, kChunk).bottleneck_s, base.bottleneck_s, 1e-9 * base.bottleneck_s);
    // Below it, the uplink is the bottleneck and the round is longer by exactly the excess.
    net.egress[v] = sent / (1.5 * base.bottleneck_s);
    const RoundCost capped = round_time(net, plan, kChunk);
    EXPECT_EQ(capped.bottleneck_resource, egress_resource(net, v)) << "rep=" << rep;
    EXPECT_NEAR(capped.bottleneck_s, 1.5 * base.bottleneck_s, 1e-9 * base.bottleneck_s);
    EXPECT_GT(capped.total_s, base.total_s);
  }
}

TEST(RoundTimeUplinks, AbsentZeroOrNegativeCapsMeanUnlimited) {
  Rng rng(3);
  for (int rep = 0; rep < 10; ++rep) {
    const int n = 3 + static_cast<int>(rng.below(5));
    Network net = testing::random_net(n, rng);
    Plan plan = random_plan(n, 32ull << 20, rng);
    add_multipath(net, plan, 2, kChunk);
    const RoundCost none = round_time(net, plan, kChunk);
    for (double cap : {0.0, -1.0}) {
      net.egress.assign(n, cap);
      net.ingress.assign(n - 1, cap);  // shorter than n: the missing site is unlimited too
      const RoundCost c = round_time(net, plan, kChunk);
      EXPECT_EQ(c.total_s, none.total_s);
      EXPECT_EQ(c.bottleneck_resource, none.bottleneck_resource);
    }
  }
}

// The metric against the chunk-level computation with uplink caps (egress and ingress
// servers around every link): the bottleneck term stays a lower bound. The simulation stores
// and forwards whole chunks at each cap, which the metric's cut-through fill term does not
// count, and a capped site interleaves more flows, so the metric errs lower than on uncapped
// networks (seen -8%..+15%): asserted -12%..+25%.
TEST(RoundTimeUplinks, MatchesChunkLevelSimulationWithCaps) {
  Rng rng(17);
  expect_metric_near_simulation(" with uplink caps", [&](int n) { return testing::random_capped_net(n, rng); }, rng,
                                -0.12, 0.25);
}

TEST(RoundTime, SimulationOfOneChainIsTheClassicPipeline) {
  // Chain 2 -> 1 -> 0 with equal links and instant adders: C chunks over 2 up-hops then
  // 2 down-hops, the links in each direction being distinct servers.
  Network net = Network::uniform(3, 1e6, 0.0, 1e15);
  const Plan plan = plan_from_trees(3, 10'000, {{Parents{kNoSite, 0, 1}, 0, 1.0}}, 4);
  const double t = simulate_round(net, plan, 1000);  // 10 chunks of 1 ms each
  EXPECT_NEAR(t, (10 + 3) * 1e-3, 1e-9);
}

}  // namespace
}  // namespace sg::topo
