#include "crypto/replay_window.h"

#include <bit>

namespace sg::crypto {

ReplayWindow::ReplayWindow(uint32_t bits) {
  const uint32_t b = std::bit_ceil(bits < 128 ? 128u : bits);
  blocks_.assign(b / 64, 0);
  mask_ = blocks_.size() - 1;
}

ReplayVerdict ReplayWindow::check(uint64_t seq) const {
  if (!any_ || seq > top_) return ReplayVerdict::kFresh;
  if (top_ - seq >= window()) return ReplayVerdict::kTooOld;
  const uint64_t word = blocks_[(seq >> 6) & mask_];
  return (word >> (seq & 63)) & 1 ? ReplayVerdict::kDuplicate : ReplayVerdict::kFresh;
}

void ReplayWindow::accept(uint64_t seq) {
  if (!any_) {
    any_ = true;
    top_ = seq;
  } else if (seq > top_) {
    // Clear the blocks the window slides over (all of them after a long jump).
    const uint64_t from = top_ >> 6, to = seq >> 6;
    const uint64_t n = to - from < blocks_.size() ? to - from : blocks_.size();
    for (uint64_t i = 1; i <= n; ++i) blocks_[(from + i) & mask_] = 0;
    top_ = seq;
  }
  blocks_[(seq >> 6) & mask_] |= uint64_t{1} << (seq & 63);
}

}  // namespace sg::crypto
