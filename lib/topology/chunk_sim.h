// Exact chunk-level event computation of one round under a Plan, the reference that the
// analytic metric (round_time.h) is tested against. Every directed link and every site's
// aggregator is a server (service = bytes / speed) that serves waiting chunks lowest chunk
// index first (a sender interleaving its shards and phases; plain FIFO would let one
// shard's whole batch starve the others); a link's chunk arrives rtt/2 after it leaves the
// server. A site with an uplink cap adds an egress server before every link it sends on
// and an ingress server after every link it receives on (store and forward per chunk, so
// a capped hop takes a little longer to fill than the metric's cut-through c/path_bw).
// Split links deal chunks to paths by smooth weighted round robin. Slow (events for every
// chunk hop): for tests and small cases only.
#pragma once

#include "topology/network.h"
#include "topology/plan.h"

namespace sg::topo {

// Seconds from round start until every site holds every chunk of every shard's total.
double simulate_round(const Network& net, const Plan& plan, double chunk_bytes);

}  // namespace sg::topo
