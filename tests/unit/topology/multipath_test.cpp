#include "topology/multipath.h"

#include <gtest/gtest.h>

#include "topology/fapt.h"
#include "topology/round_time.h"

namespace sg::topo {
namespace {

constexpr double kChunk = 64 * 1024;

// Five sites; the tree 1->0, 2->4, 3->4, 4->0 leaves 1->2->0 and 1->3->0 free as relays
// around the slow reduce link 1->0 (10 MB/s; every other link 1 GB/s).
struct Fixture {
  Network net = Network::uniform(5, 1e9, 0.001, 1e12);
  Plan plan;
  Fixture() {
    net.link_bw(1, 0) = 10e6;
    plan = plan_from_trees(5, 10'000'000, {{Parents{kNoSite, 0, 4, 4, 0}, 0, 1.0}}, 4);
  }
};

TEST(Multipath, SplitsTheSlowLinkOverIdleRelays) {
  Fixture f;
  const double before = round_time(f.net, f.plan, kChunk).total_s;
  EXPECT_GE(add_multipath(f.net, f.plan, 2, kChunk), 1);
  ASSERT_NE(f.plan.split_for(1, 0), nullptr);
  EXPECT_EQ(f.plan.split_for(1, 0)->relays.size(), 2u);  // via 2 and via 3
  EXPECT_LT(round_time(f.net, f.plan, kChunk).total_s, 0.2 * before);
}

TEST(Multipath, RelayAvoidsAnUplinkTheTreesAlreadyFill) {
  // Site 2's 100 MB/s uplink already carries its own M each way: that is the best round
  // possible (M / 100 MB/s), so relaying any of 1->0 through it would only lengthen the
  // round. Site 3, uncapped, takes the relayed share alone.
  Fixture f;
  f.net.set_uplinks({0, 0, 100e6, 0, 0});
  add_multipath(f.net, f.plan, 2, kChunk);
  for (const LinkSplit& sp : f.plan.splits)
    for (const Relay& r : sp.relays) EXPECT_NE(r.via, 2) << sp.from << "->" << sp.to;
  ASSERT_NE(f.plan.split_for(1, 0), nullptr);
  const RoundCost c = round_time(f.net, f.plan, kChunk);
  EXPECT_NEAR(c.bottleneck_s, 10e6 / 100e6, 1e-9);
}

TEST(Multipath, RelayGetsWhatItsUplinkHasSpare) {
  // Site 2 is the only relay (1->3 is unusable) and its 1 GB/s uplink already spends
  // M / 1 GB/s on its own tree edge: the relayed share is what it can carry after that, so
  // the split link and site 2's uplink finish together instead of the uplink running late.
  Fixture f;
  f.net.link_bw(1, 3) = 0;
  f.net.set_uplinks({0, 0, 1e9, 0, 0});
  add_multipath(f.net, f.plan, 2, kChunk);
  const LinkSplit* sp = f.plan.split_for(1, 0);
  ASSERT_NE(sp, nullptr);
  ASSERT_EQ(sp->relays.size(), 1u);
  EXPECT_EQ(sp->relays[0].via, 2);
  std::vector<double> load(resource_count(f.net), 0.0);
  add_tree_load(f.net, f.plan.shards[0].parent, 10e6, &f.plan, load);
  EXPECT_NEAR(load[egress_resource(f.net, 2)], load[link_resource(f.net, 1, 0)],
              0.02 * load[link_resource(f.net, 1, 0)]);
}

}  // namespace
}  // namespace sg::topo
