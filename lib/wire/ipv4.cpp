#include "wire/ipv4.h"

#include "wire/checksum.h"

namespace sg::wire {

uint16_t ipv4_header_checksum(std::span<const uint8_t> header) { return internet_checksum(header); }

Result<Ipv4Info> parse_ipv4(std::span<const uint8_t> bytes, bool verify_checksum) {
  if (bytes.size() < sizeof(Ipv4Header)) return WireError::kTruncated;
  const auto* h = reinterpret_cast<const Ipv4Header*>(bytes.data());
  if ((h->ver_ihl >> 4) != 4) return WireError::kBadVersion;
  Ipv4Info info;
  info.header_len = static_cast<uint16_t>((h->ver_ihl & 0x0f) * 4);
  if (info.header_len < sizeof(Ipv4Header)) return WireError::kBadLength;
  if (bytes.size() < info.header_len) return WireError::kTruncated;
  info.total_len = h->total_len.load();
  if (info.total_len < info.header_len) return WireError::kBadLength;
  if (info.total_len > bytes.size()) return WireError::kTruncated;
  if (verify_checksum && ipv4_header_checksum(bytes.first(info.header_len)) != 0) {
    return WireError::kBadChecksum;
  }
  const uint16_t frag = h->frag.load();
  info.is_fragment = (frag & kIpv4FlagMf) != 0 || (frag & kIpv4OffsetMask) != 0;
  info.src = h->src.load();
  info.dst = h->dst.load();
  info.proto = h->proto;
  info.ttl = h->ttl;
  info.tos = h->tos;
  info.payload_offset = info.header_len;
  info.payload_len = static_cast<uint16_t>(info.total_len - info.header_len);
  return info;
}

Result<size_t> build_ipv4(std::span<uint8_t> out, const Ipv4Spec& spec, uint16_t payload_len) {
  if (out.size() < sizeof(Ipv4Header)) return WireError::kNoSpace;
  if (payload_len > 0xffff - sizeof(Ipv4Header)) return WireError::kBadLength;
  auto* h = reinterpret_cast<Ipv4Header*>(out.data());
  h->ver_ihl = 0x45;
  h->tos = spec.tos;
  h->total_len.store(static_cast<uint16_t>(sizeof(Ipv4Header) + payload_len));
  h->id.store(spec.id);
  h->frag.store(spec.dont_fragment ? kIpv4FlagDf : 0);
  h->ttl = spec.ttl;
  h->proto = spec.proto;
  h->checksum.store(0);
  h->src.store(spec.src);
  h->dst.store(spec.dst);
  if (spec.checksum) h->checksum.store(ipv4_header_checksum(out.first(sizeof(Ipv4Header))));
  return sizeof(Ipv4Header);
}

}  // namespace sg::wire
