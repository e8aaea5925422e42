// Three gateways in one process, joined pairwise by ring-backed ports, run the job's rounds
// through the real packet path (Engine -> GatewayHandler -> JobRunner -> lib/sync -> LtpTx):
// every site gets exactly the mean of the synthetic gradients; with injected loss the rounds
// still finish, bubbles are reported and most values stay exact; hostile frames are counted
// drops; afterwards every pool is full. Traffic between the sites is sealed (lib/crypto), as a
// deployed gateway's is; one test runs plain mode.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <malloc.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>

#include "common/rng.h"
#include "crypto/peer_sessions.h"
#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/job_memory.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/policy_slot.h"
#include "dataplane/ports.h"
#include "junk_flood.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace sg::dp {
namespace {

constexpr int kSites = 3;

config::MacAddr mac_of(int site, int peer) {
  return config::MacAddr{{0x02, 0, 0, 0, static_cast<uint8_t>(site + 1), static_cast<uint8_t>(peer + 1)}};
}

// Drops a seeded fraction of received frames before the gateway sees them (freeing them),
// to play a lossy WAN between the ring ports.
class LossyHandler final : public PacketHandler {
 public:
  LossyHandler(PacketHandler& inner, double loss, uint64_t seed) : inner_(inner), loss_(loss), rng_(seed) {}
  void on_rx_st(EngineIo& io, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now) override {
    rte_mbuf* keep[512];
    uint16_t k = 0;
    const bool dark = port == blackhole_port && std::chrono::steady_clock::now() < blackhole_until;
    for (uint16_t i = 0; i < n; ++i) {
      if (dark || drop_round_data(pkts[i]) || rng_.chance(loss_)) {
        rte_pktmbuf_free(pkts[i]);
        ++dropped;
      } else {
        keep[k++] = pkts[i];
      }
    }
    for (uint16_t i = 0; i < k && port == 0 && captured.size() < capture; ++i)
      captured.push_back(rte_pktmbuf_copy(keep[i], io.pool(), 0, UINT32_MAX));
    if (k) inner_.on_rx_st(io, port, keep, k, now);
  }
  // Everything arriving on port `blackhole_port` is lost until `blackhole_until`.
  int blackhole_port = -1;
  std::chrono::steady_clock::time_point blackhole_until{};
  // Copies of the first `capture` frames that reach the gateway on port 0 (the test owns them).
  size_t capture = 0;
  std::vector<rte_mbuf*> captured;
  unsigned on_poll_st(EngineIo& io, uint64_t now) override { return inner_.on_poll_st(io, now); }
  void on_stop_st(EngineIo& io) override { inner_.on_stop_st(io); }
  uint64_t dropped = 0;
  // Lose the first `drop_count` DATA frames of round `drop_round` (0: off).
  uint32_t drop_round = 0, drop_count = 0;

 private:
  bool drop_round_data(rte_mbuf* m) {
    if (!drop_round || !drop_count) return false;
    std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
    auto f = wire::parse_udp_frame(frame);
    if (!f) return false;
    auto d = wire::parse_data(wire::frame_payload(frame, *f));
    if (!d || d->f.round != drop_round) return false;
    --drop_count;
    return true;
  }

  PacketHandler& inner_;
  double loss_;
  Rng rng_;
};

struct Site {
  config::GatewayConfig cfg;
  std::vector<std::unique_ptr<ltp::LinkShare>> shares;  // declared first: outlive the jobs' senders
  // A second job through the same handler (add_job): its own config, plan, sink and state.
  config::GatewayConfig cfg2;
  topo::Plan plan2;
  std::unique_ptr<LtpTx> tx2;
  std::unique_ptr<JobRunner> job2;
  rte_ring* handoff = nullptr;
  std::unique_ptr<GatewayHandler> handler1;  // second engine (multi-queue case)
  std::unique_ptr<Engine> engine1;
  // Shards split over the two engines: engine 1's job, its LTP sink, the rings between them.
  std::unique_ptr<LtpTx> tx1;
  std::unique_ptr<JobRunner> job1;
  std::unique_ptr<EngineLink> link;
  rte_ring* owner[2] = {nullptr, nullptr};
  std::vector<Port> ports;
  Neighbours nbrs;
  std::vector<PeerRoute> routes;
  std::unique_ptr<GatewayHandler> handler;
  std::unique_ptr<LossyHandler> lossy;
  std::unique_ptr<LtpTx> tx;
  std::unique_ptr<JobRunner> job;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<crypto::Opener> opener, opener1;
  std::unique_ptr<crypto::Sealer> sealer, sealer1;
};

// Every site's sessions from one deployment secret (lane = engine + 1, as control/security.h).
crypto::PeerSecurity security_of(const config::GatewayConfig& c, uint8_t secret_byte = 0x5a) {
  crypto::PeerSecurity sec;
  sec.secret.assign(32, secret_byte);
  sec.self = c.site.id;
  for (const auto& p : c.peers) sec.peers.push_back(p.id);
  sec.lanes = 3;
  sec.first_epoch = 1000;
  return sec;
}

struct Testbed {
  rte_mempool* pool = nullptr;
  std::vector<rte_ring*> rings;
  Site sites[kSites];
  topo::Plan plan;

  int queues = 1;

  // queues == 2: every port has two queue pairs and every site two engines; what a site sends
  // on queue 0 arrives on the peer's queue 1, so engine 1 receives everything and must hand
  // the job's packets to engine 0 (the multi-queue path).
  // split: with two queues, both engines run the job (shards s % 2 == engine) instead of
  // engine 1 handing everything to engine 0.
  Testbed(const std::string& tag, double loss, uint32_t rounds, uint64_t model_bytes, int nq = 1, bool split = false,
          bool sealed = true)
      : queues(nq) {
    pool = create_pool("rp" + tag, 16383, 64, RTE_MBUF_DEFAULT_BUF_SIZE);
    EXPECT_NE(pool, nullptr);
    // link[i][j][q]: frames site i sends to j on TX queue q.
    rte_ring* link[kSites][kSites][2] = {};
    for (int i = 0; i < kSites; ++i)
      for (int j = 0; j < kSites; ++j)
        for (int q = 0; q < queues; ++q)
          if (i != j) {
            link[i][j][q] = rte_ring_create(("r" + tag + std::to_string(i) + std::to_string(j) + std::to_string(q)).c_str(),
                                            8192, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
            rings.push_back(link[i][j][q]);
          }
    for (int i = 0; i < kSites; ++i) {
      Site& s = sites[i];
      auto& c = s.cfg;
      c.source = "test";
      c.site = {static_cast<uint16_t>(i + 1), "site" + std::to_string(i)};
      c.job.model_bytes = model_bytes;
      c.job.rounds = rounds;
      c.job.round_timeout_ms = 20000;
      for (int j = 0; j < kSites; ++j) {
        if (j == i) continue;
        config::PortConfig pc;
        pc.name = "to" + std::to_string(j);
        pc.vdev = "ring";
        pc.ipv4.host_order = 0x0a000001 + i;
        pc.mac = mac_of(i, j);
        c.ports.push_back(pc);
        config::PeerConfig peer;
        peer.id = static_cast<uint16_t>(j + 1);
        peer.name = "site" + std::to_string(j);
        peer.address.host_order = 0x0a000001 + j;
        peer.udp_port = c.transport.udp_port;
        peer.mac = mac_of(j, i);  // the far end's port MAC: no ARP round trip needed here
        peer.paths.push_back(config::PathConfig{0, pc.name, {}, {}});
        c.peers.push_back(peer);
        // RX queue q reads what the peer sent on its TX queue (q + 1) % queues: crossed.
        rte_ring* rx[2] = {link[j][i][(queues - 1) % queues], link[j][i][0]};
        rte_ring* tx[2] = {link[i][j][0], queues > 1 ? link[i][j][1] : nullptr};
        const int id = rte_eth_from_rings(("p" + tag + std::to_string(i) + std::to_string(j)).c_str(), rx, queues, tx,
                                          queues, SOCKET_ID_ANY);
        EXPECT_GE(id, 0);
        Port p;
        p.name = pc.name;
        p.id = static_cast<uint16_t>(id);
        p.rx_queues = p.tx_queues = static_cast<uint16_t>(queues);
        std::copy(pc.mac->bytes.begin(), pc.mac->bytes.end(), p.mac.addr_bytes);
        p.ipv4 = pc.ipv4.host_order;
        rte_eth_conf conf{};
        EXPECT_EQ(rte_eth_dev_configure(p.id, queues, queues, &conf), 0);
        for (int q = 0; q < queues; ++q) {
          EXPECT_EQ(rte_eth_rx_queue_setup(p.id, q, 1024, SOCKET_ID_ANY, nullptr, pool), 0);
          EXPECT_EQ(rte_eth_tx_queue_setup(p.id, q, 1024, SOCKET_ID_ANY, nullptr), 0);
        }
        EXPECT_EQ(rte_eth_dev_start(p.id), 0);
        s.ports.push_back(p);
      }
    }
    std::string err;
    EXPECT_TRUE(initial_plan(sites[0].cfg, plan, err)) << err;
    for (int i = 0; i < kSites; ++i) {
      Site& s = sites[i];
      s.routes = build_routes(s.cfg, s.ports, s.nbrs);
      s.handler = std::make_unique<GatewayHandler>(s.cfg, s.ports, s.nbrs, s.routes, true);
      s.tx = std::make_unique<LtpTx>(s.ports, s.nbrs, s.routes, const_cast<LtpCounters&>(s.handler->ltp()));
      s.job = std::make_unique<JobRunner>(s.cfg, plan, 1, *s.tx, ShardRole{0, split ? 2u : 1u});
      if (sealed) {
        const crypto::PeerSecurity sec = security_of(s.cfg);
        s.opener = std::make_unique<crypto::Opener>(sec);
        s.sealer = std::make_unique<crypto::Sealer>(sec, 1);
        s.opener1 = std::make_unique<crypto::Opener>(sec);
        s.sealer1 = std::make_unique<crypto::Sealer>(sec, 2);
        s.handler->attach_security(s.opener.get(), s.sealer.get());
        s.tx->set_sealer(s.sealer.get());
      }
      s.handler->attach_job(s.job.get(), s.tx.get());
      s.lossy = std::make_unique<LossyHandler>(*s.handler, loss, 100 + i);
      EngineParams ep;
      s.engine = std::make_unique<Engine>(s.ports, pool, *s.lossy, ep);
      if (queues > 1 && split) {
        s.handler1 = std::make_unique<GatewayHandler>(s.cfg, s.ports, s.nbrs, s.routes, false);
        s.tx1 = std::make_unique<LtpTx>(s.ports, s.nbrs, s.routes, const_cast<LtpCounters&>(s.handler1->ltp()));
        s.job1 = std::make_unique<JobRunner>(s.cfg, plan, 1, *s.tx1, ShardRole{1, 2});
        if (sealed) {
          s.handler1->attach_security(s.opener1.get(), s.sealer1.get());
          s.tx1->set_sealer(s.sealer1.get());
        }
        s.handler1->attach_job(s.job1.get(), s.tx1.get());
        for (int e = 0; e < 2; ++e)
          s.owner[e] = rte_ring_create(("o" + tag + std::to_string(i) + std::to_string(e)).c_str(), 4096, SOCKET_ID_ANY,
                                       RING_F_SC_DEQ);
        s.handler->attach_shard_engines({s.owner[0], s.owner[1]}, 0);
        s.handler1->attach_shard_engines({s.owner[0], s.owner[1]}, 1);
        s.link = std::make_unique<EngineLink>("l" + tag + std::to_string(i), 4096, 4096);
        EXPECT_TRUE(s.link->ok());
        s.job->attach_followers({s.link.get()}, {s.job1.get()});
        s.job1->attach_lead(s.link.get(), s.job.get());
        ep.queue = 1;
        s.engine1 = std::make_unique<Engine>(s.ports, pool, *s.handler1, ep);
      } else if (queues > 1) {
        s.handoff = rte_ring_create(("h" + tag + std::to_string(i)).c_str(), 4096, SOCKET_ID_ANY, RING_F_SC_DEQ);
        s.handler1 = std::make_unique<GatewayHandler>(s.cfg, s.ports, s.nbrs, s.routes, false);
        if (sealed) s.handler1->attach_security(s.opener1.get(), s.sealer1.get());
        s.handler->attach_handoff(s.handoff);
        s.handler1->attach_handoff(s.handoff);
        ep.queue = 1;
        s.engine1 = std::make_unique<Engine>(s.ports, pool, *s.handler1, ep);
      }
    }
  }

  // A second job (id 2, its own model size and rounds) on every site's engine 0, beside the
  // first: the handler routes each message by the job its header names.
  // shared: both jobs' senders draw on one ltp::LinkShare per peer (weights 1 and 2), as a
  // gateway of several jobs runs them; the first job is rebuilt onto the shares.
  void add_job(uint64_t model_bytes, uint32_t rounds, bool shared = false) {
    for (auto& s : sites) {
      s.cfg2 = s.cfg;
      s.cfg2.job.id = 2;
      s.cfg2.job.model_bytes = model_bytes;
      s.cfg2.job.rounds = rounds;
      s.cfg2.job.weight = 2;
      std::vector<ltp::LinkShare*> shares;
      if (shared) {
        for (uint16_t site : job_sites(s.cfg)) {
          s.shares.push_back(site == s.cfg.site.id ? nullptr
                                                   : std::make_unique<ltp::LinkShare>(
                                                         std::make_unique<ltp::DeliveryRateController>(wan_rate(s.cfg))));
          shares.push_back(s.shares.back().get());
        }
        // The first job, not yet started, onto the shares too (one slot per job id: a new handler).
        // (In dependency order: the engine and job use the handler's counters through tx.)
        s.engine.reset();
        s.lossy.reset();
        s.job.reset();
        s.tx.reset();
        s.handler = std::make_unique<GatewayHandler>(s.cfg, s.ports, s.nbrs, s.routes, true);
        if (s.opener) s.handler->attach_security(s.opener.get(), s.sealer.get());
        s.tx = std::make_unique<LtpTx>(s.ports, s.nbrs, s.routes, const_cast<LtpCounters&>(s.handler->ltp()));
        if (s.sealer) s.tx->set_sealer(s.sealer.get());
        s.job = std::make_unique<JobRunner>(s.cfg, plan, 1, *s.tx, ShardRole{}, shares);
        EXPECT_TRUE(s.handler->attach_job(s.job.get(), s.tx.get()));
        s.lossy = std::make_unique<LossyHandler>(*s.handler, 0.0, 100);
        s.engine = std::make_unique<Engine>(s.ports, pool, *s.lossy, EngineParams{});
      }
      std::string err;
      EXPECT_TRUE(initial_plan(s.cfg2, s.plan2, err)) << err;
      s.tx2 = std::make_unique<LtpTx>(s.ports, s.nbrs, s.routes, const_cast<LtpCounters&>(s.handler->ltp()));
      if (s.sealer) s.tx2->set_sealer(s.sealer.get());
      s.job2 = std::make_unique<JobRunner>(s.cfg2, s.plan2, 1, *s.tx2, ShardRole{}, shares);
      EXPECT_TRUE(s.handler->attach_job(s.job2.get(), s.tx2.get()));
      EXPECT_FALSE(s.handler->attach_job(s.job2.get(), s.tx2.get())) << "one slot per job id";
    }
  }

  // Called after every pass over the engines (a flood injector, a fault).
  std::function<void()> between_polls;

  // Polls the three engines in turn on this thread until every job finished (bounded).
  bool run(std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      bool all = true;
      for (auto& s : sites) {
        if (s.engine1) {
          s.engine1->poll_once_st(rte_rdtsc());
          s.engine1->flush_st();
        }
        s.engine->poll_once_st(rte_rdtsc());
        s.engine->flush_st();
        all &= s.job->finished() && (!s.job2 || s.job2->finished());
      }
      if (between_polls) between_polls();
      if (all) return true;
    }
    return false;
  }

  void shutdown() {
    for (auto& s : sites) {
      s.handler->on_stop_st(*s.engine);
      s.engine->flush_st();
      if (s.handler1) {
        s.handler1->on_stop_st(*s.engine1);
        s.engine1->flush_st();
      }
    }
    for (auto& s : sites) drain_rx(s.ports);
    for (auto& s : sites)
      for (rte_ring* r : s.owner) {  // frames handed over after their engine stopped
        if (!r) continue;
        void* objs[32];
        unsigned n;
        while ((n = rte_ring_dequeue_burst(r, objs, 32, nullptr)) > 0)
          rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(objs), n);
      }
    for (auto& s : sites) {
      s.engine1.reset();
      s.engine.reset();
      if (s.handoff) rte_ring_free(s.handoff);
      for (rte_ring* r : s.owner) rte_ring_free(r);
      s.job1.reset();
      s.job.reset();
      s.job2.reset();
      s.link.reset();
      for (auto& p : s.ports) {
        rte_eth_dev_stop(p.id);
        rte_eth_dev_close(p.id);
      }
    }
  }

  ~Testbed() {
    for (auto* r : rings) rte_ring_free(r);
    rte_mempool_free(pool);
  }
};

TEST(GatewayRounds, ThreeSitesGetExactlyTheMeanEveryRound) {
  Testbed tb("a", 0.0, 3, 256 * 1024);
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 3u);
    EXPECT_EQ(c.values_checked.get(), 3u * 64 * 1024);
    EXPECT_EQ(c.values_exact.get(), c.values_checked.get()) << s.cfg.site.name;
    EXPECT_EQ(c.up_bubbles.get() + c.down_bubbles.get(), 0u);
    EXPECT_EQ(s.engine->counters().total_drops(), 0u);
    EXPECT_GT(s.handler->ltp().opened.get(), 0u) << "every message between sites was sealed and opened";
    EXPECT_EQ(s.handler->ltp().opened.get(), s.handler->ltp().data_rx.get() + s.handler->ltp().ack_rx.get() +
                                                 s.handler->ltp().close_rx.get() + s.handler->ltp().control_rx.get());
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

// Two jobs with different models through the same gateways at once: each its own rounds and
// exact means (a job nobody runs here is refused: HostileFramesAreCountedDropsNotCrashes).
TEST(GatewayRounds, TwoJobsAtOnceEachGetTheirOwnExactMeans) {
  for (bool shared : {false, true}) {
  SCOPED_TRACE(shared ? "links shared by weight" : "a controller per sender");
  Testbed tb(shared ? "j2s" : "j2", 0.0, 3, 256 * 1024);
  tb.add_job(96 * 1024, 5, shared);
  ASSERT_TRUE(tb.run(std::chrono::seconds(90)));
  for (auto& s : tb.sites) {
    const auto& a = s.job->counters();
    const auto& b = s.job2->counters();
    EXPECT_EQ(a.rounds.get(), 3u) << s.cfg.site.name;
    EXPECT_EQ(b.rounds.get(), 5u) << s.cfg.site.name;
    EXPECT_EQ(a.values_checked.get(), 3u * 64 * 1024);
    EXPECT_EQ(b.values_checked.get(), 5u * 24 * 1024);
    EXPECT_EQ(a.values_exact.get(), a.values_checked.get()) << s.cfg.site.name;
    EXPECT_EQ(b.values_exact.get(), b.values_checked.get()) << s.cfg.site.name;
    EXPECT_EQ(s.engine->counters().total_drops(), 0u);
    EXPECT_EQ(s.handler->ltp().other_job.get(), 0u);
    if (shared) {
      uint64_t delivered = 0;
      for (const auto& sh : s.shares) delivered += sh ? sh->delivered() : 0;
      EXPECT_GT(delivered, 0u) << "the senders drew on the shared links";
    }
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
  }
}

// The admission budget of announced jobs is spent by dp::job_memory_estimate: it must cover
// what a job really takes (its heap through rounds, per site) without being loose by more
// than 2x. Model-sized buffers dominate and are mmapped (counted in hblkhd from any thread).
TEST(GatewayRounds, JobMemoryEstimateCoversWhatAJobTakes) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator does not report to mallinfo2 (the plain build runs this)";
#endif
  auto heap = [] {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
  };
  constexpr uint64_t kModel = 8u << 20;
  const int64_t before = heap();
  Testbed tb("mem", 0.0, 2, kModel);
  ASSERT_TRUE(tb.run(std::chrono::seconds(90)));
  const int64_t per_site = (heap() - before) / kSites;
  const uint64_t estimate = job_memory_estimate(tb.sites[0].cfg, 1);
  // Compression stays off on these clean links (adaptive): the estimate's reserve for its
  // buffers is not taken here, so looseness is judged without it.
  config::GatewayConfig off = tb.sites[0].cfg;
  off.compression.mode = config::CompressionMode::kOff;
  const uint64_t estimate_off = job_memory_estimate(off, 1);
  std::printf("job of %llu bytes: heap %.1f MiB per site, estimate %.1f MiB (%.1f MiB without compression)\n",
              (unsigned long long)kModel, per_site / 1048576.0, estimate / 1048576.0, estimate_off / 1048576.0);
  EXPECT_GT(per_site, static_cast<int64_t>(kModel)) << "the job's buffers were not seen";
  EXPECT_LE(per_site, static_cast<int64_t>(estimate)) << "the estimate is short of what a job takes";
  EXPECT_LE(estimate_off, 2 * static_cast<uint64_t>(per_site) + (2u << 20)) << "the estimate is loose";
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool));
}

TEST(GatewayRounds, PlainModeStillRunsWhenTheConfigAsksForIt) {
  Testbed tb("pl", 0.0, 2, 64 * 1024, 1, false, /*sealed=*/false);
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    EXPECT_EQ(s.job->counters().values_exact.get(), s.job->counters().values_checked.get());
    EXPECT_EQ(s.handler->ltp().opened.get(), 0u);
    EXPECT_EQ(s.engine->counters().total_drops(), 0u);
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool));
}

TEST(GatewayRounds, FirstTransmissionsOfARoundLostEverywhere) {
  // Every site loses the first 150 DATA frames of round 2 (a burst outage right at a round
  // start): the round must recover by retransmission alone, exactly, without a timeout.
  Testbed tb("f", 0.0, 2, 64 * 1024);
  for (auto& s : tb.sites) {
    s.lossy->drop_round = 2;
    s.lossy->drop_count = 150;  // the first transmissions of round 2, then some retransmissions
  }
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    EXPECT_EQ(s.job->counters().rounds.get(), 2u);
    EXPECT_EQ(s.job->counters().timeouts.get(), 0u);
    EXPECT_EQ(s.job->counters().values_exact.get(), s.job->counters().values_checked.get());
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool));
}

TEST(GatewayRounds, TwoQueuesHandTheJobToEngineZero) {
  Testbed tb("m", 0.0, 3, 256 * 1024, /*queues=*/2);
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 3u);
    EXPECT_EQ(c.values_exact.get(), c.values_checked.get()) << s.cfg.site.name;
    // Everything arrived on queue 1 and crossed to engine 0 through the hand-off ring.
    EXPECT_GT(s.engine1->counters().rx_packets.get(), 100u);
    EXPECT_EQ(s.engine->counters().rx_packets.get(), 0u);
    EXPECT_EQ(s.handler1->ltp().handoff_full.get(), 0u);
    EXPECT_EQ(s.engine->counters().total_drops(), 0u) << "handed-off frames keep the port they came in on";
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

TEST(GatewayRounds, TwoEnginesSplitTheShardsAndHandOverWhatArrivesOnTheOther) {
  // Both engines run the job, each its own shards; the crossed queues deliver every frame to
  // engine 1, which hands engine 0's shards over. Exact means, both engines sent DATA.
  Testbed tb("s", 0.0, 3, 256 * 1024, /*queues=*/2, /*split=*/true);
  EXPECT_EQ(tb.plan.shards.size(), 4u) << "the plan is spread to topology.shards";
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 3u);
    EXPECT_EQ(c.values_checked.get(), 3u * 64 * 1024) << "the lead counts its follower's checks";
    EXPECT_EQ(c.values_exact.get(), c.values_checked.get()) << s.cfg.site.name;
    EXPECT_EQ(c.link_stray.get() + s.job1->counters().link_stray.get(), 0u);
    EXPECT_GT(s.handler->ltp().data_tx.get(), 0u);
    EXPECT_GT(s.handler1->ltp().data_tx.get(), 0u);
    EXPECT_GT(s.handler1->ltp().handed_over.get(), 100u) << "engine 0's shards crossed over";
    EXPECT_GT(s.handler->ltp().data_rx.get(), 0u) << "engine 0 processed its shards' DATA";
    EXPECT_EQ(s.handler1->ltp().handoff_full.get(), 0u);
    EXPECT_EQ(s.engine->counters().total_drops() + s.engine1->counters().total_drops(), 0u);
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

TEST(GatewayRounds, LossyLinksStillFinishWithBubblesReported) {
  Testbed tb("b", 0.03, 3, 256 * 1024);
  ASSERT_TRUE(tb.run(std::chrono::seconds(90)));
  uint64_t lossy_events = 0, dropped = 0;
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 3u);
    EXPECT_EQ(c.timeouts.get(), 0u);
    // Early Close trades the last few chunks for time: most values are still exact.
    EXPECT_GT(static_cast<double>(c.values_exact.get()) / c.values_checked.get(), 0.8) << s.cfg.site.name;
    lossy_events += c.up_bubbles.get() + c.down_bubbles.get() + c.retransmits.get();
    dropped += s.lossy->dropped;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_GT(lossy_events, 0u) << "losses must show as bubbles or retransmissions";
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

// The whole model as one shard, a star rooted at the last site: a tree other than the
// initial plan's, for the policy-switch tests.
topo::Plan one_shard_star(const topo::Plan& initial) {
  topo::Plan star = initial;
  star.shards.resize(1);
  star.shards[0].byte_begin = 0;
  star.shards[0].byte_end = star.model_bytes;
  star.shards[0].root = kSites - 1;
  star.shards[0].parent.assign(kSites, kSites - 1);
  star.shards[0].parent[kSites - 1] = topo::kNoSite;
  return star;
}

TEST(GatewayRounds, PublishedPolicyIsTakenAtTheSameRoundEverywhere) {
  Testbed tb("d", 0.0, 6, 128 * 1024);
  PolicySlot slots[kSites];
  for (int i = 0; i < kSites; ++i) tb.sites[i].job->attach_control(&slots[i], nullptr);
  // What the policy protocol hands every gateway once they agree: version 2 from round 4,
  // a different tree (a star rooted at the last site) than the initial plan.
  const topo::Plan star = one_shard_star(tb.plan);
  ASSERT_EQ(topo::validate(star), topo::PlanError::kOk);
  for (int i = 0; i < kSites; ++i) {
    auto snap = std::make_unique<PolicySnapshot>();
    snap->version = 2;
    snap->from_round = 4;
    snap->plan = star;
    slots[i].publish(std::move(snap));
  }
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 6u);
    EXPECT_EQ(c.policy_switches.get(), 1u) << s.cfg.site.name;
    EXPECT_EQ(c.policy_version.load(), 2u);
    EXPECT_EQ(c.switch_round.load(), 4u) << "every gateway switches at the agreed round";
    EXPECT_EQ(c.values_exact.get(), c.values_checked.get()) << "no round mixed two policies";
  }
  // A newer snapshot replaces the old one; the old one is freed once engine 0 passed a
  // quiescent point (it did, many times, above).
  auto v3 = std::make_unique<PolicySnapshot>();
  v3->version = 3;
  v3->from_round = 100;
  v3->plan = tb.plan;
  slots[0].publish(std::move(v3));
  tb.sites[0].job->poll_st(0);  // one more quiescent report
  EXPECT_EQ(slots[0].reclaim(), 0u);
  for (auto& s : tb.sites) s.job->on_stop_st();
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool));
}

// Two switches agreed before the first of them comes into force (the control thread approves
// rounds ahead of the engines; with control.switch_rounds_ahead 1 on a fluctuating WAN this
// happened within a round): the engines must run round 3 under version 2 and round 4 under
// version 3 everywhere. They once saw only the newest snapshot, skipped version 2, and a site
// whose engine had already taken it ran round 3 under another plan than its peers.
TEST(GatewayRounds, TwoPoliciesAgreedBeforeTheFirstComesIntoForceAreBothTaken) {
  Testbed tb("p2", 0.0, 6, 128 * 1024);
  PolicySlot slots[kSites];
  for (int i = 0; i < kSites; ++i) tb.sites[i].job->attach_control(&slots[i], nullptr);
  const topo::Plan star = one_shard_star(tb.plan);
  ASSERT_EQ(topo::validate(star), topo::PlanError::kOk);
  for (int i = 0; i < kSites; ++i) {
    auto v2 = std::make_unique<PolicySnapshot>();
    v2->version = 2;
    v2->from_round = 3;
    v2->plan = star;
    slots[i].publish(std::move(v2));
    auto v3 = std::make_unique<PolicySnapshot>();
    v3->version = 3;
    v3->from_round = 4;
    v3->plan = tb.plan;
    slots[i].publish(std::move(v3));
    const PolicySnapshot* p = slots[i].peek_st();
    ASSERT_EQ(p->earlier.size(), 1u);
    EXPECT_EQ(p->for_round(2), nullptr);
    EXPECT_EQ(p->for_round(3)->version, 2u);
    EXPECT_EQ(p->for_round(4)->version, 3u);
    EXPECT_EQ(p->for_round(9)->version, 3u);
  }
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 6u);
    EXPECT_EQ(c.policy_switches.get(), 2u) << s.cfg.site.name << ": round 3 under version 2, round 4 under 3";
    EXPECT_EQ(c.policy_version.load(), 3u);
    EXPECT_EQ(c.switch_round.load(), 4u);
    EXPECT_EQ(c.values_exact.get(), c.values_checked.get()) << "no round mixed two policies";
  }
  // Only the newest snapshots are kept with a new one.
  for (uint32_t v = 4; v < 4 + 2 * PolicySnapshot::kEarlier; ++v) {
    auto snap = std::make_unique<PolicySnapshot>();
    snap->version = v;
    snap->from_round = 100 + v;
    snap->plan = tb.plan;
    slots[0].publish(std::move(snap));
  }
  EXPECT_EQ(slots[0].peek_st()->earlier.size(), PolicySnapshot::kEarlier);
  for (auto& s : tb.sites) s.job->on_stop_st();
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool));
}

TEST(GatewayRounds, BothEnginesOfEveryGatewaySwitchPolicyAtTheAgreedRound) {
  // Shards split over two engines per gateway: a new policy (a two-shard star at the last
  // site, spread to 4 shards) from round 3 is taken by every engine of every gateway at round
  // 3; the old snapshot is reclaimed only after both engines passed a quiescent point.
  Testbed tb("e", 0.0, 5, 128 * 1024, /*queues=*/2, /*split=*/true);
  std::vector<std::unique_ptr<PolicySlot>> slots;
  for (auto& s : tb.sites) {
    slots.push_back(std::make_unique<PolicySlot>(2));
    s.job->attach_control(slots.back().get(), nullptr);
    s.job1->attach_control(slots.back().get(), nullptr);
  }
  topo::Plan star = tb.plan;
  for (auto& t : star.shards) {
    t.root = kSites - 1;
    t.parent.assign(kSites, kSites - 1);
    t.parent[kSites - 1] = topo::kNoSite;
  }
  ASSERT_EQ(topo::validate(star), topo::PlanError::kOk);
  for (auto& slot : slots) {
    auto snap = std::make_unique<PolicySnapshot>();
    snap->version = 2;
    snap->from_round = 3;
    snap->plan = star;
    slot->publish(std::move(snap));
  }
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& s : tb.sites) {
    for (const JobRunner* j : {s.job.get(), s.job1.get()}) {
      EXPECT_EQ(j->counters().policy_switches.get(), 1u) << s.cfg.site.name << " engine " << j->role().engine;
      EXPECT_EQ(j->counters().switch_round.load(), 3u) << s.cfg.site.name << " engine " << j->role().engine;
    }
    EXPECT_EQ(s.job->counters().rounds.get(), 5u);
    EXPECT_EQ(s.job->counters().values_exact.get(), s.job->counters().values_checked.get()) << "no round mixed policies";
  }
  auto v3 = std::make_unique<PolicySnapshot>();
  v3->version = 3;
  v3->from_round = 100;
  v3->plan = tb.plan;
  slots[0]->publish(std::move(v3));
  tb.sites[0].job->poll_st(0);  // engine 0 reports quiescence; engine 1 has not yet
  EXPECT_EQ(slots[0]->reclaim(), 1u) << "held until every engine passed a quiescent point";
  tb.sites[0].job1->poll_st(0);
  EXPECT_EQ(slots[0]->reclaim(), 0u);
  for (auto& s : tb.sites) {
    s.job->on_stop_st();
    s.job1->on_stop_st();
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool));
}

TEST(InitialPlan, ConfiguredUplinksKeepTheSlowSiteFromCarryingMore) {
  // Three sites behind 200/100/50 Mbit/s uplinks (site.uplink_mbit, peers[].uplink_mbit): the
  // first plan sends no more than the slow site's own gradient through its uplink.
  config::GatewayConfig c;
  c.site = {1, "a", 200};
  for (uint16_t id : {2, 3}) {
    config::PeerConfig p;
    p.id = id;
    p.name = "p" + std::to_string(id);
    p.uplink_mbit = id == 2 ? 100 : 50;
    c.peers.push_back(p);
  }
  c.job.model_bytes = 16u << 20;
  topo::Plan plan;
  std::string err;
  ASSERT_TRUE(initial_plan(c, plan, err)) << err;
  EXPECT_EQ(site_uplinks(c), (std::vector<double>{25e6, 12.5e6, 6.25e6}));
  uint64_t sent = 0;  // by site index 2 (id 3): up to its parent, down to its children
  for (const auto& t : plan.shards) {
    if (t.parent[2] != topo::kNoSite) sent += t.bytes();
    for (int v = 0; v < 3; ++v)
      if (t.parent[v] == 2) sent += t.bytes();
  }
  EXPECT_LE(sent, c.job.model_bytes * 101 / 100) << "the 50 Mbit/s site roots no tree it cannot feed";
}

TEST(GatewayRounds, HostileFramesAreCountedDropsNotCrashes) {
  Testbed tb("c", 0.0, 1, 64 * 1024);
  Site& s = tb.sites[0];
  Rng rng(7);
  // Random bytes, truncated headers, a wrong LTP version, forged rounds and jobs: thousands of each.
  for (int burst = 0; burst < 200; ++burst) {
    rte_mbuf* pkts[32];
    for (int i = 0; i < 32; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(tb.pool);
      ASSERT_NE(m, nullptr);
      const uint16_t len = static_cast<uint16_t>(14 + rng.below(1400));
      auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
      for (uint16_t k = 0; k < len; ++k) p[k] = static_cast<uint8_t>(rng.next());
      const int kind = i % 4;
      if (kind >= 1) {
        // A well-formed frame to us with an LTP message that lies.
        wire::UdpFrameSpec spec;
        std::copy(s.ports[0].mac.addr_bytes, s.ports[0].mac.addr_bytes + 6, spec.eth.dst.begin());
        spec.ip.src = 0x0a000002;
        spec.ip.dst = s.ports[0].ipv4;
        spec.udp = wire::UdpSpec{7401, 7400, wire::L4Checksum::kSoftware};
        const size_t hr = wire::udp_frame_headroom(spec);
        wire::DataFields f;
        f.src_node = 2;
        f.job = kind == 2 ? 99 : 1;                       // forged job
        f.round = kind == 3 ? 1000000 + burst : 1;        // forged future round
        f.chunk_count = static_cast<uint32_t>(rng.next());
        f.chunk_index = static_cast<uint32_t>(rng.next());
        auto n = wire::build_data_header(std::span<uint8_t>(p + hr, len - hr), f, 0);
        if (kind == 1 && n) p[hr + 2] = 9;  // unknown LTP version
        if (n) wire::finish_udp_frame(std::span<uint8_t>(p, len), spec, *n);
        if (n) rte_pktmbuf_trim(m, static_cast<uint16_t>(len - hr - *n));
      }
      pkts[i] = m;
    }
    s.handler->on_rx_st(*s.engine, 0, pkts, 32, rte_rdtsc());
    s.engine->flush_st();
  }
  EXPECT_GT(s.engine->counters().total_drops(), 200u * 16);
  EXPECT_GT(s.handler->ltp().bad_version.get(), 0u);
  EXPECT_GT(s.handler->ltp().other_job.get(), 0u);
  // The real rounds still run afterwards.
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  for (auto& site : tb.sites) EXPECT_EQ(site.job->counters().values_exact.get(), site.job->counters().values_checked.get());
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

// A frame from site `from` (address 10.0.0.from) to site 0's port carrying `msg`, sealed by
// `sealer` toward site 1 unless null. The UDP checksum is left out (0) so that tampering
// reaches the seal instead of failing the checksum.
rte_mbuf* frame_to_site0(Testbed& tb, uint32_t src_ip, std::span<const uint8_t> msg, crypto::Sealer* sealer) {
  Site& s = tb.sites[0];
  wire::UdpFrameSpec spec;
  std::copy(s.ports[0].mac.addr_bytes, s.ports[0].mac.addr_bytes + 6, spec.eth.dst.begin());
  spec.ip.src = src_ip;
  spec.ip.dst = s.ports[0].ipv4;
  spec.udp = wire::UdpSpec{7401, 7400, wire::L4Checksum::kNone};
  const size_t hr = wire::udp_frame_headroom(spec);
  rte_mbuf* m = rte_pktmbuf_alloc(tb.pool);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + msg.size() + 24)));
  std::copy(msg.begin(), msg.end(), p + hr);
  size_t len = msg.size();
  if (sealer) {
    p[hr + offsetof(wire::LtpCommon, flags)] |= wire::kFlagSealed;
    len = sealer->seal(1, std::span<uint8_t>(p + hr, msg.size() + 24), msg.size(), wire::ltp_header_len(wire::MsgType::kData));
    EXPECT_GT(len, 0u);
  }
  rte_pktmbuf_trim(m, static_cast<uint16_t>(msg.size() + 24 - len));
  wire::finish_udp_frame(std::span<uint8_t>(p, hr + len), spec, len);
  return m;
}

TEST(GatewayRounds, ForgedReplayedAndWrongKeyFramesNeverReachTheJob) {
  Testbed tb("x", 0.0, 2, 64 * 1024);
  Site& s = tb.sites[0];
  s.lossy->capture = 64;  // real sealed frames from its peers, to replay later
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  ASSERT_EQ(s.lossy->captured.size(), 64u);
  const auto& c = s.handler->ltp();
  auto count = [&](AuthDrop d) { return c.auth_drops[static_cast<size_t>(d)].get(); };
  // A DATA message for round 2 as site 2 would send it (chunk 0 of shard 0).
  wire::DataFields f;
  f.src_node = 2;
  f.job = 1;
  f.round = 2;
  f.policy_version = 1;
  f.chunk_count = 4;
  std::vector<uint8_t> msg(sizeof(wire::DataHeader) + 256, 0x11);
  ASSERT_TRUE(wire::build_data_header(msg, f, 256));

  // Site 2's real key on a lane its gateway does not use here (an insider), and another key file.
  crypto::Sealer site2(security_of(tb.sites[1].cfg), 2);
  crypto::Sealer wrong_key(security_of(tb.sites[1].cfg, 0x77), 2);
  std::vector<rte_mbuf*> in;
  {
    auto spoof = msg;
    spoof[offsetof(wire::LtpCommon, src_node) + 1] = 3;  // site 2 claiming to be site 3
    for (int i = 0; i < 20; ++i) in.push_back(frame_to_site0(tb, 0x0a000002, spoof, &site2));
  }
  for (int i = 0; i < 16; ++i) {
    // Sealed by site 2 for real, one ciphertext bit flipped on the way.
    rte_mbuf* m = frame_to_site0(tb, 0x0a000002, msg, &site2);
    rte_pktmbuf_mtod(m, uint8_t*)[rte_pktmbuf_data_len(m) - 30] ^= 0x01;
    in.push_back(m);
  }
  std::vector<uint8_t> scratch(msg.size() + 24);
  for (int i = 0; i < 100; ++i) wrong_key.seal(1, scratch, msg.size(), sizeof(wire::DataHeader));  // past site 2's numbers
  for (int i = 0; i < 50; ++i) in.push_back(frame_to_site0(tb, 0x0a000002, msg, &wrong_key));
  for (int i = 0; i < 50; ++i) in.push_back(frame_to_site0(tb, 0x0a000002, msg, nullptr));     // unsealed
  for (int i = 0; i < 50; ++i) in.push_back(frame_to_site0(tb, 0x0a000063, msg, &site2));      // unknown source
  const size_t replays = s.lossy->captured.size();
  for (rte_mbuf* m : s.lossy->captured) in.push_back(m);  // replays of real traffic
  s.lossy->captured.clear();
  const uint64_t rounds_before = s.job->counters().rounds.get();
  const uint64_t delivered_before = c.data_rx.get() + c.ack_rx.get() + c.close_rx.get();
  for (size_t at = 0; at < in.size(); at += 32) {
    const uint16_t n = static_cast<uint16_t>(std::min<size_t>(32, in.size() - at));
    s.handler->on_rx_st(*s.engine, 0, in.data() + at, n, rte_rdtsc());
    s.engine->flush_st();
  }
  EXPECT_EQ(count(AuthDrop::kSpoofed), 20u) << "authenticated as site 2, naming site 3";
  EXPECT_EQ(count(AuthDrop::kBadTag), 16u + 50u) << "tampered and wrong-key frames";
  EXPECT_EQ(count(AuthDrop::kUnsealed), 50u);
  EXPECT_EQ(count(AuthDrop::kUnknownSource), 50u);
  EXPECT_EQ(count(AuthDrop::kReplayed) + count(AuthDrop::kTooOld), replays);
  // The same refusals by source: all but the strangers' came from site 2's address.
  int site2_index = -1;
  for (size_t i = 0; i < s.cfg.peers.size(); ++i)
    if (s.cfg.peers[i].address.host_order == 0x0a000002) site2_index = static_cast<int>(i);
  ASSERT_GE(site2_index, 0);
  const auto& from2 = c.auth_drops_from_site[static_cast<size_t>(site2_index)];
  auto from = [](const auto& row, AuthDrop d) { return row[static_cast<size_t>(d)].get(); };
  EXPECT_EQ(from(from2, AuthDrop::kSpoofed), 20u);
  EXPECT_EQ(from(from2, AuthDrop::kBadTag), 16u + 50u);
  EXPECT_EQ(from(from2, AuthDrop::kUnsealed), 50u);
  EXPECT_EQ(from(from2, AuthDrop::kUnknownSource), 0u);
  EXPECT_EQ(from(c.auth_drops_from_stranger, AuthDrop::kUnknownSource), 50u);
  EXPECT_EQ(from(c.auth_drops_from_stranger, AuthDrop::kBadTag), 0u);
  EXPECT_EQ(c.last_refused_stranger.load(), 0x0a000063u);
  EXPECT_EQ(s.engine->counters().drops[static_cast<size_t>(Drop::kUnauthenticated)].get(), in.size());
  EXPECT_EQ(c.data_rx.get() + c.ack_rx.get() + c.close_rx.get(), delivered_before) << "nothing reached the job";
  EXPECT_EQ(s.job->counters().rounds.get(), rounds_before);
  for (auto& site : tb.sites) EXPECT_EQ(site.job->counters().values_exact.get(), site.job->counters().values_checked.get());
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

TEST(GatewayRounds, AJunkFloodDuringTheRoundsIsDroppedAndCountedAndChangesNoResult) {
  Testbed tb("j", 0.0, 3, 256 * 1024);
  Site& s = tb.sites[0];
  test::JunkTarget t;
  std::copy(s.ports[0].mac.addr_bytes, s.ports[0].mac.addr_bytes + 6, t.mac.begin());
  t.ipv4 = s.ports[0].ipv4;
  t.peer_ipv4 = 0x0a000002;  // site 2, whose frames arrive on port 0
  t.peer_node = 2;
  t.epoch = security_of(s.cfg).first_epoch;
  test::JunkFlood flood(tb.pool, t, 11);
  uint64_t injected = 0;
  tb.between_polls = [&] {
    rte_mbuf* junk[16];
    const uint16_t n = flood.make(junk, 16);
    injected += n;
    s.handler->on_rx_st(*s.engine, 0, junk, n, rte_rdtsc());
    s.engine->flush_st();
  };
  ASSERT_TRUE(tb.run(std::chrono::seconds(60)));
  tb.between_polls = nullptr;
  ASSERT_GT(injected, 1000u);
  const auto& c = s.handler->ltp();
  auto count = [&](AuthDrop d) { return c.auth_drops[static_cast<size_t>(d)].get(); };
  EXPECT_EQ(count(AuthDrop::kUnsealed), flood.made[1]);
  EXPECT_EQ(count(AuthDrop::kBadTag) + count(AuthDrop::kUnknownEpoch), flood.made[2]) << "forged tags";
  EXPECT_EQ(count(AuthDrop::kUnknownSource), flood.made[3]);
  // Every junk frame was dropped and counted somewhere (random bytes by the frame checks).
  EXPECT_EQ(s.engine->counters().total_drops(), injected);
  for (auto& site : tb.sites) {
    EXPECT_EQ(site.job->counters().rounds.get(), 3u);
    EXPECT_EQ(site.job->counters().values_exact.get(), site.job->counters().values_checked.get()) << site.cfg.site.name;
    EXPECT_EQ(site.job->counters().timeouts.get(), 0u);
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

TEST(GatewayRounds, ALinkDarkForTwoSecondsMidTrainingAndTheRoundsGoOn) {
  // Sites 0 and 1 lose everything between them, both ways, for 2 s from the moment site 0
  // finished round 1; rounds time out only after 20 s. The transfers on that link stall and
  // resume; every round finishes at every site without a timeout and Early Close fills at
  // most its bound.
  Testbed tb("bh", 0.0, 4, 256 * 1024);
  bool started = false;
  uint64_t dropped_before = 0;
  tb.between_polls = [&] {
    if (started || tb.sites[0].job->counters().rounds.get() < 1) return;
    started = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int i : {0, 1}) {
      tb.sites[i].lossy->blackhole_port = 0;  // site 0's port to site 1, site 1's port to site 0
      tb.sites[i].lossy->blackhole_until = until;
      dropped_before += tb.sites[i].lossy->dropped;
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(tb.run(std::chrono::seconds(90)));
  ASSERT_TRUE(started);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "the outage lasted";
  EXPECT_GT(tb.sites[0].lossy->dropped + tb.sites[1].lossy->dropped, dropped_before) << "frames were lost in the dark";
  for (auto& s : tb.sites) {
    const auto& c = s.job->counters();
    EXPECT_EQ(c.rounds.get(), 4u) << s.cfg.site.name;
    EXPECT_EQ(c.timeouts.get(), 0u) << s.cfg.site.name;
    std::printf("%s: %llu of %llu values exact, bubbles up %llu down %llu, early closes %llu, retransmits %llu\n",
                s.cfg.site.name.c_str(), (unsigned long long)c.values_exact.get(), (unsigned long long)c.values_checked.get(),
                (unsigned long long)c.up_bubbles.get(), (unsigned long long)c.down_bubbles.get(),
                (unsigned long long)c.early_closes.get(), (unsigned long long)c.retransmits.get());
    // Early Close never fills more than 1 - min_fraction (5%) of a transfer.
    EXPECT_GE(static_cast<double>(c.values_exact.get()), 0.95 * static_cast<double>(c.values_checked.get()))
        << s.cfg.site.name;
  }
  tb.shutdown();
  EXPECT_TRUE(pool_full(tb.pool)) << rte_mempool_avail_count(tb.pool) << " of " << tb.pool->size;
}

}  // namespace
}  // namespace sg::dp
