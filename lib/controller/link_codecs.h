// Which codec each tree link of a plan uses: NetSenseML's rule, per directed link, on what
// the link measured (throughput, RTT trend, loss) and the bytes the plan puts on it. The
// decision travels to every gateway inside the policy's plan (topo::Plan::codecs), so a
// change switches at one round everywhere.
//
//   off       no codecs (f32 everywhere)
//   always    compression.codec on every tree link
//   adaptive  per link, lib/compress's AdaptivePolicy; its ladder stops at compression.codec.
//             The compute time a round's transfer can hide behind is compute_ms_per_round
//             where the config gives it, else what the gateways measure (hideable_compute:
//             the workers' update lag, counted in full only as far as they hand their update
//             over while computing). With neither it cannot tell whether the network is the
//             bottleneck, so it keeps full precision. Once the rule compresses a link, the round's slowest
//             link is compressed further while its transfer still exceeds the compute
//             (raise_round_bottleneck): a round waits for its slowest link.
#pragma once

#include <vector>

#include "compress/adaptive_policy.h"
#include "config/config.h"
#include "topology/plan.h"

namespace sg::controller {

// One directed link as the controller sees it.
struct LinkView {
  double bytes_per_s = 0;  // 0: unknown
  double rtt_trend = 1.0;  // recent / long-term RTT; > 1: queues building
  double loss = 0;
};

class LinkCodecs {
 public:
  LinkCodecs(const config::CompressionConfig& cfg, int sites);

  // Codecs for `plan`'s tree links given `links` ([i*n+j]) and the measured compute time per
  // round a transfer can hide behind (hideable_compute; <= 0: unknown; compute_ms_per_round
  // overrides it). Call once per measurement
  // interval (a new set of rows): adaptive levels have hysteresis counted in calls.
  std::vector<topo::LinkCodec> decide(const topo::Plan& plan, const std::vector<LinkView>& links,
                                      Nanos measured_compute = 0);
  const config::CompressionConfig& config() const { return cfg_; }
  // What the last decide() weighed (for the log): the compute time (0: unknown) and each
  // tree link's exposure, transfer time over compute time ([i*n+j]; 0: not weighed).
  Nanos last_compute() const { return last_compute_; }
  double exposure(int from, int to) const { return exposure_[static_cast<size_t>(from) * n_ + to]; }

 private:
  void raise_round_bottleneck(const std::vector<size_t>& weighed);

  config::CompressionConfig cfg_;
  int n_;
  std::vector<compress::AdaptivePolicy> policy_;  // per directed link
  std::vector<double> exposure_;                  // per directed link, of the last decide()
  Nanos last_compute_ = 0;
};

// A site's update lag (seconds; <= 0: none) as compute a round's transfer can hide behind.
// Only the share `overlap` of it (the time from the update's first chunk complete to its
// last) runs beside the transfer: workers that hand their whole update over at once (a
// DDP hook that waits for the last bucket) hide nothing, and every byte's transfer adds to
// their step. Such a job's share counts as kMinHideableShare: communication up to about a
// quarter of the compute is not worth an accuracy cost, beyond it compression pays for
// itself in step time. overlap < 0 (not measured): the whole lag.
inline constexpr double kMinHideableShare = 0.25;
Nanos hideable_compute(double lag_s, double overlap);

// The adaptive ladder up to `cfg.codec` (top-k at cfg.topk_ratio is one level).
compress::AdaptiveConfig codec_ladder(const config::CompressionConfig& cfg);

// Same links, same codecs (order ignored).
bool same_codecs(const std::vector<topo::LinkCodec>& a, const std::vector<topo::LinkCodec>& b);

}  // namespace sg::controller
