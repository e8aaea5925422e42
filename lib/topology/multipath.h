// Multipath split: for the busiest tree links, relays over links no tree uses.
//
// Links are visited from the most loaded down (down to half the bottleneck). For link u->v
// each candidate relay w needs u->w and w->v both idle and not yet claimed by another
// split; up to max_relays of them, fastest min(bw[u][w], bw[w][v]) first, are claimed. The
// link's chunks are dealt in proportion to throughput (bw[u][v] direct, min(...) per relay),
// which equalises the finishing time of the paths when the relay links carry nothing else.
// A relay site with an uplink cap (network.h) forwards the relayed bytes through it both
// ways, after the tree traffic it already has there: the link's finishing time is then the
// earliest at which all paths together carry its bytes, and each path's weight is what it
// carries by then (a relay whose uplink the trees fill gets none). A split is kept only if
// it lowers round_time() (a relay adds a hop of latency, and its bytes load the relay's
// uplink); splitting cannot relieve the ends' own uplinks, which carry the bytes either way.
#pragma once

#include "topology/network.h"
#include "topology/plan.h"

namespace sg::topo {

// Adds splits to `plan` (replacing any it had). Returns how many links were split.
int add_multipath(const Network& net, Plan& plan, int max_relays, double chunk_bytes);

}  // namespace sg::topo
