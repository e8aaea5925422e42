#include "gateway_pair.h"

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/ports.h"
#include "dataplane/shaper.h"
#include "junk_flood.h"

namespace sg::dp {
namespace {

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
  std::unique_ptr<crypto::Opener> opener;
  std::unique_ptr<crypto::Sealer> sealer;
};

int run_id = 0;

config::MacAddr mac_of(int site) { return config::MacAddr{{0x02, 0, 0, 0, 0, static_cast<uint8_t>(site + 1)}}; }


}  // namespace

// Every TX queue of a lane feeds the same ring, read by the peer's single RX queue, so the
// lane's shaping is unchanged by the queue count.
PairResult run_gateway_pair(rte_mempool* pool, const PairOptions& o, uint64_t model_bytes, uint32_t rounds) {
  const int lanes = std::clamp(o.lanes, 1, kPairMaxLanes), queues = std::clamp(o.queues, 1, kPairMaxQueues);
  const std::string tag = std::to_string(run_id++);
  std::vector<rte_ring*> rings;
  Site sites[2];
  rte_ring* link[2][kPairMaxLanes] = {};
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < lanes; ++l) {
      link[i][l] = rte_ring_create(("sp" + tag + "_" + std::to_string(i * kPairMaxLanes + l)).c_str(), 4096,
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
    c.transport.chunk_bytes = o.chunk_bytes;
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
      rte_ring* tx[kPairMaxQueues];
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
      if (static_cast<size_t>(l) < o.lane_mbit.size()) shapes.push_back(LinkShape{o.lane_mbit[static_cast<size_t>(l)], o.delay_us, 128});
    }
    c.peers.push_back(peer);
    s.routes = build_routes(c, s.ports, s.nbrs);
    s.handler = std::make_unique<GatewayHandler>(c, s.ports, s.nbrs, s.routes, true);
    s.shaped = std::make_unique<ShapedLinks>(*s.handler, shapes);
    s.tx = std::make_unique<LtpTx>(s.ports, s.nbrs, s.routes, const_cast<LtpCounters&>(s.handler->ltp()));
    if (o.security) {
      crypto::PeerSecurity sec = *o.security;
      sec.self = c.site.id;
      sec.peers = {peer.id};
      s.opener = std::make_unique<crypto::Opener>(sec);
      s.sealer = std::make_unique<crypto::Sealer>(sec, 1);
      s.handler->attach_security(s.opener.get(), s.sealer.get());
      s.tx->set_sealer(s.sealer.get());
    }
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
      s.txq[q] = rte_ring_create(("st" + tag + "_" + std::to_string(i * kPairMaxQueues + q)).c_str(), 4096, SOCKET_ID_ANY,
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
    if (o.spray_setup) o.spray_setup(s.tx->sprayer(), s.cfg.peers[0].id, lanes);
  }

  PairResult r;
  std::unique_ptr<test::JunkFlood> flood;
  if (o.flood_per_frame > 0) {
    test::JunkTarget t;
    std::copy(sites[0].ports[0].mac.addr_bytes, sites[0].ports[0].mac.addr_bytes + 6, t.mac.begin());
    t.ipv4 = sites[0].ports[0].ipv4;
    t.peer_ipv4 = sites[0].cfg.peers[0].address.host_order;
    t.peer_node = sites[0].cfg.peers[0].id;
    t.epoch = o.security ? o.security->first_epoch : 0;
    t.payload = static_cast<uint16_t>(o.chunk_bytes);
    flood = std::make_unique<test::JunkFlood>(pool, t, 1234);
  }
  uint64_t seen_rx = 0;
  double owed = 0;
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
    if (flood) {
      // As many junk frames as the first gateway received real ones since the last pass.
      const uint64_t rx = sites[0].engine->counters().rx_packets.get();
      owed += o.flood_per_frame * static_cast<double>(rx - seen_rx);
      seen_rx = rx;
      while (owed >= 1) {
        rte_mbuf* junk[32];
        const uint16_t n = flood->make(junk, static_cast<uint16_t>(std::min(owed, 32.0)));
        if (n == 0) break;
        r.junk += n;
        owed -= n;
        sites[0].handler->on_rx_st(*sites[0].engine, 0, junk, n, rte_rdtsc());
      }
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
      r.secs = secs;
      break;
    }
  }
  for (auto& s : sites) {
    r.shaper_drops += s.shaped->dropped.get();
    r.packets += s.engine->counters().rx_packets.get();
    r.opened += s.handler->ltp().opened.get();
    r.auth_refused += s.engine->counters().drops[static_cast<size_t>(Drop::kUnauthenticated)].get();
    if (&s == &sites[0]) {
      r.junk_dropped = s.engine->counters().total_drops();
      r.bad_tags = s.handler->ltp().auth_drops[static_cast<size_t>(AuthDrop::kBadTag)].get();
    }
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

}  // namespace sg::dp
