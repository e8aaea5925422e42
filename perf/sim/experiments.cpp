#include "experiments.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>

#include "controller/controller.h"
#include "sim/gateway_site.h"
#include "sync/gateway_settings.h"
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

double median_of_last(const std::vector<double>& v, int k) {
  if (v.empty()) return 0;
  std::vector<double> t(v.end() - std::min<std::ptrdiff_t>(k, static_cast<std::ptrdiff_t>(v.size())), v.end());
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

Setup make_setup(const sim::Scenario& sc, uint64_t model_wire, double mem_budget, int rounds, int reported) {
  Setup s;
  s.reported = reported;
  s.sc = &sc;
  s.n = sc.wan.n();
  s.model_wire = model_wire;
  s.rounds = rounds;
  while (static_cast<double>(s.n) * 2 * static_cast<double>(model_wire) / s.scale > mem_budget && s.scale < 128)
    s.scale *= 2;
  // SG_SIM_CHUNK (wire bytes): a diagnostic, to see what the large simulation chunk costs.
  const char* c = std::getenv("SG_SIM_CHUNK");
  const uint32_t wire_chunk = c ? static_cast<uint32_t>(std::max(1200L, std::atol(c))) : kWireChunk;
  s.chunk_real = std::max<uint32_t>(4, wire_chunk / s.scale / 4 * 4);
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
    m.round_s.push_back(rr.seconds);
    m.stats = rr.stats;
    if (!rr.ok) break;
  }
  m.seconds = median_of_last(m.round_s, s.reported);
  m.wall_s = wall() - t0;
  m.events = wan.stats().events;
  return m;
}

}  // namespace

ModeResult run_sync(const Setup& s, const sim::WanSpec& w, const topo::Plan& plan, bool reliable,
                    const std::string& name, sim::TcpCc cc) {
  sim::Wan wan(w, max_msg(s), s.scale);
  sim::Cluster c(wan, sim::make_sync_sites(s.n, s.chunk_real, reliable, w.seed, {}, false, cc));
  if (!sim::install_plan(c, plan, 1)) return ModeResult{name};
  return run_rounds(s, wan, c, name);
}

ModeResult run_ring(const Setup& s, const sim::WanSpec& w, const std::string& name, sim::TcpCc cc,
                    uint64_t gloo_segment_bytes) {
  const topo::Network net = sim::network_at(w, 0, s.scale, kAggBps);
  sim::Wan wan(w, max_msg(s), s.scale);
  const auto order = sim::best_ring(s.n, net.bw, net.rtt);
  sim::Cluster c(wan, gloo_segment_bytes
                          ? sim::make_gloo_ring_sites(order, s.chunk_real, s.model_real / 4,
                                                      gloo_segment_bytes / s.scale, w.seed, {}, cc)
                          : sim::make_ring_sites(order, s.chunk_real, s.model_real / 4, w.seed, {}, cc));
  return run_rounds(s, wan, c, name);
}

namespace {
// Diagnostic only (never in a reported figure): SG_ORACLE_FIRST runs the oracle FAPT plan
// through the gateway's own code path and never replans, to tell a plan's cost from the path's.
bool oracle_first() { return std::getenv("SG_ORACLE_FIRST") != nullptr; }

// SG_SIM_DEBUG, after a stack run: both plans' trees and every link's queue drops.
void print_plans_and_drops(const topo::Plan& current, const topo::Plan& first, sim::Wan& wan, int n,
                           const std::string& name) {
  for (const topo::Plan* pl : {&current, &first}) {
    std::fprintf(stderr, "%s plan:\n", pl == &first ? "first" : "current");
    for (const auto& t : pl->shards) {
      std::fprintf(stderr, "  root %d %.1f MB parents", t.root, t.bytes() * 1e-6);
      for (auto p : t.parent) std::fprintf(stderr, " %d", p == topo::kNoSite ? -1 : static_cast<int>(p));
      std::fprintf(stderr, "\n");
    }
  }
  std::fprintf(stderr, "%s: links with queue drops (drops/packets, busy s, whole run)\n", name.c_str());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const sim::LinkStats& ls = wan.link(i, j).stats();
      if (i != j && ls.queue_drops > 0)
        std::fprintf(stderr, " %d>%d %llu/%llu %.2f", i, j, static_cast<unsigned long long>(ls.queue_drops),
                     static_cast<unsigned long long>(ls.packets), static_cast<double>(ls.busy) * 1e-9);
    }
  std::fprintf(stderr, "\n");
}
// SG_SIM_DEBUG_SPRAY, after each round: every site's chunks per path (cumulative), each
// path's smoothed and minimum RTT and measured rate, and each link's queue now.
void print_spray(sim::Wan& wan, int n) {
  for (int i = 0; i < n; ++i) {
    const spray::Sprayer* sp = wan.sprayer(i);
    if (!sp) continue;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const auto peer = static_cast<uint16_t>(j + 1);
      std::fprintf(stderr, "  %d>%d q %.0fKB:", i, j, wan.link(i, j).backlog_bytes(wan.now()) / 1e3);
      for (unsigned k = 0; k < sp->slots(peer); ++k) {
        const spray::SlotCounters* c = sp->counters(peer, k);
        std::fprintf(stderr, " [via %u: %llu ch, w %.0f, %.0f Mbit/s, inflight %llu]", sp->via(peer, k),
                     static_cast<unsigned long long>(c->chunks.get()), sp->weight(peer, k) * 8e-6,
                     sp->delivery_rate(peer, k) * 8e-6, static_cast<unsigned long long>(sp->inflight(peer, k)));
      }
      std::fprintf(stderr, "\n");
    }
  }
}
}  // namespace

// Site `self` of the config template: its id, its peers (every other site; paths and
// addresses are the sprayer's and the simulated WAN's business) and the simulated sizes.
config::GatewayConfig site_config(const Setup& s, const config::GatewayConfig& base, int self) {
  config::GatewayConfig cfg = base;
  cfg.site.id = static_cast<uint16_t>(self + 1);
  cfg.peers.clear();
  for (int j = 0; j < s.n; ++j) {
    if (j == self) continue;
    config::PeerConfig p;
    p.id = static_cast<uint16_t>(j + 1);
    cfg.peers.push_back(p);
  }
  cfg.job.model_bytes = s.model_real;
  cfg.transport.chunk_bytes = s.chunk_real;
  return cfg;
}

controller::ControlPlaneConfig stack_control(const Setup& s, const sim::WanSpec& w, const StackOptions& o, int self) {
  if (o.gateway) {
    controller::ControlPlaneConfig c = controller::control_plane_config(site_config(s, *o.gateway, self));
    // Bytes the planner and the prober count are 1/scale real, as the simulated payloads.
    for (double& u : c.controller.uplinks) u /= s.scale;
    c.probe.rate_bytes_per_s /= s.scale;
    return c;
  }
  controller::ControlPlaneConfig c;
  const int n = s.n;
  auto& k = c.controller;
  k.sites = n;
  k.self = self;
  k.coordinator = 0;
  k.plan.planner = config::Planner::kFapt;
  k.plan.model_bytes = s.model_real;
  k.plan.chunk_bytes = s.chunk_real;
  k.plan.shards = static_cast<uint16_t>(o.max_trees);
  k.plan.spread_to = 0;
  k.plan.multipath = o.multipath;
  k.recompute_change = o.recompute_change;
  k.min_interval = 1 * kSecond;
  k.compression.mode = o.compress ? config::CompressionMode::kAdaptive : config::CompressionMode::kOff;
  k.compression.codec = CodecId::kTopK;
  k.compression.topk_ratio = 0.01;
  k.compression.compute_ms_per_round = static_cast<uint32_t>(s.sc->compute_ms);
  // What a deployment's config says (site.uplink_mbit), in the planner's byte units.
  for (const auto& site : w.sites) k.uplinks.push_back(site.egress_bytes_per_s / s.scale);
  // The stuck baseline: the first measured plan, never revised.
  if (o.awareness == Awareness::kStuck) k.max_proposals = 1;
  if (oracle_first()) {  // diagnostic (see run_stack): keep that plan
    k.max_proposals = 1;
    k.recompute_change = 1e9;
  }
  for (int i = 0; i < n; ++i) c.nodes.push_back(static_cast<uint16_t>(i + 1));
  c.job = 1;
  c.switch_rounds_ahead = 1;  // control.switch_rounds_ahead: rounds of seconds need no more
  c.row_every_rounds = 1;
  c.probes = o.awareness != Awareness::kPassive;
  k.expect_full_view = c.probes;
  // Trains of chunk-sized packets (1/scale of their bytes real, full size on the wire) within
  // a per-site budget: probes take their share of the links they measure.
  c.probe.packet_bytes = s.chunk_real;
  c.probe.train_packets = 4;
  c.probe.rate_bytes_per_s = o.probe_rate_bytes_per_s / s.scale;
  c.probe.idle_after = 150 * kMilli;  // the gaps between rounds (compute) count as idle
  c.probe.min_period = 2 * kSecond;
  // Windows of a second of busy time: long enough to average over the rate controller's
  // startup and probing cycles of a multi-second transfer.
  c.estimator.max_window = 1 * kSecond;
  return c;
}

StackResult run_stack(const Setup& s, const sim::WanSpec& w, const StackOptions& o, int rounds,
                      const std::string& name) {
  StackResult out;
  out.mode = name;
  const int n = s.n;
  sim::Wan wan(w, max_msg(s), s.scale);
  // Every site starts from the controller's first plan (nothing measured yet: links alike,
  // the configured uplinks), as gateways do.
  topo::Plan first = controller::Controller(stack_control(s, w, o, 0).controller).initial_plan();
  if (oracle_first()) first = make_plan(s, sim::network_at(w, 0, s.scale, kAggBps), Topo::kFapt);
  std::vector<std::unique_ptr<sim::Participant>> sites;
  std::vector<sim::GatewaySite*> gw;
  for (int i = 0; i < n; ++i) {
    sim::GatewaySiteConfig gc;
    if (o.gateway) {
      const config::GatewayConfig cfg = site_config(s, *o.gateway, i);
      gc.sync = sync::site_sync_config(cfg, controller::job_sites(cfg));
      // One SiteSync stands for the gateway's one engine; the link states the gateway would
      // own (transport.link_share) are SiteSync's own here.
      gc.sync.share_links = config::links_shared(cfg);
      gc.sync.seed = sim::site_seed(w.seed, i);
    } else {
      gc.sync = sim::make_sync_config(n, i, s.chunk_real, false, w.seed);
      gc.sync.wire_compression = o.compress;
      if (o.share_links) gc.sync.share_links = true;
      gc.sync.topk_ratio = 0.01f;
    }
    gc.control = stack_control(s, w, o, i);
    // The splits of the plan in force (the simulator routes relayed DATA itself), or each
    // site's sprayer told of its switch as JobRunner tells the gateway's.
    if (o.spray) gc.on_switch = [&wan, i](const topo::Plan& p) { wan.set_spray_plan(i, p); };
    else if (i == 0) gc.on_switch = [&wan](const topo::Plan& p) { wan.set_splits(p.splits); };
    auto site = std::make_unique<sim::GatewaySite>(gc, first);
    gw.push_back(site.get());
    sites.push_back(std::move(site));
  }
  wan.set_splits(first.splits);
  sim::Cluster c(wan, std::move(sites));
  if (o.spray)
    for (int i = 0; i < n; ++i) {
      spray::Sprayer& sp = wan.use_sprayer(i);
      sp.set_standby_relays(o.gateway ? o.gateway->topology.multipath : o.multipath);  // topology.multipath
      wan.set_spray_plan(i, first);
    }
  // The gateways are up before the job's first round: their control planes run (probes on
  // idle links, rows, a first measured plan) for o.warmup of virtual time.
  if (o.warmup > 0) {
    for (int i = 0; i < n; ++i) wan.wake(i, wan.now());
    wan.run([](int) { return false; }, wan.now() + o.warmup);
  }
  uint32_t version = gw[0]->policy_version();
  for (int r = 1; r <= rounds; ++r) {
    const sim::RoundResult rr = c.run_round(static_cast<uint32_t>(r), {s.local}, kRoundLimit);
    StackRound sr;
    sr.start_s = static_cast<double>(rr.start) * 1e-9;
    sr.seconds = rr.seconds;
    const topo::Plan& plan = gw[0]->plane().current_plan();
    sr.compressed_links = static_cast<int>(plan.codecs.size());
    sr.splits = static_cast<int>(plan.splits.size());
    sr.replanned = gw[0]->policy_version() != version;
    if (sr.replanned) ++out.policy_switches;
    version = gw[0]->policy_version();
    if (std::getenv("SG_SIM_DEBUG")) {  // diagnostic only: the model's time for the plan in force
      const topo::Network truth = sim::network_at(w, wan.now(), s.scale, kAggBps);
      std::fprintf(stderr, "%s round %d: %.3f s, splits %d, model on true rates %.3f s; sent %llu relayed %llu "
                   "queue drops %llu lost %llu; retx %llu timeouts %llu\n", name.c_str(), r, rr.seconds, sr.splits,
                   topo::round_time(truth, plan, s.chunk_real).total_s,
                   static_cast<unsigned long long>(wan.stats().packets_sent),
                   static_cast<unsigned long long>(wan.stats().relayed),
                   static_cast<unsigned long long>(wan.stats().dropped_queue),
                   static_cast<unsigned long long>(wan.stats().lost),
                   static_cast<unsigned long long>(rr.stats.retransmits),
                   static_cast<unsigned long long>(rr.stats.timeouts));
      for (int i = 0; i < n; ++i) std::fprintf(stderr, " s%d %.3f", i, (gw[i]->round_finished() - rr.start) * 1e-9);
      std::fprintf(stderr, "\n");
      if (std::getenv("SG_SIM_DEBUG_SPRAY")) print_spray(wan, n);
    }
    out.rounds.push_back(sr);
    out.total_s += rr.seconds;
    out.last = rr.stats;
    out.ok &= rr.ok;
    if (!rr.ok) break;
  }
  if (std::getenv("SG_SIM_DEBUG")) {
    // Diagnostic only (nothing decides on it): the coordinator's view against the true rates.
    const topo::Network view = gw[0]->plane().controller().view();
    const topo::Network truth = sim::network_at(w, wan.now(), s.scale, kAggBps);
    print_plans_and_drops(gw[0]->plane().current_plan(), first, wan, n, name);
    std::fprintf(stderr, "%s: link view / true (Mbit/s, real bytes)\n", name.c_str());
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j)
        if (i != j) std::fprintf(stderr, " %d>%d %.0f/%.0f", i, j, view.link_bw(i, j) * 8e-6, truth.link_bw(i, j) * 8e-6);
      std::fprintf(stderr, "\n");
    }
  }
  uint64_t probe_bytes = 0;
  for (auto* g : gw) probe_bytes += g->plane().prober().probe_bytes();
  out.probe_wire_bytes = probe_bytes * s.scale;
  out.codec_switches = static_cast<int>(gw[0]->plane().controller().stats().codec_proposals);
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
