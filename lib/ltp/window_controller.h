// The controller of a gateway's results to its own workers, across the data-center LAN.
// A delivery-rate model (BBR-like) needs round trips long enough to measure in: on a LAN of a
// few microseconds, with the gateway's CPU the bottleneck while its workers push, the rate it
// learns is the CPU's share of a busy moment, and every later round paces at it (measured:
// 0.66-1.1 Gbit/s per worker on a path that carries ten times that). Data-center transports
// bound what is in flight instead (RDMA RC's window, eRPC's credits): the port serialises
// the packets, the window keeps a receiver's queue bounded.
//
//   unpaced; cwnd starts at max_window and is kept from one transfer to the next;
//   a loss episode halves it (once per episode: losses of packets sent before the halving
//   belong to it), a retransmission timeout sets it to min_window;
//   every acknowledged byte grows it back by one byte, up to max_window (on a LAN a window
//   refills within microseconds).
#pragma once

#include "ltp/rate_controller.h"

namespace sg::ltp {

struct WindowConfig {
  uint64_t max_window = 256 * 1024;  // bytes in flight per receiver (transport.lan_window_kb)
  uint32_t min_window_packets = 8;
  Nanos min_rto = 1 * kMilli;
  uint32_t dup_threshold = 8;        // as LTP's: several ports or RSS queues may reorder
};

class WindowController final : public RateController {
 public:
  explicit WindowController(const WindowConfig& cfg = {}) : cfg_(cfg), cwnd_(cfg.max_window) {}
  const char* name() const override { return "ltp-lan-window"; }
  void reset(Nanos now, uint32_t mss) override;
  void on_ack(const AckEvent& ev) override;
  void on_loss(const LossEvent& ev) override;
  uint64_t cwnd_bytes() const override { return cwnd_; }
  double pacing_rate() const override { return 0; }
  LossDetection loss_detection() const override;

  uint64_t reductions() const { return reductions_; }

 private:
  uint64_t min_window() const;

  WindowConfig cfg_;
  uint32_t mss_ = 1400;
  uint64_t cwnd_;
  Nanos recovery_start_ = -1;  // losses of chunks sent before this belong to the same episode
  uint64_t reductions_ = 0;
};

}  // namespace sg::ltp
