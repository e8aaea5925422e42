// When the emulator sleeps before a held frame is due. The host wakes a sleeper late
// (0.1-0.7 ms on average for a 5-25 ms sleep on a shared VM, several ms at worst), which
// would add to every emulated delay: a long wait ends early by a margin learnt from the
// emulator's own timer wakes, and the rest until the frame is due is polled without sleeping.
// The polled rest is at most a quarter of a long wait, and short waits (a dense stream) are
// never shortened, so a busy emulator does not spin and an idle one costs nothing.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/clock.h"

namespace sg::wanem {

class EarlyWake {
 public:
  static constexpr Nanos kMarginStart = 300 * kMicro;
  static constexpr Nanos kMarginFloor = 50 * kMicro;
  static constexpr Nanos kMarginCap = 1500 * kMicro;
  static constexpr Nanos kLongWaitMargins = 4;
  static constexpr Nanos kMinLongWait = 2 * kMilli;

  struct Plan {
    Nanos wait;  // how long to sleep (0: poll)
    bool early;  // the sleep ends early; report how it ended (woke or interrupted)
  };

  // The sleep at `now` before a frame due at `due` (the time it may leave).
  Plan plan(Nanos now, Nanos due) {
    const Nanos wait = std::max<Nanos>(0, due - now);
    if (now < poll_until_) return {0, false};
    if (wait >= std::max(kMinLongWait, kLongWaitMargins * margin_)) {
      poll_until_ = due;
      return {wait - margin_, true};
    }
    return {wait, false};
  }
  // An early plan's sleep ended by its timer, `late` after it should have.
  void woke(Nanos late) {
    ++early_wakes_;
    late_mean_ += (std::max<Nanos>(0, late) - late_mean_) / 8;
    margin_ = std::clamp(2 * late_mean_ + kMarginFloor, kMarginFloor, kMarginCap);
  }
  // An early plan's sleep ended by an arrival: the next wait is planned afresh.
  void interrupted() { poll_until_ = 0; }

  Nanos margin() const { return margin_; }
  uint64_t early_wakes() const { return early_wakes_; }

 private:
  Nanos margin_ = kMarginStart;
  Nanos late_mean_ = (kMarginStart - kMarginFloor) / 2;  // so that the first margin is the start
  Nanos poll_until_ = 0;
  uint64_t early_wakes_ = 0;
};

}  // namespace sg::wanem
