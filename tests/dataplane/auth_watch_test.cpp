// control/auth_watch: refusals said per source, at most once per period, with what each source
// had refused since its last line; the key-file check only when nothing opened.
#include "control/auth_watch.h"

#include <gtest/gtest.h>

namespace sg::ctl {
namespace {

using dp::AuthDrop;
using Clock = AuthWatch::Clock;
constexpr auto kS = std::chrono::seconds(1);

void add(AuthCounts& c, AuthDrop r, uint64_t n) { c[static_cast<size_t>(r)] += n; }

struct Fixture {
  AuthWatch w{{"paris", "tokyo"}, "abcd", std::chrono::seconds(10)};
  AuthSnapshot s;
  Clock::time_point t{};
  Fixture() { s.by_peer.assign(2, AuthCounts{}); }
  std::vector<std::string> tick() {
    t += kS;
    return w.poll(s, t);
  }
};

TEST(AuthWatch, CountsBeforeTheFirstSnapshotAreNotReported) {
  Fixture f;
  add(f.s.by_peer[0], AuthDrop::kBadTag, 50);
  f.s.opened = 10;
  EXPECT_TRUE(f.tick().empty());  // primes
  EXPECT_TRUE(f.tick().empty());  // nothing new
}

TEST(AuthWatch, OneLinePerSourcePerPeriodWithTheCountsSinceTheLastLine) {
  Fixture f;
  f.tick();
  f.s.opened = 100;  // honest traffic opens: no key-file warning
  add(f.s.by_peer[1], AuthDrop::kBadTag, 7);
  add(f.s.by_peer[1], AuthDrop::kReplayed, 2);
  auto l = f.tick();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], "messages from peer tokyo: 9 refused (replayed 2, bad_tag 7)");
  // A flood goes on: silent for the rest of the period, then one line with all of it.
  int lines = 0;
  for (int i = 0; i < 9; ++i) {
    add(f.s.by_peer[1], AuthDrop::kBadTag, 1000);
    f.s.opened += 10;
    lines += static_cast<int>(f.tick().size());
  }
  EXPECT_EQ(lines, 0);
  add(f.s.by_peer[1], AuthDrop::kBadTag, 1000);
  f.s.opened += 10;
  l = f.tick();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], "messages from peer tokyo: 10000 refused (bad_tag 10000)");
  // The other peer is its own source: its first refusal is said at once.
  add(f.s.by_peer[0], AuthDrop::kSpoofed, 1);
  f.s.opened += 10;
  l = f.tick();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], "messages from peer paris: 1 refused (spoofed 1)");
}

TEST(AuthWatch, StrangersAreOneSourceNamedByTheLastAddress) {
  Fixture f;
  f.tick();
  add(f.s.strangers, AuthDrop::kUnknownSource, 3);
  f.s.last_stranger = 0xcb007109;  // 203.0.113.9
  auto l = f.tick();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], "messages from addresses of no peer site (local workers or strangers): 3 refused (unknown_source 3), the last from 203.0.113.9");
}

TEST(AuthWatch, KeyFileCheckOnlyWhenEveryTagFailsAndNothingOpens) {
  Fixture f;
  f.tick();
  add(f.s.by_peer[0], AuthDrop::kBadTag, 5);
  auto l = f.tick();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NE(l[0].find("do the key files match? this site's key fingerprint is abcd"), std::string::npos) << l[0];
  EXPECT_EQ(l[1], "messages from peer paris: 5 refused (bad_tag 5)");
  // Still failing a second later: the key line waits for its period too.
  add(f.s.by_peer[0], AuthDrop::kBadTag, 5);
  EXPECT_TRUE(f.tick().empty());
  // Forgeries while honest traffic opens are not a key mismatch.
  for (int i = 0; i < 12; ++i) {
    add(f.s.by_peer[0], AuthDrop::kBadTag, 5);
    f.s.opened += 1;
    for (const auto& line : f.tick()) EXPECT_EQ(line.find("key files"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace sg::ctl
