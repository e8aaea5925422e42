// Test harness for SiteSync: N sites over an in-memory network with per-link 1 Gbit/s
// serialisation, a propagation delay and seeded loss (optionally reordering, duplication,
// corruption, and a Wire that seals and opens every packet), driven by a fake clock.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <vector>

#include "common/rng.h"
#include "sync/site_sync.h"

namespace sg::sync::testing {

struct Packet {
  Nanos at;
  uint64_t seq;
  int dst;
  std::vector<uint8_t> bytes;
  int src = 0;
  bool corrupted = false;
  bool operator>(const Packet& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

// What the gateways do to a packet between them (lib/crypto in the property tests): seal at
// the sender, open at the receiver (false: dropped there).
class Wire {
 public:
  virtual ~Wire() = default;
  virtual void seal(int src, int dst, std::vector<uint8_t>& b) = 0;
  virtual bool open(int src, int dst, std::vector<uint8_t>& b) = 0;
};

// Delivers every packet after `delay` (plus serialisation at `bytes_per_ns`), dropping a seeded fraction.
class Net {
 public:
  Net(int n, Nanos delay, double loss, uint64_t seed) : n_(n), delay_(delay), loss_(loss), rng_(seed) {}

  class Port final : public ltp::PacketSink {
   public:
    Port(Net& net, int self) : net_(net), self_(self) {}
    void send(const ltp::TxMeta& m, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
      std::vector<uint8_t> b(head.begin(), head.end());
      b.insert(b.end(), payload.begin(), payload.end());
      net_.enqueue(self_, m.peer_node - 1, std::move(b));
    }

   private:
    Net& net_;
    int self_;
  };

  void enqueue(int src, int dst, std::vector<uint8_t> b) {
    ++sent_;
    bytes_ += b.size();
    if (wire_) wire_->seal(src, dst, b);
    if (dead_.count(dst) || (drop_if_ && drop_if_(src, dst, b)) || rng_.chance(loss_)) return;
    // Per directed link: 1 Gbit/s serialisation, then the propagation delay.
    Nanos& free_at = link_free_[{src, dst}];
    const Nanos start = std::max(now_, free_at);
    free_at = start + static_cast<Nanos>(b.size() * 8);  // 1 bit per ns
    const int copies = dup_ > 0 && rng_.chance(dup_) ? 2 : 1;  // no draw when off: older tests keep their sequence
    for (int c = 0; c < copies; ++c) {
      Packet p{free_at + delay_, seq_++, dst, b, src};
      if (reorder_ > 0 && rng_.chance(reorder_)) p.at += static_cast<Nanos>(rng_.uniform() * 2 * static_cast<double>(delay_));
      if (corrupt_ > 0 && !p.bytes.empty() && rng_.chance(corrupt_)) {
        p.bytes[rng_.below(static_cast<uint32_t>(p.bytes.size()))] ^= static_cast<uint8_t>(1 + rng_.below(255));
        p.corrupted = true;
        ++corrupted_;
      }
      duplicated_ += c;
      q_.push(std::move(p));
    }
    peak_queue_ = std::max(peak_queue_, q_.size());
  }
  // Off unless a test sets them.
  double reorder_ = 0, dup_ = 0, corrupt_ = 0;
  std::function<bool(int src, int dst, const std::vector<uint8_t>& bytes)> drop_if_;  // true: lost
  Wire* wire_ = nullptr;
  uint64_t corrupted_ = 0, duplicated_ = 0, refused_ = 0, corrupted_opened_ = 0;
  size_t peak_queue_ = 0;

  Nanos now_ = 0;
  int n_;
  Nanos delay_;
  double loss_;
  Rng rng_;
  uint64_t seq_ = 0, sent_ = 0, bytes_ = 0;
  std::set<int> dead_;
  std::map<std::pair<int, int>, Nanos> link_free_;
  std::priority_queue<Packet, std::vector<Packet>, std::greater<>> q_;
};

// A plan over n sites: shard 0 is a star rooted at 0, shard 1 a chain rooted at n-1,
// shard 2 (if 3 shards) a two-level tree rooted at 1.
topo::Plan make_plan(int n, uint64_t model_bytes, int shards) {
  topo::Plan p;
  p.num_sites = static_cast<uint16_t>(n);
  p.model_bytes = model_bytes;
  const uint64_t per = model_bytes / shards / 4 * 4;
  for (int s = 0; s < shards; ++s) {
    topo::ShardTree t;
    t.byte_begin = per * s;
    t.byte_end = s + 1 == shards ? model_bytes : per * (s + 1);
    t.parent.assign(n, topo::kNoSite);
    if (s % 3 == 0) {
      t.root = 0;
      for (int v = 1; v < n; ++v) t.parent[v] = 0;
    } else if (s % 3 == 1) {
      t.root = static_cast<topo::SiteId>(n - 1);
      for (int v = 0; v < n - 1; ++v) t.parent[v] = static_cast<topo::SiteId>(v + 1);
    } else {
      t.root = 1 % n;
      for (int v = 0; v < n; ++v)
        if (v != t.root) t.parent[v] = static_cast<topo::SiteId>(v < 3 ? t.root : (v % 2 ? 0 : 2) % n);
      if (n > 2) t.parent[t.root] = topo::kNoSite;
    }
    p.shards.push_back(t);
  }
  return p;
}

struct Cluster {
  Net net;
  std::vector<std::unique_ptr<Net::Port>> ports;
  std::vector<std::unique_ptr<SiteSync>> sites;
  std::vector<std::vector<float>> local;
  std::vector<SyncConfig> cfgs;
  topo::Plan plan;

  // Site i as a new process: nothing of its earlier rounds kept (a gateway that crashed and
  // was started again).
  void restart(int i) {
    sites[static_cast<size_t>(i)] = std::make_unique<SiteSync>(cfgs[static_cast<size_t>(i)]);
    EXPECT_TRUE(sites[static_cast<size_t>(i)]->set_plan(plan, 1));
  }

  Cluster(int n, uint64_t model_bytes, int shards, Nanos delay, double loss, uint64_t seed, bool reliable = false,
          const topo::Plan* given = nullptr, bool compression = false, bool share_links = false,
          const std::function<void(SyncConfig&)>& tweak = {})
      : net(n, delay, loss, seed) {
    plan = given ? *given : make_plan(n, model_bytes, shards);
    EXPECT_EQ(topo::validate(plan), topo::PlanError::kOk);
    for (int i = 0; i < n; ++i) {
      SyncConfig c;
      c.self_node = static_cast<uint16_t>(i + 1);
      for (int k = 0; k < n; ++k) c.site_nodes.push_back(static_cast<uint16_t>(k + 1));
      c.chunk_bytes = 1024;
      c.reliable_baseline = reliable;
      c.round_timeout = 20 * kSecond;
      c.seed = seed + i;
      c.wire_compression = compression;
      c.share_links = share_links;
      if (tweak) tweak(c);
      ports.push_back(std::make_unique<Net::Port>(net, i));
      sites.push_back(std::make_unique<SiteSync>(c));
      EXPECT_TRUE(sites.back()->set_plan(plan, 1));
      cfgs.push_back(c);
      local.emplace_back(model_bytes / 4);
    }
  }

  void fill_round(uint32_t round) {
    Rng r(round * 7919);
    for (size_t i = 0; i < local.size(); ++i)
      for (auto& v : local[i]) v = static_cast<float>(r.uniform() * 2 - 1) * static_cast<float>(i + 1);
  }

  // Runs one round at every live site; returns false if it did not finish within `limit`.
  bool run_round(uint32_t round, Nanos limit) {
    for (size_t i = 0; i < sites.size(); ++i) {
      if (!net.dead_.count(static_cast<int>(i))) {
        EXPECT_TRUE(sites[i]->begin_round(round, local[i], net.now_, *ports[i]));
      }
    }
    return run_until(limit, [&] {
      for (size_t i = 0; i < sites.size(); ++i)
        if (!net.dead_.count(static_cast<int>(i)) && !sites[i]->round_done()) return false;
      return true;
    });
  }

  // Delivers packets and polls every live site until done() (true) or `limit` passed (false).
  template <typename Done>
  bool run_until(Nanos limit, Done done) {
    const Nanos end = net.now_ + limit;
    while (net.now_ < end) {
      Nanos next = end;
      for (size_t i = 0; i < sites.size(); ++i) {
        if (net.dead_.count(static_cast<int>(i))) continue;
        next = std::min(next, sites[i]->poll(net.now_, *ports[i]));
      }
      if (done()) return true;
      if (!net.q_.empty()) next = std::min(next, net.q_.top().at);
      net.now_ = std::max(net.now_ + 1, next);
      while (!net.q_.empty() && net.q_.top().at <= net.now_) {
        Packet p = net.q_.top();
        net.q_.pop();
        if (net.wire_ && !net.wire_->open(p.src, p.dst, p.bytes)) {
          ++net.refused_;
          continue;
        }
        net.corrupted_opened_ += p.corrupted;  // without a Wire, corruption reaches the parser
        sites[p.dst]->on_packet(p.bytes, net.now_, *ports[p.dst]);
      }
    }
    return false;
  }

  std::vector<double> mean() const {
    std::vector<double> m(local[0].size(), 0.0);
    for (const auto& l : local)
      for (size_t k = 0; k < m.size(); ++k) m[k] += l[k];
    for (auto& v : m) v /= static_cast<double>(local.size());
    return m;
  }
};

}  // namespace sg::sync::testing
