#include "dataplane/engine.h"

#include <rte_cycles.h>
#include <rte_malloc.h>

#include <algorithm>
#include <stdexcept>

namespace sg::dp {
namespace {

constexpr uint16_t kMaxBurst = 512;
// Full bursts taken per port before the handler's timers run in one pass (see poll_once_st):
// 16 x 32 frames covers a 20 ms stall at ~25 kpps; beyond that the timers are not held off.
constexpr unsigned kMaxRxBurstsBeforeTimers = 16;

// Called by rte_eth_tx_buffer_flush for what the NIC did not take: free and count.
void tx_unsent(rte_mbuf** pkts, uint16_t unsent, void* userdata) {
  static_cast<Counter*>(userdata)->add(unsent);
  rte_pktmbuf_free_bulk(pkts, unsent);
}

}  // namespace

Engine::Engine(const std::vector<Port>& ports, rte_mempool* pool, PacketHandler& handler, const EngineParams& params)
    : ports_(ports), pool_(pool), handler_(handler), params_(params) {
  params_.burst = std::min<uint16_t>(params_.burst, kMaxBurst);
  for (const auto& p : ports_) {
    auto* b = static_cast<rte_eth_dev_tx_buffer*>(
        rte_zmalloc_socket("sg_txbuf", RTE_ETH_TX_BUFFER_SIZE(params_.burst), 0, rte_eth_dev_socket_id(p.id)));
    if (!b) throw std::runtime_error("cannot allocate TX buffer");
    rte_eth_tx_buffer_init(b, params_.burst);
    rte_eth_tx_buffer_set_err_callback(b, tx_unsent, &counters_.tx_dropped);
    tx_buffers_.push_back(b);
  }
  drain_tsc_ = (rte_get_tsc_hz() + 999999) / 1000000 * params_.tx_drain_us;
}

Engine::~Engine() {
  for (auto* b : tx_buffers_) rte_free(b);
}

void Engine::tx_st(uint16_t port_index, rte_mbuf* m) {
  counters_.tx_packets.add();
  counters_.tx_bytes.add(rte_pktmbuf_pkt_len(m));
  const uint16_t sent = rte_eth_tx_buffer(ports_[port_index].id, params_.queue, tx_buffers_[port_index], m);
  pending_tx_ = sent ? 0 : pending_tx_ + 1;
}

void Engine::tx_burst_st(uint16_t port_index, rte_mbuf** pkts, uint16_t n) {
  // What is buffered for this port goes first, so packets leave in order.
  rte_eth_tx_buffer_flush(ports_[port_index].id, params_.queue, tx_buffers_[port_index]);
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < n; ++i) bytes += rte_pktmbuf_pkt_len(pkts[i]);
  const uint16_t sent = rte_eth_tx_burst(ports_[port_index].id, params_.queue, pkts, n);
  counters_.tx_packets.add(n);
  counters_.tx_bytes.add(bytes);
  if (sent < n) {
    counters_.tx_dropped.add(n - sent);
    rte_pktmbuf_free_bulk(pkts + sent, n - sent);
  }
}

void Engine::flush_st() {
  for (size_t i = 0; i < ports_.size(); ++i) rte_eth_tx_buffer_flush(ports_[i].id, params_.queue, tx_buffers_[i]);
  pending_tx_ = 0;
}

unsigned Engine::poll_once_st(uint64_t now_tsc) {
  rte_mbuf* pkts[kMaxBurst];
  unsigned work = 0;
  counters_.polls.add();
  // What has arrived is taken before the timers run (bounded, port by port in turn). After
  // this lcore was descheduled (several gateways, workers and the WAN emulator share two
  // CPUs on the testbed: stalls of 20 ms were measured), the rings hold the ACKs of that
  // time; timers run on one burst of them found transfers silent that had been answered:
  // retransmission timeouts and RACK losses that were spurious, each one a cut of the rate.
  for (unsigned round = 0; round < kMaxRxBurstsBeforeTimers; ++round) {
    bool more = false;
    for (uint16_t i = 0; i < ports_.size(); ++i) {
      if (params_.queue >= ports_[i].rx_queues) continue;
      const uint16_t n = rte_eth_rx_burst(ports_[i].id, params_.queue, pkts, params_.burst);
      if (n == 0) continue;
      more |= n == params_.burst;
      counters_.rx_packets.add(n);
      uint64_t bytes = 0;
      for (uint16_t k = 0; k < n; ++k) bytes += rte_pktmbuf_pkt_len(pkts[k]);
      counters_.rx_bytes.add(bytes);
      // The burst's time is read after it was taken, not at the top of the pass: an lcore
      // descheduled in between (20 ms seen on the testbed) would date the ACKs that arrived
      // meanwhile too early. Their RTT samples then came out below the path's propagation
      // (0.02 ms on an 11 ms path), the rate model's min_rtt with them, and the window of
      // 2 x rate x min_rtt fell short of what is in flight: each round trip delivered less,
      // down to the 4-packet floor (3 Mbit/s on a 1 Gbit/s path, rounds of 8 s). Taken
      // after the burst, a packet can only look older than it is, never younger.
      now_tsc = rte_rdtsc();
      handler_.on_rx_st(*this, i, pkts, n, now_tsc);
      work += n;
    }
    if (!more) break;
  }
  if (work) now_tsc = rte_rdtsc();  // the timers run at the time they are read, after the RX work
  work += handler_.on_poll_st(*this, now_tsc);
  if (pending_tx_ && now_tsc - last_drain_ >= drain_tsc_) {
    flush_st();
    last_drain_ = now_tsc;
  }
  return work;
}

void Engine::run_st(const std::atomic<bool>& stop) {
  uint32_t empty_passes = 0;
  uint32_t sleep_us = 1;
  for (uint64_t pass = 0;; ++pass) {
    if ((pass & 63) == 0 && stop.load(std::memory_order_relaxed)) break;
    const unsigned work = poll_once_st(rte_rdtsc());
    if (work) {
      empty_passes = 0;
      sleep_us = 1;
      continue;
    }
    if (++empty_passes < params_.spin_polls_before_sleep) continue;
    // Idle: send what is buffered, then sleep 1 us doubling to the configured maximum. The
    // sleep is a system call, but only when there is nothing to do.
    if (pending_tx_) flush_st();
    counters_.idle_sleeps.add();
    rte_delay_us_sleep(sleep_us);
    sleep_us = std::min(sleep_us * 2, params_.idle_sleep_max_us);
    if (stop.load(std::memory_order_relaxed)) break;
  }
  flush_st();
  handler_.on_stop_st(*this);
  flush_st();
}

int Engine::launch(void* arg) {
  auto* a = static_cast<LaunchArgs*>(arg);
  a->engine->run_st(*a->stop);
  return 0;
}

void drain_rx(const std::vector<Port>& ports) {
  rte_mbuf* pkts[64];
  for (const auto& p : ports) {
    for (uint16_t q = 0; q < p.rx_queues; ++q) {
      // Bounded: a device that keeps producing (a looping ring) cannot hold us here forever.
      for (int i = 0; i < 100000; ++i) {
        const uint16_t n = rte_eth_rx_burst(p.id, q, pkts, 64);
        if (n == 0) break;
        rte_pktmbuf_free_bulk(pkts, n);
      }
    }
  }
}

}  // namespace sg::dp
