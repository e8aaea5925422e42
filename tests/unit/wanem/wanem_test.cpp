// The WAN emulator's model of one site pair and its profile reader.
#include <gtest/gtest.h>

#include <cmath>

#include "coalesce.h"
#include "early_wake.h"
#include "impairment.h"
#include "profile.h"

namespace sg::wanem {
namespace {

TEST(Pair, DelayAndRateMakeTheDeliveryTime) {
  Pair p;
  PairSpec s;
  s.delay = 20 * kMilli;
  s.rate_bytes_per_s = 1e6;  // 1000 B take 1 ms
  p.set(s);
  Nanos at[2];
  ASSERT_EQ(p.admit(0, 0, 1000, at), 1);
  EXPECT_EQ(at[0], 21 * kMilli);
  ASSERT_EQ(p.admit(0, 0, 1000, at), 1);  // behind the first in the queue
  EXPECT_EQ(at[0], 22 * kMilli);
  EXPECT_EQ(p.backlog(0), 2000u);
  EXPECT_EQ(p.backlog(1 * kMilli), 1000u);
  EXPECT_EQ(p.backlog(5 * kMilli), 0u);
}

TEST(Pair, DropTailQueueInBytes) {
  Pair p;
  PairSpec s;
  s.rate_bytes_per_s = 1e6;
  s.queue_bytes = 5000;
  p.set(s);
  Nanos at[2];
  int taken = 0;
  for (int i = 0; i < 10; ++i) taken += p.admit(0, 0, 1000, at);
  EXPECT_EQ(taken, 5);
  EXPECT_EQ(p.counters().dropped_queue, 5u);
  EXPECT_EQ(p.counters().queue_peak_bytes, 5000u);
  EXPECT_EQ(p.admit(3 * kMilli, 0, 1000, at), 1) << "room again once 3 ms drained";
}

TEST(Pair, RandomLossRateOverManyFrames) {
  Pair p(7);
  PairSpec s;
  s.loss = 0.02;
  p.set(s);
  Nanos at[2];
  int got = 0;
  for (int i = 0; i < 200000; ++i) got += p.admit(i, i, 100, at);
  EXPECT_NEAR(1.0 - got / 200000.0, 0.02, 0.002);
  EXPECT_EQ(p.counters().dropped_loss + p.counters().forwarded, 200000u);
}

TEST(Pair, BurstLossComesInRuns) {
  // Gilbert-Elliott: enter the bad state 1% of frames, leave it 20%: runs of ~5 lost frames,
  // ~4.8% lost overall; independent loss at that rate would rarely lose 3 in a row.
  Pair p(3);
  PairSpec s;
  s.burst.on = true;
  s.burst.p_enter = 0.01;
  s.burst.p_exit = 0.2;
  p.set(s);
  Nanos at[2];
  int lost = 0, runs = 0, run = 0, long_runs = 0;
  for (int i = 0; i < 200000; ++i) {
    if (p.admit(i, i, 100, at) == 0) {
      ++lost;
      if (++run == 1) ++runs;
      if (run == 3) ++long_runs;
    } else {
      run = 0;
    }
  }
  EXPECT_NEAR(lost / 200000.0, 0.01 / (0.01 + 0.2), 0.006);
  EXPECT_NEAR(static_cast<double>(lost) / runs, 5.0, 0.6);
  EXPECT_GT(long_runs, runs / 3);
}

TEST(Pair, JitterDoesNotReorderUnlessAsked) {
  PairSpec s;
  s.delay = 10 * kMilli;
  s.jitter = 5 * kMilli;
  Pair p(11);
  p.set(s);
  Nanos at[2], last = 0;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(p.admit(i * kMicro, 0, 100, at), 1);
    EXPECT_GE(at[0], last);
    EXPECT_GE(at[0], i * kMicro + 5 * kMilli);
    last = at[0];
  }
  s.reorder = 0.1;
  s.reorder_extra = 3 * kMilli;
  Pair q(11);
  q.set(s);
  int overtaken = 0;
  last = 0;
  for (int i = 0; i < 10000; ++i) {
    q.admit(i * 100 * kMicro, 0, 100, at);
    overtaken += at[0] < last;
    last = std::max(last, at[0]);
  }
  EXPECT_GT(overtaken, 500);
  EXPECT_NEAR(q.counters().reordered, 1000u, 120u);
}

TEST(Pair, DuplicatesAndBlackholes) {
  PairSpec s;
  s.duplicate = 0.5;
  s.blackholes = {{2 * kSecond, 1 * kSecond}};
  Pair p(5);
  p.set(s);
  Nanos at[2];
  int twice = 0;
  for (int i = 0; i < 1000; ++i) twice += p.admit(0, 0, 100, at) == 2;
  EXPECT_NEAR(twice, 500, 60);
  EXPECT_EQ(p.admit(0, 2 * kSecond, 100, at), 0);
  EXPECT_EQ(p.admit(0, 3 * kSecond - 1, 100, at), 0);
  EXPECT_GE(p.admit(0, 3 * kSecond, 100, at), 1);
  EXPECT_EQ(p.counters().dropped_blackhole, 2u);
}

TEST(Profile, DefaultsPairsAndBothWays) {
  const auto r = parse_profile(R"(sites: 3
source: test
default: {delay_ms: 10, rate_mbit: 100}
pairs:
  - {from: 1, to: 2, delay_ms: 20, loss: 0.01}
  - {between: [1, 3], jitter_ms: 2, burst: {p_enter: 0.1, p_exit: 0.5}}
)", "t.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].to_string();
  const Profile& p = r.profile;
  auto at = [&](int a, int b) { return p.base[static_cast<size_t>(a - 1) * 3 + (b - 1)]; };
  EXPECT_EQ(at(1, 2).delay, 20 * kMilli);
  EXPECT_DOUBLE_EQ(at(1, 2).loss, 0.01);
  EXPECT_EQ(at(2, 1).delay, 10 * kMilli) << "from/to is one direction";
  EXPECT_DOUBLE_EQ(at(2, 1).rate_bytes_per_s, 100e6 / 8);
  EXPECT_EQ(at(1, 3).jitter, 2 * kMilli);
  EXPECT_EQ(at(3, 1).jitter, 2 * kMilli) << "between is both";
  EXPECT_TRUE(at(3, 1).burst.on);
  EXPECT_DOUBLE_EQ(at(3, 1).burst.p_exit, 0.5);
}

TEST(Profile, ScheduleRepeats) {
  const auto r = parse_profile(R"(sites: 2
default: {rate_mbit: 100}
schedule:
  repeat_s: 10
  phases:
    - {at_s: 4, pairs: [{between: [1, 2], rate_mbit: 10}]}
    - {at_s: 7, pairs: [{between: [1, 2], blackholes: [{at_s: 0, for_s: 1000}]}]}
)", "s.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].to_string();
  const Profile& p = r.profile;
  EXPECT_DOUBLE_EQ(p.at(1 * kSecond)[1].rate_bytes_per_s, 100e6 / 8);
  EXPECT_DOUBLE_EQ(p.at(5 * kSecond)[1].rate_bytes_per_s, 10e6 / 8);
  EXPECT_DOUBLE_EQ(p.at(8 * kSecond)[1].rate_bytes_per_s, 100e6 / 8) << "a phase starts from the base";
  EXPECT_EQ(p.at(8 * kSecond)[1].blackholes.size(), 1u);
  EXPECT_DOUBLE_EQ(p.at(15 * kSecond)[2].rate_bytes_per_s, 10e6 / 8) << "15 s is 5 s into the second cycle";
}

TEST(Profile, ProblemsAreNamedWithTheirPlace) {
  auto one = [](const std::string& text) {
    const auto r = parse_profile(text, "bad.yaml");
    return r.errors.empty() ? std::string() : r.errors[0].to_string();
  };
  EXPECT_NE(one("sites: 2\ndefault: {delay_ms: -1}\n").find("default.delay_ms"), std::string::npos);
  EXPECT_NE(one("sites: 2\ndefault: {dealy_ms: 5}\n").find("unknown key 'dealy_ms'"), std::string::npos);
  EXPECT_NE(one("sites: 2\npairs: [{from: 1, to: 3}]\n").find("pairs[0].to"), std::string::npos);
  EXPECT_NE(one("sites: 2\npairs: [{between: [1, 1]}]\n").find("two different sites"), std::string::npos);
  EXPECT_NE(one("sites: 2\npairs: [{between: [1]}]\n").find("two site numbers"), std::string::npos);
  EXPECT_NE(one("default: {}\n").find("sites"), std::string::npos);
  EXPECT_NE(one("sites: 2\nsites: 3\n").find("sites"), std::string::npos) << "duplicate key";
  EXPECT_NE(one("sites: [").find("YAML"), std::string::npos);
  EXPECT_NE(one("sites: 2\nschedule: {repeat_s: 5, phases: [{at_s: 6, pairs: []}]}\n").find("repeat_s"), std::string::npos);
}

TEST(EarlyWake, ShortWaitsSleepWholeAndNeverPoll) {
  EarlyWake w;
  for (Nanos wait : {Nanos{0}, 50 * kMicro, 1 * kMilli, EarlyWake::kMinLongWait - 1}) {
    const EarlyWake::Plan p = w.plan(10 * kMilli, 10 * kMilli + wait);
    EXPECT_EQ(p.wait, wait);
    EXPECT_FALSE(p.early);
  }
}

TEST(EarlyWake, LongWaitEndsEarlyThenPollsUntilDue) {
  EarlyWake w;
  const Nanos due = 25 * kMilli;
  const EarlyWake::Plan p = w.plan(0, due);
  ASSERT_TRUE(p.early);
  EXPECT_EQ(p.wait, due - EarlyWake::kMarginStart);
  const Nanos woke = p.wait + 40 * kMicro;  // the timer fired 40 us late
  w.woke(40 * kMicro);
  EXPECT_EQ(w.early_wakes(), 1u);
  EXPECT_EQ(w.plan(woke, due).wait, 0);              // the rest is polled...
  EXPECT_EQ(w.plan(due - 1, due).wait, 0);
  const EarlyWake::Plan after = w.plan(due, due + 1 * kMilli);  // ...until the frame is due
  EXPECT_EQ(after.wait, 1 * kMilli);
  EXPECT_FALSE(after.early);
}

TEST(EarlyWake, AnArrivalEndsThePolling) {
  EarlyWake w;
  ASSERT_TRUE(w.plan(0, 25 * kMilli).early);
  w.interrupted();  // a frame arrived 3 ms in: the next wait is planned afresh, not polled
  const EarlyWake::Plan p = w.plan(3 * kMilli, 25 * kMilli);
  EXPECT_TRUE(p.early);
  EXPECT_EQ(p.wait, 22 * kMilli - w.margin());
}

TEST(EarlyWake, MarginFollowsTheHostsLatenessWithinBounds) {
  EarlyWake w;
  for (int i = 0; i < 100; ++i) w.woke(400 * kMicro);
  EXPECT_NEAR(static_cast<double>(w.margin()), 2 * 400e3 + EarlyWake::kMarginFloor, 5e3);
  for (int i = 0; i < 100; ++i) w.woke(20 * kMilli);  // a host that wakes very late
  EXPECT_EQ(w.margin(), EarlyWake::kMarginCap);
  for (int i = 0; i < 200; ++i) w.woke(0);  // and one that is punctual
  EXPECT_NEAR(static_cast<double>(w.margin()), EarlyWake::kMarginFloor, 1e3);
}

TEST(EarlyWake, PolledRestIsAtMostAQuarterOfTheWait) {
  // Whatever the margin, a wait that ends early polls at most a quarter of itself, so an
  // emulator with frames due now and then never spends most of its time polling.
  EarlyWake w;
  for (Nanos late : {Nanos{0}, 100 * kMicro, 700 * kMicro, 5 * kMilli}) {
    for (int i = 0; i < 50; ++i) w.woke(late);
    for (Nanos wait = 0; wait <= 20 * kMilli; wait += 97 * kMicro) {
      EarlyWake probe = w;
      const EarlyWake::Plan p = probe.plan(0, wait);
      const Nanos polled = wait - p.wait;
      EXPECT_LE(4 * polled, wait) << "late " << late << " wait " << wait;
      EXPECT_GE(p.wait, 0);
    }
  }
}

TEST(Profile, MinDelayIsTheLeastOneWayDelayLessJitterInAnyPhase) {
  const auto r = parse_profile(R"(sites: 3
default: {delay_ms: 20}
pairs:
  - {from: 1, to: 2, delay_ms: 8, jitter_ms: 2}
schedule:
  phases:
    - {at_s: 5, pairs: [{between: [2, 3], delay_ms: 4}]}
)", "d.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].to_string();
  EXPECT_EQ(r.profile.min_delay(), 4 * kMilli) << "a later phase's shorter delay counts";
  const auto j = parse_profile("sites: 2\ndefault: {delay_ms: 1, jitter_ms: 3}\n", "j.yaml");
  ASSERT_TRUE(j.errors.empty());
  EXPECT_EQ(j.profile.min_delay(), 0) << "jitter beyond the delay leaves none";
}

TEST(Coalescer, QuantumIsAQuarterOfTheLeastDelayCapped) {
  EXPECT_EQ(Coalescer(400 * kMicro).quantum(), 100 * kMicro);
  EXPECT_EQ(Coalescer(50 * kMilli).quantum(), Coalescer::kMaxQuantum);
  EXPECT_EQ(Coalescer(50 * kMilli).ahead(), Coalescer::kMaxQuantum / 2) << "frames leave within half a quantum";
}

// Feeds `rate` frames/s in wakes of 1 ms for `ms` milliseconds from `t`; returns the new t.
Nanos feed(Coalescer& c, Nanos t, uint64_t rate, int ms) {
  for (int i = 0; i < ms; ++i) {
    t += kMilli;
    c.arrived(t, rate / 1000);
  }
  return t;
}

TEST(Coalescer, BusyAboveTheEnterRateUntilBelowTheLeaveRate) {
  Coalescer c(20 * kMilli);
  Nanos t = feed(c, 0, Coalescer::kEnterRate / 2, 50);
  EXPECT_FALSE(c.busy()) << "a light stream wakes per arrival";
  t = feed(c, t, 4 * Coalescer::kEnterRate, 25);
  EXPECT_TRUE(c.busy());
  t = feed(c, t, (Coalescer::kEnterRate + Coalescer::kLeaveRate) / 2, 50);
  EXPECT_TRUE(c.busy()) << "between the two rates it stays as it was";
  t = feed(c, t, 0, 25);
  EXPECT_FALSE(c.busy()) << "a quiet WAN goes back to sleeping until an arrival";
}

TEST(Coalescer, NeverBusyWithNextToNoDelay) {
  // Taking arrivals a quantum late would add to a delay shorter than the quantum floor.
  Coalescer c(4 * Coalescer::kMinQuantum - 1);
  feed(c, 0, 100 * Coalescer::kEnterRate, 50);
  EXPECT_FALSE(c.busy());
}

}  // namespace
}  // namespace sg::wanem
