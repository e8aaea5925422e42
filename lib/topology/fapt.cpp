#include "topology/fapt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <string>

#include "topology/minmax_lp.h"
#include "topology/multipath.h"
#include "topology/round_time.h"

namespace sg::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A candidate tree and the seconds each resource works if the whole model used it.
struct Column {
  Parents parent;
  int root = 0;
  double lat = 0;
  std::vector<std::pair<int, double>> work;  // sparse (resource, seconds)
  double single_total = 0;                   // round time if this tree carried everything
};

bool make_column(const Network& net, const Parents& parent, int root, double model_bytes,
                 double chunk, std::vector<double>& scratch, Column& col) {
  if (parent.empty()) return false;
  std::fill(scratch.begin(), scratch.end(), 0.0);
  add_tree_load(net, parent, model_bytes, nullptr, scratch);
  col.work.clear();
  double peak = 0;
  for (int r = 0; r < static_cast<int>(scratch.size()); ++r)
    if (scratch[r] > 0) {
      if (!std::isfinite(scratch[r])) return false;
      col.work.emplace_back(r, scratch[r]);
      peak = std::max(peak, scratch[r]);
    }
  col.parent = parent;
  col.root = root;
  col.lat = tree_latency(net, parent, root, chunk, nullptr);
  col.single_total = peak + col.lat;
  return std::isfinite(col.lat);
}

struct Mixture {
  std::vector<double> share;  // per column of the pool (0 for unused)
  std::vector<double> price;  // per resource
  double v = kInf;            // bottleneck seconds
  double lat = 0;             // fill/drain seconds of the slowest tree in use
  double total() const { return v + lat; }
};

// Exact shard sizes for the columns in `use`, adding resource rows lazily: a row that no
// solution loads to v cannot bind, so only rows found overloaded are put into the LP.
Mixture solve_mixture(const std::vector<Column>& pool, const std::vector<int>& use, int resources) {
  Mixture m;
  m.share.assign(pool.size(), 0.0);
  m.price.assign(resources, 0.0);
  if (use.empty()) return m;
  std::vector<int> rows;
  std::vector<char> in_rows(resources, 0);
  auto add_row = [&](int r) {
    if (!in_rows[r]) {
      in_rows[r] = 1;
      rows.push_back(r);
    }
  };
  for (int c : use) {
    auto w = pool[c].work;
    const size_t k = std::min<size_t>(2, w.size());
    std::partial_sort(w.begin(), w.begin() + k, w.end(), [](auto& a, auto& b) { return a.second > b.second; });
    for (size_t i = 0; i < k; ++i) add_row(w[i].first);
  }
  std::vector<int> row_of(resources, -1);
  std::vector<double> load(resources);
  for (int attempt = 0; attempt < 64; ++attempt) {
    for (size_t i = 0; i < rows.size(); ++i) row_of[rows[i]] = static_cast<int>(i);
    MinMaxLp lp(static_cast<int>(rows.size()), static_cast<int>(use.size()));
    for (size_t j = 0; j < use.size(); ++j) {
      for (auto [r, w] : pool[use[j]].work)
        if (row_of[r] >= 0) lp.set(row_of[r], static_cast<int>(j), w);
      lp.enable(static_cast<int>(j));
    }
    lp.solve();
    const std::vector<double> x = lp.shares();
    const double v = lp.value();
    std::fill(load.begin(), load.end(), 0.0);
    for (size_t j = 0; j < use.size(); ++j)
      if (x[j] > 0)
        for (auto [r, w] : pool[use[j]].work) load[r] += x[j] * w;
    std::vector<std::pair<double, int>> over;
    for (int r = 0; r < resources; ++r)
      if (!in_rows[r] && load[r] > v * (1 + 1e-9)) over.emplace_back(load[r], r);
    if (over.empty() || attempt == 63) {
      m.v = *std::max_element(load.begin(), load.end());
      m.lat = 0;
      for (size_t j = 0; j < use.size(); ++j) {
        m.share[use[j]] = x[j];
        if (x[j] > 1e-9) m.lat = std::max(m.lat, pool[use[j]].lat);
      }
      const std::vector<double> y = lp.prices();
      for (size_t i = 0; i < rows.size(); ++i) m.price[rows[i]] = y[i];
      return m;
    }
    std::sort(over.rbegin(), over.rend());
    for (size_t i = 0; i < over.size() && i < 16; ++i) add_row(over[i].second);
  }
  return m;
}

// Sweeps a latency cap over the columns (cheapest latency first) and keeps the best
// cap + bottleneck. Stops once the cap alone, plus the uncapped bottleneck, cannot win.
Mixture best_mixture(const std::vector<Column>& pool, const std::vector<int>& use, int resources) {
  Mixture all = solve_mixture(pool, use, resources);
  Mixture best = all;
  std::vector<int> order = use;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return pool[a].lat < pool[b].lat; });
  // Large pools sweep about 16 evenly spaced caps instead of every distinct latency.
  const size_t stride = std::max<size_t>(1, order.size() / 16);
  std::vector<int> prefix;
  for (size_t k = 0; k < order.size(); ++k) {
    prefix.push_back(order[k]);
    if (k + 1 < order.size() && pool[order[k + 1]].lat == pool[order[k]].lat) continue;
    if (k + 1 < order.size() && (k + 1) % stride != 0) continue;
    if (pool[order[k]].lat + all.v >= best.total()) break;
    Mixture m = solve_mixture(pool, prefix, resources);
    if (m.total() < best.total()) best = m;
  }
  return best;
}

// Keeps at most `cap` trees (largest shares) and re-sizes them.
Mixture cap_support(const std::vector<Column>& pool, const Mixture& m, int cap, int resources) {
  std::vector<int> used;
  for (size_t c = 0; c < pool.size(); ++c)
    if (m.share[c] > 1e-9) used.push_back(static_cast<int>(c));
  if (static_cast<int>(used.size()) <= cap) return m;
  std::sort(used.begin(), used.end(), [&](int a, int b) { return m.share[a] > m.share[b]; });
  used.resize(cap);
  return solve_mixture(pool, used, resources);
}

Plan to_plan(const Network& net, uint64_t model_bytes, const std::vector<Column>& pool,
             const Mixture& m, const PlannerOptions& opt) {
  std::vector<WeightedTree> trees;
  for (size_t c = 0; c < pool.size(); ++c)
    if (m.share[c] > 1e-9) trees.push_back({pool[c].parent, pool[c].root, m.share[c]});
  Plan plan = plan_from_trees(net.n, model_bytes, trees, opt.align_bytes);
  if (opt.multipath) add_multipath(net, plan, opt.max_relays, opt.chunk_bytes);
  return plan;
}

std::string key_of(const Parents& p) { return std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(SiteId)); }

}  // namespace

Plan plan_from_trees(int n, uint64_t model_bytes, const std::vector<WeightedTree>& trees,
                     uint64_t align_bytes) {
  Plan plan;
  plan.num_sites = static_cast<uint16_t>(n);
  plan.model_bytes = model_bytes;
  const uint64_t align = std::max<uint64_t>(1, align_bytes);
  double sum = 0;
  for (const WeightedTree& t : trees) sum += std::max(0.0, t.share);
  uint64_t begin = 0;
  for (size_t i = 0; i < trees.size(); ++i) {
    uint64_t end = model_bytes;
    if (i + 1 < trees.size()) {
      const double want = static_cast<double>(begin) + std::max(0.0, trees[i].share) / sum * static_cast<double>(model_bytes);
      end = std::min<uint64_t>(model_bytes, static_cast<uint64_t>(std::llround(want / static_cast<double>(align))) * align);
      end = std::max(end, begin);
    }
    if (end == begin) continue;
    plan.shards.push_back({static_cast<SiteId>(trees[i].root), begin, end, trees[i].parent});
    begin = end;
  }
  if (plan.shards.empty() && !trees.empty())
    plan.shards.push_back({static_cast<SiteId>(trees[0].root), 0, model_bytes, trees[0].parent});
  else if (!plan.shards.empty())
    plan.shards.back().byte_end = model_bytes;  // a rounded-away last tree leaves its bytes to the previous
  return plan;
}

Plan plan_fapt(const Network& net, uint64_t model_bytes, const PlannerOptions& opt) {
  const int n = net.n;
  const int resources = resource_count(net);
  const double M = static_cast<double>(model_bytes);
  std::vector<double> scratch(resources);
  std::vector<Column> pool;
  std::set<std::string> seen;
  auto add = [&](const Parents& p, int root) {
    Column c;
    if (!make_column(net, p, root, M, opt.chunk_bytes, scratch, c)) return -1;
    if (!seen.insert(key_of(p)).second) return -1;
    pool.push_back(std::move(c));
    return static_cast<int>(pool.size()) - 1;
  };

  // Seeds. Uniform prices make priced_prim the MST on 1/bw_up + 1/bw_down (+ 1/agg), and
  // with uplink caps + the edge's 1/cap at both ends: slow uplinks get few tree edges.
  std::vector<double> link_price(static_cast<size_t>(n) * n, 1.0), agg_price(n, 1.0);
  UplinkPrices uplink_price;
  const UplinkPrices* up = nullptr;  // uncapped networks price no uplinks (plans as before)
  if (net.has_uplink_caps()) {
    uplink_price.egress.assign(n, 1.0);
    uplink_price.ingress.assign(n, 1.0);
    up = &uplink_price;
  }
  for (int r = 0; r < n; ++r) {
    add(priced_prim(net, r, link_price, agg_price, n, up), r);
    add(priced_prim(net, r, link_price, agg_price, 2, up), r);
    add(inverse_bw_shortest_path_tree(net, r), r);
    add(star_tree(n, r), r);
  }
  // Large instances keep the best seeds only, so every LP stays small.
  const size_t keep_seeds = 24;
  if (pool.size() > keep_seeds) {
    std::sort(pool.begin(), pool.end(), [](const Column& a, const Column& b) { return a.single_total < b.single_total; });
    pool.resize(keep_seeds);
  }
  // Column generation: price the resources by the LP duals and grow, from every root,
  // the tree that is cheapest at those prices; add it if it would lower the bottleneck.
  // With a finite lat_cap only trees whose fill latency fits are offered (and grown with
  // the latency-capped Prim), so later passes trade bottleneck for latency.
  const double reg = 0.02 / n;  // tie-breaker toward fast links where prices are zero
  std::vector<int> roots(n);
  std::iota(roots.begin(), roots.end(), 0);
  if (n > 16) {  // large instances price from the best seeds' roots only
    roots.clear();
    for (const Column& c : pool)
      if (std::find(roots.begin(), roots.end(), c.root) == roots.end() && roots.size() < 12) roots.push_back(c.root);
  }
  std::vector<int> idle(pool.size(), 0);
  std::vector<char> ever_used(pool.size(), 0);
  auto generate = [&](double lat_cap, int rounds) {
    for (int round = 0; round < rounds; ++round) {
      // Column management: a tree that got no share twice in a row leaves the LP (it stays
      // in the pool for the final sweep), so the LPs stay small on large instances.
      std::vector<int> use;
      for (size_t c = 0; c < pool.size(); ++c)
        if (pool[c].lat <= lat_cap && (idle[c] < 2 || n <= 16)) use.push_back(static_cast<int>(c));
      if (use.empty()) return;
      const Mixture m = solve_mixture(pool, use, resources);
      for (int c : use) {
        idle[c] = m.share[c] > 1e-9 ? 0 : idle[c] + 1;
        if (m.share[c] > 1e-9) ever_used[c] = 1;
      }
      for (int i = 0; i < n * n; ++i) link_price[i] = m.price[i] + reg;
      for (int v = 0; v < n; ++v) agg_price[v] = m.price[agg_resource(net, v)] + reg;
      if (up)
        for (int v = 0; v < n; ++v) {
          uplink_price.egress[v] = m.price[egress_resource(net, v)] + reg;
          uplink_price.ingress[v] = m.price[ingress_resource(net, v)] + reg;
        }
      std::vector<std::pair<double, Column>> found;
      Column c;
      auto offer = [&](const Parents& p, int r) {
        if (!make_column(net, p, r, M, opt.chunk_bytes, scratch, c) || c.lat > lat_cap) return;
        double reduced = 0;
        for (auto [res, w] : c.work) reduced += m.price[res] * w;
        if (reduced < m.v * (1 - 1e-6) && !seen.count(key_of(p))) found.emplace_back(reduced, c);
      };
      for (int r : roots) {
        if (lat_cap < kInf) {
          offer(priced_prim_latency_capped(net, r, link_price, agg_price, opt.chunk_bytes, lat_cap, up), r);
          // Lagrangian variants: price latency per byte-second so the tree trades cost for
          // depth; weights relative to the bottleneck-per-latency scale of this instance.
          if (n <= 16) {
            for (double w : {0.3, 1.0, 3.0})
              offer(priced_prim(net, r, link_price, agg_price, n, opt.chunk_bytes, w * m.v / lat_cap / M, up), r);
            for (int depth : {3, 2}) offer(priced_prim(net, r, link_price, agg_price, depth, up), r);
          }
        } else {
          for (int depth : {n, 3, 2})
            if (depth != 3 || n <= 16) offer(priced_prim(net, r, link_price, agg_price, depth, up), r);
        }
      }
      if (found.empty()) return;
      std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first < b.first; });
      int added = 0;
      for (auto& [score, col] : found) {
        if (added == 4) break;
        if (!seen.insert(key_of(col.parent)).second) continue;
        pool.push_back(std::move(col));
        idle.push_back(0);
        ever_used.push_back(0);
        ++added;
      }
    }
  };
  std::vector<int> all;
  // Large instances spend fewer rounds: each LP there has hundreds of rows.
  const int rounds = n > 16 ? std::max(2, opt.pricing_rounds / 3) : opt.pricing_rounds;
  generate(kInf, rounds);
  all.resize(pool.size());
  std::iota(all.begin(), all.end(), 0);
  const Mixture first = best_mixture(pool, all, resources);
  // Latency-capped passes: small instances afford more cap levels.
  const std::vector<double> caps = {1.0, 0.85, 0.7};
  for (double f : caps) generate(first.lat * f * (1 + 1e-9), n <= 16 ? rounds : std::max(1, rounds / 2));
  // The final sweep offers every tree some LP ever used, plus every seed on small instances.
  all.clear();
  for (size_t c = 0; c < pool.size(); ++c)
    if (ever_used[c] || n <= 16) all.push_back(static_cast<int>(c));
  Mixture best = best_mixture(pool, all, resources);
  best = cap_support(pool, best, std::max(1, opt.max_shards), resources);
  return to_plan(net, model_bytes, pool, best, opt);
}

Plan plan_exact(const Network& net, uint64_t model_bytes, const PlannerOptions& opt) {
  const int n = net.n;
  const int resources = resource_count(net);
  const double M = static_cast<double>(model_bytes);
  std::vector<double> scratch(resources);
  std::vector<Column> pool;
  for (int r = 0; r < n; ++r)
    for_each_tree(n, r, [&](const Parents& p) {
      Column c;
      if (make_column(net, p, r, M, opt.chunk_bytes, scratch, c)) pool.push_back(std::move(c));
    });
  std::sort(pool.begin(), pool.end(), [](const Column& a, const Column& b) { return a.lat < b.lat; });
  const int cols = static_cast<int>(pool.size());
  // One LP per run with every resource as a row; columns are enabled in latency order and
  // the simplex resumes from the previous optimum (adding columns keeps it feasible).
  auto fill = [&](MinMaxLp& lp) {
    for (int c = 0; c < cols; ++c)
      for (auto [r, w] : pool[c].work) lp.set(r, c, w);
  };
  MinMaxLp all(resources, cols);
  fill(all);
  for (int c = 0; c < cols; ++c) all.enable(c);
  all.solve();
  const double v_all = all.value();
  double best_total = v_all + 0;
  std::vector<double> best_x = all.shares();
  {
    double lat = 0;
    for (int c = 0; c < cols; ++c)
      if (best_x[c] > 1e-9) lat = std::max(lat, pool[c].lat);
    best_total = v_all + lat;
  }
  MinMaxLp sweep(resources, cols);
  fill(sweep);
  for (int c = 0; c < cols; ++c) {
    sweep.enable(c);
    if (c + 1 < cols && pool[c + 1].lat == pool[c].lat) continue;
    if (pool[c].lat + v_all >= best_total) break;
    sweep.solve();
    const double total = sweep.value() + pool[c].lat;
    if (total < best_total) {
      best_total = total;
      best_x = sweep.shares();
    }
  }
  Mixture m;
  m.share = best_x;
  PlannerOptions o = opt;
  return to_plan(net, model_bytes, pool, m, o);
}

}  // namespace sg::topo
