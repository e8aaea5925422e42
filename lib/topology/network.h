// The planner's view of the sites: measured link throughput and RTT, per-site aggregation
// speed, and optionally each site's uplink (WAN NIC) capacity. Plain data; lib/measure and
// the config fill it, the planners and baselines read it.
//
// Uplinks. A site reaches the WAN through one uplink, so all its links share its egress
// (bytes sent) and ingress (bytes received) capacity: a site with a 50 Mbit/s uplink cannot
// send 50 Mbit/s to each of two peers at once, however fast each link measures alone.
// `egress`/`ingress` hold these caps in bytes/s; an empty vector, or a value <= 0, means
// unlimited (only the links bound that site, as before the caps existed).
#pragma once

#include <algorithm>
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
  std::vector<double> egress;   // bytes/s a site sends over all its links together; empty/<= 0: no cap
  std::vector<double> ingress;  // bytes/s a site receives over all its links together; empty/<= 0: no cap

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

  // A site's caps; 0 = unlimited.
  double egress_cap(int i) const { return cap_at(egress, i); }
  double ingress_cap(int i) const { return cap_at(ingress, i); }
  bool has_uplink_caps() const {
    for (int i = 0; i < n; ++i)
      if (egress_cap(i) > 0 || ingress_cap(i) > 0) return true;
    return false;
  }
  // Sets both caps of every site from one rate per site (a symmetric uplink, as a tbf-shaped
  // or NIC-bound site has); rates <= 0 leave that site unlimited.
  void set_uplinks(const std::vector<double>& bytes_per_s) {
    egress.assign(static_cast<size_t>(n), 0.0);
    for (int i = 0; i < n && i < static_cast<int>(bytes_per_s.size()); ++i) egress[i] = bytes_per_s[i];
    ingress = egress;
  }
  // The fastest a single transfer i->j can go with nothing else running: the link, or the
  // sender's egress or receiver's ingress cap where slower. Equals link_bw without caps.
  double path_bw(int i, int j) const {
    double b = link_bw(i, j);
    if (const double e = egress_cap(i); e > 0) b = std::min(b, e);
    if (const double g = ingress_cap(j); g > 0) b = std::min(b, g);
    return b;
  }

 private:
  static double cap_at(const std::vector<double>& v, int i) {
    return static_cast<size_t>(i) < v.size() && v[i] > 0 ? v[i] : 0.0;
  }
};

// Resources of the round-time model: every directed link, then every site's aggregator,
// then every site's egress and ingress uplink (loaded only where the site has a cap).
inline int link_resource(const Network& net, int from, int to) { return from * net.n + to; }
inline int agg_resource(const Network& net, int site) { return net.n * net.n + site; }
inline int egress_resource(const Network& net, int site) { return net.n * net.n + net.n + site; }
inline int ingress_resource(const Network& net, int site) { return net.n * net.n + 2 * net.n + site; }
inline int resource_count(const Network& net) { return net.n * net.n + 3 * net.n; }

}  // namespace sg::topo
