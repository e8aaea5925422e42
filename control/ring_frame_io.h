// The EngineIo of code on the control thread (policy agent, job desk): frames it builds go to
// engine 0 through a ring, which transmits them on its own queue (the port index rides in the
// mbuf's hash field). A full ring drops the frame, counted.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/counters.h"
#include "dataplane/engine.h"

namespace sg::ctl {

class RingFrameIo final : public dp::EngineIo {
 public:
  RingFrameIo(rte_mempool* pool, rte_ring* out) : pool_(pool), out_(out) {}
  void tx_st(uint16_t port_index, rte_mbuf* m) override {
    m->hash.usr = port_index;
    if (rte_ring_enqueue(out_, m) != 0) {
      counters_.tx_dropped.add();
      rte_pktmbuf_free(m);
    } else {
      counters_.tx_packets.add();
    }
  }
  rte_mempool* pool() const override { return pool_; }
  dp::EngineCounters& counters() override { return counters_; }
  uint16_t queue() const override { return 0; }

 private:
  rte_mempool* pool_;
  rte_ring* out_;
  dp::EngineCounters counters_;
};

}  // namespace sg::ctl
