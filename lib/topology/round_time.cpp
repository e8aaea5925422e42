#include "topology/round_time.h"

#include <algorithm>
#include <limits>

namespace sg::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double link_seconds(const Network& net, int from, int to, double bytes) {
  const double bw = net.link_bw(from, to);
  if (bytes <= 0) return 0;
  return bw > 0 ? bytes / bw : kInf;
}

// A chunk crossing one physical link is serialised at the slowest of the link and the two
// uplinks it passes (the caps pipeline its packets, they do not store the whole chunk).
double chunk_seconds(const Network& net, int from, int to, double bytes) {
  const double bw = net.path_bw(from, to);
  if (bytes <= 0) return 0;
  return bw > 0 ? bytes / bw : kInf;
}

// A tree edge's bytes: direct, or dealt over the direct link and relays by the split.
void add_edge_load(const Network& net, int from, int to, double bytes, const Plan* plan,
                   std::vector<double>& load) {
  const LinkSplit* sp = plan ? plan->split_for(from, to) : nullptr;
  if (!sp) {
    add_link_bytes(net, from, to, bytes, load);
    return;
  }
  const double total = sp->total_weight();
  add_link_bytes(net, from, to, bytes * sp->direct_weight / total, load);
  for (const Relay& r : sp->relays) {
    const double part = bytes * r.weight / total;
    add_link_bytes(net, from, r.via, part, load);
    add_link_bytes(net, r.via, to, part, load);
  }
}

}  // namespace

void add_link_bytes(const Network& net, int from, int to, double bytes, std::vector<double>& load) {
  load[link_resource(net, from, to)] += link_seconds(net, from, to, bytes);
  if (bytes <= 0) return;
  if (const double e = net.egress_cap(from); e > 0) load[egress_resource(net, from)] += bytes / e;
  if (const double g = net.ingress_cap(to); g > 0) load[ingress_resource(net, to)] += bytes / g;
}

double hop_latency(const Network& net, int from, int to, double chunk_bytes, const Plan* plan) {
  auto one = [&](int a, int b) { return chunk_seconds(net, a, b, chunk_bytes) + net.prop(a, b); };
  const LinkSplit* sp = plan ? plan->split_for(from, to) : nullptr;
  double lat = (!sp || sp->direct_weight > 0) ? one(from, to) : 0.0;
  if (sp)
    for (const Relay& r : sp->relays)
      if (r.weight > 0) lat = std::max(lat, one(from, r.via) + one(r.via, to));
  return lat;
}

void add_tree_load(const Network& net, const std::vector<SiteId>& parent, double bytes,
                   const Plan* plan, std::vector<double>& load) {
  if (bytes <= 0) return;
  for (int v = 0; v < net.n; ++v) {
    const SiteId p = parent[v];
    if (p == kNoSite) continue;
    add_edge_load(net, v, p, bytes, plan, load);  // reduce
    add_edge_load(net, p, v, bytes, plan, load);  // broadcast
    load[agg_resource(net, p)] += net.agg[p] > 0 ? bytes / net.agg[p] : kInf;
  }
}

double tree_latency(const Network& net, const std::vector<SiteId>& parent, int root,
                    double chunk_bytes, const Plan* plan) {
  const std::vector<int> depth = tree_depths(parent, root);
  if (depth.empty()) return kInf;
  // Visit sites by depth so a parent's path sums are ready before its children's.
  std::vector<int> order(net.n);
  for (int i = 0; i < net.n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return depth[a] < depth[b]; });
  std::vector<double> up(net.n, 0.0), down(net.n, 0.0);
  double max_up = 0, max_down = 0;
  for (int v : order) {
    const SiteId p = parent[v];
    if (p == kNoSite) continue;
    const double agg = net.agg[p] > 0 ? chunk_bytes / net.agg[p] : kInf;
    up[v] = up[p] + hop_latency(net, v, p, chunk_bytes, plan) + agg;
    down[v] = down[p] + hop_latency(net, p, v, chunk_bytes, plan);
    max_up = std::max(max_up, up[v]);
    max_down = std::max(max_down, down[v]);
  }
  return max_up + max_down;
}

RoundCost cost_of(const std::vector<double>& load, double latency_s) {
  RoundCost c;
  for (size_t r = 0; r < load.size(); ++r)
    if (load[r] > c.bottleneck_s) {
      c.bottleneck_s = load[r];
      c.bottleneck_resource = static_cast<int>(r);
    }
  c.latency_s = latency_s;
  c.total_s = c.bottleneck_s + latency_s;
  return c;
}

RoundCost round_time(const Network& net, const Plan& plan, double chunk_bytes) {
  std::vector<double> load(resource_count(net), 0.0);
  double lat = 0;
  for (const ShardTree& s : plan.shards) {
    if (s.bytes() == 0) continue;
    add_tree_load(net, s.parent, static_cast<double>(s.bytes()), &plan, load);
    lat = std::max(lat, tree_latency(net, s.parent, s.root, chunk_bytes, &plan));
  }
  return cost_of(load, lat);
}

}  // namespace sg::topo
