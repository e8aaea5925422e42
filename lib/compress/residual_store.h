// The sender's error-feedback state for one tensor: one float residual per element, viewed
// per chunk. Pass residual(chunk) to Encoder::encode for that chunk every round; keep the
// store for the life of the training job (it carries what compression has not yet sent).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sg::compress {

class ResidualStore {
 public:
  ResidualStore(size_t total_elems, size_t chunk_elems)
      : chunk_elems_(chunk_elems == 0 ? 1 : chunk_elems), r_(total_elems, 0.0f) {}

  size_t chunk_count() const { return (r_.size() + chunk_elems_ - 1) / chunk_elems_; }

  // Residual of `chunk` (empty if out of range).
  std::span<float> residual(uint32_t chunk) {
    const size_t begin = static_cast<size_t>(chunk) * chunk_elems_;
    if (begin >= r_.size()) return {};
    return {r_.data() + begin, std::min(chunk_elems_, r_.size() - begin)};
  }
  std::span<const float> all() const { return r_; }
  void clear() { std::fill(r_.begin(), r_.end(), 0.0f); }

 private:
  size_t chunk_elems_;
  std::vector<float> r_;
};

}  // namespace sg::compress
