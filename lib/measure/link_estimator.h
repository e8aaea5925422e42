// Passive per-link throughput estimation from the DATA traffic itself (NetStorm's passive
// awareness), plus the RTT trend and loss the compression policy needs.
//
// Feeding: every DATA arrival is one ArrivalSample for the directed link it crossed last; a
// relayed chunk is one at the relay (origin -> relay, delays and all) and one at its
// destination (relay -> destination, bytes only: its delays span both links). A link that
// carries relayed traffic beside its own would otherwise look as slow as its own share.
// Optional packet-pair probes cover links that carry nothing; a configured prior covers links
// never measured.
//
// Rate samples ("windows"): arrivals of a link form busy periods; a gap longer than
// idle_gap ends one, because idle time says nothing about capacity. A period's rate is the
// bytes that arrived after its first arrival divided by the time since that arrival (the
// delivery rate). A window sums its periods' bytes and durations and closes at end_round()
// or once it spans max_window, so every round with traffic gives each link >= 1 window.
// App-limited windows may raise the estimate, never lower it (BBR's rule): their rate is what
// the sender offered -- a streaming sender forwards chunks as fast as they come from upstream
// -- not what the link can carry. A window is app-limited when
//   - a sample reported less in flight than half the estimate times the minimum RTT, or
//   - no sample reported in-flight data and most of the window's delay samples found no queue:
//     one-way delays (arrival minus the DATA's send stamp) within queue_delay of their minimum
//     over the last kRttRounds rounds, or, for samples without a stamp, RTTs within queue_delay
//     of the link's base RTT (the smaller of the minimum over the last kRttRounds rounds and
//     the prior's RTT); queue_delay = max(queue_delay_min, queue_delay_frac * base RTT). A link
//     that limits its traffic keeps a queue most of the time (a paced sender probing for more
//     builds one every cycle); a link with spare capacity lets most packets through at once.
//     The one-way delay is preferred: an RTT also carries the queue of the reverse link (the
//     ACKs share it with that link's data), so a lightly used link whose reverse is busy would
//     look queued, and the little it carries would be taken for its capacity. The clocks'
//     offset cancels in the difference to the minimum.
//   - its senders said so: at least a quarter of its copies carried the sender's app-limited
//     flag (a streaming sender forwarding results as they complete, a transfer's tail). The
//     sender knows; the delay signals only guess, and they guess wrong on a link that carries
//     a backlogged transfer (whose queue marks the window link-limited) beside a streamed one
//     (whose pace sets the window's rate): the estimate then sank to the streamed pace, the
//     planner moved traffic off the link, and what was left could never show the link's rate.
// Windows with neither signal count as link-limited. A prior is the estimate until traffic
// says otherwise: app-limited traffic below it is ignored, and replacing it takes a confirmed
// step like any other change (so a planner sees it as one). An estimate below the prior that
// no link-limited window confirmed for stale_after yields to a probe or the prior: a link a
// planner left for being slow carries too little to show it recovered.
//
// Smoothing and change detection: a window within change_threshold of the estimate is
// folded in by EWMA (ewma_alpha). A window outside it is held back; change_confirm
// consecutive windows on the same side replace the estimate by their mean. Bound: a step
// change larger than change_threshold is adopted after change_confirm windows, i.e. within
// change_confirm rounds (default 2) when windows close once per round; from then on the
// estimate is within the window noise of the new rate. Smaller steps are tracked by the
// EWMA (a 15% step is 90% absorbed after 8 windows at alpha 0.25).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "common/clock.h"

namespace sg::measure {

struct ArrivalSample {
  uint16_t from = 0;
  uint16_t to = 0;
  uint32_t bytes = 0;
  Nanos at = 0;
  int64_t inflight_bytes = -1;  // sender's bytes in flight on this link when sent; -1 unknown
  Nanos rtt = -1;               // an RTT sample (e.g. from an ACK); -1 none
  Nanos owd = kNoOwd;           // arrival minus the sender's send stamp (clock offset included)
  // The last hop of a relayed copy: bytes only (no delay sample). A window of nothing else is
  // app-limited -- the relay forwards what the first hop brings.
  bool relayed = false;
  // The sender said it had nothing more to send when it sent this (wire::kFlagAppLimited).
  bool app_limited = false;
};

struct EstimatorConfig {
  int sites = 0;
  Nanos idle_gap = 20 * kMilli;      // longer silence ends a busy period
  Nanos max_window = 200 * kMilli;   // a window closes by itself after this much busy time
  uint32_t min_window_bytes = 64 * 1024;  // less than this in a window is no rate sample
  double ewma_alpha = 0.25;
  double change_threshold = 0.20;
  int change_confirm = 2;
  Nanos stale_after = 30 * kSecond;  // traffic estimates older than this yield to probes (drops: to the prior)
  Nanos queue_delay_min = 5 * kMilli;  // standing queue that marks a window link-limited ...
  double queue_delay_frac = 0.10;      // ... or this fraction of the base RTT, the larger
};

enum class Source : uint8_t { kNone, kTraffic, kProbe, kPrior };

struct LinkSummary {
  double bytes_per_s = 0;  // best current estimate (0 if nothing known)
  Source source = Source::kNone;
  Nanos updated_at = -1;   // when that estimate last changed
  uint32_t windows = 0;    // traffic windows folded in so far
  uint32_t app_limited = 0;  // of those, app-limited (could only raise the estimate)
  uint32_t changes = 0;    // step changes adopted
  Nanos last_change_at = -1;
  // RTT and loss (for the compression policy).
  Nanos rtt_min = -1;       // minimum over the last kRttRounds rounds
  Nanos rtt_smoothed = -1;  // EWMA 1/8 of samples
  double rtt_trend = 1.0;   // short-term / long-term per-round mean RTT; > 1 means rising
  double loss_rate = 0;     // EWMA of per-round lost/sent
  // The latest probe result, whatever the estimate's source (0: never probed).
  double probe_bytes_per_s = 0;
  Nanos probe_at = -1;
};

class LinkEstimator {
 public:
  static constexpr int kRttRounds = 8;

  explicit LinkEstimator(const EstimatorConfig& cfg);

  // Hot path: O(1), allocates nothing. Samples for unknown sites are counted and dropped.
  void on_arrival(const ArrivalSample& s);
  // Packet pair: `bytes` of the second packet arrived `gap` after the first.
  void on_probe_pair(uint16_t from, uint16_t to, uint32_t bytes, Nanos gap, Nanos at);
  // A probe train too quick to time: the link carries at least `bytes_per_s`. Probe figures
  // below it rise to it; a link never probed takes it as its probe figure.
  void on_probe_bound(uint16_t from, uint16_t to, double bytes_per_s, Nanos at);
  // Per round and link: chunks sent and how many were lost (e.g. from SACK gaps).
  void on_loss(uint16_t from, uint16_t to, uint32_t sent, uint32_t lost);
  // What is known before any measurement (configuration, the last job): capacity and,
  // optionally, the base RTT (propagation), which anchors the standing-queue test.
  void set_prior(uint16_t from, uint16_t to, double bytes_per_s, Nanos rtt = -1);
  // Closes every open window and rolls the RTT/loss statistics over.
  void end_round(Nanos now);

  LinkSummary summary(uint16_t from, uint16_t to, Nanos now) const;
  double bytes_per_s(uint16_t from, uint16_t to, Nanos now) const { return summary(from, to, now).bytes_per_s; }
  uint64_t dropped_samples() const { return dropped_; }
  int sites() const { return cfg_.sites; }

 private:
  // The minimum of a delay over the last kRttRounds rounds that had samples (a round without
  // any keeps the older ones).
  class RoundMin {
   public:
    RoundMin() { std::fill(std::begin(v_), std::end(v_), kNoOwd); }
    void add(Nanos x) {
      Nanos& m = v_[slot_];
      m = m == kNoOwd ? x : std::min(m, x);
      seen_ = true;
    }
    void roll() {
      if (!seen_) return;
      slot_ = (slot_ + 1) % kRttRounds;
      v_[slot_] = kNoOwd;
      seen_ = false;
    }
    Nanos min_or(Nanos none) const {
      Nanos m = kNoOwd;
      for (Nanos x : v_)
        if (x != kNoOwd && (m == kNoOwd || x < m)) m = x;
      return m == kNoOwd ? none : m;
    }

   private:
    Nanos v_[kRttRounds];
    int slot_ = 0;
    bool seen_ = false;
  };

  struct Link {
    // Current busy period and window.
    Nanos period_start = -1, last_at = -1;
    uint64_t period_bytes = 0;  // bytes after the period's first arrival
    uint64_t win_bytes = 0;
    Nanos win_time = 0;
    bool win_app_limited = false;  // a sample reported little in flight
    bool win_inflight_known = false;
    uint32_t win_rtt_n = 0, win_rtt_queued = 0;  // RTT samples, and those behind a queue
    uint32_t win_owd_n = 0, win_owd_queued = 0;  // one-way delay samples, and those behind a queue
    uint32_t win_relayed_n = 0;                  // relayed last-hop samples (bytes only)
    uint32_t win_n = 0, win_sender_app = 0;      // samples, and those their senders flagged app-limited
    // Estimate and change detection.
    double est = 0;
    Nanos est_at = -1;
    uint32_t windows = 0, changes = 0, app_windows = 0;
    Nanos change_at = -1;
    Nanos limited_at = -1;  // last link-limited window
    int pending = 0;  // consecutive out-of-band windows (sign = side)
    double pending_sum = 0;
    // Probes and prior.
    double probe = 0;  // median of the last kProbeKeep results (fewer: the latest)
    Nanos probe_at = -1;
    double probe_last[3] = {};
    uint32_t probes = 0;
    double prior = 0;
    Nanos prior_rtt = -1;
    // RTT and loss.
    RoundMin rtt_min;
    Nanos srtt = -1;
    double round_rtt_sum = 0;
    uint32_t round_rtt_n = 0;
    double rtt_short = 0, rtt_long = 0;
    uint64_t round_sent = 0, round_lost = 0;
    double loss = 0;
    RoundMin owd_min;  // one-way delays (the clocks' offset included)
  };
  static void settle_probe(Link& l);  // the probe figure from the stored results

  Link* link(uint16_t from, uint16_t to);
  const Link* link(uint16_t from, uint16_t to) const;
  void close_period(Link& l);
  void close_window(Link& l, Nanos now);
  Nanos base_rtt(const Link& l) const;
  Nanos queue_allowance(Nanos base_rtt) const;
  bool queued(const Link& l, Nanos rtt) const;
  bool owd_queued(const Link& l, Nanos owd) const;
  bool window_app_limited(const Link& l) const;
  void fold(Link& l, double rate, bool app_limited, Nanos now);

  EstimatorConfig cfg_;
  std::vector<Link> links_;
  uint64_t dropped_ = 0;
};

}  // namespace sg::measure
