#include "sim/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/rng.h"

namespace sg::sim {

BandwidthTrace::BandwidthTrace(const TraceSpec& spec) {
  using K = TraceSpec::Kind;
  seg_.clear();
  switch (spec.kind) {
    case K::kConstant: seg_.push_back({0, 1.0}); break;
    case K::kSteps: {
      auto s = spec.steps;
      std::sort(s.begin(), s.end());
      seg_.push_back({0, 1.0});
      for (const auto& [t, f] : s) {
        if (t <= 0) seg_[0].second = f;
        else seg_.push_back({t, f});
      }
      break;
    }
    case K::kPeriodic: {
      seg_.push_back({0, 1.0});
      if (spec.period <= 0 || spec.dip_length <= 0) break;
      for (Nanos t = spec.phase; t < spec.horizon; t += spec.period) {
        if (t <= 0) seg_[0].second = spec.dip_factor;
        else seg_.push_back({t, spec.dip_factor});
        seg_.push_back({t + spec.dip_length, 1.0});
      }
      break;
    }
    case K::kWalk: {
      Rng rng(spec.seed);
      double f = std::clamp(spec.start, spec.lo, spec.hi);
      seg_.push_back({0, f});
      if (spec.interval <= 0) break;
      for (Nanos t = spec.interval; t < spec.horizon; t += spec.interval) {
        // Sum of 4 uniforms: a cheap bell-shaped step with standard deviation ~sigma.
        double z = 0;
        for (int i = 0; i < 4; ++i) z += rng.uniform() - 0.5;
        f = std::clamp(f + z * spec.sigma * std::sqrt(3.0), spec.lo, spec.hi);
        seg_.push_back({t, f});
      }
      break;
    }
  }
  for (auto& s : seg_) s.second = std::max(s.second, 1e-6);
}

double BandwidthTrace::factor_at(Nanos t) const {
  if (seg_.size() == 1) return seg_[0].second;
  auto it = std::upper_bound(seg_.begin(), seg_.end(), t,
                             [](Nanos v, const std::pair<Nanos, double>& s) { return v < s.first; });
  return it == seg_.begin() ? seg_[0].second : std::prev(it)->second;
}

Nanos BandwidthTrace::next_change(Nanos t) const {
  auto it = std::upper_bound(seg_.begin(), seg_.end(), t,
                             [](Nanos v, const std::pair<Nanos, double>& s) { return v < s.first; });
  return it == seg_.end() ? INT64_MAX : it->first;
}

}  // namespace sg::sim
