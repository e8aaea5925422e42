// LTP's own rate controller: paces at the measured delivery rate (BBR-like) and does NOT
// back off on loss, because on lossy WAN paths most loss is not congestion and gradients
// tolerate it (LTP retransmits until the receiver closes the transfer).
//
//   btlbw     = max delivery-rate sample over the last kBwRounds round trips
//   min_rtt   = min RTT sample over the last min_rtt_window
//   startup:  pacing gain 2.885 until btlbw stops growing 25% for 3 rounds; then drain
//             (gain 1/2.885) until inflight <= BDP; then probe_bw cycles gains
//             {1.25, 0.75, 1 x6}, one min_rtt each.
//   pacing    = gain * btlbw;   cwnd = max(cwnd_gain * btlbw * min_rtt, 4 MSS)
// Random loss never slows it down. Two things do: a retransmission timeout (everything in
// flight vanished) halves btlbw, and a round trip losing more than congestion_loss of its
// packets -- far above any loss Early Close would accept, so it is overload (e.g. many
// senders into one shallow buffer), not noise -- ends startup and trims btlbw by 15%.
#pragma once

#include <array>
#include <cstddef>

#include "ltp/rate_controller.h"

namespace sg::ltp {

struct DeliveryRateConfig {
  double startup_gain = 2.885;
  double cwnd_gain = 2.0;
  Nanos initial_rtt = 1 * kMilli;   // for pacing before the first sample
  Nanos min_rtt_window = 10 * kSecond;
  Nanos min_rto = 1 * kMilli;
  uint32_t dup_threshold = 8;       // tolerates multipath reordering
  double max_rate = 0;              // bytes/s cap (e.g. the NIC line rate); 0 = none
  double congestion_loss = 0.2;     // per-round loss fraction treated as overload
  uint32_t congestion_min_packets = 20;  // ... once a round has at least this many packets
};

class DeliveryRateController final : public RateController {
 public:
  explicit DeliveryRateController(const DeliveryRateConfig& cfg = {}) : cfg_(cfg) {}
  const char* name() const override { return "ltp-delivery-rate"; }
  void reset(Nanos now, uint32_t mss) override;
  void on_ack(const AckEvent& ev) override;
  void on_loss(const LossEvent& ev) override;
  uint64_t cwnd_bytes() const override;
  double pacing_rate() const override;
  LossDetection loss_detection() const override;

  double btlbw() const { return btlbw_; }
  Nanos min_rtt() const { return min_rtt_; }
  int mode() const { return static_cast<int>(mode_); }

 private:
  enum class Mode { kStartup, kDrain, kProbeBw };
  static constexpr size_t kBwRounds = 10;
  static constexpr std::array<double, 8> kCycle{1.25, 0.75, 1, 1, 1, 1, 1, 1};

  double gain() const;
  uint64_t bdp() const;

  DeliveryRateConfig cfg_;
  uint32_t mss_ = 1400;
  Mode mode_ = Mode::kStartup;
  std::array<double, kBwRounds> bw_rounds_{};
  size_t bw_slot_ = 0;
  double btlbw_ = 0;
  double full_bw_ = 0;
  int full_bw_count_ = 0;
  uint64_t next_round_delivered_ = 0;
  Nanos min_rtt_ = 0;
  Nanos min_rtt_stamp_ = 0;
  size_t cycle_ = 0;
  Nanos cycle_start_ = 0;
  uint64_t inflight_ = 0;
  uint64_t round_lost_ = 0, round_acked_ = 0, round_lost_pkts_ = 0, round_acked_pkts_ = 0;
  uint64_t overloads_ = 0;
  bool app_limited_round_ = false;  // the sample opening this round was app-limited: no startup exit

 public:
  uint64_t overloads() const { return overloads_; }
};

}  // namespace sg::ltp
