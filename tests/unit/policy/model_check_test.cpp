// Model checking of the policy protocol. Exhaustive: from a proposal, every interleaving of
// message deliveries (any order, so reordering is covered), up to a bounded number of
// drops, duplicates, timer ticks and restarts, and rounds beginning whenever allowed;
// states are memoised by a canonical key. In every state: no round ran under two versions.
// In every state where faults are used up and nothing is in flight: letting messages
// through completes the switch (liveness). Seeded random runs cover more gateways, several
// successive switches, and longer fault sequences.
#include <gtest/gtest.h>

#include <string_view>
#include <unordered_set>

#include "common/rng.h"
#include "world.h"

namespace sg::policy {
namespace {

struct Budget {
  int drops = 0, dups = 0, ticks = 0, restarts = 0;
  bool restart_coordinator = false;
  Round max_round = 2;  // everyone starts in round 1; the switch is at round 2 (margin 1)
};

class Checker {
 public:
  static constexpr size_t kMaxStates = 200'000;
  explicit Checker(Budget b) : budget_(b) {}
  size_t states = 0, liveness_checks = 0;
  std::string failure;

  void run(World start) {
    start_ = start;
    dfs(start, budget_);
  }

 private:
  void check_live(World& w) {
    ++liveness_checks;
    World c = w;
    // A restarted coordinator forgets a plan nobody had promised; its control thread plans
    // again, which is what this re-proposal stands for.
    if (c.gws[0].synced() && !c.gws[0].switch_in_progress() && c.gws[0].active_version() < 1) c.propose(1);
    c.settle(12);
    if (c.gws[0].synced() && !c.gws[0].switch_in_progress() && c.gws[0].active_version() < 1) {
      c.propose(1);
      c.settle(12);
    }
    if (!c.violation.empty()) fail(c.violation + " (while settling)");
    if (c.min_active() < 1) fail("switch to version 1 did not complete once messages got through");
  }
  // The path is kept as (event, index) pairs and spelled out only on failure, by replay.
  enum Ev : char { kDeliver, kDrop, kDup, kBegin, kTick, kRestart };
  void fail(const std::string& why) {
    if (!failure.empty()) return;
    failure = why + "\n  path:";
    World w = start_;
    for (auto [ev, i] : path_) {
      switch (ev) {
        case kDeliver: failure += " deliver " + describe(w.flight[i]); w.deliver(i); break;
        case kDrop: failure += " drop " + describe(w.flight[i]); w.drop(i); break;
        case kDup: failure += " dup " + describe(w.flight[i]); w.deliver(i, true); break;
        case kBegin: failure += " begin" + std::to_string(i) + ":r" + std::to_string(w.next_round[i]); w.begin(i); break;
        case kTick: failure += " tick" + std::to_string(i); w.tick(i); break;
        case kRestart: failure += " restart" + std::to_string(i); w.restart(i); break;
      }
    }
  }
  World start_{1};
  std::vector<std::pair<Ev, int>> path_;
  static std::string describe(const Message& m) {
    static const char* names[] = {"?", "PROPOSE", "PREPARED", "DECIDE", "ACK", "STATEREQ", "STATE"};
    return std::string(names[static_cast<int>(m.type)]) + "(" + std::to_string(m.from) + ">" + std::to_string(m.to) +
           " v" + std::to_string(m.version) + "a" + std::to_string(m.attempt) + " r" + std::to_string(m.round) + " s" +
           std::to_string(m.status) + ")";
  }
  template <typename F>
  void step(Ev ev, size_t i, F&& f) {
    path_.emplace_back(ev, static_cast<int>(i));
    f();
    path_.pop_back();
  }
  void dfs(World& w, Budget b) {
    if (!failure.empty()) return;
    std::string k = w.key();
    put(k, static_cast<uint64_t>(b.drops) | static_cast<uint64_t>(b.dups) << 8 | static_cast<uint64_t>(b.ticks) << 16 |
               static_cast<uint64_t>(b.restarts) << 24);
    // States are remembered by a 128-bit hash of their canonical key (collisions would only
    // skip a state; at < 10^6 states their chance is ~10^-26).
    const std::hash<std::string_view> h;
    uint64_t h2 = 0x9e3779b97f4a7c15ull;
    for (unsigned char c : k) h2 = (h2 ^ c) * 0x100000001b3ull;
    const uint64_t h1 = h(k);
    if (!seen_.insert((static_cast<unsigned __int128>(h1) << 64) | h2).second) return;
    if (++states > kMaxStates) return fail("state budget exceeded: shrink the scenario");
    if (!w.violation.empty()) return fail(w.violation);
    const bool quiet = w.flight.empty();
    if (quiet && b.drops == 0 && b.dups == 0 && b.restarts == 0) check_live(w);
    for (size_t i = 0; i < w.flight.size(); ++i) {
      step(kDeliver, i, [&] {
        World x = w;
        x.deliver(i);
        dfs(x, b);
      });
      if (b.drops > 0)
        step(kDrop, i, [&] {
          World y = w;
          y.drop(i);
          Budget c = b;
          --c.drops;
          dfs(y, c);
        });
      if (b.dups > 0)
        step(kDup, i, [&] {
          World y = w;
          y.deliver(i, true);
          Budget c = b;
          --c.dups;
          dfs(y, c);
        });
    }
    for (int g = 0; g < w.n(); ++g) {
      if (w.next_round[g] <= b.max_round && w.can_begin(g))
        step(kBegin, g, [&] {
          World x = w;
          x.begin(g);
          dfs(x, b);
        });
      if (b.ticks > 0)
        step(kTick, g, [&] {
          World x = w;
          x.tick(g);
          Budget c = b;
          --c.ticks;
          dfs(x, c);
        });
      const bool may_restart = b.restart_coordinator ? g == 0 : g != 0;
      if (b.restarts > 0 && may_restart)
        step(kRestart, g, [&] {
          World x = w;
          x.restart(g);
          Budget c = b;
          --c.restarts;
          dfs(x, c);
        });
    }
  }

  Budget budget_;
  struct Hash128 {
    size_t operator()(unsigned __int128 v) const { return static_cast<size_t>(v ^ (v >> 64)); }
  };
  std::unordered_set<unsigned __int128, Hash128> seen_;
};

void exhaustive(int n, Budget b) {
  World w(n, 1, 1);
  ASSERT_TRUE(w.propose(1));
  Checker c(b);
  c.run(w);
  EXPECT_EQ(c.failure, "");
  EXPECT_GT(c.liveness_checks, 0u);
  std::printf("%d gateways, drops %d dups %d ticks %d restarts %d%s: %zu states, %zu liveness checks\n", n, b.drops,
              b.dups, b.ticks, b.restarts, b.restart_coordinator ? " (coordinator)" : "", c.states, c.liveness_checks);
}

TEST(PolicyModelCheck, ThreeGatewaysOneDropOneDuplicate) { exhaustive(3, {1, 1, 0, 0}); }
TEST(PolicyModelCheck, ThreeGatewaysTwoDropsAndARetry) { exhaustive(3, {2, 0, 1, 0}); }
TEST(PolicyModelCheck, ThreeGatewaysMemberRestartWithRetries) { exhaustive(3, {0, 0, 1, 1}); }
TEST(PolicyModelCheck, ThreeGatewaysMemberRestartAndDrop) { exhaustive(3, {1, 0, 0, 1}); }
TEST(PolicyModelCheck, ThreeGatewaysCoordinatorRestartWithRetries) { exhaustive(3, {0, 0, 1, 1, true}); }
TEST(PolicyModelCheck, ThreeGatewaysCoordinatorRestartAndDrop) { exhaustive(3, {1, 0, 0, 1, true}); }
TEST(PolicyModelCheck, FourGatewaysOneDrop) { exhaustive(4, {1, 0, 0, 0}); }

// Seeded random runs: 3-5 gateways, successive proposals, drops, duplicates, reordering
// and restarts for a while, then a fault-free stretch in which the latest proposal must
// take effect everywhere.
TEST(PolicyRandomRuns, SafeAlwaysAndLiveOnceMessagesGetThrough) {
  int switches = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Rng rng(seed);
    const int n = 3 + static_cast<int>(rng.below(3));
    World w(n, 1 + static_cast<Round>(rng.below(3)));
    int tag = 1;
    w.propose(tag);
    for (int step = 0; step < 400; ++step) {
      const double x = rng.uniform();
      if (!w.flight.empty() && x < 0.45) {
        const size_t i = rng.below(w.flight.size());
        const double f = rng.uniform();
        if (f < 0.15) {
          w.drop(i);
        } else {
          w.deliver(i, f < 0.25);
        }
      } else if (x < 0.6) {
        w.tick(static_cast<int>(rng.below(n)));
      } else if (x < 0.95) {
        const int g = static_cast<int>(rng.below(n));
        if (w.can_begin(g)) w.begin(g);
      } else if (x < 0.97) {
        w.restart(static_cast<int>(rng.below(n)));
      } else if (!w.gws[0].switch_in_progress() && w.gws[0].synced()) {
        w.propose(++tag);
      }
      ASSERT_EQ(w.violation, "") << "seed " << seed << " step " << step;
    }
    w.settle(40);
    ASSERT_EQ(w.violation, "") << "seed " << seed;
    const Version v = w.gws[0].active_version();
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(w.gws[g].synced()) << "seed " << seed << " gateway " << g;
      ASSERT_EQ(w.gws[g].active_version(), v) << "seed " << seed << " gateway " << g;
      ASSERT_FALSE(w.gws[0].switch_in_progress()) << "seed " << seed;
    }
    switches += static_cast<int>(v);
  }
  std::printf("random runs: %d committed switches over 300 runs\n", switches);
  EXPECT_GT(switches, 300);
}

}  // namespace
}  // namespace sg::policy
