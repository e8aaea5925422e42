// Rings that carry mbufs between lcores (hand-over to a shard's engine, CONTROL frames to and
// from the control thread, DATA dealt to another TX queue): whoever drains one last at stop
// frees what is left, so every mbuf goes back to its pool exactly once.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

namespace sg::dp {

// How many mbufs a ring drain moves per call.
inline constexpr unsigned kRingBurst = 32;

// Frees every mbuf still in `r` (null: nothing). Call only where no producer can still
// enqueue (after the producers stopped). Returns how many were freed.
inline unsigned free_ring_mbufs(rte_ring* r) {
  if (!r) return 0;
  void* objs[kRingBurst];
  unsigned n, total = 0;
  while ((n = rte_ring_dequeue_burst(r, objs, kRingBurst, nullptr)) > 0) {
    rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(objs), n);
    total += n;
  }
  return total;
}

}  // namespace sg::dp
