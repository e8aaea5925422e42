#include <gtest/gtest.h>

#include <algorithm>

#include "bottleneck.h"
#include "ltp/aimd_controller.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/window_controller.h"

namespace sg::ltp {
namespace {

constexpr uint32_t kMss = 1000;

TEST(Aimd, SlowStartThenHalvesOncePerEpisode) {
  AimdController c;
  c.reset(0, kMss);
  EXPECT_EQ(c.cwnd_bytes(), 10u * kMss);
  AckEvent a;
  a.now = 10;
  a.acked_bytes = 10 * kMss;
  c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 20u * kMss) << "slow start doubles per window";
  c.on_loss({100, kMss, 50, 20 * kMss, false});
  EXPECT_EQ(c.cwnd_bytes(), 10u * kMss);
  c.on_loss({101, kMss, 60, 20 * kMss, false});  // sent before the reduction: same episode
  EXPECT_EQ(c.cwnd_bytes(), 10u * kMss);
  c.on_loss({300, kMss, 200, 10 * kMss, false});  // sent after: a new episode
  EXPECT_EQ(c.cwnd_bytes(), 5u * kMss);
  EXPECT_EQ(c.reductions(), 2u);
}

TEST(Aimd, CongestionAvoidanceAddsOneMssPerWindow) {
  AimdController c;
  c.reset(0, kMss);
  c.on_loss({1, kMss, 1, 10 * kMss, false});  // ssthresh = cwnd = 5 MSS
  AckEvent a;
  a.now = 10;
  a.newest_acked_send = 5;  // sent after the episode began
  a.acked_bytes = 5 * kMss;
  c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 6u * kMss);
}

TEST(Aimd, TimeoutCollapsesToOneMssAndLinuxRtoFloor) {
  AimdController c;
  c.reset(0, kMss);
  c.on_loss({1, 10 * kMss, 0, 10 * kMss, true});
  EXPECT_EQ(c.cwnd_bytes(), kMss);
  EXPECT_EQ(c.ssthresh(), 5u * kMss);
  const auto ld = c.loss_detection();
  EXPECT_EQ(ld.min_rto, 200 * kMilli);
  EXPECT_EQ(ld.dup_threshold, 3u);
  EXPECT_EQ(c.pacing_rate(), 0.0);
}

TEST(DeliveryRate, IgnoresRandomLossAndFollowsDeliveryRate) {
  DeliveryRateController c;
  c.reset(0, kMss);
  uint64_t delivered = 0;
  for (int i = 1; i <= 40; ++i) {
    AckEvent a;
    a.now = i * kMilli;
    a.acked_bytes = 10 * kMss;
    a.prior_delivered = delivered;
    delivered += a.acked_bytes;
    a.delivered = delivered;
    a.delivery_rate = 1e7;  // 10 MB/s
    a.rtt = 2 * kMilli;
    a.inflight_bytes = 5 * kMss;
    c.on_ack(a);
  }
  EXPECT_DOUBLE_EQ(c.btlbw(), 1e7);
  EXPECT_EQ(c.min_rtt(), 2 * kMilli);
  const double rate = c.pacing_rate();
  const uint64_t cwnd = c.cwnd_bytes();
  for (int i = 0; i < 50; ++i) c.on_loss({50 * kMilli, kMss, 40 * kMilli, cwnd, false});
  EXPECT_DOUBLE_EQ(c.pacing_rate(), rate) << "loss alone changes nothing";
  EXPECT_EQ(c.cwnd_bytes(), cwnd);
  EXPECT_GE(cwnd, static_cast<uint64_t>(2 * 1e7 * 0.002 * 0.99));
  c.on_loss({60 * kMilli, cwnd, 50 * kMilli, cwnd, true});
  EXPECT_DOUBLE_EQ(c.btlbw(), 5e6) << "a timeout halves the estimate";
}

// A controller fed synthetic round trips: 10 ACKs each, one round start per round trip.
struct Feed {
  explicit Feed(const DeliveryRateConfig& cfg = {}) : c(cfg) { c.reset(0, kMss); }
  void rounds(int n, double rate, bool app_limited) {
    for (int r = 0; r < n; ++r) {
      const uint64_t round_begin = delivered;
      for (int k = 0; k < 10; ++k) {
        AckEvent a;
        now += kMilli;
        a.now = now;
        a.acked_bytes = kMss;
        // Later ACKs of the round were sent before it began (0 in the first: no wrap-around).
        a.prior_delivered = k == 0 || round_begin == 0 ? round_begin : round_begin - 1;
        delivered += kMss;
        a.delivered = delivered;
        a.delivery_rate = rate;
        a.rtt = rtt;
        a.inflight_bytes = 10 * kMss;
        a.app_limited = app_limited;
        c.on_ack(a);
      }
    }
  }
  DeliveryRateController c;
  Nanos now = 0;
  uint64_t delivered = 0;
  Nanos rtt = 10 * kMilli;
};

// A LAN path of 20 us: the window still covers rtt_floor (200 us) at the measured rate,
// so a receiver or engine that answers ~55 us late (timer slack) does not stall the sender;
// a path whose round trip is longer is unaffected.
TEST(DeliveryRate, WindowCoversTheRttFloorOnAShortPath) {
  auto window_after = [](Nanos rtt) {
    Feed f;
    f.rtt = rtt;
    f.rounds(4, 1e9, false);  // 8 Gbit/s
    EXPECT_EQ(f.c.min_rtt(), rtt);
    return f.c.cwnd_bytes();
  };
  const DeliveryRateConfig d;
  EXPECT_GE(window_after(20 * kMicro), static_cast<uint64_t>(d.cwnd_gain * 1e9 * 200e-6 * 0.99))
      << "2 x rate x 200 us, not 2 x rate x 20 us";
  const uint64_t wan = window_after(2 * kMilli);
  EXPECT_GE(wan, static_cast<uint64_t>(d.cwnd_gain * 1e9 * 2e-3 * 0.99));
  EXPECT_LE(wan, static_cast<uint64_t>(d.cwnd_gain * 1e9 * 2e-3 * 1.01)) << "a longer path keeps 2 x its BDP";
}

// A LAN path of 5 us, ACKed every microsecond (each ACK opens a packet-timed round): the
// model's time scale is rtt_floor, not min_rtt. Its 1.25 probe phase lasts ~200 us, so it
// sends the extra data that would show a faster path (a 5-us phase is shorter than one
// packet at the paced rate), and its filter remembers a rate for ten floored rounds, not
// ten microseconds of one busy moment.
struct LanFeed {
  LanFeed() { c.reset(0, kMss); }
  void acks(Nanos span, double rate) {
    for (Nanos end = now + span; now < end;) {
      now += kMicro;
      AckEvent a;
      a.now = now;
      a.acked_bytes = kMss;
      a.prior_delivered = delivered;
      delivered += kMss;
      a.delivered = delivered;
      a.delivery_rate = rate;
      a.rtt = 5 * kMicro;
      a.inflight_bytes = 0;
      c.on_ack(a);
      const bool probing = c.mode() == 2 && c.pacing_rate() > 1.2 * c.btlbw();
      run = probing ? run + kMicro : 0;
      longest_probe = std::max(longest_probe, run);
    }
  }
  DeliveryRateController c;
  Nanos now = 0, run = 0, longest_probe = 0;
  uint64_t delivered = 0;
};

TEST(DeliveryRate, ProbePhasesAndFilterRoundsLastTheRttFloorOnALan) {
  LanFeed f;
  f.acks(10 * kMilli, 1e9);
  ASSERT_EQ(f.c.mode(), 2) << "in probe_bw";
  EXPECT_GE(f.longest_probe, 190 * kMicro) << "the 1.25 phase lasts rtt_floor, not 5 us";
  // One busy millisecond at half the rate: five floored rounds, the filter keeps the path's.
  f.acks(1 * kMilli, 5e8);
  EXPECT_DOUBLE_EQ(f.c.btlbw(), 1e9);
  f.acks(3 * kMilli, 5e8);
  EXPECT_DOUBLE_EQ(f.c.btlbw(), 5e8) << "ten floored rounds at the new rate replace it";
}

// The LAN's controller: a window, kept across transfers, halved once per loss episode.
TEST(LanWindow, UnpacedWindowHalvedOncePerEpisodeAndRegrownByAcks) {
  WindowConfig cfg;
  cfg.max_window = 64 * kMss;
  WindowController c(cfg);
  c.reset(0, kMss);
  EXPECT_EQ(c.pacing_rate(), 0.0) << "the port serialises; no pacing";
  EXPECT_EQ(c.cwnd_bytes(), 64u * kMss) << "a LAN window is full from the first packet";
  c.on_loss({100, kMss, 50, 64 * kMss, false});
  EXPECT_EQ(c.cwnd_bytes(), 32u * kMss);
  c.on_loss({101, kMss, 60, 64 * kMss, false});  // sent before the halving: the same episode
  EXPECT_EQ(c.cwnd_bytes(), 32u * kMss);
  AckEvent a;
  a.now = 110;
  a.acked_bytes = 4 * kMss;
  a.newest_acked_send = 90;  // sent before the halving: no growth yet
  c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 32u * kMss);
  a.newest_acked_send = 105;
  c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 36u * kMss) << "one byte per byte acknowledged";
  for (int i = 0; i < 20; ++i) c.on_ack(a);
  EXPECT_EQ(c.cwnd_bytes(), 64u * kMss) << "never past max_window";
  c.on_loss({200, kMss, 150, 64 * kMss, false});
  EXPECT_EQ(c.cwnd_bytes(), 32u * kMss) << "a later loss: a new episode";
  c.on_loss({300, 32 * kMss, 250, 32 * kMss, true});
  EXPECT_EQ(c.cwnd_bytes(), 8u * kMss) << "a timeout: min_window";
  EXPECT_EQ(c.reductions(), 3u);
  c.reset(400, kMss);
  EXPECT_EQ(c.cwnd_bytes(), 8u * kMss) << "the next transfer starts from the path's window";
  EXPECT_EQ(c.loss_detection().min_rto, 1 * kMilli);
}

TEST(DeliveryRate, PacesAtTheInitialRateUntilItMeasured) {
  // transport.initial_rate_mbit: the pace of a path nothing was measured on yet.
  DeliveryRateConfig cfg;
  cfg.initial_rate = 100e6 / 8;
  DeliveryRateController c(cfg);
  c.reset(0, kMss);
  EXPECT_DOUBLE_EQ(c.pacing_rate(), 100e6 / 8);
  DeliveryRateController d;  // unset: from the initial RTT, as before
  d.reset(0, kMss);
  EXPECT_NE(d.pacing_rate(), 100e6 / 8);
}

TEST(DeliveryRate, LeavesStartupWhenBandwidthPlateaus) {
  DeliveryRateController c;
  c.reset(0, kMss);
  uint64_t delivered = 0;
  for (int i = 1; i <= 20; ++i) {
    AckEvent a;
    a.now = i * kMilli;
    a.acked_bytes = kMss;
    a.prior_delivered = delivered;  // every ACK starts a new round in this synthetic feed
    delivered += kMss;
    a.delivered = delivered;
    a.delivery_rate = 5e6;
    a.rtt = kMilli;
    a.inflight_bytes = 0;
    c.on_ack(a);
  }
  EXPECT_NE(c.mode(), 0) << "no longer in startup";
  EXPECT_LE(c.pacing_rate(), 1.25 * 5e6 + 1);
}

TEST(DeliveryRate, AppLimitedRoundTripsDoNotAgeTheFilter) {
  Feed f;
  auto& c = f.c;
  f.rounds(12, 1e7, false);
  ASSERT_DOUBLE_EQ(c.btlbw(), 1e7);
  // A streaming sender waiting for upstream chunks: 30 round trips that only show its
  // upstream's pace. They say nothing about the path, so the estimate stands.
  f.rounds(30, 1e6, true);
  EXPECT_DOUBLE_EQ(c.btlbw(), 1e7) << "app-limited round trips do not age the filter";
  // Round trips that did measure the path still age it, one slot each.
  f.rounds(5, 1e6, false);
  EXPECT_DOUBLE_EQ(c.btlbw(), 1e7);
  f.rounds(10, 1e6, false);
  EXPECT_DOUBLE_EQ(c.btlbw(), 1e6) << "ten measured round trips at the new rate replace it";
}

TEST(DeliveryRate, ForgetsAPathIdleLongerThanKeepPathFor) {
  DeliveryRateConfig cfg;
  cfg.keep_path_for = 1 * kSecond;
  Feed f(cfg);
  auto& c = f.c;
  f.rounds(20, 1e7, false);
  ASSERT_NE(c.mode(), 0) << "startup over";
  c.reset(f.now + 500 * kMilli, kMss);
  EXPECT_TRUE(c.resuming());
  EXPECT_DOUBLE_EQ(c.pacing_rate(), 1e7) << "a known path: its rate from the first packet";
  c.reset(f.now + 2 * kSecond, kMss);
  EXPECT_FALSE(c.resuming()) << "idle too long: the path may be anything now";
  EXPECT_EQ(c.mode(), 0);
  EXPECT_EQ(c.min_rtt(), 0);
}

TEST(DeliveryRate, TailTimeoutsDoNotLowerTheModelTheNextTransferResumesFrom) {
  Feed f;
  auto& c = f.c;
  f.rounds(20, 1e7, false);
  ASSERT_NE(c.mode(), 0);
  // The transfer's last chunks were lost: two timeouts in a row (one outage: halved once),
  // then app-limited retransmissions.
  c.on_loss({f.now, kMss, f.now - kMilli, kMss, true});
  c.on_loss({f.now + kMilli, kMss, f.now, kMss, true});
  EXPECT_DOUBLE_EQ(c.btlbw(), 5e6) << "this transfer backs off, once for the outage";
  f.rounds(2, 6e6, true);
  EXPECT_DOUBLE_EQ(c.btlbw(), 6e6) << "a sample above the penalty lifts it";
  c.reset(f.now + 10 * kMilli, kMss);
  ASSERT_TRUE(c.resuming());
  EXPECT_DOUBLE_EQ(c.pacing_rate(), 1e7) << "the next transfer resumes from what the path carried";
}

// A resumed transfer whose sender offers less than the kept rate (its data still coming from
// the workers, or its engine short of CPU) and sees everything it sent delivered has learnt
// nothing of the path: the kept rate stays. One that offered the kept rate and saw half of it
// delivered has found a path that shrank.
TEST(DeliveryRate, AResumeThatOfferedLessThanTheKeptRateDoesNotShrinkIt) {
  for (const bool offered_kept : {false, true}) {
    Feed f;
    auto& c = f.c;
    f.rounds(20, 1e7, false);
    ASSERT_NE(c.mode(), 0);
    c.reset(f.now + 10 * kMilli, kMss);
    ASSERT_TRUE(c.resuming());
    ASSERT_DOUBLE_EQ(c.pacing_rate(), 1e7);
    // 30 ms of ACKs delivering 5 MB/s (half the kept rate); the chunks they cover were sent
    // at 5 MB/s too (the sender's offer), or at the kept 10 MB/s.
    const Nanos t0 = f.now + 10 * kMilli, send0 = t0 - 10 * kMilli;
    const Nanos send_gap = offered_kept ? 100 * kMicro : 200 * kMicro;
    for (int i = 1; i <= 150; ++i) {
      AckEvent a;
      a.now = t0 + i * 200 * kMicro;
      a.acked_bytes = kMss;
      a.prior_delivered = f.delivered;
      f.delivered += kMss;
      a.delivered = f.delivered;
      a.delivery_rate = 5e6;
      a.rtt = 10 * kMilli;
      a.inflight_bytes = 10 * kMss;
      a.newest_acked_send = send0 + i * send_gap;
      c.on_ack(a);
    }
    if (offered_kept) {
      EXPECT_EQ(c.resumes_shrunk(), 1u) << "the path carried half of what it was offered";
      EXPECT_NEAR(c.btlbw(), 5e6, 0.05 * 5e6);
    } else {
      EXPECT_EQ(c.resumes_shrunk(), 0u) << "delivered all it was offered: no verdict";
      EXPECT_GE(c.resumes_unjudged(), 1u);
      EXPECT_TRUE(c.resuming());
      EXPECT_DOUBLE_EQ(c.pacing_rate(), 1e7) << "the kept rate stays";
    }
  }
}

// A blackhole: timeout after timeout with nothing acknowledged is one outage (halved once,
// not once per timeout); a timeout after the path answered again is a new one.
TEST(DeliveryRate, ATimeoutHalvesOncePerOutage) {
  Feed f;
  auto& c = f.c;
  f.rounds(20, 1e7, false);
  ASSERT_NE(c.mode(), 0);
  for (int i = 0; i < 7; ++i) c.on_loss({f.now + i * kMilli, kMss, f.now, kMss, true});
  EXPECT_DOUBLE_EQ(c.btlbw(), 5e6);
  f.rounds(1, 4e6, false);  // answers again (below the ceiling: the model stays)
  c.on_loss({f.now, kMss, f.now - kMilli, kMss, true});
  EXPECT_DOUBLE_EQ(c.btlbw(), 2.5e6) << "a new outage halves again";
}

// A timeout halves the rate once, and the flight it presumes lost also counts toward the
// round trip's overload (a path that overflows its queue loses the tail of its flight, and
// only the timeout says so: not counting it left the simulator's 64 sites x 1 GB at 26 s a
// round instead of 3.7). When the originals prove only late (the peer had not begun the
// round and held them), the overload trim is undone; the halving stays.
TEST(DeliveryRate, ATimeoutsLossesCountAsOverloadUntilTheyProveFalse) {
  auto after = [](bool proven_false) {
    DeliveryRateConfig cfg;
    cfg.congestion_min_packets = 5;  // Feed's round trips have 10 ACKs
    Feed f(cfg);
    auto& c = f.c;
    f.rounds(20, 1e7, false);
    for (int i = 0; i < 150; ++i) c.on_loss({f.now, kMss, f.now - kMilli, 150 * kMss, true});
    f.rounds(1, 4e6, false);  // (a sample above the halved rate would lift it)
    EXPECT_EQ(c.overloads(), 1u);
    EXPECT_DOUBLE_EQ(c.btlbw(), 0.85 * 0.5e7) << "halved, then trimmed";
    AckEvent a;
    f.now += kMilli;
    a.now = f.now;
    a.acked_bytes = 150 * kMss;
    f.delivered += a.acked_bytes;
    a.delivered = f.delivered;
    a.prior_delivered = f.delivered;
    a.rtt = f.rtt;
    a.spurious_bytes = proven_false ? 150 * kMss : 0;
    c.on_ack(a);
    return std::make_pair(c.btlbw(), c.undos());
  };
  const auto late = after(true), lost = after(false);
  EXPECT_DOUBLE_EQ(late.first, 0.5e7);
  EXPECT_EQ(late.second, 1u);
  EXPECT_DOUBLE_EQ(lost.first, 0.85 * 0.5e7);
  EXPECT_EQ(lost.second, 0u);
}

// ACKs of held DATA (wire::kFlagHeld) come in one burst when the receiver begins the round:
// their spacing is the replay's. Read as an ACK train they raised the kept rate a quarter per
// round (the testbed: a 400 Mbit/s link's model at 0.9-1.4 Gbit/s after a few rounds).
TEST(DeliveryRate, HeldAcksDoNotRaiseTheKeptRate) {
  auto kept_after_burst = [](bool held) {
    Feed f;
    f.rounds(20, 1e7, false);
    f.c.reset(f.now + 10 * kMilli, kMss);
    Nanos t = f.now + 100 * kMilli;
    uint64_t d = 0;
    for (int k = 0; k < 100; ++k) {  // 100 KB within 100 us: 1 GB/s by their spacing
      AckEvent a;
      t += kMicro;
      a.now = t;
      a.acked_bytes = kMss;
      d += kMss;
      a.delivered = d;
      a.rtt = f.rtt;
      a.held = held;
      f.c.on_ack(a);
    }
    f.c.reset(t + 10 * kMilli, kMss);
    return f.c.path_bw();
  };
  EXPECT_DOUBLE_EQ(kept_after_burst(true), 1e7);
  EXPECT_GT(kept_after_burst(false), 1.2e7) << "the same burst unflagged does raise it";
}

TEST(DeliveryRate, RateSeenOnlyWhileAppLimitedIsAFloorToGrowFrom) {
  Feed f;
  auto& c = f.c;
  f.rounds(20, 1e6, true);  // startup never ended: the path was not the limit
  ASSERT_EQ(c.mode(), 0);
  c.reset(f.now + 10 * kMilli, kMss);
  EXPECT_TRUE(c.resuming());
  EXPECT_DOUBLE_EQ(c.pacing_rate(), DeliveryRateConfig{}.startup_gain * 1e6) << "grows from it as startup does";
}

// Half of a round trip's packets lost: overload by the 20% rule.
void lose(Feed& f, int n) {
  for (int i = 0; i < n; ++i) f.c.on_loss({f.now, kMss, f.now - f.rtt, 10 * kMss, false});
}

// Chunks declared lost that then arrive (their originals were only late) take their losses
// back: an overload episode they made is undone, the rate restored. Real losses stay.
TEST(DeliveryRate, FalseLossesUndoTheTrimsTheyCaused) {
  auto after = [](uint64_t spurious_chunks) {
    DeliveryRateConfig cfg;
    cfg.congestion_min_packets = 5;
    Feed f(cfg);
    f.rounds(20, 1e7, false);
    for (int r = 0; r < 3; ++r) {  // three round trips with half their packets declared lost
      lose(f, 10);
      f.rounds(1, 4e6, false);  // (a sample above the trimmed rate would lift it)
    }
    EXPECT_LT(f.c.btlbw(), 0.7e7) << "trimmed three times";
    AckEvent a;
    f.now += kMilli;
    a.now = f.now;
    a.acked_bytes = spurious_chunks * kMss;
    f.delivered += a.acked_bytes;
    a.delivered = f.delivered;
    a.prior_delivered = f.delivered;
    a.rtt = f.rtt;
    a.spurious_bytes = spurious_chunks * kMss;
    f.c.on_ack(a);
    return std::make_pair(f.c.btlbw(), f.c.undos());
  };
  const auto all_false = after(30), some_false = after(5);
  EXPECT_DOUBLE_EQ(all_false.first, 1e7);
  EXPECT_EQ(all_false.second, 1u);
  EXPECT_LT(some_false.first, 0.7e7) << "25 of 30 lost for real: still overload";
  EXPECT_EQ(some_false.second, 0u);
}

// A loss burst (Gilbert-Elliott on a lossy path) in an early round trip of a few dozen
// packets, while startup still doubles the rate, is not the overshoot that ends startup:
// ended there, the transfer cruised at the few Mbit/s of its third round trip.
TEST(DeliveryRate, ALossBurstWhileTheRateStillGrowsDoesNotEndStartup) {
  Feed f;
  f.rounds(1, 1e5, false);
  f.rounds(1, 2e5, false);
  lose(f, 10);
  f.rounds(1, 4e5, false);  // its first ACK judges the round before: overloaded
  EXPECT_EQ(f.c.overloads(), 1u);
  EXPECT_EQ(f.c.mode(), 0) << "still in startup";
  f.rounds(1, 8e5, false);
  EXPECT_DOUBLE_EQ(f.c.btlbw(), 8e5) << "and still growing past the trim";
  EXPECT_DOUBLE_EQ(f.c.pacing_rate(), DeliveryRateConfig{}.startup_gain * 8e5);
}

// Overshoot: the queue overflows once the rate has stopped growing (or round trip after
// round trip): startup ends.
TEST(DeliveryRate, OverloadEndsStartupOnceTheRateStoppedGrowingOrTwiceInARow) {
  {
    Feed f;
    f.rounds(1, 1e6, false);
    f.rounds(1, 1.1e6, false);  // the plateau
    lose(f, 10);
    f.rounds(1, 1.1e6, false);
    EXPECT_NE(f.c.mode(), 0) << "overload on a plateau ends startup";
  }
  {
    Feed f;
    f.rounds(1, 1e5, false);
    f.rounds(1, 2e5, false);
    lose(f, 10);
    f.rounds(1, 4e5, false);
    ASSERT_EQ(f.c.mode(), 0);
    lose(f, 10);
    f.rounds(1, 8e5, false);
    EXPECT_NE(f.c.mode(), 0) << "a second overloaded round trip in a row ends it, growing or not";
  }
}

// The path tests: 50 Mbit/s, 100 ms RTT, 50 ms of queue (half a BDP: startup overshoots).
constexpr double kRate = 6.25e6;
constexpr Nanos kOneWay = 50 * kMilli, kRtt = 2 * kOneWay;
constexpr uint32_t kChunks = 4000;  // 4 MB: 0.66 s at the full rate

double ideal_s(double rate) { return kChunks * (1024.0 + sizeof(wire::DataHeader)) / rate + 1e-9 * kRtt; }

TEST(DeliveryRatePath, SecondTransferOnAKnownPathRunsAtItsRateWithoutLoss) {
  DeliveryRateController c;
  testing::BottleneckPath path(c, kRate, kOneWay, 50 * kMilli, kChunks);
  const auto first = path.transfer(kChunks);
  ASSERT_TRUE(first.ok);
  path.idle(200 * kMilli);
  const auto second = path.transfer(kChunks);
  ASSERT_TRUE(second.ok);
  EXPECT_GE(second.utilisation(kRtt, 2 * kRtt, kRate), 0.9) << "at the path's rate within two round trips";
  EXPECT_EQ(second.drops, 0u) << "no overshoot into the queue";
  EXPECT_EQ(second.retransmits, 0u);
  EXPECT_LE(1e-9 * static_cast<double>(second.end - second.start), 1.1 * ideal_s(kRate));
  EXPECT_EQ(c.resumes_confirmed(), 1u);
  EXPECT_NEAR(c.btlbw(), kRate, 0.05 * kRate);
}

// Transfers shorter than half a round trip of ACKs never reach the resume check (a round's
// transfer on a long fast link is often a fraction of its bandwidth-delay product). They
// cannot show a shrunk path, but their ACKs' rate raises the kept rate and the next one
// probes a quarter above it: a path that grew is found within a few transfers. Before, they
// ran at the rate learnt once, for good.
TEST(DeliveryRatePath, ShortTransfersFindAPathThatGrew) {
  DeliveryRateController c;
  testing::BottleneckPath path(c, kRate, kOneWay, 50 * kMilli, kChunks);
  ASSERT_TRUE(path.transfer(kChunks).ok);
  path.idle(200 * kMilli);
  ASSERT_TRUE(path.transfer(kChunks).ok);  // a known path, judged: the model is its rate
  ASSERT_NEAR(c.btlbw(), kRate, 0.05 * kRate);
  path.set_rate(3 * kRate);
  constexpr uint32_t kShort = 200;  // 200 KB: 11 ms at the new rate, a ninth of the RTT
  for (int i = 0; i < 12; ++i) {
    path.idle(200 * kMilli);
    const auto t = path.transfer(kShort);
    ASSERT_TRUE(t.ok);
    EXPECT_EQ(t.drops, 0u) << "transfer " << i;
  }
  EXPECT_EQ(c.resumes_confirmed(), 1u) << "the short ones are too short to be judged";
  EXPECT_GE(c.path_bw(), 2.5 * kRate) << "the kept rate followed the path up";
  EXPECT_LE(c.path_bw(), 3.3 * kRate);
  // A short transfer never lowers the model: a path that shrank shows in the first longer one.
  const double kept = c.path_bw();
  path.set_rate(kRate);
  path.idle(200 * kMilli);
  ASSERT_TRUE(path.transfer(kShort).ok);
  EXPECT_GE(c.path_bw(), kept);
  path.idle(200 * kMilli);
  const auto t = path.transfer(kChunks);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(c.resumes_shrunk(), 1u);
  EXPECT_NEAR(c.btlbw(), kRate, 0.15 * kRate);
}

TEST(DeliveryRatePath, PathThatShrankBetweenTransfersIsDetectedAndTheRateDrops) {
  DeliveryRateController c;
  testing::BottleneckPath path(c, kRate, kOneWay, 50 * kMilli, kChunks);
  ASSERT_TRUE(path.transfer(kChunks).ok);
  path.idle(200 * kMilli);
  path.set_rate(kRate / 2);  // e.g. another flow now shares the link
  const auto t = path.transfer(kChunks);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(c.resumes_shrunk(), 1u);
  double peak = 0;
  for (const auto& [at, r] : t.pacing)
    if (at - t.start >= 3 * kRtt) peak = std::max(peak, r);
  EXPECT_LE(peak, 1.3 * kRate / 2) << "after three round trips it paces at the new rate (probe_bw's 1.25 at most)";
  EXPECT_NEAR(c.btlbw(), kRate / 2, 0.1 * kRate / 2);
  EXPECT_LT(t.drops, kChunks / 20) << "the kept rate overshoots for about 1.5 round trips, no longer";
  EXPECT_LE(1e-9 * static_cast<double>(t.end - t.start), 1.2 * ideal_s(kRate / 2));
  // The measured rate is what the next transfer starts from: no overshoot at all then.
  path.idle(200 * kMilli);
  const auto next = path.transfer(kChunks);
  EXPECT_EQ(next.drops, 0u);
  EXPECT_EQ(c.resumes_confirmed(), 1u);
}

// A gateway's sender runs one transfer per round, of a few round trips on a long link: too
// short for probe_bw's eight-phase cycle ever to reach its 1.25 phase. A path that shrank for
// a while (another flow on it, or a sender starved of CPU) must be found again once it is
// back, or the kept rate only ever goes down (the testbed's ddp-step: rounds from 0.6 s to
// 1.4 s over 20 steps on unchanged links).
TEST(DeliveryRatePath, ShortJudgedTransfersFindAPathThatRecovered) {
  DeliveryRateController c;
  testing::BottleneckPath path(c, kRate, kOneWay, 50 * kMilli, kChunks);
  ASSERT_TRUE(path.transfer(kChunks).ok);
  path.idle(200 * kMilli);
  path.set_rate(kRate / 2);
  ASSERT_TRUE(path.transfer(kChunks).ok);
  ASSERT_NEAR(c.path_bw(), kRate / 2, 0.1 * kRate / 2) << "the shrunk path was learnt";
  path.set_rate(kRate);
  constexpr uint32_t kRound = 1500;  // 1.5 MB: 2.5 round trips at the full rate
  double last_s = 0;
  for (int i = 0; i < 10; ++i) {
    path.idle(200 * kMilli);
    const auto t = path.transfer(kRound);
    ASSERT_TRUE(t.ok);
    EXPECT_LT(t.drops, kRound / 50) << "transfer " << i << ": probing stays within the queue";
    last_s = 1e-9 * static_cast<double>(t.end - t.start);
  }
  EXPECT_GE(c.path_bw(), 0.9 * kRate) << "the kept rate found the recovered path";
  EXPECT_LE(c.path_bw(), 1.3 * kRate);
  EXPECT_LE(last_s, 1.25 * (kRound * (1024.0 + sizeof(wire::DataHeader)) / kRate + 1e-9 * kRtt));
}

}  // namespace
}  // namespace sg::ltp
