// UDP header with the IPv4 pseudo-header checksum (RFC 768). A zero checksum means
// "not computed" on IPv4 and is accepted; a computed zero is sent as 0xffff.
#pragma once

#include <cstdint>
#include <span>

#include "common/endian.h"
#include "wire/result.h"

namespace sg::wire {

struct UdpHeader {
  be16 src_port;
  be16 dst_port;
  be16 length;  // header + payload
  be16 checksum;
};
static_assert(sizeof(UdpHeader) == 8 && alignof(UdpHeader) == 1);

struct UdpInfo {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint16_t length = 0;
  bool checksum_present = false;
  uint16_t payload_offset = 0;  // == 8, relative to the parsed span
  uint16_t payload_len = 0;
};

// Checksum over pseudo-header + the whole segment (header + payload); the stored
// checksum field takes part, so a correct segment sums to 0 (returned as 0).
uint16_t udp_checksum(uint32_t src_ip, uint32_t dst_ip, std::span<const uint8_t> segment);

// `segment` starts at the UDP header and is the IPv4 payload (exactly). UDP length must be
// within it; bytes after length are ignored.
Result<UdpInfo> parse_udp(std::span<const uint8_t> segment, uint32_t src_ip, uint32_t dst_ip,
                          bool verify_checksum = true);

// Who computes the UDP checksum of a frame we build.
enum class L4Checksum : uint8_t {
  kSoftware,  // computed here over the whole segment
  kOffload,   // the NIC computes it: the field holds the pseudo-header sum it starts from
  kNone,      // zero: no checksum (allowed on IPv4)
};

struct UdpSpec {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  L4Checksum checksum = L4Checksum::kSoftware;
  // kSoftware: the segment's last tail_len bytes have the folded sum tail_sum (csum_fold),
  // known to the caller, so only the bytes before them are read (a payload sent to several
  // receivers is summed once). Used only where the tail starts at an even offset.
  uint16_t tail_len = 0;
  uint16_t tail_sum = 0;
};

// The pseudo-header part of a UDP checksum (addresses, protocol, length), folded to 16 bits
// and not complemented: what a NIC's checksum offload expects in the field.
uint16_t udp_pseudo_header_sum(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_len);

// The payload must already be in place at out[8 .. 8+payload_len): writes the header and
// checksum around it without moving it.
Result<size_t> build_udp(std::span<uint8_t> out, const UdpSpec& spec, uint32_t src_ip,
                         uint32_t dst_ip, uint16_t payload_len);

}  // namespace sg::wire
