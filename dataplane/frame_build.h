// Frame building shared by every sender of the dataplane (LTP transmit, relay, ARP): MAC
// conversions between DPDK and lib/wire, and the Ethernet/IPv4/UDP spec of a frame leaving a
// port towards a next hop, written once.
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "dataplane/ports.h"
#include "wire/arp.h"
#include "wire/ethernet.h"
#include "wire/frame.h"

namespace sg::dp {

// Shortest Ethernet frame without its FCS: shorter frames are padded up to it.
inline constexpr size_t kMinEthFrame = RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN;
static_assert(kMinEthFrame == 60);
// Ethernet (untagged) + IPv4 (no options) + UDP headers in front of every LTP message.
inline constexpr size_t kUdpFrameOverhead = sizeof(wire::EthHeader) + sizeof(wire::Ipv4Header) + sizeof(wire::UdpHeader);
static_assert(kUdpFrameOverhead == 42);
// An ARP frame as we send it (request or reply), padded to the minimum.
inline constexpr size_t kArpFrameLen = std::max(sizeof(wire::EthHeader) + sizeof(wire::ArpPacket), kMinEthFrame);

inline constexpr wire::MacAddr kBroadcastMac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

inline wire::MacAddr to_wire(const rte_ether_addr& a) {
  wire::MacAddr m;
  std::copy(a.addr_bytes, a.addr_bytes + 6, m.begin());
  return m;
}
inline rte_ether_addr to_rte(const wire::MacAddr& m) {
  rte_ether_addr a;
  std::copy(m.begin(), m.end(), a.addr_bytes);
  return a;
}

// Ethernet header of a frame out of `port` to `dst` (the port's VLAN tag if it has one).
wire::EthSpec eth_spec(const Port& port, const wire::MacAddr& dst, uint16_t ethertype);

// Ethernet/IPv4/UDP spec of a frame out of `port` to next hop `nh`, addressed to
// dst_ip:dst_port from the port's address and src_port. Checksums: left to the NIC where the
// port offers TX checksum offload (Port::tx_*_cksum_offload), computed in software otherwise.
wire::UdpFrameSpec udp_spec(const Port& port, const rte_ether_addr& nh, uint32_t dst_ip, uint16_t src_port,
                            uint16_t dst_port);

// A sealed LTP message needs no UDP checksum: its AEAD tag covers every byte of the message,
// and the IPv4 header keeps its own. Where the port would compute it in software the field is
// left 0 ("no checksum", RFC 768, as VXLAN sends), which every receiver skips: 5-12% of a
// gateway's cycles on ports without checksum offload (perf/README, replay). A port that
// offloads it keeps it: free there.
inline void drop_sealed_udp_checksum(wire::UdpFrameSpec& spec) {
  if (spec.udp.checksum == wire::L4Checksum::kSoftware) spec.udp.checksum = wire::L4Checksum::kNone;
}

// After finish_udp_frame: tells the NIC which checksums of `m` (built from `spec`) it must
// fill in, by the mbuf's offload flags and header lengths. Nothing when spec offloads none.
void set_tx_offloads(rte_mbuf* m, const wire::UdpFrameSpec& spec);

}  // namespace sg::dp
