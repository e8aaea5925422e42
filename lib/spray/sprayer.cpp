#include "spray/sprayer.h"

#include <algorithm>

namespace sg::spray {
namespace {

// Before a slot has an RTT sample its sends expire after this long.
constexpr Nanos kDefaultExpiry = 100 * kMilli;
constexpr Nanos kMinExpiry = 2 * kMilli;
// How far (in chunks of total in-flight) a slot may lag behind the least loaded one.
constexpr double kSlackChunks = 16;
// A slot is backlogged (standby relays) when both its smoothed RTT and its in-flight data are
// this many times what the path carries without a queue (its minimum RTT, its bandwidth-delay
// product): a queue of a whole round trip, in time and in bytes. A paced sender on a healthy
// path keeps under both; a path whose capacity collapsed under the sender's pace crosses both
// within a few round trips. In-flight alone also trips on a busy host's bursts (late polls),
// which do not stretch a WAN round trip twofold.
constexpr double kBacklogFactor = 2;

}  // namespace

Sprayer::Peer* Sprayer::find(uint16_t peer) {
  for (auto& p : peers_)
    if (p.id == peer) return &p;
  return nullptr;
}
const Sprayer::Peer* Sprayer::find(uint16_t peer) const {
  for (const auto& p : peers_)
    if (p.id == peer) return &p;
  return nullptr;
}

int Sprayer::add_path(uint16_t peer, int route, uint16_t via) {
  Peer* p = find(peer);
  if (!p) {
    peers_.emplace_back();
    p = &peers_.back();
    p->id = peer;
  }
  if (p->count >= kMaxSlots) return -1;
  Slot& s = p->slot[p->count];
  s.route = route;
  s.via = via;
  s.plan_weight = via ? 0.0 : 1.0;  // until a plan says otherwise: direct only
  refresh(s);
  return static_cast<int>(p->count++);
}

void Sprayer::set_plan(const topo::Plan& plan, const std::vector<uint16_t>& sites, int self) {
  for (Peer& p : peers_) {
    int to = -1;
    for (size_t i = 0; i < sites.size(); ++i)
      if (sites[i] == p.id) to = static_cast<int>(i);
    // With relays off here (topology.multipath: false) the plan's splits are not this site's
    // to follow: another site's planner may have made them.
    const topo::LinkSplit* ls = standby_ && to >= 0 ? plan.split_for(self, to) : nullptr;
    unsigned direct = 0;
    for (unsigned k = 0; k < p.count; ++k) direct += p.slot[k].via == 0;
    double direct_share = ls ? ls->direct_weight : 1.0;
    // Each relay's weight is shared by the slots through it; a relay without a slot goes direct.
    for (unsigned k = 0; k < p.count; ++k) p.slot[k].plan_weight = 0;
    if (ls) {
      for (const topo::Relay& r : ls->relays) {
        const uint16_t via = r.via < sites.size() ? sites[r.via] : 0;
        unsigned n = 0;
        for (unsigned k = 0; k < p.count; ++k) n += via && p.slot[k].via == via;
        if (n == 0) {
          direct_share += r.weight;
          continue;
        }
        for (unsigned k = 0; k < p.count; ++k)
          if (via && p.slot[k].via == via) p.slot[k].plan_weight = static_cast<double>(r.weight) / n;
      }
    }
    for (unsigned k = 0; k < p.count; ++k) {
      Slot& s = p.slot[k];
      if (s.via == 0 && direct) s.plan_weight = direct_share / direct;
      refresh(s);
      s.current = 0;
    }
    p.rr = 0;
    if (measured_) reweigh(p);  // paths keep what they measured; the plan says which are in
  }
}

void Sprayer::set_path_factor(uint16_t peer, unsigned slot, double factor) {
  Peer* p = find(peer);
  if (!p || slot >= p->count) return;
  p->slot[slot].factor = std::max(0.0, factor);
  refresh(p->slot[slot]);
  if (measured_) reweigh(*p);
}

void Sprayer::expire(Slot& s, Nanos now, Nanos peer_srtt) {
  // A slot that no ACK has named yet (coalesced ACKs name the latest DATA's slot only) borrows
  // the peer's largest RTT.
  const Nanos rtt = s.srtt ? s.srtt : peer_srtt;
  const Nanos age = rtt ? std::max(kMinExpiry, 4 * rtt) : kDefaultExpiry;
  while (s.len && now - s.ring[s.head].ts > age) {
    s.done = s.ring[s.head].end;
    s.head = (s.head + 1) % kFlightRing;
    --s.len;
    s.c.expired.add();
  }
}

int Sprayer::pick_st(uint16_t peer, uint32_t bytes, Nanos now) {
  Peer* p = find(peer);
  if (!p || p->count == 0) return -1;
  int best = -1;
  switch (mode_) {
    case SprayMode::kEqual: {
      for (unsigned n = 0; n < p->count; ++n) {
        const unsigned k = (p->rr + n) % p->count;
        if (p->slot[k].weight > 0) {
          best = static_cast<int>(k);
          p->rr = k + 1;
          break;
        }
      }
      break;
    }
    case SprayMode::kWeighted: {
      // Integer weights keep the round robin exact (milli-units of weight).
      int64_t total = 0;
      for (unsigned k = 0; k < p->count; ++k) {
        Slot& s = p->slot[k];
        const auto w = static_cast<int64_t>(s.weight * 1000.0);
        if (w <= 0) continue;
        s.current += w;
        total += w;
        if (best < 0 || s.current > p->slot[best].current) best = static_cast<int>(k);
      }
      if (best >= 0) p->slot[best].current -= total;
      break;
    }
    case SprayMode::kAdaptive: {
      // Smooth weighted round robin over the slots whose in-flight data, scaled by their share
      // of the weight, is within kSlackChunks of the least loaded one. While every path keeps
      // up this is exactly the plan's split; a path that drains slower than its weight falls
      // behind by more than the slack and is skipped until it catches up.
      double total_w = 0;
      for (unsigned k = 0; k < p->count; ++k) total_w += std::max(0.0, p->slot[k].weight);
      double load[kMaxSlots];
      double least = -1;
      Nanos peer_srtt = 0;
      for (unsigned k = 0; k < p->count; ++k) peer_srtt = std::max(peer_srtt, p->slot[k].srtt);
      for (unsigned k = 0; k < p->count; ++k) {
        Slot& s = p->slot[k];
        load[k] = -1;
        if (s.weight <= 0) continue;
        expire(s, now, peer_srtt);
        load[k] = static_cast<double>(s.sent - s.done + bytes) * total_w / s.weight;
        if (least < 0 || load[k] < least) least = load[k];
      }
      const double limit = least + kSlackChunks * static_cast<double>(bytes);
      int64_t total = 0;
      for (unsigned k = 0; k < p->count; ++k) {
        if (load[k] < 0 || load[k] > limit) continue;
        Slot& s = p->slot[k];
        const auto w = std::max<int64_t>(1, static_cast<int64_t>(s.weight * 1000.0));
        s.current += w;
        total += w;
        if (best < 0 || s.current > p->slot[best].current) best = static_cast<int>(k);
      }
      if (best >= 0) p->slot[best].current -= total;
      if (standby_ && best >= 0 && backlogged(p->slot[best], bytes))
        if (const int spare = standby_for(*p, bytes, now, peer_srtt); spare >= 0) {
          standby_chunks_.add();
          return spare;
        }
      break;
    }
  }
  // Every weight zero (a plan that takes all paths out): the first direct path still works.
  if (best < 0) {
    for (unsigned k = 0; k < p->count && best < 0; ++k)
      if (p->slot[k].via == 0) best = static_cast<int>(k);
  }
  return best;
}

void Sprayer::on_sent_st(uint16_t peer, unsigned slot, uint32_t bytes, Nanos send_ts) {
  Peer* p = find(peer);
  if (!p || slot >= p->count) return;
  Slot& s = p->slot[slot];
  s.sent += bytes;
  s.c.chunks.add();
  s.c.bytes.add(bytes);
  if (s.len == kFlightRing) {  // full: the oldest counts as gone
    s.done = s.ring[s.head].end;
    s.head = (s.head + 1) % kFlightRing;
    --s.len;
  }
  s.ring[(s.head + s.len) % kFlightRing] = Flight{send_ts, s.sent};
  ++s.len;
}

void Sprayer::on_ack_st(uint16_t peer, uint16_t path_id, Nanos echo_ts, Nanos now) {
  Peer* p = find(peer);
  const unsigned k = wire::pathid::slot(path_id);
  if (!p || k >= p->count) return;
  Slot& s = p->slot[k];
  s.c.acks.add();
  // Everything sent on this slot up to echo_ts has left the path (arrived or lost).
  bool matched = false;
  while (s.len && s.ring[s.head].ts <= echo_ts) {
    s.done = s.ring[s.head].end;
    s.head = (s.head + 1) % kFlightRing;
    --s.len;
    matched = true;
  }
  const Nanos rtt = now - echo_ts;
  if (matched && rtt > 0 && rtt < 10 * kSecond) {
    s.srtt = s.srtt ? s.srtt + (rtt - s.srtt) / 8 : rtt;
    s.min_rtt = s.min_rtt ? std::min(s.min_rtt, rtt) : rtt;
  }
  if (matched && measured_) sample_rate(*p, s, now);
}

bool Sprayer::backlogged(const Slot& s, uint32_t bytes) {
  const double rate = rate_of(s);
  if (rate <= 0 || s.min_rtt <= 0 || static_cast<double>(s.srtt) <= kBacklogFactor * static_cast<double>(s.min_rtt))
    return false;
  const double limit = std::max(kSlackChunks * bytes, kBacklogFactor * rate * seconds(s.min_rtt));
  return static_cast<double>(s.sent - s.done) > limit;
}

int Sprayer::standby_for(Peer& p, uint32_t bytes, Nanos now, Nanos peer_srtt) {
  int best = -1;
  for (unsigned k = 0; k < p.count; ++k) {
    Slot& s = p.slot[k];
    if (s.via == 0 || s.plan_weight > 0 || s.factor <= 0) continue;
    expire(s, now, peer_srtt);
    const uint64_t inflight = s.sent - s.done;
    // Unmeasured: a few chunks to learn its rate from; measured: its own backlog test.
    if (rate_of(s) <= 0 ? inflight + bytes > kSlackChunks * bytes : backlogged(s, bytes)) continue;
    if (best < 0 || inflight < p.slot[best].sent - p.slot[best].done) best = static_cast<int>(k);
  }
  return best;
}

double Sprayer::rate_of(const Slot& s) { return *std::max_element(s.rate_max.begin(), s.rate_max.end()); }

void Sprayer::sample_rate(Peer& p, Slot& s, Nanos now) {
  // A rate sample per round trip (at least a millisecond) of ACKs. Round trips and epochs go
  // by the minimum RTT: an overloaded path's queue must not stretch them.
  const Nanos span = std::max<Nanos>(kMinExpiry / 2, s.min_rtt);
  if (s.mark_t < 0) {
    s.mark_t = now;
    s.mark_done = s.done;
  } else if (now - s.mark_t >= span) {
    const double r = static_cast<double>(s.done - s.mark_done) / seconds(now - s.mark_t);
    double& cur = s.rate_max[p.epoch % kRateEpochs];
    cur = std::max(cur, r);
    s.mark_t = now;
    s.mark_done = s.done;
  }
  // Epochs of 4 of the peer's largest minimum RTTs: the oldest maximum ages out, the next
  // slot probes.
  Nanos peer_rtt = 0;
  for (unsigned k = 0; k < p.count; ++k) peer_rtt = std::max(peer_rtt, p.slot[k].min_rtt);
  if (p.epoch_t < 0) p.epoch_t = now;
  if (now - p.epoch_t >= std::max<Nanos>(kMinExpiry, 4 * peer_rtt)) {
    p.epoch_t = now;
    ++p.epoch;
    for (unsigned k = 0; k < p.count; ++k) p.slot[k].rate_max[p.epoch % kRateEpochs] = 0;
    reweigh(p);
  }
}

void Sprayer::reweigh(Peer& p) {
  for (unsigned k = 0; k < p.count; ++k)
    if (p.slot[k].plan_weight > 0 && rate_of(p.slot[k]) <= 0) return;  // not every path measured yet
  const unsigned probing = static_cast<unsigned>(p.epoch % p.count);
  for (unsigned k = 0; k < p.count; ++k) {
    Slot& s = p.slot[k];
    s.weight = s.plan_weight > 0 ? rate_of(s) * s.factor * (k == probing ? kProbeGain : 1.0) : 0.0;
  }
}

unsigned Sprayer::slots(uint16_t peer) const {
  const Peer* p = find(peer);
  return p ? p->count : 0;
}
int Sprayer::route(uint16_t peer, unsigned slot) const {
  const Peer* p = find(peer);
  return p && slot < p->count ? p->slot[slot].route : -1;
}
uint16_t Sprayer::via(uint16_t peer, unsigned slot) const {
  const Peer* p = find(peer);
  return p && slot < p->count ? p->slot[slot].via : 0;
}
double Sprayer::delivery_rate(uint16_t peer, unsigned slot) const {
  const Peer* p = find(peer);
  return p && slot < p->count ? rate_of(p->slot[slot]) : 0.0;
}
double Sprayer::weight(uint16_t peer, unsigned slot) const {
  const Peer* p = find(peer);
  return p && slot < p->count ? p->slot[slot].weight : 0.0;
}
uint64_t Sprayer::inflight(uint16_t peer, unsigned slot) const {
  const Peer* p = find(peer);
  return p && slot < p->count ? p->slot[slot].sent - p->slot[slot].done : 0;
}
const SlotCounters* Sprayer::counters(uint16_t peer, unsigned slot) const {
  const Peer* p = find(peer);
  return p && slot < p->count ? &p->slot[slot].c : nullptr;
}

}  // namespace sg::spray
