// Ports and mbuf pools from the config: probe each device, configure its queues, start it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <rte_ether.h>
#include <rte_mempool.h>

#include "config/config.h"

namespace sg::dp {

struct Port {
  std::string name;    // config name ("to-b")
  uint16_t id = 0;     // DPDK port id
  uint16_t rx_queues = 0, tx_queues = 0;
  rte_ether_addr mac{};
  uint32_t ipv4 = 0;   // host order
  uint8_t prefix_len = 24;
  uint32_t gateway = 0;  // host order, 0: none
  uint16_t vlan = 0;     // 0: untagged
  bool tx_ip_cksum_offload = false;
  bool tx_udp_cksum_offload = false;
  bool rx_cksum_offload = false;
};

// How many mbufs the pool needs: every descriptor full, every lcore cache full, every engine's
// TX buffers full, plus headroom for packets held by the transport. `override` (config) wins.
uint32_t mbufs_needed(const config::GatewayConfig& cfg, unsigned workers);
// mbuf data room (headroom included) that holds a whole frame of the largest port MTU.
uint16_t mbuf_data_room(const config::GatewayConfig& cfg);

// Creates the pool (name must be unique per process). Prints the reason and returns null on failure.
rte_mempool* create_pool(const std::string& name, uint32_t mbufs, uint16_t cache, uint16_t data_room);

// True when every mbuf is back in the pool (in the ring or in per-lcore caches): the leak check.
bool pool_full(const rte_mempool* pool);

// Probes, configures and starts every port of the config with `workers` queue pairs each used
// by at most one engine. Prints one line naming the port and the problem on failure.
bool setup_ports(const config::GatewayConfig& cfg, unsigned workers, rte_mempool* pool, std::vector<Port>& out);

// DPDK 22.11's memif driver unmaps a link's shared rings from its interrupt thread as soon as the
// peer disconnects, with no hand-off to the lcores: one inside rx_burst on that link then reads
// unmapped memory (a segfault, seen in scripts/demo about one run in six, when one gateway closed
// a moment before another had stopped polling). A gateway whose engines have stopped is out of
// harm's way, so a stopping gateway keeps its memif links open until every peer has closed its
// side or `grace` has passed: gateways that stop together (the demo, the two-process tests) then
// never close a link under a peer's engine. True if no memif peer is left connected.
bool await_memif_peers_gone(const std::vector<Port>& ports, uint32_t grace_ms);

// Stops and closes the ports (and removes probed virtual devices).
void teardown_ports(std::vector<Port>& ports);

}  // namespace sg::dp
