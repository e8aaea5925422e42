// Per-engine counters. Written only by the owning lcore (plain load+store, no lock prefix),
// read by the control thread at any time; a reader may see a value one update old, never torn
// (aligned 64-bit stores are atomic on the platforms DPDK supports; std::atomic says so).
#pragma once

#include <cstdint>

#include "common/counter.h"

namespace sg::dp {

using sg::Counter;  // lib/common/counter.h: one writer, any reader

// Why a received packet was dropped. Names are exported by telemetry (drop_reason_name).
enum class Drop : uint8_t {
  kRuntFrame,       // shorter than an Ethernet header
  kMultiSegment,    // chained mbuf: we configure no scatter, so a peer sent a jumbo we cannot take
  kNotForUs,        // wrong destination MAC, VLAN or IPv4 address
  kUnknownEthertype,
  kBadArp,
  kBadIpv4,         // version, header length, total length, fragment
  kBadIpChecksum,
  kNotUdp,
  kBadUdp,          // length or checksum
  kWrongUdpPort,
  kBadLtp,          // LTP header or payload failed validation
  kLtpRefused,      // valid but refused by the transport (stale round, duplicate, table full)
  kNoRoute,         // no neighbour entry for the next hop yet
  kImpairment,      // dropped on purpose by the configured impairment layer
  kUnauthenticated, // LTP that did not authenticate, or from a source not admitted (ltp_counters.h)
  kCount
};

const char* drop_reason_name(Drop d);

struct alignas(64) EngineCounters {
  Counter rx_packets, rx_bytes, tx_packets, tx_bytes;
  Counter tx_dropped;   // rte_eth_tx_burst did not take them: freed and counted
  Counter idle_sleeps;  // times the poll loop backed off
  Counter polls;
  Counter drops[static_cast<size_t>(Drop::kCount)];

  void drop(Drop d) { drops[static_cast<size_t>(d)].add(); }
  uint64_t total_drops() const {
    uint64_t s = 0;
    for (const auto& c : drops) s += c.get();
    return s;
  }
};

}  // namespace sg::dp
