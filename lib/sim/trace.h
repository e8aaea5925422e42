// Bandwidth traces: a link's capacity as a multiple of its nominal rate over virtual time.
// Piecewise constant, precomputed at construction (deterministic for a seed), so a lookup on
// the packet path is a binary search over a few hundred segments and allocates nothing.
//   steps     — factor changes at given times (t, factor)
//   periodic  — every `period` the factor drops to `dip_factor` for `dip_length` (from `phase`)
//   walk      — every `interval` the factor moves by a normal-ish step of `sigma`, kept in [lo, hi]
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace sg::sim {

struct TraceSpec {
  enum class Kind : uint8_t { kConstant, kSteps, kPeriodic, kWalk };
  Kind kind = Kind::kConstant;
  std::vector<std::pair<Nanos, double>> steps;  // kSteps: (from time, factor), any order
  Nanos period = 0, dip_length = 0, phase = 0;  // kPeriodic
  double dip_factor = 1.0;
  Nanos interval = 0;                           // kWalk
  double sigma = 0.1, lo = 0.1, hi = 1.0, start = 1.0;
  uint64_t seed = 1;
  Nanos horizon = 3600 * kSecond;               // kPeriodic/kWalk segments generated up to here
};

class BandwidthTrace {
 public:
  BandwidthTrace() = default;
  explicit BandwidthTrace(const TraceSpec& spec);

  double factor_at(Nanos t) const;
  // First time after t the factor changes (kNever-like INT64_MAX if never).
  Nanos next_change(Nanos t) const;
  bool constant() const { return seg_.size() <= 1; }
  const std::vector<std::pair<Nanos, double>>& segments() const { return seg_; }

 private:
  std::vector<std::pair<Nanos, double>> seg_{{0, 1.0}};  // sorted by time, first at 0
};

}  // namespace sg::sim
