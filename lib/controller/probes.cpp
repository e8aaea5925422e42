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
  const bool half = t.mid >= 0 && t.last > t.mid && t.got - (t.count + 1) / 2 >= 2;
  if (t.got < 2 || t.last <= t.first) {
    ++dropped_;
    return false;
  }
  out.from = from;
  out.bytes = half ? t.bytes_mid : t.bytes;
  out.spread = half ? t.last - t.mid : t.last - t.first;
  out.at = t.last;
  return true;
}

bool ProbeReceiver::on_packet(int from, uint32_t train, uint16_t seq, uint16_t count, uint32_t bytes, Nanos rx,
                              ProbeResult& out) {
  if (from < 0 || from >= static_cast<int>(trains_.size()) || count < 2 || seq >= count) {
    ++dropped_;
    return false;
  }
  Train& t = trains_[from];
  bool reported = false;
  if (t.open && t.id != train) reported = finish(from, t, out);  // a new train ends the old one
  if (!t.open) {
    t = Train{};
    t.open = true;
    t.id = train;
    t.count = count;
    t.first = rx;
  } else {
    t.bytes += bytes;  // bytes after the first arrival
    if (t.mid >= 0) t.bytes_mid += bytes;
  }
  t.last = rx;
  ++t.got;
  if (t.mid < 0 && t.got == (t.count + 1) / 2) t.mid = rx;
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
