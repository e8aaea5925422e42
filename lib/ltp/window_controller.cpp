#include "ltp/window_controller.h"

#include <algorithm>

namespace sg::ltp {

uint64_t WindowController::min_window() const {
  return std::min<uint64_t>(static_cast<uint64_t>(cfg_.min_window_packets) * mss_, cfg_.max_window);
}

void WindowController::reset(Nanos /*now*/, uint32_t mss) {
  // The window is the path's, kept from one transfer to the next; only the episode ends.
  mss_ = mss;
  cwnd_ = std::clamp(cwnd_, min_window(), std::max(cfg_.max_window, min_window()));
  recovery_start_ = -1;
}

void WindowController::on_ack(const AckEvent& ev) {
  if (ev.acked_bytes == 0) return;
  if (recovery_start_ >= 0 && ev.newest_acked_send < recovery_start_) return;  // still in the episode
  cwnd_ = std::min(cwnd_ + ev.acked_bytes, std::max(cfg_.max_window, min_window()));
}

void WindowController::on_loss(const LossEvent& ev) {
  if (ev.timeout) {
    cwnd_ = min_window();
  } else {
    if (recovery_start_ >= 0 && ev.lost_send < recovery_start_) return;  // same episode
    cwnd_ = std::max(cwnd_ / 2, min_window());
  }
  recovery_start_ = ev.now;
  ++reductions_;
}

LossDetection WindowController::loss_detection() const {
  return ltp_loss_detection(cfg_.dup_threshold, cfg_.min_rto, 10 * kMilli);  // a LAN's first RTO
}

}  // namespace sg::ltp
