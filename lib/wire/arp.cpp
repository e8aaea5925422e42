#include "wire/arp.h"

#include <cstring>

namespace sg::wire {

Result<ArpInfo> parse_arp(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(ArpPacket)) return WireError::kTruncated;
  const auto* a = reinterpret_cast<const ArpPacket*>(bytes.data());
  if (a->htype.load() != 1 || a->ptype.load() != kEtherTypeIpv4) return WireError::kUnsupported;
  if (a->hlen != 6 || a->plen != 4) return WireError::kBadLength;
  ArpInfo info;
  info.op = a->oper.load();
  if (info.op != kArpRequest && info.op != kArpReply) return WireError::kBadType;
  std::memcpy(info.sha.data(), a->sha, 6);
  std::memcpy(info.tha.data(), a->tha, 6);
  info.spa = a->spa.load();
  info.tpa = a->tpa.load();
  return info;
}

Result<size_t> build_arp(std::span<uint8_t> out, const ArpInfo& info) {
  if (out.size() < sizeof(ArpPacket)) return WireError::kNoSpace;
  auto* a = reinterpret_cast<ArpPacket*>(out.data());
  a->htype.store(1);
  a->ptype.store(kEtherTypeIpv4);
  a->hlen = 6;
  a->plen = 4;
  a->oper.store(info.op);
  std::memcpy(a->sha, info.sha.data(), 6);
  std::memcpy(a->tha, info.tha.data(), 6);
  a->spa.store(info.spa);
  a->tpa.store(info.tpa);
  return sizeof(ArpPacket);
}

}  // namespace sg::wire
