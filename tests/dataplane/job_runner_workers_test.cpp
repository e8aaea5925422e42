// A one-site job with a local worker, driven through JobRunner's own entry points: the round
// ends on the packet that completes it, before any poll. A worker that has its whole result
// pushes the next round at once, and the last result chunks can leave on the next ACK from a
// worker, before the engine's next poll: the workers' group must be in the next round by then
// (it drops a later round's DATA, which a worker resends only after its RTO).
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.h"
#include "config/load.h"
#include "dataplane/engine.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/ports.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/sender.h"
#include "sync/local_group.h"
#include "wire/ltp_header.h"

namespace sg::dp {
namespace {

constexpr uint32_t kChunk = 1024;  // job.worker_chunk_bytes
constexpr uint32_t kChunks = 4;

// What the worker's sender puts on the wire, one LTP message each.
struct Capture final : ltp::PacketSink {
  void send(const ltp::TxMeta&, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    std::vector<uint8_t> b(head.begin(), head.end());
    b.insert(b.end(), payload.begin(), payload.end());
    msgs.push_back(std::move(b));
  }
  std::vector<std::vector<uint8_t>> msgs;
};

// The engine's side of sending: frames to the wire are counted and freed.
class Io final : public EngineIo {
 public:
  explicit Io(rte_mempool* pool) : pool_(pool) {}
  void tx_st(uint16_t, rte_mbuf* m) override {
    ++sent;
    rte_pktmbuf_free(m);
  }
  rte_mempool* pool() const override { return pool_; }
  EngineCounters& counters() override { return c_; }
  uint16_t queue() const override { return 0; }
  uint64_t sent = 0;

 private:
  rte_mempool* pool_;
  EngineCounters c_;
};

// One site, one JobRunner on engine 0 with `workers` local workers; worker 0's address is
// known (as the handler learns it from its first packet). Every mbuf must be back at the end.
struct OneSite {
  explicit OneSite(uint32_t workers, uint32_t round_timeout_ms) {
    const std::string yaml =
        "site: {id: 1, name: solo}\n"
        "ports:\n  - {name: lan, vdev: ring, ipv4: 10.0.0.1, mac: \"02:00:00:00:00:01\"}\n"
        "job: {id: 5, model_bytes: " + std::to_string(kChunk * kChunks) + ", workers: " + std::to_string(workers) +
        ", worker_chunk_bytes: " + std::to_string(kChunk) + ", round_timeout_ms: " +
        std::to_string(round_timeout_ms) + "}\n";
    auto loaded = config::load_config_text(yaml, "test");
    if (!loaded.config) {
      ADD_FAILURE() << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
      return;
    }
    cfg = *loaded.config;
    Port p;
    p.name = "lan";
    p.ipv4 = 0x0a000001;
    p.rx_queues = p.tx_queues = 1;
    ports = {p};
    std::string err;
    if (!initial_plan(cfg, plan, err)) {
      ADD_FAILURE() << err;
      return;
    }
    tx = std::make_unique<LtpTx>(ports, nbrs, routes, counters);
    tx->bind_st(&io);
    runner = std::make_unique<JobRunner>(cfg, plan, 1, *tx);
    WorkerAddr wa;
    wa.valid = true;
    wa.ipv4 = 0x0a000009;
    wa.udp_port = 40000;
    tx->learn_worker_st(sync::kWorkerNodeBase, wa);
  }
  ~OneSite() {
    if (runner) runner->release_st();
    runner.reset();
    tx.reset();
    EXPECT_EQ(rte_mempool_avail_count(pool), 1023u) << "every mbuf back";
    rte_mempool_free(pool);
  }

  // Worker 0's whole push of `round`, one LTP message per chunk: a fresh sender per push, as
  // the client's transfer, polled on its own clock until everything is out.
  std::vector<std::vector<uint8_t>> push(uint32_t round, Nanos now) {
    ltp::SenderConfig sc;
    sc.local_node = sync::kWorkerNodeBase;
    sc.peer_node = cfg.site.id;
    sc.max_chunks = kChunks;
    ltp::Sender s(sc, rc, rng);
    ltp::TransferSpec t;
    t.job = cfg.job.id;
    t.round = round;
    t.chunk_size = kChunk;
    t.data = {reinterpret_cast<const uint8_t*>(grad.data()), grad.size() * 4};
    EXPECT_TRUE(s.start(t, now));
    s.release_all(now);
    Capture out;
    for (Nanos at = now; out.msgs.size() < kChunks && at < now + kSecond;) at = std::max(at + 1, s.poll(at, out));
    return out.msgs;
  }

  config::GatewayConfig cfg;
  rte_mempool* pool = create_pool("jrw", 1023, 32, RTE_MBUF_DEFAULT_BUF_SIZE);
  Io io{pool};
  std::vector<Port> ports;
  Neighbours nbrs;
  std::vector<PeerRoute> routes;
  LtpCounters counters;
  topo::Plan plan;
  std::unique_ptr<LtpTx> tx;
  std::unique_ptr<JobRunner> runner;
  ltp::DeliveryRateController rc;
  Rng rng{7};
  std::vector<float> grad = std::vector<float>(kChunk * kChunks / 4, 1.5f);
};

TEST(JobRunnerWorkers, TheRoundEndsOnThePacketThatCompletesIt) {
  OneSite site(1, 5000);
  ASSERT_TRUE(site.runner);
  JobRunner& runner = *site.runner;
  Nanos now = kMilli;
  for (uint32_t round = 1; round <= 2; ++round) {
    const auto data = site.push(round, now);
    ASSERT_EQ(data.size(), kChunks) << "the whole push in the first window";
    runner.on_packet_st(data[0], now);
    runner.poll_st(now);  // the WAN round begins with the first push
    EXPECT_EQ(runner.round(), round);
    for (uint32_t i = 1; i + 1 < kChunks; ++i) runner.on_packet_st(data[i], now);
    runner.poll_st(now);
    EXPECT_EQ(runner.counters().worker_rounds.get(), round - 1) << "a chunk is still missing";
    // No poll after the last chunk: in round 2 this is the worker that got its result
    // (on an ACK, before the next poll) and pushed at once.
    runner.on_packet_st(data[kChunks - 1], now);
    EXPECT_EQ(runner.counters().rounds.get(), round);
    EXPECT_EQ(runner.counters().worker_rounds.get(), round) << "the round ended on the packet that completed it";
    now += kMicro;
  }
  runner.poll_st(now);
  EXPECT_EQ(runner.counters().worker_timeouts.get(), 0u);
  EXPECT_EQ(runner.counters().worker_early.get(), 0u);
  EXPECT_GT(site.io.sent, 0u) << "ACKs and results went out to the worker";
}

// A reload of job.round_timeout_ms (set_live) moves a derived worker timeout (worker_timeout_ms
// 0: half the round timeout) with it: a site with a dead worker gives up on it after half the
// new round timeout, not the old one, so before its peers give up on the site.
TEST(JobRunnerWorkers, AReloadedRoundTimeoutMovesTheDerivedWorkerTimeout) {
  OneSite site(2, 8000);  // worker 1 is dead
  ASSERT_TRUE(site.runner);
  JobRunner& runner = *site.runner;
  runner.set_live(site.cfg.job.rounds, 1000);  // reloaded before the round: worker timeout 500 ms
  const Nanos now = kMilli;
  const auto data = site.push(1, now);
  ASSERT_EQ(data.size(), kChunks);
  for (const auto& m : data) runner.on_packet_st(m, now);
  runner.poll_st(now);  // the round begins and takes the reloaded timeout
  EXPECT_EQ(runner.round(), 1u);
  for (int i = 0; i < 4; ++i) runner.poll_st(now + 400 * kMilli + i * kMicro);
  EXPECT_EQ(runner.counters().worker_timeouts.get(), 0u) << "before the new worker timeout";
  EXPECT_EQ(runner.counters().worker_rounds.get(), 0u);
  for (int i = 0; i < 4; ++i) runner.poll_st(now + 600 * kMilli + i * kMicro);
  EXPECT_EQ(runner.counters().worker_timeouts.get(), 1u)
      << "half the reloaded round timeout (500 ms), not half the old one (4 s)";
}

}  // namespace
}  // namespace sg::dp
