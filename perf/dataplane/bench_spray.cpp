// spray: goodput of the job's transfers sprayed over 1, 2 and 4 parallel paths of unequal
// capacity. Two gateways in one process (one thread polls both, so the 2-core machine's noise
// stays out), joined by `lanes` net_ring port pairs; each lane is a WAN link played by the
// receiver's ShapedLinks (rate, one-way delay, tail-drop queue). Every configuration runs the
// same rounds of the real job (Engine -> GatewayHandler -> JobRunner -> lib/sync -> LtpTx);
// goodput = model bytes synchronised per second. Configurations alternate (A B C ... A B C)
// and the table shows medians; perf/run/spray prints the JSON line from the last lines here.
//   bench_spray [EAL args] -- [--quick] [--model-mb MB] [--rounds N] [--repeats N]
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/ports.h"
#include "dataplane/shaper.h"

namespace sg::dp {
namespace {

constexpr int kMaxLanes = 4;
constexpr int kMaxQueues = 4;
// Lane capacities (Mbit/s): unequal on purpose, so an equal split is held back by the slowest.
constexpr double kLaneMbit[kMaxLanes] = {400, 200, 100, 100};
constexpr double kDelayUs = 500;  // one way, every lane

config::MacAddr mac_of(int site) { return config::MacAddr{{0x02, 0, 0, 0, 0, static_cast<uint8_t>(site + 1)}}; }

struct Site {
  config::GatewayConfig cfg;
  std::vector<Port> ports;
  Neighbours nbrs;
  std::vector<PeerRoute> routes;
  std::unique_ptr<GatewayHandler> handler;
  std::unique_ptr<ShapedLinks> shaped;
  std::unique_ptr<LtpTx> tx;
  std::unique_ptr<JobRunner> job;
  std::unique_ptr<Engine> engine;
  // queues > 1: engines 1.. only send what LtpTx dealt to their TX queue (SP/SC rings).
  std::vector<std::unique_ptr<GatewayHandler>> tx_handlers;
  std::vector<std::unique_ptr<Engine>> tx_engines;
  std::vector<rte_ring*> txq;
};

struct Mode {
  const char* name;
  SprayMode mode;
  bool measured;          // weights from each path's delivery rate (what the gateway does)
  bool capacity_weights;  // factors from the lanes' configured capacities: an oracle reference
};
constexpr Mode kModes[] = {
    {"adaptive", SprayMode::kAdaptive, true, false},          // the gateway's default
    {"weighted", SprayMode::kWeighted, true, false},
    {"weighted-oracle", SprayMode::kWeighted, false, true},   // knows the lanes' capacities
    {"plan-only", SprayMode::kAdaptive, false, false},        // in-flight balance, no weights
    {"equal", SprayMode::kEqual, false, false},
};

struct Result {
  double gbps = 0;
  bool ok = false;     // every round finished in time (no round timeout)
  uint64_t inexact = 0;  // result values off the exact mean: bubbles Early Close filled under loss
  bool pool_full = false;
  uint64_t shaper_drops = 0;
  uint64_t data_tx = 0, retransmits = 0;
};

int run_id = 0;

// One configuration: builds two gateways joined by `lanes` shaped ring pairs, runs `rounds`
// rounds (the first is warm-up), tears everything down.
// queues: TX queues per port (one engine each). Every TX queue of a lane feeds the same ring,
// read by the peer's single RX queue, so the lane's shaping is unchanged.
Result run(rte_mempool* pool, int lanes, int queues, const Mode& mode, uint64_t model_bytes, uint32_t rounds) {
  const std::string tag = std::to_string(run_id++);
  std::vector<rte_ring*> rings;
  Site sites[2];
  rte_ring* link[2][kMaxLanes] = {};
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < lanes; ++l) {
      link[i][l] = rte_ring_create(("sp" + tag + "_" + std::to_string(i * kMaxLanes + l)).c_str(), 4096,
                                   SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      rings.push_back(link[i][l]);
    }
  for (int i = 0; i < 2; ++i) {
    Site& s = sites[i];
    auto& c = s.cfg;
    c.source = "bench";
    c.site = {static_cast<uint16_t>(i + 1), "site" + std::to_string(i)};
    c.job.model_bytes = model_bytes;
    c.job.rounds = rounds;
    c.job.round_timeout_ms = 30000;
    config::PeerConfig peer;
    peer.id = static_cast<uint16_t>(2 - i);
    peer.name = "peer";
    peer.address.host_order = 0x0a000001 + (1 - i);
    peer.udp_port = c.transport.udp_port;
    peer.mac = mac_of(1 - i);
    std::vector<LinkShape> shapes;
    for (int l = 0; l < lanes; ++l) {
      config::PortConfig pc;
      pc.name = "lane" + std::to_string(l);
      pc.vdev = "ring";
      pc.ipv4.host_order = 0x0a000001 + i;
      pc.mac = mac_of(i);
      c.ports.push_back(pc);
      peer.paths.push_back(config::PathConfig{static_cast<uint8_t>(l), pc.name, {}, {}});
      rte_ring* rx = link[1 - i][l];
      rte_ring* tx[kMaxQueues];
      for (int q = 0; q < queues; ++q) tx[q] = link[i][l];
      const int id = rte_eth_from_rings(("sq" + tag + "_" + std::to_string(i) + std::to_string(l)).c_str(), &rx, 1, tx,
                                        static_cast<unsigned>(queues), SOCKET_ID_ANY);
      if (id < 0) return {};
      Port p;
      p.name = pc.name;
      p.id = static_cast<uint16_t>(id);
      p.rx_queues = 1;
      p.tx_queues = static_cast<uint16_t>(queues);
      std::copy(pc.mac->bytes.begin(), pc.mac->bytes.end(), p.mac.addr_bytes);
      p.ipv4 = pc.ipv4.host_order;
      rte_eth_conf conf{};
      if (rte_eth_dev_configure(p.id, 1, static_cast<uint16_t>(queues), &conf) != 0 ||
          rte_eth_rx_queue_setup(p.id, 0, 1024, SOCKET_ID_ANY, nullptr, pool) != 0)
        return {};
      for (int q = 0; q < queues; ++q)
        if (rte_eth_tx_queue_setup(p.id, static_cast<uint16_t>(q), 1024, SOCKET_ID_ANY, nullptr) != 0) return {};
      if (rte_eth_dev_start(p.id) != 0) return {};
      s.ports.push_back(p);
      shapes.push_back(LinkShape{kLaneMbit[l], kDelayUs, 128});
    }
    c.peers.push_back(peer);
    s.routes = build_routes(c, s.ports, s.nbrs);
    s.handler = std::make_unique<GatewayHandler>(c, s.ports, s.nbrs, s.routes, true);
    s.shaped = std::make_unique<ShapedLinks>(*s.handler, shapes);
    s.tx = std::make_unique<LtpTx>(s.ports, s.nbrs, s.routes, const_cast<LtpCounters&>(s.handler->ltp()));
  }
  topo::Plan plan;
  std::string err;
  if (!initial_plan(sites[0].cfg, plan, err)) {
    std::fprintf(stderr, "spray: %s\n", err.c_str());
    return {};
  }
  for (auto& s : sites) {
    s.job = std::make_unique<JobRunner>(s.cfg, plan, 1, *s.tx);
    s.handler->attach_job(s.job.get(), s.tx.get());
    s.engine = std::make_unique<Engine>(s.ports, pool, *s.shaped, EngineParams{});
    s.txq.assign(static_cast<size_t>(queues), nullptr);
    for (int q = 1; q < queues; ++q) {
      const size_t i = &s - sites;
      s.txq[q] = rte_ring_create(("st" + tag + "_" + std::to_string(i * kMaxQueues + q)).c_str(), 4096, SOCKET_ID_ANY,
                                 RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (!s.txq[q]) return {};
      rings.push_back(s.txq[q]);
      s.tx_handlers.push_back(std::make_unique<GatewayHandler>(s.cfg, s.ports, s.nbrs, s.routes, false));
      s.tx_handlers.back()->attach_tx_ring(s.txq[q]);
      EngineParams ep;
      ep.queue = static_cast<uint16_t>(q);
      s.tx_engines.push_back(std::make_unique<Engine>(s.ports, pool, *s.tx_handlers.back(), ep));
    }
    if (queues > 1) s.tx->set_tx_rings(s.txq);
    Sprayer& sp = s.tx->sprayer();
    sp.set_mode(mode.mode);
    sp.set_measured_weights(mode.measured);
    if (mode.capacity_weights)
      for (int l = 0; l < lanes; ++l) sp.set_path_factor(s.cfg.peers[0].id, static_cast<unsigned>(l), kLaneMbit[l] / kLaneMbit[0]);
  }

  Result r;
  auto t_first = std::chrono::steady_clock::now();
  bool warm = false;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < limit) {
    bool all = true;
    for (auto& s : sites) {
      s.engine->poll_once_st(rte_rdtsc());
      s.engine->flush_st();
      for (auto& e : s.tx_engines) {
        e->poll_once_st(rte_rdtsc());
        e->flush_st();
      }
      all &= s.job->finished();
    }
    if (!warm && sites[0].job->counters().rounds.get() >= 1 && sites[1].job->counters().rounds.get() >= 1) {
      warm = true;  // the first round is warm-up (rate controller from its initial rate)
      t_first = std::chrono::steady_clock::now();
    }
    if (all) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_first).count();
      r.ok = true;
      for (auto& s : sites) {
        r.ok &= s.job->counters().timeouts.get() == 0;
        r.inexact += s.job->counters().values_checked.get() - s.job->counters().values_exact.get();
        r.retransmits += s.job->counters().retransmits.get();
        r.data_tx += s.handler->ltp().data_tx.get();
      }
      r.gbps = 8.0 * static_cast<double>(model_bytes) * (rounds - 1) / secs / 1e9;
      break;
    }
  }
  for (auto& s : sites) {
    r.shaper_drops += s.shaped->dropped.get();
    s.shaped->on_stop_st(*s.engine);
    s.engine->flush_st();
    for (size_t q = 0; q < s.tx_engines.size(); ++q) {  // after engine 0, their rings' producer
      s.tx_handlers[q]->on_stop_st(*s.tx_engines[q]);
      s.tx_engines[q]->flush_st();
    }
  }
  for (auto& s : sites) drain_rx(s.ports);
  for (auto& s : sites) {
    s.tx_engines.clear();
    s.engine.reset();
    s.job.reset();
    for (auto& p : s.ports) {
      rte_eth_dev_stop(p.id);
      rte_eth_dev_close(p.id);
    }
  }
  for (auto* ring : rings) rte_ring_free(ring);
  r.pool_full = pool_full(pool);
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace
}  // namespace sg::dp

int main(int argc, char** argv) {
  using namespace sg::dp;
  const int used = rte_eal_init(argc, argv);
  if (used < 0) return 1;
  bool quick = false;
  for (int i = used + 1; i < argc; ++i) quick |= std::strcmp(argv[i], "--quick") == 0;
  uint64_t model = quick ? (2u << 20) : (8u << 20);
  uint32_t rounds = quick ? 3 : 4;
  int repeats = quick ? 1 : 3;
  for (int i = used + 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--model-mb") == 0) model = static_cast<uint64_t>(std::atof(argv[i + 1]) * (1 << 20)) & ~uint64_t{3};
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = static_cast<uint32_t>(std::max(2, std::atoi(argv[i + 1])));
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
  }
  rte_mempool* pool = create_pool("spray_pool", 32767, 256, RTE_MBUF_DEFAULT_BUF_SIZE);
  if (!pool) return 1;

  struct Config {
    int lanes;
    int queues;
    const Mode* mode;
    std::string key() const { return std::to_string(lanes) + "/" + std::to_string(queues) + "/" + mode->name; }
  };
  std::vector<Config> configs;
  configs.push_back({1, 1, &kModes[0]});
  for (int lanes : {2, 4})
    for (const Mode& m : kModes) configs.push_back({lanes, 1, &m});
  // The same 4-lane transfer with its chunks also dealt over 2 and 4 TX queues.
  for (int q : {2, 4}) configs.push_back({4, q, &kModes[0]});
  std::map<std::string, std::vector<double>> gbps;
  bool all_ok = true, all_full = true;
  uint64_t drops = 0, inexact = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    for (const Config& c : configs) {
      const Result r = run(pool, c.lanes, c.queues, *c.mode, model, rounds);
      const std::string key = c.key();
      std::printf("run %d lanes %d queues %d %-17s %.3f Gbit/s  finished %s  pool full %s  DATA %llu  retx %llu  tail drops %llu  "
                  "inexact values %llu\n",
                  rep + 1, c.lanes, c.queues, c.mode->name, r.gbps, r.ok ? "yes" : "NO", r.pool_full ? "yes" : "NO",
                  static_cast<unsigned long long>(r.data_tx), static_cast<unsigned long long>(r.retransmits),
                  static_cast<unsigned long long>(r.shaper_drops), static_cast<unsigned long long>(r.inexact));
      std::fflush(stdout);
      gbps[key].push_back(r.gbps);
      all_ok &= r.ok;
      all_full &= r.pool_full;
      drops += r.shaper_drops;
      inexact += r.inexact;
    }
  }
  double cap[5] = {0};
  for (int l = 1; l <= kMaxLanes; ++l) cap[l] = cap[l - 1] + kLaneMbit[l - 1];
  std::printf("\n%-6s %-7s %-18s %14s %14s %12s\n", "lanes", "queues", "split", "capacity Gb/s", "goodput Gb/s",
              "of capacity");
  for (const Config& c : configs) {
    const double g = median(gbps[c.key()]);
    std::printf("%-6d %-7d %-18s %14.3f %14.3f %12.2f\n", c.lanes, c.queues, c.mode->name, cap[c.lanes] / 1e3, g,
                g / (cap[c.lanes] / 1e3));
  }
  auto gq = [&](int lanes, int queues, const char* mode) {
    return median(gbps[std::to_string(lanes) + "/" + std::to_string(queues) + "/" + mode]);
  };
  auto g = [&](int lanes, const char* mode) { return gq(lanes, 1, mode); };
  const double g1 = g(1, "adaptive");
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::printf("\nevery run finished: %s   pools full after every run: %s   shaper tail drops: %llu   "
              "values Early Close filled (loss): %llu\n",
              all_ok ? "yes" : "NO", all_full ? "yes" : "NO", static_cast<unsigned long long>(drops),
              static_cast<unsigned long long>(inexact));
  // Measured weights are the gateway's; "_oracle" figures use the lanes' configured capacities.
  std::printf(
      "{\"bench\": \"spray\", \"weights\": \"measured\", \"gbps_1\": %.3f, \"gbps_2\": %.3f, \"gbps_4\": %.3f, "
      "\"speedup_2_vs_1\": %.3f, \"speedup_4_vs_1\": %.3f, \"capacity_ratio_4_vs_1\": %.2f, "
      "\"weighted_vs_equal_2\": %.3f, \"weighted_vs_equal_4\": %.3f, \"adaptive_vs_equal_4\": %.3f, "
      "\"adaptive_vs_plan_only_4\": %.3f, \"measured_vs_capacity_weights_4_oracle\": %.3f, "
      "\"queues2_vs_1\": %.3f, \"queues4_vs_1\": %.3f, "
      "\"finished\": %s, \"pools_full\": %s, \"inexact_values\": %llu, \"repeats\": %d}\n",
      g1, g(2, "adaptive"), g(4, "adaptive"), ratio(g(2, "adaptive"), g1), ratio(g(4, "adaptive"), g1), cap[4] / cap[1],
      ratio(g(2, "weighted"), g(2, "equal")), ratio(g(4, "weighted"), g(4, "equal")), ratio(g(4, "adaptive"), g(4, "equal")),
      ratio(g(4, "adaptive"), g(4, "plan-only")), ratio(g(4, "weighted"), g(4, "weighted-oracle")),
      ratio(gq(4, 2, "adaptive"), g(4, "adaptive")), ratio(gq(4, 4, "adaptive"), g(4, "adaptive")),
      all_ok ? "true" : "false", all_full ? "true" : "false", static_cast<unsigned long long>(inexact), repeats);
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return all_ok && all_full ? 0 : 1;
}
