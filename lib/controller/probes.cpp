#include "controller/probes.h"

#include <algorithm>

namespace sg::controller {

ProbeScheduler::ProbeScheduler(int sites, int self, const ProbeSettings& s)
    : n_(sites), self_(self), s_(s), last_sent_(static_cast<size_t>(sites), 0),
      last_traffic_(static_cast<size_t>(sites), -1), last_probe_(static_cast<size_t>(sites), -1) {}

double ProbeScheduler::train_bytes() const { return static_cast<double>(s_.packet_bytes) * s_.train_packets; }

std::vector<ProbeOrder> ProbeScheduler::due(Nanos now, std::span<const uint64_t> sent_to) {
  std::vector<ProbeOrder> out;
  for (int j = 0; j < n_ && j < static_cast<int>(sent_to.size()); ++j) {
    if (sent_to[j] != last_sent_[j] || last_traffic_[j] < 0) last_traffic_[j] = now;
    last_sent_[j] = sent_to[j];
  }
  if (s_.rate_bytes_per_s <= 0 || s_.train_packets < 2 || n_ < 2) return out;
  const double burst = train_bytes();
  if (refilled_ < 0) {
    refilled_ = now;
    tokens_ = burst;  // the first train may go at once
  }
  tokens_ = std::min(burst, tokens_ + s_.rate_bytes_per_s * seconds(now - refilled_));
  refilled_ = now;
  // One pass over the peers from where the last one stopped: the first idle link not probed
  // within min_period gets a train if the budget holds one.
  for (int k = 0; k < n_ && tokens_ >= burst; ++k) {
    const int j = (next_ + k) % n_;
    if (j == self_) continue;
    const bool idle = now - last_traffic_[j] >= s_.idle_after;
    const bool rested = last_probe_[j] < 0 || now - last_probe_[j] >= s_.min_period;
    if (!idle || !rested) continue;
    out.push_back({j, s_.train_packets, s_.packet_bytes});
    tokens_ -= burst;
    last_probe_[j] = now;
    ++trains_;
    bytes_ += static_cast<uint64_t>(burst);
    next_ = (j + 1) % n_;
  }
  return out;
}

bool ProbeReceiver::finish(int from, Train& t, ProbeResult& out) {
  t.open = false;
  if (t.got < 2) {
    ++dropped_;
    return false;
  }
  // The middle packet in arrival order, when at least two more follow it; else the first.
  const int mid = (t.count + 1) / 2 - 1;
  const int start = t.got >= mid + 3 ? mid : 0;
  const Nanos t0 = t.rx[start];
  uint32_t bytes = 0;
  int packets = 0, reads = 0;
  Nanos prev = t0, last = t0;
  for (int i = start + 1; i < t.got; ++i) {
    if (t.rx[i] <= t0) continue;  // read with the start (or stamped out of order): not timed
    if (t.rx[i] != prev) ++reads;
    prev = t.rx[i];
    last = std::max(last, t.rx[i]);
    bytes += t.bytes[i];
    ++packets;
  }
  out.from = from;
  out.at = std::max(last, t.last);
  if (last - t0 < resolution_ || reads < kMinReads || packets > kMaxPerRead * reads) {
    // Too quick or read in batches to time: a lower bound over the whole train.
    ++bounds_;
    uint32_t all = 0;
    Nanos lo = t.rx[0], hi = t.rx[0];
    for (int i = 1; i < t.got; ++i) {
      all += t.bytes[i];
      lo = std::min(lo, t.rx[i]);
      hi = std::max(hi, t.rx[i]);
    }
    out.bytes = all;
    out.spread = hi - lo + resolution_;
    out.bound = true;
    return true;
  }
  out.bound = false;
  out.bytes = bytes;
  out.spread = last - t0;
  return true;
}

bool ProbeReceiver::on_packet(int from, uint32_t train, uint16_t seq, uint16_t count, uint32_t bytes, Nanos rx,
                              ProbeResult& out) {
  if (from < 0 || from >= static_cast<int>(trains_.size()) || count < 2 || count > wire::kProbeMaxCount ||
      seq >= count) {
    ++dropped_;
    return false;
  }
  Train& t = trains_[from];
  bool reported = false;
  if (t.open && t.id != train) reported = finish(from, t, out);  // a new train ends the old one
  if (!t.open) {
    t.open = true;
    t.id = train;
    t.count = count;
    t.got = 0;
  }
  if (t.got >= t.count) {  // a duplicate beyond the train's length
    ++dropped_;
    return reported;
  }
  t.rx[t.got] = rx;
  t.bytes[t.got] = bytes;
  t.last = rx;
  ++t.got;
  if (t.got >= t.count) {
    ProbeResult r;
    if (finish(from, t, r)) {
      if (reported) ++dropped_;  // two results at once: keep the newer
      out = r;
      return true;
    }
  }
  return reported;
}

std::vector<ProbeResult> ProbeReceiver::expire(Nanos now) {
  std::vector<ProbeResult> out;
  for (int from = 0; from < static_cast<int>(trains_.size()); ++from) {
    Train& t = trains_[from];
    if (!t.open || now - t.last < quiet_) continue;
    ProbeResult r;
    if (finish(from, t, r)) out.push_back(r);
  }
  return out;
}

}  // namespace sg::controller
