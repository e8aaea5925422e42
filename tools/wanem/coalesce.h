// When a busy emulator wakes. Waking on every arrival and on every due frame costs a sleep
// and a wake per few frames: 8.7k wakes/s and half a core at 32k frames/s on the 2-core
// testbed, much of it in the scheduler, taken from the gateways and workers it carries.
// Above kEnterRate frames/s the emulator instead wakes on a fixed quantum without watching
// the sockets: each wake drains every port and sends every frame due within half a quantum,
// so a frame leaves within +-quantum/2 of its time and the mean delay is unchanged. Arrivals
// keep the kernel's receive time (SO_TIMESTAMPNS), so taking them up to a quantum later adds
// nothing to their delay as long as the quantum is below every pair's delay: it is a quarter
// of the smallest one-way delay the profile gives, capped, and below the floor (a WAN with
// next to no delay) the emulator never coalesces. A quiet WAN leaves busy mode after one
// judging window and sleeps until the next arrival again.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/clock.h"

namespace sg::wanem {

class Coalescer {
 public:
  static constexpr Nanos kMaxQuantum = 250 * kMicro;
  static constexpr Nanos kMinQuantum = 50 * kMicro;
  static constexpr Nanos kWindow = 10 * kMilli;  // the arrival rate is judged over this
  static constexpr uint64_t kEnterRate = 8000;   // frames/s: about two per largest quantum
  static constexpr uint64_t kLeaveRate = 4000;   // lower, so a rate near the edge does not flap

  // `min_delay`: the smallest one-way delay (less jitter) of any pair in any phase.
  explicit Coalescer(Nanos min_delay) : quantum_(std::min(kMaxQuantum, std::max<Nanos>(0, min_delay) / 4)) {}

  // `frames` arrived since the last call, at a wake at `now`.
  void arrived(Nanos now, uint64_t frames) {
    if (window_start_ < 0) window_start_ = now;
    frames_ += frames;
    const Nanos span = now - window_start_;
    if (span < kWindow) return;
    const uint64_t rate = frames_ * static_cast<uint64_t>(kSecond) / static_cast<uint64_t>(span);
    if (quantum_ >= kMinQuantum) busy_ = busy_ ? rate >= kLeaveRate : rate >= kEnterRate;
    frames_ = 0;
    window_start_ = now;
  }

  bool busy() const { return busy_; }
  Nanos quantum() const { return quantum_; }
  // How far ahead of its time a frame may leave at a busy wake.
  Nanos ahead() const { return quantum_ / 2; }

 private:
  Nanos quantum_;
  Nanos window_start_ = -1;
  uint64_t frames_ = 0;
  bool busy_ = false;
};

}  // namespace sg::wanem
