#include "dataplane/engine_link.h"

#include <rte_lcore.h>

namespace sg::dp {

MsgRing::MsgRing(const std::string& name, uint32_t min_capacity) {
  uint32_t size = 64;
  while (size - 1 < min_capacity && size < (1u << 30)) size <<= 1;
  ring_ = rte_ring_create_elem(name.c_str(), sizeof(EngineMsg), size, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
}

MsgRing::~MsgRing() { rte_ring_free(ring_); }

bool MsgRing::push_st(const EngineMsg& m) {
  EngineMsg copy = m;  // the ring API takes a non-const pointer
  if (rte_ring_sp_enqueue_elem(ring_, &copy, sizeof copy) == 0) return true;
  dropped_.add();
  return false;
}

unsigned MsgRing::pop_st(EngineMsg* out, unsigned n) {
  return rte_ring_sc_dequeue_burst_elem(ring_, out, sizeof(EngineMsg), n, nullptr);
}

}  // namespace sg::dp
