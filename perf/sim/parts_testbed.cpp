// The simulator checked against the testbed (perf/bench wan-suite): a scenario that copies one
// of the testbed emulator's WAN profiles (config/wan, translated by python/wan_profile.py:
// the same sites, pair rates, one-way delays, random and burst loss, queues, schedule), the
// same gradient size, and the gateway's own DATA chunk, so that a simulated loss hits one
// 1344-byte packet as on the testbed (the other parts simulate 64 KB chunks, where one loss
// stands for forty). The stack as the gateways run it in full precision, and ring all-reduce
// as gloo runs it (sim/gloo_ring.h: 1 MiB segments, two in flight per link, a send waiting for
// the receiver's posted receive) over each TCP congestion control a kernel may run under
// gloo: NewReno (the other parts' baseline), CUBIC (Linux's default) and BBR; wan-suite
// divides these by the testbed's measured round times, taking the ring on the testbed's own
// congestion control.
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "config/load.h"

#include "experiments.h"
#include "parts.h"

namespace sg::simbench {

namespace {
// As wan-suite runs the testbed: ten warm-up rounds (the controller's first plans settle in
// them), then the median of ten.
constexpr int kRounds = 20, kReported = 10;
// A profile whose rates change on a schedule: the mean of 30 rounds after the warm-up (several
// whole cycles), as wan-suite measures the testbed there; ten rounds sample one phase.
constexpr int kCyclicReported = 30;

// The gateway config scripts/testbed writes for a WAN profile (--wan), as far as the control
// plane and SiteSync read it: config/testbed/defaults/gateway.yaml, the file the script copies
// into every site's config, loaded through the gateway's own loader. Its site and port are
// placeholders (the loader wants a port; the simulator sets the site's id and peers itself),
// the job's round timeout is the loader's default (as scripts/testbed's --round-timeout-ms
// default is), and no peer has an uplink: with a profile the testbed leaves them for
// measurement to find.
config::GatewayConfig testbed_gateway(const std::string& root) {
  const std::string path = root + "/config/testbed/defaults/gateway.yaml";
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "bench_sim_sync: cannot read %s (set SG_ROOT to the source tree)\n", path.c_str());
    std::exit(2);
  }
  std::stringstream defaults;
  defaults << in.rdbuf();
  const std::string text = "site: {id: 1, name: simulated}\n"
                           "ports:\n  - {name: wan, vdev: net_null0, ipv4: 10.99.0.1}\n"
                           "job: {id: 1}\n" +
                           defaults.str();
  const config::LoadResult r = config::load_config_text(text, path);
  if (!r.config) {
    for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::exit(2);
  }
  return *r.config;
}

double figure(const std::vector<double>& per_round, int reported, bool cyclic) {
  if (!cyclic) return median_of_last(per_round, reported);
  const size_t k = std::min(per_round.size(), static_cast<size_t>(reported));
  double sum = 0;
  for (size_t i = per_round.size() - k; i < per_round.size(); ++i) sum += per_round[i];
  return k ? sum / static_cast<double>(k) : 0.0;
}
}  // namespace

void part_testbed(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r) {
  const uint64_t model = a.bytes ? a.bytes : 16ull << 20;
  const config::GatewayConfig gw = testbed_gateway(a.root);
  const uint32_t chunk = gw.transport.chunk_bytes;
  std::printf("The testbed's WAN profiles simulated (%s per round, %u-byte chunks, median of rounds %d-%d; "
              "on a schedule, mean of rounds %d-%d)\n",
              size_name(model).c_str(), chunk, kRounds - kReported + 1, kRounds, kRounds - kReported + 1,
              kRounds - kReported + kCyclicReported);
  bench::Table t({"scenario", "stormgate f32 s", "gloo ring NewReno s", "gloo ring CUBIC s", "gloo ring BBR s", "retx", "bubbles"});
  for (const auto& sc : scs) {
    // Rates on a schedule: python/wan_profile.py writes it as link traces (sc.wan, simulated here).
    const bool cyclic = std::any_of(sc.wan.links.begin(), sc.wan.links.end(),
                                    [](const auto& l) { return l.trace.kind != sim::TraceSpec::Kind::kConstant; });
    const int reported = cyclic ? kCyclicReported : kReported;
    const int rounds = kRounds - kReported + reported;
    Setup s = make_setup(sc, model, a.mem_budget, rounds, reported);
    s.chunk_real = chunk / s.scale / 4 * 4;
    StackOptions o;
    o.spray = true;  // each site's DATA sprayed as its gateway sprays it
    o.gateway = &gw;
    const StackResult st = run_stack(s, sc.wan, o, rounds, "stormgate f32");
    std::vector<double> per_round;
    for (const auto& x : st.rounds) per_round.push_back(x.seconds);
    const double stack = figure(per_round, reported, cyclic);
    std::vector<std::string> row{sc.name + (st.ok ? "" : " (DID NOT FINISH)"), bench::fmt(stack, "%.3f")};
    r.fig["testbed_sim_stormgate_s_" + sc.name] = stack;
    for (auto [cc, key] : {std::pair{sim::TcpCc::kNewReno, "newreno"}, std::pair{sim::TcpCc::kCubic, "cubic"},
                           std::pair{sim::TcpCc::kBbr, "bbr"}}) {
      const ModeResult ring = run_ring(s, sc.wan, std::string("gloo ring all-reduce (") + key + ")", cc, kGlooSegment);
      const double ring_s = figure(ring.round_s, reported, cyclic);
      row.push_back(bench::fmt(ring_s, "%.3f") + (ring.ok ? "" : " (dnf)"));
      r.fig["testbed_sim_ring_" + std::string(key) + "_s_" + sc.name] = ring_s;
    }
    row.push_back(std::to_string(st.last.retransmits));
    row.push_back(std::to_string(st.last.bubbles));
    t.row(row);
  }
  t.print();
  std::printf("\n");
}

}  // namespace sg::simbench
