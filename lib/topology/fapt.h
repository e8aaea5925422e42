// Multi-root FAPT planning: roots, one tree per shard and the shard sizes that minimise
// round_time() (round_time.h), then a multipath split over links the trees leave idle.
//
// Both planners search mixtures of trees: for a fixed set of candidate trees the best shard
// sizes are an exact matrix game (minmax_lp.h), and the fill term is the largest latency of
// any tree in use, so they sweep a latency cap over the candidates and keep the best
// cap + bottleneck. The root set is whatever the chosen trees' roots are.
//   plan_exact  — every spanning tree of every root as a candidate (n <= 6: 7776 trees);
//                 the result is the optimum over all tree plans with any number of shards.
//   plan_fapt   — the fast heuristic: seeds (per-root MST on 1/bw, depth-2 trees,
//                 NetStorm's shortest-path trees, stars), then column generation whose
//                 pricing is a price-weighted Prim from every root, then at most
//                 max_shards trees. Polynomial: ~O(rounds * n^3).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "topology/network.h"
#include "topology/plan.h"
#include "topology/trees.h"

namespace sg::topo {

struct PlannerOptions {
  int max_shards = 12;              // at most this many trees in a heuristic plan
  double chunk_bytes = 256.0 * 1024;
  uint64_t align_bytes = 4;         // shard boundaries fall on multiples of this (one float)
  bool multipath = true;            // add relays over idle links after planning trees
  int max_relays = 2;               // per split link
  int pricing_rounds = 12;          // column-generation rounds of the heuristic
};

inline constexpr int kExactMaxSites = 6;

Plan plan_fapt(const Network& net, uint64_t model_bytes, const PlannerOptions& opt = {});
// Requires net.n <= kExactMaxSites. Shard count is not capped (the optimum decides it).
Plan plan_exact(const Network& net, uint64_t model_bytes, const PlannerOptions& opt = {});

// Turns (tree, root, share) triples into a valid Plan: shares scaled to model_bytes on
// align_bytes boundaries, zero-byte shards dropped, no splits or codecs.
struct WeightedTree {
  Parents parent;
  int root = 0;
  double share = 0;
};
Plan plan_from_trees(int n, uint64_t model_bytes, const std::vector<WeightedTree>& trees,
                     uint64_t align_bytes);

}  // namespace sg::topo
