// Next-hop MAC addresses. One writer (engine 0, which receives ARP: non-IP frames are not
// spread by RSS), any number of readers (every engine), no lock: each entry's MAC and valid
// bit sit in one 64-bit atomic. The table is sized at start-up from the peers and never grows.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <rte_ether.h>

namespace sg::dp {

class Neighbours {
 public:
  // One slot per distinct next-hop address; static entries (config peers[].mac) are valid forever.
  int add_slot(uint32_t ipv4, uint16_t port_index, const rte_ether_addr* static_mac);
  int find(uint32_t ipv4, uint16_t port_index) const;
  size_t size() const { return slots_.size(); }

  // Readers: any lcore.
  bool lookup(int slot, rte_ether_addr& mac) const {
    const uint64_t v = slots_[slot].mac.load(std::memory_order_acquire);
    if (!(v & kValid)) return false;
    for (int i = 0; i < 6; ++i) mac.addr_bytes[i] = static_cast<uint8_t>(v >> (8 * (5 - i)));
    return true;
  }
  uint32_t ipv4(int slot) const { return slots_[slot].ipv4; }
  uint16_t port_index(int slot) const { return slots_[slot].port_index; }
  bool is_static(int slot) const { return slots_[slot].is_static; }

  // Writer: engine 0 only. Returns true if the slot changed.
  bool learn_st(uint32_t ipv4, uint16_t port_index, const rte_ether_addr& mac, uint64_t now_tsc);
  uint64_t learned_tsc(int slot) const { return slots_[slot].learned_tsc.load(std::memory_order_relaxed); }
  void expire_st(int slot) { if (!slots_[slot].is_static) slots_[slot].mac.store(0, std::memory_order_release); }

 private:
  static constexpr uint64_t kValid = 1ull << 63;
  struct Slot {
    uint32_t ipv4 = 0;
    uint16_t port_index = 0;
    bool is_static = false;
    std::atomic<uint64_t> mac{0};
    std::atomic<uint64_t> learned_tsc{0};
    Slot() = default;
    Slot(const Slot& o) : ipv4(o.ipv4), port_index(o.port_index), is_static(o.is_static), mac(o.mac.load()), learned_tsc(o.learned_tsc.load()) {}
  };
  std::vector<Slot> slots_;
};

}  // namespace sg::dp
