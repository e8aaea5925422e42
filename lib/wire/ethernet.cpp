#include "wire/ethernet.h"

#include <cstring>

namespace sg::wire {

Result<EthInfo> parse_ethernet(std::span<const uint8_t> frame) {
  if (frame.size() < sizeof(EthHeader)) return WireError::kTruncated;
  const auto* h = reinterpret_cast<const EthHeader*>(frame.data());
  EthInfo info;
  std::memcpy(info.dst.data(), h->dst, 6);
  std::memcpy(info.src.data(), h->src, 6);
  info.ethertype = h->ethertype.load();
  info.l3_offset = sizeof(EthHeader);
  if (info.ethertype == kEtherTypeVlan) {
    if (frame.size() < sizeof(EthHeader) + sizeof(VlanTag)) return WireError::kTruncated;
    const auto* v = reinterpret_cast<const VlanTag*>(frame.data() + sizeof(EthHeader));
    info.has_vlan = true;
    info.vlan_tci = v->tci.load();
    info.ethertype = v->ethertype.load();
    info.l3_offset += sizeof(VlanTag);
    if (info.ethertype == kEtherTypeVlan || info.ethertype == 0x88a8) return WireError::kUnsupported;
  }
  return info;
}

Result<size_t> build_ethernet(std::span<uint8_t> out, const EthSpec& spec) {
  const size_t len = ethernet_header_len(spec);
  if (out.size() < len) return WireError::kNoSpace;
  auto* h = reinterpret_cast<EthHeader*>(out.data());
  std::memcpy(h->dst, spec.dst.data(), 6);
  std::memcpy(h->src, spec.src.data(), 6);
  if (spec.vlan_tci) {
    h->ethertype.store(kEtherTypeVlan);
    auto* v = reinterpret_cast<VlanTag*>(out.data() + sizeof(EthHeader));
    v->tci.store(*spec.vlan_tci);
    v->ethertype.store(spec.ethertype);
  } else {
    h->ethertype.store(spec.ethertype);
  }
  return len;
}

}  // namespace sg::wire
