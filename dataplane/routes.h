// Routes to the peers: one per configured path, direct or through a relay site, each bound to
// a port and a next-hop slot of the neighbour table. Built once at start-up, shared read-only
// by every engine.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "dataplane/neighbours.h"
#include "dataplane/ports.h"

namespace sg::dp {

// One route to a peer: a path out of a port towards a next hop. A relayed route (via != 0)
// addresses the relay site's gateway (peer_ipv4, peer_udp_port are the relay's); the final
// destination travels in the DATA path_id (lib/wire/path_id.h).
struct PeerRoute {
  uint16_t peer_id = 0;
  uint32_t peer_ipv4 = 0;
  uint16_t peer_udp_port = 0;
  uint16_t port_index = 0;
  int nh_slot = -1;
  uint16_t src_udp_port = 0;
  uint8_t path_id = 0;   // config path id
  uint16_t via = 0;      // relay site id; 0: direct
};

// Builds the routes (direct and relayed paths; a path via a site that is not a configured
// peer, or to a destination id a path_id cannot name, is left out) and the next-hop slots.
std::vector<PeerRoute> build_routes(const config::GatewayConfig& cfg, const std::vector<Port>& ports,
                                    Neighbours& nbrs);

// The first direct route to `peer`, or null.
const PeerRoute* first_direct_route(const std::vector<PeerRoute>& routes, uint16_t peer);

}  // namespace sg::dp
