// A one-site job with a local worker, driven through JobRunner's own entry points: the round
// ends on the packet that completes it, before any poll. A worker that has its whole result
// pushes the next round at once, and the last result chunks can leave on the next ACK from a
// worker, before the engine's next poll: the workers' group must be in the next round by then
// (it drops a later round's DATA, which a worker resends only after its RTO).
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <algorithm>
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

TEST(JobRunnerWorkers, TheRoundEndsOnThePacketThatCompletesIt) {
  const std::string yaml =
      "site: {id: 1, name: solo}\n"
      "ports:\n  - {name: lan, vdev: ring, ipv4: 10.0.0.1, mac: \"02:00:00:00:00:01\"}\n"
      "job: {id: 5, model_bytes: " + std::to_string(kChunk * kChunks) + ", workers: 1, worker_chunk_bytes: " +
      std::to_string(kChunk) + ", round_timeout_ms: 5000}\n";
  auto loaded = config::load_config_text(yaml, "test");
  ASSERT_TRUE(loaded.config) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
  const config::GatewayConfig& cfg = *loaded.config;

  rte_mempool* pool = create_pool("jrw", 1023, 32, RTE_MBUF_DEFAULT_BUF_SIZE);
  ASSERT_NE(pool, nullptr);
  Io io(pool);
  Port p;
  p.name = "lan";
  p.ipv4 = 0x0a000001;
  p.rx_queues = p.tx_queues = 1;
  std::vector<Port> ports{p};
  Neighbours nbrs;
  std::vector<PeerRoute> routes;
  LtpCounters counters;
  {
    topo::Plan plan;
    std::string err;
    ASSERT_TRUE(initial_plan(cfg, plan, err)) << err;
    LtpTx tx(ports, nbrs, routes, counters);
    tx.bind_st(&io);
    JobRunner runner(cfg, plan, 1, tx);
    WorkerAddr wa;  // what the handler learns from the worker's first packet
    wa.valid = true;
    wa.ipv4 = 0x0a000009;
    wa.udp_port = 40000;
    tx.learn_worker_st(sync::kWorkerNodeBase, wa);

    // The worker: a fresh sender per push, as the client's transfer.
    ltp::DeliveryRateController rc;
    Rng rng(7);
    std::vector<float> grad(kChunk * kChunks / 4, 1.5f);
    Nanos now = kMilli;
    auto push_round = [&](uint32_t round) {
      ltp::SenderConfig sc;
      sc.local_node = sync::kWorkerNodeBase;
      sc.peer_node = cfg.site.id;
      sc.max_chunks = kChunks;
      ltp::Sender push(sc, rc, rng);
      ltp::TransferSpec s;
      s.job = cfg.job.id;
      s.round = round;
      s.chunk_size = kChunk;
      s.data = {reinterpret_cast<const uint8_t*>(grad.data()), grad.size() * 4};
      EXPECT_TRUE(push.start(s, now));
      push.release_all(now);
      Capture out;  // paced: polled on the sender's own clock until the whole push is out
      for (Nanos t = now; out.msgs.size() < kChunks && t < now + kSecond;) t = std::max(t + 1, push.poll(t, out));
      return out.msgs;
    };

    for (uint32_t round = 1; round <= 2; ++round) {
      const auto data = push_round(round);
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
    runner.release_st();
  }
  EXPECT_GT(io.sent, 0u) << "ACKs and results went out to the worker";
  EXPECT_EQ(rte_mempool_avail_count(pool), 1023u) << "every mbuf back";
  rte_mempool_free(pool);
}

}  // namespace
}  // namespace sg::dp
