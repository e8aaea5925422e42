#include "controller/controller.h"

#include <algorithm>

#include "topology/round_time.h"

namespace sg::controller {
namespace {
constexpr Nanos kProbeFresh = 120 * kSecond;  // a probe result stands for the link this long
constexpr double kUplinkPeakFloor = 0.8;      // peak against the fastest link's traffic figure (noise)
// link_rate (below): what makes a traffic figure a share, or a congested link's.
constexpr double kSaturated = 0.85;
constexpr Nanos kActiveFor = 3 * kSecond;
constexpr double kCongestedTrend = 1.25;  // recent RTT this far above the long-term one
constexpr double kCongestedLoss = 0.005;

// The median of `v` (its upper middle), `fallback` when empty.
double median(std::vector<double> v, double fallback = 0) {
  if (v.empty()) return fallback;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}
}  // namespace

std::vector<uint16_t> job_sites(const config::GatewayConfig& cfg) {
  std::vector<uint16_t> s{cfg.site.id};
  for (const auto& p : cfg.peers) s.push_back(p.id);
  std::sort(s.begin(), s.end());
  return s;
}

std::vector<double> site_uplinks(const config::GatewayConfig& cfg) {
  const auto sites = job_sites(cfg);
  std::vector<double> up(sites.size(), 0.0);
  for (size_t i = 0; i < sites.size(); ++i) {
    double mbit = sites[i] == cfg.site.id ? cfg.site.uplink_mbit : 0.0;
    if (const auto* p = cfg.find_peer(sites[i])) mbit = p->uplink_mbit;
    up[i] = mbit * 1e6 / 8;
  }
  return up;
}

ControllerConfig controller_config(const config::GatewayConfig& cfg) {
  ControllerConfig c;
  const auto sites = job_sites(cfg);
  c.sites = static_cast<int>(sites.size());
  for (size_t i = 0; i < sites.size(); ++i)
    if (sites[i] == cfg.site.id) c.self = static_cast<int>(i);
  c.uplinks = site_uplinks(cfg);
  c.coordinator = 0;  // the lowest site id plans
  c.plan = plan_settings(cfg);
  c.recompute_change = cfg.topology.recompute_change;
  c.min_interval = static_cast<Nanos>(cfg.topology.min_interval_ms) * kMilli;
  c.decide_every = static_cast<Nanos>(cfg.control.interval_ms) * kMilli;
  c.compression = cfg.compression;
  c.sync = cfg.sync;
  c.job = cfg.job.id;
  return c;
}

Controller::Controller(ControllerConfig cfg)
    : cfg_(std::move(cfg)), n_(cfg_.sites), links_(static_cast<size_t>(n_) * n_),
      probe_(static_cast<size_t>(n_) * n_, 0.0), source_(static_cast<size_t>(n_) * n_, 0),
      windows_(static_cast<size_t>(n_) * n_, 0), active_at_(static_cast<size_t>(n_) * n_, -1),
      rtt_(static_cast<size_t>(n_) * n_, -1.0), egress_peak_(static_cast<size_t>(n_), 0.0),
      update_lag_(static_cast<size_t>(n_), 0.0), overlap_(static_cast<size_t>(n_), -1.0),
      codecs_(cfg_.compression, n_) {
  cfg_.uplinks.resize(static_cast<size_t>(n_), 0.0);
}

topo::Plan Controller::initial_plan(std::string* error) const {
  topo::Plan plan = build_plan(blind_network(n_, cfg_.uplinks), cfg_.plan, error);
  // "always" compresses every tree link from the first round; "adaptive" starts at full
  // precision and lets the measurements decide.
  if (!plan.shards.empty() && cfg_.compression.mode == config::CompressionMode::kAlways)
    topo::set_tree_codecs(plan, cfg_.compression.codec);
  if (!plan.shards.empty() && cfg_.sync.mode == config::SyncMode::kSelmcast)
    plan.receivers = choose_receivers(blind_network(n_, cfg_.uplinks), receiver_settings());
  return plan;
}

ReceiverSettings Controller::receiver_settings() const {
  ReceiverSettings r;
  r.choice = cfg_.sync.receivers;
  r.p = static_cast<int>(cfg_.sync.p);
  r.staleness = static_cast<int>(cfg_.sync.staleness);
  r.update_bytes = static_cast<double>(cfg_.plan.model_bytes);
  r.seed = cfg_.job;
  r.ready = update_lag_;
  return r;
}

// Selmcast mode: new receivers when the measured view predicts a round shorter by
// recompute_change, or as short (within kSameRound) with a mean p larger by as much -- the
// round a straggler's load sets has room for more receivers --, twice in a row like new
// trees; random and broadcast never change.
std::optional<topo::Plan> Controller::decide_receivers(const topo::Plan& current, const topo::Network& net) {
  if (cfg_.sync.receivers != config::ReceiverChoice::kSelmcast) return std::nullopt;
  topo::Plan cand = current;
  cand.receivers = choose_receivers(net, receiver_settings());
  if (cand.receivers == current.receivers || current.receivers.size() != cand.receivers.size()) return std::nullopt;
  const ReceiverSettings rs = receiver_settings();
  const topo::McastScore cur = receivers_score(net, rs, current.receivers);
  const topo::McastScore next = receivers_score(net, rs, cand.receivers);
  constexpr double kSameRound = 0.02;  // within the model's own error
  stats_.last_gain = next.round_time_s > 0 ? cur.round_time_s / next.round_time_s - 1.0 : 0.0;
  if (next.round_time_s <= cur.round_time_s * (1 + kSameRound) && cur.mean_p > 0)
    stats_.last_gain = std::max(stats_.last_gain, next.mean_p / cur.mean_p - 1.0);
  if (stats_.last_gain <= cfg_.recompute_change) {
    candidate_runs_ = 0;
    return std::nullopt;
  }
  uint64_t sig = 1469598103934665603ull;
  for (const auto& l : cand.receivers) {
    for (topo::SiteId r : l) sig = (sig ^ r) * 1099511628211ull;
    sig = (sig ^ 0xffff) * 1099511628211ull;
  }
  candidate_runs_ = sig == candidate_sig_ ? candidate_runs_ + 1 : 1;
  candidate_sig_ = sig;
  if (stats_.proposals > 0 && candidate_runs_ < cfg_.confirm_decisions) return std::nullopt;
  if (topo::validate(cand) != topo::PlanError::kOk) return std::nullopt;
  ++stats_.proposals;
  return cand;
}

void Controller::on_row(const wire::MeasureRow& row, Nanos now) {
  if (row.site >= n_) {
    ++stats_.rows_refused;
    return;
  }
  for (const wire::LinkMeasure& l : row.links) {
    if (l.from >= n_ || l.from == row.site) continue;
    const size_t k = static_cast<size_t>(l.from) * n_ + row.site;
    // Priors say nothing new: a link is known once traffic or a probe measured it.
    if (l.source == static_cast<uint8_t>(measure::Source::kTraffic) ||
        l.source == static_cast<uint8_t>(measure::Source::kProbe)) {
      links_[k].bytes_per_s = l.bytes_per_s;
      source_[k] = l.source;
    }
    if (l.probe_bytes_per_s > 0) probe_[k] = l.probe_bytes_per_s;
    if (l.windows > windows_[k]) active_at_[k] = now;
    windows_[k] = l.windows;
    links_[k].rtt_trend = l.rtt_trend;
    links_[k].loss = l.loss;
    if (l.rtt_s > 0) rtt_[k] = l.rtt_s;
  }
  egress_peak_[row.site] = std::max(egress_peak_[row.site], row.egress_peak);
  if (row.update_lag_s >= 0) {
    update_lag_[row.site] = row.update_lag_s;
    overlap_[row.site] = row.overlap;
  }
  if (first_row_at_ < 0) first_row_at_ = now;
  last_row_at_ = std::max(last_row_at_, now);
  ++stats_.rows;
}

void Controller::print_inputs(std::FILE* f) const {
  for (int i = 0; i < n_; ++i) {
    std::fprintf(f, "  site %d uplink %.0f peak %.0f:", i, uplink(i) * 8e-6, egress_peak_[i] * 8e-6);
    for (int j = 0; j < n_; ++j) {
      const size_t k = static_cast<size_t>(i) * n_ + j;
      if (i != j) std::fprintf(f, " ->%d %.0f(src %d, probe %.0f, %s)", j, links_[k].bytes_per_s * 8e-6, source_[k], probe_[k] * 8e-6, active(k) ? "active" : "idle");
    }
    std::fprintf(f, "\n");
  }
}

double Controller::uplink(int site) const {
  if (site < 0 || site >= n_) return 0;
  if (cfg_.uplinks[site] > 0) return cfg_.uplinks[site];
  // Inferred: links that together measure well above what the site ever sent at once share
  // its uplink, which tops out near that peak.
  const double peak = egress_peak_[site];
  if (peak <= 0) return 0;
  double sum = 0, top = 0;
  for (int j = 0; j < n_; ++j) {
    const size_t k = static_cast<size_t>(site) * n_ + j;
    if (j == site) continue;
    sum += links_[k].bytes_per_s;
    if (source_[k] == static_cast<uint8_t>(measure::Source::kTraffic)) top = std::max(top, links_[k].bytes_per_s);
  }
  // The uplink carried at least what one of its links carried: a peak below that is not
  // the uplink's limit but a time the site had less to send (on the testbed's WAN, whose
  // pairs each have their own rate, such peaks capped a hub's 400 and 200 Mbit/s links at
  // 63 Mbit/s together).
  if (peak < kUplinkPeakFloor * top) return 0;
  return sum > cfg_.uplink_share_factor * peak ? peak : 0;
}

uint64_t trees_signature(const topo::Plan& p) {
  // FNV-1a over every shard's root, byte range and parents: equal plans, equal signatures.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& t : p.shards) {
    mix(t.root);
    mix(t.byte_begin);
    mix(t.byte_end);
    for (topo::SiteId q : t.parent) mix(q);
  }
  return h;
}

bool Controller::active(size_t k) const {
  // New windows within the last few seconds of rows: the figure describes the link as the
  // current plan uses it. An older one described another plan's load.
  return active_at_[k] >= 0 && last_row_at_ - active_at_[k] <= kActiveFor;
}

// Traffic windows measure what a link carried while it shared its sites' uplinks with the
// job's other transfers; a probe measures the link alone. The planner models the uplinks
// itself, so it wants each link's own rate:
//   - a link whose sender's egress or receiver's ingress was near its uplink (the traffic
//     rates through that site add up to >= kSaturated of it) carried a share: its rate is the
//     larger of that share and its probe;
//   - otherwise a traffic figure below the probe stands only if the link shows congestion
//     (RTT rising or loss): the link slowed down; without those signs the job simply did not
//     offer more and the probe stands;
//   - a link without recent traffic: its probe (else its last figure).
double Controller::link_rate(int i, int j, const std::vector<double>& out_sum, const std::vector<double>& in_sum) const {
  const size_t k = static_cast<size_t>(i) * n_ + j;
  const double probe = probe_[k];
  if (source_[k] != static_cast<uint8_t>(measure::Source::kTraffic) || !active(k))
    return probe > 0 ? probe : links_[k].bytes_per_s;
  const double t = links_[k].bytes_per_s;
  const double ui = uplink(i), uj = uplink(j);
  // A full uplink split its rate over the site's links: this link alone would have had up to
  // the whole uplink, in proportion (the share scaled by uplink / sum of shares).
  double scale = 0;
  if (ui > 0 && out_sum[i] >= kSaturated * ui) scale = std::max(scale, ui / out_sum[i]);
  if (uj > 0 && in_sum[j] >= kSaturated * uj) scale = std::max(scale, uj / in_sum[j]);
  if (scale > 0) return std::max(t * scale, probe);
  // Below its probe with uplinks to spare: either the link slowed down or the job did not
  // offer more (short transfers, a sender's startup). A slower link builds a queue or loses:
  // only with those signs does the lower figure replace the probe.
  const bool congested = links_[k].rtt_trend > kCongestedTrend || links_[k].loss > kCongestedLoss;
  if (probe > t && !congested) return probe;
  return t;
}

topo::Network Controller::view() const {
  std::vector<double> out_sum(static_cast<size_t>(n_), 0.0), in_sum(static_cast<size_t>(n_), 0.0);
  for (int i = 0; i < n_; ++i)
    for (int j = 0; j < n_; ++j) {
      const size_t k = static_cast<size_t>(i) * n_ + j;
      if (i == j || source_[k] != static_cast<uint8_t>(measure::Source::kTraffic) || !active(k)) continue;
      out_sum[i] += links_[k].bytes_per_s;
      in_sum[j] += links_[k].bytes_per_s;
    }
  std::vector<double> rate(static_cast<size_t>(n_) * n_, 0.0);
  std::vector<double> known, known_rtt;
  for (int i = 0; i < n_; ++i)
    for (int j = 0; j < n_; ++j) {
      const size_t k = static_cast<size_t>(i) * n_ + j;
      if (i == j) continue;
      rate[k] = link_rate(i, j, out_sum, in_sum);
      if (rate[k] > 0) known.push_back(rate[k]);
      if (rtt_[k] > 0) known_rtt.push_back(rtt_[k]);
    }
  topo::Network net = topo::Network::uniform(n_, median(known, cfg_.prior_bytes_per_s),
                                             median(known_rtt, cfg_.prior_rtt_s), cfg_.agg_bytes_per_s);
  for (int i = 0; i < n_; ++i)
    for (int j = 0; j < n_; ++j) {
      const size_t k = static_cast<size_t>(i) * n_ + j;
      if (i == j) continue;
      if (rate[k] > 0) net.bw[k] = rate[k];
      if (rtt_[k] > 0) net.rtt[k] = rtt_[k];
    }
  std::vector<double> up(static_cast<size_t>(n_));
  for (int i = 0; i < n_; ++i) up[i] = uplink(i);
  net.set_uplinks(up);
  return net;
}

std::optional<topo::Plan> Controller::decide(const topo::Plan& current, Nanos now) {
  if (!coordinator() || stats_.rows == rows_at_decision_) return std::nullopt;
  if (cfg_.max_proposals && stats_.proposals + stats_.codec_proposals >= cfg_.max_proposals) return std::nullopt;
  if (last_proposal_ >= 0 && now - last_proposal_ < cfg_.min_interval) return std::nullopt;
  if (last_decision_ >= 0 && now - last_decision_ < cfg_.decide_every) return std::nullopt;
  // Enough of the view is measured: at least a link per site, and every link where probes
  // measure idle ones (for a while: a link no probe reaches must not block planning forever).
  int measured = 0;
  for (size_t k = 0; k < links_.size(); ++k) measured += links_[k].bytes_per_s > 0 || probe_[k] > 0;
  if (measured < n_) return std::nullopt;
  const bool waiting = cfg_.expect_full_view && measured < n_ * (n_ - 1) && now - first_row_at_ < cfg_.full_view_wait;
  if (waiting && stats_.proposals + stats_.codec_proposals == 0) return std::nullopt;
  rows_at_decision_ = stats_.rows;
  last_decision_ = now;
  ++stats_.replans_considered;
  const topo::Network net = view();
  if (cfg_.sync.mode == config::SyncMode::kSelmcast) return decide_receivers(current, net);
  topo::Plan cand = build_plan(net, cfg_.plan);
  if (cand.shards.empty()) return std::nullopt;
  const double chunk = cfg_.plan.chunk_bytes;
  const double cur = topo::round_time(net, current, chunk).total_s;
  const double next = topo::round_time(net, cand, chunk).total_s;
  stats_.last_gain = next > 0 ? cur / next - 1.0 : 0.0;
  bool new_trees = stats_.last_gain > cfg_.recompute_change;
  if (new_trees) {
    const uint64_t sig = trees_signature(cand);
    candidate_runs_ = sig == candidate_sig_ ? candidate_runs_ + 1 : 1;
    candidate_sig_ = sig;
    const bool first = stats_.proposals == 0;  // from the bandwidth-blind plan: no waiting
    if (!first && candidate_runs_ < cfg_.confirm_decisions) new_trees = false;
  } else {
    candidate_runs_ = 0;
  }
  std::vector<LinkView> links = links_;
  for (int i = 0; i < n_; ++i)
    for (int j = 0; j < n_; ++j)
      if (i != j && links[static_cast<size_t>(i) * n_ + j].bytes_per_s <= 0)
        links[static_cast<size_t>(i) * n_ + j].bytes_per_s = net.link_bw(i, j);
  // The compute a round's transfer can hide behind, as the sites measure it (the largest).
  Nanos hideable = 0;
  for (int s = 0; s < n_; ++s)
    hideable = std::max(hideable, hideable_compute(update_lag_[static_cast<size_t>(s)], overlap_[static_cast<size_t>(s)]));
  // Going back to a plan that measured faster than its successor, or holding still after.
  if (go_back_) {
    topo::Plan back = std::move(*go_back_);
    go_back_.reset();
    before_.reset();  // not timed against what it replaces: no going back and forth
    hold_ = hold_ > 0 ? std::min(2 * hold_, std::max(cfg_.regret_hold_max, cfg_.regret_hold)) : cfg_.regret_hold;
    stats_.regret_hold = hold_;
    hold_until_ = now + hold_;
    ++stats_.regrets;
    ++stats_.proposals;
    candidate_runs_ = 0;
    // Back to those trees, not to the codecs of their time: `back` is the plan as it was when
    // its trees came into force, often before compression was chosen, and returning it whole
    // dropped every link's codec (wan-suite, `continent`: adaptive back at full precision
    // after a regret, 0.44 s rounds against always-int8's 0.41).
    back.codecs = codecs_.decide(back, links, hideable);
    return back;
  }
  // The trees in force are timed before any others are tried, so that each switch is judged
  // against the one before. Only the first measured trees leave the bandwidth-blind plan at
  // once. Judging only switches whose predecessor happened to be timed let an early switch
  // (the blind plan had run a few rounds) be followed by untimed ones: a run chose trees of
  // 1 s rounds three switches in and never compared them with the 0.45 s it had had.
  const bool timing = cfg_.regret_rounds > 0 && run_plan_.has_value() && stats_.proposals > 0 &&
                      run_.size() < cfg_.regret_rounds;
  if (new_trees && (timing || (hold_until_ >= 0 && now < hold_until_))) {
    new_trees = false;
    candidate_runs_ = 0;
  }
  if (!new_trees) cand = current;  // same trees: only a codec change can justify a switch
  cand.codecs = codecs_.decide(cand, links, hideable);
  if (!new_trees && same_codecs(cand.codecs, current.codecs)) return std::nullopt;
  if (topo::validate(cand) != topo::PlanError::kOk) return std::nullopt;
  if (new_trees) {
    ++stats_.proposals;
  } else {
    ++stats_.codec_proposals;
  }
  return cand;
}

void Controller::on_round_done(const topo::Plan& plan, Nanos duration) {
  if (!coordinator() || cfg_.regret_rounds == 0 || duration <= 0) return;
  const uint64_t sig = trees_signature(plan);
  if (sig != run_sig_ || !run_plan_) {
    // New trees in force: the ones before are the reference if they were timed enough.
    const size_t enough = run_is_first_plan_ ? std::min(cfg_.regret_rounds, std::max(cfg_.regret_rounds_first, 1u))
                                             : cfg_.regret_rounds;
    if (run_plan_ && run_.size() >= enough) before_ = Timed{run_sig_, median(run_), std::move(*run_plan_)};
    else if (run_plan_) before_.reset();
    run_is_first_plan_ = !run_plan_;
    run_sig_ = sig;
    run_plan_ = plan;
    run_.clear();
    run_first_ = true;
    return;  // the switch round itself finishes the old plan's work too
  }
  if (run_first_) {
    run_first_ = false;
    return;
  }
  if (run_.size() < cfg_.regret_rounds) run_.push_back(seconds(duration));
  if (run_.size() == cfg_.regret_rounds && before_ && before_->sig != sig) {
    if (median(run_) > (1 + cfg_.regret_margin) * before_->median) go_back_ = std::move(before_->plan);
    before_.reset();  // judged
  }
}

wire::MeasureRow make_row(const measure::LinkEstimator& est, int sites, int self, uint32_t round, double egress_peak,
                          Nanos now) {
  wire::MeasureRow row;
  row.site = static_cast<uint16_t>(self);
  row.round = round;
  row.egress_peak = egress_peak;
  for (int k = 0; k < sites; ++k) {
    if (k == self) continue;
    const measure::LinkSummary s = est.summary(static_cast<uint16_t>(k), static_cast<uint16_t>(self), now);
    wire::LinkMeasure l;
    l.from = static_cast<uint16_t>(k);
    l.source = static_cast<uint8_t>(s.source);
    l.bytes_per_s = s.bytes_per_s;
    if (s.probe_bytes_per_s > 0 && s.probe_at >= 0 && now - s.probe_at <= kProbeFresh)
      l.probe_bytes_per_s = s.probe_bytes_per_s;
    // The planner prices propagation: the minimum RTT, not one inflated by the job's queues.
    const Nanos rtt = s.rtt_min > 0 ? s.rtt_min : s.rtt_smoothed;
    l.rtt_s = rtt > 0 ? seconds(rtt) : -1;
    l.rtt_trend = s.rtt_trend;
    l.loss = s.loss_rate;
    l.windows = s.windows;
    row.links.push_back(l);
  }
  return row;
}

void EgressMeter::on_total(uint64_t bytes, Nanos now, std::span<const uint64_t> per_peer) {
  bool restart = start_ < 0 || bytes <= last_bytes_ || start_peer_.size() != per_peer.size();
  for (size_t j = 0; !restart && j < per_peer.size(); ++j) restart = per_peer[j] < last_peer_[j];
  if (restart) {
    // Idle (or first call). A busy period shorter than a window still says what the site
    // sent at once: a round's burst (often tens of milliseconds on a fast link) never fills
    // a window, and leaving it out left only slow trickles to set the peak.
    if (start_ >= 0 && last_at_ - start_ >= min_span_) close(last_at_, last_bytes_, last_peer_);
    start_ = last_at_ = now;
    start_bytes_ = last_bytes_ = bytes;
    start_peer_.assign(per_peer.begin(), per_peer.end());
    last_peer_ = start_peer_;
    return;
  }
  last_bytes_ = bytes;
  last_at_ = now;
  last_peer_.assign(per_peer.begin(), per_peer.end());
  if (now - start_ < window_) return;
  close(now, bytes, per_peer);
  start_ = now;
  start_bytes_ = bytes;
  start_peer_.assign(per_peer.begin(), per_peer.end());
}

void EgressMeter::close(Nanos now, uint64_t bytes, std::span<const uint64_t> per_peer) {
  bool shared = per_peer.empty();
  if (!shared) {
    uint64_t sum = 0;
    for (size_t j = 0; j < per_peer.size(); ++j) sum += per_peer[j] - start_peer_[j];
    int parts = 0;
    for (size_t j = 0; j < per_peer.size(); ++j)
      parts += sum > 0 && static_cast<double>(per_peer[j] - start_peer_[j]) >= min_part_ * static_cast<double>(sum);
    shared = parts >= 2;
  }
  if (shared && now > start_) peak_ = std::max(peak_, static_cast<double>(bytes - start_bytes_) / seconds(now - start_));
}

}  // namespace sg::controller
