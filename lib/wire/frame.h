// A whole Ethernet[/VLAN]/IPv4/UDP frame at once: what the dataplane does per mbuf.
// Parse gives offsets into the frame (payload stays where it is); build writes the headers
// around a payload the caller already placed at udp_frame_headroom().
#pragma once

#include <cstdint>
#include <span>

#include "wire/ethernet.h"
#include "wire/ipv4.h"
#include "wire/result.h"
#include "wire/udp.h"

namespace sg::wire {

struct UdpFrame {
  EthInfo eth;
  Ipv4Info ip;
  UdpInfo udp;
  size_t l3_offset = 0;       // from the start of the frame
  size_t l4_offset = 0;
  size_t payload_offset = 0;  // UDP payload
  size_t payload_len = 0;
};

struct FrameChecks {
  bool ipv4_checksum = true;  // false when the NIC verified it (RX offload flag)
  bool udp_checksum = true;
};

// Not IPv4 -> kBadType; not UDP -> kUnsupported; IP fragment -> kUnsupported.
Result<UdpFrame> parse_udp_frame(std::span<const uint8_t> frame, FrameChecks checks = {});

// Mutable payload view of a parsed frame (same buffer, no copy).
inline std::span<uint8_t> frame_payload(std::span<uint8_t> frame, const UdpFrame& f) {
  return frame.subspan(f.payload_offset, f.payload_len);
}
inline std::span<const uint8_t> frame_payload(std::span<const uint8_t> frame, const UdpFrame& f) {
  return frame.subspan(f.payload_offset, f.payload_len);
}

struct UdpFrameSpec {
  EthSpec eth;  // ethertype is forced to IPv4
  Ipv4Spec ip;
  UdpSpec udp;
};

constexpr size_t udp_frame_headroom(const UdpFrameSpec& s) {
  return ethernet_header_len(s.eth) + sizeof(Ipv4Header) + sizeof(UdpHeader);
}

// Cuts a received frame's UDP payload to its first new_len bytes in place (a trailer removed
// after it was checked): IPv4 total length and checksum, UDP length; the UDP checksum becomes
// 0 ("none", RFC 768), since the payload it covered has changed. kBadLength if new_len is not
// shorter than the payload.
Result<size_t> shrink_udp_payload(std::span<uint8_t> frame, const UdpFrame& f, size_t new_len);

// Payload must already be at frame[udp_frame_headroom(spec) ..]. Returns the frame length.
Result<size_t> finish_udp_frame(std::span<uint8_t> frame, const UdpFrameSpec& spec, size_t payload_len);

}  // namespace sg::wire
