#include "wire/udp.h"

#include "wire/checksum.h"
#include "wire/ipv4.h"

namespace sg::wire {

namespace {

uint64_t pseudo_header_acc(uint32_t src_ip, uint32_t dst_ip, size_t udp_len) {
  return uint64_t{src_ip >> 16} + (src_ip & 0xffff) + (dst_ip >> 16) + (dst_ip & 0xffff) + kIpProtoUdp + udp_len;
}

}  // namespace

uint16_t udp_checksum(uint32_t src_ip, uint32_t dst_ip, std::span<const uint8_t> segment) {
  return csum_finish(csum_add(segment, pseudo_header_acc(src_ip, dst_ip, segment.size())));
}

uint16_t udp_pseudo_header_sum(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_len) {
  // csum_finish complements; undo it to keep the plain folded sum.
  return static_cast<uint16_t>(~csum_finish(pseudo_header_acc(src_ip, dst_ip, udp_len)));
}

Result<UdpInfo> parse_udp(std::span<const uint8_t> segment, uint32_t src_ip, uint32_t dst_ip,
                          bool verify_checksum) {
  if (segment.size() < sizeof(UdpHeader)) return WireError::kTruncated;
  const auto* h = reinterpret_cast<const UdpHeader*>(segment.data());
  UdpInfo info;
  info.length = h->length.load();
  if (info.length < sizeof(UdpHeader)) return WireError::kBadLength;
  if (info.length > segment.size()) return WireError::kTruncated;
  info.src_port = h->src_port.load();
  info.dst_port = h->dst_port.load();
  info.checksum_present = h->checksum.load() != 0;
  if (verify_checksum && info.checksum_present &&
      udp_checksum(src_ip, dst_ip, segment.first(info.length)) != 0) {
    return WireError::kBadChecksum;
  }
  info.payload_offset = sizeof(UdpHeader);
  info.payload_len = static_cast<uint16_t>(info.length - sizeof(UdpHeader));
  return info;
}

Result<size_t> build_udp(std::span<uint8_t> out, const UdpSpec& spec, uint32_t src_ip,
                         uint32_t dst_ip, uint16_t payload_len) {
  if (payload_len > 0xffff - sizeof(UdpHeader)) return WireError::kBadLength;
  const size_t len = sizeof(UdpHeader) + payload_len;
  if (out.size() < len) return WireError::kNoSpace;
  auto* h = reinterpret_cast<UdpHeader*>(out.data());
  h->src_port.store(spec.src_port);
  h->dst_port.store(spec.dst_port);
  h->length.store(static_cast<uint16_t>(len));
  h->checksum.store(0);
  switch (spec.checksum) {
    case L4Checksum::kSoftware: {
      const size_t head = len - spec.tail_len;
      const uint16_t c =
          spec.tail_len > 0 && spec.tail_len <= payload_len && head % 2 == 0
              ? csum_finish(csum_add(out.first(head), pseudo_header_acc(src_ip, dst_ip, len)) + spec.tail_sum)
              : udp_checksum(src_ip, dst_ip, out.first(len));
      h->checksum.store(c == 0 ? 0xffff : c);
      break;
    }
    case L4Checksum::kOffload: h->checksum.store(udp_pseudo_header_sum(src_ip, dst_ip, static_cast<uint16_t>(len))); break;
    case L4Checksum::kNone: break;
  }
  return len;
}

}  // namespace sg::wire
