// Time in lib/ is passed in, never read: every state machine takes `now` so the
// simulator, the tests (fake clock) and the dataplane (TSC) drive the same code.
#pragma once

#include <cstdint>

namespace sg {

using Nanos = int64_t;  // nanoseconds since an arbitrary epoch; signed so differences are safe

inline constexpr Nanos kMicro = 1000;
inline constexpr Nanos kMilli = 1000 * kMicro;
inline constexpr Nanos kSecond = 1000 * kMilli;

// A one-way delay measured across two clocks (arrival here minus a remote send stamp) carries
// their offset and may be negative: this marks one not measured.
inline constexpr Nanos kNoOwd = INT64_MIN;

constexpr double seconds(Nanos t) { return static_cast<double>(t) / static_cast<double>(kSecond); }

// A clock for code that must ask for the time itself (drivers around lib/).
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Nanos now() const = 0;
};

// Manually advanced clock for tests and the simulator.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Nanos start = 0) : now_(start) {}
  Nanos now() const override { return now_; }
  void advance(Nanos d) { now_ += d; }
  void set(Nanos t) { now_ = t; }

 private:
  Nanos now_;
};

}  // namespace sg
