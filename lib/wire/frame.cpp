#include "wire/frame.h"

#include "wire/checksum.h"

namespace sg::wire {

Result<UdpFrame> parse_udp_frame(std::span<const uint8_t> frame, FrameChecks checks) {
  UdpFrame f;
  auto eth = parse_ethernet(frame);
  if (!eth) return eth.error();
  f.eth = *eth;
  if (f.eth.ethertype != kEtherTypeIpv4) return WireError::kBadType;
  f.l3_offset = f.eth.l3_offset;
  auto ip = parse_ipv4(frame.subspan(f.l3_offset), checks.ipv4_checksum);
  if (!ip) return ip.error();
  f.ip = *ip;
  if (f.ip.proto != kIpProtoUdp || f.ip.is_fragment) return WireError::kUnsupported;
  f.l4_offset = f.l3_offset + f.ip.header_len;
  auto udp = parse_udp(frame.subspan(f.l4_offset, f.ip.payload_len), f.ip.src, f.ip.dst, checks.udp_checksum);
  if (!udp) return udp.error();
  f.udp = *udp;
  f.payload_offset = f.l4_offset + sizeof(UdpHeader);
  f.payload_len = f.udp.payload_len;
  return f;
}

Result<size_t> shrink_udp_payload(std::span<uint8_t> frame, const UdpFrame& f, size_t new_len) {
  if (new_len > f.payload_len || f.payload_offset + f.payload_len > frame.size() ||
      f.l4_offset + sizeof(UdpHeader) > frame.size() || f.l3_offset + sizeof(Ipv4Header) > frame.size())
    return WireError::kBadLength;
  const size_t cut = f.payload_len - new_len;
  auto* ip = reinterpret_cast<Ipv4Header*>(frame.data() + f.l3_offset);
  ip->total_len.store(static_cast<uint16_t>(ip->total_len.load() - cut));
  ip->checksum.store(0);
  ip->checksum.store(internet_checksum(frame.subspan(f.l3_offset, f.ip.header_len)));
  auto* udp = reinterpret_cast<UdpHeader*>(frame.data() + f.l4_offset);
  udp->length.store(static_cast<uint16_t>(sizeof(UdpHeader) + new_len));
  udp->checksum.store(0);
  return f.payload_offset + new_len;
}

Result<size_t> finish_udp_frame(std::span<uint8_t> frame, const UdpFrameSpec& spec, size_t payload_len) {
  const size_t head = udp_frame_headroom(spec);
  if (payload_len > 0xffff - sizeof(Ipv4Header) - sizeof(UdpHeader)) return WireError::kBadLength;
  if (frame.size() < head + payload_len) return WireError::kNoSpace;
  EthSpec eth = spec.eth;
  eth.ethertype = kEtherTypeIpv4;
  auto e = build_ethernet(frame, eth);
  if (!e) return e.error();
  const size_t l4 = *e + sizeof(Ipv4Header);
  auto u = build_udp(frame.subspan(l4), spec.udp, spec.ip.src, spec.ip.dst, static_cast<uint16_t>(payload_len));
  if (!u) return u.error();
  auto ip = build_ipv4(frame.subspan(*e), spec.ip, static_cast<uint16_t>(*u));
  if (!ip) return ip.error();
  return head + payload_len;
}

}  // namespace sg::wire
