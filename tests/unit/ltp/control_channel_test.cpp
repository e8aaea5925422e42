// The CONTROL channel is never lossy: every message arrives once, in order, whatever the link does.
#include "ltp/control_channel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_net.h"

namespace sg::ltp {
namespace {

using testing::Net;
using testing::NetPort;

struct Pair {
  explicit Pair(uint64_t seed) : net(seed, clock) {}
  ControlConfig cfg(uint16_t me, uint16_t peer) {
    ControlConfig c;
    c.local_node = me;
    c.peer_node = peer;
    c.job = 1;
    c.channel = 2;
    c.window = 8;
    return c;
  }
  FakeClock clock{0};
  Net net;
  NetPort to_b{net, 0}, to_a{net, 1};
};

TEST(ControlChannel, DeliversInOrderExactlyOnceOverABadLink) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Pair p(seed);
    for (auto* im : {&p.net.fwd, &p.net.back}) {
      im->loss = 0.3;
      im->dup = 0.1;
      im->reorder = 0.5;
      im->corrupt = 0.05;
    }
    ControlChannel a(p.cfg(1, 2)), b(p.cfg(2, 1));
    std::vector<std::string> got;
    auto deliver = [&](std::span<const uint8_t> m) { got.emplace_back(m.begin(), m.end()); };
    auto ignore = [](std::span<const uint8_t>) { ADD_FAILURE() << "B sends nothing"; };
    const int kMsgs = 60;
    int queued = 0;
    for (int step = 0; step < 200000 && (static_cast<int>(got.size()) < kMsgs || !a.idle()); ++step) {
      while (queued < kMsgs) {
        std::string s = "msg-" + std::to_string(queued);
        if (!a.send({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, p.clock.now())) break;
        ++queued;
      }
      const Nanos ta = a.poll(p.clock.now(), p.to_b);
      const Nanos tb = b.poll(p.clock.now(), p.to_a);
      const Nanos next = std::min({ta, tb, p.net.next_at()});
      ASSERT_NE(next, kNever);
      p.clock.set(std::max(next, p.clock.now()));
      while (!p.net.empty() && p.net.next_at() <= p.clock.now()) {
        auto w = p.net.pop();
        auto msg = testing::ltp_payload(w.frame);
        if (msg.empty()) continue;  // corrupted: the UDP checksum caught it
        if (w.to == 0) b.on_packet(msg, p.clock.now(), deliver);
        else a.on_packet(msg, p.clock.now(), ignore);
      }
    }
    ASSERT_EQ(static_cast<int>(got.size()), kMsgs) << "seed " << seed;
    for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(got[i], "msg-" + std::to_string(i)) << "seed " << seed;
    EXPECT_FALSE(a.failed());
    EXPECT_GT(a.stats().retransmits, 0u);
  }
}

TEST(ControlChannel, RefusesWhenFullOrTooLargeAndFailsAfterMaxRetries) {
  Pair p(1);
  auto c = p.cfg(1, 2);
  c.max_payload = 16;
  c.max_retries = 3;
  ControlChannel a(c);
  std::vector<uint8_t> big(17), small(4);
  EXPECT_FALSE(a.send(big, 0));
  EXPECT_EQ(a.stats().refused_size, 1u);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(a.send(small, 0));
  EXPECT_FALSE(a.send(small, 0));
  EXPECT_EQ(a.stats().refused_full, 1u);
  p.net.fwd.blackhole = true;
  Nanos t = 0;
  for (int i = 0; i < 10 && !a.failed(); ++i) t = a.poll(t, p.to_b);
  EXPECT_TRUE(a.failed());
  EXPECT_EQ(a.stats().sent, 8u);
  EXPECT_EQ(a.stats().retransmits, 16u);
}


// Moves every packet until both sides are idle (or `steps` run out); what reaches the far
// side is handed to its channel.
template <typename DeliverA, typename DeliverB>
void pump(Pair& p, ControlChannel& a, ControlChannel& b, DeliverA&& to_a, DeliverB&& to_b, int steps = 20000) {
  for (int step = 0; step < steps && !(a.idle() && b.idle() && p.net.empty()); ++step) {
    const Nanos ta = a.poll(p.clock.now(), p.to_b);
    const Nanos tb = b.poll(p.clock.now(), p.to_a);
    const Nanos next = std::min({ta, tb, p.net.next_at()});
    if (next == kNever) break;
    p.clock.set(std::max(next, p.clock.now()));
    while (!p.net.empty() && p.net.next_at() <= p.clock.now()) {
      auto w = p.net.pop();
      auto msg = testing::ltp_payload(w.frame);
      if (msg.empty()) continue;
      if (w.to == 0) b.on_packet(msg, p.clock.now(), to_b);
      else a.on_packet(msg, p.clock.now(), to_a);
    }
  }
}

std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

TEST(ControlChannel, APeerThatRestartedIsHeardFromSequenceOneAndItsOldPacketsAreStale) {
  Pair p(7);
  auto ca = p.cfg(1, 2), cb = p.cfg(2, 1);
  ca.session = 100;
  cb.session = 200;
  ControlChannel a(ca);
  auto b = std::make_unique<ControlChannel>(cb);
  std::vector<std::string> at_a, at_b;
  auto to_a = [&](std::span<const uint8_t> m) { at_a.emplace_back(m.begin(), m.end()); };
  auto to_b = [&](std::span<const uint8_t> m) { at_b.emplace_back(m.begin(), m.end()); };
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a.send(bytes("a" + std::to_string(i)), p.clock.now()));
    ASSERT_TRUE(b->send(bytes("b" + std::to_string(i)), p.clock.now()));
  }
  pump(p, a, *b, to_a, to_b);
  ASSERT_EQ(at_a.size(), 5u);
  ASSERT_EQ(at_b.size(), 5u);

  // B's old run leaves one packet in flight (captured here, delivered late below).
  ASSERT_TRUE(b->send(bytes("old"), p.clock.now()));
  b->poll(p.clock.now(), p.to_a);
  ASSERT_FALSE(p.net.empty());
  auto old = p.net.pop();
  // While B is down, A's messages go nowhere; A gives up on them (failed).
  p.net.fwd.blackhole = true;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.send(bytes("lost" + std::to_string(i)), p.clock.now()));
  for (int i = 0; i < 200 && !a.failed(); ++i) {
    const Nanos t = a.poll(p.clock.now(), p.to_b);
    if (t == kNever) break;
    p.clock.set(std::max(p.clock.now(), t));
  }
  while (!p.net.empty()) p.net.pop();
  EXPECT_TRUE(a.failed());
  p.net.fwd.blackhole = false;

  // B restarts with a newer session and numbers from 1 again; A starts over with it.
  cb.session = 201;
  b = std::make_unique<ControlChannel>(cb);
  at_a.clear();
  at_b.clear();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(b->send(bytes("new" + std::to_string(i)), p.clock.now()));
  pump(p, a, *b, to_a, to_b);
  ASSERT_EQ(at_a.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at_a[i], "new" + std::to_string(i));
  EXPECT_EQ(a.stats().peer_restarts, 1u);
  EXPECT_FALSE(a.failed());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.send(bytes("again" + std::to_string(i)), p.clock.now()));
  pump(p, a, *b, to_a, to_b);
  ASSERT_EQ(at_b.size(), 3u) << "A's messages for B's old run are not replayed into the new one";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(at_b[i], "again" + std::to_string(i));

  // The old run's packet arrives late: stale, not delivered, nothing reset.
  a.on_packet(testing::ltp_payload(old.frame), p.clock.now(), to_a);
  EXPECT_EQ(at_a.size(), 4u);
  EXPECT_EQ(a.stats().stale_session, 1u);
  EXPECT_EQ(a.stats().peer_restarts, 1u);
}

}  // namespace
}  // namespace sg::ltp
