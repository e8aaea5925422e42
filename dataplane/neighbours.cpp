#include "dataplane/neighbours.h"

namespace sg::dp {
namespace {
uint64_t pack(const rte_ether_addr& m) {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v = (v << 8) | m.addr_bytes[i];
  return v;
}
}  // namespace

int Neighbours::add_slot(uint32_t ipv4, uint16_t port_index, const rte_ether_addr* static_mac) {
  int s = find(ipv4, port_index);
  if (s < 0) {
    slots_.emplace_back();
    s = static_cast<int>(slots_.size() - 1);
    slots_[s].ipv4 = ipv4;
    slots_[s].port_index = port_index;
  }
  if (static_mac) {
    slots_[s].is_static = true;
    slots_[s].mac.store(pack(*static_mac) | kValid);
  }
  return s;
}

int Neighbours::find(uint32_t ipv4, uint16_t port_index) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].ipv4 == ipv4 && slots_[i].port_index == port_index) return static_cast<int>(i);
  return -1;
}

bool Neighbours::learn_st(uint32_t ipv4, uint16_t port_index, const rte_ether_addr& mac, uint64_t now_tsc) {
  const int s = find(ipv4, port_index);
  if (s < 0 || slots_[s].is_static) return false;  // only addresses we asked about: no cache poisoning by strangers
  const uint64_t v = pack(mac) | kValid;
  slots_[s].learned_tsc.store(now_tsc, std::memory_order_relaxed);
  return slots_[s].mac.exchange(v, std::memory_order_acq_rel) != v;
}

}  // namespace sg::dp
