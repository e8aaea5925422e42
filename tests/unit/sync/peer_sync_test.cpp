// PeerSync (SelMCast's peer-to-peer rounds) over the in-memory network of sync_cluster.h:
// the mix is exact, loss gives means over what arrived, SSP's bound holds, stale updates are
// dropped and counted, and a new selection takes effect at a round boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "sync/peer_sync.h"
#include "sync_cluster.h"

namespace sg::sync {
namespace {

using testing::Net;
using topo::Selection;

constexpr uint32_t kChunk = 1024;

class NullPort final : public ltp::PacketSink {
 public:
  void send(const ltp::TxMeta&, std::span<const uint8_t>, std::span<const uint8_t>) override {}
};

// Site i sends to i+1 .. i+k (mod n).
Selection ring_selection(int n, int k) {
  Selection s(n);
  for (int i = 0; i < n; ++i)
    for (int d = 1; d <= k; ++d) s[i].push_back((i + d) % n);
  return s;
}

struct Peers {
  Net net;
  std::vector<std::unique_ptr<Net::Port>> ports;
  std::vector<std::unique_ptr<PeerSync>> sites;
  std::vector<std::vector<float>> update;  // per site, per round filled by fill()
  Selection sel;
  std::vector<PeerSyncConfig> cfgs;

  // Site i as a new process: nothing of its earlier rounds kept.
  void restart(int i) {
    sites[static_cast<size_t>(i)] = std::make_unique<PeerSync>(cfgs[static_cast<size_t>(i)]);
    EXPECT_TRUE(sites[static_cast<size_t>(i)]->set_selection(sel));
  }

  Peers(int n, size_t floats, const Selection& s, uint32_t staleness = 0, Nanos delay = kMilli, double loss = 0,
        uint64_t seed = 1, Nanos timeout = 5 * kSecond)
      : net(n, delay, loss, seed), sel(s) {
    for (int i = 0; i < n; ++i) {
      PeerSyncConfig c;
      c.self_node = static_cast<uint16_t>(i + 1);
      for (int k = 0; k < n; ++k) c.site_nodes.push_back(static_cast<uint16_t>(k + 1));
      c.model_floats = floats;
      c.chunk_bytes = kChunk;
      c.staleness = staleness;
      c.round_timeout = timeout;
      c.seed = seed + i;
      ports.push_back(std::make_unique<Net::Port>(net, i));
      sites.push_back(std::make_unique<PeerSync>(c));
      EXPECT_TRUE(sites.back()->ok());
      EXPECT_TRUE(sites.back()->set_selection(sel));
      cfgs.push_back(c);
      update.emplace_back(floats);
    }
  }

  void fill(int i, uint32_t round) {
    Rng r(round * 7919 + static_cast<uint64_t>(i));
    for (auto& v : update[i]) v = static_cast<float>(r.uniform() * 2 - 1) + static_cast<float>(i);
  }

  // Delivers packets and polls every site until done() or `limit` (fake time) passed.
  // `each` runs first on every step and returns when it wants to run next.
  bool run_until(Nanos limit, const std::function<bool()>& done, const std::function<Nanos()>& each = {}) {
    const Nanos end = net.now_ + limit;
    while (net.now_ < end) {
      Nanos next = end;
      if (each) next = std::min(next, each());
      for (size_t i = 0; i < sites.size(); ++i)
        if (!net.dead_.count(static_cast<int>(i))) next = std::min(next, sites[i]->poll(net.now_, *ports[i]));
      if (done()) return true;
      if (!net.q_.empty()) next = std::min(next, net.q_.top().at);
      net.now_ = std::max(net.now_ + 1, next);
      while (!net.q_.empty() && net.q_.top().at <= net.now_) {
        testing::Packet p = net.q_.top();
        net.q_.pop();
        if (!net.dead_.count(p.dst)) sites[p.dst]->on_packet(p.bytes, net.now_, *ports[p.dst]);
      }
    }
    return false;
  }

  bool run_round(uint32_t round, Nanos limit = 10 * kSecond) {
    for (size_t i = 0; i < sites.size(); ++i) {
      fill(static_cast<int>(i), round);
      EXPECT_TRUE(sites[i]->begin_round(round, update[i], net.now_, *ports[i]));
    }
    return run_until(limit, [&] {
      for (auto& s : sites)
        if (!s->round_done()) return false;
      return true;
    });
  }

  std::vector<int> senders_to(int i) const {
    std::vector<int> out;
    for (size_t j = 0; j < sel.size(); ++j)
      for (int r : sel[j])
        if (r == i) out.push_back(static_cast<int>(j));
    return out;
  }
};

TEST(PeerSync, BspMixIsOwnUpdateAndEverySelectedSendersMean) {
  Peers p(5, 20000, ring_selection(5, 2));
  for (uint32_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(p.run_round(round)) << "round " << round;
    for (int i = 0; i < 5; ++i) {
      const auto from = p.senders_to(i);
      ASSERT_EQ(from.size(), 2u);
      const auto r = p.sites[i]->result();
      for (size_t k = 0; k < r.size(); ++k) {
        float want = p.update[i][k];
        for (int j : from) want += p.update[j][k];
        want /= 3.0f;
        ASSERT_NEAR(r[k], want, 1e-6f * (1 + std::abs(want))) << "site " << i << " value " << k;
      }
      EXPECT_EQ(p.sites[i]->last_mixed(), 2u);
    }
  }
  for (auto& s : p.sites) {
    EXPECT_EQ(s->stats().rounds, 3u);
    EXPECT_EQ(s->stats().updates_sent, 6u);
    EXPECT_EQ(s->stats().updates_mixed, 6u);
    EXPECT_EQ(s->stats().stale_chunks, 0u);
    EXPECT_EQ(s->stats().stale_updates, 0u);
    EXPECT_EQ(s->stats().timeouts, 0u);
  }
}

TEST(PeerSync, LossyLinksMixEachChunkOverTheCopiesThatArrived) {
  Peers p(3, 30000, ring_selection(3, 2), 0, kMilli, /*loss=*/0.04, 7);
  const size_t cf = kChunk / 4;
  uint64_t partial = 0;
  for (uint32_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(p.run_round(round)) << "round " << round;
    for (int i = 0; i < 3; ++i) {
      const auto from = p.senders_to(i);  // both others
      const auto r = p.sites[i]->result();
      for (size_t k = 0; k < r.size(); k += cf) {
        // Own update always counts; each sender's copy of the chunk may be missing.
        bool match = false;
        for (int mask = 0; mask < 4 && !match; ++mask) {
          float want = p.update[i][k];
          int n = 1;
          for (int b = 0; b < 2; ++b)
            if (mask & (1 << b)) want += p.update[from[b]][k], ++n;
          want /= static_cast<float>(n);
          if (std::abs(r[k] - want) <= 1e-5f * (1 + std::abs(want))) {
            match = true;
            partial += mask != 3;
          }
        }
        ASSERT_TRUE(match) << "site " << i << " chunk " << k / cf << " is not a mean of arrived copies";
      }
    }
  }
  uint64_t retx = 0;
  for (auto& s : p.sites) retx += s->stats().retransmits;
  EXPECT_GT(retx + partial, 0u) << "the loss was felt";
}

// Sites 0 and 1 begin each round as soon as the last one ended; site 2 only every 40 ms.
// With bound s, a fast site never ends round r before site 2 has begun round r - s, and it
// does run that far ahead.
void staleness_bound_holds(uint32_t s) {
  Peers p(3, 4000, ring_selection(3, 2), s, 100 * kMicro);
  std::vector<uint32_t> begun(3, 0);
  Nanos slow_next = 0;
  uint32_t max_gap = 0;
  const uint32_t last = 12;
  auto each = [&]() -> Nanos {
    for (int i = 0; i < 3; ++i) {
      auto& site = *p.sites[i];
      if (site.running() || begun[i] >= last) continue;
      if (i == 2 && p.net.now_ < slow_next) continue;
      const uint32_t r = begun[i] + 1;
      p.fill(i, r);
      EXPECT_TRUE(site.begin_round(r, p.update[i], p.net.now_, *p.ports[i]));
      begun[i] = r;
      if (i == 2) slow_next = p.net.now_ + 40 * kMilli;
    }
    for (int i = 0; i < 2; ++i) {
      const auto& site = *p.sites[i];
      if (site.round_done()) {
        EXPECT_LE(site.round(), begun[2] + s) << "site " << i << " ended a round beyond the bound";
        max_gap = std::max(max_gap, site.round() - std::min(site.round(), begun[2]));
      }
    }
    return begun[2] < last ? slow_next : ltp::kNever;
  };
  ASSERT_TRUE(p.run_until(20 * kSecond, [&] {
    for (int i = 0; i < 3; ++i)
      if (begun[i] < last || !p.sites[i]->round_done()) return false;
    return true;
  }, each));
  EXPECT_EQ(max_gap, s) << "the fast sites use the slack the bound gives them";
  for (auto& site : p.sites) EXPECT_EQ(site->stats().timeouts, 0u);
}

TEST(PeerSync, BspWaitsForEverySelectedUpdate) { staleness_bound_holds(0); }
TEST(PeerSync, SspRunsAheadUpToTheBoundAndNoFurther) { staleness_bound_holds(2); }

// Under SSP a site's update older than the bound is dropped and counted, never mixed.
TEST(PeerSync, UpdatesOlderThanTheBoundAreDroppedAndCounted) {
  Peers p(2, 4000, ring_selection(2, 1), /*staleness=*/1, 100 * kMicro, 0, 3, /*timeout=*/50 * kMilli);
  // Site 1 is away while site 0 runs rounds 1-3 (each ends by the timeout).
  p.net.dead_.insert(1);
  for (uint32_t round = 1; round <= 3; ++round) {
    p.fill(0, round);
    ASSERT_TRUE(p.sites[0]->begin_round(round, p.update[0], p.net.now_, *p.ports[0]));
    ASSERT_TRUE(p.run_until(kSecond, [&] { return p.sites[0]->round_done(); }));
    // Nothing arrived: the mix is site 0's own update.
    for (size_t k = 0; k < p.update[0].size(); ++k) ASSERT_EQ(p.sites[0]->result()[k], p.update[0][k]);
  }
  EXPECT_EQ(p.sites[0]->stats().timeouts, 3u);
  // Site 1 comes back at round 1: three rounds behind site 0, beyond the bound of 1.
  p.net.dead_.erase(1);
  p.fill(1, 1);
  ASSERT_TRUE(p.sites[1]->begin_round(1, p.update[1], p.net.now_, *p.ports[1]));
  ASSERT_TRUE(p.run_until(kSecond, [&] { return p.sites[1]->round_done(); }));
  EXPECT_GT(p.sites[0]->receiver().stats().stale_round, 0u) << "site 1's round-1 update was refused as stale";
  EXPECT_EQ(p.sites[0]->stats().stale_updates, 1u) << "counted once";
  EXPECT_EQ(p.sites[0]->stats().updates_mixed, 0u);
  // Site 0's next round mixes nothing of round 1 either.
  p.fill(0, 4);
  ASSERT_TRUE(p.sites[0]->begin_round(4, p.update[0], p.net.now_, *p.ports[0]));
  ASSERT_TRUE(p.run_until(kSecond, [&] { return p.sites[0]->round_done(); }));
  for (size_t k = 0; k < p.update[0].size(); ++k) ASSERT_EQ(p.sites[0]->result()[k], p.update[0][k]);
}

// A site killed mid-round and started again rejoins the round it died in. Its old process
// had acknowledged part of its peer's update; the new one has none of it. Told of the restart,
// the peer sends its update again, whole, and both end the round at once with every value
// mixed; not told, it resends only what was not acknowledged and the new process waits for
// the rest until its round timeout (3 s).
TEST(PeerSync, ARestartedPeerGetsTheWholeUpdateAgain) {
  auto run = [](bool told) {
    const size_t floats = 100000;  // 400 kB each way over 1 Gbit/s
    Peers p(2, floats, {{1}, {0}}, 0, 2 * kMilli, 0.0, 7, 3 * kSecond);
    for (int i = 0; i < 2; ++i) {
      p.fill(i, 5);
      EXPECT_TRUE(p.sites[i]->begin_round(5, p.update[i], p.net.now_, *p.ports[i]));
    }
    EXPECT_FALSE(p.run_until(4 * kMilli, [] { return false; }));  // part of each update is across
    EXPECT_FALSE(p.sites[1]->round_done());
    p.net.dead_.insert(1);
    EXPECT_FALSE(p.run_until(kSecond, [] { return false; }));
    p.net.dead_.erase(1);
    p.restart(1);
    if (told) p.sites[0]->peer_restarted(1, p.net.now_, *p.ports[0]);
    const Nanos back = p.net.now_;
    EXPECT_TRUE(p.sites[1]->begin_round(5, p.update[1], p.net.now_, *p.ports[1]));
    EXPECT_TRUE(p.run_until(10 * kSecond, [&] { return p.sites[0]->round_done() && p.sites[1]->round_done(); }));
    struct {
      Nanos took;
      uint64_t timeouts;
      bool whole;
    } o{p.net.now_ - back, p.sites[1]->stats().timeouts, true};
    // The new process mixed site 0's whole update: (own + other) / 2 everywhere.
    auto r = p.sites[1]->result();
    for (size_t k = 0; k < floats && o.whole; ++k)
      o.whole = std::abs(r[k] - 0.5f * (p.update[0][k] + p.update[1][k])) <= 1e-5f * (1 + std::abs(r[k]));
    if (told) {
      EXPECT_EQ(p.sites[0]->stats().peer_restarts, 1u);
    }
    return o;
  };
  const auto told = run(true), untold = run(false);
  EXPECT_EQ(told.timeouts, 0u);
  EXPECT_TRUE(told.whole);
  EXPECT_LT(told.took, 100 * kMilli);
  // The failure this guards against: the new process's round ends by its timeout.
  EXPECT_EQ(untold.timeouts, 1u);
  EXPECT_GE(untold.took, 3 * kSecond);
}

TEST(PeerSync, ANewSelectionTakesEffectAtTheNextRound) {
  Peers p(4, 5000, ring_selection(4, 1));
  ASSERT_TRUE(p.run_round(1));
  for (auto& s : p.sites) EXPECT_EQ(s->last_mixed(), 1u);
  // Not while a round runs.
  p.fill(0, 2);
  ASSERT_TRUE(p.sites[0]->begin_round(2, p.update[0], p.net.now_, *p.ports[0]));
  EXPECT_FALSE(p.sites[0]->set_selection(ring_selection(4, 3)));
  // Finish round 2 everywhere, then switch to all-to-all.
  for (int i = 1; i < 4; ++i) {
    p.fill(i, 2);
    ASSERT_TRUE(p.sites[i]->begin_round(2, p.update[i], p.net.now_, *p.ports[i]));
  }
  ASSERT_TRUE(p.run_until(10 * kSecond, [&] {
    for (auto& s : p.sites)
      if (!s->round_done()) return false;
    return true;
  }));
  p.sel = ring_selection(4, 3);
  for (auto& s : p.sites) ASSERT_TRUE(s->set_selection(p.sel));
  ASSERT_TRUE(p.run_round(3));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.sites[i]->last_mixed(), 3u);
    float want = 0;
    for (int j = 0; j < 4; ++j) want += p.update[j][0];
    EXPECT_NEAR(p.sites[i]->result()[0], want / 4, 1e-6f * (1 + std::abs(want)));
  }
}

TEST(PeerSync, RefusesMalformedSelectionsAndConfigs) {
  PeerSyncConfig c;
  c.self_node = 1;
  c.site_nodes = {1, 2, 3};
  c.model_floats = 100;
  c.chunk_bytes = 1024;
  PeerSync s(c);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s.set_selection({{1}, {0}}));          // wrong size
  EXPECT_FALSE(s.set_selection({{0}, {0}, {0}}));     // site 0 sends to itself
  EXPECT_FALSE(s.set_selection({{1, 1}, {0}, {0}}));  // duplicate
  EXPECT_FALSE(s.set_selection({{3}, {0}, {0}}));     // out of range
  std::vector<float> u(100);
  NullPort tx;
  EXPECT_FALSE(s.begin_round(1, u, 0, tx)) << "no selection yet";
  EXPECT_TRUE(s.set_selection({{1}, {0}, {0}}));
  EXPECT_FALSE(s.begin_round(1, std::span<const float>(u).first(99), 0, tx)) << "wrong size";
  c.self_node = 9;
  EXPECT_EQ(PeerSync(c).error(), PeerSyncError::kSelf);
  c.self_node = 1;
  c.chunk_bytes = 1022;
  EXPECT_EQ(PeerSync(c).error(), PeerSyncError::kChunkBytes);
  c.chunk_bytes = 1024;
  c.staleness = kMaxStaleness + 1;
  EXPECT_EQ(PeerSync(c).error(), PeerSyncError::kStaleness);
}

}  // namespace
}  // namespace sg::sync
