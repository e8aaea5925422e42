#include "dataplane/frame_build.h"

namespace sg::dp {

wire::EthSpec eth_spec(const Port& port, const wire::MacAddr& dst, uint16_t ethertype) {
  wire::EthSpec es{dst, to_wire(port.mac), ethertype, {}};
  if (port.vlan) es.vlan_tci = port.vlan;
  return es;
}

wire::UdpFrameSpec udp_spec(const Port& port, const rte_ether_addr& nh, uint32_t dst_ip, uint16_t src_port,
                            uint16_t dst_port) {
  wire::UdpFrameSpec spec;
  spec.eth = eth_spec(port, to_wire(nh), wire::kEtherTypeIpv4);
  spec.ip.src = port.ipv4;
  spec.ip.dst = dst_ip;
  spec.ip.checksum = !port.tx_ip_cksum_offload;
  spec.udp = wire::UdpSpec{src_port, dst_port,
                           port.tx_udp_cksum_offload ? wire::L4Checksum::kOffload : wire::L4Checksum::kSoftware};
  return spec;
}

void set_tx_offloads(rte_mbuf* m, const wire::UdpFrameSpec& spec) {
  const bool ip = !spec.ip.checksum;
  const bool udp = spec.udp.checksum == wire::L4Checksum::kOffload;
  if (!ip && !udp) return;
  m->l2_len = static_cast<uint8_t>(wire::ethernet_header_len(spec.eth));
  m->l3_len = sizeof(wire::Ipv4Header);
  m->ol_flags |= RTE_MBUF_F_TX_IPV4 | (ip ? RTE_MBUF_F_TX_IP_CKSUM : 0) | (udp ? RTE_MBUF_F_TX_UDP_CKSUM : 0);
}

}  // namespace sg::dp
