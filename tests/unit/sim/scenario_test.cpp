// Scenario files: strict reading (unknown/duplicate keys, bad names and ranges are errors
// with a position), link derivation, and every shipped scenario loads within the stated
// ranges.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/scenario.h"

namespace sg::sim {
namespace {

const char* kSmall = R"(
name: t
seed: 4
defaults: {queue_ms: 20}
sites:
  - {name: a, egress_mbps: 100}
  - {name: b}
  - {name: c}
links:
  - {from: a, to: b, mbps: 80, delay_ms: 10, both_ways: true}
  - {from: b, to: c, mbps: 8, delay_ms: 30, loss: 0.01,
     trace: {kind: steps, steps: [{at_s: 5, factor: 0.5}]}}
  - {from: c, to: a, mbps: 40, delay_ms: 5,
     gilbert_elliott: {p_good_bad: 0.01, p_bad_good: 0.2, loss_bad: 0.3}}
)";

std::string joined(const ScenarioResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

TEST(Scenario, ReadsSitesLinksAndImpairments) {
  const ScenarioResult r = parse_scenario(kSmall, "small.yaml");
  ASSERT_TRUE(r.scenario) << joined(r);
  const Scenario& s = *r.scenario;
  EXPECT_EQ(s.name, "t");
  ASSERT_EQ(s.wan.n(), 3);
  EXPECT_DOUBLE_EQ(s.wan.sites[0].egress_bytes_per_s, 100e6 / 8);
  EXPECT_DOUBLE_EQ(s.wan.link(0, 1).bytes_per_s, 10e6);
  EXPECT_DOUBLE_EQ(s.wan.link(1, 0).bytes_per_s, 10e6) << "both_ways";
  EXPECT_EQ(s.wan.link(0, 1).delay, 10 * kMilli);
  EXPECT_EQ(s.wan.link(0, 1).queue_bytes, 200000u);  // 20 ms at 10 MB/s
  EXPECT_LE(s.wan.link(2, 1).bytes_per_s, 0) << "c -> b not listed";
  EXPECT_DOUBLE_EQ(s.wan.link(1, 2).loss, 0.01);
  EXPECT_TRUE(s.wan.link(2, 0).ge.enabled);
  // The planner's view: the trace and a's egress cap.
  const topo::Network at0 = network_at(s.wan, 0, 1, 1e9), at6 = network_at(s.wan, 6 * kSecond, 2, 1e9);
  EXPECT_DOUBLE_EQ(at0.link_bw(1, 2), 1e6);
  EXPECT_DOUBLE_EQ(at6.link_bw(1, 2), 0.5e6 / 2);
  EXPECT_DOUBLE_EQ(at0.link_bw(0, 1), 10e6);
  EXPECT_NEAR(at0.rtt[0 * 3 + 1], 0.020, 1e-12);
  // a's egress cap reaches the planner as a shared uplink (scaled like the links); no cap
  // stays unlimited.
  EXPECT_DOUBLE_EQ(at0.egress_cap(0), 100e6 / 8);
  EXPECT_DOUBLE_EQ(at6.egress_cap(0), 100e6 / 8 / 2);
  EXPECT_EQ(at0.ingress_cap(0), 0.0);
  EXPECT_EQ(at0.egress_cap(1), 0.0);
}

TEST(Scenario, UnknownAndDuplicateKeysAreErrors) {
  std::string bad = kSmall;
  bad.replace(bad.find("loss: 0.01"), 10, "los: 0.01");
  ScenarioResult r = parse_scenario(bad, "x.yaml");
  EXPECT_FALSE(r.scenario);
  EXPECT_NE(joined(r).find("links[1].los"), std::string::npos) << joined(r);
  EXPECT_NE(joined(r).find("x.yaml:"), std::string::npos);
  std::string dup = kSmall;
  dup.replace(dup.find("seed: 4"), 7, "seed: 4\nseed: 5");
  r = parse_scenario(dup, "d.yaml");
  EXPECT_FALSE(r.scenario);
  EXPECT_NE(joined(r).find("seed"), std::string::npos) << joined(r);
}

TEST(Scenario, BadNamesRangesAndTracesAreErrors) {
  auto fails = [](const std::string& from, const std::string& to, const std::string& expect) {
    std::string t = kSmall;
    t.replace(t.find(from), from.size(), to);
    const ScenarioResult r = parse_scenario(t, "b.yaml");
    EXPECT_FALSE(r.scenario) << to;
    EXPECT_NE(joined(r).find(expect), std::string::npos) << to << "\n" << joined(r);
  };
  fails("{from: b, to: c", "{from: b, to: z", "links[1].to");
  fails("mbps: 8,", "mbps: -8,", "links[1].mbps");
  fails("kind: steps", "kind: sawtooth", "kind");
  fails("{from: a, to: b, mbps: 80", "{from: a, to: a, mbps: 80", "links[0].to");
  fails("p_bad_good: 0.2", "p_bad_good: 2", "p_bad_good");
  fails("name: t\n", "", "name");
  // Two entries for the same directed link.
  fails("{from: c, to: a, mbps: 40", "{from: b, to: a, mbps: 40", "one entry per directed link");
  EXPECT_FALSE(parse_scenario("[1, 2]", "l.yaml").scenario);
  EXPECT_FALSE(parse_scenario("name: [", "l.yaml").scenario);
}

TEST(Scenario, ShippedScenariosLoadWithinTheirRanges) {
  int found = 0;
  for (const auto& e : std::filesystem::directory_iterator(SG_SCENARIO_DIR)) {
    if (e.path().extension() != ".yaml") continue;
    const ScenarioResult r = load_scenario(e.path().string());
    ASSERT_TRUE(r.scenario) << joined(r);
    const WanSpec& w = r.scenario->wan;
    ++found;
    for (int a = 0; a < w.n(); ++a)
      for (int b = 0; b < w.n(); ++b) {
        if (a == b) continue;
        const LinkSpec& l = w.link(a, b);
        ASSERT_GT(l.bytes_per_s, 0) << e.path() << " " << a << "->" << b << ": full mesh";
        EXPECT_GE(l.bytes_per_s * 8, 20e6 * 0.999);  // tens of Mbit/s ...
        EXPECT_LE(l.bytes_per_s * 8, 10e9 * 1.001);  // ... to 10 Gbit/s
        EXPECT_GE(l.delay, 5 * kMilli);              // 5-150 ms one way
        EXPECT_LE(l.delay, 150 * kMilli);
      }
  }
  EXPECT_GE(found, 4);
}

}  // namespace
}  // namespace sg::sim
