#include "ltp/aimd_controller.h"

#include <algorithm>

namespace sg::ltp {

void AimdController::reset(Nanos /*now*/, uint32_t mss) {
  mss_ = mss;
  cwnd_ = 10 * mss_;  // RFC 6928 / Linux initial window
  ssthresh_ = UINT64_MAX;
  acked_accum_ = 0;
  recovery_start_ = -1;
  reductions_ = 0;
}

void AimdController::on_ack(const AckEvent& ev) {
  if (ev.acked_bytes == 0) return;
  // Within a recovery episode cwnd stays at ssthresh (SACK recovery sends by pipe < cwnd).
  if (recovery_start_ >= 0 && ev.newest_acked_send < recovery_start_) return;
  if (cwnd_ < ssthresh_) {
    cwnd_ += std::min<uint64_t>(ev.acked_bytes, ssthresh_ - cwnd_);  // slow start, up to ssthresh
  } else {
    acked_accum_ += ev.acked_bytes;
    while (acked_accum_ >= cwnd_) {
      acked_accum_ -= cwnd_;
      cwnd_ += mss_;
    }
  }
}

void AimdController::on_loss(const LossEvent& ev) {
  if (ev.timeout) {
    ssthresh_ = std::max<uint64_t>(std::min(cwnd_, ev.inflight_bytes) / 2, 2 * mss_);
    cwnd_ = mss_;
    recovery_start_ = ev.now;
    acked_accum_ = 0;
    ++reductions_;
    return;
  }
  if (recovery_start_ >= 0 && ev.lost_send < recovery_start_) return;  // same episode
  ssthresh_ = std::max<uint64_t>(cwnd_ / 2, 2 * mss_);
  cwnd_ = ssthresh_;
  recovery_start_ = ev.now;
  acked_accum_ = 0;
  ++reductions_;
}

LossDetection AimdController::loss_detection() const {
  LossDetection d;
  d.dup_threshold = 3;
  d.reorder_window = 0.25;
  d.min_rto = 200 * kMilli;
  d.rto_var_floor = 200 * kMilli;
  d.initial_rto = 1 * kSecond;
  d.max_rto = 120 * kSecond;
  d.tail_loss_probe = true;
  return d;
}

}  // namespace sg::ltp
