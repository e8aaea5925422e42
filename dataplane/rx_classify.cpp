// Receive classification: Ethernet (ours, right VLAN), ARP to arp.cpp, IPv4 and UDP checked
// (the NIC's checksum verdicts honoured), our LTP port to ltp_dispatch.cpp. Every frame that
// stops here is counted by reason and freed.
#include <rte_mbuf.h>

#include "dataplane/frame_build.h"
#include "dataplane/gateway_handler.h"
#include "wire/ipv4.h"
#include "wire/udp.h"

namespace sg::dp {

void GatewayHandler::handle_one_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, uint64_t now_tsc) {
  EngineCounters& c = io.counters();
  const Port& port = ports_[port_index];
  auto drop = [&](Drop why) {
    c.drop(why);
    rte_pktmbuf_free(m);
  };
  if (m->nb_segs != 1) return drop(Drop::kMultiSegment);
  std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
  auto eth = wire::parse_ethernet(frame);
  if (!eth) return drop(Drop::kRuntFrame);
  const bool to_us = eth->dst == to_wire(port.mac) || eth->dst == kBroadcastMac;
  const bool vlan_ok = port.vlan ? (eth->has_vlan && (eth->vlan_tci & 0x0fff) == port.vlan) : !eth->has_vlan;
  if (!to_us || !vlan_ok) return drop(Drop::kNotForUs);
  if (eth->ethertype == wire::kEtherTypeArp) return handle_arp_st(io, port_index, m, eth->l3_offset, now_tsc);
  if (eth->ethertype != wire::kEtherTypeIpv4) return drop(Drop::kUnknownEthertype);
  // The NIC may have checked the checksums already; a bad verdict from it is final.
  const uint64_t ipf = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  if (ipf == RTE_MBUF_F_RX_IP_CKSUM_BAD) return drop(Drop::kBadIpChecksum);
  auto ip = wire::parse_ipv4(frame.subspan(eth->l3_offset), ipf != RTE_MBUF_F_RX_IP_CKSUM_GOOD);
  if (!ip) return drop(ip.error() == wire::WireError::kBadChecksum ? Drop::kBadIpChecksum : Drop::kBadIpv4);
  if (ip->dst != port.ipv4) return drop(Drop::kNotForUs);
  if (ip->is_fragment) return drop(Drop::kBadIpv4);
  if (ip->proto != wire::kIpProtoUdp) return drop(Drop::kNotUdp);
  const size_t l4 = eth->l3_offset + ip->payload_offset;
  const uint64_t l4f = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
  auto udp = wire::parse_udp(frame.subspan(l4, ip->payload_len), ip->src, ip->dst, l4f != RTE_MBUF_F_RX_L4_CKSUM_GOOD);
  if (!udp || l4f == RTE_MBUF_F_RX_L4_CKSUM_BAD) return drop(Drop::kBadUdp);
  if (udp->dst_port != cfg_.transport.udp_port) return drop(Drop::kWrongUdpPort);
  handle_ltp_st(io, port_index, m, l4 + udp->payload_offset, udp->payload_len, Src{ip->src, udp->src_port, eth->src},
                now_tsc);
}

}  // namespace sg::dp
