#include "sim/link.h"

#include <algorithm>
#include <cmath>

namespace sg::sim {

Link::Link(const LinkSpec& spec, uint64_t seed) : spec_(spec), trace_(spec.trace), rng_(seed) {
  q_.resize(64);
}

Nanos Link::serialise(Nanos start, uint32_t bytes) const {
  // Integrate the trace's rate from `start` until `bytes` have been sent.
  double left = bytes;
  Nanos t = start;
  for (int guard = 0; guard < 1 << 20; ++guard) {
    const double rate = rate_at(t);  // bytes/s
    const Nanos change = trace_.next_change(t);
    const double need_ns = left / rate * 1e9;
    if (change == INT64_MAX || static_cast<double>(change - t) >= need_ns)
      return t + std::max<Nanos>(1, static_cast<Nanos>(std::ceil(need_ns)));
    left -= rate * static_cast<double>(change - t) * 1e-9;
    t = change;
  }
  return t;
}

uint64_t Link::backlog_bytes(Nanos at) {
  while (q_len_ > 0 && q_[q_head_].first <= at) {
    backlog_ -= q_[q_head_].second;
    q_head_ = (q_head_ + 1) % q_.size();
    --q_len_;
  }
  return backlog_;
}

Link::Outcome Link::send(Nanos at, uint32_t bytes) {
  Outcome o;
  ++stats_.packets;
  stats_.bytes += bytes;
  const uint64_t backlog = backlog_bytes(at);
  if (backlog > 0 && backlog + bytes > spec_.queue_bytes) {
    ++stats_.queue_drops;
    o.dropped = true;
    return o;
  }
  const Nanos start = std::max(at, busy_until_);
  o.depart = serialise(start, bytes);
  stats_.busy += o.depart - start;
  busy_until_ = o.depart;
  o.arrive = o.depart + spec_.delay;
  if (q_len_ == q_.size()) {  // grow the ring (rare: only when the queue is deeper than ever)
    std::vector<std::pair<Nanos, uint32_t>> bigger(q_.size() * 2);
    for (size_t i = 0; i < q_len_; ++i) bigger[i] = q_[(q_head_ + i) % q_.size()];
    q_ = std::move(bigger);
    q_head_ = 0;
  }
  q_[(q_head_ + q_len_) % q_.size()] = {o.depart, bytes};
  ++q_len_;
  backlog_ += bytes;
  double p = spec_.loss;
  if (spec_.ge.enabled) {
    ge_bad_ = ge_bad_ ? !rng_.chance(spec_.ge.p_bad_to_good) : rng_.chance(spec_.ge.p_good_to_bad);
    const double pg = ge_bad_ ? spec_.ge.loss_bad : spec_.ge.loss_good;
    p = 1 - (1 - p) * (1 - pg);
  }
  if (p > 0 && rng_.chance(p)) {
    o.lost = true;
    ++stats_.lost;
  } else {
    ++stats_.delivered;
    stats_.delivered_bytes += bytes;
  }
  return o;
}

}  // namespace sg::sim
