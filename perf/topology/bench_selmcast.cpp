// selmcast: receiver selection from the global bandwidth/load view vs p random receivers,
// for BSP and SSP.
//   model  random heterogeneous instances scored by the selection's own model (selmcast.h),
//          the selection fed the instances' true rates: keys *_model_oracle.
//   sim    the peer-to-peer mode itself (sync::PeerSync, what a gateway runs) in the WAN
//          simulator, the selection made from what the sites measured: keys *_sim.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "selmcast_sim.h"
#include "topology/selmcast.h"

using namespace sg;
using namespace sg::topo;

namespace {

// Pair throughput log-uniform 50 Mbit/s..10 Gbit/s, RTT 5..150 ms, site up/downlinks
// log-uniform 1..10 Gbit/s, updates ready 0..0.2 s into the round with 10% stragglers
// (+0.5..1.5 s), 25 MB updates, 1 s budget.
McastInstance random_instance(int n, Rng& rng) {
  McastInstance in;
  in.n = n;
  in.bw.assign(n * n, 0);
  in.rtt.assign(n * n, 0);
  auto logu = [&](double lo, double hi) { return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * rng.uniform()); };
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const double base = logu(50e6 / 8, 10e9 / 8);
      in.bw[i * n + j] = base * (0.5 + 0.5 * rng.uniform());
      in.bw[j * n + i] = base * (0.5 + 0.5 * rng.uniform());
      in.rtt[i * n + j] = in.rtt[j * n + i] = 0.005 + 0.145 * rng.uniform();
    }
  for (int i = 0; i < n; ++i) {
    in.out_cap.push_back(logu(1e9 / 8, 10e9 / 8));
    in.in_cap.push_back(logu(1e9 / 8, 10e9 / 8));
    in.ready.push_back(0.2 * rng.uniform() + (rng.chance(0.1) ? 0.5 + rng.uniform() : 0.0));
  }
  in.update_bytes = 25e6;
  in.budget_s = 1.0;
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) quick = quick || std::strcmp(argv[i], "--quick") == 0;
  const int instances = quick ? 4 : 20;
  const int draws = quick ? 5 : 20;  // random selections averaged per instance
  Rng rng(77);
  bench::Table t({"sites", "mode", "p", "selective mean p", "random mean p", "ratio", "round s sel", "round s rnd"});
  double sum_sel = 0, sum_rnd = 0, sum_sel_bsp = 0, sum_rnd_bsp = 0, sum_sel_ssp = 0, sum_rnd_ssp = 0;
  std::vector<double> round_ratio;
  double sel_ms = 0;
  int sel_calls = 0;
  for (int n : {16, 32}) {
    std::vector<McastInstance> inst;
    for (int k = 0; k < instances; ++k) inst.push_back(random_instance(n, rng));
    for (int mode = 0; mode < 2; ++mode)
      for (int p : {2, 4, 8}) {
        const McastParams prm{p, mode ? SyncMode::kSsp : SyncMode::kBsp, mode ? 2 : 0};
        double s_p = 0, r_p = 0;
        std::vector<double> s_rt, r_rt;
        for (const McastInstance& in : inst) {
          const double t0 = bench::now_seconds();
          const Selection sel = select_receivers(in, prm);
          sel_ms += (bench::now_seconds() - t0) * 1e3;
          ++sel_calls;
          const McastScore s = score_selection(in, prm, sel);
          s_p += s.mean_p;
          s_rt.push_back(s.round_time_s);
          double rp = 0;
          std::vector<double> rts;
          for (int d = 0; d < draws; ++d) {
            const McastScore r = score_selection(in, prm, random_receivers(in, prm, rng));
            rp += r.mean_p / draws;
            rts.push_back(r.round_time_s);
          }
          r_p += rp;
          r_rt.push_back(bench::median(rts));
          if (prm.mode == SyncMode::kBsp) round_ratio.push_back(bench::median(rts) / s.round_time_s);
        }
        s_p /= instances;
        r_p /= instances;
        sum_sel += s_p;
        sum_rnd += r_p;
        (mode ? sum_sel_ssp : sum_sel_bsp) += s_p;
        (mode ? sum_rnd_ssp : sum_rnd_bsp) += r_p;
        t.row({std::to_string(n), mode ? "SSP s=2" : "BSP", std::to_string(p), bench::fmt(s_p, "%.2f"),
               bench::fmt(r_p, "%.2f"), bench::fmt(s_p / r_p, "%.2f"), bench::fmt(bench::median(s_rt), "%.2f"),
               bench::fmt(bench::median(r_rt), "%.2f")});
      }
  }
  t.print();
  std::printf("selection time: %.2f ms per call (mean)\n", sel_ms / sel_calls);
  // The mode itself in the simulator: 8 sites, p = 2, BSP and SSP (s = 2), alternated.
  const int rounds = quick ? 3 : 6, alternations = quick ? 2 : 3;
  bench::Table st({"mode", "SelMCast s/round", "random s/round", "ratio", "SelMCast mean p", "random mean p",
                   "load-blind s/round", "load-blind mean p"});
  sg::bench::PeerSimResult sim[2];
  for (int mode = 0; mode < 2; ++mode) {
    sim[mode] = sg::bench::run_peer_sim(8, 2, mode ? 2 : 0, rounds, alternations, 2026 + mode);
    const auto& r = sim[mode];
    st.row({mode ? "SSP s=2" : "BSP", bench::fmt(r.sel_round_s, "%.3f"), bench::fmt(r.rnd_round_s, "%.3f"),
            bench::fmt(r.sel_round_s / r.rnd_round_s, "%.2f"), bench::fmt(r.sel_mean_p, "%.2f"),
            bench::fmt(r.rnd_mean_p, "%.2f"), bench::fmt(r.blind_round_s, "%.3f"), bench::fmt(r.blind_mean_p, "%.2f")});
  }
  std::printf("\npeer-to-peer mode (sync::PeerSync) in the WAN simulator, 8 sites, p = 2, selection from measured rates and loads:\n");
  st.print();
  // A compute straggler (one site's workers 20x slower, 1-3 s per update): its load sets the
  // round, and the selection that knows it fills the others' idle links with receivers.
  bench::Table lt(
      {"mode", "SelMCast s/round", "load-blind s/round", "ratio", "SelMCast mean p", "load-blind mean p", "random mean p"});
  sg::bench::PeerSimResult slow[2];
  for (int mode = 0; mode < 2; ++mode) {
    slow[mode] = sg::bench::run_peer_sim(8, 2, mode ? 2 : 0, rounds, alternations, 2026 + mode, 20);
    const auto& r = slow[mode];
    lt.row({mode ? "SSP s=2" : "BSP", bench::fmt(r.sel_round_s, "%.3f"), bench::fmt(r.blind_round_s, "%.3f"),
            bench::fmt(r.sel_round_s / r.blind_round_s, "%.2f"), bench::fmt(r.sel_mean_p, "%.2f"),
            bench::fmt(r.blind_mean_p, "%.2f"), bench::fmt(r.rnd_mean_p, "%.2f")});
  }
  std::printf("\nthe same with a compute straggler (one site 20x slower):\n");
  lt.print();
  bench::JsonLine("selmcast")
      .num("mean_p_ratio_vs_random_sim", sim[0].sel_mean_p / sim[0].rnd_mean_p)
      .num("round_time_ratio_vs_random_sim", sim[0].sel_round_s / sim[0].rnd_round_s)
      .num("mean_p_ratio_vs_random_sim_ssp", sim[1].sel_mean_p / sim[1].rnd_mean_p)
      .num("round_time_ratio_vs_random_sim_ssp", sim[1].sel_round_s / sim[1].rnd_round_s)
      .num("mean_p_ratio_vs_load_blind_sim", sim[0].sel_mean_p / sim[0].blind_mean_p)
      .num("round_time_ratio_vs_load_blind_sim", sim[0].sel_round_s / sim[0].blind_round_s)
      .num("mean_p_ratio_vs_load_blind_sim_ssp", sim[1].sel_mean_p / sim[1].blind_mean_p)
      .num("round_time_ratio_vs_load_blind_sim_ssp", sim[1].sel_round_s / sim[1].blind_round_s)
      .num("mean_p_ratio_vs_load_blind_straggler_sim", slow[0].sel_mean_p / slow[0].blind_mean_p)
      .num("round_time_ratio_vs_load_blind_straggler_sim", slow[0].sel_round_s / slow[0].blind_round_s)
      .num("mean_p_ratio_vs_load_blind_straggler_sim_ssp", slow[1].sel_mean_p / slow[1].blind_mean_p)
      .num("round_time_ratio_vs_load_blind_straggler_sim_ssp", slow[1].sel_round_s / slow[1].blind_round_s)
      .num("mean_p_ratio_vs_random_model_oracle", sum_sel / sum_rnd)
      .num("mean_p_ratio_vs_random_bsp_model_oracle", sum_sel_bsp / sum_rnd_bsp)
      .num("mean_p_ratio_vs_random_ssp_model_oracle", sum_sel_ssp / sum_rnd_ssp)
      .num("round_time_speedup_vs_random_bsp_model_oracle", bench::median(round_ratio))
      .print();
  return 0;
}
