// The controller: every decision a gateway makes about the network, in one DPDK-free class
// with time passed in. The gateway's control thread (control/policy_agent) and the simulator
// (lib/sim) construct this same class and feed it the same kinds of input:
//
//   inputs   measurement rows (lib/wire/measure_row) that every site sends about the links
//            into it -- passive windows of the job's own traffic and probe results -- and
//            each site's peak egress rate; the configured uplinks; the plan in force.
//   decides  whether to replan (a candidate must beat the plan in force by recompute_change
//            on the round-time model, and min_interval must have passed since the last
//            proposal), the new plan with the configured planner (the same planner every
//            time: planner.h is the only plan-building path), its multipath splits, each tree
//            link's codec (NetSenseML, link_codecs.h), and site uplinks it can infer from
//            traffic where the config gives none.
//
// Only the coordinator's controller plans; every site's controller makes its own row
// (make_row) and schedules its own probes (probes.h). It never reads anything a gateway
// could not observe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "config/config.h"
#include "controller/link_codecs.h"
#include "controller/planner.h"
#include "controller/receivers.h"
#include "measure/link_estimator.h"
#include "topology/network.h"
#include "topology/plan.h"
#include "wire/measure_row.h"

namespace sg::controller {

struct ControllerConfig {
  int sites = 0;
  int self = 0;         // plan index of this site
  int coordinator = 0;  // plan index of the site that plans
  PlanSettings plan;
  double recompute_change = 0.2;  // relative round-time gain that justifies a new plan
  Nanos min_interval = kSecond;   // at most one proposal per interval
  Nanos decide_every = 0;         // the planning tick: decide() considers a replan at most this often
  config::CompressionConfig compression;
  // sync.mode selmcast: plans carry each site's receivers (receivers.h) and the controller
  // replans those, never the trees (which stay the blind ones, unused by that mode).
  config::SyncSection sync;
  uint32_t job = 1;  // seeds the random receivers every site draws alike
  std::vector<double> uplinks;    // configured bytes/s per site (<= 0: not known)
  // Links nobody measured yet: the median of the measured ones, else these.
  double prior_bytes_per_s = 125e6;
  double prior_rtt_s = 0.010;
  double agg_bytes_per_s = 5e9;   // aggregation is far faster than any WAN link
  // A site's links together measuring this much above its peak egress share an uplink.
  double uplink_share_factor = 1.25;
  // Proposals allowed over the job (0: no limit). 1 makes the "stuck" baseline: one plan
  // from the first measurements, never revised.
  uint32_t max_proposals = 0;
  // New trees are proposed only when this many decisions in a row chose the same ones (the
  // first measured plan excepted): a view that swings between rows must not flap the plan.
  uint32_t confirm_decisions = 2;
  // Measured regret: a plan with new trees is timed over this many rounds (its first one,
  // the switch, left out) against the plan before it; slower by more than regret_margin, the
  // controller goes back to the plan before and proposes no new trees for regret_hold
  // (doubling at each regret, up to regret_hold_max). The round-time model prices what the view says; a view
  // measured while senders start up, or one that misses what the links carry, can make a
  // worse plan look better, and only the rounds show it. 0: never.
  uint32_t regret_rounds = 5;
  // The first trees a coordinator times (the bandwidth-blind plan) are replaced as soon as a
  // view exists, after a few rounds: they are the reference for the first switch from this
  // many timed rounds on. Its early rounds include the senders' start, so the reference is
  // lenient: it catches a first switch to far slower trees, not a marginal one.
  uint32_t regret_rounds_first = 2;
  double regret_margin = 0.15;
  Nanos regret_hold = 30 * kSecond;
  // A link that recovers must get its chance again within minutes, however often the view
  // was wrong before (doubling without a cap held for 32 minutes at the seventh regret).
  Nanos regret_hold_max = 8 * 60 * kSecond;
  // With probes every link gets measured: the first plan waits for the whole view (or until
  // `full_view_wait` after the first row), instead of planning on medians for the rest.
  bool expect_full_view = false;
  Nanos full_view_wait = 10 * kSecond;
};

// The sites of the job in plan order (sorted site ids: this site and its peers).
std::vector<uint16_t> job_sites(const config::GatewayConfig& cfg);
// Every job site's uplink in plan order (bytes/s; 0: not known), from site.uplink_mbit and
// peers[].uplink_mbit.
std::vector<double> site_uplinks(const config::GatewayConfig& cfg);
// The settings a gateway's config gives.
ControllerConfig controller_config(const config::GatewayConfig& cfg);

struct ControllerStats {
  uint64_t rows = 0, rows_refused = 0;
  uint64_t replans_considered = 0, proposals = 0, codec_proposals = 0;
  uint64_t regrets = 0;  // plans with new trees that measured slower than the one before: went back
  Nanos regret_hold = 0;  // the hold the last regret began (0: none yet)
  double last_gain = 0;
};

class Controller {
 public:
  explicit Controller(ControllerConfig cfg);
  const ControllerConfig& config() const { return cfg_; }
  // A config reload: the replan rule from the next decision on.
  void retune(double recompute_change, Nanos min_interval) {
    cfg_.recompute_change = recompute_change;
    cfg_.min_interval = min_interval;
  }
  bool coordinator() const { return cfg_.self == cfg_.coordinator; }

  // The first plan, before any measurement: every site computes the same one. "always"
  // compression sets its codec on every tree link from the start.
  topo::Plan initial_plan(std::string* error = nullptr) const;

  // Coordinator: a site's row (links k -> row.site). Rows of unknown sites are refused.
  void on_row(const wire::MeasureRow& row, Nanos now);
  // Coordinator: a plan to propose now, or nothing. Call often; it decides at most once per
  // new set of rows (codec hysteresis counts decisions) and once per min_interval.
  std::optional<topo::Plan> decide(const topo::Plan& current, Nanos now);
  // The proposal went out (min_interval starts); a refused proposal is simply retried later.
  void on_proposed(Nanos now) { last_proposal_ = now; }
  // Coordinator: this site completed a round under `plan`, `duration` after the round before
  // it completed (what the sites' training sees of a plan). Feeds the regret check above.
  void on_round_done(const topo::Plan& plan, Nanos duration);

  // The network the planner sees now: measured links, the median for the rest, uplinks.
  topo::Network view() const;
  // A site's uplink as the planner uses it: configured, else inferred from its rows (0: none).
  double uplink(int site) const;
  // For debugging a plan: each link's reported figure, source and probe, each site's uplink.
  void print_inputs(std::FILE* f) const;
  const ControllerStats& stats() const { return stats_; }
  const LinkCodecs& codecs() const { return codecs_; }
  uint64_t rows_seen() const { return stats_.rows; }

 private:
  ControllerConfig cfg_;
  int n_;
  std::vector<LinkView> links_;       // [i*n+j]: as reported (the estimator's figure)
  std::vector<double> probe_;         // [i*n+j]: the latest probe of the link alone (0: none)
  std::vector<uint8_t> source_;       // [i*n+j]: measure::Source of links_
  std::vector<uint32_t> windows_;     // [i*n+j]: traffic windows reported so far
  std::vector<Nanos> active_at_;      // [i*n+j]: when a row last showed new windows (-1: never)
  // The link's own rate as the planner should see it (see view()).
  double link_rate(int i, int j, const std::vector<double>& out_sum, const std::vector<double>& in_sum) const;
  bool active(size_t k) const;  // the link carried traffic recently
  Nanos last_row_at_ = -1;
  std::vector<double> rtt_;           // seconds, [i*n+j]; < 0 unknown
  std::vector<double> egress_peak_;   // per site
  std::vector<double> update_lag_;    // per site, seconds (0: not reported)
  std::vector<double> overlap_;       // per site, share of update_lag_ (< 0: not reported)
  LinkCodecs codecs_;
  Nanos last_proposal_ = -1;
  Nanos last_decision_ = -1;
  Nanos first_row_at_ = -1;
  uint64_t candidate_sig_ = 0;   // the trees the last decisions chose, and how many in a row
  uint32_t candidate_runs_ = 0;
  uint64_t rows_at_decision_ = 0;
  ControllerStats stats_;
  // Regret (ControllerConfig::regret_rounds): rounds of the trees in force since they began,
  // the trees before them with their median, and a plan to go back to.
  uint64_t run_sig_ = 0;
  bool run_first_ = true;
  bool run_is_first_plan_ = false;  // the trees being timed are the first this controller timed
  std::vector<double> run_;
  std::optional<topo::Plan> run_plan_;
  struct Timed {
    uint64_t sig = 0;
    double median = 0;
    topo::Plan plan;
  };
  std::optional<Timed> before_;
  std::optional<topo::Plan> go_back_;
  Nanos hold_until_ = -1;
  Nanos hold_ = 0;
  std::optional<topo::Plan> decide_receivers(const topo::Plan& current, const topo::Network& net);
  ReceiverSettings receiver_settings() const;
};

// A site's row from its estimator: every link k -> self, with the latest recent probe of each.
wire::MeasureRow make_row(const measure::LinkEstimator& est, int sites, int self, uint32_t round, double egress_peak,
                          Nanos now);

// A hash of a plan's trees (roots, shard ranges, parents).
uint64_t trees_signature(const topo::Plan& p);

// Peak sending rate of a site from its cumulative bytes sent: the highest rate over windows
// of `window` in which it kept sending, and over busy periods shorter than that (from
// `min_span` on) when they end. Given the bytes per peer too, only windows in which
// at least two peers each took `min_part` of the bytes count: the peak then says what the
// site's links carried together, which is what the controller compares with the sum of
// their rates to infer a shared uplink (Controller::uplink). A site whose links are busy one
// after the other (a leaf sending up to one root, then another) shows no such window, and its
// one-link peak says nothing about an uplink: counted, it made the controller "infer" uplinks
// of a third of the links' rates on the testbed's WAN, where every pair has its own.
class EgressMeter {
 public:
  explicit EgressMeter(Nanos window = 200 * kMilli, double min_part = 0.25, Nanos min_span = 20 * kMilli)
      : window_(window), min_part_(min_part), min_span_(min_span) {}
  void on_total(uint64_t bytes_sent, Nanos now, std::span<const uint64_t> per_peer = {});
  double peak() const { return peak_; }

 private:
  void close(Nanos now, uint64_t bytes, std::span<const uint64_t> per_peer);
  Nanos window_;
  double min_part_;
  Nanos min_span_;  // busy periods shorter than a window count from this long on
  Nanos start_ = -1, last_at_ = -1;
  uint64_t start_bytes_ = 0, last_bytes_ = 0;
  std::vector<uint64_t> start_peer_, last_peer_;
  double peak_ = 0;
};

}  // namespace sg::controller
