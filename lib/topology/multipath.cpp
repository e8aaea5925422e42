#include "topology/multipath.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "topology/round_time.h"

namespace sg::topo {

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

  double best = round_time(net, plan, chunk_bytes).total_s;
  int split = 0;
  for (auto [l, link] : busy) {
    const int u = link / n, v = link % n;
    std::vector<std::pair<double, int>> cand;
    for (int w = 0; w < n; ++w) {
      if (w == u || w == v) continue;
      const size_t a = static_cast<size_t>(u) * n + w, b = static_cast<size_t>(w) * n + v;
      if (claimed[a] || claimed[b]) continue;
      const double cap = std::min(net.bw[a], net.bw[b]);
      if (cap > 0) cand.emplace_back(cap, w);
    }
    if (cand.empty()) continue;
    std::sort(cand.rbegin(), cand.rend());
    if (static_cast<int>(cand.size()) > max_relays) cand.resize(max_relays);
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
    } else {
      plan.splits.pop_back();
    }
  }
  return split;
}

}  // namespace sg::topo
