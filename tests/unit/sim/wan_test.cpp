// Whole rounds on the simulated WAN with the real SiteSync and the ring baseline: exact
// means, determinism for a seed, relays that forward without aggregating, caps that bind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "sim/cluster.h"
#include "sim/scenario.h"
#include "topology/baselines.h"
#include "topology/fapt.h"
#include "wire/ltp_header.h"

namespace sg::sim {
namespace {

WanSpec mesh(int n, double Bps, Nanos delay, double loss, uint64_t seed) {
  WanSpec w;
  w.seed = seed;
  for (int i = 0; i < n; ++i) w.sites.push_back(SiteSpec{"s" + std::to_string(i)});
  w.links.assign(static_cast<size_t>(n) * n, LinkSpec{});
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      LinkSpec& l = w.link(i, j);
      l.bytes_per_s = i == j ? 0 : Bps;
      l.delay = delay;
      l.loss = loss;
      l.queue_bytes = 4u << 20;
    }
  return w;
}

struct Inputs {
  std::vector<std::vector<float>> v;
  std::vector<std::span<const float>> spans;
  std::vector<double> mean;
  Inputs(int n, size_t floats, uint64_t seed) : v(n, std::vector<float>(floats)), mean(floats, 0) {
    Rng r(seed);
    for (int i = 0; i < n; ++i)
      for (size_t k = 0; k < floats; ++k) {
        v[i][k] = static_cast<float>(r.uniform() * 2 - 1);
        mean[k] += v[i][k] / n;
      }
    for (auto& x : v) spans.emplace_back(x);
  }
};

void expect_mean(Cluster& c, const Inputs& in) {
  for (int i = 0; i < c.size(); ++i) {
    auto r = c.site(i)->result();
    ASSERT_EQ(r.size(), in.mean.size());
    for (size_t k = 0; k < r.size(); ++k) ASSERT_NEAR(r[k], in.mean[k], 1e-5) << "site " << i << " float " << k;
  }
}

// One shard, every site's parent site 0 (three sites).
topo::Plan star_at_0(const WanSpec& w, uint64_t bytes) {
  topo::Plan plan = topo::star_plan(network_at(w, 0, 1, 1e9), bytes, 1024);
  plan.shards[0].root = 0;
  plan.shards[0].parent = {topo::kNoSite, 0, 0};
  return plan;
}

struct RunOut {
  double seconds = 0;
  uint64_t events = 0, retx = 0;
  std::vector<float> result;
};

RunOut fapt_round(uint64_t seed, double loss) {
  const int n = 4;
  WanSpec w = mesh(n, 12.5e6, 10 * kMilli, loss, seed);
  w.link(0, 1).bytes_per_s = 2.5e6;  // one slow link the planner should avoid
  Wan wan(w, 2048, 1);
  Cluster c(wan, make_sync_sites(n, 1024, false, seed));
  const uint64_t model = 400 * 1024;
  topo::PlannerOptions opt;
  opt.chunk_bytes = 1024;
  const topo::Plan plan = topo::plan_fapt(network_at(w, 0, 1, 1e9), model, opt);
  EXPECT_TRUE(install_plan(c, plan, 1));
  Inputs in(n, model / 4, 5);
  const RoundResult r = c.run_round(1, in.spans, 60 * kSecond);
  EXPECT_TRUE(r.ok);
  if (loss == 0) expect_mean(c, in);
  RunOut out;
  out.seconds = r.seconds;
  out.events = wan.stats().events;
  out.retx = r.stats.retransmits;
  auto res = c.site(2)->result();
  out.result.assign(res.begin(), res.end());
  return out;
}

TEST(Wan, SiteSyncOnAFaptPlanGivesEverySiteTheMean) {
  const RunOut r = fapt_round(1, 0);
  EXPECT_GT(r.seconds, 0.02);  // at least the round trips
  EXPECT_LT(r.seconds, 5);
}

TEST(Wan, DeterministicForASeed) {
  const RunOut a = fapt_round(7, 0.01), b = fapt_round(7, 0.01), c = fapt_round(8, 0.01);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.retx, b.retx);
  EXPECT_EQ(0, std::memcmp(a.result.data(), b.result.data(), a.result.size() * 4));
  EXPECT_NE(a.events, c.events) << "another seed draws other losses";
}

TEST(Wan, RingAllReduceGivesEverySiteTheMean) {
  for (int n : {2, 3, 5}) {
    WanSpec w = mesh(n, 12.5e6, 5 * kMilli, 0, 3);
    Wan wan(w, 2048, 1);
    const size_t floats = 30011;  // not a multiple of n or of the chunk
    const auto net = network_at(w, 0, 1, 1e9);
    Cluster c(wan, make_ring_sites(best_ring(n, net.bw, net.rtt), 1024, floats, 3));
    for (uint32_t round = 1; round <= 2; ++round) {
      Inputs in(n, floats, round);
      ASSERT_TRUE(c.run_round(round, in.spans, 60 * kSecond).ok) << n << " sites";
      expect_mean(c, in);
    }
  }
}

TEST(Wan, RingIsReliableUnderLoss) {
  WanSpec w = mesh(4, 12.5e6, 5 * kMilli, 0.02, 4);
  Wan wan(w, 2048, 1);
  Inputs in(4, 50000, 9);
  std::vector<int> order{0, 1, 2, 3};
  Cluster c(wan, make_ring_sites(order, 1024, 50000, 4));
  const RoundResult r = c.run_round(1, in.spans, 120 * kSecond);
  ASSERT_TRUE(r.ok);
  expect_mean(c, in);
  EXPECT_GT(r.stats.retransmits, 0u);
  EXPECT_EQ(r.stats.bubbles, 0u);
}

// gloo's ring (sim/gloo_ring.h): segments smaller than the model, uneven last segments, any
// ring size, rounds back to back, losses: every site ends with the mean.
TEST(Wan, GlooRingGivesEverySiteTheMean) {
  for (int n : {2, 3, 5}) {
    for (double loss : {0.0, 0.02}) {
      WanSpec w = mesh(n, 12.5e6, 5 * kMilli, loss, 6);
      Wan wan(w, 2048, 1);
      const size_t floats = 30011;  // 8 segments of 16 KB, the last one short
      const auto net = network_at(w, 0, 1, 1e9);
      Cluster c(wan, make_gloo_ring_sites(best_ring(n, net.bw, net.rtt), 1024, floats, 16 << 10, 6));
      uint64_t retx = 0;
      for (uint32_t round = 1; round <= 2; ++round) {
        Inputs in(n, floats, round + 10);
        const RoundResult r = c.run_round(round, in.spans, 120 * kSecond);
        ASSERT_TRUE(r.ok) << n << " sites, loss " << loss;
        expect_mean(c, in);
        EXPECT_EQ(r.stats.bubbles, 0u);
        retx += r.stats.retransmits;
      }
      if (loss > 0) {
        EXPECT_GT(retx, 0u) << n << " sites";
      }
    }
  }
}

// A ring of one site has nothing to exchange: the participant refuses the round, never crashes.
TEST(Wan, GlooRingOfOneSiteRefusesTheRound) {
  auto sites = make_gloo_ring_sites({0}, 1024, 100, 1 << 20, 1);
  ASSERT_EQ(sites.size(), 1u);
  struct NullSink final : ltp::PacketSink {
    void send(const ltp::TxMeta&, std::span<const uint8_t>, std::span<const uint8_t>) override { ++sent; }
    int sent = 0;
  } sink;
  std::vector<float> local(100, 1.0f);
  EXPECT_FALSE(sites[0]->begin_round(1, local, 0, sink));
  EXPECT_EQ(sites[0]->poll(0, sink), ltp::kNever);
  EXPECT_FALSE(sites[0]->round_done());
  EXPECT_EQ(sink.sent, 0);
}

// Two segments in flight per link: on a 100 ms round trip, 16 KB segments hold a link to about
// two segments per round trip, while 1 MiB ones leave it to the congestion window.
TEST(Wan, GloosTwoSegmentsInFlightBoundALongPath) {
  const int n = 3;
  WanSpec w = mesh(n, 12.5e6, 50 * kMilli, 0, 7);
  const size_t floats = (1 << 20) / 4;
  double secs[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    Wan wan(w, 2048, 1);
    Cluster c(wan, make_gloo_ring_sites({0, 1, 2}, 1024, floats, k == 0 ? 16 << 10 : 1 << 20, 7, {}, TcpCc::kBbr));
    Inputs in(n, floats, 2);
    for (uint32_t round = 1; round <= 2; ++round) {  // the second: the windows are open
      const RoundResult r = c.run_round(round, in.spans, 300 * kSecond);
      ASSERT_TRUE(r.ok) << k;
      secs[k] = r.seconds;
    }
    expect_mean(c, in);
  }
  // 16 KB: 66 segments, 44 iterations per phase at about two per round trip: >= 4 s.
  EXPECT_GT(secs[0], 3.0) << "16 KB segments: " << secs[0] << " s";
  EXPECT_GT(secs[0], 3 * secs[1]) << "16 KB segments " << secs[0] << " s, 1 MiB " << secs[1] << " s";
}

// The baselines' congestion control (SyncConfig::reliable_cc, RingConfig::cc): every choice
// stays reliable (exact means, no bubbles), and under 2% random loss on a 40 ms RTT path the
// BBR-like one, which does not back off on random loss, beats NewReno, as BBR beats it on the
// testbed's kernel TCP.
TEST(Wan, BaselineCongestionControlsAreReliableAndBbrIgnoresRandomLoss) {
  const int n = 3;
  WanSpec w = mesh(n, 12.5e6, 20 * kMilli, 0.02, 5);
  const size_t floats = 400 * 1024 / 4;
  double ps_s[3] = {0, 0, 0}, ring_s[3] = {0, 0, 0};
  int k = 0;
  for (TcpCc cc : {TcpCc::kNewReno, TcpCc::kCubic, TcpCc::kBbr}) {
    {
      Wan wan(w, 2048, 1);
      Cluster c(wan, make_sync_sites(n, 1024, true, 5, {}, false, cc));
      ASSERT_TRUE(install_plan(c, topo::star_plan(network_at(w, 0, 1, 1e9), floats * 4, 1024), 1));
      Inputs in(n, floats, 3);
      const RoundResult r = c.run_round(1, in.spans, 300 * kSecond);
      ASSERT_TRUE(r.ok) << k;
      expect_mean(c, in);
      EXPECT_EQ(r.stats.bubbles, 0u);
      ps_s[k] = r.seconds;
    }
    {
      Wan wan(w, 2048, 1);
      Cluster c(wan, make_ring_sites({0, 1, 2}, 1024, floats, 5, {}, cc));
      Inputs in(n, floats, 4);
      const RoundResult r = c.run_round(1, in.spans, 300 * kSecond);
      ASSERT_TRUE(r.ok) << k;
      expect_mean(c, in);
      ring_s[k] = r.seconds;
    }
    ++k;
  }
  EXPECT_LT(ps_s[2] * 2, ps_s[0]) << "PS: BBR-like " << ps_s[2] << " s, NewReno " << ps_s[0] << " s";
  EXPECT_LT(ring_s[2] * 2, ring_s[0]) << "ring: BBR-like " << ring_s[2] << " s, NewReno " << ring_s[0] << " s";
}

TEST(Wan, RelaysForwardSplitLinksWithoutAggregating) {
  // Star to site 0 with 1 -> 0 split over relay 2: relayed chunks arrive intact.
  const int n = 3;
  WanSpec w = mesh(n, 12.5e6, 5 * kMilli, 0, 2);
  Wan wan(w, 2048, 1);
  Cluster c(wan, make_sync_sites(n, 1024, true, 2));
  topo::Plan plan = topo::star_plan(network_at(w, 0, 1, 1e9), 200 * 1024, 1024);
  topo::ShardTree& t = plan.shards[0];
  t.root = 0;
  t.parent = {topo::kNoSite, 0, 0};
  topo::LinkSplit split;
  split.from = 1;
  split.to = 0;
  split.direct_weight = 1;
  split.relays.push_back({2, 1});
  plan.splits.push_back(split);
  ASSERT_EQ(topo::validate(plan), topo::PlanError::kOk);
  ASSERT_TRUE(install_plan(c, plan, 1));
  Inputs in(n, 200 * 1024 / 4, 1);
  ASSERT_TRUE(c.run_round(1, in.spans, 60 * kSecond).ok);
  expect_mean(c, in);
  // Half of 1 -> 0's 200 chunks took the relay.
  EXPECT_GE(wan.stats().relayed, 90u);
  EXPECT_GT(wan.link(1, 2).stats().delivered, 90u);
}

// Chunks of a split link are dealt in the plan's proportions (smooth weighted round robin).
TEST(Wan, SplitDealsChunksByThePlansWeights) {
  WanSpec w = mesh(3, 12.5e6, 5 * kMilli, 0, 3);
  Wan wan(w, 2048, 1);
  Cluster c(wan, make_sync_sites(3, 1024, false, 3));
  topo::Plan plan = star_at_0(w, 1 << 20);
  plan.splits.push_back({1, 0, 3, {{2, 1}}});
  ASSERT_TRUE(install_plan(c, plan, 1));
  Inputs in(3, (1 << 20) / 4, 1);
  ASSERT_TRUE(c.run_round(1, in.spans, 60 * kSecond).ok);
  expect_mean(c, in);
  const auto sent = wan.split_sent(1, 0);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_NEAR(static_cast<double>(sent[0]) / static_cast<double>(sent[1]), 3.0, 0.05);
  EXPECT_TRUE(wan.split_sent(2, 0).empty());
}

// A site running the gateway's sprayer (lib/spray): the plan has no split, its DATA to a
// peer carries the sprayer's path_id, the ACKs that come back feed the sprayer's paths, a
// backlogged direct link sheds chunks onto the standby relay, and every site still gets the
// exact mean.
TEST(Wan, SitesRunTheGatewaysSprayer) {
  WanSpec w = mesh(3, 12.5e6, 5 * kMilli, 0, 4);
  w.link(1, 0).bytes_per_s = 0.5e6;  // 4 Mbit/s against 100: its queue builds at once
  Wan wan(w, 2048, 1);
  Cluster c(wan, make_sync_sites(3, 1024, false, 4));
  topo::Plan plan = star_at_0(w, 1 << 20);
  ASSERT_TRUE(install_plan(c, plan, 1));
  for (int i = 0; i < 3; ++i) {
    wan.use_sprayer(i);
    wan.set_spray_plan(i, plan);
  }
  const spray::Sprayer* sp = wan.sprayer(1);
  ASSERT_NE(sp, nullptr);
  ASSERT_EQ(sp->slots(1), 2u);  // to site 0 (node 1): direct, and through site 2
  EXPECT_EQ(sp->via(1, 1), 3);
  Inputs in(3, (1 << 20) / 4, 1);
  ASSERT_TRUE(c.run_round(1, in.spans, 60 * kSecond).ok);
  expect_mean(c, in);
  EXPECT_GT(sp->counters(1, 0)->acks.get(), 100u) << "site 0's ACKs reach site 1's sprayer";
  EXPECT_GT(sp->delivery_rate(1, 0), 0.0);
  EXPECT_GT(sp->counters(1, 1)->chunks.get(), 0u) << "the standby relay took chunks";
  EXPECT_EQ(wan.stats().relayed, sp->counters(1, 1)->chunks.get() + wan.sprayer(2)->counters(1, 1)->chunks.get() +
                                     wan.sprayer(0)->counters(2, 1)->chunks.get() +
                                     wan.sprayer(0)->counters(3, 1)->chunks.get() +
                                     wan.sprayer(1)->counters(3, 1)->chunks.get() +
                                     wan.sprayer(2)->counters(2, 1)->chunks.get())
      << "every relayed chunk went where a sprayer sent it";
}

TEST(Wan, EgressCapSlowsTheRound) {
  auto round = [](double cap) {
    WanSpec w = mesh(3, 12.5e6, 5 * kMilli, 0, 2);
    w.sites[1].egress_bytes_per_s = cap;
    Wan wan(w, 2048, 1);
    Cluster c(wan, make_sync_sites(3, 1024, false, 2));
    topo::Plan plan = star_at_0(w, 1 << 20);
    EXPECT_TRUE(install_plan(c, plan, 1));
    Inputs in(3, (1 << 20) / 4, 1);
    return c.run_round(1, in.spans, 60 * kSecond).seconds;
  };
  const double free = round(0), capped = round(1.25e6);
  // 1 MB at 10 Mbit/s out of site 1: at least 0.8 s.
  EXPECT_GT(capped, 0.8);
  EXPECT_GT(capped, 3 * free);
}

TEST(Wan, PayloadScaleChargesFullChunksOnTheWire) {
  // Same round, 1/8 of the floats for real: the links see the same bytes, so the time matches.
  auto round = [](uint32_t scale) {
    WanSpec w = mesh(3, 12.5e6, 5 * kMilli, 0, 2);
    Wan wan(w, 16384, scale);
    const uint32_t chunk = 8192 / scale;
    Cluster c(wan, make_sync_sites(3, chunk, false, 2));
    const uint64_t model = (4u << 20) / scale;
    topo::Plan plan = topo::star_plan(network_at(w, 0, scale, 1e9), model, chunk);
    EXPECT_TRUE(install_plan(c, plan, 1));
    Inputs in(3, model / 4, 1);
    return c.run_round(1, in.spans, 60 * kSecond).seconds;
  };
  const double full = round(1), scaled = round(8);
  EXPECT_NEAR(scaled / full, 1.0, 0.1);
}

TEST(Wan, CodecFactorShrinksOnlyThatLinksData) {
  auto round = [](double up, double down) {
    WanSpec w = mesh(2, 1.25e6, 5 * kMilli, 0, 2);
    Wan wan(w, 2048, 1);
    Cluster c(wan, make_sync_sites(2, 1024, false, 2));
    topo::Plan plan = topo::star_plan(network_at(w, 0, 1, 1e9), 1 << 20, 1024);
    plan.shards[0].root = 0;
    plan.shards[0].parent = {topo::kNoSite, 0};
    EXPECT_TRUE(install_plan(c, plan, 1));
    wan.set_codec_factor(1, 0, up);
    wan.set_codec_factor(0, 1, down);
    Inputs in(2, (1 << 20) / 4, 1);
    const double t = c.run_round(1, in.spans, 60 * kSecond).seconds;
    return std::tuple{t, wan.link(1, 0).stats().delivered_bytes, wan.link(0, 1).stats().delivered_bytes};
  };
  const auto [t1, up1, down1] = round(1, 1);
  const auto [tu, up4, down_same] = round(4, 1);
  const auto [t4, up4b, down4] = round(4, 4);
  // 1 MB each way at 10 Mbit/s. A 4x smaller payload on 1 -> 0 shrinks that link's bytes
  // alone (headers stay full size); the chunk-pipelined round overlaps up and down, so only
  // shrinking both directions shortens it.
  EXPECT_LT(static_cast<double>(up4), 0.4 * static_cast<double>(up1));
  EXPECT_NEAR(static_cast<double>(down_same), static_cast<double>(down1), 0.05 * static_cast<double>(down1));
  EXPECT_LT(static_cast<double>(down4), 0.4 * static_cast<double>(down1));
  EXPECT_LT(t4, 0.5 * t1);
  EXPECT_LT(t4, tu);
}

// A scaled-down simulation (small chunks: a large model with few of its floats real) must
// still carry the control plane's largest message. A full policy fragment was once dropped
// as too large there, and a 64-site job's first policy switch never began.
TEST(Wan, CarriesAFullControlMessageWhateverTheChunkSize) {
  struct Ep final : Endpoint {
    std::vector<size_t> out;  // sizes to send, once
    std::vector<size_t> got;
    void on_packet(std::span<const uint8_t> msg, Nanos, ltp::PacketSink&) override { got.push_back(msg.size()); }
    Nanos poll(Nanos, ltp::PacketSink& tx) override {
      for (size_t n : out) {
        std::vector<uint8_t> m(n, 0);
        tx.send({2, 0, n > 1500 ? wire::MsgType::kData : wire::MsgType::kControl}, m, {});
      }
      out.clear();
      return ltp::kNever;
    }
  } a, b;
  const size_t control = sizeof(wire::ControlHeader) + wire::kControlMaxPayload;
  a.out = {control, 4000};  // the second is larger than anything this Wan was built for
  Wan wan(mesh(2, 1e8, 1 * kMilli, 0.0, 3), /*max_msg_bytes=*/600);
  wan.attach(0, 1, &a);
  wan.attach(1, 2, &b);
  wan.wake(0, 0);
  wan.run([](int) { return false; }, 1 * kSecond);
  ASSERT_EQ(b.got.size(), 1u);
  EXPECT_EQ(b.got[0], control);
  EXPECT_EQ(wan.stats().oversize, 1u) << "an oversized message is counted, not delivered";
}

}  // namespace
}  // namespace sg::sim
