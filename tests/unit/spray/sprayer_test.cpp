// The Sprayer on its own (lib/spray): the plan's weights are followed exactly (weighted), a
// slow path does not hold the transfer back (adaptive), equal splitting really is limited by
// the slow path, measured weights find the paths' rates from the ACK clock, a standby relay
// takes what a direct path can no longer carry, and hostile ACKs change nothing.
#include <gtest/gtest.h>

#include <deque>

#include "spray/sprayer.h"
#include "wire/path_id.h"

namespace sg::spray {
namespace {



TEST(Sprayer, WeightedModeDealsChunksExactlyByThePlansSplit) {
  // Site ids 1..3, plan indices 0..2; we are 1 (index 0), peer 2 (index 1), relay 3 (index 2).
  Sprayer sp;
  ASSERT_EQ(sp.add_path(2, 0, 0), 0);
  ASSERT_EQ(sp.add_path(2, 1, 3), 1);
  topo::Plan plan;
  plan.splits.push_back(topo::LinkSplit{0, 1, 3, {topo::Relay{2, 1}}});
  sp.set_plan(plan, {1, 2, 3}, 0);
  EXPECT_DOUBLE_EQ(sp.weight(2, 0), 3.0);
  EXPECT_DOUBLE_EQ(sp.weight(2, 1), 1.0);
  sp.set_mode(SprayMode::kWeighted);
  int n[2] = {0, 0};
  for (int i = 0; i < 1000; ++i) {
    const int s = sp.pick_st(2, 1400, i);
    ASSERT_GE(s, 0);
    ++n[s];
    sp.on_sent_st(2, static_cast<unsigned>(s), 1400, i);
  }
  EXPECT_EQ(n[0], 750);
  EXPECT_EQ(n[1], 250);
  // A link the plan does not split goes direct only; a relay no path reaches goes direct too.
  topo::Plan other;
  other.splits.push_back(topo::LinkSplit{0, 1, 1, {}});
  sp.set_plan(other, {1, 2, 3}, 0);
  EXPECT_GT(sp.weight(2, 0), 0.0);
  EXPECT_EQ(sp.weight(2, 1), 0.0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sp.pick_st(2, 1400, 2000 + i), 0);
  EXPECT_EQ(sp.pick_st(7, 1400, 0), -1) << "unknown peer: the caller's direct route";
}

TEST(Sprayer, WithMultipathOffHereThePlansRelaySplitIsIgnored) {
  // The plan comes from the coordinator's planner, whose topology.multipath may be on.
  Sprayer sp;
  sp.set_standby_relays(false);
  ASSERT_EQ(sp.add_path(2, 0, 0), 0);
  ASSERT_EQ(sp.add_path(2, 1, 3), 1);
  topo::Plan plan;
  plan.splits.push_back(topo::LinkSplit{0, 1, 3, {topo::Relay{2, 1}}});
  sp.set_plan(plan, {1, 2, 3}, 0);
  EXPECT_GT(sp.weight(2, 0), 0.0);
  EXPECT_EQ(sp.weight(2, 1), 0.0);
  for (SprayMode m : {SprayMode::kWeighted, SprayMode::kAdaptive}) {
    sp.set_mode(m);
    for (int i = 0; i < 200; ++i) {
      ASSERT_EQ(sp.pick_st(2, 1400, i), 0) << "every chunk on its direct path";
      sp.on_sent_st(2, 0, 1400, i);
    }
  }
}

// Two paths of one transfer, 3 and 1 packets per tick, 10 ticks of delay each way: the sender
// offers 4 packets per tick. Returns the ticks until `total` packets were delivered, and the
// share of packets the fast path carried.
struct SimResult {
  int ticks = 0;
  double fast_share = 0;
};
// window > 0: at most that many packets in flight, as the sender's congestion window keeps it.
SimResult simulate(SprayMode mode, int total, bool measured = true, int window = 0) {
  Sprayer sp;
  sp.set_measured_weights(measured);
  sp.add_path(2, 0, 0);
  sp.add_path(2, 1, 0);  // equal plan weights: the adaptive mode must find the 3:1 itself
  sp.set_mode(mode);
  constexpr Nanos kTick = 1000;
  constexpr int kDelay = 10;
  const int cap[2] = {3, 1};
  std::deque<Nanos> queue[2];  // send times waiting for the path
  struct Ack {
    int at, slot;
    Nanos echo;
  };
  std::deque<Ack> acks;
  int sent = 0, delivered = 0, fast = 0;
  for (int t = 0; t < 100000; ++t) {
    const Nanos now = t * kTick;
    while (!acks.empty() && acks.front().at <= t) {
      sp.on_ack_st(2, wire::pathid::direct(static_cast<unsigned>(acks.front().slot)), acks.front().echo, now);
      acks.pop_front();
    }
    for (int k = 0; k < 4 && sent < total && (window == 0 || sent - delivered < window); ++k, ++sent) {
      const int s = sp.pick_st(2, 1000, now);
      sp.on_sent_st(2, static_cast<unsigned>(s), 1000, now);
      queue[s].push_back(now);
      fast += s == 0;
    }
    for (int s = 0; s < 2; ++s)
      for (int k = 0; k < cap[s] && !queue[s].empty(); ++k) {
        acks.push_back(Ack{t + 2 * kDelay, s, queue[s].front()});
        queue[s].pop_front();
        ++delivered;
      }
    if (delivered == total) return SimResult{t + kDelay, static_cast<double>(fast) / total};
  }
  return SimResult{100000, 0};
}

TEST(Sprayer, AdaptiveModeKeepsTheSlowPathFromHoldingTheTransferBack) {
  const SimResult adaptive = simulate(SprayMode::kAdaptive, 20000);
  const SimResult equal = simulate(SprayMode::kEqual, 20000);
  // 20000 packets at 4 per tick: 5000 ticks at best. Equal split: the slow path carries half,
  // 10000 ticks. Adaptive finds the 3:1 from in-flight data alone.
  EXPECT_NEAR(adaptive.fast_share, 0.75, 0.03);
  EXPECT_NEAR(equal.fast_share, 0.5, 0.001);
  EXPECT_LT(adaptive.ticks, 5600);
  EXPECT_GT(equal.ticks, 9900);
}

TEST(Sprayer, MeasuredWeightsFindThePathsRatesFromTheAckClock) {
  // Weighted round robin on equal plan weights deals half to each path; with the weights
  // measured from each path's delivery rate (and one path at a time probing 25% above it)
  // the split moves to the paths' 3:1 and the transfer finishes near the best time.
  const SimResult plan = simulate(SprayMode::kWeighted, 80000, /*measured=*/false, /*window=*/400);
  const SimResult measured = simulate(SprayMode::kWeighted, 80000, /*measured=*/true, /*window=*/400);
  EXPECT_NEAR(plan.fast_share, 0.5, 0.001);
  EXPECT_GT(measured.fast_share, 0.68);
  EXPECT_LT(measured.ticks, 0.65 * plan.ticks);
}

// A direct path of 3 packets per tick that drops to one packet every 3 ticks at tick 2000 (a
// backbone taken by other traffic), and a relay the plan gives no weight (3 per tick, 15
// ticks each way against the direct path's 10). The sender paces 2 packets per tick with at
// most 400 in flight. Returns the ticks to deliver `total` and the packets relayed before and
// after the drop.
struct DropResult {
  int ticks = 0;
  int relayed_before = 0, relayed_after = 0;
  uint64_t standby_chunks = 0;  // the sprayer's own count
};
DropResult simulate_drop(bool standby, int total) {
  Sprayer sp;
  sp.set_standby_relays(standby);
  sp.add_path(2, 0, 0);
  sp.add_path(2, 1, 3);  // via site 3: no plan weight
  constexpr Nanos kTick = 1000;
  constexpr int kDrop = 2000;
  const int delay[2] = {10, 15};
  std::deque<Nanos> queue[2];
  struct Ack {
    int at, slot;
    Nanos echo;
  };
  std::deque<Ack> acks;
  DropResult r;
  int sent = 0, delivered = 0;
  for (int t = 0; t < 200000; ++t) {
    const Nanos now = t * kTick;
    while (!acks.empty() && acks.front().at <= t) {
      const auto& a = acks.front();
      sp.on_ack_st(2, a.slot ? wire::pathid::relayed(1, 2) : wire::pathid::direct(0), a.echo, now);
      acks.pop_front();
    }
    for (int k = 0; k < 2 && sent < total && sent - delivered < 400; ++k, ++sent) {
      const int s = sp.pick_st(2, 1000, now);
      sp.on_sent_st(2, static_cast<unsigned>(s), 1000, now);
      queue[s].push_back(now);
      if (s == 1) ++(t < kDrop ? r.relayed_before : r.relayed_after);
    }
    const int cap[2] = {t < kDrop ? 3 : (t % 3 == 0 ? 1 : 0), 3};
    for (int s = 0; s < 2; ++s)
      for (int k = 0; k < cap[s] && !queue[s].empty(); ++k) {
        acks.push_back(Ack{t + 2 * delay[s], s, queue[s].front()});
        queue[s].pop_front();
        ++delivered;
      }
    // ACKs of both paths in arrival order.
    std::stable_sort(acks.begin(), acks.end(), [](const Ack& a, const Ack& b) { return a.at < b.at; });
    if (delivered == total) {
      r.ticks = t;
      r.standby_chunks = sp.standby_chunks();
      return r;
    }
  }
  r.ticks = 200000;
  return r;
}

TEST(Sprayer, AStandbyRelayTakesWhatADirectPathCanNoLongerCarry) {
  const DropResult on = simulate_drop(true, 20000);
  const DropResult off = simulate_drop(false, 20000);
  // 20000 packets at 2 per tick: 10000 ticks at best. Without the relay, the 16000 sent after
  // the drop cross at a third of a packet per tick.
  EXPECT_EQ(on.relayed_before, 0) << "the direct path kept up: nothing relayed";
  EXPECT_EQ(off.relayed_before + off.relayed_after, 0);
  EXPECT_GT(on.relayed_after, 12000) << "the relay carries what the direct path cannot (5/6 of it at best)";
  EXPECT_LT(on.ticks, 11000);
  EXPECT_GT(off.ticks, 40000);
  EXPECT_EQ(on.standby_chunks, static_cast<uint64_t>(on.relayed_after)) << "counted";
}

TEST(Sprayer, HostileAcksAreIgnored) {
  Sprayer sp;
  sp.add_path(2, 0, 0);
  sp.on_sent_st(2, 0, 1000, 5);
  sp.on_ack_st(2, wire::pathid::direct(6), 5, 10);  // no slot 6
  sp.on_ack_st(9, wire::pathid::direct(0), 5, 10);  // no peer 9
  sp.on_ack_st(2, wire::pathid::direct(0), 4, 10);  // echoes a time before anything was sent
  EXPECT_EQ(sp.inflight(2, 0), 1000u);
  sp.on_ack_st(2, wire::pathid::direct(0), 5, 10);
  EXPECT_EQ(sp.inflight(2, 0), 0u);
}

}  // namespace
}  // namespace sg::spray
