// A counter written by one thread (the owning lcore or state machine) and read by any: plain
// load + store (no lock prefix), relaxed; a reader may see a value one update old, never torn.
#pragma once

#include <atomic>
#include <cstdint>

namespace sg {

class Counter {
 public:
  void add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

}  // namespace sg
