#include "impairment.h"

#include <algorithm>

namespace sg::wanem {

uint64_t Pair::backlog(Nanos now) const {
  if (spec_.rate_bytes_per_s <= 0 || free_at_ <= now) return 0;
  return static_cast<uint64_t>(seconds(free_at_ - now) * spec_.rate_bytes_per_s);
}

int Pair::admit(Nanos now, Nanos since_start, uint32_t bytes, Nanos out[2]) {
  for (const Blackhole& b : spec_.blackholes)
    if (since_start >= b.at && since_start < b.at + b.len) {
      ++c_.dropped_blackhole;
      return 0;
    }
  if (spec_.burst.on) {
    // The chain moves once per frame; the state decides this frame's loss.
    bad_ = bad_ ? !rng_.chance(spec_.burst.p_exit) : rng_.chance(spec_.burst.p_enter);
    if (rng_.chance(bad_ ? spec_.burst.loss_bad : spec_.burst.loss_good)) {
      ++c_.dropped_burst;
      return 0;
    }
  }
  if (spec_.loss > 0 && rng_.chance(spec_.loss)) {
    ++c_.dropped_loss;
    return 0;
  }
  Nanos done = now;
  if (spec_.rate_bytes_per_s > 0) {
    const uint64_t queued = backlog(now);
    if (queued + bytes > spec_.queue_bytes) {
      ++c_.dropped_queue;
      return 0;
    }
    c_.queue_peak_bytes = std::max(c_.queue_peak_bytes, queued + bytes);
    done = std::max(now, free_at_) + static_cast<Nanos>(bytes / spec_.rate_bytes_per_s * 1e9);
    free_at_ = done;
  }
  Nanos at = done + spec_.delay;
  if (spec_.jitter > 0) {
    const double u = rng_.uniform() * 2.0 - 1.0;
    at = std::max(done, at + static_cast<Nanos>(u * static_cast<double>(spec_.jitter)));
  }
  if (spec_.reorder > 0 && rng_.chance(spec_.reorder)) {
    at += spec_.reorder_extra;  // overtaken by the frames behind it; the floor stays
    ++c_.reordered;
  } else {
    at = std::max(at, last_delivery_);
    last_delivery_ = at;
  }
  ++c_.forwarded;
  c_.forwarded_bytes += bytes;
  out[0] = at;
  if (spec_.duplicate > 0 && rng_.chance(spec_.duplicate)) {
    ++c_.duplicated;
    out[1] = at;
    return 2;
  }
  return 1;
}

}  // namespace sg::wanem
