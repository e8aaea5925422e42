#include "topology/multipath.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "topology/round_time.h"

namespace sg::topo {
namespace {

// Bytes the relay path u->w->v (links at `rate`) carries within T seconds. A capped relay
// site forwards them through its uplink both ways, after the L seconds of tree traffic it
// already has there: min(rate * T, (T - L_eg) * eg, (T - L_in) * in).
double relay_bytes(const Network& net, const std::vector<double>& load, double rate, int w, double T) {
  double b = rate * T;
  if (const double e = net.egress_cap(w); e > 0) b = std::min(b, std::max(0.0, T - load[egress_resource(net, w)]) * e);
  if (const double g = net.ingress_cap(w); g > 0) b = std::min(b, std::max(0.0, T - load[ingress_resource(net, w)]) * g);
  return b;
}

// The earliest time by which the direct link and the relays together carry `bytes`
// (every path sends until then: water-filling over the paths, by bisection).
double split_finish(const Network& net, const std::vector<double>& load, double direct_rate,
                    const std::vector<std::pair<double, int>>& relays, double bytes) {
  double lo = 0, hi = bytes / direct_rate;
  for (int it = 0; it < 64; ++it) {
    const double mid = 0.5 * (lo + hi);
    double carried = direct_rate * mid;
    for (auto [rate, w] : relays) carried += relay_bytes(net, load, rate, w, mid);
    (carried >= bytes ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

int add_multipath(const Network& net, Plan& plan, int max_relays, double chunk_bytes) {
  const int n = net.n;
  plan.splits.clear();
  if (max_relays <= 0 || n < 3) return 0;
  std::vector<double> load(resource_count(net), 0.0);
  for (const ShardTree& s : plan.shards) add_tree_load(net, s.parent, static_cast<double>(s.bytes()), nullptr, load);
  std::vector<char> claimed(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n * n; ++i) claimed[i] = load[i] > 0;  // tree links are never relays

  std::vector<std::pair<double, int>> busy;
  double peak = 0;
  for (int i = 0; i < n * n; ++i) peak = std::max(peak, load[i]);
  for (int i = 0; i < n * n; ++i)
    if (load[i] >= 0.5 * peak && load[i] > 0) busy.emplace_back(load[i], i);
  std::sort(busy.rbegin(), busy.rend());
  if (busy.size() > 48) busy.resize(48);

  const bool caps = net.has_uplink_caps();
  double best = round_time(net, plan, chunk_bytes).total_s;
  int split = 0;
  for (auto [l, link] : busy) {
    const int u = link / n, v = link % n;
    std::vector<std::pair<double, int>> cand;  // (rate, relay site)
    for (int w = 0; w < n; ++w) {
      if (w == u || w == v) continue;
      const size_t a = static_cast<size_t>(u) * n + w, b = static_cast<size_t>(w) * n + v;
      if (claimed[a] || claimed[b]) continue;
      const double cap = std::min(net.bw[a], net.bw[b]);
      if (cap > 0) cand.emplace_back(cap, w);
    }
    if (cand.empty()) continue;
    if (caps) {
      // Rate each relay by what it carries while the split link finishes, so a relay whose
      // uplink the trees already fill gets little or nothing.
      const double bytes = l * net.link_bw(u, v);
      if (!(bytes > 0) || !std::isfinite(bytes)) continue;
      double t = split_finish(net, load, net.link_bw(u, v), cand, bytes);
      auto effective = [&] {
        for (auto& [rate, w] : cand) rate = relay_bytes(net, load, std::min(net.link_bw(u, w), net.link_bw(w, v)), w, t) / t;
      };
      effective();
      std::sort(cand.rbegin(), cand.rend());
      while (!cand.empty() && (cand.back().first <= 0 || static_cast<int>(cand.size()) > max_relays)) cand.pop_back();
      if (cand.empty()) continue;
      for (auto& [rate, w] : cand) rate = std::min(net.link_bw(u, w), net.link_bw(w, v));
      t = split_finish(net, load, net.link_bw(u, v), cand, bytes);
      effective();
    } else {
      std::sort(cand.rbegin(), cand.rend());
      if (static_cast<int>(cand.size()) > max_relays) cand.resize(max_relays);
    }
    double total = net.link_bw(u, v);
    for (auto [cap, w] : cand) total += cap;
    LinkSplit sp;
    sp.from = static_cast<SiteId>(u);
    sp.to = static_cast<SiteId>(v);
    sp.direct_weight = static_cast<uint16_t>(std::max(1.0, std::round(65535.0 * net.link_bw(u, v) / total)));
    for (auto [cap, w] : cand)
      sp.relays.push_back({static_cast<SiteId>(w), static_cast<uint16_t>(std::max(1.0, std::round(65535.0 * cap / total)))});
    plan.splits.push_back(sp);
    const double t = round_time(net, plan, chunk_bytes).total_s;
    if (t < best * (1 - 1e-9)) {
      best = t;
      ++split;
      for (auto [cap, w] : cand) {
        claimed[static_cast<size_t>(u) * n + w] = 1;
        claimed[static_cast<size_t>(w) * n + v] = 1;
      }
      if (caps) {  // later splits see the uplink this one's relays took
        std::fill(load.begin(), load.end(), 0.0);
        for (const ShardTree& s : plan.shards) add_tree_load(net, s.parent, static_cast<double>(s.bytes()), &plan, load);
      }
    } else {
      plan.splits.pop_back();
    }
  }
  return split;
}

}  // namespace sg::topo
