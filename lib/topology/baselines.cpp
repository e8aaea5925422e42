#include "topology/baselines.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "topology/fapt.h"
#include "topology/trees.h"

namespace sg::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

RoundCost ring_time(const Network& net, const std::vector<int>& order, double M, double chunk) {
  const int n = net.n;
  std::vector<double> load(resource_count(net), 0.0);
  std::vector<double> hop(n);
  double agg_lat = 0;
  for (int i = 0; i < n; ++i) {
    const int a = order[i], b = order[(i + 1) % n];
    const double bw = net.link_bw(a, b);
    if (bw <= 0) return {kInf, kInf, 0, -1};
    add_link_bytes(net, a, b, 2.0 * (n - 1) / n * M, load);  // the ring link and both ends' uplinks
    load[agg_resource(net, b)] += 1.0 * (n - 1) / n * M / net.agg[b];
    hop[i] = chunk / net.path_bw(a, b) + net.prop(a, b);
    agg_lat = std::max(agg_lat, chunk / net.agg[b]);
  }
  double lat = 0;
  for (int s = 0; s < n; ++s) {
    double path = 0;
    for (int k = 0; k < 2 * (n - 1); ++k) path += hop[(s + k) % n];
    lat = std::max(lat, path);
  }
  return cost_of(load, lat + (n - 1) * agg_lat);
}

}  // namespace

Plan star_plan(const Network& net, uint64_t model_bytes, double chunk_bytes) {
  Plan best;
  double best_t = kInf;
  for (int r = 0; r < net.n; ++r) {
    Plan p = plan_from_trees(net.n, model_bytes, {{star_tree(net.n, r), r, 1.0}}, 4);
    const double t = round_time(net, p, chunk_bytes).total_s;
    if (t < best_t) {
      best_t = t;
      best = std::move(p);
    }
  }
  return best;
}

RoundCost ring_allreduce_time(const Network& net, uint64_t model_bytes, double chunk_bytes) {
  const int n = net.n;
  const double M = static_cast<double>(model_bytes);
  if (n < 2) return {};
  RoundCost best{kInf, kInf, 0, -1};
  auto consider = [&](const std::vector<int>& ord) {
    const RoundCost c = ring_time(net, ord, M, chunk_bytes);
    if (c.total_s < best.total_s) best = c;
  };
  std::vector<int> ord(n);
  std::iota(ord.begin(), ord.end(), 0);
  if (n <= 8) {  // every ring (site 0 first), both directions included
    do consider(ord);
    while (std::next_permutation(ord.begin() + 1, ord.end()));
    return best;
  }
  // Larger: greedy widest-next-hop ring from every start, then 2-opt on the slowest ring
  // link (segment reversal), each candidate scored by the full ring time.
  auto slowest = [&](const std::vector<int>& o) {
    double m = kInf;
    for (int i = 0; i < n; ++i) m = std::min(m, net.path_bw(o[i], o[(i + 1) % n]));
    return m;
  };
  consider(ord);
  for (int start = 0; start < n; ++start) {
    std::vector<int> o{start};
    std::vector<bool> used(n, false);
    used[start] = true;
    for (int k = 1; k < n; ++k) {
      int nb = -1;
      for (int v = 0; v < n; ++v)
        if (!used[v] && (nb < 0 || net.path_bw(o.back(), v) > net.path_bw(o.back(), nb))) nb = v;
      used[nb] = true;
      o.push_back(nb);
    }
    for (bool improved = true; improved;) {
      improved = false;
      const double cur = slowest(o);
      for (int i = 1; i < n - 1 && !improved; ++i)
        for (int j = i + 1; j < n && !improved; ++j) {
          std::reverse(o.begin() + i, o.begin() + j + 1);
          if (slowest(o) > cur * (1 + 1e-12)) {
            improved = true;
          } else {
            std::reverse(o.begin() + i, o.begin() + j + 1);
          }
        }
    }
    consider(o);
    std::reverse(o.begin(), o.end());
    consider(o);
  }
  return best;
}

Plan blind_tree_plan(const Network& net, uint64_t model_bytes, int shards) {
  std::vector<WeightedTree> trees;
  for (int s = 0; s < std::max(1, shards); ++s) trees.push_back({binary_tree(net.n, s % net.n), s % net.n, 1.0});
  return plan_from_trees(net.n, model_bytes, trees, 4);
}

Plan netstorm_rule_plan(const Network& net, uint64_t model_bytes, int roots) {
  const int n = net.n;
  std::vector<WeightedTree> scored;
  for (int r = 0; r < n; ++r) {
    Parents p = inverse_bw_shortest_path_tree(net, r);
    const std::vector<int> depth = tree_depths(p, r);
    if (depth.empty()) continue;
    std::vector<double> slowest(n, kInf);
    for (int v = 0; v < n; ++v)
      if (v != r) slowest[depth[v]] = std::min(slowest[depth[v]], net.link_bw(v, p[v]));
    double inv = 0;
    for (int k = 1; k < n; ++k)
      if (slowest[k] < kInf) inv += 1.0 / slowest[k];
    scored.push_back({std::move(p), r, inv > 0 ? 1.0 / inv : 0.0});
  }
  std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.share > b.share; });
  if (static_cast<int>(scored.size()) > roots) scored.resize(std::max(1, roots));
  return plan_from_trees(n, model_bytes, scored, 4);
}

Plan netstorm_rule_best(const Network& net, uint64_t model_bytes, int max_roots, double chunk_bytes) {
  Plan best;
  double best_t = kInf;
  for (int r = 1; r <= std::min(max_roots, net.n); ++r) {
    Plan p = netstorm_rule_plan(net, model_bytes, r);
    const double t = round_time(net, p, chunk_bytes).total_s;
    if (t < best_t) {
      best_t = t;
      best = std::move(p);
    }
  }
  return best;
}

}  // namespace sg::topo
