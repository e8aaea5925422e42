// The round-time comparisons of sim-sync: every mode per scenario and model size, LTP vs the
// reliable transport under loss, and multipath where a single tree leaves links idle.
#include <algorithm>
#include <cstdio>

#include "experiments.h"
#include "parts.h"
#include "topology/fapt.h"
#include "topology/round_time.h"

namespace sg::simbench {

namespace {
constexpr double kAggBps = 1e15;  // the simulator models no aggregation time
// Rounds per mode and how many of the last are reported (their median): the same rounds
// for every mode. The first rounds differ -- LTP has no RTT history yet, the ring's
// connection warms up, and the full stack starts from a bandwidth-blind plan and switches
// only once the policy protocol agreed on a measured one (a few rounds in).
constexpr int kRounds = 6, kReported = 3;
constexpr int kQuickRounds = 4, kQuickReported = 2;

std::vector<uint64_t> sizes(const PartArgs& a) {
  if (a.bytes) return {a.bytes};
  return a.quick ? std::vector<uint64_t>{16ull << 20} : std::vector<uint64_t>{100ull << 20, 1ull << 30};
}
}  // namespace

std::string size_name(uint64_t b) {
  return b >= (1ull << 30) ? bench::fmt(b / double(1ull << 30), "%.0f GB") : bench::fmt(b / double(1 << 20), "%.0f MB");
}

std::string figure_key(int sites, uint64_t bytes) {
  std::string s = size_name(bytes);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return std::to_string(sites) + "sites_" + s;
}

// PS, ring, blind tree (all reliable), stormgate FAPT and FAPT + multipath (LTP), and the
// full stack: FAPT + multipath + LTP with awareness (passive + probes) and NetSenseML's
// adaptive compression, whose reported round is its last (the rule decides on the rounds
// before).
void part_rounds(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r) {
  const int rounds = a.quick ? kQuickRounds : kRounds, reported = a.quick ? kQuickReported : kReported;
  std::printf("Round time per synchronisation round (virtual seconds; median of rounds %d-%d of every mode)\n",
              rounds - reported + 1, rounds);
  std::printf("baselines: reliable transport (AIMD, no Early Close), placed knowing the links' true rates (PS root,\n"
              "ring order: the strongest they can be); stormgate FAPT / FAPT+multipath: planned on the true rates too\n"
              "(oracle figures); the full stack: gateways' controller, measuring everything itself\n\n");
  r.md = "| scenario | sites | model | PS | ring | blind tree | FAPT | FAPT+multipath | full stack | vs PS | vs PS (FAPT only) | "
         "vs ring | multipath gain | links compressed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  JsonList rows;
  for (const auto& sc : scs) {
    const int n = sc.wan.n();
    for (uint64_t model : sizes(a)) {
      const Setup s = make_setup(sc, model, a.mem_budget, rounds, reported);
      const topo::Network net = sim::network_at(sc.wan, 0, s.scale, kAggBps);
      const topo::Plan star = make_plan(s, net, Topo::kStar);
      const topo::Plan fapt = make_plan(s, net, Topo::kFapt);
      const topo::Plan faptmp = make_plan(s, net, Topo::kFaptMultipath);
      std::vector<ModeResult> res;
      res.push_back(run_sync(s, sc.wan, star, true, "PS (star, reliable)"));
      res.push_back(run_ring(s, sc.wan, "ring all-reduce (reliable)"));
      res.push_back(run_sync(s, sc.wan, make_plan(s, net, Topo::kBlind), true, "blind tree (reliable)"));
      res.push_back(run_sync(s, sc.wan, fapt, false, "stormgate FAPT"));
      res.push_back(run_sync(s, sc.wan, faptmp, false, "stormgate FAPT+multipath"));
      StackOptions full;
      full.awareness = Awareness::kProbes;
      full.multipath = true;
      full.compress = true;
      const double t0 = bench::now_seconds();
      const StackResult st = run_stack(s, sc.wan, full, rounds, "stormgate full stack");
      ModeResult fs;
      fs.mode = st.mode;
      for (const auto& x : st.rounds) fs.round_s.push_back(x.seconds);
      fs.seconds = median_of_last(fs.round_s, reported);
      fs.ok = st.ok;
      fs.wall_s = bench::now_seconds() - t0;
      fs.stats = st.last;
      res.push_back(fs);
      const int compressed = st.rounds.back().compressed_links;
      // The same baselines on BBR-like connections, which do not back off on random loss (what
      // the testbed's gloo runs: wan-suite); beside the table, so its columns stay as they are.
      const ModeResult ps_bbr = run_sync(s, sc.wan, star, true, "PS (star, BBR)", sim::TcpCc::kBbr);
      const ModeResult ring_bbr = run_ring(s, sc.wan, "ring all-reduce (BBR)", sim::TcpCc::kBbr);

      const double ps = res[0].seconds, ring = res[1].seconds, blind = res[2].seconds;
      const double f_only = res[3].seconds, f_mp = res[4].seconds, stack = res[5].seconds;
      const double m_ps = topo::round_time(net, star, s.chunk_real).total_s;
      const double m_fapt = topo::round_time(net, fapt, s.chunk_real).total_s;
      const double m_mp = topo::round_time(net, faptmp, s.chunk_real).total_s;
      std::printf("%s: %d sites, model %s (simulated with %u-byte wire chunks, 1/%u of the floats real)\n", sc.name.c_str(),
                  n, size_name(model).c_str(), kWireChunk, s.scale);
      std::printf("  planner's predicted round time: FAPT %.3f s, FAPT+mp %.3f s (%zu splits), PS %.3f s\n", m_fapt, m_mp,
                  faptmp.splits.size(), m_ps);
      bench::Table t({"mode", "round s", "vs PS", "vs ring", "retx", "bubbles", "events", "wall s"});
      for (const auto& m : res)
        t.row({m.mode + (m.ok ? "" : " (DID NOT FINISH)"), bench::fmt(m.seconds, "%.3f"), bench::fmt(ps / m.seconds, "%.2f"),
               bench::fmt(ring / m.seconds, "%.2f"), std::to_string(m.stats.retransmits), std::to_string(m.stats.bubbles),
               m.events ? std::to_string(m.events) : "-", bench::fmt(m.wall_s, "%.1f")});
      t.print();
      std::string per_round;
      for (const auto& x : st.rounds) per_round += bench::fmt(x.seconds, " %.2f") + (x.replanned ? "*" : "");
      std::printf("  full stack: rounds%s s (* = ran a new policy), %d policy switches, %d links\n"
                  "  compressed by NetSenseML's rule in its last round (compute %.0f ms per round), probes %.1f MB\n",
                  per_round.c_str(), st.policy_switches, compressed, sc.compute_ms, st.probe_wire_bytes / 1e6);
      std::printf("  speedup vs PS %.2fx (FAPT only %.2fx), vs ring %.2fx, vs blind %.2fx; multipath gain %.2f; "
                  "FAPT simulated / modelled %.2f\n",
                  ps / stack, ps / f_only, ring / stack, blind / stack, f_only / f_mp, f_only / m_fapt);
      std::printf("  baselines on BBR-like connections: PS %.3f s%s, ring %.3f s%s: full stack %.2fx PS, %.2fx ring\n\n",
                  ps_bbr.seconds, ps_bbr.ok ? "" : " (DID NOT FINISH)", ring_bbr.seconds, ring_bbr.ok ? "" : " (DID NOT FINISH)",
                  ps_bbr.seconds / stack, ring_bbr.seconds / stack);

      r.md += "| " + sc.name + " | " + std::to_string(n) + " | " + size_name(model);
      for (const auto& m : res) r.md += " | " + bench::fmt(m.seconds, "%.2f s") + (m.ok ? "" : " (dnf)");
      r.md += " | " + bench::fmt(ps / stack, "%.2fx") + " | " + bench::fmt(ps / f_only, "%.2fx") + " | " +
              bench::fmt(ring / stack, "%.2fx") + " | " + bench::fmt(f_only / f_mp, "%.2f") + " | " + std::to_string(compressed) +
              " |\n";
      Json row;
      row.str("scenario", sc.name);
      row.num("sites", n);
      row.num("model_bytes", static_cast<double>(model));
      row.num("scale", s.scale);
      for (const auto& m : res) row.num(m.mode, m.seconds);
      row.num("model: PS", m_ps);
      row.num("model: FAPT", m_fapt);
      row.num("model: FAPT+multipath", m_mp);
      row.num("compressed_links", compressed);
      row.num(ps_bbr.mode, ps_bbr.seconds);
      row.num(ring_bbr.mode, ring_bbr.seconds);
      rows.add(row.done());

      // Keys with _oracle: plans made on the links' true rates, which no gateway knows.
      const std::string key = figure_key(n, model);
      r.fig["speedup_vs_ps_" + key] = ps / stack;
      r.fig["speedup_vs_ps_" + key + "_fapt_oracle"] = ps / f_only;
      r.fig["speedup_vs_ring_" + key] = ring / stack;
      r.fig["speedup_vs_ps_bbr_" + key] = ps_bbr.seconds / stack;
      r.fig["speedup_vs_ring_bbr_" + key] = ring_bbr.seconds / stack;
      r.fig["gain_multipath_" + key + "_oracle"] = f_only / f_mp;
      r.fig["compressed_links_" + key] = compressed;
      if (n == 8) {  // the headline figures: the largest model run at 8 sites
        r.fig["speedup_vs_ps_8sites"] = ps / stack;
        r.fig["speedup_vs_ps_8sites_fapt_oracle"] = ps / f_only;
        r.fig["speedup_vs_ring_8sites"] = ring / stack;
        r.fig["speedup_vs_ps_bbr_8sites"] = ps_bbr.seconds / stack;
        r.fig["speedup_vs_ring_bbr_8sites"] = ring_bbr.seconds / stack;
        r.fig["speedup_vs_blind_8sites"] = blind / stack;
        r.fig["gain_multipath_oracle"] = f_only / f_mp;
        r.fig["compressed_links_8sites"] = compressed;
        r.fig["model_speedup_vs_ps_8sites_oracle"] = m_ps / std::min(m_fapt, m_mp);
        r.fig["fapt_sim_over_model_8sites_oracle"] = f_only / m_fapt;
        r.fig["stack_policy_switches_8sites"] = st.policy_switches;
      }
    }
  }
  r.data.raw("main", rows.done());
}

// LTP with Early Close vs the reliable transport under 1% random loss, same FAPT plan.
void part_loss(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r) {
  std::printf("1%% random loss on every link: same FAPT plan, LTP (Early Close) vs reliable (NewReno; BBR-like)\n");
  bench::Table lt({"scenario", "model", "reliable s", "reliable BBR s", "LTP s", "gain", "gain vs BBR", "LTP bubbles",
                   "early closes", "fallbacks"});
  JsonList list;
  for (const auto& sc : scs) {
    if (sc.wan.n() > 16) continue;
    const uint64_t model = a.quick ? 16ull << 20 : 100ull << 20;
    const Setup s = make_setup(sc, model, a.mem_budget, 2);
    sim::WanSpec w = sc.wan;
    for (auto& l : w.links) l.loss = 0.01;
    const topo::Network net = sim::network_at(w, 0, s.scale, kAggBps);
    const topo::Plan plan = make_plan(s, net, Topo::kFapt);
    const ModeResult rel = run_sync(s, w, plan, true, "reliable");
    const ModeResult bbr = run_sync(s, w, plan, true, "reliable (BBR)", sim::TcpCc::kBbr);
    const ModeResult ltp = run_sync(s, w, plan, false, "ltp");
    const double g = rel.seconds / ltp.seconds;
    lt.row({sc.name, size_name(model), bench::fmt(rel.seconds, "%.3f"), bench::fmt(bbr.seconds, "%.3f"),
            bench::fmt(ltp.seconds, "%.3f"), bench::fmt(g, "%.2f"), bench::fmt(bbr.seconds / ltp.seconds, "%.2f"),
            std::to_string(ltp.stats.bubbles), std::to_string(ltp.stats.early_closes), std::to_string(ltp.stats.fallbacks)});
    Json j;
    j.str("scenario", sc.name);
    j.num("reliable_s", rel.seconds);
    j.num("reliable_bbr_s", bbr.seconds);
    j.num("ltp_s", ltp.seconds);
    j.num("bubbles", static_cast<double>(ltp.stats.bubbles));
    list.add(j.done());
    r.fig["gain_ltp_loss1_" + figure_key(sc.wan.n(), model)] = g;
    r.fig["gain_ltp_loss1_vs_bbr_" + figure_key(sc.wan.n(), model)] = bbr.seconds / ltp.seconds;
    if (sc.wan.n() == 8 || !r.fig.count("gain_ltp_loss1")) {
      r.fig["gain_ltp_loss1"] = g;
      r.fig["gain_ltp_loss1_vs_bbr"] = bbr.seconds / ltp.seconds;
    }
  }
  r.data.raw("loss1", list.done());
  lt.print();
  std::printf("\n");
}

// Multipath where idle links exist, as the gateways do it: the controller plans a single
// tree (topology.shards 1), probes the links the tree leaves idle, and adds relays over them
// (topology.multipath) -- against the same controller without multipath. Both measure
// everything themselves; the median of the same rounds is reported.
void part_idle_multipath(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r) {
  const int rounds = a.quick ? kQuickRounds : kRounds, reported = a.quick ? kQuickReported : kReported;
  std::printf("Multipath where idle links exist: one tree planned by the gateways' controller, LTP, without and "
              "with relays (median of rounds %d-%d)\n", rounds - reported + 1, rounds);
  bench::Table mt({"scenario", "model", "tree s", "tree+multipath s", "splits", "gain"});
  JsonList list;
  for (const auto& sc : scs) {
    const int n = sc.wan.n();
    if (n > 16) continue;
    for (uint64_t model : sizes(a)) {
      const Setup s = make_setup(sc, model, a.mem_budget, rounds, reported);
      StackOptions o;
      o.awareness = Awareness::kProbes;
      o.max_trees = 1;
      const StackResult t = run_stack(s, sc.wan, o, rounds, "tree");
      o.multipath = true;
      const StackResult m = run_stack(s, sc.wan, o, rounds, "tree+mp");
      auto med = [&](const StackResult& x) {
        std::vector<double> v;
        for (const auto& y : x.rounds) v.push_back(y.seconds);
        return median_of_last(v, reported);
      };
      const double ts = med(t), ms = med(m), g = ts / ms;
      const int splits = m.rounds.empty() ? 0 : m.rounds.back().splits;
      mt.row({sc.name, size_name(model), bench::fmt(ts, "%.3f"), bench::fmt(ms, "%.3f"), std::to_string(splits),
              bench::fmt(g, "%.2f")});
      Json j;
      j.str("scenario", sc.name);
      j.num("sites", n);
      j.num("model_bytes", static_cast<double>(model));
      j.num("tree_s", ts);
      j.num("tree_mp_s", ms);
      j.num("splits", splits);
      list.add(j.done());
      r.fig["gain_multipath_idle_" + figure_key(n, model)] = g;
      // Headline: the largest model on the scenario built for it (9 sites: every tree edge's
      // own WAN link is its bottleneck, relays stay on the continent); 8 sites without it.
      if (n == 9 || (n == 8 && !r.fig.count("gain_multipath_idle_9sites_1GB"))) r.fig["gain_multipath_idle_links"] = g;
    }
  }
  r.data.raw("idle_multipath", list.done());
  mt.print();
  std::printf("\n");
}

}  // namespace sg::simbench
