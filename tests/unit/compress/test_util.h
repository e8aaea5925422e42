// Shared helpers of the compress tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "aggregate/isa.h"
#include "common/rng.h"

namespace sg::compress::test {

inline std::vector<agg::Isa> supported_isas() {
  std::vector<agg::Isa> v;
  for (int i = 0; i < agg::kIsaCount; ++i)
    if (agg::isa_supported(static_cast<agg::Isa>(i))) v.push_back(static_cast<agg::Isa>(i));
  return v;
}

// Gradient-like values: random sign, magnitudes spread over ~8 binades below `top`.
inline std::vector<float> gradient(Rng& rng, size_t n, double top = 1e-2) {
  std::vector<float> v(n);
  for (auto& x : v) {
    const double mag = top * std::ldexp(0.5 + 0.5 * rng.uniform(), -static_cast<int>(rng.below(8)));
    x = static_cast<float>(rng.chance(0.5) ? mag : -mag);
  }
  return v;
}

inline double norm2(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

}  // namespace sg::compress::test
