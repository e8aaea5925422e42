// The other parts of sim-sync: awareness (and compression) under fluctuation, SelMCast's
// receiver selection, one transfer on a long fat pipe, and the simulator's own speed.
#include <cstdio>

#include "common/rng.h"
#include "experiments.h"
#include "parts.h"
#include "sim/single_transfer.h"
#include "topology/selmcast.h"

namespace sg::simbench {

// Rounds back to back on the scenario's fluctuation traces: a planner stuck with its first
// measurements vs replanning on lib/measure's passive estimates, on those plus a probe per
// link and round, and NetSenseML compression on top.
void part_fluctuation(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r) {
  JsonList list;
  for (const auto& sc : scs) {
    // The 8-site scenario is the headline (others only when asked for with --only).
    if (sc.fluctuation.empty() || (!a.only && sc.wan.n() != 8)) continue;
    const uint64_t model = a.quick ? 16ull << 20 : 100ull << 20;
    const int rounds = a.quick ? 6 : 40;
    const Setup s = make_setup(sc, model, a.mem_budget, 1);
    std::printf("Fluctuation (%s, %s, %d rounds back to back; traces from the scenario's 'fluctuation')\n",
                sc.name.c_str(), size_name(model).c_str(), rounds);
    bench::Table ft({"planner", "total s", "mean round s", "policy switches", "codec switches", "gain vs stuck"});
    std::vector<StackResult> fr;
    fr.push_back(run_fluctuation(s, Awareness::kStuck, false, rounds));
    fr.push_back(run_fluctuation(s, Awareness::kPassive, false, rounds));
    fr.push_back(run_fluctuation(s, Awareness::kProbes, false, rounds));
    fr.push_back(run_fluctuation(s, Awareness::kProbes, true, rounds));
    for (const auto& f : fr)
      ft.row({f.mode, bench::fmt(f.total_s, "%.2f"), bench::fmt(f.total_s / rounds, "%.3f"), std::to_string(f.policy_switches),
              std::to_string(f.codec_switches), bench::fmt(fr[0].total_s / f.total_s, "%.2f")});
    ft.print();
    std::printf("\n");
    Json j;
    j.str("scenario", sc.name);
    for (const auto& f : fr) {
      std::string series = "[";
      for (const auto& x : f.rounds)
        series += (series.size() > 1 ? ", " : "") + std::string("[") + bench::fmt(x.start_s, "%.4f") + ", " + bench::fmt(x.seconds, "%.4f") +
                  ", " + (x.replanned ? "1" : "0") + ", " + std::to_string(x.compressed_links) + "]";
      j.raw(f.mode, series + "]");
    }
    list.add(j.done());
    if (sc.wan.n() == 8 || !r.fig.count("gain_awareness_fluct")) {
      r.fig["gain_awareness_passive_only_fluct"] = fr[0].total_s / fr[1].total_s;
      r.fig["gain_awareness_fluct"] = fr[0].total_s / fr[2].total_s;
      r.fig["gain_compression_fluct"] = fr[2].total_s / fr[3].total_s;
      r.fig["policy_switches"] = fr[2].policy_switches;
    }
  }
  r.data.raw("fluctuation", list.done());
}

// SelMCast (peer-to-peer mode: every site multicasts its update to p receivers) on the
// scenarios' networks: lib/topology's selection vs p random receivers, scored by its own
// model (fair-share rates under the site caps, finish = delay + bytes / rate). A model
// figure, not packet-level: SiteSync has no peer-to-peer mode to drive yet. It selects on the
// links' true rates, so its keys carry _oracle.
void part_selmcast(const std::vector<sim::Scenario>& scs, Report& r) {
  std::printf("SelMCast (model, not packet-level): 25 MB updates, p = 3, BSP, budget = 2 s\n");
  bench::Table ct({"scenario", "selmcast mean p", "random mean p", "selmcast round s", "random round s"});
  for (const auto& sc : scs) {
    const int n = sc.wan.n();
    const topo::Network net = sim::network_at(sc.wan, 0, 1, 1e15);
    topo::McastInstance in;
    in.n = n;
    in.bw = net.bw;
    in.rtt = net.rtt;
    for (const auto& site : sc.wan.sites) {
      in.out_cap.push_back(site.egress_bytes_per_s > 0 ? site.egress_bytes_per_s : 1.25e9);
      in.in_cap.push_back(site.ingress_bytes_per_s > 0 ? site.ingress_bytes_per_s : 1.25e9);
    }
    in.ready.assign(n, 0.0);
    in.update_bytes = 25e6;
    in.budget_s = 2.0;
    topo::McastParams prm;
    prm.p = 3;
    const auto sel = topo::score_selection(in, prm, topo::select_receivers(in, prm));
    Rng rng(7);
    double rp = 0, rt = 0;
    for (int k = 0; k < 20; ++k) {
      const auto x = topo::score_selection(in, prm, topo::random_receivers(in, prm, rng));
      rp += x.mean_p / 20;
      rt += x.round_time_s / 20;
    }
    ct.row({sc.name, bench::fmt(sel.mean_p, "%.2f"), bench::fmt(rp, "%.2f"), bench::fmt(sel.round_time_s, "%.2f"),
            bench::fmt(rt, "%.2f")});
    if (n == 8 || !r.fig.count("selmcast_mean_p_8sites_oracle")) {
      r.fig["selmcast_mean_p_8sites_oracle"] = sel.mean_p;
      r.fig["random_mean_p_8sites_oracle"] = rp;
    }
  }
  ct.print();
  std::printf("\n");
}

// One LTP transfer on a long fat pipe vs the TCP-like baseline.
void part_long_haul(const PartArgs& a, Report& r) {
  sim::LinkSpec l;
  l.bytes_per_s = 125e6;
  l.delay = 75 * kMilli;
  l.queue_bytes = 4u << 20;
  l.loss = 1e-4;
  sim::LinkSpec back = l;
  back.loss = 0;
  const uint64_t bytes = a.quick ? 256ull << 20 : 1ull << 30;
  const auto ltp = sim::run_single_transfer(l, back, bytes, 8000, false, 11);
  const auto tcp = sim::run_single_transfer(l, back, bytes, 8000, true, 11);
  std::printf("One transfer, 1 Gbit/s, 150 ms RTT, 0.2 BDP buffer, 0.01%% loss, %s in 8000-byte chunks\n", size_name(bytes).c_str());
  bench::Table ht({"transport", "seconds", "goodput Mbit/s", "utilisation", "retransmits"});
  ht.row({"LTP (delivery rate)", bench::fmt(ltp.seconds, "%.2f"), bench::fmt(ltp.goodput_Bps * 8e-6, "%.0f"),
          bench::fmt(ltp.utilisation, "%.3f"), std::to_string(ltp.retransmits)});
  ht.row({"reliable AIMD (TCP-like)", bench::fmt(tcp.seconds, "%.2f"), bench::fmt(tcp.goodput_Bps * 8e-6, "%.0f"),
          bench::fmt(tcp.utilisation, "%.3f"), std::to_string(tcp.retransmits)});
  ht.print();
  std::printf("\n");
  r.fig["longhaul_ltp_utilisation"] = ltp.utilisation;
  r.fig["longhaul_aimd_utilisation"] = tcp.utilisation;
}

// Simulator speed: 10 rounds of 64 sites on a FAPT+multipath plan made from the true rates (the
// traffic to simulate; the figure is the simulator's wall time, the round time is _oracle).
void part_speed(const PartArgs& a, Report& r) {
  const auto ld = sim::load_scenario(a.scenarios + "/64-sites.yaml");
  if (ld.scenario) {
    const uint64_t model = a.quick ? 4ull << 20 : 1ull << 30;
    const int rounds = a.quick ? 2 : 10;
    const Setup s = make_setup(*ld.scenario, model, a.mem_budget, rounds);
    const topo::Network net = sim::network_at(ld.scenario->wan, 0, s.scale, 1e15);
    const double t0 = bench::now_seconds();
    const topo::Plan plan = make_plan(s, net, Topo::kFaptMultipath);
    const double plan_s = bench::now_seconds() - t0;
    const ModeResult m = run_sync(s, ld.scenario->wan, plan, false, "64");
    std::printf("64 sites, %s model, %d rounds of stormgate FAPT+multipath: %.1f s wall (%.2f s planning), "
                "%.3f s virtual per round, %lu events (%.2f M events/s)\n\n",
                size_name(model).c_str(), rounds, m.wall_s + plan_s, plan_s, m.seconds, (unsigned long)m.events,
                m.events / m.wall_s * 1e-6);
    r.fig["sim_seconds_64sites"] = m.wall_s + plan_s;
    r.fig["sim_64sites_model_MB"] = static_cast<double>(model >> 20);
    r.fig["sim_64sites_virtual_round_s_oracle"] = m.seconds;
    r.fig["sim_64sites_rounds"] = rounds;
    r.fig["sim_events_per_s"] = m.events / m.wall_s;
  }
}

}  // namespace sg::simbench
