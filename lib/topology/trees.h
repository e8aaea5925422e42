// Tree builders shared by the planners and the baselines. A tree is a parent array over all
// sites (parent[root] == kNoSite); reduce goes child->parent, broadcast parent->child.
#pragma once

#include <functional>
#include <vector>

#include "topology/network.h"

namespace sg::topo {

using Parents = std::vector<SiteId>;

// Prices of the sites' uplink caps (network.h), one per site each; empty = not priced.
struct UplinkPrices {
  std::vector<double> egress, ingress;
};

// Prim's algorithm grown from `root` where attaching u under p costs
//   price[u->p] / bw[u][p] + price[p->u] / bw[p][u] + agg_price[p] / agg[p]
//   + (capped sites only, with `uplink` prices) the edge's bytes through the uplinks:
//     egress[u]/eg(u) + ingress[p]/in(p)   (reduce u->p)
//     egress[p]/eg(p) + ingress[u]/in(u)   (broadcast p->u)
// (seconds-per-byte weighted by resource prices; see minmax_lp.h). A site's uplink load is
// its tree degree times the shard, so the uplink part is per edge as well: exact (an MST)
// for links and uplinks, greedy for the aggregation part. Sites are attached only under
// sites of depth < max_depth (max_depth >= 1); unusable links (bw <= 0) are never used.
Parents priced_prim(const Network& net, int root, const std::vector<double>& link_price,
                    const std::vector<double>& agg_price, int max_depth, const UplinkPrices* uplink = nullptr);
// The same with `lat_weight` times the edge's chunk latency (both directions, seconds)
// added to each attachment: a Lagrangian nudge toward low-latency (shallow, short) trees.
Parents priced_prim(const Network& net, int root, const std::vector<double>& link_price,
                    const std::vector<double>& agg_price, int max_depth, double chunk_bytes, double lat_weight,
                    const UplinkPrices* uplink = nullptr);

// The same growth, but an attachment is allowed only if the tree's fill latency
// (round_time.h: deepest up path + deepest down path, chunks of chunk_bytes) stays within
// lat_cap. O(n^3); returns an empty array if no such tree is found greedily.
Parents priced_prim_latency_capped(const Network& net, int root, const std::vector<double>& link_price,
                                   const std::vector<double>& agg_price, double chunk_bytes, double lat_cap,
                                   const UplinkPrices* uplink = nullptr);

// NetStorm's routing: every site reaches the root along the path with the smallest sum of
// 1/throughput (Dijkstra on the reduce direction).
Parents inverse_bw_shortest_path_tree(const Network& net, int root);

// One hop from every site to the root.
Parents star_tree(int n, int root);

// Bandwidth-blind binary tree: sites in the order root, root+1, ... (mod n) fill a heap.
Parents binary_tree(int n, int root);

// Calls `f` for every spanning tree rooted at `root` (n^(n-2) of them); for small n only.
void for_each_tree(int n, int root, const std::function<void(const Parents&)>& f);

}  // namespace sg::topo
