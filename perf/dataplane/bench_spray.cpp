// spray: goodput of the job's transfers sprayed over 1, 2 and 4 parallel paths of unequal
// capacity. Two gateways in one process (one thread polls both, so the 2-core machine's noise
// stays out), joined by `lanes` net_ring port pairs; each lane is a WAN link played by the
// receiver's ShapedLinks (rate, one-way delay, tail-drop queue). Every configuration runs the
// same rounds of the real job (Engine -> GatewayHandler -> JobRunner -> lib/sync -> LtpTx);
// goodput = model bytes synchronised per second. Configurations alternate (A B C ... A B C)
// and the table shows medians; perf/run/spray prints the JSON line from the last lines here.
//   bench_spray [EAL args] -- [--quick] [--model-mb MB] [--rounds N] [--repeats N]
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/ports.h"
#include "gateway_pair.h"

namespace sg::dp {
namespace {

constexpr int kMaxLanes = kPairMaxLanes;
// Lane capacities (Mbit/s): unequal on purpose, so an equal split is held back by the slowest.
constexpr double kLaneMbit[kMaxLanes] = {400, 200, 100, 100};
constexpr double kDelayUs = 500;  // one way, every lane


struct Mode {
  const char* name;
  spray::SprayMode mode;
  bool measured;          // weights from each path's delivery rate (what the gateway does)
  bool capacity_weights;  // factors from the lanes' configured capacities: an oracle reference
};
constexpr Mode kModes[] = {
    {"adaptive", spray::SprayMode::kAdaptive, true, false},          // the gateway's default
    {"weighted", spray::SprayMode::kWeighted, true, false},
    {"weighted-oracle", spray::SprayMode::kWeighted, false, true},   // knows the lanes' capacities
    {"plan-only", spray::SprayMode::kAdaptive, false, false},        // in-flight balance, no weights
    {"equal", spray::SprayMode::kEqual, false, false},
};

PairResult run(rte_mempool* pool, int lanes, int queues, const Mode& mode, uint64_t model_bytes, uint32_t rounds) {
  PairOptions o;
  o.lanes = lanes;
  o.queues = queues;
  o.lane_mbit.assign(kLaneMbit, kLaneMbit + kMaxLanes);
  o.delay_us = kDelayUs;
  o.spray_setup = [&mode](spray::Sprayer& sp, uint16_t peer, int n) {
    sp.set_mode(mode.mode);
    sp.set_measured_weights(mode.measured);
    if (mode.capacity_weights)
      for (int l = 0; l < n; ++l) sp.set_path_factor(peer, static_cast<unsigned>(l), kLaneMbit[l] / kLaneMbit[0]);
  };
  return run_gateway_pair(pool, o, model_bytes, rounds);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace
}  // namespace sg::dp

int main(int argc, char** argv) {
  using namespace sg::dp;
  const int used = rte_eal_init(argc, argv);
  if (used < 0) return 1;
  bool quick = false;
  for (int i = used + 1; i < argc; ++i) quick |= std::strcmp(argv[i], "--quick") == 0;
  uint64_t model = quick ? (2u << 20) : (8u << 20);
  uint32_t rounds = quick ? 3 : 4;
  int repeats = quick ? 1 : 3;
  for (int i = used + 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--model-mb") == 0) model = static_cast<uint64_t>(std::atof(argv[i + 1]) * (1 << 20)) & ~uint64_t{3};
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = static_cast<uint32_t>(std::max(2, std::atoi(argv[i + 1])));
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
  }
  rte_mempool* pool = create_pool("spray_pool", 32767, 256, RTE_MBUF_DEFAULT_BUF_SIZE);
  if (!pool) return 1;

  struct Config {
    int lanes;
    int queues;
    const Mode* mode;
    std::string key() const { return std::to_string(lanes) + "/" + std::to_string(queues) + "/" + mode->name; }
  };
  std::vector<Config> configs;
  configs.push_back({1, 1, &kModes[0]});
  for (int lanes : {2, 4})
    for (const Mode& m : kModes) configs.push_back({lanes, 1, &m});
  // The same 4-lane transfer with its chunks also dealt over 2 and 4 TX queues.
  for (int q : {2, 4}) configs.push_back({4, q, &kModes[0]});
  std::map<std::string, std::vector<double>> gbps;
  bool all_ok = true, all_full = true;
  uint64_t drops = 0, inexact = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    for (const Config& c : configs) {
      const PairResult r = run(pool, c.lanes, c.queues, *c.mode, model, rounds);
      const std::string key = c.key();
      std::printf("run %d lanes %d queues %d %-17s %.3f Gbit/s  finished %s  pool full %s  DATA %llu  retx %llu  tail drops %llu  "
                  "inexact values %llu\n",
                  rep + 1, c.lanes, c.queues, c.mode->name, r.gbps, r.ok ? "yes" : "NO", r.pool_full ? "yes" : "NO",
                  static_cast<unsigned long long>(r.data_tx), static_cast<unsigned long long>(r.retransmits),
                  static_cast<unsigned long long>(r.shaper_drops), static_cast<unsigned long long>(r.inexact));
      std::fflush(stdout);
      gbps[key].push_back(r.gbps);
      all_ok &= r.ok;
      all_full &= r.pool_full;
      drops += r.shaper_drops;
      inexact += r.inexact;
    }
  }
  double cap[5] = {0};
  for (int l = 1; l <= kMaxLanes; ++l) cap[l] = cap[l - 1] + kLaneMbit[l - 1];
  std::printf("\n%-6s %-7s %-18s %14s %14s %12s\n", "lanes", "queues", "split", "capacity Gb/s", "goodput Gb/s",
              "of capacity");
  for (const Config& c : configs) {
    const double g = median(gbps[c.key()]);
    std::printf("%-6d %-7d %-18s %14.3f %14.3f %12.2f\n", c.lanes, c.queues, c.mode->name, cap[c.lanes] / 1e3, g,
                g / (cap[c.lanes] / 1e3));
  }
  auto gq = [&](int lanes, int queues, const char* mode) {
    return median(gbps[std::to_string(lanes) + "/" + std::to_string(queues) + "/" + mode]);
  };
  auto g = [&](int lanes, const char* mode) { return gq(lanes, 1, mode); };
  const double g1 = g(1, "adaptive");
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::printf("\nevery run finished: %s   pools full after every run: %s   shaper tail drops: %llu   "
              "values Early Close filled (loss): %llu\n",
              all_ok ? "yes" : "NO", all_full ? "yes" : "NO", static_cast<unsigned long long>(drops),
              static_cast<unsigned long long>(inexact));
  // Measured weights are the gateway's; "_oracle" figures use the lanes' configured capacities.
  std::printf(
      "{\"bench\": \"spray\", \"weights\": \"measured\", \"gbps_1\": %.3f, \"gbps_2\": %.3f, \"gbps_4\": %.3f, "
      "\"speedup_2_vs_1\": %.3f, \"speedup_4_vs_1\": %.3f, \"capacity_ratio_4_vs_1\": %.2f, "
      "\"weighted_vs_equal_2\": %.3f, \"weighted_vs_equal_4\": %.3f, \"adaptive_vs_equal_4\": %.3f, "
      "\"adaptive_vs_plan_only_4\": %.3f, \"measured_vs_capacity_weights_4_oracle\": %.3f, "
      "\"queues2_vs_1\": %.3f, \"queues4_vs_1\": %.3f, "
      "\"finished\": %s, \"pools_full\": %s, \"inexact_values\": %llu, \"repeats\": %d}\n",
      g1, g(2, "adaptive"), g(4, "adaptive"), ratio(g(2, "adaptive"), g1), ratio(g(4, "adaptive"), g1), cap[4] / cap[1],
      ratio(g(2, "weighted"), g(2, "equal")), ratio(g(4, "weighted"), g(4, "equal")), ratio(g(4, "adaptive"), g(4, "equal")),
      ratio(g(4, "adaptive"), g(4, "plan-only")), ratio(g(4, "weighted"), g(4, "weighted-oracle")),
      ratio(gq(4, 2, "adaptive"), g(4, "adaptive")), ratio(gq(4, 4, "adaptive"), g(4, "adaptive")),
      all_ok ? "true" : "false", all_full ? "true" : "false", static_cast<unsigned long long>(inexact), repeats);
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return all_ok && all_full ? 0 : 1;
}
