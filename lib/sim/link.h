// One directed WAN link (or a site's egress/ingress cap, a link with no delay or loss):
// a FIFO server whose rate follows a BandwidthTrace, a drop-tail queue bounded in bytes,
// propagation delay, and loss that is random (Bernoulli) and/or bursty (Gilbert-Elliott).
//
// Packets must be offered in non-decreasing time (the simulator guarantees it: a link is fed
// by one egress stage in FIFO order). A packet is served after everything ahead of it, its
// serialisation integrates the trace's rate over time, and it is lost (if at all) after using
// the link: loss on a WAN path costs capacity. Nothing allocates in steady state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"
#include "sim/trace.h"

namespace sg::sim {

struct GilbertElliott {
  bool enabled = false;
  double p_good_to_bad = 0.0;  // per packet
  double p_bad_to_good = 0.0;
  double loss_good = 0.0;
  double loss_bad = 0.0;
  // Long-run loss rate of the chain.
  double mean_loss() const {
    const double d = p_good_to_bad + p_bad_to_good;
    if (!enabled || d <= 0) return loss_good;
    const double bad = p_good_to_bad / d;
    return bad * loss_bad + (1 - bad) * loss_good;
  }
};

struct LinkSpec {
  double bytes_per_s = 125e6;   // nominal rate (the trace multiplies it)
  Nanos delay = 0;              // one-way propagation
  uint64_t queue_bytes = 1u << 20;
  double loss = 0.0;            // random loss per packet
  GilbertElliott ge;
  TraceSpec trace;
};

struct LinkStats {
  uint64_t packets = 0;       // offered
  uint64_t bytes = 0;         // offered
  uint64_t queue_drops = 0;
  uint64_t lost = 0;          // random + GE, after serialisation
  uint64_t delivered = 0;
  uint64_t delivered_bytes = 0;
  Nanos busy = 0;             // total serialisation time
};

class Link {
 public:
  Link() = default;
  Link(const LinkSpec& spec, uint64_t seed);

  struct Outcome {
    bool dropped = false;  // queue full: never sent
    bool lost = false;     // sent, lost on the way
    Nanos depart = 0;      // last bit leaves the sender side
    Nanos arrive = 0;      // depart + delay
  };
  Outcome send(Nanos at, uint32_t bytes);

  // Rate in force at t (nominal * trace), bytes/s.
  double rate_at(Nanos t) const { return spec_.bytes_per_s * trace_.factor_at(t); }
  uint64_t backlog_bytes(Nanos at);  // bytes queued or in service at `at` (drops departed)
  const LinkSpec& spec() const { return spec_; }
  const LinkStats& stats() const { return stats_; }
  const BandwidthTrace& trace() const { return trace_; }
  bool exists() const { return spec_.bytes_per_s > 0; }

 private:
  Nanos serialise(Nanos start, uint32_t bytes) const;

  LinkSpec spec_{};
  BandwidthTrace trace_;
  Rng rng_;
  bool ge_bad_ = false;
  Nanos busy_until_ = 0;
  // Packets queued or in service: (depart time, bytes), a ring that grows only when full.
  std::vector<std::pair<Nanos, uint32_t>> q_;
  size_t q_head_ = 0, q_len_ = 0;
  uint64_t backlog_ = 0;
  LinkStats stats_;
};

}  // namespace sg::sim
