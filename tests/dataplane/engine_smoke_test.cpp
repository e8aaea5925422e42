// Dataplane smoke tests on net_ring virtual devices in one process: packets injected on one
// side come out of the worker and are counted, and after stop every mbuf is back in its pool.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "config/load.h"
#include "dataplane/engine.h"
#include "dataplane/forward.h"
#include "dataplane/ports.h"

namespace sg::dp {
namespace {

// Two ports joined by rings: what is enqueued on `in` arrives at port A; port B's TX lands in `out`.
struct RingPair {
  rte_ring* in = nullptr;
  rte_ring* out = nullptr;
  rte_ring* a_tx = nullptr;
  rte_ring* b_rx = nullptr;
  std::vector<Port> ports;

  explicit RingPair(const std::string& tag, rte_mempool* pool) {
    in = rte_ring_create(("in" + tag).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    out = rte_ring_create(("out" + tag).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    a_tx = rte_ring_create(("atx" + tag).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    b_rx = rte_ring_create(("brx" + tag).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    const int a = rte_eth_from_rings(("A" + tag).c_str(), &in, 1, &a_tx, 1, SOCKET_ID_ANY);
    const int b = rte_eth_from_rings(("B" + tag).c_str(), &b_rx, 1, &out, 1, SOCKET_ID_ANY);
    EXPECT_GE(a, 0);
    EXPECT_GE(b, 0);
    for (int id : {a, b}) {
      Port p;
      p.id = static_cast<uint16_t>(id);
      p.rx_queues = p.tx_queues = 1;
      p.name = "ring" + std::to_string(id);
      rte_eth_conf conf{};
      EXPECT_EQ(rte_eth_dev_configure(p.id, 1, 1, &conf), 0);
      EXPECT_EQ(rte_eth_rx_queue_setup(p.id, 0, 1024, SOCKET_ID_ANY, nullptr, pool), 0);
      EXPECT_EQ(rte_eth_tx_queue_setup(p.id, 0, 1024, SOCKET_ID_ANY, nullptr), 0);
      EXPECT_EQ(rte_eth_dev_start(p.id), 0);
      ports.push_back(p);
    }
  }
  ~RingPair() {
    for (auto& p : ports) {
      rte_eth_dev_stop(p.id);
      rte_eth_dev_close(p.id);
    }
    for (auto* r : {in, out, a_tx, b_rx}) rte_ring_free(r);
  }
};

rte_mbuf* make_packet(rte_mempool* pool, uint32_t seq) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (!m) return nullptr;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 64));
  std::memset(p, 0, 64);
  std::memcpy(p + 60, &seq, 4);
  return m;
}

// Runs the engine on the first worker lcore; RTE_MAX_LCORE if there is none or it failed.
unsigned launch_on_worker(Engine::LaunchArgs& la) {
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (worker >= RTE_MAX_LCORE || rte_eal_remote_launch(Engine::launch, &la, worker) != 0) return RTE_MAX_LCORE;
  return worker;
}

TEST(EngineSmoke, ForwardedPacketsComeOutCountedAndPoolsRefill) {
  rte_mempool* pool = create_pool("smoke_pool", 8191, 64, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  {
    RingPair rp("1", pool);
    ForwardHandler fwd(2);
    EngineParams ep;
    ep.burst = 32;
    ep.idle_sleep_max_us = 100;
    Engine engine(rp.ports, pool, fwd, ep);
    std::atomic<bool> stop{false};
    Engine::LaunchArgs la{&engine, &stop};
    const unsigned worker = launch_on_worker(la);
    ASSERT_LT(worker, RTE_MAX_LCORE) << "no worker lcore, or it did not launch";

    constexpr uint32_t kPackets = 20000;
    uint32_t sent = 0, received = 0;
    uint32_t expect_seq = 0;
    bool in_order = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (received < kPackets && std::chrono::steady_clock::now() < deadline) {
      if (sent < kPackets && rte_ring_free_count(rp.in) > 64) {
        rte_mbuf* m = make_packet(pool, sent);
        if (m && rte_ring_enqueue(rp.in, m) == 0) ++sent;
        else if (m) rte_pktmbuf_free(m);
      }
      void* objs[64];
      const unsigned n = rte_ring_dequeue_burst(rp.out, objs, 64, nullptr);
      for (unsigned i = 0; i < n; ++i) {
        auto* m = static_cast<rte_mbuf*>(objs[i]);
        uint32_t seq;
        std::memcpy(&seq, rte_pktmbuf_mtod_offset(m, uint8_t*, 60), 4);
        in_order &= seq == expect_seq++;
        rte_pktmbuf_free(m);
      }
      received += n;
    }
    // Traffic has stopped: the engine must start backing off (bounded wait, not a race with
    // how fast the packets went through).
    const auto idle_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (engine.counters().idle_sleeps.get() == 0 && std::chrono::steady_clock::now() < idle_deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop.store(true);
    rte_eal_wait_lcore(worker);
    EXPECT_EQ(received, kPackets);
    EXPECT_TRUE(in_order) << "one queue, one engine: order is kept";
    EXPECT_EQ(engine.counters().rx_packets.get(), kPackets);
    EXPECT_EQ(engine.counters().tx_packets.get(), kPackets);
    EXPECT_EQ(engine.counters().tx_dropped.get(), 0u);
    EXPECT_GT(engine.counters().idle_sleeps.get(), 0u) << "an idle engine must back off";
  }
  EXPECT_TRUE(pool_full(pool)) << rte_mempool_avail_count(pool) << " of " << pool->size;
  rte_mempool_free(pool);
}

// dataplane.spin_polls: an idle engine spins that many empty polls, then sleeps after every
// further empty poll (a poll that finds work starts the count again).
TEST(EngineSmoke, SpinPollsBeforeTheFirstSleep) {
  rte_mempool* pool = create_pool("spin_pool", 1023, 0, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  for (uint32_t spin : {0u, 1000u}) {
    RingPair rp(spin ? "s1" : "s0", pool);
    ForwardHandler fwd(2);
    EngineParams ep;
    ep.idle_sleep_max_us = 50;
    ep.spin_polls_before_sleep = spin;
    Engine engine(rp.ports, pool, fwd, ep);
    std::atomic<bool> stop{false};
    Engine::LaunchArgs la{&engine, &stop};
    const unsigned worker = launch_on_worker(la);
    ASSERT_LT(worker, RTE_MAX_LCORE) << "no worker lcore, or it did not launch";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (engine.counters().idle_sleeps.get() < 20 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop.store(true);
    rte_eal_wait_lcore(worker);
    const uint64_t polls = engine.counters().polls.get(), sleeps = engine.counters().idle_sleeps.get();
    ASSERT_GE(sleeps, 20u) << "spin " << spin;
    // Spun polls, plus at most the one poll between the last sleep and the stop.
    const uint64_t spun = polls - sleeps;
    const uint64_t first = spin ? spin - 1 : 0;
    EXPECT_GE(spun, first) << "spin " << spin << ": " << polls << " polls, " << sleeps << " sleeps";
    EXPECT_LE(spun, first + 1) << "spin " << spin << ": " << polls << " polls, " << sleeps << " sleeps";
  }
  EXPECT_TRUE(pool_full(pool));
  rte_mempool_free(pool);
}

TEST(EngineSmoke, RefusedTxIsFreedAndCounted) {
  rte_mempool* pool = create_pool("refuse_pool", 8191, 0, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  {
    RingPair rp("2", pool);
    ForwardHandler fwd(2);
    EngineParams ep;
    ep.burst = 32;
    Engine engine(rp.ports, pool, fwd, ep);
    // Nobody drains `out` (4096 slots, 4095 usable): past that the port refuses packets.
    uint32_t injected = 0;
    for (int round = 0; round < 200; ++round) {
      for (int i = 0; i < 32; ++i) {
        rte_mbuf* m = make_packet(pool, injected);
        if (!m) break;
        if (rte_ring_enqueue(rp.in, m) != 0) {
          rte_pktmbuf_free(m);
          break;
        }
        ++injected;
      }
      engine.poll_once_st(0);
      engine.flush_st();
    }
    ASSERT_EQ(injected, 200u * 32);
    EXPECT_EQ(engine.counters().rx_packets.get(), injected);
    EXPECT_EQ(engine.counters().tx_packets.get(), injected);
    // `out` holds 4095: the rest was refused by the port, freed by the engine and counted.
    EXPECT_EQ(rte_ring_count(rp.out), 4095u);
    EXPECT_EQ(engine.counters().tx_dropped.get(), injected - 4095u);
    void* objs[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(rp.out, objs, 64, nullptr)) > 0)
      for (unsigned k = 0; k < n; ++k) rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[k]));
  }
  EXPECT_TRUE(pool_full(pool)) << rte_mempool_avail_count(pool) << " of " << pool->size;
  rte_mempool_free(pool);
}

// The handler's timers run after what has arrived was taken (up to 16 full bursts per port):
// after a stall they must not judge transfers by the first burst of the ACKs that came.
struct TimerWitness final : PacketHandler {
  uint64_t rx = 0;
  std::vector<uint64_t> rx_at_timers;
  void on_rx_st(EngineIo&, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t) override {
    rx += n;
    rte_pktmbuf_free_bulk(pkts, n);
  }
  unsigned on_poll_st(EngineIo&, uint64_t) override {
    rx_at_timers.push_back(rx);
    return 0;
  }
};

TEST(EngineSmoke, TimersRunAfterTheRxRingIsDrained) {
  rte_mempool* pool = create_pool("timer_pool", 2047, 0, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  {
    RingPair rp("t", pool);
    TimerWitness h;
    EngineParams ep;
    ep.burst = 32;
    Engine engine(rp.ports, pool, h, ep);
    for (uint32_t k = 0; k < 300; ++k) ASSERT_EQ(rte_ring_enqueue(rp.in, make_packet(pool, k)), 0);
    engine.poll_once_st(rte_rdtsc());
    ASSERT_EQ(h.rx_at_timers.size(), 1u);
    EXPECT_EQ(h.rx_at_timers[0], 300u) << "all of it before the timers (before: one burst of 32)";
    // More than the bound: the timers are not held off for good.
    for (uint32_t k = 0; k < 1000; ++k) ASSERT_EQ(rte_ring_enqueue(rp.in, make_packet(pool, k)), 0);
    engine.poll_once_st(rte_rdtsc());
    EXPECT_EQ(h.rx_at_timers[1], 300u + 16 * 32);
    while (engine.poll_once_st(rte_rdtsc())) {
    }
    EXPECT_EQ(h.rx, 1300u);
  }
  EXPECT_TRUE(pool_full(pool)) << rte_mempool_avail_count(pool) << " of " << pool->size;
  rte_mempool_free(pool);
}

// The time a burst is handled with is read after the burst was taken. A pass whose time was
// read before the lcore was descheduled (simulated: poll_once_st given a time 20 ms old) must
// not date packets that arrived meanwhile before their arrival: their RTT samples came out
// below the path's propagation, and the rate model built on them collapsed. The timers, too,
// run at a time read after the receive work.
struct TimeWitness final : PacketHandler {
  std::vector<uint64_t> rx_tsc, poll_tsc;
  void on_rx_st(EngineIo&, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) override {
    rx_tsc.push_back(now_tsc);
    rte_pktmbuf_free_bulk(pkts, n);
  }
  unsigned on_poll_st(EngineIo&, uint64_t now_tsc) override {
    poll_tsc.push_back(now_tsc);
    return 0;
  }
};

TEST(EngineSmoke, ABurstIsDatedWhenItIsTakenNotWhenThePassBegan) {
  rte_mempool* pool = create_pool("time_pool", 1023, 0, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  {
    RingPair rp("w", pool);
    TimeWitness h;
    EngineParams ep;
    Engine engine(rp.ports, pool, h, ep);
    const uint64_t stale = rte_rdtsc() - rte_get_tsc_hz() / 50;  // read 20 ms ago
    const uint64_t arrived = rte_rdtsc();
    for (uint32_t k = 0; k < 8; ++k) ASSERT_EQ(rte_ring_enqueue(rp.in, make_packet(pool, k)), 0);
    engine.poll_once_st(stale);
    ASSERT_EQ(h.rx_tsc.size(), 1u);
    EXPECT_GE(h.rx_tsc[0], arrived) << "dated " << (arrived - h.rx_tsc[0]) * 1e3 / rte_get_tsc_hz()
                                    << " ms before it arrived";
    ASSERT_EQ(h.poll_tsc.size(), 1u);
    EXPECT_GE(h.poll_tsc[0], h.rx_tsc[0]);
    // An idle pass keeps the caller's time (no extra clock read when nothing came).
    engine.poll_once_st(stale);
    ASSERT_EQ(h.poll_tsc.size(), 2u);
    EXPECT_EQ(h.poll_tsc[1], stale);
  }
  EXPECT_TRUE(pool_full(pool)) << rte_mempool_avail_count(pool) << " of " << pool->size;
  rte_mempool_free(pool);
}

TEST(EngineSmoke, PortsFromConfigLoopTrafficAndDrainFull) {
  auto loaded = config::load_config_file(std::string(SG_SOURCE_ROOT) + "/config/examples/single-ring.yaml");
  ASSERT_TRUE(loaded.config);
  const auto& cfg = *loaded.config;
  rte_mempool* pool = create_pool("cfg_pool", mbufs_needed(cfg, 1), 64, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  std::vector<Port> ports;
  ASSERT_TRUE(setup_ports(cfg, 1, pool, ports));
  ASSERT_EQ(ports.size(), 2u);
  ForwardHandler fwd(2);
  EngineParams ep;
  uint64_t rx = 0;
  {
    Engine engine(ports, pool, fwd, ep);
    // net_ring devices loop TX back to RX: seed a burst on each (testpmd --tx-first) and let it circulate.
    for (uint16_t i = 0; i < 2; ++i)
      for (int k = 0; k < 32; ++k) engine.tx_st(i, make_packet(pool, k));
    engine.flush_st();
    std::atomic<bool> stop{false};
    Engine::LaunchArgs la{&engine, &stop};
    const unsigned worker = launch_on_worker(la);
    ASSERT_LT(worker, RTE_MAX_LCORE) << "no worker lcore, or it did not launch";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(true);
    rte_eal_wait_lcore(worker);
    rx = engine.counters().rx_packets.get();
  }
  EXPECT_GT(rx, 64u * 10) << "seeded packets kept circulating";
  drain_rx(ports);
  EXPECT_TRUE(pool_full(pool)) << rte_mempool_avail_count(pool) << " of " << pool->size;
  teardown_ports(ports);
  rte_mempool_free(pool);
}

}  // namespace
}  // namespace sg::dp
