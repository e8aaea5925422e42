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

}  // namespace
}  // namespace sg::ltp
