// Ethernet II header with an optional single 802.1Q VLAN tag. Parse results are offsets
// into the caller's buffer: nothing is copied but the addresses.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "common/endian.h"
#include "wire/result.h"

namespace sg::wire {

using MacAddr = std::array<uint8_t, 6>;

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;

struct EthHeader {
  uint8_t dst[6];
  uint8_t src[6];
  be16 ethertype;
};
static_assert(sizeof(EthHeader) == 14 && alignof(EthHeader) == 1);

struct VlanTag {
  be16 tci;        // PCP(3) DEI(1) VID(12)
  be16 ethertype;  // the encapsulated type
};
static_assert(sizeof(VlanTag) == 4 && alignof(VlanTag) == 1);

struct EthInfo {
  MacAddr dst{};
  MacAddr src{};
  uint16_t ethertype = 0;  // inner type (after the VLAN tag if there is one)
  bool has_vlan = false;
  uint16_t vlan_tci = 0;
  uint16_t l3_offset = 0;  // where the L3 header starts in the parsed buffer
};

// Checks length; accepts untagged or one 802.1Q tag (a second tag -> kUnsupported).
Result<EthInfo> parse_ethernet(std::span<const uint8_t> frame);

struct EthSpec {
  MacAddr dst{};
  MacAddr src{};
  uint16_t ethertype = kEtherTypeIpv4;
  std::optional<uint16_t> vlan_tci;  // set -> an 802.1Q tag is written
};

constexpr size_t ethernet_header_len(const EthSpec& s) {
  return sizeof(EthHeader) + (s.vlan_tci ? sizeof(VlanTag) : 0);
}

// Writes the header at out[0..]; returns its length or kNoSpace.
Result<size_t> build_ethernet(std::span<uint8_t> out, const EthSpec& spec);

}  // namespace sg::wire
