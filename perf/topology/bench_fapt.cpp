// fapt: the multi-root FAPT heuristic against the exact optimum (4-6 sites) and against the
// star/PS, ring all-reduce, bandwidth-blind tree and NetStorm-rule baselines, all scored by
// the same round-time metric on the same random heterogeneous instances; plus the
// heuristic's planning time at 64 sites; then the same behind per-site uplink caps
// (fapt_uplinks.h), and the 3-site testbed.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench_common.h"
#include "fapt_uplinks.h"
#include "topology/baselines.h"
#include "topology/chunk_sim.h"
#include "topology/fapt.h"
#include "topology/multipath.h"
#include "topology/round_time.h"
#include "topology/testing/random_net.h"

using namespace sg;
using namespace sg::topo;

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) quick = quick || std::strcmp(argv[i], "--quick") == 0;
  const uint64_t model = 100ull << 20;  // 100 MiB of gradients per round
  PlannerOptions opt;                   // 12 shards max, 256 KiB chunks, 2 relays
  PlannerOptions trees = opt;
  trees.multipath = false;
  const double chunk = opt.chunk_bytes;
  auto T = [&](const Network& net, const Plan& p) { return round_time(net, p, chunk).total_s; };
  Rng rng(2026);

  // 1. Heuristic (trees only) vs exact optimum over all tree plans.
  const int per_n_exact = quick ? 8 : 40;
  std::vector<double> gaps;
  bench::Table gt({"sites", "instances", "gap median", "gap p95", "gap max", "exact ms"});
  for (int n = 4; n <= 6; ++n) {
    std::vector<double> g, ms;
    for (int k = 0; k < per_n_exact; ++k) {
      const Network net = testing::random_net(n, rng);
      const double t0 = bench::now_seconds();
      const double te = T(net, plan_exact(net, model, trees));
      ms.push_back((bench::now_seconds() - t0) * 1e3);
      const double th = T(net, plan_fapt(net, model, trees));
      g.push_back(th / te - 1);
      gaps.push_back(th / te - 1);
    }
    gt.row({std::to_string(n), std::to_string(per_n_exact), bench::fmt(bench::median(g), "%.4f"),
            bench::fmt(bench::percentile(g, 0.95), "%.4f"), bench::fmt(bench::percentile(g, 1.0), "%.4f"),
            bench::fmt(bench::median(ms), "%.1f")});
  }
  std::printf("Heuristic vs exact optimum (trees only; the optimum may use any number of shards)\n");
  gt.print();

  // 2. Speedups vs baselines (ours with multipath; the NetStorm rule gets the same multipath step).
  const int per_n = quick ? 6 : 30;
  std::vector<double> s_star, s_ring, s_blind, s_ns, s_ns_trees, s_mp_gain;
  bench::Table st({"sites", "ours s", "star x", "ring x", "blind x", "netstorm x", "netstorm(trees) x"});
  for (int n : {4, 6, 8, 12, 16, 24, 32}) {
    std::vector<double> a, b, c, d, e, ours_t;
    for (int k = 0; k < per_n; ++k) {
      const Network net = testing::random_net(n, rng);
      const Plan ours_tree = plan_fapt(net, model, trees);
      Plan ours = ours_tree;
      add_multipath(net, ours, opt.max_relays, chunk);
      const double t = T(net, ours);
      Plan ns = netstorm_rule_best(net, model, opt.max_shards, chunk);
      const double ns_tree_t = T(net, ns);
      add_multipath(net, ns, opt.max_relays, chunk);
      a.push_back(T(net, star_plan(net, model, chunk)) / t);
      b.push_back(ring_allreduce_time(net, model, chunk).total_s / t);
      c.push_back(T(net, blind_tree_plan(net, model, opt.max_shards)) / t);
      d.push_back(T(net, ns) / t);
      e.push_back(ns_tree_t / T(net, ours_tree));
      s_mp_gain.push_back(T(net, ours_tree) / t);
      ours_t.push_back(t);
    }
    st.row({std::to_string(n), bench::fmt(bench::median(ours_t)), bench::fmt(bench::median(a), "%.2f"),
            bench::fmt(bench::median(b), "%.2f"), bench::fmt(bench::median(c), "%.2f"),
            bench::fmt(bench::median(d), "%.3f"), bench::fmt(bench::median(e), "%.3f")});
    s_star.insert(s_star.end(), a.begin(), a.end());
    s_ring.insert(s_ring.end(), b.begin(), b.end());
    s_blind.insert(s_blind.end(), c.begin(), c.end());
    s_ns.insert(s_ns.end(), d.begin(), d.end());
    s_ns_trees.insert(s_ns_trees.end(), e.begin(), e.end());
  }
  std::printf("\nSpeedup of our plan over each baseline (median baseline round time / ours)\n");
  st.print();

  // 2b. Cross-check with the chunk-level event computation (chunk_sim.h) instead of the
  // analytic metric: ours vs the NetStorm rule, both with multipath, small instances.
  std::vector<double> s_ns_sim;
  for (int n : {4, 6, 8}) {
    for (int k = 0; k < (quick ? 3 : 10); ++k) {
      const Network net = testing::random_net(n, rng);
      const Plan ours = plan_fapt(net, model, opt);
      Plan ns = netstorm_rule_best(net, model, opt.max_shards, chunk);
      add_multipath(net, ns, opt.max_relays, chunk);
      s_ns_sim.push_back(simulate_round(net, ns, chunk) / simulate_round(net, ours, chunk));
    }
  }
  std::printf("\nChunk-level simulation cross-check, NetStorm rule / ours (4-8 sites): median %.3f, min %.3f\n",
              bench::median(s_ns_sim), bench::percentile(s_ns_sim, 0.0));

  // 3. Planning time at 64 sites (with multipath).
  auto cpu_ms = [] {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
  };
  std::vector<double> ms64, cpu64;
  const int reps64 = quick ? 3 : 10;
  for (int k = 0; k < reps64; ++k) {
    const Network net = testing::random_net(64, rng);
    const double t0 = bench::now_seconds(), c0 = cpu_ms();
    const Plan p = plan_fapt(net, model, opt);
    ms64.push_back((bench::now_seconds() - t0) * 1e3);
    cpu64.push_back(cpu_ms() - c0);
    bench::do_not_optimize(p);
  }
  std::printf("\nplan_fapt at 64 sites: median %.1f ms wall, %.1f ms CPU over %d instances (max %.1f ms wall)\n",
              bench::median(ms64), bench::median(cpu64), reps64, bench::percentile(ms64, 1.0));
  std::printf("multipath gain (tree-only / with relays), median %.3f\n", bench::median(s_mp_gain));

  bench::JsonLine json("fapt");
  json.num("gap_vs_optimal_p95", bench::percentile(gaps, 0.95))
      .num("gap_vs_optimal_median", bench::median(gaps))
      .num("speedup_vs_star_median", bench::median(s_star))
      .num("speedup_vs_ring_median", bench::median(s_ring))
      .num("speedup_vs_blind_tree_median", bench::median(s_blind))
      .num("speedup_vs_netstorm_rule_median", bench::median(s_ns))
      .num("speedup_vs_netstorm_rule_trees_only_median", bench::median(s_ns_trees))
      .num("speedup_vs_netstorm_rule_chunk_sim_median", bench::median(s_ns_sim))
      .num("multipath_gain_median", bench::median(s_mp_gain))
      .num("plan_ms_64_sites", bench::median(ms64))
      .num("plan_cpu_ms_64_sites", bench::median(cpu64));
  uplinks_part(quick, json);
  json.print();
  return 0;
}
