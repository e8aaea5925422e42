// IPv4 header: validating parse (version, IHL, total length, checksum) and a builder that
// computes the header checksum. Offsets in the result are relative to the parsed span.
#pragma once

#include <cstdint>
#include <span>

#include "common/endian.h"
#include "wire/result.h"

namespace sg::wire {

inline constexpr uint8_t kIpProtoUdp = 17;

struct Ipv4Header {
  uint8_t ver_ihl;  // version (4) << 4 | header length in 32-bit words
  uint8_t tos;
  be16 total_len;   // header + payload, bytes
  be16 id;
  be16 frag;        // flags(3) | fragment offset(13)
  uint8_t ttl;
  uint8_t proto;
  be16 checksum;
  be32 src;
  be32 dst;
};
static_assert(sizeof(Ipv4Header) == 20 && alignof(Ipv4Header) == 1);
inline constexpr size_t kIpv4MaxHeaderLen = 60;
inline constexpr uint16_t kIpv4FlagDf = 0x4000;
inline constexpr uint16_t kIpv4FlagMf = 0x2000;
inline constexpr uint16_t kIpv4OffsetMask = 0x1fff;

struct Ipv4Info {
  uint32_t src = 0;  // host order
  uint32_t dst = 0;
  uint8_t proto = 0;
  uint8_t ttl = 0;
  uint8_t tos = 0;
  bool is_fragment = false;  // MF set or offset != 0: we never reassemble
  uint16_t header_len = 0;
  uint16_t total_len = 0;
  uint16_t payload_offset = 0;  // == header_len: where L4 starts in the parsed span
  uint16_t payload_len = 0;     // total_len - header_len (Ethernet padding excluded)
};

// The stored checksum of a header whose checksum field is already zero, or the check
// value: over a correct header (field included) it returns 0.
uint16_t ipv4_header_checksum(std::span<const uint8_t> header);

// `bytes` starts at the IPv4 header and may extend past total_len (link padding).
Result<Ipv4Info> parse_ipv4(std::span<const uint8_t> bytes, bool verify_checksum = true);

struct Ipv4Spec {
  uint32_t src = 0;
  uint32_t dst = 0;
  uint8_t proto = kIpProtoUdp;
  uint8_t ttl = 64;
  uint8_t tos = 0;
  uint16_t id = 0;
  bool dont_fragment = true;
  bool checksum = true;  // false: left zero for the NIC's checksum offload
};

// Writes a 20-byte header (no options) with checksum for `payload_len` bytes of payload.
Result<size_t> build_ipv4(std::span<uint8_t> out, const Ipv4Spec& spec, uint16_t payload_len);

}  // namespace sg::wire
