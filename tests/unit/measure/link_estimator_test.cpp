#include "measure/link_estimator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/rng.h"

namespace sg::measure {
namespace {

constexpr uint32_t kPkt = 8192;
constexpr Nanos kRound = 500 * kMilli;

// Synthetic trace of one link: each round the sender pushes `burst_bytes` back to back
// through a link of capacity `bps` (arrivals spaced kPkt/bps, each gap jittered by up to
// +-jitter of itself), then the link idles until the next round; end_round() at each
// round boundary. Capacity may change per round.
class Trace {
 public:
  Trace(LinkEstimator& est, uint64_t seed) : est_(est), rng_(seed) {}
  double jitter = 0;
  int64_t inflight = -1;
  Nanos rtt = -1;
  Nanos owd = kNoOwd;
  int relayed_every = 0;  // every n-th packet is the last hop of a relayed copy (bytes only)
  int app_every = 0;      // every n-th packet carries its sender's app-limited flag
  void round(double bps, uint64_t burst_bytes, int bursts = 1, Nanos gap_between = 0) {
    Nanos t = start_;
    for (int b = 0; b < bursts; ++b) {
      for (uint64_t sent = 0; sent < burst_bytes / bursts; sent += kPkt) {
        const double dt = kPkt / bps * 1e9;
        t += static_cast<Nanos>(dt * (1 + jitter * (2 * rng_.uniform() - 1)));
        ++n_;
        if (relayed_every > 0 && n_ % relayed_every != 0) {
          est_.on_arrival({0, 1, kPkt, t, -1, -1, kNoOwd, true});
        } else {
          const bool app = app_every > 0 && n_ % app_every == 0;
          est_.on_arrival({0, 1, kPkt, t, inflight, rtt, owd, false, app});
        }
      }
      t += gap_between;
    }
    start_ += kRound;
    EXPECT_LT(t, start_) << "burst does not fit in a round";
    est_.end_round(start_);
  }
  Nanos now() const { return start_; }

 private:
  LinkEstimator& est_;
  Rng rng_;
  Nanos start_ = 0;
  uint64_t n_ = 0;
};

EstimatorConfig cfg() {
  EstimatorConfig c;
  c.sites = 3;
  return c;
}

double rel_err(double est, double truth) { return std::fabs(est - truth) / truth; }

TEST(LinkEstimator, SteadyWithinTenPercent) {
  LinkEstimator est(cfg());
  Trace tr(est, 1);
  for (int r = 0; r < 6; ++r) tr.round(100e6, 20'000'000);
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.source, Source::kTraffic);
  EXPECT_LT(rel_err(s.bytes_per_s, 100e6), 0.10) << s.bytes_per_s;
  EXPECT_EQ(s.changes, 0u);
}

TEST(LinkEstimator, IdleGapsInsideARoundDoNotLowerTheEstimate) {
  LinkEstimator est(cfg());
  Trace tr(est, 2);
  for (int r = 0; r < 6; ++r) tr.round(50e6, 9'000'000, 3, 60 * kMilli);  // 3 bursts, 60 ms apart
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 50e6), 0.10);
}

TEST(LinkEstimator, NoisyArrivalsWithinTenPercent) {
  LinkEstimator est(cfg());
  Trace tr(est, 3);
  tr.jitter = 0.8;  // every inter-arrival gap off by up to +-80%
  for (int r = 0; r < 10; ++r) {
    tr.round(200e6, 40'000'000);
    if (r >= 2) {
      EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 200e6), 0.10) << r;
    }
  }
}

// The stated bound: a step beyond change_threshold (20%) is adopted within change_confirm
// (2) rounds, after which the estimate is within 10% of the new capacity.
void check_step(double before, double after) {
  LinkEstimator est(cfg());
  Trace tr(est, 4);
  tr.jitter = 0.3;
  for (int r = 0; r < 5; ++r) tr.round(before, 12'000'000);
  ASSERT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), before), 0.10);
  const uint32_t changes = est.summary(0, 1, tr.now()).changes;
  tr.round(after, 12'000'000);
  tr.round(after, 12'000'000);  // 2 rounds after the step
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, changes + 1);
  EXPECT_LT(rel_err(s.bytes_per_s, after), 0.10) << s.bytes_per_s;
  for (int r = 0; r < 5; ++r) tr.round(after, 12'000'000);
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), after), 0.10);
}

TEST(LinkEstimator, StepDownSeenWithinTwoRounds) { check_step(100e6, 40e6); }
TEST(LinkEstimator, StepUpSeenWithinTwoRounds) { check_step(40e6, 100e6); }
TEST(LinkEstimator, SmallStepIsTrackedBySmoothing) {
  LinkEstimator est(cfg());
  Trace tr(est, 5);
  for (int r = 0; r < 4; ++r) tr.round(100e6, 20'000'000);
  for (int r = 0; r < 8; ++r) tr.round(85e6, 17'000'000);
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, 0u);
  EXPECT_LT(rel_err(s.bytes_per_s, 85e6), 0.03);
}

TEST(LinkEstimator, OneOutlierRoundIsNotAChange) {
  LinkEstimator est(cfg());
  Trace tr(est, 6);
  for (int r = 0; r < 4; ++r) tr.round(100e6, 20'000'000);
  tr.round(30e6, 6'000'000);
  tr.round(100e6, 20'000'000);
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, 0u);
  EXPECT_LT(rel_err(s.bytes_per_s, 100e6), 0.05);
}

TEST(LinkEstimator, AppLimitedWindowsNeverLowerTheEstimate) {
  LinkEstimator est(cfg());
  Trace tr(est, 7);
  tr.rtt = 40 * kMilli;
  tr.inflight = 4'000'000;  // > half of 100 MB/s * 40 ms: the link is the limit
  for (int r = 0; r < 4; ++r) tr.round(100e6, 20'000'000);
  // The sender now paces itself at 30 MB/s with little in flight: not the link's fault.
  tr.inflight = 100'000;
  for (int r = 0; r < 4; ++r) tr.round(30e6, 6'000'000);
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 100e6), 0.10);
  // Same rate with a full pipe is a real drop and is adopted.
  tr.inflight = 4'000'000;
  for (int r = 0; r < 2; ++r) tr.round(30e6, 6'000'000);
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 30e6), 0.10);
}

// Streaming senders forward chunks as they come from upstream: a link the plan does not
// saturate carries less than it could, with no queue. Those windows are app-limited (no
// in-flight figure is given, as the gateway gives none; the RTT shows no standing queue) and
// must not lower the estimate; the same rate behind a standing queue is a real drop.
TEST(LinkEstimator, AppLimitedByTheQueueTestNeverLowerTheEstimate) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 100e6, 40 * kMilli);
  Trace tr(est, 9);
  tr.rtt = 60 * kMilli;  // 20 ms of standing queue: the link is the limit
  for (int r = 0; r < 3; ++r) tr.round(100e6, 20'000'000);
  ASSERT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 100e6), 0.10);
  const uint32_t changes = est.summary(0, 1, tr.now()).changes;
  tr.rtt = 41 * kMilli;  // the sender offers 30 MB/s, the queue is empty
  for (int r = 0; r < 6; ++r) tr.round(30e6, 6'000'000);
  LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_LT(rel_err(s.bytes_per_s, 100e6), 0.10) << s.bytes_per_s;
  EXPECT_EQ(s.changes, changes);
  EXPECT_GE(s.app_limited, 6u);
  tr.rtt = 70 * kMilli;  // now 30 MB/s fills a queue: the capacity fell
  for (int r = 0; r < 2; ++r) tr.round(30e6, 6'000'000);
  s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, changes + 1);
  EXPECT_LT(rel_err(s.bytes_per_s, 30e6), 0.10) << s.bytes_per_s;
}

// A link carrying a backlogged transfer (whose queue marks the window) beside a streamed one
// (forwarding results as they complete, at its upstream's pace): the window's rate is the
// mix, below the link's. The streamed copies carry their sender's app-limited flag, so the
// window only raises; the same rate and queue from backlogged senders is a real drop.
TEST(LinkEstimator, SendersAppLimitedFlagKeepsAMixedWindowFromLoweringTheEstimate) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 100e6, 40 * kMilli);
  Trace tr(est, 15);
  tr.owd = 3 * kSecond + 20 * kMilli;
  for (int r = 0; r < 3; ++r) tr.round(100e6, 20'000'000);
  tr.owd += 30 * kMilli;  // a standing queue throughout
  tr.app_every = 2;       // half the copies come from a sender that ran dry
  for (int r = 0; r < 6; ++r) tr.round(40e6, 8'000'000);
  LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_LT(rel_err(s.bytes_per_s, 100e6), 0.10) << s.bytes_per_s;
  EXPECT_GE(s.app_limited, 6u);
  tr.app_every = 0;  // every sender backlogged, and the queue grows: the link carries no more
  tr.owd += 30 * kMilli;
  for (int r = 0; r < 2; ++r) tr.round(40e6, 8'000'000);
  s = est.summary(0, 1, tr.now());
  EXPECT_LT(rel_err(s.bytes_per_s, 40e6), 0.10) << s.bytes_per_s;
}

// An RTT carries the reverse link's queue too (the ACKs wait behind that link's data): with
// one-way delays (arrival minus the sender's stamp, here on a clock 3 s behind ours) only the
// link's own queue counts, so a lightly used link whose reverse is busy keeps its capacity.
TEST(LinkEstimator, OneWayDelayJudgesTheQueueWhenTheReverseLinkIsBusy) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 100e6, 40 * kMilli);
  Trace tr(est, 10);
  tr.rtt = 70 * kMilli;                   // 30 ms of queue, all of it on the reverse link
  tr.owd = 3 * kSecond + 20 * kMilli;     // the forward delay never grows
  for (int r = 0; r < 6; ++r) tr.round(30e6, 6'000'000);
  LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_LT(rel_err(s.bytes_per_s, 100e6), 0.10) << s.bytes_per_s;
  EXPECT_EQ(s.changes, 0u);
  EXPECT_GE(s.app_limited, 6u);
  tr.owd += 30 * kMilli;  // now the forward link holds a queue at 30 MB/s: its capacity fell
  for (int r = 0; r < 2; ++r) tr.round(30e6, 6'000'000);
  s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, 1u);
  EXPECT_LT(rel_err(s.bytes_per_s, 30e6), 0.10) << s.bytes_per_s;
}

// A link that carries relayed copies beside its own traffic is as fast as all of it: three
// packets in four are relayed here, and the few direct ones show the queue. Counting the
// direct ones alone would put the link at a quarter of its rate.
TEST(LinkEstimator, RelayedBytesCountOnTheLinkTheyCrossed) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 200e6, 40 * kMilli);
  Trace tr(est, 14);
  tr.owd = 5 * kSecond + 20 * kMilli;
  tr.round(50e6, 5'000'000);  // light: the one-way delay's floor
  tr.relayed_every = 4;
  tr.owd += 30 * kMilli;      // saturated from here on: a standing queue
  for (int r = 0; r < 4; ++r) tr.round(100e6, 30'000'000);
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, 1u);
  EXPECT_LT(rel_err(s.bytes_per_s, 100e6), 0.10) << s.bytes_per_s;
}

// Relayed bytes alone say what the relay was given, not what the hop can carry: they may
// raise an estimate, never lower it.
TEST(LinkEstimator, RelayedBytesAloneOnlyRaise) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 100e6, 40 * kMilli);
  Trace tr(est, 15);
  tr.relayed_every = 1000000;  // every packet relayed (but the millionth)
  for (int r = 0; r < 4; ++r) tr.round(30e6, 6'000'000);
  EXPECT_DOUBLE_EQ(est.bytes_per_s(0, 1, tr.now()), 100e6);
  for (int r = 0; r < 3; ++r) tr.round(150e6, 30'000'000);
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 150e6), 0.10);
}

// Before any link-limited window, the prior is the estimate app-limited traffic is judged
// against: the first rounds of a job must not replace a known capacity by the plan's load.
TEST(LinkEstimator, AppLimitedTrafficDoesNotReplaceThePrior) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 100e6, 40 * kMilli);
  Trace tr(est, 10);
  tr.rtt = 40 * kMilli;
  for (int r = 0; r < 4; ++r) tr.round(25e6, 5'000'000);
  EXPECT_DOUBLE_EQ(est.bytes_per_s(0, 1, tr.now()), 100e6);
  // Faster than the prior, even app-limited: the link carries at least that much.
  for (int r = 0; r < 2; ++r) tr.round(150e6, 30'000'000);
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.source, Source::kTraffic);
  EXPECT_LT(rel_err(s.bytes_per_s, 150e6), 0.10) << s.bytes_per_s;
}

// A streaming link whose offered load wanders between a quarter and two thirds of its
// capacity from round to round (what a planner's changing trees do to it) must not produce
// step changes: each one would make the passive planner replan.
TEST(LinkEstimator, WanderingAppLimitedLoadDoesNotChurn) {
  LinkEstimator est(cfg());
  est.set_prior(0, 1, 200e6, 100 * kMilli);
  Trace tr(est, 11);
  tr.rtt = 102 * kMilli;
  const double load[] = {50e6, 130e6, 60e6, 120e6, 50e6, 90e6, 130e6, 55e6, 100e6, 70e6};
  for (double l : load) tr.round(l, static_cast<uint64_t>(l * 0.2));
  const LinkSummary s = est.summary(0, 1, tr.now());
  EXPECT_EQ(s.changes, 0u);
  EXPECT_DOUBLE_EQ(s.bytes_per_s, 200e6);
}

// A link the planner left after a measured drop carries little afterwards (app-limited, no
// queue) and could not show a recovery; unconfirmed for stale_after, the drop yields to the
// prior, while a drop that link-limited windows keep confirming stands.
TEST(LinkEstimator, DropNotReconfirmedYieldsToThePrior) {
  EstimatorConfig c = cfg();
  c.stale_after = 2 * kSecond;
  LinkEstimator est(c);
  est.set_prior(0, 1, 100e6, 40 * kMilli);
  Trace tr(est, 12);
  tr.rtt = 90 * kMilli;  // congested: 50 ms of queue
  for (int r = 0; r < 2; ++r) tr.round(30e6, 6'000'000);
  ASSERT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 30e6), 0.10);
  for (int r = 0; r < 4; ++r) tr.round(30e6, 6'000'000);  // still congested: confirmed
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now() + 1 * kSecond), 30e6), 0.10);
  tr.rtt = 41 * kMilli;  // the planner moved away: a trickle, no queue
  for (int r = 0; r < 3; ++r) tr.round(5e6, 1'000'000);
  EXPECT_LT(rel_err(est.bytes_per_s(0, 1, tr.now()), 30e6), 0.10);  // 1.5 s: still stands
  for (int r = 0; r < 2; ++r) tr.round(5e6, 1'000'000);
  const LinkSummary s = est.summary(0, 1, tr.now());  // 2.5 s since the last confirmation
  EXPECT_EQ(s.source, Source::kPrior);
  EXPECT_DOUBLE_EQ(s.bytes_per_s, 100e6);
}

TEST(LinkEstimator, IdleLinkFallsBackToProbeThenPrior) {
  LinkEstimator est(cfg());
  EXPECT_EQ(est.summary(1, 2, 0).source, Source::kNone);
  est.set_prior(1, 2, 1e6);
  EXPECT_EQ(est.summary(1, 2, 0).source, Source::kPrior);
  EXPECT_DOUBLE_EQ(est.bytes_per_s(1, 2, 0), 1e6);
  est.on_probe_pair(1, 2, 1500, 15 * kMicro, 0);  // 100 MB/s
  const LinkSummary s = est.summary(1, 2, 0);
  EXPECT_EQ(s.source, Source::kProbe);
  EXPECT_NEAR(s.bytes_per_s, 100e6, 1);
}

TEST(LinkEstimator, ALowerBoundRaisesProbeFiguresBelowItAndNoOthers) {
  LinkEstimator est(cfg());
  const auto probe = [&](double bytes_per_s, Nanos at) {
    est.on_probe_pair(1, 2, 1500, static_cast<Nanos>(1500 / bytes_per_s * 1e9), at);
    return est.summary(1, 2, at).probe_bytes_per_s;
  };
  const auto bound = [&](double bytes_per_s, Nanos at) {
    est.on_probe_bound(1, 2, bytes_per_s, at);
    return est.summary(1, 2, at).probe_bytes_per_s;
  };
  EXPECT_NEAR(bound(20e6, 1 * kSecond), 20e6, 1) << "a link never probed: the bound is what is known";
  EXPECT_EQ(est.summary(1, 2, kSecond).source, Source::kProbe);
  EXPECT_NEAR(probe(5e6, 2 * kSecond), 5e6, 1) << "a timed train replaces it";
  EXPECT_NEAR(probe(4e6, 3 * kSecond), 4e6, 1);
  EXPECT_NEAR(probe(6e6, 4 * kSecond), 5e6, 1) << "median of 4, 5, 6";
  // The link came back to 100 MB/s and its trains are now too quick to time: each says at
  // least 20 MB/s, which every stored result is below.
  EXPECT_NEAR(bound(20e6, 5 * kSecond), 20e6, 1);
  EXPECT_EQ(est.summary(1, 2, 5 * kSecond).probe_at, 5 * kSecond);
  EXPECT_NEAR(probe(100e6, 6 * kSecond), 20e6, 1) << "one fast train among two raised ones";
  EXPECT_NEAR(probe(100e6, 7 * kSecond), 100e6, 1);
  EXPECT_NEAR(bound(20e6, 8 * kSecond), 100e6, 1) << "a bound below the figure says nothing new";
  est.on_probe_bound(1, 2, -1, 9 * kSecond);
  est.on_probe_bound(9, 2, 1e6, 9 * kSecond);
  EXPECT_EQ(est.dropped_samples(), 2u);
}

TEST(LinkEstimator, ProbesFollowAStepInTwoTrainsAndIgnoreOneOddTrain) {
  LinkEstimator est(cfg());
  const auto probe = [&](double bytes_per_s, Nanos at) {
    est.on_probe_pair(1, 2, 1500, static_cast<Nanos>(1500 / bytes_per_s * 1e9), at);
    return est.summary(1, 2, at).probe_bytes_per_s;
  };
  EXPECT_NEAR(probe(100e6, 1 * kSecond), 100e6, 1e3);
  EXPECT_NEAR(probe(100e6, 2 * kSecond), 100e6, 1e3);
  EXPECT_NEAR(probe(900e6, 3 * kSecond), 100e6, 1e3);  // one odd train: ignored
  EXPECT_NEAR(probe(100e6, 4 * kSecond), 100e6, 1e3);
  EXPECT_NEAR(probe(10e6, 5 * kSecond), 100e6, 1e3);   // the link drops tenfold...
  EXPECT_NEAR(probe(10e6, 6 * kSecond), 10e6, 1e2);    // ...and the second train shows it
  EXPECT_NEAR(probe(10e6, 7 * kSecond), 10e6, 1e2);
}

TEST(LinkEstimator, RelayTrafficMeasuresOtherwiseIdleLinks) {
  // Chunks relayed 0->2->1 are reported per hop; hop 2->1 gets a traffic estimate.
  LinkEstimator est(cfg());
  Nanos t = 0;
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 400; ++k) {
      t += static_cast<Nanos>(kPkt / 20e6 * 1e9);
      est.on_arrival({2, 1, kPkt, t});
    }
    t = (r + 1) * kRound;
    est.end_round(t);
  }
  const LinkSummary s = est.summary(2, 1, t);
  EXPECT_EQ(s.source, Source::kTraffic);
  EXPECT_LT(rel_err(s.bytes_per_s, 20e6), 0.10);
}

TEST(LinkEstimator, StaleTrafficYieldsToFreshProbe) {
  EstimatorConfig c = cfg();
  c.stale_after = 2 * kSecond;
  LinkEstimator est(c);
  Trace tr(est, 8);
  for (int r = 0; r < 3; ++r) tr.round(100e6, 20'000'000);
  const Nanos later = tr.now() + 10 * kSecond;
  est.on_probe_pair(0, 1, 1500, 50 * kMicro, later);  // 30 MB/s
  EXPECT_EQ(est.summary(0, 1, later).source, Source::kProbe);
  EXPECT_EQ(est.summary(0, 1, tr.now()).source, Source::kTraffic);
}

TEST(LinkEstimator, RttTrendAndLoss) {
  LinkEstimator est(cfg());
  Nanos t = 0;
  for (int r = 0; r < 10; ++r) {
    est.on_arrival({0, 1, kPkt, t += kMilli, -1, 50 * kMilli});
    est.on_loss(0, 1, 100, 0);
    est.end_round(t += kRound);
  }
  LinkSummary s = est.summary(0, 1, t);
  EXPECT_NEAR(s.rtt_trend, 1.0, 1e-9);
  EXPECT_EQ(s.rtt_min, 50 * kMilli);
  EXPECT_DOUBLE_EQ(s.loss_rate, 0.0);
  for (int r = 0; r < 4; ++r) {  // queue building: RTT grows, 10% loss
    est.on_arrival({0, 1, kPkt, t += kMilli, -1, (60 + 20 * r) * kMilli});
    est.on_loss(0, 1, 100, 10);
    est.end_round(t += kRound);
  }
  s = est.summary(0, 1, t);
  EXPECT_GT(s.rtt_trend, 1.2);
  EXPECT_EQ(s.rtt_min, 50 * kMilli);  // still inside the 8-round window
  EXPECT_GT(s.loss_rate, 0.05);
  EXPECT_LT(s.loss_rate, 0.10);
  EXPECT_GT(s.rtt_smoothed, 50 * kMilli);
}

TEST(LinkEstimator, BadSamplesAreCountedNotApplied) {
  LinkEstimator est(cfg());
  est.on_arrival({0, 7, kPkt, 0});    // unknown site
  est.on_arrival({1, 1, kPkt, 0});    // self link
  est.on_probe_pair(0, 1, 1500, 0, 0);  // zero gap
  est.on_loss(0, 1, 1, 2);            // more lost than sent
  EXPECT_EQ(est.dropped_samples(), 4u);
  EXPECT_EQ(est.summary(0, 1, 0).source, Source::kNone);
}

}  // namespace
}  // namespace sg::measure
