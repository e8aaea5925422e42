#include "ltp/link_board.h"

#include <algorithm>

namespace sg::ltp {

LinkBoard::LinkBoard(uint32_t max_groups, bool shared)
    : shared_(shared), max_groups_(std::max<uint32_t>(max_groups, 1)), groups_(new Group[max_groups_]) {}

int32_t LinkBoard::join() {
  const int32_t i = members_.fetch_add(1, std::memory_order_relaxed);
  if (i < static_cast<int32_t>(kMaxMembers)) return i;
  members_.fetch_sub(1, std::memory_order_relaxed);
  return -1;
}

LinkBoard::Group* LinkBoard::find(uint64_t key) {
  for (uint32_t i = 0; i < max_groups_; ++i)
    if (groups_[i].key.load(std::memory_order_acquire) == key) return &groups_[i];
  return nullptr;
}

bool LinkBoard::open_group(uint64_t key, uint32_t weight) {
  if (key == kNoKey) return false;
  if (find(key)) return false;
  Group* free = find(kNoKey);
  if (!free) return false;
  free->weight.store(weight, std::memory_order_relaxed);
  free->flows.store(0, std::memory_order_relaxed);
  free->backlogged.store(0, std::memory_order_relaxed);
  free->key.store(key, std::memory_order_release);  // engines find it from here on
  return true;
}

bool LinkBoard::is_open(uint64_t key) const {
  for (uint32_t i = 0; i < max_groups_; ++i)
    if (groups_[i].key.load(std::memory_order_relaxed) == key) return key != kNoKey;
  return false;
}

void LinkBoard::close_group(uint64_t key) {
  if (key == kNoKey) return;
  if (Group* g = find(key)) g->key.store(kNoKey, std::memory_order_release);
}

uint32_t LinkBoard::open_groups() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < max_groups_; ++i) n += groups_[i].key.load(std::memory_order_relaxed) != kNoKey;
  return n;
}

uint64_t LinkBoard::inflight() const {
  return static_cast<uint64_t>(std::max<int64_t>(inflight_.load(std::memory_order_relaxed), 0));
}

uint64_t LinkBoard::backlogged_weight() const {
  return static_cast<uint64_t>(std::max<int64_t>(backlogged_weight_.load(std::memory_order_relaxed), 0));
}

uint32_t LinkBoard::backlogged_flows() const {
  return static_cast<uint32_t>(std::max<int32_t>(backlogged_flows_.load(std::memory_order_relaxed), 0));
}

void LinkBoard::set_backlogged(Group& g, bool b) {
  // The group's weight enters the sum with its first sending flow (any engine) and leaves
  // with its last; two engines crossing here may show the sum off by one group for an
  // instant, which readers clamp.
  const int64_t w = g.weight.load(std::memory_order_relaxed);
  if (b) {
    backlogged_flows_.fetch_add(1, std::memory_order_relaxed);
    if (g.backlogged.fetch_add(1, std::memory_order_relaxed) == 0) backlogged_weight_.fetch_add(w, std::memory_order_relaxed);
  } else {
    backlogged_flows_.fetch_sub(1, std::memory_order_relaxed);
    if (g.backlogged.fetch_sub(1, std::memory_order_relaxed) == 1) backlogged_weight_.fetch_sub(w, std::memory_order_relaxed);
  }
}

}  // namespace sg::ltp
