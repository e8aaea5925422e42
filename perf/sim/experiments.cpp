#include "experiments.h"

#include <algorithm>
#include <chrono>

#include "compress/adaptive_policy.h"
#include "measure/link_estimator.h"
#include "topology/baselines.h"
#include "topology/fapt.h"
#include "topology/round_time.h"

namespace sg::simbench {

namespace {

// The simulator does not model aggregation CPU time (the gateway adds at tens of GB/s).
constexpr double kAggBps = 1e15;
constexpr Nanos kRoundLimit = 4 * 3600 * kSecond;

double wall() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint32_t max_msg(const Setup& s) { return std::max<uint32_t>(s.chunk_real + 56 + 16, 1200); }


}  // namespace

Setup make_setup(const sim::Scenario& sc, uint64_t model_wire, double mem_budget, int rounds) {
  Setup s;
  s.sc = &sc;
  s.n = sc.wan.n();
  s.model_wire = model_wire;
  s.rounds = rounds;
  while (static_cast<double>(s.n) * 2 * static_cast<double>(model_wire) / s.scale > mem_budget && s.scale < 128)
    s.scale *= 2;
  s.chunk_real = kWireChunk / s.scale;
  s.model_real = model_wire / s.scale / 4 * 4;
  s.local.assign(s.model_real / 4, 0.001f);
  return s;
}

const char* topo_name(Topo t) {
  switch (t) {
    case Topo::kStar: return "star";
    case Topo::kBlind: return "blind";
    case Topo::kFapt: return "fapt";
    case Topo::kFaptMultipath: return "fapt+mp";
  }
  return "?";
}

topo::Plan make_plan(const Setup& s, const topo::Network& net, Topo t) {
  topo::PlannerOptions opt;
  opt.chunk_bytes = s.chunk_real;
  switch (t) {
    case Topo::kStar: return topo::star_plan(net, s.model_real, s.chunk_real);
    case Topo::kBlind: return topo::blind_tree_plan(net, s.model_real, std::min(s.n, 8));
    case Topo::kFapt: opt.multipath = false; return topo::plan_fapt(net, s.model_real, opt);
    case Topo::kFaptMultipath: opt.multipath = true; return topo::plan_fapt(net, s.model_real, opt);
  }
  return {};
}

namespace {

ModeResult run_rounds(const Setup& s, sim::Wan& wan, sim::Cluster& c, const std::string& name) {
  ModeResult m;
  m.mode = name;
  const double t0 = wall();
  for (int r = 1; r <= s.rounds; ++r) {
    const sim::RoundResult rr = c.run_round(static_cast<uint32_t>(r), {s.local}, kRoundLimit);
    m.ok = rr.ok;
    m.seconds = rr.seconds;
    m.stats = rr.stats;
    if (!rr.ok) break;
  }
  m.wall_s = wall() - t0;
  m.events = wan.stats().events;
  return m;
}

}  // namespace

ModeResult run_sync(const Setup& s, const sim::WanSpec& w, const topo::Plan& plan, bool reliable,
                    const std::string& name) {
  sim::Wan wan(w, max_msg(s), s.scale);
  sim::Cluster c(wan, sim::make_sync_sites(s.n, s.chunk_real, reliable, w.seed));
  if (!sim::install_plan(c, plan, 1)) return ModeResult{name};
  return run_rounds(s, wan, c, name);
}

ModeResult run_ring(const Setup& s, const sim::WanSpec& w, const std::string& name) {
  const topo::Network net = sim::network_at(w, 0, s.scale, kAggBps);
  sim::Wan wan(w, max_msg(s), s.scale);
  sim::Cluster c(wan, sim::make_ring_sites(sim::best_ring(s.n, net.bw, net.rtt), s.chunk_real, s.model_real / 4, w.seed));
  return run_rounds(s, wan, c, name);
}

FluctResult run_fluctuation(const Setup& s, Awareness a, int rounds) {
  FluctResult out;
  out.mode = a == Awareness::kStuck     ? "stuck"
             : a == Awareness::kPassive ? "aware (passive)"
             : a == Awareness::kAware   ? "aware (passive+probes)"
                                        : "aware+compress";
  const int n = s.n;
  const sim::WanSpec w = sim::with_fluctuation(*s.sc);
  sim::Wan wan(w, max_msg(s), s.scale);
  sim::Cluster c(wan, sim::make_sync_sites(n, s.chunk_real, false, w.seed, {}, a == Awareness::kAwareCompress));
  // Both planners start from the same measurements, taken before the job starts.
  const topo::Network net0 = sim::network_at(w, 0, s.scale, kAggBps);
  topo::PlannerOptions opt;
  opt.chunk_bytes = s.chunk_real;
  opt.multipath = false;
  topo::Plan plan = topo::plan_fapt(net0, s.model_real, opt);
  uint32_t version = 1;
  sim::install_plan(c, plan, version);

  measure::EstimatorConfig ec;
  ec.sites = n;
  // Windows of a second of busy time: long enough to average over the rate controller's
  // startup and probing cycles of a multi-second transfer.
  ec.max_window = 1 * kSecond;
  measure::LinkEstimator est(ec);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) est.set_prior(static_cast<uint16_t>(i), static_cast<uint16_t>(j), net0.link_bw(i, j));
  std::vector<uint8_t> carried(static_cast<size_t>(n) * n, 0);
  // Every DATA arrival on a WAN hop is one sample of that link (relay hops included), in the
  // planner's byte units.
  // The RTT sample is this hop's one-way time plus the reverse propagation (what the ACK's
  // echo would measure); in-flight bytes are what the sender has on the link.
  wan.set_hop_observer([&](const sim::Wan::Hop& h) {
    if (!h.data) return;
    measure::ArrivalSample smp;
    smp.from = static_cast<uint16_t>(h.from);
    smp.to = static_cast<uint16_t>(h.to);
    smp.bytes = h.wire_bytes / s.scale;
    smp.at = h.at;
    // SiteSync's senders hold their whole shard from the start: never application-limited
    // while they send, so no in-flight figure is given (-1) and every busy window counts.
    smp.rtt = h.one_way + w.link(h.to, h.from).delay;
    est.on_arrival(smp);
    carried[static_cast<size_t>(h.from) * n + h.to] = 1;
  });
  std::vector<compress::AdaptivePolicy> policy(static_cast<size_t>(n) * n);
  int compressed = 0;
  uint64_t changes_seen = 0;

  for (int r = 1; r <= rounds; ++r) {
    std::fill(carried.begin(), carried.end(), 0);
    const sim::RoundResult rr = c.run_round(static_cast<uint32_t>(r), {s.local}, kRoundLimit);
    FluctRound fr;
    fr.start_s = static_cast<double>(rr.start) * 1e-9;
    fr.seconds = rr.seconds;
    fr.compressed_links = compressed;
    out.rounds.push_back(fr);  // replanned: set below if a new policy follows this round
    out.total_s += rr.seconds;
    if (a == Awareness::kStuck) continue;

    const Nanos now = wan.now();
    est.end_round(now);
    // Packet-pair probes (the design's optional low-rate probes: two chunk-sized packets back
    // to back, the gap gives the bottleneck rate): passive mode probes only the links that
    // carried nothing; probed mode probes every link once per round.
    std::vector<double> probe(static_cast<size_t>(n) * n, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>(i) * n + j;
        if (i == j || (a == Awareness::kPassive && carried[k])) continue;
        double rate = wan.link(i, j).rate_at(now);
        if (w.sites[i].egress_bytes_per_s > 0) rate = std::min(rate, w.sites[i].egress_bytes_per_s);
        if (w.sites[j].ingress_bytes_per_s > 0) rate = std::min(rate, w.sites[j].ingress_bytes_per_s);
        const Nanos gap = static_cast<Nanos>(static_cast<double>(kWireChunk) / rate * 1e9);
        probe[k] = static_cast<double>(s.chunk_real) / (static_cast<double>(gap) * 1e-9);
        est.on_probe_pair(static_cast<uint16_t>(i), static_cast<uint16_t>(j), s.chunk_real, gap, now);
      }
    // The planner's view. Passive: the estimator's figure per link (traffic when fresh, else
    // probe, else the prior). Probed: the larger of that and this round's probe, because a
    // traffic window on a link the plan does not saturate measures the plan's load on it, a
    // lower bound of its capacity, not the capacity.
    topo::Network net = net0;
    uint64_t changes = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) {
          const measure::LinkSummary e = est.summary(static_cast<uint16_t>(i), static_cast<uint16_t>(j), now);
          double v = e.bytes_per_s;
          if (a != Awareness::kPassive) v = std::max(v, probe[static_cast<size_t>(i) * n + j]);
          if (v > 0) net.link_bw(i, j) = v;
          changes += e.changes;
        }
    // Passive replanning is triggered by a change the estimator adopted (a step beyond its
    // threshold, confirmed by consecutive windows), as NetStorm recomputes on throughput
    // changes; probed replanning looks every round.
    const bool changed = changes != changes_seen || a != Awareness::kPassive;
    changes_seen = changes;
    if (changed) {
      topo::Plan next = topo::plan_fapt(net, s.model_real, opt);
      // A new policy only when it is clearly better on the current view.
      if (topo::round_time(net, next, s.chunk_real).total_s < 0.9 * topo::round_time(net, plan, s.chunk_real).total_s) {
        plan = next;
        sim::install_plan(c, plan, ++version);
        ++out.policy_switches;
        out.rounds.back().replanned = true;
      }
    }
    if (a != Awareness::kAwareCompress) continue;
    // NetSenseML per link on this round's measurements; the sites encode the link's DATA with
    // the chosen codec (lib/compress through SiteSync, error feedback included).
    std::vector<uint64_t> load(static_cast<size_t>(n) * n, 0);
    for (const auto& t : plan.shards)
      for (int v = 0; v < n; ++v)
        if (t.parent[v] != topo::kNoSite) {
          load[static_cast<size_t>(v) * n + t.parent[v]] += t.bytes();
          load[static_cast<size_t>(t.parent[v]) * n + v] += t.bytes();
        }
    compressed = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>(i) * n + j;
        if (i == j || load[k] == 0) continue;
        const measure::LinkSummary sum = est.summary(static_cast<uint16_t>(i), static_cast<uint16_t>(j), now);
        compress::LinkSample smp;
        smp.throughput_Bps = net.link_bw(i, j);  // the view: compressed traffic under-uses the link
        smp.rtt_ratio = sum.rtt_trend;
        smp.loss = sum.loss_rate;
        smp.bytes = load[k];
        smp.compute_time = static_cast<Nanos>(s.sc->compute_ms * 1e6);
        const compress::Decision d = policy[k].update(smp);
        if (d.changed) ++out.codec_switches;
        if (d.level > 0) ++compressed;
        auto* site = static_cast<sim::SyncParticipant*>(c.site(i));
        site->sync().set_link_codec(j, d.codec, d.codec == CodecId::kTopK ? d.topk_ratio : 0.01f);
      }
  }
  return out;
}

}  // namespace sg::simbench
