// The planner's view of the sites: measured link throughput and RTT, per-site aggregation
// speed. Plain data; lib/measure fills it, the planners and baselines read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sg::topo {

using SiteId = uint16_t;
inline constexpr SiteId kNoSite = 0xFFFF;

struct Network {
  int n = 0;
  std::vector<double> bw;   // bytes/s of directed link i->j at [i*n+j]; <= 0 means unusable
  std::vector<double> rtt;  // seconds, [i*n+j]; one-way propagation is taken as rtt/2
  std::vector<double> agg;  // bytes/s a site adds into its accumulator (one child's chunk)

  static Network uniform(int sites, double bytes_per_s, double rtt_s, double agg_bytes_per_s) {
    Network net;
    net.n = sites;
    net.bw.assign(static_cast<size_t>(sites) * sites, bytes_per_s);
    net.rtt.assign(static_cast<size_t>(sites) * sites, rtt_s);
    net.agg.assign(static_cast<size_t>(sites), agg_bytes_per_s);
    return net;
  }
  double link_bw(int i, int j) const { return bw[static_cast<size_t>(i) * n + j]; }
  double prop(int i, int j) const { return 0.5 * rtt[static_cast<size_t>(i) * n + j]; }
  double& link_bw(int i, int j) { return bw[static_cast<size_t>(i) * n + j]; }
};

// Resources of the round-time model: every directed link, then every site's aggregator.
inline int link_resource(const Network& net, int from, int to) { return from * net.n + to; }
inline int agg_resource(const Network& net, int site) { return net.n * net.n + site; }
inline int resource_count(const Network& net) { return net.n * net.n + net.n; }

}  // namespace sg::topo
