#include "ltp/cubic_controller.h"

#include <algorithm>
#include <cmath>

#include "ltp/aimd_controller.h"

namespace sg::ltp {

namespace {
// Reno-friendly additive increase per RTT that matches Reno's average rate at beta 0.7.
constexpr double kAlpha = 3 * (1 - CubicController::kBeta) / (1 + CubicController::kBeta);
}  // namespace

void CubicController::reset(Nanos /*now*/, uint32_t mss) {
  mss_ = mss;
  cwnd_ = 10 * mss_;
  ssthresh_ = 1e300;
  w_max_ = w_est_ = 0;
  epoch_start_ = recovery_start_ = -1;
  k_s_ = 0;
  reductions_ = 0;
}

void CubicController::on_ack(const AckEvent& ev) {
  if (ev.acked_bytes == 0) return;
  if (recovery_start_ >= 0 && ev.newest_acked_send < recovery_start_) return;  // in recovery
  const double acked = static_cast<double>(ev.acked_bytes);
  if (cwnd_ < ssthresh_) {
    cwnd_ += std::min(acked, ssthresh_ - cwnd_);
    return;
  }
  if (epoch_start_ < 0) {
    epoch_start_ = ev.now;
    if (cwnd_ < w_max_) {
      k_s_ = std::cbrt((w_max_ - cwnd_) / mss_ / kC);
    } else {
      k_s_ = 0;
      w_max_ = cwnd_;
    }
    w_est_ = cwnd_;
  }
  const Nanos rtt = ev.srtt > 0 ? ev.srtt : ev.min_rtt;
  // Where the cubic curve is one RTT from now, capped at 1.5x per RTT (RFC 9438 4.2).
  const double t = static_cast<double>(ev.now - epoch_start_ + rtt) / 1e9 - k_s_;
  const double target = std::clamp(w_max_ + kC * t * t * t * mss_, cwnd_, 1.5 * cwnd_);
  w_est_ += (w_est_ >= w_max_ ? 1.0 : kAlpha) * mss_ * acked / cwnd_;
  if (target < w_est_) {
    cwnd_ = std::max(cwnd_, w_est_);  // Reno-friendly region: never slower than Reno
  } else {
    cwnd_ += (target - cwnd_) * acked / cwnd_;
  }
}

void CubicController::reduce(Nanos now, double to) {
  // Fast convergence: a flow losing below its last W_max gives room to the others.
  w_max_ = cwnd_ < w_max_ ? cwnd_ * (1 + kBeta) / 2 : cwnd_;
  ssthresh_ = std::max(to * kBeta, 2 * mss_);
  epoch_start_ = -1;
  recovery_start_ = now;
  ++reductions_;
}

void CubicController::on_loss(const LossEvent& ev) {
  if (ev.timeout) {
    reduce(ev.now, std::min(cwnd_, static_cast<double>(ev.inflight_bytes)));
    cwnd_ = mss_;
    return;
  }
  if (recovery_start_ >= 0 && ev.lost_send < recovery_start_) return;  // same episode
  reduce(ev.now, cwnd_);
  cwnd_ = ssthresh_;
}

LossDetection CubicController::loss_detection() const { return AimdController().loss_detection(); }

}  // namespace sg::ltp
