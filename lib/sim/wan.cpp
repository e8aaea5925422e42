#include "sim/wan.h"

#include <algorithm>
#include <cstring>

#include "wire/ltp_codec.h"
#include "wire/ltp_header.h"
#include "wire/path_id.h"

namespace sg::sim {

namespace {
bool later(const auto& a, const auto& b) { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
}  // namespace

class Wan::Port final : public ltp::PacketSink {
 public:
  Port(Wan& w, int site) : w_(w), site_(site) {}
  void send(const ltp::TxMeta& m, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    w_.send_from(site_, m, head, payload);
  }

 private:
  Wan& w_;
  int site_;
};

// Every slot also holds the largest CONTROL message (a full policy fragment): a simulation of
// small chunks (a large model scaled down) must still carry the control plane's traffic.
constexpr uint32_t kMaxControlMsg = sizeof(wire::ControlHeader) + wire::kControlMaxPayload;

Wan::Wan(const WanSpec& spec, uint32_t max_msg_bytes, uint32_t payload_scale)
    : n_(spec.n()),
      slot_bytes_((std::max(max_msg_bytes, kMaxControlMsg) + 63) / 64 * 64),
      scale_(std::max<uint32_t>(1, payload_scale)) {
  links_.resize(static_cast<size_t>(n_) * n_);
  for (int i = 0; i < n_; ++i)
    for (int j = 0; j < n_; ++j)
      if (i != j && spec.link(i, j).bytes_per_s > 0)
        link(i, j) = Link(spec.link(i, j), spec.seed * 1000003 + static_cast<uint64_t>(i) * n_ + j);
  for (int i = 0; i < n_; ++i) {
    const SiteSpec& s = spec.sites[i];
    LinkSpec cap;
    cap.queue_bytes = s.cap_queue_bytes;
    cap.bytes_per_s = s.egress_bytes_per_s;
    egress_.emplace_back(cap, spec.seed + 7 * i + 1);
    has_egress_.push_back(s.egress_bytes_per_s > 0);
    cap.bytes_per_s = s.ingress_bytes_per_s;
    ingress_.emplace_back(cap, spec.seed + 7 * i + 2);
    has_ingress_.push_back(s.ingress_bytes_per_s > 0);
    ports_.push_back(std::make_unique<Port>(*this, i));
  }
  eps_.assign(n_, nullptr);
  node_to_site_.assign(65536, -1);
  site_node_.assign(eps_.size(), 0);
  wake_at_.assign(n_, INT64_MAX);
  split_of_.assign(static_cast<size_t>(n_) * n_, -1);
  sprayers_.resize(static_cast<size_t>(n_));
  codec_factor_.assign(static_cast<size_t>(n_) * n_, 1.0);
  link_inflight_.assign(static_cast<size_t>(n_) * n_, 0);
  heap_.reserve(1 << 16);
  pkts_.reserve(kBlock);
}

Wan::~Wan() = default;

void Wan::attach(int site, uint16_t node, Endpoint* ep) {
  eps_[site] = ep;
  node_to_site_[node] = site;
  site_node_[site] = node;
}

ltp::PacketSink& Wan::port(int site) { return *ports_[site]; }

void Wan::set_splits(const std::vector<topo::LinkSplit>& splits) {
  std::fill(split_of_.begin(), split_of_.end(), -1);
  splits_.clear();
  for (const auto& ls : splits) {
    if (ls.from >= n_ || ls.to >= n_ || ls.total_weight() == 0) continue;
    Split s;
    s.count = 0;
    auto add = [&](int hop, int64_t w) {
      if (w <= 0 || s.count > topo::kMaxRelays) return;
      s.hops[s.count] = hop;
      s.weight[s.count] = w;
      s.current[s.count] = 0;
      s.sent[s.count] = 0;
      s.total += w;
      ++s.count;
    };
    add(ls.to, ls.direct_weight);
    for (const auto& r : ls.relays)
      if (r.via < n_) add(r.via, r.weight);
    if (s.count == 0) continue;
    split_of_[static_cast<size_t>(ls.from) * n_ + ls.to] = static_cast<int>(splits_.size());
    splits_.push_back(s);
  }
}

spray::Sprayer& Wan::use_sprayer(int site, int max_relays) {
  auto sp = std::make_unique<spray::Sprayer>();
  for (int j = 0; j < n_; ++j) {
    if (j == site) continue;
    sp->add_path(site_node_[j], j, 0);  // route: the next hop's site index
    int relays = 0;
    for (int k = 0; k < n_ && relays < max_relays; ++k)
      if (k != site && k != j && site_node_[k] <= wire::kMaxRelayedSite) {
        sp->add_path(site_node_[j], k, site_node_[k]);
        ++relays;
      }
  }
  sprayers_[site] = std::move(sp);
  return *sprayers_[site];
}

void Wan::set_spray_plan(int site, const topo::Plan& plan) {
  if (!sprayers_[site]) return;
  sprayers_[site]->set_plan(plan, site_node_, site);
}

int Wan::spray_hop(int site, int dst, uint8_t* msg, uint32_t wire) {
  spray::Sprayer& sp = *sprayers_[site];
  auto* h = reinterpret_cast<wire::DataHeader*>(msg);
  const auto send_ts = static_cast<Nanos>(h->send_ts.load());
  const uint16_t peer = site_node_[dst];
  const int slot = sp.pick_st(peer, wire, send_ts);
  if (slot < 0) return dst;
  const auto k = static_cast<unsigned>(slot);
  const bool relayed = sp.via(peer, k) != 0;
  h->path_id.store(relayed ? wire::pathid::relayed(k, peer) : wire::pathid::direct(k));
  sp.on_sent_st(peer, k, wire, send_ts);
  return sp.route(peer, k);
}

void Wan::spray_ack(int at, std::span<const uint8_t> msg) {
  if (msg.size() < sizeof(wire::LtpCommon) || msg[offsetof(wire::LtpCommon, type)] != static_cast<uint8_t>(wire::MsgType::kAck))
    return;
  const auto a = wire::parse_ack(msg);
  if (a) sprayers_[at]->on_ack_st(a->f.src_node, a->f.path_id, static_cast<Nanos>(a->f.echo_ts), now_);
}

void Wan::set_codec_factor(int from, int to, double factor) {
  codec_factor_[static_cast<size_t>(from) * n_ + to] = std::max(1.0, factor);
}

void Wan::clear_codec_factors() { std::fill(codec_factor_.begin(), codec_factor_.end(), 1.0); }

uint32_t Wan::alloc_packet() {
  if (free_.empty()) {
    const uint32_t base = static_cast<uint32_t>(pkts_.size());
    // Not value-initialised: a slot is always written before it is read.
    blocks_.push_back(std::unique_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(kBlock) * slot_bytes_]));
    pkts_.resize(pkts_.size() + kBlock);
    free_.reserve(pkts_.size());
    for (uint32_t i = kBlock; i-- > 0;) free_.push_back(base + i);
  }
  const uint32_t id = free_.back();
  free_.pop_back();
  stats_.peak_packets = std::max(stats_.peak_packets, ++in_flight_);
  return id;
}

void Wan::free_packet(uint32_t id) {
  free_.push_back(id);
  --in_flight_;
}

void Wan::push(Nanos t, uint8_t kind, uint32_t id) {
  heap_.push_back(Event{t, seq_++, id, kind});
  std::push_heap(heap_.begin(), heap_.end(), [](const Event& a, const Event& b) { return later(a, b); });
}

void Wan::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), [](const Event& a, const Event& b) { return later(a, b); });
  heap_.pop_back();
}

void Wan::wake(int site, Nanos at) {
  if (at >= wake_at_[site]) return;
  wake_at_[site] = at;
  push(at, kWake, static_cast<uint32_t>(site));
}

std::vector<uint64_t> Wan::split_sent(int from, int to) const {
  const int si = split_of_[static_cast<size_t>(from) * n_ + to];
  if (si < 0) return {};
  const Split& s = splits_[si];
  return std::vector<uint64_t>(s.sent, s.sent + s.count);
}

int Wan::next_hop(int from, int to, uint32_t wire) {
  const int si = split_of_[static_cast<size_t>(from) * n_ + to];
  if (si < 0) return to;
  // Smooth weighted round robin: the path furthest behind its share goes next.
  Split& s = splits_[si];
  int best = 0;
  for (int k = 0; k < s.count; ++k) {
    s.current[k] += s.weight[k];
    if (s.current[k] > s.current[best]) best = k;
  }
  s.current[best] -= s.total;
  s.sent[best] += wire;
  return s.hops[best];
}

void Wan::send_from(int site, const ltp::TxMeta& m, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
  ++stats_.packets_sent;
  const int dst = node_to_site_[m.peer_node];
  const size_t len = head.size() + payload.size();
  if (dst < 0 || dst == site) {
    ++stats_.no_route;
    return;
  }
  if (len > slot_bytes_) {
    ++stats_.oversize;
    return;
  }
  const uint32_t id = alloc_packet();
  uint8_t* b = slot(id);
  std::memcpy(b, head.data(), head.size());
  if (!payload.empty()) std::memcpy(b + head.size(), payload.data(), payload.size());
  Packet& p = pkts_[id];
  p.len = static_cast<uint32_t>(len);
  p.src = static_cast<uint16_t>(site);
  p.dst = static_cast<uint16_t>(dst);
  p.data = m.type == wire::MsgType::kData;
  double body = static_cast<double>(payload.size()) * scale_;
  if (p.data) body /= codec_factor_[static_cast<size_t>(site) * n_ + dst];
  // Gateways seal every packet between sites: the trailer crosses the WAN too.
  p.wire = static_cast<uint32_t>(head.size() + wire::kAuthTrailerLen + static_cast<uint64_t>(body + 0.5));
  const bool sprayed = p.data && sprayers_[site] && head.size() >= sizeof(wire::DataHeader);
  const int next = sprayed ? spray_hop(site, dst, b, p.wire) : p.data ? next_hop(site, dst, p.wire) : dst;
  if (!sprayed && next != dst && head.size() >= sizeof(wire::DataHeader)) {
    // Through a relay: marked as the gateway's dataplane marks it, so the receiver does not
    // take it for a sample of the direct link.
    auto* h = reinterpret_cast<wire::DataHeader*>(b);
    h->path_id.store(static_cast<uint16_t>(h->path_id.load() | wire::kPathRelayed));
  }
  route(id, site, next, now_);
}

void Wan::route(uint32_t id, int at, int next, Nanos now) {
  Packet& p = pkts_[id];
  Link& l = link(at, next);
  if (!l.exists()) {
    ++stats_.no_route;
    free_packet(id);
    return;
  }
  Nanos t = now;
  if (has_egress_[at]) {
    const Link::Outcome e = egress_[at].send(now, p.wire);
    if (e.dropped) {
      ++stats_.dropped_queue;
      free_packet(id);
      return;
    }
    t = e.depart;
  }
  const Link::Outcome o = l.send(t, p.wire);
  if (o.dropped || o.lost) {
    ++(o.dropped ? stats_.dropped_queue : stats_.lost);
    free_packet(id);
    return;
  }
  p.prev = static_cast<uint16_t>(at);
  p.hop = static_cast<uint16_t>(next);
  p.hop_start = now;
  link_inflight_[static_cast<size_t>(at) * n_ + next] += p.wire;
  push(o.arrive, kArrive, id);
}

void Wan::deliver(uint32_t id, int at) {
  Packet& p = pkts_[id];
  if (p.dst != at) {  // a relay: store and forward, no aggregation
    ++stats_.relayed;
    if (eps_[at]) eps_[at]->on_relay({slot(id), p.len}, now_);
    route(id, at, p.dst, now_);
    return;
  }
  Endpoint* ep = eps_[at];
  if (!ep) {
    ++stats_.no_route;
    free_packet(id);
    return;
  }
  ++stats_.delivered;
  if (sprayers_[at]) spray_ack(at, {slot(id), p.len});  // as LtpTx::on_ack_st, before the sender sees it
  ep->set_relay_hop(p.prev != p.src ? site_node_[p.prev] : 0);
  ep->on_packet({slot(id), p.len}, now_, *ports_[at]);
  free_packet(id);
  // Poll soon rather than at once: packets arriving within poll_coalesce share one poll
  // (on_packet already runs the sender an ACK was for; poll only serves the timers).
  wake(at, now_ + poll_coalesce_);
}

bool Wan::run(const std::function<bool(int site)>& site_done, Nanos until) {
  while (!heap_.empty()) {
    const Event ev = heap_.front();
    if (ev.t > until) return false;
    pop();
    now_ = std::max(now_, ev.t);
    ++stats_.events;
    switch (ev.kind) {
      case kArrive: {
        Packet& p = pkts_[ev.id];
        const int at = p.hop;
        uint64_t& on_link = link_inflight_[static_cast<size_t>(p.prev) * n_ + at];
        on_link -= p.wire;
        if (hop_) hop_(Hop{p.prev, at, p.wire, p.data, now_, now_ - p.hop_start, on_link});
        if (has_ingress_[at]) {
          const Link::Outcome o = ingress_[at].send(now_, p.wire);
          if (o.dropped) {
            ++stats_.dropped_queue;
            free_packet(ev.id);
          } else {
            push(o.depart, kDeliver, ev.id);
          }
          break;
        }
        const bool final_hop = p.dst == at;
        deliver(ev.id, at);  // may grow pkts_: p is not used after this
        if (final_hop && site_done(at)) return true;
        break;
      }
      case kDeliver: {
        const int at = pkts_[ev.id].hop;
        const bool final_hop = pkts_[ev.id].dst == at;
        deliver(ev.id, at);
        if (final_hop && site_done(at)) return true;
        break;
      }
      case kWake: {
        const int site = static_cast<int>(ev.id);
        if (wake_at_[site] != ev.t) break;  // superseded by an earlier request
        wake_at_[site] = INT64_MAX;
        if (!eps_[site]) break;
        Nanos next = eps_[site]->poll(now_, *ports_[site]);
        if (next <= now_) next = now_ + 1;  // a state machine that wants to run again at once
        if (next != ltp::kNever) wake(site, next);
        if (site_done(site)) return true;
        break;
      }
    }
  }
  return false;
}

}  // namespace sg::sim
