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
  spec.udp = wire::UdpSpec{src_port, dst_port, true};
  return spec;
}

}  // namespace sg::dp
