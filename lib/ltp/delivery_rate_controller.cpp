#include "ltp/delivery_rate_controller.h"

#include <algorithm>

namespace sg::ltp {

void DeliveryRateController::reset(Nanos now, uint32_t mss) {
  mss_ = mss;
  // What the next transfer resumes from: the filter as measured, without the timeout and
  // overload penalties (they answer this transfer's events; the resume check answers the
  // next one's). A transfer that never got past the resume check can only raise the model.
  if (mode_ != Mode::kResume) {
    path_bw_ = *std::max_element(bw_rounds_.begin(), bw_rounds_.end());
    path_full_ = mode_ != Mode::kStartup;
    unjudged_ = false;
  } else {
    // Ended before the resume check could judge it: shorter than half a round trip of ACKs,
    // as most of a round's transfers on a long fast link are. Its delivery-rate samples say
    // nothing (sent within one flight, each spans a round trip), but its ACKs came back
    // spaced as the path delivered the train. Their rate can raise the model, by at most the
    // probe gain it was sent at, never lower it (a short train cannot tell a shrunk path from
    // a compressed ACK stream; the first longer transfer's check does). The next transfer
    // then probes a quarter above the kept rate (gain()), so a path that grew, or a rate
    // first learnt in a busy moment, is found in a few rounds. Before, short transfers ran at
    // the rate learnt once, for good: the testbed's 400 Mbit/s links stayed at 120-150.
    const uint64_t bytes = train_last_d_ - train_d0_;
    const Nanos span = train_last_t_ - train_t0_;
    if (train_t0_ >= 0 && span > 0 && bytes >= 8ull * mss_) {
      const double ack_rate = static_cast<double>(bytes) * 1e9 / static_cast<double>(span);
      path_bw_ = std::max(path_bw_, std::min(ack_rate, cfg_.unjudged_resume_gain * path_bw_));
    }
    unjudged_ = true;
  }
  const bool keep = cfg_.keep_path_for > 0 && path_bw_ > 0 && min_rtt_ > 0 && now - path_stamp_ <= cfg_.keep_path_for;
  mode_ = keep ? Mode::kResume : Mode::kStartup;
  resume_bw_ = keep ? path_bw_ : 0;
  resume_full_ = keep && path_full_;
  resume_t0_ = train_t0_ = train_last_t_ = -1;
  resume_d0_ = train_d0_ = train_last_d_ = 0;
  resume_s0_ = 0;
  if (!keep) {
    path_bw_ = 0;
    path_full_ = false;
    min_rtt_ = 0;
    min_rtt_stamp_ = now;
  }
  bw_rounds_.fill(0);
  bw_slot_ = 0;
  btlbw_ = full_bw_ = ceiling_ = 0;
  dark_ = false;
  full_bw_count_ = 0;
  next_round_delivered_ = 0;
  round_stamp_ = now;
  cycle_ = 0;
  cycle_start_ = now;
  inflight_ = 0;
  round_lost_ = round_acked_ = round_lost_pkts_ = round_acked_pkts_ = 0;
  overloads_ = 0;
  overloaded_rounds_ = 0;
  episode_ = false;
  round_start_bw_ = 0;
  app_limited_round_ = false;
}

double DeliveryRateController::gain() const {
  switch (mode_) {
    case Mode::kStartup: return cfg_.startup_gain;
    case Mode::kDrain: return 1.0 / cfg_.startup_gain;
    case Mode::kProbeBw: return kCycle[cycle_];
    case Mode::kResume: return resume_full_ ? (unjudged_ ? cfg_.unjudged_resume_gain : 1.0) : cfg_.startup_gain;
  }
  return 1.0;
}

uint64_t DeliveryRateController::bdp() const {
  return static_cast<uint64_t>(btlbw_ * static_cast<double>(min_rtt_) / 1e9);
}

void DeliveryRateController::on_ack(const AckEvent& ev) {
  if (ev.acked_bytes > 0) dark_ = false;
  inflight_ = ev.inflight_bytes;
  path_stamp_ = ev.now;
  if (ev.rtt > 0 && (min_rtt_ == 0 || ev.rtt <= min_rtt_ || ev.now - min_rtt_stamp_ > cfg_.min_rtt_window)) {
    min_rtt_ = ev.rtt;
    min_rtt_stamp_ = ev.now;
  }
  bool round_start = false;
  undo_if_false(ev.spurious_bytes);
  round_acked_ += ev.acked_bytes;
  if (ev.acked_bytes > 0) ++round_acked_pkts_;
  // A round trip is at least rtt_floor long: on a LAN of a few microseconds a packet-timed
  // round would be about one packet, and the filter's ten rounds would remember too little
  // to ride over a receiver's scheduling stall.
  if (ev.prior_delivered >= next_round_delivered_ && ev.acked_bytes > 0 && ev.now - round_stamp_ >= cfg_.rtt_floor) {
    next_round_delivered_ = ev.delivered;
    round_stamp_ = ev.now;
    round_start = true;
    const uint64_t pkts = round_lost_pkts_ + round_acked_pkts_;
    const bool overload = pkts >= cfg_.congestion_min_packets &&
                          static_cast<double>(round_lost_) > cfg_.congestion_loss * static_cast<double>(round_lost_ + round_acked_);
    if (overload) {
      if (!episode_) {
        episode_ = true;
        undo_ceiling_ = ceiling_;
        episode_lost_ = episode_acked_ = episode_spurious_ = 0;
      }
      episode_lost_ += round_lost_;
      episode_acked_ += round_acked_;
    } else {
      episode_ = false;
    }
    round_lost_ = round_acked_ = round_lost_pkts_ = round_acked_pkts_ = 0;
    // Growth over the round trip that just ended (btlbw before this ACK's sample).
    const bool growing = btlbw_ >= kStartupGrowth * round_start_bw_;
    round_start_bw_ = btlbw_;
    overloaded_rounds_ = overload ? overloaded_rounds_ + 1 : 0;
    if (overload) {
      ++overloads_;
      // Startup's overshoot overflows the queue once the delivery rate has stopped growing
      // (or loses round trip after round trip); a loss burst on a lossy path (Gilbert-Elliott:
      // a few frames in a row) can hit an early round trip of a few dozen packets while the
      // rate still doubles. Ending startup there left the transfer in probe_bw at a few
      // Mbit/s, growing a quarter per eight round trips (the simulator's `lossy` profile: a
      // 3.3-second first round against 0.35 s modelled).
      if (mode_ == Mode::kStartup && (!growing || overloaded_rounds_ >= cfg_.startup_overload_rounds))
        mode_ = Mode::kDrain;
      ceiling_ = 0.85 * btlbw_;
    }
    // The filter ages only by round trips that measured the path: one whose samples were all
    // app-limited (a streaming sender waiting for upstream chunks) left its slot empty, and
    // moving on would forget the path's rate while it was merely not being used (Linux BBR
    // likewise inserts only usable samples into its max filter).
    if (bw_rounds_[bw_slot_] > 0) {
      bw_slot_ = (bw_slot_ + 1) % kBwRounds;
      bw_rounds_[bw_slot_] = 0;
    }
  }
  // An app-limited sample (a streaming sender waiting for upstream chunks) measures the
  // application, not the path: it may raise the estimate but never lower it (BBR's rule).
  if (ev.delivery_rate > 0 && (!ev.app_limited || ev.delivery_rate >= btlbw_)) {
    bw_rounds_[bw_slot_] = std::max(bw_rounds_[bw_slot_], ev.delivery_rate);
    if (ceiling_ > 0) ceiling_ = std::max(ceiling_, ev.delivery_rate);  // measured past the penalty
  }
  if (round_start) app_limited_round_ = ev.app_limited;
  update_btlbw();

  if (mode_ == Mode::kResume && !ev.held) {
    // The transfer's ACK train, all of it (an app-limited stretch only lowers its rate, and
    // it can only raise the model): what reset() takes if the check below never decides.
    if (ev.acked_bytes > 0) {
      if (train_t0_ < 0) {
        train_t0_ = ev.now;
        train_d0_ = ev.delivered;
      } else {
        train_last_t_ = ev.now;
        train_last_d_ = ev.delivered;
      }
    }
    resume_check(ev);
  }
  if (mode_ == Mode::kStartup && round_start && btlbw_ > 0 && !app_limited_round_) {
    if (btlbw_ >= full_bw_ * kStartupGrowth) {
      full_bw_ = btlbw_;
      full_bw_count_ = 0;
    } else if (++full_bw_count_ >= 3) {
      mode_ = Mode::kDrain;
    }
  }
  if (mode_ == Mode::kDrain && ev.inflight_bytes <= bdp()) {
    mode_ = Mode::kProbeBw;
    cycle_ = 2;  // start in a neutral phase
    cycle_start_ = ev.now;
  }
  // Each gain phase lasts a (floored) round trip: on a LAN, a phase of one 5-us min_rtt is
  // shorter than one packet at the paced rate, so the 1.25 phase would never send the extra
  // data that measures a faster path, and the rate learnt once would stay for good.
  if (mode_ == Mode::kProbeBw && min_rtt_ > 0 && ev.now - cycle_start_ >= std::max(min_rtt_, cfg_.rtt_floor)) {
    cycle_ = (cycle_ + 1) % kCycle.size();
    cycle_start_ = ev.now;
  }
}

void DeliveryRateController::resume_check(const AckEvent& ev) {
  if (ev.acked_bytes == 0) return;
  // The ACK rate measures the path only while the sender kept it busy: an app-limited ACK
  // restarts the window.
  if (ev.app_limited || resume_t0_ < 0) {
    resume_t0_ = ev.now;
    resume_d0_ = ev.delivered;
    resume_s0_ = ev.newest_acked_send;
    return;
  }
  const Nanos span = ev.now - resume_t0_;
  const uint64_t bytes = ev.delivered - resume_d0_;
  if (span < min_rtt_ / 2 || bytes < 8ull * mss_) return;
  const double rate = static_cast<double>(bytes) * 1e9 / static_cast<double>(span);
  // The path can deliver no faster than the sender offered. A sender that did not offer the
  // kept rate (its data came slower, from workers still pushing; or its engine lost the CPU)
  // and saw all it sent delivered has learnt nothing of the path: the window starts over and
  // the kept rate stays. On the testbed's 50 ms paths, 32 of 42 resume checks of a run
  // judged the path shrunk from such windows (kept 281 Mbit/s, delivered 145 of a slower
  // offer), and each took a probe cycle of 8 round trips per 25% to win back.
  const Nanos send_span = ev.newest_acked_send - resume_s0_;
  if (resume_s0_ > 0 && send_span > 0 && rate < cfg_.resume_confirm * resume_bw_) {
    const double offered = static_cast<double>(bytes) * 1e9 / static_cast<double>(send_span);
    if (offered < cfg_.resume_confirm * resume_bw_ && rate >= cfg_.resume_confirm * offered) {
      ++resumes_unjudged_;
      resume_t0_ = ev.now;
      resume_d0_ = ev.delivered;
      resume_s0_ = ev.newest_acked_send;
      return;
    }
  }
  if (rate >= cfg_.resume_confirm * resume_bw_) {
    ++resumes_confirmed_;
    bw_rounds_[bw_slot_] = std::max({bw_rounds_[bw_slot_], resume_bw_, rate});
    if (resume_full_) {
      // The kept rate is the path's; probe above it at once (the 1.25 phase, then the 0.75
      // that drains it). A round's transfer lasts a few round trips, too short for the cycle
      // to come round to its probe: cruising from a neutral phase, a path that shrank once
      // (a shared moment, a starved sender) was never found again, and the kept rate only
      // ever went down (ddp-step: rounds from 0.6 s to 1.4 s on unchanged links).
      mode_ = Mode::kProbeBw;
      cycle_ = 0;
      cycle_start_ = ev.now;
    } else {
      mode_ = Mode::kStartup;  // a lower bound: keep growing from it
    }
  } else {
    // Shrank, or is shared now: what it carried is the estimate. The kept rate queued at most
    // a buffer's worth; probe_bw's 0.75 phase drains that in a round trip. (A full drain at
    // 1/startup_gain, with every resumed sender on a shared link doing it at once, left the
    // link idle: 5-10% longer rounds in the simulator.)
    ++resumes_shrunk_;
    bw_rounds_[bw_slot_] = std::max(bw_rounds_[bw_slot_], rate);
    mode_ = Mode::kProbeBw;
    cycle_ = 1;
    cycle_start_ = ev.now;
  }
  ceiling_ = 0;
  update_btlbw();
  path_bw_ = btlbw_;
  path_full_ = mode_ != Mode::kStartup;
}

// Losses that the sender later finds false (the chunk's original was acknowledged: it was
// only late) are taken back: from the round trip in progress, and from the overload episode
// they may have started. Once the episode's true losses are no longer overload, its trims
// are undone (the ceiling returns to what it was before), as Linux undoes a congestion
// response that DSACKs or timestamps prove spurious. On the testbed, chunks declared lost in
// bursts that then all arrived (up to 1,769 in one 7 MB transfer, every one of them late)
// trimmed a 400 Mbit/s link's rate round trip after round trip to 4 Mbit/s, and one round
// took 4-6 s instead of 1.3.
void DeliveryRateController::undo_if_false(uint64_t spurious) {
  if (spurious == 0) return;
  const uint64_t now_part = std::min(spurious, round_lost_);
  round_lost_ -= now_part;
  if (!episode_) return;
  episode_spurious_ += spurious;
  const uint64_t lost = episode_lost_ > episode_spurious_ ? episode_lost_ - episode_spurious_ : 0;
  if (static_cast<double>(lost) > cfg_.congestion_loss * static_cast<double>(lost + episode_acked_ + episode_spurious_)) return;
  episode_ = false;
  ++undos_;
  ceiling_ = undo_ceiling_;
  update_btlbw();
}

void DeliveryRateController::update_btlbw() {
  btlbw_ = *std::max_element(bw_rounds_.begin(), bw_rounds_.end());
  if (ceiling_ > 0) btlbw_ = std::min(btlbw_, ceiling_);
}

void DeliveryRateController::on_loss(const LossEvent& ev) {
  round_lost_ += ev.lost_bytes;
  ++round_lost_pkts_;
  if (!ev.timeout) return;
  // Random loss is not a congestion signal here. A timeout means the path went dark: the
  // rate restarts from half -- once per outage: the timeouts that follow while nothing is
  // acknowledged say the same again, and halving on each would leave a path back from a
  // 2-second blackhole at 1/100 of its rate. Its presumed losses also count toward the round
  // trip's overload, and come off again if the originals prove only late (undo_if_false).
  // Not counting them at all was tried: the simulator's 64 sites x 1 GB took 26 s a round
  // instead of 3.7, with a third of the resends -- its rounds waited rather than resent (why
  // was not traced; perf/README).
  // Also tried and dropped (perf/README, "the testbed's long rounds, traced"): a loss
  // window until an ACK, as TCP sends (the simulator's 8-site 1 GB tree: 22.4 s a round
  // instead of 11.1), and keeping the rate when nothing of the transfer had been
  // acknowledged yet (the peer may merely not have begun the round; 8 sites x 1 GB with the
  // full stack: 2.9 s instead of 1.7).
  if (dark_) return;
  dark_ = true;
  ceiling_ = btlbw_ / 2;
  btlbw_ = ceiling_;
  resume_bw_ /= 2;
}

uint64_t DeliveryRateController::cwnd_bytes() const {
  const uint64_t floor = 4ull * mss_;
  const double rtt = static_cast<double>(std::max(min_rtt_, cfg_.rtt_floor)) / 1e9;
  if (mode_ == Mode::kResume) {
    const double bdp = resume_bw_ * rtt;
    return std::max<uint64_t>(static_cast<uint64_t>(std::max(gain(), cfg_.cwnd_gain) * bdp), floor);
  }
  if (btlbw_ <= 0 || min_rtt_ <= 0) return std::max<uint64_t>(10ull * mss_, floor);
  const double g = mode_ == Mode::kStartup ? cfg_.startup_gain : cfg_.cwnd_gain;
  return std::max<uint64_t>(static_cast<uint64_t>(g * btlbw_ * rtt), floor);
}

double DeliveryRateController::pacing_rate() const {
  double r;
  if (mode_ == Mode::kResume) {
    r = gain() * std::max(resume_bw_, btlbw_);
  } else if (btlbw_ <= 0) {
    r = cfg_.initial_rate > 0 ? cfg_.initial_rate
                              : cfg_.startup_gain * 10.0 * mss_ * 1e9 / static_cast<double>(min_rtt_ > 0 ? min_rtt_ : cfg_.initial_rtt);
  } else {
    r = gain() * btlbw_;
  }
  if (cfg_.max_rate > 0) r = std::min(r, cfg_.max_rate);
  return r;
}

LossDetection DeliveryRateController::loss_detection() const {
  return ltp_loss_detection(cfg_.dup_threshold, cfg_.min_rto, 100 * kMilli, cfg_.peer_ack_delay);
}

}  // namespace sg::ltp
