// Baselines scored by the same metric (round_time.h), each given its best honest setting
// (best root, best ring order, best number of roots) so that a win against them is real.
#pragma once

#include <cstdint>

#include "topology/network.h"
#include "topology/plan.h"
#include "topology/round_time.h"

namespace sg::topo {

// MXNet-like parameter server: every site sends its whole gradient to one site, which sums
// and sends the result back. The server site with the smallest round time is used.
Plan star_plan(const Network& net, uint64_t model_bytes, double chunk_bytes);

// Ring all-reduce (reduce-scatter then all-gather, one direction, pipelined in chunks):
// every ring link (and so every site's uplink, each way) carries 2(n-1)/n of the model,
// every site adds (n-1)/n of it, and a chunk crosses 2(n-1) consecutive hops. The best ring: every ring for n <= 8, otherwise
// the best of greedy widest-next-hop rings improved by 2-opt, in both directions.
RoundCost ring_allreduce_time(const Network& net, uint64_t model_bytes, double chunk_bytes);

// Bandwidth-blind trees: `shards` equal shards, shard s on a binary tree rooted at site
// s mod n over the sites in index order (how a system without measurements shards).
Plan blind_tree_plan(const Network& net, uint64_t model_bytes, int shards);

// NetStorm's published rule: per root r, every site routes along the smallest sum of
// 1/throughput; r scores 1 / sum_k 1/(slowest link into depth k); the best `roots` roots
// are kept and the model is split in proportion to their scores.
Plan netstorm_rule_plan(const Network& net, uint64_t model_bytes, int roots);
// The rule with its best root count in 1..max_roots by round_time (its most generous form).
Plan netstorm_rule_best(const Network& net, uint64_t model_bytes, int max_roots, double chunk_bytes);

}  // namespace sg::topo
