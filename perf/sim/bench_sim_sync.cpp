// sim-sync: the seed papers' comparisons, side by side, on the discrete-event WAN simulator
// running the real lib/ state machines (SiteSync, LTP sender/receiver, FAPT, passive
// estimator, NetSenseML policy). For each scenario and model size: round time of the
// MXNet-style parameter server (reliable), ring all-reduce (reliable), a bandwidth-blind tree
// (reliable), and stormgate (LTP): FAPT, + multipath, and the full stack (+ awareness and
// adaptive compression); then LTP vs reliable under 1% loss, multipath where a single tree
// leaves links idle, awareness under fluctuation (vs a planner stuck with its first
// measurements), + adaptive compression, SelMCast, one LTP transfer on a long fat pipe, and
// the simulator's speed at 64 sites. The parts are in parts_*.cpp.
//
// Writes perf/results/sim-sync.{json,md} (full mode) for perf/sim/plot_sim.py.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "parts.h"

using namespace sg;
using namespace sg::simbench;

namespace {

struct Args {
  PartArgs part;
  std::string out;
  std::vector<std::string> only;
  std::string parts = "main,loss,idle,fluct,mcast,haul,64";  // which experiments to run
  bool want(const char* p) const { return parts.find(p) != std::string::npos; }
};

Args parse(int argc, char** argv) {
  Args a;
  const char* root = std::getenv("SG_ROOT");
  a.part.root = root ? root : ".";
  a.part.scenarios = a.part.root + "/perf/scenarios";
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick") a.part.quick = true;
    else if (s == "--scenarios" && i + 1 < argc) a.part.scenarios = argv[++i];
    else if (s == "--out" && i + 1 < argc) a.out = argv[++i];
    else if (s == "--only" && i + 1 < argc) a.only.push_back(argv[++i]);
    else if (s == "--parts" && i + 1 < argc) a.parts = argv[++i];
    else if (s == "--bytes" && i + 1 < argc) a.part.bytes = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: bench_sim_sync [--quick] [--scenarios DIR] [--out DIR] [--only FILE.yaml]... "
                           "[--parts main,loss,idle,fluct,mcast,haul,64,testbed] [--bytes N]\n");
      std::exit(2);
    }
  }
  a.part.only = !a.only.empty();
  if (a.out.empty() && !a.part.quick) a.out = std::string(root ? root : ".") + "/perf/results";
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const double t_start = bench::now_seconds();
  std::vector<std::string> files = args.part.quick
                                       ? std::vector<std::string>{"8-sites.yaml"}
                                       : std::vector<std::string>{"3-sites.yaml", "8-sites.yaml", "9-sites.yaml",
                                                                  "16-sites.yaml", "64-sites.yaml"};
  if (!args.only.empty()) files = args.only;
  std::vector<sim::Scenario> scenarios;
  for (const auto& f : files) {
    auto r = sim::load_scenario(args.part.scenarios + "/" + f);
    if (!r.scenario) {
      for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.c_str());
      return 1;
    }
    scenarios.push_back(std::move(*r.scenario));
  }

  Report rep;
  if (args.want("main")) part_rounds(args.part, scenarios, rep);
  if (args.want("loss")) part_loss(args.part, scenarios, rep);
  if (args.want("idle")) part_idle_multipath(args.part, scenarios, rep);
  if (args.want("fluct")) part_fluctuation(args.part, scenarios, rep);
  if (args.want("mcast")) part_selmcast(scenarios, rep);
  if (args.want("haul")) part_long_haul(args.part, rep);
  if (args.want("64")) part_speed(args.part, rep);
  if (args.want("testbed")) part_testbed(args.part, scenarios, rep);

  bench::JsonLine line("sim-sync");
  for (const auto& [k, v] : rep.fig) {
    line.num(k, v);
    rep.data.num(k, v);
  }
  line.num("wall_s", bench::now_seconds() - t_start);
  line.str("mode", args.part.quick ? "quick" : "full");
  // Every replan, split, codec and probe decision of the non-oracle modes comes from this class,
  // the one a gateway's control thread runs (keys ending in _oracle bypass it by design).
  line.str("controller", "sg::controller::Controller");
  rep.data.str("controller", "sg::controller::Controller");
  if (!args.out.empty()) {
    std::filesystem::create_directories(args.out);
    std::ofstream(args.out + "/sim-sync.json") << rep.data.done() << "\n";
    std::ofstream(args.out + "/sim-sync.md") << rep.md;
    std::printf("wrote %s/sim-sync.json and sim-sync.md\n", args.out.c_str());
  }
  line.print();
  return 0;
}
