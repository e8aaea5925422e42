// The reliable baseline: TCP NewReno-style AIMD as Linux runs it by default with SACK:
// initial window 10, slow start, halve once per loss episode (recovery ends when data sent
// after the reduction is acked), cwnd = 1 MSS after an RTO, RTO = srtt + max(4 rttvar, 200 ms)
// doubling on back-off, 3-duplicate / RACK-style loss detection, tail-loss probes, no pacing.
#pragma once

#include "ltp/rate_controller.h"

namespace sg::ltp {

class AimdController final : public RateController {
 public:
  const char* name() const override { return "aimd-newreno"; }
  void reset(Nanos now, uint32_t mss) override;
  void on_ack(const AckEvent& ev) override;
  void on_loss(const LossEvent& ev) override;
  uint64_t cwnd_bytes() const override { return cwnd_; }
  double pacing_rate() const override { return 0; }
  LossDetection loss_detection() const override;

  uint64_t ssthresh() const { return ssthresh_; }
  uint64_t reductions() const { return reductions_; }

 private:
  uint64_t mss_ = 1400;
  uint64_t cwnd_ = 14000;
  uint64_t ssthresh_ = UINT64_MAX;
  uint64_t acked_accum_ = 0;   // congestion avoidance: +1 MSS per cwnd of acked bytes
  Nanos recovery_start_ = -1;  // losses of chunks sent before this belong to the same episode
  uint64_t reductions_ = 0;
};

}  // namespace sg::ltp
