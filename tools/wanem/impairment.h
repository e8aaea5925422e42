// What one directed site pair of the emulated WAN does to a frame: a drop-tail queue in
// front of a rate limit, then one-way delay with jitter, and on the way random loss,
// Gilbert-Elliott burst loss, reordering, duplication and blackhole windows. Pure logic with
// time passed in (the forwarder owns sockets and clocks), so every rule is unit-tested.
//
// A frame of B bytes admitted at t:
//   blackhole   t inside a window [at, at + for): dropped
//   loss        dropped with probability `loss`; with burst loss on, a two-state chain
//               (good -> bad with p_enter per frame, bad -> good with p_exit) drops with
//               loss_good / loss_bad in each state
//   queue       the bytes still waiting for the rate limit, (free_at - t) x rate, plus B above
//               queue_bytes: dropped (drop-tail)
//   serialise   done = max(t, free_at) + B / rate;  free_at = done   (rate 0: done = t)
//   deliver     done + delay + uniform(-jitter, +jitter), never before the pair's previous
//               delivery (jitter does not reorder); with probability `reorder` a frame gets
//               reorder_extra more and may be overtaken
//   duplicate   with probability `duplicate` the frame is delivered twice
#pragma once

#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"

namespace sg::wanem {

struct BurstLoss {
  bool on = false;
  double p_enter = 0.0;   // per frame, good -> bad
  double p_exit = 1.0;    // per frame, bad -> good
  double loss_good = 0.0;
  double loss_bad = 1.0;
};

struct Blackhole {
  Nanos at = 0;   // since the emulator started
  Nanos len = 0;
};

struct PairSpec {
  Nanos delay = 0;
  Nanos jitter = 0;
  double loss = 0.0;
  BurstLoss burst;
  double reorder = 0.0;
  Nanos reorder_extra = 0;
  double duplicate = 0.0;
  double rate_bytes_per_s = 0;  // 0: no limit
  uint64_t queue_bytes = 1 << 20;
  std::vector<Blackhole> blackholes;
};

struct PairCounters {
  uint64_t forwarded = 0, forwarded_bytes = 0;
  uint64_t dropped_loss = 0, dropped_burst = 0, dropped_queue = 0, dropped_blackhole = 0;
  uint64_t duplicated = 0, reordered = 0;
  uint64_t queue_peak_bytes = 0;
};

class Pair {
 public:
  explicit Pair(uint64_t seed = 1) : rng_(seed) {}
  // A new spec (a schedule phase): the queue and the burst state carry over.
  void set(const PairSpec& s) { spec_ = s; }
  const PairSpec& spec() const { return spec_; }

  // Frame of `bytes` arrives at `now` (`since_start` for blackholes). Writes up to two
  // delivery times to `out` and returns how many (0: dropped).
  int admit(Nanos now, Nanos since_start, uint32_t bytes, Nanos out[2]);
  // Bytes waiting for the rate limit at `now`.
  uint64_t backlog(Nanos now) const;
  const PairCounters& counters() const { return c_; }

 private:
  PairSpec spec_;
  Rng rng_;
  bool bad_ = false;
  Nanos free_at_ = 0;
  Nanos last_delivery_ = 0;
  PairCounters c_;
};

}  // namespace sg::wanem
