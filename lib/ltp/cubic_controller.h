// The reliable baseline as Linux runs it by default: CUBIC (RFC 9438) on the same SACK loss
// recovery as AimdController. After a loss the window drops to 0.7 of itself and regrows as
// a cubic function of the time since, reaching the window of the loss (W_max) K seconds later
// whatever the RTT, with fast convergence and the Reno-friendly region. Slow start as in
// AimdController (Linux's HyStart, which may leave slow start earlier, is not modelled).
// Window growth independent of the RTT is what lets kernel TCP (gloo) fill long lossy paths
// several times better than NewReno does: the simulator's gloo stand-in must do the same.
#pragma once

#include "ltp/rate_controller.h"

namespace sg::ltp {

class CubicController final : public RateController {
 public:
  static constexpr double kBeta = 0.7;  // multiplicative decrease
  static constexpr double kC = 0.4;     // segments / s^3

  const char* name() const override { return "cubic"; }
  void reset(Nanos now, uint32_t mss) override;
  void on_ack(const AckEvent& ev) override;
  void on_loss(const LossEvent& ev) override;
  uint64_t cwnd_bytes() const override { return static_cast<uint64_t>(cwnd_); }
  double pacing_rate() const override { return 0; }
  LossDetection loss_detection() const override;

  uint64_t ssthresh() const { return static_cast<uint64_t>(ssthresh_); }
  uint64_t w_max_bytes() const { return static_cast<uint64_t>(w_max_); }
  uint64_t reductions() const { return reductions_; }

 private:
  void reduce(Nanos now, double to);

  double mss_ = 1400;
  double cwnd_ = 14000, ssthresh_ = 1e300;
  double w_max_ = 0;         // window before the last reduction (bytes)
  double w_est_ = 0;         // the window Reno would have now (bytes)
  Nanos epoch_start_ = -1;   // start of the current congestion-avoidance epoch
  double k_s_ = 0;           // seconds from the epoch start to W_max
  Nanos recovery_start_ = -1;
  uint64_t reductions_ = 0;
};

}  // namespace sg::ltp
