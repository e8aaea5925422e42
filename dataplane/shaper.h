// Impairment: each ingress port becomes a WAN link of a given rate and one-way delay, played
// by the receiver (this kernel has no netem, and net_ring/memif pairs have no qdisc). A frame
// waits in the port's FIFO until the link would have finished serialising it (token bucket of
// one frame: virtual finish time = max(arrival, previous finish) + bits / rate), then `delay`
// more, then goes to the inner handler. A full FIFO drops the frame (tail drop, counted), as a
// router queue would. Rate 0: the port is not shaped.
//
// Used by the spray benchmark and tests to give parallel paths unequal capacities. Owner: one
// engine. Holds mbufs (it owns them while queued); on_stop_st frees them. No allocation after
// construction.
#pragma once

#include <cstdint>
#include <vector>

#include "dataplane/counters.h"
#include "dataplane/engine.h"

namespace sg::dp {

struct LinkShape {
  double rate_mbit = 0;  // 0: unshaped
  double delay_us = 0;
  uint32_t queue_frames = 512;
};

class ShapedLinks final : public PacketHandler {
 public:
  // shapes[i] for port index i (missing entries: unshaped).
  ShapedLinks(PacketHandler& inner, std::vector<LinkShape> shapes);
  void on_rx_st(EngineIo& io, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) override;
  unsigned on_poll_st(EngineIo& io, uint64_t now_tsc) override;
  void on_stop_st(EngineIo& io) override;

  Counter dropped, delivered;

 private:
  struct Held {
    rte_mbuf* m;
    uint64_t due_tsc;
  };
  struct Link {
    LinkShape shape;
    double tsc_per_bit = 0;
    uint64_t delay_tsc = 0;
    uint64_t finish_tsc = 0;
    std::vector<Held> fifo;  // ring, sized at construction
    size_t head = 0, len = 0;
  };
  PacketHandler& inner_;
  std::vector<Link> links_;
};

}  // namespace sg::dp
