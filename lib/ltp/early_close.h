// Early Close: when a receiver may end a transfer before every chunk has arrived.
//
// The rule (evaluated by the receiver at every poll for every open transfer):
//   stalled   := now - last_progress >= quiet
//   quiet     := clamp(quiet_rtts * srtt + quiet_gaps * gap, quiet_min, quiet_max)
//                (srtt: receiver-side RTT from echoed timestamps, quiet_unknown_rtt until the
//                 first sample; gap: EWMA of the time between new chunks of this transfer).
//                Two RTTs is long enough for a retransmission of a loss the sender detects
//                after ~1 RTT to arrive; the gap term keeps a slow sender from looking stalled.
//   threshold := clamp(1 - loss_weight * loss_est, max(1 - max_loss_fraction, min_fraction),
//                      threshold_max)
//                (loss_est: EWMA over finished transfers of the fraction that did not arrive on
//                 its first transmission). With loss_weight = 0.5 a transfer accepts bubbles
//                 for at most half the measured loss, so one retransmission pass is always
//                 tried: after it only ~p^2 is missing, far below p/2.
//   close early   if stalled and received >= threshold * chunk_count
//   fall back     if stalled and missing > max_loss_fraction * chunk_count: the transfer is
//                 marked reliable and only closes once complete (or abandoned / superseded).
// Bounds: threshold in [max(1 - max_loss_fraction, min_fraction), threshold_max] (defaults
// [0.90, 0.9999]);
// quiet in [quiet_min, quiet_max] (defaults [100 us, 500 ms]); loss_est in [0, 1].
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/clock.h"

namespace sg::ltp {

// A floor on `quiet` for receivers whose sender may be descheduled for a moment (a gateway or
// worker on a shared host): on a path of a few ms, quiet_rtts x srtt is shorter than a
// scheduler's time slice, and the pause looked like the end of the transfer. A lost chunk on
// such a path is resent well inside it; above ~10 ms of RTT it changes nothing.
inline constexpr Nanos kSharedHostQuietFloor = 20 * kMilli;

struct EarlyCloseConfig {
  bool enabled = true;
  double max_loss_fraction = 0.10;  // hard bound on bubbles per transfer
  double min_fraction = 0.0;        // never close before this fraction arrived (a floor on threshold)
  double threshold_max = 0.9999;
  double loss_weight = 0.5;
  double loss_ewma = 0.25;          // weight of the newest transfer in loss_est
  double initial_loss = 0.0;
  double quiet_rtts = 2.0;
  double quiet_gaps = 8.0;
  Nanos quiet_min = 100 * kMicro;
  Nanos quiet_max = 500 * kMilli;
  Nanos quiet_unknown_rtt = 10 * kMilli;  // srtt assumed before any sample
};

class EarlyClose {
 public:
  explicit EarlyClose(const EarlyCloseConfig& cfg) : cfg_(cfg), loss_est_(std::clamp(cfg.initial_loss, 0.0, 1.0)) {}

  double threshold() const {
    const double floor = std::max(1.0 - cfg_.max_loss_fraction, cfg_.min_fraction);
    return std::clamp(1.0 - cfg_.loss_weight * loss_est_, floor, std::max(floor, cfg_.threshold_max));
  }

  Nanos quiet(Nanos srtt, Nanos gap) const {
    const double s = static_cast<double>(srtt > 0 ? srtt : cfg_.quiet_unknown_rtt);
    const double q = cfg_.quiet_rtts * s + cfg_.quiet_gaps * static_cast<double>(std::max<Nanos>(gap, 0));
    // Clamp before converting: RTT and gap come from the network and may be absurd (a double
    // beyond int64 range converts with undefined behaviour; found by ltp_receive_fuzz).
    return static_cast<Nanos>(
        std::clamp(q, static_cast<double>(cfg_.quiet_min), static_cast<double>(cfg_.quiet_max)));
  }

  // Fraction of a finished transfer that did not arrive on its first transmission.
  void on_transfer_loss(double first_pass_loss) {
    first_pass_loss = std::clamp(first_pass_loss, 0.0, 1.0);
    loss_est_ += cfg_.loss_ewma * (first_pass_loss - loss_est_);
  }

  double loss_estimate() const { return loss_est_; }
  const EarlyCloseConfig& config() const { return cfg_; }

 private:
  EarlyCloseConfig cfg_;
  double loss_est_;
};

}  // namespace sg::ltp
