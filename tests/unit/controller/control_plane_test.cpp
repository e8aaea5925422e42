// Control planes of several sites over a fake network with delay: rows reach the
// coordinator, its controller proposes, lib/policy switches every site at the same round,
// plans larger than one CONTROL message travel in fragments, probe trains turn into
// measurements at the receiver.
#include "controller/control_plane.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "topology/plan_codec.h"
#include "wire/ltp_codec.h"

namespace sg::controller {
namespace {

constexpr double kGbit = 125e6;

// Every directed link serialises its messages at `rate` and delays them by `delay`.
struct Net {
  struct Msg {
    Nanos at;
    int to;
    std::vector<uint8_t> bytes;
  };
  std::vector<Msg> q;  // kept sorted by arrival when read
  Nanos delay = 5 * kMilli;
  double rate = 100e6;  // bytes/s
  Nanos now = 0;
  uint64_t probes = 0, sent = 0;
  std::vector<Nanos> busy_until;  // [from * 64 + to]
};

class Sink final : public ltp::PacketSink {
 public:
  Sink(Net& n, int from) : net_(n), from_(from) {}
  void send(const ltp::TxMeta& m, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    std::vector<uint8_t> b(head.begin(), head.end());
    b.insert(b.end(), payload.begin(), payload.end());
    if (m.type == wire::MsgType::kProbe) ++net_.probes;
    ++net_.sent;
    const int to = m.peer_node - 1;
    Nanos& busy = net_.busy_until[static_cast<size_t>(from_) * 64 + to];
    busy = std::max(busy, net_.now) + static_cast<Nanos>(b.size() / net_.rate * 1e9);
    net_.q.push_back({busy + net_.delay, to, std::move(b)});
  }

 private:
  Net& net_;
  int from_;
};

struct Cluster {
  Net net;
  std::vector<std::unique_ptr<Sink>> sinks;
  std::vector<std::unique_ptr<ControlPlane>> planes;
  std::vector<uint64_t> sent_to;
  int n;

  // `probe_resolution`: this network's arrival times are exact, as a NIC's timestamps are.
  Cluster(int sites, bool probes = false, uint64_t model = 64ull << 20, uint16_t shards = 4, bool selmcast = false,
          double uplink = 0, Nanos probe_resolution = 10 * kMicro)
      : n(sites) {
    sent_to.assign(static_cast<size_t>(sites), 0);
    net.busy_until.assign(64 * 64, 0);
    for (int i = 0; i < sites; ++i) sinks.push_back(std::make_unique<Sink>(net, i));
    ControlPlaneConfig base;
    base.controller.sites = sites;
    base.controller.plan.model_bytes = model;
    base.controller.plan.shards = shards;
    base.controller.plan.spread_to = shards;
    base.controller.plan.multipath = false;
    base.controller.min_interval = 100 * kMilli;
    base.controller.compression.mode = config::CompressionMode::kOff;
    if (selmcast) {
      base.controller.sync.mode = config::SyncMode::kSelmcast;
      base.controller.sync.p = 1;
    }
    if (uplink > 0) base.controller.uplinks.assign(static_cast<size_t>(sites), uplink);
    for (int i = 0; i < sites; ++i) base.nodes.push_back(static_cast<uint16_t>(i + 1));
    base.row_every_rounds = 1;
    base.switch_rounds_ahead = 2;
    base.probes = probes;
    base.probe.rate_bytes_per_s = 1e6;
    base.probe.packet_bytes = 1000;
    base.probe.train_packets = 4;
    base.probe.idle_after = 0;
    base.probe.min_period = 100 * kMilli;
    base.probe.resolution = probe_resolution;
    const topo::Plan first = Controller(base.controller).initial_plan();
    for (int i = 0; i < sites; ++i) {
      ControlPlaneConfig c = base;
      c.controller.self = i;
      planes.push_back(std::make_unique<ControlPlane>(c, first));
    }
  }

  // Runs the network and every site's tick for `dur`, every site reporting `completed`.
  void run(Nanos dur, uint32_t completed) {
    const Nanos end = net.now + dur;
    while (net.now < end) {
      const Nanos step_end = net.now + 1 * kMilli;
      // Deliver at each message's own arrival time (the receiver timestamps with it).
      std::stable_sort(net.q.begin(), net.q.end(), [](const Net::Msg& a, const Net::Msg& b) { return a.at < b.at; });
      size_t k = 0;
      for (; k < net.q.size() && net.q[k].at <= step_end; ++k) planes[net.q[k].to]->on_message(net.q[k].bytes, net.q[k].at);
      net.q.erase(net.q.begin(), net.q.begin() + static_cast<std::ptrdiff_t>(k));
      net.now = step_end;
      for (int i = 0; i < n; ++i) planes[i]->tick(net.now, completed, sent_to, 0, *sinks[i]);
    }
  }

  // Site i's approval of round r, waiting (bounded) for the protocol when a switch is
  // undecided, as an engine would.
  std::optional<ControlPlane::Approval> approve(int i, uint32_t r, uint32_t completed) {
    auto a = planes[i]->begin_round(r);
    for (int k = 0; !a && k < 200; ++k) {
      run(1 * kMilli, completed);
      a = planes[i]->begin_round(r);
    }
    return a;
  }

  // Each site has measured every link into it at `rate`, except into site 0 from `slow`.
  void measure(double rate, std::vector<int> slow, double slow_rate) {
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < n; ++k) {
        if (k == i) continue;
        double r = rate;
        for (int s : slow)
          if (i == 0 && k == s) r = slow_rate;
        planes[i]->estimator().on_probe_pair(static_cast<uint16_t>(k), static_cast<uint16_t>(i), 100000,
                                             static_cast<Nanos>(100000 / r * 1e9), net.now);
      }
  }
};

TEST(ControlPlane, EverySiteSwitchesAtTheSameRound) {
  Cluster c(4);
  std::vector<uint64_t> version_at(4 * 20, 0);
  uint32_t completed = 0;
  // Rounds 1-2 run the first plan; then links into site 0 turn slow.
  for (uint32_t r = 1; r <= 12; ++r) {
    for (int i = 0; i < 4; ++i) {
      auto a = c.approve(i, r, completed);
      ASSERT_TRUE(a) << "site " << i << " round " << r << " never approved";
      version_at[r * 4 + i] = a->version;
    }
    if (r == 2) c.measure(kGbit, {1, 2, 3}, kGbit / 100);
    completed = r;
    c.run(50 * kMilli, completed);
  }
  EXPECT_GE(c.planes[0]->stats().proposals, 1u);
  EXPECT_GE(c.planes[0]->controller().stats().rows, 3u) << "rows from the members reached the coordinator";
  bool switched = false;
  for (uint32_t r = 1; r <= 12; ++r) {
    for (int i = 1; i < 4; ++i) EXPECT_EQ(version_at[r * 4 + i], version_at[r * 4]) << "round " << r << " site " << i;
    switched |= version_at[r * 4] > 0;
  }
  EXPECT_TRUE(switched);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.planes[i]->active_version(), c.planes[0]->active_version());
  // Every site runs the plan the coordinator proposed.
  for (int i = 1; i < 4; ++i) {
    const auto& a = c.planes[0]->current_plan();
    const auto& b = c.planes[i]->current_plan();
    ASSERT_EQ(a.shards.size(), b.shards.size());
    for (size_t s = 0; s < a.shards.size(); ++s) EXPECT_EQ(a.shards[s].parent, b.shards[s].parent);
  }
}

// sync.mode selmcast: new receivers (links into site 0 turned slow) reach every site, which all
// take them from the same round.
TEST(ControlPlane, EverySiteTakesTheNewReceiversAtTheSameRound) {
  Cluster c(4, false, 64ull << 20, 4, /*selmcast=*/true);
  const auto first = c.planes[0]->current_plan().receivers;
  ASSERT_EQ(first.size(), 4u);
  std::vector<std::vector<std::vector<topo::SiteId>>> at(4 * 20);
  uint32_t completed = 0;
  for (uint32_t r = 1; r <= 12; ++r) {
    for (int i = 0; i < 4; ++i) {
      auto a = c.approve(i, r, completed);
      ASSERT_TRUE(a) << "site " << i << " round " << r << " never approved";
      at[r * 4 + i] = a->plan->receivers;
    }
    if (r == 2) c.measure(kGbit, {1, 2, 3}, kGbit / 100);
    completed = r;
    c.run(50 * kMilli, completed);
  }
  for (uint32_t r = 1; r <= 12; ++r)
    for (int i = 1; i < 4; ++i) EXPECT_EQ(at[r * 4 + i], at[r * 4]) << "round " << r << " site " << i;
  const auto& last = at[12 * 4];
  EXPECT_NE(last, first) << "the receivers changed";
  for (int i = 1; i < 4; ++i)
    EXPECT_EQ(std::count(last[i].begin(), last[i].end(), 0), 0) << "site " << i << " no longer sends over its slow link";
}

// A site's load travels in its rows: the coordinator sees the straggler's update lag and gives
// the idle time it leaves the others to extra receivers, which every site takes.
TEST(ControlPlane, AStragglersUpdateLagReachesTheCoordinatorsReceivers) {
  Cluster c(4, false, 64ull << 20, 4, /*selmcast=*/true, /*uplink=*/kGbit);
  auto total = [](const std::vector<std::vector<topo::SiteId>>& r) {
    size_t n = 0;
    for (const auto& l : r) n += l.size();
    return n;
  };
  uint32_t completed = 0;
  auto rounds = [&](uint32_t upto) {
    for (uint32_t r = completed + 1; r <= upto; ++r) {
      for (int i = 0; i < 4; ++i) ASSERT_TRUE(c.approve(i, r, completed)) << "site " << i << " round " << r;
      c.measure(kGbit, {}, kGbit);
      completed = r;
      c.run(150 * kMilli, completed);
    }
  };
  for (int i = 0; i < 4; ++i) c.planes[i]->set_update_lag(0.01);
  rounds(8);
  const size_t before = total(c.planes[0]->current_plan().receivers);
  c.planes[3]->set_update_lag(5.0);
  rounds(20);
  const auto after = c.planes[0]->current_plan().receivers;
  EXPECT_GT(total(after), before) << "more receivers in the straggler's idle time";
  for (int i = 1; i < 4; ++i) EXPECT_EQ(c.planes[i]->current_plan().receivers, after) << "site " << i;
}

// Rounds 1..rounds at every site (each waiting up to max_wait for approval); after round 2
// the links into site 0 from sites 1-8 turn slow, so the coordinator proposes new trees.
// 40 sites, 32 shards: the encoded plan is several kilobytes.
void run_rounds_until_a_switch(Cluster& c, uint32_t rounds, Nanos between, Nanos max_wait) {
  uint32_t completed = 0;
  for (uint32_t r = 1; r <= rounds; ++r) {
    for (int i = 0; i < c.n; ++i) {
      auto a = c.planes[i]->begin_round(r);
      for (Nanos waited = 0; !a && waited < max_wait; waited += kMilli) {
        c.run(1 * kMilli, completed);
        a = c.planes[i]->begin_round(r);
      }
      ASSERT_TRUE(a) << "site " << i << " round " << r;
    }
    if (r == 2) c.measure(kGbit, {1, 2, 3, 4, 5, 6, 7, 8}, kGbit / 200);
    completed = r;
    c.run(between, completed);
  }
}

TEST(ControlPlane, PlansLargerThanOneControlMessageTravelInFragments) {
  Cluster c(40, false, 1ull << 30, 32);
  run_rounds_until_a_switch(c, 8, 50 * kMilli, 500 * kMilli);
  ASSERT_GE(c.planes[0]->stats().proposals, 1u);
  std::vector<uint8_t> bytes;
  ASSERT_EQ(topo::encode(c.planes[0]->current_plan(), bytes), topo::PlanError::kOk);
  EXPECT_GT(bytes.size(), wire::kControlMaxPayload);
  for (int i = 1; i < c.n; ++i) EXPECT_EQ(c.planes[i]->active_version(), c.planes[0]->active_version()) << i;
}

// Over a long round trip the coordinator re-proposes (every retry_interval) before the first
// copy is acknowledged, and the copies fill the channel's window. A copy must then wait
// whole for room, not go out in part: a part leaves the member a head that the next copy
// completes into garbage.
TEST(ControlPlane, PolicyMessagesGoOutWholeWhenTheWindowFills) {
  Cluster c(40, false, 1ull << 30, 32);
  c.net.delay = 1 * kSecond;
  run_rounds_until_a_switch(c, 10, 400 * kMilli, 10 * kSecond);
  ASSERT_GE(c.planes[0]->stats().proposals, 1u);
  EXPECT_GT(c.planes[0]->stats().policy_deferred, 0u) << "the window filled: the test shows nothing otherwise";
  for (int i = 0; i < c.n; ++i) {
    EXPECT_EQ(c.planes[i]->active_version(), c.planes[0]->active_version()) << i;
    EXPECT_EQ(c.planes[i]->policy_bad(), 0u) << "site " << i << " received a garbled policy message";
    EXPECT_EQ(c.planes[i]->stats().control_bad, 0u) << i;
  }
}

TEST(ControlPlane, ProbeTrainsBecomeMeasurementsAtTheReceiver) {
  Cluster c(3, true);
  c.run(2 * kSecond, 0);
  EXPECT_GT(c.net.probes, 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(c.planes[i]->stats().probe_trains_sent, 0u);
    EXPECT_GT(c.planes[i]->stats().probe_results, 0u) << i;
    for (int k = 0; k < 3; ++k) {
      if (k == i) continue;
      const auto s = c.planes[i]->estimator().summary(static_cast<uint16_t>(k), static_cast<uint16_t>(i), c.net.now);
      // Probe packets are 1000 B of padding behind a 40 B header; the link serialises the
      // whole message, so the train measures 1000/1040 of the link's rate.
      EXPECT_NEAR(s.probe_bytes_per_s, c.net.rate * 1000 / 1040, 0.02 * c.net.rate) << k << "->" << i;
    }
  }
}

// With software stamps (a millisecond of timing noise) a 4-packet train at 100 MB/s (31 us)
// cannot be timed: each says only that its link carries at least 3000 B per 1.03 ms.
TEST(ControlPlane, ProbeTrainsTooQuickToTimeGiveLowerBounds) {
  Cluster c(3, true, 64ull << 20, 4, false, 0, kMilli);
  c.run(2 * kSecond, 0);
  EXPECT_GT(c.net.probes, 0u);
  const double bound = 3000 / (3 * 1040 / c.net.rate + 1e-3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.planes[i]->stats().probe_results, 0u) << i;
    EXPECT_GT(c.planes[i]->probe_receiver().bounds(), 0u) << i;
    for (int k = 0; k < 3; ++k) {
      if (k == i) continue;
      const auto s = c.planes[i]->estimator().summary(static_cast<uint16_t>(k), static_cast<uint16_t>(i), c.net.now);
      EXPECT_NEAR(s.probe_bytes_per_s, bound, 0.02 * bound) << k << "->" << i;
      EXPECT_LT(s.probe_bytes_per_s, c.net.rate) << "a lower bound, never above the link";
    }
  }
}

TEST(ControlPlane, MessagesFromStrangersAndOtherJobsChangeNothing) {
  Cluster c(3);
  std::vector<uint8_t> buf(200);
  wire::ControlFields f;
  f.src_node = 9;  // not a site of the job
  f.job = 1;
  f.channel = 1;
  f.seq = 1;
  const uint8_t junk[4] = {1, 2, 3, 4};
  auto n = wire::build_control(buf, f, junk);
  ASSERT_TRUE(n);
  c.planes[0]->on_message(std::span(buf.data(), *n), 0);
  f.src_node = 2;
  f.job = 7;  // another job
  n = wire::build_control(buf, f, junk);
  c.planes[0]->on_message(std::span(buf.data(), *n), 0);
  f.job = 1;
  f.channel = 2;  // a measurement row that is not one
  n = wire::build_control(buf, f, junk);
  c.planes[0]->on_message(std::span(buf.data(), *n), 0);
  EXPECT_EQ(c.planes[0]->stats().control_bad, 2u);
  EXPECT_EQ(c.planes[0]->stats().rows_bad, 1u);
  EXPECT_EQ(c.planes[0]->controller().stats().rows, 0u);
}

}  // namespace
}  // namespace sg::controller
