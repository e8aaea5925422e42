// The round-time metric every planner and baseline is scored by.
//
// Model (aggregation-aware, pipelined, shared links):
//   * Each shard s of B_s bytes is cut into chunks of c bytes. A leaf sends its chunks to
//     its parent; an inner site adds each child's chunk into its own (aggregator speed
//     agg[v] bytes/s per child chunk) and forwards the sum as soon as all children's copies
//     of that chunk arrived; the root then sends the total back down the reversed edges and
//     every site forwards it to its children. Reduce and broadcast overlap chunk by chunk.
//   * All shards run at once. Every directed link i->j is one server of bw[i][j] bytes/s;
//     every site's aggregator is one server; a site with an uplink cap (network.h) adds an
//     egress server fed by every byte it sends on any link and an ingress server fed by
//     every byte it receives (tree edges and relayed bytes alike). A multipath split sends
//     a fraction f of a link's bytes over from->via->to instead (both relay links carry f
//     of them, so the relay's ingress and egress do too; it only forwards, it does not add).
//   * A pipelined flow finishes when its busiest server has done all its work plus the
//     time for the first chunk to cross the deepest path:
//         T = max_resource( work_r / speed_r )                       (bottleneck term)
//           + max_s [ max_leaf up_s(leaf) + max_leaf down_s(leaf) ]  (fill/drain term)
//     where up_s(v) sums, over the hops from v to the root, c/bw + rtt/2 + c/agg(parent),
//     and down_s(v) sums c/bw + rtt/2 over the hops from the root to v (for a split hop,
//     the slowest of its paths; bw there is Network::path_bw, the link or a slower cap). The bottleneck term is a hard lower bound of any schedule;
//     the fill term is the latency of one chunk on the critical path. chunk_sim.h computes
//     the same round chunk by chunk with FIFO servers; tests keep the two within a stated
//     tolerance on small cases.
#pragma once

#include <vector>

#include "topology/network.h"
#include "topology/plan.h"

namespace sg::topo {

struct RoundCost {
  double total_s = 0;
  double bottleneck_s = 0;
  double latency_s = 0;
  int bottleneck_resource = -1;  // link_/agg_/egress_/ingress_resource() index
};

// Seconds of work each resource gets from one tree carrying `bytes` (added to `load`,
// sized resource_count(net)). `plan` supplies multipath splits; nullptr = none.
void add_tree_load(const Network& net, const std::vector<SiteId>& parent, double bytes,
                   const Plan* plan, std::vector<double>& load);
// Seconds of work `bytes` sent over the one physical link from->to gives that link and, where
// capped, the sender's egress and the receiver's ingress (added to `load`).
void add_link_bytes(const Network& net, int from, int to, double bytes, std::vector<double>& load);
// Fill/drain latency of one tree (the second term above).
double tree_latency(const Network& net, const std::vector<SiteId>& parent, int root,
                    double chunk_bytes, const Plan* plan);
// Latency of one chunk crossing from->to (direct or the slowest path of its split).
double hop_latency(const Network& net, int from, int to, double chunk_bytes, const Plan* plan);

// Bottleneck term over a load vector plus a latency.
RoundCost cost_of(const std::vector<double>& load, double latency_s);

// The metric for a whole plan (its trees, shard sizes and multipath splits).
RoundCost round_time(const Network& net, const Plan& plan, double chunk_bytes);

}  // namespace sg::topo
