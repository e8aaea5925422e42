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

StackResult run_stack(const Setup& s, const sim::WanSpec& w, const StackOptions& o, int rounds,
                      const std::string& name) {
  StackResult out;
  out.mode = name;
  const int n = s.n;
  sim::Wan wan(w, max_msg(s), s.scale);
  sim::Cluster c(wan, sim::make_sync_sites(n, s.chunk_real, false, w.seed, {}, o.compress));
  // Every planner starts from the same measurements, taken before the job starts.
  const topo::Network net0 = sim::network_at(w, 0, s.scale, kAggBps);
  topo::PlannerOptions opt;
  opt.chunk_bytes = s.chunk_real;
  opt.multipath = o.multipath;
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
      if (i != j)
        est.set_prior(static_cast<uint16_t>(i), static_cast<uint16_t>(j), net0.link_bw(i, j),
                      static_cast<Nanos>(net0.rtt[static_cast<size_t>(i) * n + j] * 1e9));
  std::vector<uint8_t> carried(static_cast<size_t>(n) * n, 0);
  // Every DATA arrival on a WAN hop is one sample of that link (relay hops included), in the
  // planner's byte units. The RTT sample is this hop's one-way time plus the reverse
  // propagation (what the ACK's echo would measure). No in-flight figure (-1), as the gateway
  // gives none: the estimator tells app-limited windows (streaming senders forwarding at
  // their upstream's pace) by the queue they do not build.
  const bool measuring = o.awareness != Awareness::kStuck || o.compress;
  if (measuring)
    wan.set_hop_observer([&](const sim::Wan::Hop& h) {
      if (!h.data) return;
      measure::ArrivalSample smp;
      smp.from = static_cast<uint16_t>(h.from);
      smp.to = static_cast<uint16_t>(h.to);
      smp.bytes = h.wire_bytes / s.scale;
      smp.at = h.at;
      smp.rtt = h.one_way + w.link(h.to, h.from).delay;
      est.on_arrival(smp);
      carried[static_cast<size_t>(h.from) * n + h.to] = 1;
    });
  std::vector<compress::AdaptivePolicy> policy(static_cast<size_t>(n) * n);
  int compressed = 0;

  for (int r = 1; r <= rounds; ++r) {
    std::fill(carried.begin(), carried.end(), 0);
    const sim::RoundResult rr = c.run_round(static_cast<uint32_t>(r), {s.local}, kRoundLimit);
    StackRound sr;
    sr.start_s = static_cast<double>(rr.start) * 1e-9;
    sr.seconds = rr.seconds;
    sr.compressed_links = compressed;
    sr.splits = static_cast<int>(plan.splits.size());
    out.rounds.push_back(sr);  // replanned: set below if a new policy follows this round
    out.total_s += rr.seconds;
    out.last = rr.stats;
    out.ok &= rr.ok;
    if (!rr.ok) break;
    if (!measuring || r == rounds) continue;

    const Nanos now = wan.now();
    est.end_round(now);
    // Packet-pair probes (the design's optional low-rate probes: two chunk-sized packets back
    // to back, the gap gives the bottleneck rate): passive mode probes only the links that
    // carried nothing; probed mode probes every link once per round.
    std::vector<double> probe(static_cast<size_t>(n) * n, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const size_t k = static_cast<size_t>(i) * n + j;
        if (i == j || (o.awareness != Awareness::kProbes && carried[k])) continue;
        double rate = wan.link(i, j).rate_at(now);
        if (w.sites[i].egress_bytes_per_s > 0) rate = std::min(rate, w.sites[i].egress_bytes_per_s);
        if (w.sites[j].ingress_bytes_per_s > 0) rate = std::min(rate, w.sites[j].ingress_bytes_per_s);
        const Nanos gap = static_cast<Nanos>(static_cast<double>(kWireChunk) / rate * 1e9);
        probe[k] = static_cast<double>(s.chunk_real) / (static_cast<double>(gap) * 1e-9);
        est.on_probe_pair(static_cast<uint16_t>(i), static_cast<uint16_t>(j), s.chunk_real, gap, now);
      }
    // The planner's view. Passive: the estimator's figure per link (traffic, else probe, else
    // the prior). Probed: the larger of that and this round's probe (a traffic window says
    // what the link carried, at most its capacity).
    topo::Network net = net0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) {
          double v = est.bytes_per_s(static_cast<uint16_t>(i), static_cast<uint16_t>(j), now);
          if (o.awareness == Awareness::kProbes) v = std::max(v, probe[static_cast<size_t>(i) * n + j]);
          if (v > 0) net.link_bw(i, j) = v;
        }
    // NetStorm recomputes the trees when throughput changes; the estimator's hysteresis
    // decides what a change is, so the planner looks every round and takes a new policy only
    // when it is clearly better on the current view.
    if (o.awareness != Awareness::kStuck) {
      topo::Plan next = topo::plan_fapt(net, s.model_real, opt);
      if (topo::round_time(net, next, s.chunk_real).total_s < 0.9 * topo::round_time(net, plan, s.chunk_real).total_s) {
        plan = next;
        sim::install_plan(c, plan, ++version);
        ++out.policy_switches;
        out.rounds.back().replanned = true;
      }
    }
    if (!o.compress) continue;
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

StackResult run_fluctuation(const Setup& s, Awareness a, bool compress, int rounds) {
  StackOptions o;
  o.awareness = a;
  o.compress = compress;
  const char* name = a == Awareness::kStuck     ? "stuck"
                     : a == Awareness::kPassive ? "aware (passive)"
                     : compress                 ? "aware+compress"
                                                : "aware (passive+probes)";
  return run_stack(s, sim::with_fluctuation(*s.sc), o, rounds, name);
}

}  // namespace sg::simbench
