#include "topology/trees.h"

#include <algorithm>
#include <limits>

namespace sg::topo {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// Priced seconds per byte one tree edge u-p puts on the capped uplinks of u and p.
double uplink_cost(const Network& net, const UplinkPrices* up, int u, int p) {
  if (!up) return 0;
  double c = 0;
  auto add = [&](const std::vector<double>& price, double cap, int site) {
    if (cap > 0 && static_cast<size_t>(site) < price.size()) c += price[site] / cap;
  };
  add(up->egress, net.egress_cap(u), u);
  add(up->ingress, net.ingress_cap(p), p);
  add(up->egress, net.egress_cap(p), p);
  add(up->ingress, net.ingress_cap(u), u);
  return c;
}

}  // namespace

Parents priced_prim(const Network& net, int root, const std::vector<double>& link_price,
                    const std::vector<double>& agg_price, int max_depth, const UplinkPrices* uplink) {
  return priced_prim(net, root, link_price, agg_price, max_depth, 0.0, 0.0, uplink);
}

Parents priced_prim(const Network& net, int root, const std::vector<double>& link_price,
                    const std::vector<double>& agg_price, int max_depth, double chunk_bytes, double lat_weight,
                    const UplinkPrices* uplink) {
  const int n = net.n;
  Parents parent(n, kNoSite);
  std::vector<int> depth(n, -1);
  std::vector<double> key(n, kInf);
  std::vector<int> via(n, -1);
  auto attach_cost = [&](int u, int p) {
    const double up = net.link_bw(u, p), down = net.link_bw(p, u);
    if (up <= 0 || down <= 0 || net.agg[p] <= 0) return kInf;
    double c = link_price[link_resource(net, u, p)] / up + link_price[link_resource(net, p, u)] / down +
               agg_price[p] / net.agg[p];
    if (uplink) c += uplink_cost(net, uplink, u, p);
    if (lat_weight > 0)
      c += lat_weight * (chunk_bytes / net.path_bw(u, p) + chunk_bytes / net.path_bw(p, u) + net.prop(u, p) +
                         net.prop(p, u) + chunk_bytes / net.agg[p]);
    return c;
  };
  depth[root] = 0;
  int last = root;
  for (int added = 1; added < n; ++added) {
    if (depth[last] < max_depth)
      for (int u = 0; u < n; ++u) {
        if (depth[u] >= 0) continue;
        const double c = attach_cost(u, last);
        if (c < key[u]) {
          key[u] = c;
          via[u] = last;
        }
      }
    int best = -1;
    for (int u = 0; u < n; ++u)
      if (depth[u] < 0 && via[u] >= 0 && (best < 0 || key[u] < key[best])) best = u;
    if (best < 0) return {};  // disconnected under the depth bound
    parent[best] = static_cast<SiteId>(via[best]);
    depth[best] = depth[via[best]] + 1;
    last = best;
  }
  return parent;
}

Parents priced_prim_latency_capped(const Network& net, int root, const std::vector<double>& link_price,
                                   const std::vector<double>& agg_price, double chunk_bytes, double lat_cap,
                                   const UplinkPrices* uplink) {
  const int n = net.n;
  Parents parent(n, kNoSite);
  std::vector<char> in(n, 0);
  std::vector<double> up(n, 0.0), down(n, 0.0);  // path latencies to/from the root
  double max_up = 0, max_down = 0;
  std::vector<double> key(n, kInf);
  std::vector<int> via(n, -1);
  // Attaching u under p: its cost, or infinity if the tree would exceed the latency cap.
  // The cap only tightens as the tree grows, so an infeasible pair never becomes feasible.
  auto cost = [&](int u, int p) {
    const double bw_up = net.link_bw(u, p), bw_down = net.link_bw(p, u);
    if (bw_up <= 0 || bw_down <= 0 || net.agg[p] <= 0) return kInf;
    const double lu = up[p] + chunk_bytes / net.path_bw(u, p) + net.prop(u, p) + chunk_bytes / net.agg[p];
    const double ld = down[p] + chunk_bytes / net.path_bw(p, u) + net.prop(p, u);
    if (std::max(max_up, lu) + std::max(max_down, ld) > lat_cap) return kInf;
    const double c = link_price[link_resource(net, u, p)] / bw_up + link_price[link_resource(net, p, u)] / bw_down +
                     agg_price[p] / net.agg[p];
    return uplink ? c + uplink_cost(net, uplink, u, p) : c;
  };
  in[root] = 1;
  int last = root;
  for (int added = 1; added < n; ++added) {
    for (int u = 0; u < n; ++u) {
      if (in[u]) continue;
      const double c = cost(u, last);
      if (c < key[u]) {
        key[u] = c;
        via[u] = last;
      }
    }
    int best = -1;
    while (true) {
      best = -1;
      for (int u = 0; u < n; ++u)
        if (!in[u] && key[u] < kInf && (best < 0 || key[u] < key[best])) best = u;
      if (best < 0) return {};
      if (cost(best, via[best]) < kInf) break;
      // Its key went stale as the tree deepened: rescan its parents.
      key[best] = kInf;
      via[best] = -1;
      for (int p = 0; p < n; ++p)
        if (in[p]) {
          const double c = cost(best, p);
          if (c < key[best]) {
            key[best] = c;
            via[best] = p;
          }
        }
    }
    const int p = via[best];
    in[best] = 1;
    parent[best] = static_cast<SiteId>(p);
    up[best] = up[p] + chunk_bytes / net.path_bw(best, p) + net.prop(best, p) + chunk_bytes / net.agg[p];
    down[best] = down[p] + chunk_bytes / net.path_bw(p, best) + net.prop(p, best);
    max_up = std::max(max_up, up[best]);
    max_down = std::max(max_down, down[best]);
    last = best;
  }
  return parent;
}

Parents inverse_bw_shortest_path_tree(const Network& net, int root) {
  const int n = net.n;
  Parents parent(n, kNoSite);
  std::vector<double> dist(n, kInf);
  std::vector<bool> done(n, false);
  dist[root] = 0;
  for (int it = 0; it < n; ++it) {
    int v = -1;
    for (int u = 0; u < n; ++u)
      if (!done[u] && (v < 0 || dist[u] < dist[v])) v = u;
    if (v < 0 || dist[v] == kInf) break;
    done[v] = true;
    // Relax u -> v: u sends toward the root through v.
    for (int u = 0; u < n; ++u) {
      const double bw = net.link_bw(u, v);
      if (done[u] || bw <= 0) continue;
      if (dist[v] + 1.0 / bw < dist[u]) {
        dist[u] = dist[v] + 1.0 / bw;
        parent[u] = static_cast<SiteId>(v);
      }
    }
  }
  return parent;
}

Parents star_tree(int n, int root) {
  Parents parent(n, static_cast<SiteId>(root));
  parent[root] = kNoSite;
  return parent;
}

Parents binary_tree(int n, int root) {
  Parents parent(n, kNoSite);
  for (int pos = 1; pos < n; ++pos)
    parent[(root + pos) % n] = static_cast<SiteId>((root + (pos - 1) / 2) % n);
  return parent;
}

void for_each_tree(int n, int root, const std::function<void(const Parents&)>& f) {
  Parents parent(n, kNoSite);
  std::vector<int> others;
  for (int v = 0; v < n; ++v)
    if (v != root) others.push_back(v);
  std::vector<int> state(n, 0);  // walk marks for the acyclicity check
  int stamp = 0;
  // Odometer over every parent choice of the non-root sites; keep the acyclic ones.
  std::vector<int> choice(others.size(), 0);
  auto parent_of = [&](size_t k) {
    int p = choice[k];
    return p >= others[k] ? p + 1 : p;  // skip the site itself
  };
  while (true) {
    for (size_t k = 0; k < others.size(); ++k) parent[others[k]] = static_cast<SiteId>(parent_of(k));
    bool ok = true;
    for (int v : others) {
      ++stamp;
      int u = v;
      while (u != root && state[u] != stamp) {
        state[u] = stamp;
        u = parent[u];
      }
      if (u != root) {
        ok = false;
        break;
      }
    }
    if (ok) f(parent);
    size_t k = 0;
    while (k < choice.size() && ++choice[k] == n - 1) choice[k++] = 0;
    if (k == choice.size()) break;
  }
}

}  // namespace sg::topo
