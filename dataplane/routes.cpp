#include "dataplane/routes.h"

#include <algorithm>

#include "config/load.h"
#include "wire/path_id.h"

namespace sg::dp {
namespace {

bool in_subnet(uint32_t a, uint32_t b, uint8_t prefix) {
  const uint32_t mask = prefix >= 32 ? ~0u : ~((1u << (32 - prefix)) - 1);
  return (a & mask) == (b & mask);
}

}  // namespace

std::vector<PeerRoute> build_routes(const config::GatewayConfig& cfg, const std::vector<Port>& ports,
                                    Neighbours& nbrs) {
  std::vector<PeerRoute> routes;
  for (const auto& peer : cfg.peers) {
    for (const auto& path : peer.paths) {
      // A relayed path is sent to the relay's gateway: its address and UDP port.
      const config::PeerConfig* hop = &peer;
      if (path.via) {
        hop = nullptr;
        for (const auto& p : cfg.peers)
          if (p.id == *path.via && p.id != peer.id) hop = &p;
        if (!hop || peer.id > wire::kMaxRelayedSite) continue;
      }
      PeerRoute r;
      r.peer_id = peer.id;
      r.via = path.via.value_or(0);
      r.peer_ipv4 = hop->address.host_order;
      r.peer_udp_port = hop->udp_port;
      r.path_id = path.id;
      for (uint16_t i = 0; i < ports.size(); ++i)
        if (ports[i].name == path.port) r.port_index = i;
      const Port& port = ports[r.port_index];
      const bool onlink = in_subnet(port.ipv4, r.peer_ipv4, port.prefix_len) || port.gateway == 0;
      const uint32_t nh = onlink ? r.peer_ipv4 : port.gateway;
      rte_ether_addr smac;
      const bool has_static = onlink && hop->mac.has_value();
      if (has_static) std::copy(hop->mac->bytes.begin(), hop->mac->bytes.end(), smac.addr_bytes);
      r.nh_slot = nbrs.add_slot(nh, r.port_index, has_static ? &smac : nullptr);
      r.src_udp_port = static_cast<uint16_t>(config::udp_src_port(cfg, path));  // validated: fits
      routes.push_back(r);
    }
  }
  return routes;
}

const PeerRoute* first_direct_route(const std::vector<PeerRoute>& routes, uint16_t peer) {
  for (const auto& r : routes)
    if (r.peer_id == peer && !r.via) return &r;
  return nullptr;
}

}  // namespace sg::dp
