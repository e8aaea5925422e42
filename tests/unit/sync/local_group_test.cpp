// LocalGroup: a gateway and N workers (each an ltp::Sender for its push and an ltp::Receiver
// for the result, as the worker client runs them) over an in-memory LAN driven by a fake
// clock. Checks the exact mean, missing workers, bubbles, duplicates and stray packets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <queue>
#include <set>

#include "common/rng.h"
#include "ltp/bubble_fill.h"
#include "ltp/delivery_rate_controller.h"
#include "sync/local_group.h"
#include "wire/checksum.h"
#include "wire/ltp_codec.h"

namespace sg::sync {
namespace {

constexpr uint16_t kGateway = 7;
constexpr uint32_t kJob = 3;
constexpr uint32_t kChunk = 1024;

struct Packet {
  Nanos at;
  uint64_t seq;
  uint16_t dst;
  std::vector<uint8_t> bytes;
  bool operator>(const Packet& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

// 10 Gbit/s LAN, 50 us one way, seeded loss and duplication; addressed by LTP node id.
class Lan {
 public:
  Lan(double loss, double dup, uint64_t seed) : loss_(loss), dup_(dup), rng_(seed) {}

  class Port final : public ltp::PacketSink {
   public:
    Port(Lan& lan, uint16_t self) : lan_(lan), self_(self) {}
    void send(const ltp::TxMeta& m, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
      if (m.payload_sum) {
        // What dataplane/ltp_tx.cpp does with the slot: sum once, reuse. A slot still valid
        // for bytes that have changed would put a wrong UDP checksum on a result.
        const uint32_t now_sum = ltp::kPayloadSumValid | wire::csum_fold(wire::csum_add(payload));
        if (*m.payload_sum & ltp::kPayloadSumValid) {
          ++lan_.sums_reused;
          if (*m.payload_sum != now_sum) ADD_FAILURE() << "stale payload sum for node " << m.peer_node;
        }
        *m.payload_sum = now_sum;
      }
      std::vector<uint8_t> b(head.begin(), head.end());
      b.insert(b.end(), payload.begin(), payload.end());
      lan_.enqueue(self_, m.peer_node, std::move(b));
    }

   private:
    Lan& lan_;
    uint16_t self_;
  };

  void enqueue(uint16_t src, uint16_t dst, std::vector<uint8_t> b) {
    ++sent_;
    if (dead_.count(src) || dead_.count(dst) || rng_.chance(loss_)) return;
    Nanos& free_at = link_free_[{src, dst}];
    free_at = std::max(now_, free_at) + static_cast<Nanos>(b.size() * 8 / 10);
    if (rng_.chance(dup_)) q_.push(Packet{free_at + 60 * kMicro, seq_++, dst, b});
    q_.push(Packet{free_at + 50 * kMicro, seq_++, dst, std::move(b)});
  }
  void inject(uint16_t dst, std::vector<uint8_t> b) { q_.push(Packet{now_, seq_++, dst, std::move(b)}); }

  Nanos now_ = 0;
  double loss_, dup_;
  Rng rng_;
  uint64_t seq_ = 0, sent_ = 0;
  uint64_t sums_reused = 0;  // result payload sums a port found in its slot
  std::set<uint16_t> dead_;
  std::map<std::pair<uint16_t, uint16_t>, Nanos> link_free_;
  std::priority_queue<Packet, std::vector<Packet>, std::greater<>> q_;
};

// What the worker client does for one allreduce, without sockets.
struct TestWorker {
  uint16_t node;
  size_t floats;
  ltp::DeliveryRateController rc;
  Rng rng;
  std::unique_ptr<ltp::Sender> push;
  std::unique_ptr<ltp::Receiver> recv;
  std::unique_ptr<ltp::MessageSink> result;
  std::vector<float> grad;

  TestWorker(uint16_t n, size_t f, uint32_t chunks) : node(n), floats(f), rng(n), grad(f) {
    ltp::SenderConfig sc;
    sc.local_node = node;
    sc.peer_node = kGateway;
    sc.max_chunks = chunks;
    push = std::make_unique<ltp::Sender>(sc, rc, rng);
    ltp::ReceiverConfig rcfg;
    rcfg.local_node = node;
    rcfg.max_chunks = chunks;
    rcfg.max_transfers = 4;
    recv = std::make_unique<ltp::Receiver>(rcfg);
    result = std::make_unique<ltp::MessageSink>(f * 4, kChunk, chunks);
  }

  void begin(uint32_t round, Nanos now, ltp::PacketSink& tx) {
    result->reset();
    recv->begin_round(kJob, round, 0, now, *result, tx);
    ltp::TransferSpec s;
    s.job = kJob;
    s.round = round;
    s.chunk_size = kChunk;
    s.data = {reinterpret_cast<const uint8_t*>(grad.data()), grad.size() * 4};
    ASSERT_TRUE(push->start(s, now));
  }

  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
    auto c = wire::parse_common(msg);
    if (!c) return;
    if (c->type == wire::MsgType::kData) {
      recv->on_packet(msg, now, *result, tx);
    } else {
      push->on_packet(msg, now);
    }
  }

  Nanos poll(Nanos now, ltp::PacketSink& tx) {
    return std::min(push->poll(now, tx), recv->poll(now, *result, tx));
  }

  std::span<const float> got() const {
    return {reinterpret_cast<const float*>(result->message().data()), result->message().size() / 4};
  }
};

struct Site {
  Lan lan;
  LocalGroupConfig cfg;
  std::unique_ptr<LocalGroup> group;
  Lan::Port gw_port;
  std::vector<std::unique_ptr<TestWorker>> workers;
  std::vector<std::unique_ptr<Lan::Port>> ports;
  std::vector<float> result;  // what the gateway delivers (the "global" result)
  Nanos first_final_at = -1;  // of the last run_round: group->first_final() when it was ready
  Nanos last_ready_at = -1;   // and when that was

  Site(uint32_t n, size_t floats, double loss = 0, double dup = 0, uint64_t seed = 1, uint32_t first_round = 1)
      : lan(loss, dup, seed), gw_port(lan, kGateway) {
    cfg.job = kJob;
    cfg.gateway_node = kGateway;
    cfg.workers = n;
    cfg.model_floats = floats;
    cfg.chunk_bytes = kChunk;
    cfg.first_round = first_round;
    cfg.push_timeout = 2 * kSecond;
    group = std::make_unique<LocalGroup>(cfg);
    EXPECT_TRUE(group->ok());
    for (uint32_t w = 0; w < n; ++w) {
      const auto node = static_cast<uint16_t>(kWorkerNodeBase + w);
      workers.push_back(std::make_unique<TestWorker>(node, floats, group->chunk_count()));
      ports.push_back(std::make_unique<Lan::Port>(lan, node));
    }
  }

  void fill(uint32_t round) {
    Rng r(round * 31 + 1);
    for (size_t w = 0; w < workers.size(); ++w)
      for (auto& v : workers[w]->grad) v = static_cast<float>(r.uniform() * 2 - 1) * static_cast<float>(w + 1);
  }

  bool alive(size_t w) const { return !lan.dead_.count(workers[w]->node); }

  // Moves the clock to `next` (or the next packet's arrival, if earlier; at least 1 ns on)
  // and delivers everything due by then.
  void advance(Nanos next) {
    if (!lan.q_.empty()) next = std::min(next, lan.q_.top().at);
    lan.now_ = std::max(lan.now_ + 1, next);
    while (!lan.q_.empty() && lan.q_.top().at <= lan.now_) {
      Packet p = lan.q_.top();
      lan.q_.pop();
      deliver_packet(p);
    }
  }

  void deliver_packet(Packet& p) {
    if (p.dst == kGateway) {
      group->on_packet(p.bytes, lan.now_, gw_port);
      return;
    }
    for (size_t w = 0; w < workers.size(); ++w)
      if (workers[w]->node == p.dst) workers[w]->on_packet(p.bytes, lan.now_, *ports[w]);
  }

  // Runs one round: live workers push, the gateway delivers `transform(contribution)` as the
  // result once ready. Returns false if the live workers did not all get a result in `limit`.
  // `late` (if >= 0) starts its push only `late_after` into the round; the gateway delivers
  // `deliver_delay` after the contribution is ready (the WAN round's duration).
  bool run_round(uint32_t round, Nanos limit, int late = -1, Nanos late_after = 0, Nanos deliver_delay = 0) {
    const Nanos t0 = lan.now_;
    for (size_t w = 0; w < workers.size(); ++w)
      if (alive(w) && static_cast<int>(w) != late) workers[w]->begin(round, lan.now_, *ports[w]);
    const Nanos end = lan.now_ + limit;
    bool delivered = false, late_started = late < 0;
    Nanos ready_at = -1;
    while (lan.now_ < end) {
      Nanos next = end;
      if (!late_started) {
        if (lan.now_ >= t0 + late_after) {
          workers[late]->begin(round, lan.now_, *ports[late]);
          late_started = true;
        } else {
          next = std::min(next, t0 + late_after);
        }
      }
      next = std::min(next, group->poll(lan.now_, gw_port));
      if (ready_at < 0 && group->contribution_ready(round)) {
        ready_at = lan.now_;
        first_final_at = group->first_final();
        last_ready_at = ready_at;
      }
      if (!delivered && ready_at >= 0 && lan.now_ < ready_at + deliver_delay) next = std::min(next, ready_at + deliver_delay);
      if (!delivered && ready_at >= 0 && lan.now_ >= ready_at + deliver_delay) {
        auto c = group->contribution();
        result.assign(c.begin(), c.end());
        for (auto& v : result) v *= 0.5f;  // stands in for the WAN round
        EXPECT_TRUE(group->deliver(round, result, lan.now_, gw_port));
        delivered = true;
        next = lan.now_;
      }
      bool all = delivered;
      for (size_t w = 0; w < workers.size(); ++w) {
        if (!alive(w)) continue;
        next = std::min(next, workers[w]->poll(lan.now_, *ports[w]));
        all &= workers[w]->result->ended() && workers[w]->push->done();
      }
      if (all && group->round_delivered()) return true;
      advance(next);
    }
    return false;
  }

  std::vector<float> mean_of(const std::vector<size_t>& who) const {
    std::vector<float> m(workers[0]->floats, 0.0f);
    for (size_t w : who)
      for (size_t k = 0; k < m.size(); ++k) m[k] += workers[w]->grad[k];
    for (auto& v : m) v /= static_cast<float>(who.size());
    return m;
  }
};

TEST(LocalGroup, ContributionIsTheExactMeanAndEveryWorkerGetsTheResult) {
  for (uint32_t n : {1u, 3u, 8u}) {
    Site s(n, 10007, 0, 0, n);  // not a whole number of chunks: the last one is short
    std::vector<size_t> all;
    for (size_t w = 0; w < n; ++w) all.push_back(w);
    for (uint32_t round = 1; round <= 3; ++round) {
      s.fill(round);
      ASSERT_TRUE(s.run_round(round, 5 * kSecond)) << n << " workers, round " << round;
      const auto m = s.mean_of(all);
      ASSERT_EQ(s.result.size(), m.size());
      for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(s.result[k], 0.5f * m[k], 1e-6f * (1 + std::abs(m[k]))) << k;
      for (auto& w : s.workers) {
        ASSERT_EQ(w->got().size(), s.result.size());
        EXPECT_EQ(0, std::memcmp(w->got().data(), s.result.data(), s.result.size() * 4)) << "bit-exact result";
        EXPECT_EQ(w->result->bubbles(), 0u);
      }
      EXPECT_EQ(s.group->contributors(), n);
      EXPECT_EQ(s.group->round(), round + 1) << "deliver moves on to the next round";
    }
    EXPECT_EQ(s.group->stats().rounds, 3u);
    EXPECT_EQ(s.group->stats().push_timeouts, 0u);
    EXPECT_EQ(s.group->stats().bad_chunks, 0u);
    // Each result chunk is summed for its first worker; the others (and retransmissions)
    // reuse the sum, and the port found none stale (checked on every send, every test).
    if (n > 1) {
      EXPECT_GE(s.lan.sums_reused, 3u * (n - 1) * 40u) << n << " workers";
    }
  }
}

// first_final: when the round's first chunk had every worker's copy (free to leave for the
// WAN). A worker that starts late holds every chunk back; it resets with each round.
TEST(LocalGroup, FirstFinalChunkWaitsForEveryWorkersCopy) {
  Site s(2, 50000);
  s.fill(1);
  Nanos t0 = s.lan.now_;
  ASSERT_TRUE(s.run_round(1, 5 * kSecond));
  EXPECT_GE(s.first_final_at, t0);
  EXPECT_LT(s.last_ready_at - s.first_final_at, 20 * kMilli) << "both pushed at once: a short window";
  EXPECT_EQ(s.group->first_final(), -1) << "the next round has no final chunk yet";
  s.fill(2);
  t0 = s.lan.now_;
  ASSERT_TRUE(s.run_round(2, 5 * kSecond, 1, 300 * kMilli));
  EXPECT_GE(s.first_final_at, t0 + 300 * kMilli) << "no chunk is final before the late worker's copy";
  EXPECT_LE(s.first_final_at, s.last_ready_at);
}

TEST(LocalGroup, MissingWorkerTimesOutAndTheOthersAreAveraged) {
  Site s(3, 5000);
  s.lan.dead_.insert(s.workers[2]->node);  // never pushes, never answers
  s.fill(1);
  ASSERT_TRUE(s.run_round(1, 10 * kSecond));
  const auto m = s.mean_of({0, 1});
  for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(s.result[k], 0.5f * m[k], 1e-6f * (1 + std::abs(m[k])));
  EXPECT_EQ(s.group->stats().push_timeouts, 1u);
  EXPECT_EQ(s.group->stats().missing_workers, 1u);
  EXPECT_EQ(s.group->contributors(), 2u);
  EXPECT_GE(s.lan.now_, 2 * kSecond) << "ready only after push_timeout";
  // The absent worker was not sent a result: nothing waits on it.
  EXPECT_TRUE(s.group->round_delivered());

  // It comes back for round 2: all three count again.
  s.lan.dead_.clear();
  s.fill(2);
  ASSERT_TRUE(s.run_round(2, 10 * kSecond));
  EXPECT_EQ(s.group->contributors(), 3u);
  EXPECT_EQ(s.group->stats().push_timeouts, 1u);
}

// A worker that sent nothing in a round is not waited for in the next: a dead worker costs
// its site one push timeout, not one per round. Back, it counts again at once.
TEST(LocalGroup, AWorkerAbsentForARoundIsNotWaitedForUntilItPushesAgain) {
  Site s(3, 5000);
  s.lan.dead_.insert(s.workers[2]->node);
  for (uint32_t r = 1; r <= 3; ++r) {
    s.fill(r);
    const Nanos t0 = s.lan.now_;
    ASSERT_TRUE(s.run_round(r, 10 * kSecond)) << r;
    const auto m = s.mean_of({0, 1});
    for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(s.result[k], 0.5f * m[k], 1e-6f * (1 + std::abs(m[k]))) << r;
    if (r == 1) {
      EXPECT_GE(s.lan.now_ - t0, 2 * kSecond) << "the first round waits for the push timeout";
    }
    if (r > 1) {
      EXPECT_LT(s.lan.now_ - t0, kSecond) << "round " << r << " waited for the dead worker";
    }
  }
  EXPECT_EQ(s.group->stats().push_timeouts, 1u);
  EXPECT_EQ(s.group->stats().missing_workers, 3u);
  // Back: from its first chunk it is waited for again (chunks already final without it keep
  // the others' mean); the round after, every chunk is the mean over all three.
  s.lan.dead_.clear();
  s.fill(4);
  ASSERT_TRUE(s.run_round(4, 10 * kSecond));
  EXPECT_EQ(s.group->contributors(), 3u);
  const auto two = s.mean_of({0, 1}), three = s.mean_of({0, 1, 2});
  size_t with_it = 0;
  for (size_t k = 0; k < three.size(); ++k) {
    const bool all = std::abs(s.result[k] - 0.5f * three[k]) <= 1e-6f * (1 + std::abs(three[k]));
    const bool others = std::abs(s.result[k] - 0.5f * two[k]) <= 1e-6f * (1 + std::abs(two[k]));
    ASSERT_TRUE(all || others) << k;
    with_it += all;
  }
  EXPECT_GT(with_it, 0u);
  s.fill(5);
  ASSERT_TRUE(s.run_round(5, 10 * kSecond));
  const auto m5 = s.mean_of({0, 1, 2});
  for (size_t k = 0; k < m5.size(); ++k) ASSERT_NEAR(s.result[k], 0.5f * m5[k], 1e-6f * (1 + std::abs(m5[k])));
  EXPECT_EQ(s.group->stats().push_timeouts, 1u);
}

TEST(LocalGroup, WorkerLateForTheTimeoutStillGetsTheResult) {
  Site s(3, 5000);
  s.fill(1);
  // Ready at 2 s without worker 2; its push arrives at 2.2 s; the WAN round ends at 3 s.
  ASSERT_TRUE(s.run_round(1, 10 * kSecond, /*late=*/2, 2200 * kMilli, /*deliver_delay=*/kSecond));
  const auto m = s.mean_of({0, 1});
  for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(s.result[k], 0.5f * m[k], 1e-6f * (1 + std::abs(m[k])));
  EXPECT_EQ(0, std::memcmp(s.workers[2]->got().data(), s.result.data(), s.result.size() * 4))
      << "the late worker gets the round's result and stays in step";
  EXPECT_GT(s.group->stats().late_chunks, 0u);
  EXPECT_EQ(s.group->stats().missing_workers, 1u);
}

TEST(LocalGroup, DuplicatesAndStrayPacketsChangeNothing) {
  Site s(3, 4000, 0, /*dup=*/0.3, 11);
  s.fill(1);
  for (size_t w = 0; w < 3; ++w) s.workers[w]->begin(1, 0, *s.ports[w]);
  // Garbage, DATA from a node that is not a worker, DATA for shard 1, ACK from worker 9.
  s.lan.inject(kGateway, {1, 2, 3});
  wire::DataFields f;
  f.src_node = 42;
  f.job = kJob;
  f.round = 1;
  f.chunk_count = s.group->chunk_count();
  std::vector<uint8_t> payload(kChunk, 0x41), buf(2048);
  auto n = wire::build_data(buf, f, payload);
  ASSERT_TRUE(n);
  s.lan.inject(kGateway, {buf.begin(), buf.begin() + *n});
  f.src_node = kWorkerNodeBase;
  f.shard = 1;
  n = wire::build_data(buf, f, payload);
  s.lan.inject(kGateway, {buf.begin(), buf.begin() + *n});
  wire::AckFields a;
  a.src_node = kWorkerNodeBase + 9;
  a.job = kJob;
  a.round = 1;
  n = wire::build_ack(buf, a, {});
  s.lan.inject(kGateway, {buf.begin(), buf.begin() + *n});
  // run_round begins the pushes again: already running, so start() must fail; re-run by hand.
  bool delivered = false;
  const Nanos end = 5 * kSecond;
  while (s.lan.now_ < end) {
    Nanos next = std::min(end, s.group->poll(s.lan.now_, s.gw_port));
    if (!delivered && s.group->contribution_ready(1)) {
      auto c = s.group->contribution();
      s.result.assign(c.begin(), c.end());
      ASSERT_TRUE(s.group->deliver(1, s.result, s.lan.now_, s.gw_port));
      EXPECT_FALSE(s.group->deliver(1, s.result, s.lan.now_, s.gw_port)) << "a round is delivered once";
      delivered = true;
    }
    bool all = delivered;
    for (size_t w = 0; w < 3; ++w) {
      next = std::min(next, s.workers[w]->poll(s.lan.now_, *s.ports[w]));
      all &= s.workers[w]->result->ended();
    }
    if (all && s.group->round_delivered()) break;
    s.advance(next);
  }
  ASSERT_TRUE(delivered);
  const auto m = s.mean_of({0, 1, 2});
  for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(s.result[k], m[k], 1e-6f * (1 + std::abs(m[k])));
  for (auto& w : s.workers) EXPECT_EQ(0, std::memcmp(w->got().data(), s.result.data(), s.result.size() * 4));
  EXPECT_GE(s.group->stats().bad_chunks, 2u) << "non-worker DATA and shard-1 DATA are ignored";
  EXPECT_GE(s.group->stats().stray_packets, 2u) << "garbage and the unknown worker's ACK";
  EXPECT_GT(s.group->receiver().stats().duplicates, 0u);

  // A push for the round just delivered is stale now: the worker is told so by CLOSE.
  s.workers[0]->push->start(
      {kJob, 1, 0, 0, 1, CodecId::kF32, kChunk,
       {reinterpret_cast<const uint8_t*>(s.workers[0]->grad.data()), s.workers[0]->grad.size() * 4}},
      s.lan.now_);
  for (int i = 0; i < 1000 && !s.workers[0]->push->done(); ++i) {
    s.workers[0]->poll(s.lan.now_, *s.ports[0]);
    s.lan.now_ += 100 * kMicro;
    while (!s.lan.q_.empty() && s.lan.q_.top().at <= s.lan.now_) {
      Packet p = s.lan.q_.top();
      s.lan.q_.pop();
      s.deliver_packet(p);
    }
  }
  EXPECT_EQ(s.workers[0]->push->state(), ltp::SenderState::kClosed);
  EXPECT_EQ(s.workers[0]->push->close_reason(), ltp::CloseReason::kStale);
}

TEST(LocalGroup, LossyLanGivesPerChunkMeansOfWhatArrived) {
  Site s(3, 20000, /*loss=*/0.03, 0, 5);
  s.group.reset();
  s.cfg.receiver.early_close.enabled = true;  // loss tolerance asked for (not the default)
  s.cfg.receiver.early_close.max_loss_fraction = 0.1;
  s.group = std::make_unique<LocalGroup>(s.cfg);
  for (uint32_t round = 1; round <= 2; ++round) {
    s.fill(round);
    ASSERT_TRUE(s.run_round(round, 20 * kSecond)) << "round " << round;
    // Each value is 0.5 * the mean of the workers whose chunk arrived: some non-empty subset.
    const std::vector<std::vector<size_t>> subsets{{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
    std::vector<std::vector<float>> means;
    for (const auto& sub : subsets) means.push_back(s.mean_of(sub));
    size_t exact = 0;
    const size_t cf = kChunk / 4;
    for (size_t k = 0; k < s.result.size(); k += cf) {
      int match = -1;
      for (size_t i = 0; i < subsets.size(); ++i)
        if (std::abs(s.result[k] - 0.5f * means[i][k]) <= 1e-6f * (1 + std::abs(means[i][k]))) match = static_cast<int>(i);
      ASSERT_GE(match, 0) << "chunk " << k / cf << " is not a mean of arrived gradients";
      exact += match == 6;
    }
    EXPECT_GT(exact, s.result.size() / cf * 8 / 10);
  }
  // The loss was felt somewhere: a worker retransmitted, or the gateway saw a duplicate or
  // filled a bubble (which worker's packets the seeded loss hits depends on timing).
  const auto& st = s.group->stats();
  uint64_t retransmits = 0;
  for (const auto& w : s.workers) retransmits += w->push->stats().retransmits;
  EXPECT_GT(st.push_bubbles + s.group->receiver().stats().duplicates + retransmits, 0u);
}

// The default (what the gateway runs): a lossy LAN costs retransmissions, never exactness
// (with Early Close on, this seeded 10% loss closes pushes early and the means are inexact).
TEST(LocalGroup, LossyLanStillGivesTheExactMeanByDefault) {
  Site s(3, 20000, /*loss=*/0.10, 0, 5);
  uint64_t retransmits = 0;
  for (uint32_t round = 1; round <= 4; ++round) {
    s.fill(round);
    ASSERT_TRUE(s.run_round(round, 20 * kSecond)) << "round " << round;
    const auto m = s.mean_of({0, 1, 2});
    for (size_t k = 0; k < m.size(); ++k)
      ASSERT_NEAR(s.result[k], 0.5f * m[k], 1e-6f * (1 + std::abs(m[k]))) << "round " << round << " value " << k;
  }
  for (const auto& w : s.workers) retransmits += w->push->stats().retransmits;
  EXPECT_GT(retransmits, 0u) << "the loss was felt";
  EXPECT_EQ(s.group->stats().push_bubbles, 0u);
  EXPECT_EQ(s.group->receiver().stats().closed_early, 0u);
}

TEST(LocalGroup, PushForALaterRoundMovesAnIdleGroupThere) {
  Site s(2, 3000);
  s.fill(7);
  ASSERT_TRUE(s.run_round(7, 5 * kSecond)) << "group starts at round 1, workers at 7";
  EXPECT_EQ(s.group->stats().skipped_rounds, 6u);
  EXPECT_EQ(s.group->round(), 8u);
  // Once rounds were delivered, only max_round_jump (64) ahead: round 1000 is not followed.
  s.fill(1000);
  EXPECT_FALSE(s.run_round(1000, kSecond));
  EXPECT_GT(s.group->stats().refused_jumps, 0u);
  EXPECT_EQ(s.group->round(), 8u);
}

TEST(LocalGroup, MutatedPacketsAreRefusedAndTheNextRoundStillWorks) {
  Site s(2, 3000);
  s.fill(1);
  // Record one round's real packets (both directions) to mutate them.
  std::vector<std::vector<uint8_t>> seen;
  for (size_t w = 0; w < 2; ++w) s.workers[w]->begin(1, 0, *s.ports[w]);
  for (int i = 0; i < 200000 && !(s.workers[0]->push->done() && s.workers[1]->push->done()); ++i) {
    Nanos next = s.group->poll(s.lan.now_, s.gw_port);
    for (size_t w = 0; w < 2; ++w) next = std::min(next, s.workers[w]->poll(s.lan.now_, *s.ports[w]));
    if (!s.lan.q_.empty()) next = std::min(next, s.lan.q_.top().at);
    s.lan.now_ = std::max(s.lan.now_ + 1, next);
    while (!s.lan.q_.empty() && s.lan.q_.top().at <= s.lan.now_) {
      Packet p = s.lan.q_.top();
      s.lan.q_.pop();
      if (seen.size() < 64) seen.push_back(p.bytes);
      s.deliver_packet(p);
    }
  }
  ASSERT_FALSE(seen.empty());
  ASSERT_TRUE(s.group->contribution_ready(1));
  std::vector<float> res1(s.group->contribution().begin(), s.group->contribution().end());
  ASSERT_TRUE(s.group->deliver(1, res1, s.lan.now_, s.gw_port));
  Rng r(77);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> b = seen[r.below(seen.size())];
    switch (r.below(4)) {
      case 0: b[r.below(b.size())] ^= static_cast<uint8_t>(1u << r.below(8)); break;       // bit flip
      case 1: b.resize(r.below(b.size())); break;                                            // truncated
      case 2: b.push_back(static_cast<uint8_t>(r.below(256))); break;                        // trailing byte
      default: for (int k = 0; k < 4; ++k) b[r.below(b.size() ? b.size() : 1) % std::max<size_t>(b.size(), 1)] = 0xff;
    }
    if (b.empty()) continue;
    s.group->on_packet(b, s.lan.now_, s.gw_port);
  }
  while (!s.lan.q_.empty()) s.lan.q_.pop();  // answers to garbage go nowhere
  // The gateway goes on delivering whatever becomes ready (garbage may have opened a round
  // that the push timeout then completes).
  for (Nanos end = s.lan.now_ + 3 * kSecond; s.lan.now_ < end; s.lan.now_ += 10 * kMilli) {
    s.group->poll(s.lan.now_, s.gw_port);
    if (s.group->contribution_ready(s.group->round())) {
      std::vector<float> junk(s.group->contribution().begin(), s.group->contribution().end());
      ASSERT_TRUE(s.group->deliver(s.group->round(), junk, s.lan.now_, s.gw_port));
    }
    while (!s.lan.q_.empty()) s.lan.q_.pop();
  }
  EXPECT_GT(s.group->stats().bad_chunks + s.group->stats().stray_packets + s.group->receiver().stats().malformed, 0u);
  // Whatever the garbage did to round 1 (it may have counted as chunks of a bad shape, or
  // jumped rounds), a fresh round with the real workers still gives the exact mean.
  const uint32_t next_round = s.group->round() + 5;
  s.fill(next_round);
  ASSERT_TRUE(s.run_round(next_round, 10 * kSecond));
  const auto m = s.mean_of({0, 1});
  for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(s.result[k], 0.5f * m[k], 1e-6f * (1 + std::abs(m[k])));
}

TEST(LocalGroup, RejectsUnusableConfigs) {
  LocalGroupConfig c;
  c.model_floats = 100;
  c.workers = 0;
  EXPECT_EQ(LocalGroup(c).error(), LocalGroupError::kWorkers);
  c.workers = 2;
  c.chunk_bytes = 1002;
  EXPECT_EQ(LocalGroup(c).error(), LocalGroupError::kChunkBytes);
  c.chunk_bytes = 1024;
  c.model_floats = 0;
  EXPECT_EQ(LocalGroup(c).error(), LocalGroupError::kModel);
  c.model_floats = 100;
  LocalGroup g(c);
  EXPECT_TRUE(g.ok());
  EXPECT_FALSE(g.contribution_ready(1));
  EXPECT_TRUE(g.contribution().empty());
  std::vector<float> r(100);
  Lan lan(0, 0, 1);
  Lan::Port port(lan, 1);
  EXPECT_FALSE(g.deliver(1, r, 0, port)) << "nothing collected yet";
}

// Streaming: chunks are handed out as every worker's copy arrives (before the whole push is
// in), each once and already the exact mean; result pieces given back go to the workers at
// once, and finish() ends the round with every worker holding the whole result.
TEST(LocalGroup, StreamingHandsOutFinalChunksAndStreamsResultsBack) {
  Site s(2, 30011, 0, 0, 5);
  const size_t cf = kChunk / 4;
  for (uint32_t round = 1; round <= 2; ++round) {
    s.fill(round);
    for (size_t w = 0; w < 2; ++w) s.workers[w]->begin(round, s.lan.now_, *s.ports[w]);
    const auto m = s.mean_of({0, 1});
    std::vector<uint8_t> handed(s.group->chunk_count(), 0);
    std::vector<float> result(m.size());
    uint32_t handed_n = 0, handed_before_ready = 0;
    bool finished = false;
    const Nanos end = s.lan.now_ + 5 * kSecond;
    while (s.lan.now_ < end) {
      for (uint32_t c : s.group->take_ready_chunks()) {
        ASSERT_LT(c, handed.size());
        ASSERT_EQ(handed[c], 0) << "chunk " << c << " handed out twice";
        handed[c] = 1;
        ++handed_n;
        handed_before_ready += !s.group->contribution_ready(round);
        EXPECT_EQ(s.group->chunk_contributors(c), 2u);
        const size_t first = c * cf, n = std::min(cf, m.size() - first);
        const auto v = s.group->contribution_buffer().subspan(first, n);
        for (size_t k = 0; k < n; ++k) {
          ASSERT_NEAR(v[k], m[first + k], 1e-6f * (1 + std::abs(m[first + k]))) << first + k;
          result[first + k] = 2.0f * v[k];  // stands in for the WAN round
        }
        ASSERT_TRUE(s.group->result_ready(round, first, std::span<const float>(result).subspan(first, n), s.lan.now_,
                                          s.gw_port));
      }
      if (!finished && handed_n == handed.size()) {
        ASSERT_TRUE(s.group->finish(round, s.lan.now_, s.gw_port));
        finished = true;
      }
      Nanos next = std::min(end, s.group->poll(s.lan.now_, s.gw_port));
      bool all = finished;
      for (size_t w = 0; w < 2; ++w) {
        next = std::min(next, s.workers[w]->poll(s.lan.now_, *s.ports[w]));
        all &= s.workers[w]->result->ended();
      }
      if (all && s.group->round_delivered()) break;
      s.advance(next);
    }
    ASSERT_TRUE(finished) << "round " << round;
    EXPECT_GT(handed_before_ready, handed.size() / 2) << "chunks were handed out before the whole push was in";
    for (auto& w : s.workers) {
      ASSERT_TRUE(w->result->ended());
      EXPECT_EQ(0, std::memcmp(w->got().data(), result.data(), result.size() * 4)) << "round " << round;
    }
    EXPECT_EQ(s.group->round(), round + 1);
    EXPECT_EQ(s.group->stats().result_filled, 0u);
  }
}

// finish() before every result piece was given: the missing chunks carry the site's own mean.
TEST(LocalGroup, FinishFillsResultChunksNeverGiven) {
  Site s(1, 5000);
  s.fill(1);
  s.workers[0]->begin(1, 0, *s.ports[0]);
  bool finished = false;
  const Nanos end = 5 * kSecond;
  while (s.lan.now_ < end && !(finished && s.workers[0]->result->ended())) {
    if (!finished && s.group->contribution_ready(1)) {
      ASSERT_TRUE(s.group->finish(1, s.lan.now_, s.gw_port));  // no result_ready at all
      finished = true;
    }
    Nanos next = std::min({end, s.group->poll(s.lan.now_, s.gw_port), s.workers[0]->poll(s.lan.now_, *s.ports[0])});
    s.advance(next);
  }
  ASSERT_TRUE(s.workers[0]->result->ended());
  EXPECT_EQ(s.group->stats().result_filled, s.group->chunk_count());
  EXPECT_EQ(0, std::memcmp(s.workers[0]->got().data(), s.workers[0]->grad.data(), 5000 * 4))
      << "one worker: the site's own mean is its gradient";
  EXPECT_FALSE(s.group->finish(1, s.lan.now_, s.gw_port)) << "round 1 is over";
}

// Every result chunk was given, but finish() has not come yet (the gateway ends the WAN round
// on its next step): a worker that has its whole result and pushes the next round at once is
// counted early, dropped, and gets in with its retransmission once the round moved on.
TEST(LocalGroup, APushOfTheNextRoundBeforeFinishIsCountedAndResent) {
  Site s(2, 3000);
  s.fill(1);
  for (size_t w = 0; w < 2; ++w) s.workers[w]->begin(1, 0, *s.ports[w]);
  const Nanos end = 5 * kSecond;
  bool given = false;
  auto step = [&](Nanos cap) {
    Nanos next = std::min(cap, s.group->poll(s.lan.now_, s.gw_port));
    for (size_t w = 0; w < 2; ++w) next = std::min(next, s.workers[w]->poll(s.lan.now_, *s.ports[w]));
    s.advance(next);
  };
  while (s.lan.now_ < end && !(given && s.workers[0]->result->ended() && s.workers[1]->result->ended())) {
    if (!given && s.group->contribution_ready(1)) {
      auto c = s.group->contribution();
      ASSERT_TRUE(s.group->result_ready(1, 0, c.first(c.size() - 1), s.lan.now_, s.gw_port));
      EXPECT_FALSE(s.group->results_complete()) << "one float still missing";
      ASSERT_TRUE(s.group->result_ready(1, c.size() - 1, c.last(1), s.lan.now_, s.gw_port));  // no finish()
      EXPECT_TRUE(s.group->results_complete());
      given = true;
    }
    step(end);
  }
  ASSERT_TRUE(s.workers[0]->result->ended() && s.workers[1]->result->ended());
  EXPECT_EQ(s.group->round(), 1u);
  s.fill(2);
  s.workers[0]->begin(2, s.lan.now_, *s.ports[0]);
  const Nanos until = s.lan.now_ + 200 * kMicro;
  while (s.lan.now_ < until) step(until);
  EXPECT_GT(s.group->receiver().stats().future_round, 0u) << "counted early (worker_early_data)";
  EXPECT_EQ(s.group->round(), 1u) << "round 2's DATA does not move a group whose round 1 is not finished";
  ASSERT_TRUE(s.group->finish(1, s.lan.now_, s.gw_port));
  EXPECT_FALSE(s.group->results_complete()) << "round 2 has no result yet";
  s.workers[1]->begin(2, s.lan.now_, *s.ports[1]);
  while (s.lan.now_ < end && !s.group->contribution_ready(2)) step(end);
  ASSERT_TRUE(s.group->contribution_ready(2)) << "worker 0's resends complete its push";
  EXPECT_EQ(s.group->stats().push_timeouts, 0u);
  const auto m = s.mean_of({0, 1});
  const auto c = s.group->contribution();
  for (size_t k = 0; k < m.size(); ++k) ASSERT_NEAR(c[k], m[k], 1e-6f * (1 + std::abs(m[k]))) << k;
}

}  // namespace
}  // namespace sg::sync
