#include "fapt_uplinks.h"

#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "topology/baselines.h"
#include "topology/fapt.h"
#include "topology/round_time.h"
#include "topology/testing/uplink_nets.h"

namespace sg::topo {
namespace {

// int8 sends 336 one-byte values plus a 4-byte scale for each 1344-byte f32 chunk (the
// gateway's int8 chunk size, three per packet). The metric does not read plan codecs, so an
// all-int8 round is modelled as the f32 round on every rate (links, uplinks, adders) times
// this factor: the same serialisation, the same propagation.
constexpr double kInt8Factor = 1344.0 / 340.0;

Network scaled(Network net, double f) {
  for (double& b : net.bw) b *= f;
  for (double& a : net.agg) a *= f;
  for (double& e : net.egress) e *= f;
  for (double& g : net.ingress) g *= f;
  return net;
}

double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// The testbed (3 sites, uplinks 200/100/50 Mbit/s, 16 MiB) under three views of its links.
void testbed(bench::JsonLine& json) {
  const uint64_t model = 16ull << 20;
  const PlannerOptions opt;
  struct View {
    const char* name;
    const char* key;
    Network net;
  };
  std::vector<View> views;
  Network fast = Network::uniform(3, 10e9 / 8, 0.002, 10e9);  // links unmeasured or as fast as the bridge
  fast.set_uplinks({200e6 / 8, 100e6 / 8, 50e6 / 8});
  views.push_back({"links = bridge (fast), caps only", "fast_links", fast});
  views.push_back({"link i->j = min(rate i, rate j)", "min_links", testing::testbed_net({200, 100, 50})});
  Network faster = fast;  // a link alone runs at the faster end's rate (the slow end's cap binds)
  const double mbps[3] = {200, 100, 50};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      if (i != j) faster.link_bw(i, j) = std::max(mbps[i], mbps[j]) * 1e6 / 8;
  views.push_back({"link i->j = max(rate i, rate j)", "max_links", faster});

  bench::Table t({"link view", "codec", "blind: its model s", "blind: capped s", "ours s", "bound s",
                  "slow site sends (blind/ours MB)", "slow site roots (blind/ours)"});
  for (const View& v : views) {
    const Plan blind = plan_fapt(testing::without_caps(v.net), model, opt);
    const Plan ours = plan_fapt(v.net, model, opt);
    auto rooted = [&](const Plan& p) {
      uint64_t b = 0;
      for (const ShardTree& s : p.shards)
        if (s.root == 2) b += s.bytes();
      return bench::fmt(100.0 * static_cast<double>(b) / static_cast<double>(model), "%.0f%%");
    };
    for (double f : {1.0, kInt8Factor}) {
      const Network net = scaled(v.net, f);
      const double own = round_time(testing::without_caps(net), blind, opt.chunk_bytes).total_s;
      const double tb = round_time(net, blind, opt.chunk_bytes).total_s;
      const double to = round_time(net, ours, opt.chunk_bytes).total_s;
      const double bound = static_cast<double>(model) / net.egress_cap(2);
      t.row({v.name, f == 1.0 ? "f32" : "int8", bench::fmt(own), bench::fmt(tb), bench::fmt(to), bench::fmt(bound),
             bench::fmt(testing::bytes_sent(v.net, blind, 2) / f / 1e6, "%.1f") + " / " +
                 bench::fmt(testing::bytes_sent(v.net, ours, 2) / f / 1e6, "%.1f"),
             rooted(blind) + " / " + rooted(ours)});
      const std::string k = std::string("testbed_") + v.key + (f == 1.0 ? "_f32" : "_int8");
      json.num(k + "_blind_s", tb).num(k + "_ours_s", to).num(k + "_ours_over_bound", to / bound);
    }
  }
  std::printf("\nThe 3-site testbed, 16 MiB per round, uplinks 200/100/50 Mbit/s (rtt 2 ms): the planner blind to\n"
              "the uplinks (its own estimate, then the capped model's) vs ours; bound = bytes / slowest uplink\n");
  t.print();
}

}  // namespace

void uplinks_part(bool quick, bench::JsonLine& json) {
  const uint64_t model = 100ull << 20;
  const PlannerOptions opt;
  const double chunk = opt.chunk_bytes;
  auto T = [&](const Network& net, const Plan& p) { return round_time(net, p, chunk).total_s; };
  Rng rng(4242);
  bench::Table t({"sites", "blind planner s", "ours s", "gain", "star x", "ring x", "blind tree x",
                  "(blind planner: star x", "ring x", "blind tree x)"});
  std::vector<double> ms64;
  for (int n : {8, 16, 64}) {
    const int reps = quick ? 3 : (n == 64 ? 10 : 30);
    std::vector<double> gain, ours_t, blind_t, star, ring, tree, bstar, bring, btree;
    for (int k = 0; k < reps; ++k) {
      const Network net = testing::random_capped_net(n, rng);
      const double c0 = cpu_ms();
      const Plan ours = plan_fapt(net, model, opt);
      if (n == 64) ms64.push_back(cpu_ms() - c0);
      const double to = T(net, ours), tb = T(net, plan_fapt(testing::without_caps(net), model, opt));
      const double ts = T(net, star_plan(net, model, chunk)), tr = ring_allreduce_time(net, model, chunk).total_s;
      const double tt = T(net, blind_tree_plan(net, model, opt.max_shards));
      ours_t.push_back(to);
      blind_t.push_back(tb);
      gain.push_back(tb / to);
      star.push_back(ts / to);
      ring.push_back(tr / to);
      tree.push_back(tt / to);
      bstar.push_back(ts / tb);
      bring.push_back(tr / tb);
      btree.push_back(tt / tb);
    }
    t.row({std::to_string(n), bench::fmt(bench::median(blind_t)), bench::fmt(bench::median(ours_t)),
           bench::fmt(bench::median(gain), "%.2f"), bench::fmt(bench::median(star), "%.2f"),
           bench::fmt(bench::median(ring), "%.2f"), bench::fmt(bench::median(tree), "%.2f"),
           bench::fmt(bench::median(bstar), "%.2f"), bench::fmt(bench::median(bring), "%.2f"),
           bench::fmt(bench::median(btree), "%.2f")});
    const std::string k = std::to_string(n) + "_sites";
    json.num("uplinks_gain_vs_blind_planner_median_" + k, bench::median(gain))
        .num("uplinks_gain_vs_blind_planner_min_" + k, bench::percentile(gain, 0.0))
        .num("uplinks_speedup_vs_star_median_" + k, bench::median(star))
        .num("uplinks_speedup_vs_ring_median_" + k, bench::median(ring))
        .num("uplinks_speedup_vs_blind_tree_median_" + k, bench::median(tree));
  }
  std::printf("\nSites behind uplink caps (log-uniform 200 Mbit/s - 20 Gbit/s, links clipped to their ends' caps),\n"
              "100 MiB, all scored by the capped model; medians; gain = blind planner's round / ours\n");
  t.print();
  std::printf("plan_fapt at 64 capped sites: median %.1f ms CPU (max %.1f)\n", bench::median(ms64),
              bench::percentile(ms64, 1.0));
  json.num("uplinks_plan_cpu_ms_64_sites", bench::median(ms64));
  testbed(json);
}

}  // namespace sg::topo
