// A plain forwarder: every packet received on port i leaves on port i^1 (or i with one port).
// Not part of the gateway's packet path: the dataplane smoke test and `perf/bench mempool-loop`
// use it to measure the engine loop itself against testpmd's io forwarding.
#pragma once

#include "dataplane/engine.h"

namespace sg::dp {

class ForwardHandler final : public PacketHandler {
 public:
  explicit ForwardHandler(uint16_t port_count) : port_count_(port_count) {}
  void on_rx_st(EngineIo& io, uint16_t port_index, rte_mbuf** pkts, uint16_t n, uint64_t) override {
    const uint16_t out = port_count_ > 1 ? static_cast<uint16_t>(port_index ^ 1) : port_index;
    io.tx_burst_st(out, pkts, n);
  }

 private:
  uint16_t port_count_;
};

}  // namespace sg::dp
