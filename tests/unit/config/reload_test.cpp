// lib/config/reload: which keys a new file changes, and whether a running gateway takes it.
#include "config/reload.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace sg::config {
namespace {

using Keys = std::vector<std::string>;

const char* kBase = R"(site: {id: 1, name: a}
ports:
  - {name: p0, vdev: net_ring0, ipv4: 10.0.0.1}
  - {name: p1, vdev: net_ring1, ipv4: 10.0.1.1}
peers:
  - {id: 2, name: b, address: 10.0.0.2}
security: {key_file: /k}
job: {model_bytes: 4096, rounds: 100, round_timeout_ms: 2000}
)";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(ConfigReload, ChangedKeysArePathsIntoTheTree) {
  EXPECT_EQ(changed_keys(kBase, kBase), Keys{});
  EXPECT_EQ(changed_keys(kBase, with(kBase, "rounds: 100", "rounds: 200")), Keys{"job.rounds"});
  EXPECT_EQ(changed_keys(kBase, with(kBase, "vdev: net_ring1", "vdev: net_ring9")), Keys{"ports[1].vdev"});
  // A key written out where it was unset counts, even at its default value; a new section
  // is compared key by key.
  EXPECT_EQ(changed_keys(kBase, std::string(kBase) + "telemetry: {stats_interval_ms: 1000}\n"),
            Keys{"telemetry.stats_interval_ms"});
  EXPECT_EQ(changed_keys(kBase, with(kBase, ", rounds: 100", "")), Keys{"job.rounds"});
  // A list item added or removed, and a scalar that became a map.
  EXPECT_EQ(changed_keys(kBase, with(kBase, "  - {name: p1, vdev: net_ring1, ipv4: 10.0.1.1}\n", "")),
            (Keys{"ports[1].ipv4", "ports[1].name", "ports[1].vdev"}));
  EXPECT_EQ(changed_keys(kBase, with(kBase, "security: {key_file: /k}", "security: /k")), Keys{"security"});
  // Formatting alone changes nothing.
  EXPECT_EQ(changed_keys(kBase, with(kBase, "job: {model_bytes: 4096, rounds: 100, round_timeout_ms: 2000}",
                                     "job:\n  round_timeout_ms: 2000\n  model_bytes: 4096\n  rounds: 100")),
            Keys{});
}

struct TempFile {
  std::string path;
  TempFile() {
    char p[] = "/tmp/sgreloadXXXXXX";
    const int fd = mkstemp(p);
    if (fd >= 0) close(fd);
    path = p;
  }
  ~TempFile() { std::remove(path.c_str()); }
  void write(const std::string& text) const { std::ofstream(path) << text; }
};

TEST(ConfigReload, LiveKeysAreTakenTheRestNeedsARestart) {
  TempFile f;
  f.write(with(with(kBase, "rounds: 100", "rounds: 7"), "round_timeout_ms: 2000", "round_timeout_ms: 500") +
          "topology: {recompute_change: 0.5, min_interval_ms: 200}\n");
  ReloadPlan live = plan_reload(kBase, f.path);
  ASSERT_TRUE(live.accepted());
  EXPECT_EQ(live.live_changes,
            (Keys{"job.round_timeout_ms", "job.rounds", "topology.min_interval_ms", "topology.recompute_change"}));
  EXPECT_EQ(live.loaded.config->job.rounds, 7u);
  EXPECT_EQ(live.loaded.config->job.round_timeout_ms, 500u);
  EXPECT_EQ(live.loaded.text.find("rounds: 7") != std::string::npos, true);

  f.write(with(with(kBase, "rounds: 100", "rounds: 7"), "vdev: net_ring0", "vdev: net_ring5"));
  ReloadPlan mixed = plan_reload(kBase, f.path);
  EXPECT_FALSE(mixed.accepted()) << "all or nothing";
  EXPECT_EQ(mixed.restart_keys, Keys{"ports[0].vdev"});
  EXPECT_EQ(mixed.live_changes, Keys{"job.rounds"});
}

TEST(ConfigReload, ABadFileIsRefusedWithItsErrors) {
  TempFile f;
  f.write(with(kBase, "rounds: 100", "rounds: -3"));
  ReloadPlan bad = plan_reload(kBase, f.path);
  EXPECT_FALSE(bad.accepted());
  ASSERT_EQ(bad.loaded.errors.size(), 1u);
  EXPECT_EQ(bad.loaded.errors[0].key_path, "job.rounds");
  f.write("job: {rounds: [\n");
  EXPECT_FALSE(plan_reload(kBase, f.path).accepted());
  EXPECT_FALSE(plan_reload(kBase, f.path + ".missing").accepted());
}

}  // namespace
}  // namespace sg::config
