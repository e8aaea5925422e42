#include "compress/adaptive_policy.h"

#include <algorithm>
#include <stdexcept>

#include "compress/codec.h"

namespace sg::compress {

double CompressionLevel::factor() const {
  switch (codec) {
    case CodecId::kF32: return 1.0;
    case CodecId::kF16:
    case CodecId::kBf16: return 2.0;
    case CodecId::kInt8: return 4.0;
    case CodecId::kTopK:
      return topk_ratio > 0 ? 4.0 / (static_cast<double>(topk_ratio) * kTopKEntryBytes) : 1.0;
  }
  return 1.0;
}

AdaptivePolicy::AdaptivePolicy(AdaptiveConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.ladder.empty() || cfg_.ladder[0].codec != CodecId::kF32)
    throw std::invalid_argument("AdaptivePolicy: ladder must start with f32");
  for (size_t i = 1; i < cfg_.ladder.size(); ++i)
    if (!(cfg_.ladder[i].factor() > cfg_.ladder[i - 1].factor()))
      throw std::invalid_argument("AdaptivePolicy: ladder factors must increase");
  if (cfg_.hold_rounds < 1) throw std::invalid_argument("AdaptivePolicy: hold_rounds < 1");
  if (cfg_.hold_max_rounds < cfg_.hold_rounds)
    throw std::invalid_argument("AdaptivePolicy: hold_max_rounds < hold_rounds");
  hold_ = cfg_.hold_rounds;
  if (!(cfg_.bottleneck_exposure >= 1.0)) throw std::invalid_argument("AdaptivePolicy: bottleneck_exposure < 1");
}

int AdaptivePolicy::need(double factor) const {
  const int top = static_cast<int>(cfg_.ladder.size()) - 1;
  for (int i = 0; i < top; ++i)
    if (cfg_.ladder[static_cast<size_t>(i)].factor() >= factor) return i;
  return top;
}

Decision AdaptivePolicy::current() const {
  const CompressionLevel& l = cfg_.ladder[static_cast<size_t>(level_)];
  return {l.codec, l.topk_ratio, level_, false};
}

void AdaptivePolicy::raise() {
  if (at_top()) return;
  ++level_;
  calm_ = 0;
}

Decision AdaptivePolicy::update(const LinkSample& s) {
  const int before = level_;
  if (s.throughput_Bps > 0 && s.compute_time > 0) {
    peak_ = std::max(s.throughput_Bps, peak_ * cfg_.peak_decay);
    const double goodput = s.throughput_Bps * (1.0 - std::clamp(s.loss, 0.0, 0.99));
    const double comm_s = static_cast<double>(s.bytes) / goodput;
    const double e = comm_s / (static_cast<double>(s.compute_time) / kSecond);
    last_exposure_ = e;

    const bool congested = s.throughput_Bps < cfg_.congested_tput_fraction * peak_ ||
                           s.rtt_ratio > cfg_.congested_rtt_ratio || s.loss > cfg_.congested_loss;
    const bool clear = s.throughput_Bps >= cfg_.clear_tput_fraction * peak_ &&
                       s.rtt_ratio <= cfg_.clear_rtt_ratio && s.loss <= cfg_.clear_loss;

    const bool bottleneck = e >= cfg_.bottleneck_exposure;
    const int up = (e <= 1.0 || !(congested || bottleneck)) ? 0 : need(e * cfg_.up_margin);
    since_down_ = std::min(since_down_ + 1, 1 << 30);
    since_need_ = up > 0 ? 0 : std::min(since_need_ + 1, 1 << 30);
    if (up > level_) {
      if (since_down_ <= kFlapWindow * hold_) hold_ = std::min(2 * hold_, cfg_.hold_max_rounds);
      level_ = up;
      calm_ = 0;
    } else {
      // The bottleneck test is stricter going down (off_exposure of it), like the others.
      const bool still_bottleneck = e >= cfg_.bottleneck_exposure * cfg_.off_exposure;
      const int down = (e <= cfg_.off_exposure || (clear && !still_bottleneck)) ? 0 : need(e * cfg_.down_margin);
      if (down < level_) {
        if (++calm_ >= hold_) {
          level_ = down;
          calm_ = 0;
          since_down_ = 0;
        }
      } else {
        calm_ = 0;
      }
    }
    if (hold_ > cfg_.hold_rounds && since_need_ >= kFlapWindow * hold_) {
      hold_ = std::max(cfg_.hold_rounds, hold_ / 2);
      since_need_ = 0;
    }
  }
  Decision d = current();
  d.changed = level_ != before;
  return d;
}

}  // namespace sg::compress
