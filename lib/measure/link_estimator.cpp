#include "measure/link_estimator.h"

#include <algorithm>
#include <cmath>

namespace sg::measure {
LinkEstimator::LinkEstimator(const EstimatorConfig& cfg)
    : cfg_(cfg), links_(static_cast<size_t>(std::max(0, cfg.sites)) * std::max(0, cfg.sites)) {}

LinkEstimator::Link* LinkEstimator::link(uint16_t from, uint16_t to) {
  if (from >= cfg_.sites || to >= cfg_.sites || from == to) return nullptr;
  return &links_[static_cast<size_t>(from) * cfg_.sites + to];
}

const LinkEstimator::Link* LinkEstimator::link(uint16_t from, uint16_t to) const {
  return const_cast<LinkEstimator*>(this)->link(from, to);
}

void LinkEstimator::on_arrival(const ArrivalSample& s) {
  Link* l = link(s.from, s.to);
  if (!l) {
    ++dropped_;
    return;
  }
  ++l->win_n;
  if (s.app_limited) ++l->win_sender_app;
  if (s.relayed) {
    ++l->win_relayed_n;  // its delays span two links: its bytes count, its delays do not
  } else {
    if (s.rtt > 0) {
      l->srtt = l->srtt < 0 ? s.rtt : l->srtt + (s.rtt - l->srtt) / 8;
      l->rtt_min.add(s.rtt);
      l->round_rtt_sum += static_cast<double>(s.rtt);
      ++l->round_rtt_n;
      ++l->win_rtt_n;
      if (queued(*l, s.rtt)) ++l->win_rtt_queued;
    }
    if (s.owd != kNoOwd) {
      l->owd_min.add(s.owd);
      ++l->win_owd_n;
      if (owd_queued(*l, s.owd)) ++l->win_owd_queued;
    }
    if (s.inflight_bytes >= 0) {
      l->win_inflight_known = true;
      const double ref = l->est > 0 ? l->est : l->prior;
      const Nanos mrtt = l->rtt_min.min_or(-1);
      if (ref > 0 && mrtt > 0 && static_cast<double>(s.inflight_bytes) < 0.5 * ref * seconds(mrtt)) l->win_app_limited = true;
    }
  }
  if (l->period_start < 0 || s.at - l->last_at > cfg_.idle_gap) {
    // First arrival of a busy period: it marks the start; its own bytes arrived "before".
    if (l->period_start >= 0) close_period(*l);
    l->period_start = l->last_at = s.at;
    l->period_bytes = 0;
    return;
  }
  l->period_bytes += s.bytes;
  l->last_at = std::max(l->last_at, s.at);  // a sample older than the last one adds bytes only
  if (l->win_time + (l->last_at - l->period_start) >= cfg_.max_window) {
    close_window(*l, s.at);
    l->period_start = l->last_at;  // traffic continues: the next period starts here
    l->period_bytes = 0;
  }
}

void LinkEstimator::close_period(Link& l) {
  if (l.period_start >= 0 && l.last_at > l.period_start) {
    l.win_bytes += l.period_bytes;
    l.win_time += l.last_at - l.period_start;
  }
  l.period_start = -1;
  l.period_bytes = 0;
}

Nanos LinkEstimator::base_rtt(const Link& l) const {
  Nanos base = l.rtt_min.min_or(-1);
  if (l.prior_rtt > 0 && (base <= 0 || l.prior_rtt < base)) base = l.prior_rtt;
  return base;
}

Nanos LinkEstimator::queue_allowance(Nanos base) const {
  return std::max(cfg_.queue_delay_min, static_cast<Nanos>(cfg_.queue_delay_frac * static_cast<double>(std::max<Nanos>(base, 0))));
}

bool LinkEstimator::queued(const Link& l, Nanos rtt) const {
  const Nanos base = base_rtt(l);
  return base > 0 && rtt > base + queue_allowance(base);
}

bool LinkEstimator::owd_queued(const Link& l, Nanos owd) const {
  // The sample itself is in the minimum, so there is always a floor; its distance from the
  // floor is queueing (the clocks' offset is in both).
  return owd - l.owd_min.min_or(owd) > queue_allowance(base_rtt(l));
}

bool LinkEstimator::window_app_limited(const Link& l) const {
  if (l.win_app_limited) return true;
  if (4 * l.win_sender_app >= l.win_n && l.win_sender_app > 0) return true;
  if (l.win_inflight_known) return false;
  if (l.win_owd_n > 0) return 2 * l.win_owd_queued < l.win_owd_n;
  if (l.win_rtt_n == 0) return l.win_relayed_n > 0;  // relayed bytes alone: what the relay was given
  return 2 * l.win_rtt_queued < l.win_rtt_n;
}

void LinkEstimator::close_window(Link& l, Nanos now) {
  close_period(l);
  if (l.win_bytes >= cfg_.min_window_bytes && l.win_time > 0)
    fold(l, static_cast<double>(l.win_bytes) / seconds(l.win_time), window_app_limited(l), now);
  l.win_bytes = 0;
  l.win_time = 0;
  l.win_app_limited = false;
  l.win_inflight_known = false;
  l.win_rtt_n = l.win_rtt_queued = 0;
  l.win_owd_n = l.win_owd_queued = 0;
  l.win_relayed_n = 0;
  l.win_n = l.win_sender_app = 0;
}

void LinkEstimator::fold(Link& l, double rate, bool app_limited, Nanos now) {
  ++l.windows;
  if (app_limited) ++l.app_windows;
  else l.limited_at = now;
  // An app-limited rate is what the sender offered: the link carries at least that much.
  if (l.est <= 0 && l.prior > 0) l.est = l.prior;  // then a departure from it is a change
  if (app_limited && rate < l.est) return;
  if (l.est <= 0) {
    l.est = rate;
    l.est_at = now;
    return;
  }
  const double dev = (rate - l.est) / l.est;
  if (std::fabs(dev) <= cfg_.change_threshold) {
    l.est += cfg_.ewma_alpha * (rate - l.est);
    l.pending = 0;
    l.pending_sum = 0;
    l.est_at = now;
    return;
  }
  const int side = dev > 0 ? 1 : -1;
  if (l.pending * side <= 0) {
    l.pending = 0;
    l.pending_sum = 0;
  }
  l.pending += side;
  l.pending_sum += rate;
  if (std::abs(l.pending) >= cfg_.change_confirm) {
    l.est = l.pending_sum / std::abs(l.pending);
    ++l.changes;
    l.change_at = now;
    l.est_at = now;
    l.pending = 0;
    l.pending_sum = 0;
  }
}

void LinkEstimator::on_probe_pair(uint16_t from, uint16_t to, uint32_t bytes, Nanos gap, Nanos at) {
  Link* l = link(from, to);
  if (!l || gap <= 0 || bytes == 0) {
    ++dropped_;
    return;
  }
  // The median of the last three trains: one odd train (a compressed or stretched
  // dispersion) is ignored, and a link that really changed shows it after two trains. An
  // average follows a step only slowly (with weight 1/4 a tenfold drop took eight trains).
  l->probe_last[l->probes % 3] = bytes / seconds(gap);
  ++l->probes;
  settle_probe(*l);
  l->probe_at = at;
}

// The latest result until three are in, then the median of the last three.
void LinkEstimator::settle_probe(Link& l) {
  if (l.probes < 3) {
    l.probe = l.probe_last[(l.probes - 1) % 3];
    return;
  }
  const double a = l.probe_last[0], b = l.probe_last[1], c = l.probe_last[2];
  l.probe = std::max(std::min(a, b), std::min(std::max(a, b), c));
}

void LinkEstimator::on_probe_bound(uint16_t from, uint16_t to, double bytes_per_s, Nanos at) {
  Link* l = link(from, to);
  if (!l || !(bytes_per_s > 0)) {
    ++dropped_;
    return;
  }
  if (l->probes == 0) {
    l->probe = std::max(l->probe, bytes_per_s);
  } else {
    for (uint32_t i = 0; i < std::min<uint32_t>(l->probes, 3); ++i) l->probe_last[i] = std::max(l->probe_last[i], bytes_per_s);
    settle_probe(*l);
  }
  l->probe_at = at;
}

void LinkEstimator::on_loss(uint16_t from, uint16_t to, uint32_t sent, uint32_t lost) {
  Link* l = link(from, to);
  if (!l || lost > sent) {
    ++dropped_;
    return;
  }
  l->round_sent += sent;
  l->round_lost += lost;
}

void LinkEstimator::set_prior(uint16_t from, uint16_t to, double bytes_per_s, Nanos rtt) {
  if (Link* l = link(from, to)) {
    l->prior = bytes_per_s;
    l->prior_rtt = rtt;
  }
}

void LinkEstimator::end_round(Nanos now) {
  for (Link& l : links_) {
    close_window(l, now);
    if (l.round_rtt_n > 0) {
      const double mean = l.round_rtt_sum / l.round_rtt_n;
      l.rtt_short = l.rtt_short <= 0 ? mean : 0.5 * l.rtt_short + 0.5 * mean;
      l.rtt_long = l.rtt_long <= 0 ? mean : 0.9 * l.rtt_long + 0.1 * mean;
    }
    l.rtt_min.roll();
    l.round_rtt_sum = 0;
    l.round_rtt_n = 0;
    l.owd_min.roll();
    if (l.round_sent > 0) {
      const double r = static_cast<double>(l.round_lost) / static_cast<double>(l.round_sent);
      l.loss += cfg_.ewma_alpha * (r - l.loss);
    }
    l.round_sent = l.round_lost = 0;
  }
}

LinkSummary LinkEstimator::summary(uint16_t from, uint16_t to, Nanos now) const {
  LinkSummary s;
  const Link* l = link(from, to);
  if (!l) return s;
  const bool traffic = l->est > 0 && l->est_at >= 0;
  // A drop below the prior stands only while link-limited windows keep confirming it: a link
  // the planner left for being slow carries little or nothing afterwards, so its traffic
  // could never show that it recovered. Unconfirmed for stale_after, it yields to a probe or
  // the prior, and the traffic the planner then sends re-tests it.
  const bool unconfirmed_drop = traffic && l->est < l->prior && now - l->limited_at > cfg_.stale_after;
  const bool traffic_fresh = traffic && !unconfirmed_drop && now - l->est_at <= cfg_.stale_after;
  const bool probe_fresh = l->probe > 0 && now - l->probe_at <= cfg_.stale_after;
  if (traffic_fresh || (traffic && !unconfirmed_drop && !probe_fresh)) {
    s.bytes_per_s = l->est;
    s.source = Source::kTraffic;
    s.updated_at = l->est_at;
  } else if (l->probe > 0) {
    s.bytes_per_s = l->probe;
    s.source = Source::kProbe;
    s.updated_at = l->probe_at;
  } else if (l->prior > 0) {
    s.bytes_per_s = l->prior;
    s.source = Source::kPrior;
  }
  s.windows = l->windows;
  s.app_limited = l->app_windows;
  s.changes = l->changes;
  s.last_change_at = l->change_at;
  s.rtt_min = l->rtt_min.min_or(-1);
  s.rtt_smoothed = l->srtt;
  s.rtt_trend = l->rtt_long > 0 ? l->rtt_short / l->rtt_long : 1.0;
  s.loss_rate = l->loss;
  s.probe_bytes_per_s = l->probe;
  s.probe_at = l->probe_at;
  return s;
}

}  // namespace sg::measure
