// Networks whose sites sit behind uplink caps (network.h), for the topology tests and
// benchmarks. Header-only and not part of sg_topology: only tests/ and perf/ include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/rng.h"
#include "topology/network.h"
#include "topology/plan.h"
#include "topology/round_time.h"
#include "topology/testing/random_net.h"

namespace sg::topo::testing {

// Gives every site the cap rates[i] (bytes/s, both ways) and clips each link to its ends'
// caps, as a measured link looks when it runs alone (and as sim::network_at reports it).
inline void cap_uplinks(Network& net, const std::vector<double>& rates) {
  net.set_uplinks(rates);
  for (int i = 0; i < net.n; ++i)
    for (int j = 0; j < net.n; ++j)
      if (i != j && net.link_bw(i, j) > 0) net.link_bw(i, j) = net.path_bw(i, j);
}

// The 3-site testbed (scripts/testbed): every site's uplink shaped by tbf to rates_mbps
// (both directions), a bridge between them, so link i->j measures min(rate i, rate j).
inline Network testbed_net(const std::vector<double>& rates_mbps, double rtt_s = 0.002, double agg_Bps = 10e9) {
  const int n = static_cast<int>(rates_mbps.size());
  Network net = Network::uniform(n, 1e15, rtt_s, agg_Bps);
  std::vector<double> rates;
  for (double m : rates_mbps) rates.push_back(m * 1e6 / 8);
  cap_uplinks(net, rates);
  return net;
}

// random_net's links behind per-site uplinks log-uniform in [200 Mbit/s, 20 Gbit/s]: most
// sites' caps sit below the sum of their links, so the uplink, not a link, often binds.
inline Network random_capped_net(int n, Rng& rng) {
  Network net = random_net(n, rng);
  const double lo = std::log(200e6 / 8), hi = std::log(20e9 / 8);
  std::vector<double> rates(n);
  for (double& r : rates) r = std::exp(lo + (hi - lo) * rng.uniform());
  cap_uplinks(net, rates);
  return net;
}

// The same network as the planner saw it before uplink caps existed.
inline Network without_caps(Network net) {
  net.egress.clear();
  net.ingress.clear();
  return net;
}

// Bytes site v sends over all its links in one round of `plan` (relayed bytes included).
inline double bytes_sent(const Network& net, const Plan& plan, int v) {
  std::vector<double> load(resource_count(net), 0.0);
  for (const ShardTree& s : plan.shards) add_tree_load(net, s.parent, static_cast<double>(s.bytes()), &plan, load);
  double sent = 0;
  for (int j = 0; j < net.n; ++j)
    if (j != v) sent += load[link_resource(net, v, j)] * net.link_bw(v, j);
  return sent;
}

}  // namespace sg::topo::testing
