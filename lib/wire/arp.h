// ARP for IPv4 over Ethernet (RFC 826): the only hardware/protocol pair we answer.
#pragma once

#include <cstdint>
#include <span>

#include "common/endian.h"
#include "wire/ethernet.h"
#include "wire/result.h"

namespace sg::wire {

inline constexpr uint16_t kArpRequest = 1;
inline constexpr uint16_t kArpReply = 2;

struct ArpPacket {
  be16 htype;  // 1 = Ethernet
  be16 ptype;  // 0x0800 = IPv4
  uint8_t hlen;  // 6
  uint8_t plen;  // 4
  be16 oper;
  uint8_t sha[6];
  be32 spa;
  uint8_t tha[6];
  be32 tpa;
};
static_assert(sizeof(ArpPacket) == 28 && alignof(ArpPacket) == 1);

struct ArpInfo {
  uint16_t op = kArpRequest;
  MacAddr sha{};
  uint32_t spa = 0;  // IPv4 addresses in host order
  MacAddr tha{};
  uint32_t tpa = 0;
};

// Rejects anything but Ethernet/IPv4 request or reply. `bytes` starts at the ARP header.
Result<ArpInfo> parse_arp(std::span<const uint8_t> bytes);
Result<size_t> build_arp(std::span<uint8_t> out, const ArpInfo& info);

}  // namespace sg::wire
