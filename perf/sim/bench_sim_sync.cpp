// sim-sync: the seed papers' comparisons, side by side, on the discrete-event WAN simulator
// running the real lib/ state machines (SiteSync, LTP sender/receiver, FAPT, passive
// estimator, NetSenseML policy). For each scenario and model size: round time of the
// MXNet-style parameter server (reliable), ring all-reduce (reliable), a bandwidth-blind tree
// (reliable), and stormgate (LTP) with FAPT, + multipath; then LTP vs reliable under 1%
// loss, passive awareness under fluctuation (vs a planner stuck with its first
// measurements), + adaptive compression, and one LTP transfer on a long fat pipe.
//
// Writes perf/results/sim-sync.{json,md} (full mode) for perf/sim/plot_sim.py.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "experiments.h"
#include "sim/single_transfer.h"
#include "topology/fapt.h"
#include "topology/multipath.h"
#include "topology/round_time.h"
#include "topology/selmcast.h"

using namespace sg;
using namespace sg::simbench;

namespace {

struct Args {
  bool quick = false;
  std::string scenarios, out;
  std::vector<std::string> only;
  std::string parts = "main,loss,idle,fluct,mcast,haul,64";  // which experiments to run
  bool want(const char* p) const { return parts.find(p) != std::string::npos; }
};

Args parse(int argc, char** argv) {
  Args a;
  const char* root = std::getenv("SG_ROOT");
  a.scenarios = std::string(root ? root : ".") + "/perf/scenarios";
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--scenarios" && i + 1 < argc) a.scenarios = argv[++i];
    else if (s == "--out" && i + 1 < argc) a.out = argv[++i];
    else if (s == "--only" && i + 1 < argc) a.only.push_back(argv[++i]);
    else if (s == "--parts" && i + 1 < argc) a.parts = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_sim_sync [--quick] [--scenarios DIR] [--out DIR] [--only FILE.yaml]... [--parts main,loss,idle,fluct,mcast,haul,64]\n");
      std::exit(2);
    }
  }
  if (a.out.empty() && !a.quick) a.out = std::string(root ? root : ".") + "/perf/results";
  return a;
}

std::string mb(uint64_t b) { return b >= (1ull << 30) ? bench::fmt(b / double(1ull << 30), "%.0f GB") : bench::fmt(b / double(1 << 20), "%.0f MB"); }

struct Json {
  std::string s = "{";
  bool first = true;
  void raw(const std::string& k, const std::string& v) {
    s += (first ? "" : ", ") + ("\"" + k + "\": ") + v;
    first = false;
  }
  void num(const std::string& k, double v) { raw(k, std::isfinite(v) ? bench::fmt(v, "%.6g") : "null"); }
  void str(const std::string& k, const std::string& v) { raw(k, "\"" + v + "\""); }
  std::string done() const { return s + "}"; }
};

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const double t_start = bench::now_seconds();
  const double mem_budget = 1.5e9;  // bytes of SiteSync buffers across all sites

  std::vector<std::string> files = args.quick ? std::vector<std::string>{"8-sites.yaml"}
                                              : std::vector<std::string>{"3-sites.yaml", "8-sites.yaml", "16-sites.yaml", "64-sites.yaml"};
  if (!args.only.empty()) files = args.only;
  std::vector<sim::Scenario> scenarios;
  for (const auto& f : files) {
    auto r = sim::load_scenario(args.scenarios + "/" + f);
    if (!r.scenario) {
      for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.c_str());
      return 1;
    }
    scenarios.push_back(std::move(*r.scenario));
  }

  bench::JsonLine line("sim-sync");
  Json data;  // everything, for the plots and the table
  std::string rows_json = "[";
  std::string md = "| scenario | sites | model | PS | ring | blind tree | FAPT | FAPT+multipath | vs PS | vs ring | multipath gain |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::map<std::string, double> fig;

  std::printf("Round time per synchronisation round (virtual seconds; second of %d rounds)\n", args.quick ? 1 : 2);
  std::printf("baselines: reliable transport (AIMD, no Early Close); stormgate: LTP (delivery-rate, Early Close)\n\n");
  for (const auto& sc : scenarios) {
    if (!args.want("main")) break;
    const int n = sc.wan.n();
    std::vector<uint64_t> sizes = args.quick ? std::vector<uint64_t>{16ull << 20}
                                             : std::vector<uint64_t>{100ull << 20, 1ull << 30};
    for (uint64_t model : sizes) {
      Setup s = make_setup(sc, model, mem_budget, args.quick ? 1 : 2);
      const topo::Network net = sim::network_at(sc.wan, 0, s.scale, 1e15);
      bench::Table t({"mode", "round s", "vs PS", "vs ring", "retx", "bubbles", "events", "wall s"});
      std::vector<ModeResult> res;
      res.push_back(run_sync(s, sc.wan, make_plan(s, net, Topo::kStar), true, "PS (star, reliable)"));
      res.push_back(run_ring(s, sc.wan, "ring all-reduce (reliable)"));
      res.push_back(run_sync(s, sc.wan, make_plan(s, net, Topo::kBlind), true, "blind tree (reliable)"));
      const topo::Plan fapt = make_plan(s, net, Topo::kFapt);
      const topo::Plan faptmp = make_plan(s, net, Topo::kFaptMultipath);
      res.push_back(run_sync(s, sc.wan, fapt, false, "stormgate FAPT"));
      res.push_back(run_sync(s, sc.wan, faptmp, false, "stormgate FAPT+multipath"));
      const double ps = res[0].seconds, ring = res[1].seconds;
      for (const auto& m : res)
        t.row({m.mode + (m.ok ? "" : " (DID NOT FINISH)"), bench::fmt(m.seconds, "%.3f"), bench::fmt(ps / m.seconds, "%.2f"),
               bench::fmt(ring / m.seconds, "%.2f"), std::to_string(m.stats.retransmits), std::to_string(m.stats.bubbles),
               std::to_string(m.events), bench::fmt(m.wall_s, "%.1f")});
      std::printf("%s: %d sites, model %s (simulated with %u-byte wire chunks, 1/%u of the floats real)\n",
                  sc.name.c_str(), n, mb(model).c_str(), kWireChunk, s.scale);
      std::printf("  planner's predicted round time: FAPT %.3f s, FAPT+mp %.3f s (%zu splits), PS %.3f s\n",
                  topo::round_time(net, fapt, s.chunk_real).total_s, topo::round_time(net, faptmp, s.chunk_real).total_s,
                  faptmp.splits.size(), topo::round_time(net, make_plan(s, net, Topo::kStar), s.chunk_real).total_s);
      t.print();
      const double best = std::min(res[3].seconds, res[4].seconds);
      const double g_mp = res[3].seconds / res[4].seconds;
      std::printf("  speedup vs PS %.2fx, vs ring %.2fx, vs blind %.2fx; multipath gain %.2f\n\n", ps / res[4].seconds,
                  ring / res[4].seconds, res[2].seconds / res[4].seconds, g_mp);
      (void)best;
      md += "| " + sc.name + " | " + std::to_string(n) + " | " + mb(model);
      for (const auto& m : res) md += " | " + bench::fmt(m.seconds, "%.2f s") + (m.ok ? "" : " (dnf)");
      md += " | " + bench::fmt(ps / res[4].seconds, "%.2fx") + " | " + bench::fmt(ring / res[4].seconds, "%.2fx") + " | " +
            bench::fmt(g_mp, "%.2f") + " |\n";
      Json row;
      row.str("scenario", sc.name);
      row.num("sites", n);
      row.num("model_bytes", static_cast<double>(model));
      row.num("scale", s.scale);
      for (const auto& m : res) row.num(m.mode, m.seconds);
      row.num("model: PS", topo::round_time(net, make_plan(s, net, Topo::kStar), s.chunk_real).total_s);
      row.num("model: FAPT+multipath", topo::round_time(net, faptmp, s.chunk_real).total_s);
      rows_json += (rows_json.size() > 1 ? ", " : "") + row.done();
      const std::string key = std::to_string(n) + "sites_" + (model >= (1ull << 30) ? "1GB" : mb(model).substr(0, mb(model).find(' ')) + "MB");
      fig["speedup_vs_ps_" + key] = ps / res[4].seconds;
      fig["speedup_vs_ring_" + key] = ring / res[4].seconds;
      fig["gain_multipath_" + key] = g_mp;
      if (n == 8) {  // the headline figures: the largest model run at 8 sites
        fig["speedup_vs_ps_8sites"] = ps / res[4].seconds;
        fig["speedup_vs_ring_8sites"] = ring / res[4].seconds;
        fig["speedup_vs_blind_8sites"] = res[2].seconds / res[4].seconds;
        fig["gain_multipath"] = g_mp;
      }
      fig["gain_multipath_max"] = std::max(fig["gain_multipath_max"], g_mp);
    }
  }
  rows_json += "]";
  data.raw("main", rows_json);

  // LTP with Early Close vs the reliable transport under 1% random loss, same FAPT plan.
  std::printf("1%% random loss on every link: same FAPT plan, LTP (Early Close) vs reliable (AIMD)\n");
  bench::Table lt({"scenario", "model", "reliable s", "LTP s", "gain", "LTP bubbles", "early closes", "fallbacks"});
  std::string loss_json = "[";
  for (const auto& sc : scenarios) {
    if (sc.wan.n() > 16 || !args.want("loss")) continue;
    const uint64_t model = args.quick ? 16ull << 20 : 100ull << 20;
    Setup s = make_setup(sc, model, mem_budget, args.quick ? 1 : 2);
    sim::WanSpec w = sc.wan;
    for (auto& l : w.links) l.loss = 0.01;
    const topo::Network net = sim::network_at(w, 0, s.scale, 1e15);
    const topo::Plan plan = make_plan(s, net, Topo::kFapt);
    const ModeResult rel = run_sync(s, w, plan, true, "reliable");
    const ModeResult ltp = run_sync(s, w, plan, false, "ltp");
    const double g = rel.seconds / ltp.seconds;
    lt.row({sc.name, mb(model), bench::fmt(rel.seconds, "%.3f"), bench::fmt(ltp.seconds, "%.3f"), bench::fmt(g, "%.2f"),
            std::to_string(ltp.stats.bubbles), std::to_string(ltp.stats.early_closes), std::to_string(ltp.stats.fallbacks)});
    Json j;
    j.str("scenario", sc.name);
    j.num("reliable_s", rel.seconds);
    j.num("ltp_s", ltp.seconds);
    j.num("bubbles", static_cast<double>(ltp.stats.bubbles));
    loss_json += (loss_json.size() > 1 ? ", " : "") + j.done();
    if (sc.wan.n() == 8 || !fig.count("gain_ltp_loss1")) fig["gain_ltp_loss1"] = g;
  }
  loss_json += "]";
  data.raw("loss1", loss_json);
  lt.print();
  std::printf("\n");

  // Multipath where idle links exist: one FAPT tree (max_shards 1) uses n-1 of the n(n-1)
  // links each way; the same tree with relays over idle links, both on LTP.
  std::printf("Multipath where idle links exist: a single FAPT tree, LTP, without and with relays\n");
  bench::Table mt({"scenario", "model", "tree s", "tree+multipath s", "splits", "gain"});
  for (const auto& sc : scenarios) {
    if (sc.wan.n() > 16 || !args.want("idle")) continue;
    const uint64_t model = args.quick ? 16ull << 20 : 100ull << 20;
    Setup s = make_setup(sc, model, mem_budget, args.quick ? 1 : 2);
    const topo::Network net = sim::network_at(sc.wan, 0, s.scale, 1e15);
    topo::PlannerOptions opt;
    opt.chunk_bytes = s.chunk_real;
    opt.max_shards = 1;
    opt.multipath = false;
    const topo::Plan star = topo::plan_fapt(net, s.model_real, opt);
    topo::Plan split = star;
    const int splits = topo::add_multipath(net, split, opt.max_relays, s.chunk_real);
    const ModeResult a = run_sync(s, sc.wan, star, false, "star");
    const ModeResult b = run_sync(s, sc.wan, split, false, "star+mp");
    const double g = a.seconds / b.seconds;
    mt.row({sc.name, mb(model), bench::fmt(a.seconds, "%.3f"), bench::fmt(b.seconds, "%.3f"), std::to_string(splits),
            bench::fmt(g, "%.2f")});
    if (sc.wan.n() == 8 || !fig.count("gain_multipath_idle_links")) fig["gain_multipath_idle_links"] = g;
  }
  mt.print();
  std::printf("\n");

  // Passive awareness under fluctuation, and adaptive compression on top.
  std::string fl_json = "[";
  for (const auto& sc : scenarios) {
    // The 8-site scenario is the headline (others only when asked for with --only).
    if (sc.fluctuation.empty() || !args.want("fluct") || (args.only.empty() && sc.wan.n() != 8)) continue;
    const uint64_t model = args.quick ? 16ull << 20 : 100ull << 20;
    const int rounds = args.quick ? 6 : 40;
    Setup s = make_setup(sc, model, mem_budget, 1);
    std::printf("Fluctuation (%s, %s, %d rounds back to back; traces from the scenario's 'fluctuation')\n",
                sc.name.c_str(), mb(model).c_str(), rounds);
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
      for (const auto& r : f.rounds)
        series += (series.size() > 1 ? ", " : "") + std::string("[") + bench::fmt(r.start_s, "%.4f") + ", " + bench::fmt(r.seconds, "%.4f") +
                  ", " + (r.replanned ? "1" : "0") + ", " + std::to_string(r.compressed_links) + "]";
      j.raw(f.mode, series + "]");
    }
    fl_json += (fl_json.size() > 1 ? ", " : "") + j.done();
    if (sc.wan.n() == 8 || !fig.count("gain_awareness_fluct")) {
      fig["gain_awareness_passive_only_fluct"] = fr[0].total_s / fr[1].total_s;
      fig["gain_awareness_fluct"] = fr[0].total_s / fr[2].total_s;
      fig["gain_compression_fluct"] = fr[2].total_s / fr[3].total_s;
      fig["policy_switches"] = fr[2].policy_switches;
    }
  }
  fl_json += "]";
  data.raw("fluctuation", fl_json);

  // SelMCast (peer-to-peer mode: every site multicasts its update to p receivers) on the
  // scenarios' networks: lib/topology's selection vs p random receivers, scored by its own
  // model (fair-share rates under the site caps, finish = delay + bytes / rate). A model
  // figure, not packet-level: SiteSync has no peer-to-peer mode to drive yet.
  if (args.want("mcast")) {
    std::printf("SelMCast (model, not packet-level): 25 MB updates, p = 3, BSP, budget = 2 s\n");
    bench::Table ct({"scenario", "selmcast mean p", "random mean p", "selmcast round s", "random round s"});
    for (const auto& sc : scenarios) {
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
        const auto r = topo::score_selection(in, prm, topo::random_receivers(in, prm, rng));
        rp += r.mean_p / 20;
        rt += r.round_time_s / 20;
      }
      ct.row({sc.name, bench::fmt(sel.mean_p, "%.2f"), bench::fmt(rp, "%.2f"), bench::fmt(sel.round_time_s, "%.2f"),
              bench::fmt(rt, "%.2f")});
      if (n == 8 || !fig.count("selmcast_mean_p_8sites")) {
        fig["selmcast_mean_p_8sites"] = sel.mean_p;
        fig["random_mean_p_8sites"] = rp;
      }
    }
    ct.print();
    std::printf("\n");
  }

  // One transfer on a long fat pipe.
  if (args.want("haul")) {
    sim::LinkSpec l;
    l.bytes_per_s = 125e6;
    l.delay = 75 * kMilli;
    l.queue_bytes = 4u << 20;
    l.loss = 1e-4;
    sim::LinkSpec back = l;
    back.loss = 0;
    const uint64_t bytes = args.quick ? 256ull << 20 : 1ull << 30;
    const auto ltp = sim::run_single_transfer(l, back, bytes, 8000, false, 11);
    const auto tcp = sim::run_single_transfer(l, back, bytes, 8000, true, 11);
    std::printf("One transfer, 1 Gbit/s, 150 ms RTT, 0.2 BDP buffer, 0.01%% loss, %s in 8000-byte chunks\n", mb(bytes).c_str());
    bench::Table ht({"transport", "seconds", "goodput Mbit/s", "utilisation", "retransmits"});
    ht.row({"LTP (delivery rate)", bench::fmt(ltp.seconds, "%.2f"), bench::fmt(ltp.goodput_Bps * 8e-6, "%.0f"),
            bench::fmt(ltp.utilisation, "%.3f"), std::to_string(ltp.retransmits)});
    ht.row({"reliable AIMD (TCP-like)", bench::fmt(tcp.seconds, "%.2f"), bench::fmt(tcp.goodput_Bps * 8e-6, "%.0f"),
            bench::fmt(tcp.utilisation, "%.3f"), std::to_string(tcp.retransmits)});
    ht.print();
    std::printf("\n");
    fig["longhaul_ltp_utilisation"] = ltp.utilisation;
    fig["longhaul_aimd_utilisation"] = tcp.utilisation;
  }

  // Simulator speed: 10 rounds at 64 sites.
  if (args.want("64")) {
    auto r = sim::load_scenario(args.scenarios + "/64-sites.yaml");
    if (r.scenario) {
      const uint64_t model = args.quick ? 4ull << 20 : 1ull << 30;
      const int rounds = args.quick ? 2 : 10;
      Setup s = make_setup(*r.scenario, model, mem_budget, rounds);
      const topo::Network net = sim::network_at(r.scenario->wan, 0, s.scale, 1e15);
      const double t0 = bench::now_seconds();
      const topo::Plan plan = make_plan(s, net, Topo::kFaptMultipath);
      const double plan_s = bench::now_seconds() - t0;
      const ModeResult m = run_sync(s, r.scenario->wan, plan, false, "64");
      std::printf("64 sites, %s model, %d rounds of stormgate FAPT+multipath: %.1f s wall (%.2f s planning), "
                  "%.3f s virtual per round, %lu events (%.2f M events/s)\n\n",
                  mb(model).c_str(), rounds, m.wall_s + plan_s, plan_s, m.seconds, (unsigned long)m.events,
                  m.events / m.wall_s * 1e-6);
      fig["sim_seconds_64sites"] = m.wall_s + plan_s;
      fig["sim_64sites_model_MB"] = static_cast<double>(model >> 20);
      fig["sim_64sites_virtual_round_s"] = m.seconds;
      fig["sim_64sites_rounds"] = rounds;
      fig["sim_events_per_s"] = m.events / m.wall_s;
    }
  }

  for (const auto& [k, v] : fig) {
    line.num(k, v);
    data.num(k, v);
  }
  line.num("wall_s", bench::now_seconds() - t_start);
  line.str("mode", args.quick ? "quick" : "full");
  if (!args.out.empty()) {
    std::filesystem::create_directories(args.out);
    std::ofstream(args.out + "/sim-sync.json") << data.done() << "\n";
    std::ofstream(args.out + "/sim-sync.md") << md;
    std::printf("wrote %s/sim-sync.json and sim-sync.md\n", args.out.c_str());
  }
  line.print();
  return 0;
}
