// NetSenseML-style network-adaptive compression: per link and round, pick the codec from
// what the link measured in the previous round. Compress only when congestion makes
// communication the bottleneck; otherwise send full precision (no accuracy cost).
//
// The rule, evaluated once per round on the sample of the round before:
//   exposure e = (bytes / (throughput * (1 - loss))) / compute_time
//       e <= 1 means sending at full precision fits behind the round's compute (the part of
//       it the transfer can overlap: controller::hideable_compute).
//   congested = throughput < congested_tput_fraction * peak     (peak: slowly decaying max)
//            or rtt_ratio > congested_rtt_ratio                  (queues building up)
//            or loss > congested_loss
//   clear     = the same three tests with the stricter clear_* thresholds.
//   need(F)   = the first ladder level whose byte reduction factor is >= F (top level if none);
//               ladder by default f32 (1x), bf16 (2x), int8 (~4x), top-k 5% (10x),
//               top-k 2% (25x), top-k 1% (50x).
//   bottleneck = e >= bottleneck_exposure: the transfer takes several times the compute, so the
//               link is the round's bottleneck whether or not it shows congestion (a slow
//               link rather than a congested one; NetSenseML's rule alone keeps it at f32).
//   Up:   target = (e <= 1 or not (congested or bottleneck)) ? f32 : need(e * up_margin).
//         If target is above the current level, switch at once.
//   Down: candidate = (e <= off_exposure or (clear and e < off_exposure * bottleneck_exposure))
//               ? f32 : need(e * down_margin).
//         If candidate is below the current level for hold_rounds consecutive rounds, switch
//         to it; any round where it is not resets the count.
// Hysteresis comes from the gap between the up and down tests (1 vs off_exposure, up_margin
// vs down_margin, congested vs clear thresholds) and from the hold.
// Flap damping: a link whose congestion comes back within kFlapWindow x hold decisions of
// going down again (a rate that drops every few seconds) paid a slow full-precision round at
// each return; its hold doubles at each such return (up to hold_max_rounds), so a link that
// keeps flapping stays compressed, and halves back toward hold_rounds after each
// kFlapWindow x hold decisions in which the rule did not call for compression (as BGP damps
// flapping routes).
// Bounds (tested): compression turns on in the first decision that sees a congested sample
// where e > 1, or any sample where e >= bottleneck_exposure; it turns off at most hold_rounds
// decisions after the first clear sample with e <= off_exposure (or a clear link with
// e < off_exposure * bottleneck_exposure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "common/codec_id.h"

namespace sg::compress {

// What one link measured over one round (the passive estimator fills it).
struct LinkSample {
  double throughput_Bps = 0;  // delivered bytes/s on the link; <= 0: unknown (keep the level)
  double rtt_ratio = 1.0;     // RTT trend: recent smoothed RTT / minimum RTT seen (1 = no queueing)
  double loss = 0.0;          // fraction of packets lost, 0..1
  uint64_t bytes = 0;         // bytes the link must carry next round at full precision (f32)
  Nanos compute_time = 0;     // the job's compute per round that the transfer can run behind
};

struct CompressionLevel {
  CodecId codec = CodecId::kF32;
  float topk_ratio = 0.0f;  // kTopK only
  // Bytes at f32 / bytes with this level, for large chunks.
  double factor() const;
};

struct AdaptiveConfig {
  std::vector<CompressionLevel> ladder = {
      {CodecId::kF32, 0}, {CodecId::kBf16, 0}, {CodecId::kInt8, 0},
      {CodecId::kTopK, 0.05f}, {CodecId::kTopK, 0.02f}, {CodecId::kTopK, 0.01f}};
  double up_margin = 1.2;          // headroom when compressing more (throughput drifts)
  double down_margin = 1.5;        // stricter fit before compressing less
  double off_exposure = 0.8;       // full precision again only with this much slack
  double bottleneck_exposure = 2.0; // e from which the link is the bottleneck, congested or not
  double congested_tput_fraction = 0.7;
  double congested_rtt_ratio = 1.5;
  double congested_loss = 0.01;
  double clear_tput_fraction = 0.85;
  double clear_rtt_ratio = 1.2;
  double clear_loss = 0.002;
  double peak_decay = 0.995;       // per round: a lasting capacity change becomes the norm
  int hold_rounds = 3;
  int hold_max_rounds = 24;        // flap damping's longest hold
};
inline constexpr int kFlapWindow = 4;  // a raise within this many holds of a decrease is a flap

struct Decision {
  CodecId codec;
  float topk_ratio;  // meaningful for kTopK
  int level;         // index into the ladder; 0 is full precision
  bool changed;      // differs from the previous decision
};

// One per link; owned by the control thread (or the simulator). Not thread-safe.
class AdaptivePolicy {
 public:
  explicit AdaptivePolicy(AdaptiveConfig cfg = {});

  // Feeds the sample of the round just finished; returns the level for the next round.
  Decision update(const LinkSample& s);

  Decision current() const;
  double exposure() const { return last_exposure_; }  // of the last sample, for telemetry
  // Bytes at f32 over bytes at the current level (1 at full precision).
  double factor() const { return cfg_.ladder[static_cast<size_t>(level_)].factor(); }
  bool at_top() const { return level_ + 1 >= static_cast<int>(cfg_.ladder.size()); }
  // One level more, decided from outside this link's own rule (LinkCodecs: the link sets the
  // round's time while others are compressed). Restarts the calm count, like any raise.
  void raise();
  const AdaptiveConfig& config() const { return cfg_; }
  int hold() const { return hold_; }  // decisions of calm before a decrease, flap damping included

 private:
  int need(double factor) const;

  AdaptiveConfig cfg_;
  int level_ = 0;
  int calm_ = 0;
  int hold_ = 0;
  int since_down_ = 1 << 30;  // decisions since the last decrease (none yet: no flap)
  int since_need_ = 0;        // decisions since the rule last called for compression
  double peak_ = 0;
  double last_exposure_ = 0;
};

}  // namespace sg::compress
