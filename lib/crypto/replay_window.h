// Anti-replay sliding window over 64-bit packet numbers (RFC 6479's bitmap of 64-bit blocks,
// as WireGuard keeps it). A receiver first check()s a number (cheap, before authentication),
// then accept()s it only once the tag verified, so forged packets never move the window.
//
// Sized for spraying: packets of one direction cross paths of different delay, so a number
// may arrive up to (packets per second x the largest path delay skew) behind the newest; the
// window must be at least that. Owner: one thread; no allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace sg::crypto {

enum class ReplayVerdict : uint8_t { kFresh = 0, kDuplicate = 1, kTooOld = 2 };

class ReplayWindow {
 public:
  // bits: rounded up to a power of two, at least 128. Numbers more than bits - 64 behind the
  // newest accepted are too old (the top block is being reused).
  explicit ReplayWindow(uint32_t bits = 8192);

  ReplayVerdict check(uint64_t seq) const;
  void accept(uint64_t seq);  // call only for a packet that check() found kFresh and that authenticated
  uint64_t window() const { return static_cast<uint64_t>(blocks_.size()) * 64 - 64; }
  uint64_t newest() const { return top_; }

 private:
  std::vector<uint64_t> blocks_;
  uint64_t mask_ = 0;  // blocks - 1
  uint64_t top_ = 0;
  bool any_ = false;
};

}  // namespace sg::crypto
