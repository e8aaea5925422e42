// SiteSync with the shards split over several engines of each gateway (SyncConfig
// shard_engine / shard_engines): every engine runs its own shards only, messages are steered
// to the owner by their shard (wire::peek_shard, as the dataplane does), and together the
// engines of a site hold exactly the mean.
#include <gtest/gtest.h>

#include <cmath>

#include "sync_cluster.h"
#include "wire/ltp_codec.h"

namespace sg::sync {
namespace {

using namespace testing;

TEST(SiteSyncShards, EnginesSplitTheShardsAndTogetherHoldTheMean) {
  const int n = 3, engines = 2;
  const uint64_t bytes = 5 * 24000;
  const topo::Plan plan = make_plan(n, bytes, 5);
  Net net(n, 2 * kMilli, 0.0, 7);
  std::vector<std::unique_ptr<Net::Port>> ports;
  std::vector<std::vector<std::unique_ptr<SiteSync>>> eng(n);
  std::vector<std::vector<float>> local(n, std::vector<float>(bytes / 4));
  Rng r(99);
  for (int i = 0; i < n; ++i) {
    for (auto& v : local[i]) v = static_cast<float>(r.uniform() * 2 - 1);
    ports.push_back(std::make_unique<Net::Port>(net, i));
    for (int e = 0; e < engines; ++e) {
      SyncConfig c;
      c.self_node = static_cast<uint16_t>(i + 1);
      for (int k = 0; k < n; ++k) c.site_nodes.push_back(static_cast<uint16_t>(k + 1));
      c.chunk_bytes = 1024;
      c.seed = 10 * i + e;
      c.shard_engine = static_cast<uint32_t>(e);
      c.shard_engines = engines;
      eng[i].push_back(std::make_unique<SiteSync>(c));
      ASSERT_TRUE(eng[i].back()->set_plan(plan, 1));
      ASSERT_TRUE(eng[i].back()->begin_round(1, local[i], 0, *ports[i]));
    }
  }
  uint64_t misrouted = 0;
  bool done = false;
  while (net.now_ < 10 * kSecond && !done) {
    Nanos next = 10 * kSecond;
    done = true;
    for (int i = 0; i < n; ++i)
      for (auto& e : eng[i]) {
        next = std::min(next, e->poll(net.now_, *ports[i]));
        done &= e->round_done();
      }
    if (done) break;
    if (!net.q_.empty()) next = std::min(next, net.q_.top().at);
    net.now_ = std::max(net.now_ + 1, next);
    while (!net.q_.empty() && net.q_.top().at <= net.now_) {
      Packet p = net.q_.top();
      net.q_.pop();
      const auto shard = wire::peek_shard(p.bytes);
      ASSERT_TRUE(shard.has_value()) << "DATA, ACK and CLOSE carry their shard";
      eng[p.dst][*shard % engines]->on_packet(p.bytes, net.now_, *ports[p.dst]);
    }
  }
  ASSERT_TRUE(done);
  for (int i = 0; i < n; ++i) {
    for (size_t s = 0; s < plan.shards.size(); ++s) {
      const auto& owner = *eng[i][s % engines];
      const auto& other = *eng[i][(s + 1) % engines];
      for (size_t k = plan.shards[s].byte_begin / 4; k < plan.shards[s].byte_end / 4; ++k) {
        const double m = (double(local[0][k]) + local[1][k] + local[2][k]) / 3;
        ASSERT_NEAR(owner.result()[k], m, 1e-5) << "site " << i << " shard " << s;
        EXPECT_EQ(other.result()[k], 0.0f) << "the other engine never touched shard " << s;
      }
    }
    for (auto& e : eng[i]) {
      misrouted += e->stats().bad_chunks + e->stats().stray_acks;
      EXPECT_GT(e->stats().bytes_sent, 0u) << "every engine carried its share";
    }
  }
  EXPECT_EQ(misrouted, 0u);
}

TEST(SiteSyncShards, ForeignShardTrafficIsCountedNotApplied) {
  // Engine 0 of 2 gets DATA for shard 1 (a steering bug, or a forged packet): counted, ignored.
  // Two shards, both rooted at site 1 (index 0): site 2 sends both up.
  topo::Plan plan = make_plan(2, 2 * 8000, 2);
  plan.shards[1].root = 0;
  plan.shards[1].parent = {topo::kNoSite, 0};
  Net net(2, kMilli, 0.0, 1);
  std::vector<std::unique_ptr<Net::Port>> ports;
  std::vector<std::unique_ptr<SiteSync>> whole, half;
  std::vector<float> local(4000, 1.0f);
  for (int i = 0; i < 2; ++i) {
    ports.push_back(std::make_unique<Net::Port>(net, i));
    SyncConfig c;
    c.self_node = static_cast<uint16_t>(i + 1);
    c.site_nodes = {1, 2};
    c.chunk_bytes = 1024;
    whole.push_back(std::make_unique<SiteSync>(c));
    c.shard_engines = 2;
    half.push_back(std::make_unique<SiteSync>(c));
    ASSERT_TRUE(whole.back()->set_plan(plan, 1));
    ASSERT_TRUE(half.back()->set_plan(plan, 1));
  }
  // Site 2 (whole) sends both shards; site 1's engine 0 (half) receives all of it.
  ASSERT_TRUE(half[0]->begin_round(1, local, 0, *ports[0]));
  ASSERT_TRUE(whole[1]->begin_round(1, local, 0, *ports[1]));
  uint64_t shard1 = 0;
  for (int step = 0; step < 2000 && !net.q_.empty(); ++step) {
    Packet p = net.q_.top();
    net.q_.pop();
    net.now_ = p.at;
    if (p.dst != 0) continue;
    if (wire::peek_shard(p.bytes) == 1 && wire::parse_common(p.bytes)->type == wire::MsgType::kData) ++shard1;
    half[0]->on_packet(p.bytes, net.now_, *ports[0]);
    whole[1]->poll(net.now_, *ports[1]);
  }
  EXPECT_GT(shard1, 0u);
  EXPECT_GE(half[0]->stats().bad_chunks, shard1);
}

}  // namespace
}  // namespace sg::sync
