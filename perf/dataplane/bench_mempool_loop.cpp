// mempool-loop, the stormgate side: one engine forwarding between two net_ring ports whose TX
// loops back to RX, seeded with a burst per port (like testpmd --tx-first). Prints the packet
// rate of each 1-second window; perf/run/mempool-loop compares it with testpmd in the same run.
//   bench_mempool_loop [EAL args] -- SECONDS
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "config/load.h"
#include "dataplane/engine.h"
#include "dataplane/forward.h"
#include "dataplane/ports.h"

int main(int argc, char** argv) {
  const int used = rte_eal_init(argc, argv);
  if (used < 0) return 1;
  const int seconds = argc > used + 1 ? std::atoi(argv[used + 1]) : 3;
  sg::config::GatewayConfig cfg;
  cfg.site = {1, "bench"};
  for (int i = 0; i < 2; ++i) {
    sg::config::PortConfig p;
    p.name = "ring" + std::to_string(i);
    p.vdev = "net_ring" + std::to_string(i);
    p.ipv4.host_order = 0x0a000001 + i;
    cfg.ports.push_back(p);
  }
  rte_mempool* pool = sg::dp::create_pool("bench_pool", 8191, 256, RTE_MBUF_DEFAULT_BUF_SIZE);
  std::vector<sg::dp::Port> ports;
  if (!pool || !sg::dp::setup_ports(cfg, 1, pool, ports)) return 1;
  sg::dp::ForwardHandler fwd(2);
  sg::dp::EngineParams ep;
  ep.burst = 32;
  bool full = false;
  {
    sg::dp::Engine engine(ports, pool, fwd, ep);
    for (uint16_t i = 0; i < 2; ++i)
      for (int k = 0; k < 32; ++k) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        rte_pktmbuf_append(m, 64);
        engine.tx_st(i, m);
      }
    engine.flush_st();
    std::atomic<bool> stop{false};
    sg::dp::Engine::LaunchArgs la{&engine, &stop};
    const unsigned worker = rte_get_next_lcore(-1, 1, 0);
    rte_eal_remote_launch(sg::dp::Engine::launch, &la, worker);
    uint64_t before = engine.counters().rx_packets.get();
    for (int s = 0; s < seconds; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const uint64_t now = engine.counters().rx_packets.get();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("window_mpps %.3f\n", (now - before) / dt / 1e6);
      before = now;
    }
    stop.store(true);
    rte_eal_wait_lcore(worker);
  }
  sg::dp::drain_rx(ports);
  full = sg::dp::pool_full(pool);
  std::printf("pool_full %d\n", full ? 1 : 0);
  sg::dp::teardown_ports(ports);
  rte_eal_cleanup();
  return full ? 0 : 3;
}
