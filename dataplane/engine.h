// One engine per worker lcore. It owns queue `queue` of every port (RX and TX) and runs the
// poll loop: receive a burst from each port, hand it to the packet handler, let the handler
// run its timers, drain buffered TX on a short timer, and back off when idle so several
// gateways can share a 2-core machine.
//
// Threads: everything with an _st suffix runs only on the engine's own lcore. The control
// thread reads `counters()` (relaxed atomics) and sets the stop flag; nothing else.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "dataplane/counters.h"
#include "dataplane/ports.h"

namespace sg::dp {

class Engine;

// What a handler may do with packets. tx_st takes ownership of the mbuf: it is sent or, if
// the port refuses it, freed and counted in tx_dropped. Never free an mbuf after tx_st.
class EngineIo {
 public:
  virtual ~EngineIo() = default;
  virtual void tx_st(uint16_t port_index, rte_mbuf* m) = 0;
  // A whole burst to one port, same ownership rule. Default: one by one.
  virtual void tx_burst_st(uint16_t port_index, rte_mbuf** pkts, uint16_t n) {
    for (uint16_t i = 0; i < n; ++i) tx_st(port_index, pkts[i]);
  }
  virtual rte_mempool* pool() const = 0;
  virtual EngineCounters& counters() = 0;
  virtual uint16_t queue() const = 0;
};

class PacketHandler {
 public:
  virtual ~PacketHandler() = default;
  // Receives `n` packets from port `port_index`, and owns each of them: every mbuf must be
  // freed or passed to io.tx_st exactly once before returning (or kept by the handler, which
  // then owns it until it frees or sends it).
  virtual void on_rx_st(EngineIo& io, uint16_t port_index, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) = 0;
  // Called once per poll pass: due timers (retransmits, ACK pacing, sends). Returns the number
  // of packets it produced, so the engine does not back off while the handler is busy.
  virtual unsigned on_poll_st(EngineIo&, uint64_t /*now_tsc*/) { return 0; }
  // The engine is stopping: release every mbuf the handler still holds.
  virtual void on_stop_st(EngineIo&) {}
};

struct EngineParams {
  uint16_t queue = 0;         // queue index on every port
  uint16_t burst = 32;
  uint32_t tx_drain_us = 100;
  uint32_t idle_sleep_max_us = 1000;
  uint32_t spin_polls_before_sleep = 256;  // empty passes before the first sleep
};

class Engine final : public EngineIo {
 public:
  Engine(const std::vector<Port>& ports, rte_mempool* pool, PacketHandler& handler, const EngineParams& params);
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The poll loop; returns when stop is set (checked every 64 passes).
  void run_st(const std::atomic<bool>& stop);
  // One pass; returns the number of packets received plus produced. Used by run_st and tests.
  unsigned poll_once_st(uint64_t now_tsc);
  // Sends everything buffered.
  void flush_st();

  // EngineIo
  void tx_st(uint16_t port_index, rte_mbuf* m) override;
  void tx_burst_st(uint16_t port_index, rte_mbuf** pkts, uint16_t n) override;
  rte_mempool* pool() const override { return pool_; }
  EngineCounters& counters() override { return counters_; }
  uint16_t queue() const override { return params_.queue; }
  const EngineCounters& counters() const { return counters_; }

  // For lcore launch: arg is a LaunchArgs*.
  struct LaunchArgs {
    Engine* engine;
    const std::atomic<bool>* stop;
  };
  static int launch(void* arg);

 private:
  const std::vector<Port>& ports_;
  rte_mempool* pool_;
  PacketHandler& handler_;
  EngineParams params_;
  EngineCounters counters_;
  std::vector<rte_eth_dev_tx_buffer*> tx_buffers_;  // one per port, for queue params_.queue
  uint64_t drain_tsc_ = 0;
  uint64_t last_drain_ = 0;
  unsigned pending_tx_ = 0;
};

// Receives and frees everything still queued on the ports' RX queues (net_ring loops packets
// back forever; without this they would be missing from the pool check at shutdown).
void drain_rx(const std::vector<Port>& ports);

}  // namespace sg::dp
