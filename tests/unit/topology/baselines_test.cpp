#include "topology/baselines.h"

#include <gtest/gtest.h>

#include "topology/round_time.h"

namespace sg::topo {
namespace {

TEST(Baselines, RingCountsEachSitesUplink) {
  // Ring all-reduce sends 2(n-1)/n of the model out of every site and into every site, one
  // link each way: a site's uplink cap below its link rate bounds the ring.
  const int n = 4;
  const uint64_t model = 40'000'000;
  Network net = Network::uniform(n, 1e9, 0.0, 1e12);
  const double uncapped = ring_allreduce_time(net, model, 64 * 1024).bottleneck_s;
  EXPECT_NEAR(uncapped, 2.0 * (n - 1) / n * model / 1e9, 1e-12);
  net.set_uplinks({0, 100e6, 0, 0});
  const RoundCost c = ring_allreduce_time(net, model, 64 * 1024);
  EXPECT_NEAR(c.bottleneck_s, 2.0 * (n - 1) / n * model / 100e6, 1e-12);
  EXPECT_TRUE(c.bottleneck_resource == egress_resource(net, 1) || c.bottleneck_resource == ingress_resource(net, 1));
}

}  // namespace
}  // namespace sg::topo
