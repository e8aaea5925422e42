#include "dataplane/gateway_handler.h"

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/path_id.h"
#include "sync/local_group.h"
#include "wire/arp.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace sg::dp {
namespace {

constexpr wire::MacAddr kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

wire::MacAddr to_wire(const rte_ether_addr& a) {
  wire::MacAddr m;
  std::copy(a.addr_bytes, a.addr_bytes + 6, m.begin());
  return m;
}
rte_ether_addr to_rte(const wire::MacAddr& m) {
  rte_ether_addr a;
  std::copy(m.begin(), m.end(), a.addr_bytes);
  return a;
}
bool in_subnet(uint32_t a, uint32_t b, uint8_t prefix) {
  const uint32_t mask = prefix >= 32 ? ~0u : ~((1u << (32 - prefix)) - 1);
  return (a & mask) == (b & mask);
}

}  // namespace

std::vector<PeerRoute> build_routes(const config::GatewayConfig& cfg, const std::vector<Port>& ports,
                                    Neighbours& nbrs) {
  std::vector<PeerRoute> routes;
  for (const auto& peer : cfg.peers) {
    for (const auto& path : peer.paths) {
      // A relayed path is sent to the relay's gateway: its address and UDP port.
      const config::PeerConfig* hop = &peer;
      if (path.via) {
        hop = nullptr;
        for (const auto& p : cfg.peers)
          if (p.id == *path.via && p.id != peer.id) hop = &p;
        if (!hop || peer.id > pathid::kMaxRelayedSite) continue;
      }
      PeerRoute r;
      r.peer_id = peer.id;
      r.via = path.via.value_or(0);
      r.peer_ipv4 = hop->address.host_order;
      r.peer_udp_port = hop->udp_port;
      r.path_id = path.id;
      for (uint16_t i = 0; i < ports.size(); ++i)
        if (ports[i].name == path.port) r.port_index = i;
      const Port& port = ports[r.port_index];
      const bool onlink = in_subnet(port.ipv4, r.peer_ipv4, port.prefix_len) || port.gateway == 0;
      const uint32_t nh = onlink ? r.peer_ipv4 : port.gateway;
      rte_ether_addr smac;
      const bool has_static = onlink && hop->mac.has_value();
      if (has_static) std::copy(hop->mac->bytes.begin(), hop->mac->bytes.end(), smac.addr_bytes);
      r.nh_slot = nbrs.add_slot(nh, r.port_index, has_static ? &smac : nullptr);
      // Distinct source ports per path let ECMP in the WAN spread paths apart.
      r.src_udp_port = path.udp_src_port.value_or(static_cast<uint16_t>(cfg.transport.udp_port + 1 + path.id));
      routes.push_back(r);
    }
  }
  return routes;
}

GatewayHandler::GatewayHandler(const config::GatewayConfig& cfg, const std::vector<Port>& ports, Neighbours& nbrs,
                               const std::vector<PeerRoute>& routes, bool arp_owner, PushParams push)
    : cfg_(cfg), ports_(ports), nbrs_(nbrs), routes_(routes), arp_owner_(arp_owner), push_(push) {
  tsc_hz_ = rte_get_tsc_hz();
  tsc0_ = rte_get_tsc_cycles();
  impair_rng_.reseed(cfg.impairment.seed * 1000003u + cfg.site.id);
  if (push_.rate_mbit > 0) {
    const double frame_bits = 8.0 * (push_.chunk_bytes + sizeof(wire::DataHeader) + 42);
    push_interval_tsc_ = std::max<uint64_t>(1, static_cast<uint64_t>(frame_bits / (push_.rate_mbit * 1e6) * tsc_hz_));
  }
}

Nanos GatewayHandler::now_ns(uint64_t tsc) const {
  return static_cast<Nanos>(static_cast<__uint128_t>(tsc - tsc0_) * 1000000000u / tsc_hz_);
}

void GatewayHandler::on_stop_st(EngineIo&) {
  if (job_) job_->on_stop_st();
  if (tx_ring_) {
    // What engine 0 dealt to our queue and we did not send. Engine 0 must be stopped first
    // (it is the ring's only producer), else a later enqueue stays in the ring.
    void* objs[32];
    unsigned n;
    while ((n = rte_ring_sc_dequeue_burst(tx_ring_, objs, 32, nullptr)) > 0)
      rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(objs), n);
  }
  if (ctl_out_) {
    void* objs[32];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(ctl_out_, objs, 32, nullptr)) > 0)
      rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(objs), n);
  }
  if (!job_ || !handoff_) return;
  void* objs[32];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(handoff_, objs, 32, nullptr)) > 0)
    rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(objs), n);
}

unsigned GatewayHandler::owner_of(const wire::CommonInfo& common, std::span<const uint8_t> msg) const {
  if (common.src_node >= sync::kWorkerNodeBase) return 0;  // the site's workers: the lead
  const auto shard = wire::peek_shard(msg);                 // DATA, ACK, CLOSE
  if (!shard) return 0;                                     // CONTROL, REJECT, malformed
  return *shard % static_cast<unsigned>(owner_rings_.size());
}

int GatewayHandler::peer_index_of_node(uint16_t node) const {
  for (size_t i = 0; i < cfg_.peers.size(); ++i)
    if (cfg_.peers[i].id == node) return static_cast<int>(i);
  return -1;
}

void GatewayHandler::on_rx_st(EngineIo& io, uint16_t port_index, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) {
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    handle_one_st(io, port_index, pkts[i], now_tsc);
  }
}

void GatewayHandler::handle_one_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, uint64_t now_tsc) {
  EngineCounters& c = io.counters();
  const Port& port = ports_[port_index];
  if (m->nb_segs != 1) {
    c.drop(Drop::kMultiSegment);
    rte_pktmbuf_free(m);
    return;
  }
  std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
  auto eth = wire::parse_ethernet(frame);
  if (!eth) {
    c.drop(Drop::kRuntFrame);
    rte_pktmbuf_free(m);
    return;
  }
  const bool to_us = eth->dst == to_wire(port.mac) || eth->dst == kBroadcast;
  const bool vlan_ok = port.vlan ? (eth->has_vlan && (eth->vlan_tci & 0x0fff) == port.vlan) : !eth->has_vlan;
  if (!to_us || !vlan_ok) {
    c.drop(Drop::kNotForUs);
    rte_pktmbuf_free(m);
    return;
  }
  if (eth->ethertype == wire::kEtherTypeArp) {
    handle_arp_st(io, port_index, m, eth->l3_offset, now_tsc);
    return;
  }
  if (eth->ethertype != wire::kEtherTypeIpv4) {
    c.drop(Drop::kUnknownEthertype);
    rte_pktmbuf_free(m);
    return;
  }
  // The NIC may have checked the checksums already; a bad verdict from it is final.
  const uint64_t ipf = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  if (ipf == RTE_MBUF_F_RX_IP_CKSUM_BAD) {
    c.drop(Drop::kBadIpChecksum);
    rte_pktmbuf_free(m);
    return;
  }
  auto ip = wire::parse_ipv4(frame.subspan(eth->l3_offset), ipf != RTE_MBUF_F_RX_IP_CKSUM_GOOD);
  if (!ip) {
    c.drop(ip.error() == wire::WireError::kBadChecksum ? Drop::kBadIpChecksum : Drop::kBadIpv4);
    rte_pktmbuf_free(m);
    return;
  }
  if (ip->dst != port.ipv4) {
    c.drop(Drop::kNotForUs);
    rte_pktmbuf_free(m);
    return;
  }
  if (ip->proto != wire::kIpProtoUdp || ip->is_fragment) {
    c.drop(ip->is_fragment ? Drop::kBadIpv4 : Drop::kNotUdp);
    rte_pktmbuf_free(m);
    return;
  }
  const size_t l4 = eth->l3_offset + ip->payload_offset;
  const uint64_t l4f = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
  auto udp = wire::parse_udp(frame.subspan(l4, ip->payload_len), ip->src, ip->dst,
                             l4f != RTE_MBUF_F_RX_L4_CKSUM_GOOD);
  if (!udp || l4f == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
    c.drop(Drop::kBadUdp);
    rte_pktmbuf_free(m);
    return;
  }
  if (udp->dst_port != cfg_.transport.udp_port) {
    c.drop(Drop::kWrongUdpPort);
    rte_pktmbuf_free(m);
    return;
  }
  handle_ltp_st(io, port_index, m, l4 + udp->payload_offset, udp->payload_len, Src{ip->src, udp->src_port, eth->src},
                now_tsc);
}

void GatewayHandler::handle_arp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t l3, uint64_t now_tsc) {
  const Port& port = ports_[port_index];
  uint8_t* base = rte_pktmbuf_mtod(m, uint8_t*);
  std::span<uint8_t> frame(base, rte_pktmbuf_data_len(m));
  auto arp = wire::parse_arp(frame.subspan(l3));
  if (!arp) {
    io.counters().drop(Drop::kBadArp);
    rte_pktmbuf_free(m);
    return;
  }
  if (arp->tpa != port.ipv4) {
    io.counters().drop(Drop::kNotForUs);
    rte_pktmbuf_free(m);
    return;
  }
  if (!arp_owner_) {
    // The neighbour table has one writer, engine 0: ARP that a NIC's hash put on our queue
    // goes there (replies would otherwise never be learned).
    rte_ring* to_owner = owner_rings_.empty() ? handoff_ : owner_rings_[0];
    if (to_owner) {
      m->hash.usr = port_index;
      if (rte_ring_enqueue(to_owner, m) != 0) {
        ltp_.handoff_full.add();
        rte_pktmbuf_free(m);
      }
      return;
    }
  }
  if (arp_owner_ && nbrs_.learn_st(arp->spa, port_index, to_rte(arp->sha), now_tsc)) ltp_.arp_learned.add();
  if (arp->op != wire::kArpRequest) {
    rte_pktmbuf_free(m);
    return;
  }
  // Answer in place: the request's mbuf becomes the reply.
  wire::ArpInfo reply{wire::kArpReply, to_wire(port.mac), port.ipv4, arp->sha, arp->spa};
  wire::EthSpec es{arp->sha, to_wire(port.mac), wire::kEtherTypeArp, {}};
  if (port.vlan) es.vlan_tci = port.vlan;
  auto eh = wire::build_ethernet(frame, es);
  if (!eh || !wire::build_arp(frame.subspan(*eh), reply)) {
    io.counters().drop(Drop::kBadArp);
    rte_pktmbuf_free(m);
    return;
  }
  const size_t len = std::max<size_t>(*eh + sizeof(wire::ArpPacket), 60);
  if (len > rte_pktmbuf_data_len(m)) {
    if (!rte_pktmbuf_append(m, static_cast<uint16_t>(len - rte_pktmbuf_data_len(m)))) {
      io.counters().drop(Drop::kBadArp);
      rte_pktmbuf_free(m);
      return;
    }
  } else {
    rte_pktmbuf_trim(m, static_cast<uint16_t>(rte_pktmbuf_data_len(m) - len));
  }
  ltp_.arp_requests_answered.add();
  io.tx_st(port_index, m);
}

void GatewayHandler::handle_ltp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t off, size_t len,
                                   const Src& src, uint64_t now_tsc) {
  std::span<const uint8_t> msg(rte_pktmbuf_mtod(m, const uint8_t*) + off, len);
  auto common = wire::parse_common(msg);
  if (!common) {
    io.counters().drop(Drop::kBadLtp);
    rte_pktmbuf_free(m);
    return;
  }
  if (!wire::ltp_version_supported(common->version)) {
    ltp_.bad_version.add();
    io.counters().drop(Drop::kBadLtp);
    rte_pktmbuf_free(m);
    return;
  }
  bool relayed_to_us = false;
  if (common->type == wire::MsgType::kData && msg.size() >= sizeof(wire::DataHeader)) {
    const uint16_t pid = reinterpret_cast<const wire::DataHeader*>(msg.data())->path_id.load();
    if (pathid::is_relayed(pid)) {
      if (pathid::destination(pid) != cfg_.site.id) {
        relay_st(io, m, off, len, pathid::destination(pid));
        return;
      }
      relayed_to_us = true;  // ours, via a relay: accepted as from src_node
    }
  }
  if (job_ || handoff_) {
    if (common->job != cfg_.job.id) {
      ltp_.other_job.add();
      io.counters().drop(Drop::kLtpRefused);
      rte_pktmbuf_free(m);
      return;
    }
    rte_ring* to = nullptr;
    if (!job_) {
      to = handoff_;  // not the job's engine: engine 0 takes it
    } else if (!owner_rings_.empty()) {
      const unsigned owner = owner_of(*common, msg);
      if (owner != self_) to = owner_rings_[owner];
    }
    if (to) {
      // Hand the whole frame over (the owner validates it again). The port it came in on
      // rides in the hash field (the RSS hash is no longer needed).
      m->hash.usr = port_index;
      if (rte_ring_enqueue(to, m) != 0) {
        ltp_.handoff_full.add();
        rte_pktmbuf_free(m);
      } else {
        ltp_.handed_over.add();
      }
      return;
    }
  }
  // Counted once, by the engine that handles the frame (not by one that handed it over).
  if (relayed_to_us) ltp_.relayed_rx.add();
  switch (common->type) {
    case wire::MsgType::kData: {
      ltp_.data_rx.add();
      ltp_.data_rx_bytes.add(msg.size() > sizeof(wire::DataHeader) ? msg.size() - sizeof(wire::DataHeader) : 0);
      const int pi = peer_index_of_node(common->src_node);
      if (pi >= 0 && pi < static_cast<int>(ltp_.data_rx_from_site.size())) ltp_.data_rx_from_site[pi].add();
      break;
    }
    case wire::MsgType::kAck: ltp_.ack_rx.add(); break;
    case wire::MsgType::kClose: ltp_.close_rx.add(); break;
    case wire::MsgType::kControl: ltp_.control_rx.add(); break;
    case wire::MsgType::kReject: ltp_.reject_rx.add(); break;
    default: io.counters().drop(Drop::kBadLtp); break;
  }
  if (job_ && ctl_in_ && common->type == wire::MsgType::kControl) {
    // Control-plane messages belong to the control thread: the frame moves there whole.
    if (rte_ring_enqueue(ctl_in_, m) != 0) {
      ltp_.control_full.add();
      rte_pktmbuf_free(m);
    }
    return;
  }
  if (cfg_.impairment.rx_data_loss > 0 && common->type == wire::MsgType::kData &&
      common->src_node < sync::kWorkerNodeBase && impair_rng_.chance(cfg_.impairment.rx_data_loss)) {
    io.counters().drop(Drop::kImpairment);  // the WAN's loss, played by the receiver
    rte_pktmbuf_free(m);
    return;
  }
  if (job_) {
    if (common->src_node >= sync::kWorkerNodeBase) {
      // A local worker: remember where it is, so results go back the way pushes came.
      WorkerAddr a;
      a.valid = true;
      a.ipv4 = src.ip;
      a.udp_port = src.udp_port;
      a.port_index = port_index;
      std::copy(src.mac.begin(), src.mac.end(), a.mac.addr_bytes);
      ltp_tx_->learn_worker_st(common->src_node, a);
    }
    // The payload is read in place: chunks are added into the accumulators from this mbuf.
    ltp_tx_->bind_st(&io);
    if (common->type == wire::MsgType::kAck) ltp_tx_->on_ack_st(msg, now_ns(now_tsc));
    job_->on_packet_st(msg, now_ns(now_tsc));
  } else if (common->type == wire::MsgType::kData && !wire::parse_data(msg)) {
    io.counters().drop(Drop::kBadLtp);
  }
  rte_pktmbuf_free(m);
}

void GatewayHandler::relay_st(EngineIo& io, rte_mbuf* m, size_t off, size_t len, uint16_t dst) {
  std::span<const uint8_t> msg(rte_pktmbuf_mtod(m, const uint8_t*) + off, len);
  auto d = wire::parse_data(msg);
  // Only whole, valid DATA of our job from another job site is relayed, and only once (a relay
  // sends on a direct route, so a frame crosses at most one relay).
  if (!d || d->f.job != cfg_.job.id || d->f.src_node == dst || d->f.src_node == cfg_.site.id ||
      peer_index_of_node(d->f.src_node) < 0) {
    ltp_.relay_refused.add();
    io.counters().drop(Drop::kLtpRefused);
    rte_pktmbuf_free(m);
    return;
  }
  const PeerRoute* r = nullptr;
  for (const auto& x : routes_)
    if (x.peer_id == dst && !x.via) {
      r = &x;
      break;
    }
  rte_ether_addr nh;
  if (!r || !nbrs_.lookup(r->nh_slot, nh)) {
    ltp_.relay_no_route.add();
    io.counters().drop(Drop::kNoRoute);
    rte_pktmbuf_free(m);
    return;
  }
  const Port& port = ports_[r->port_index];
  wire::UdpFrameSpec spec;
  spec.eth = wire::EthSpec{to_wire(nh), to_wire(port.mac), wire::kEtherTypeIpv4, {}};
  if (port.vlan) spec.eth.vlan_tci = port.vlan;
  spec.ip.src = port.ipv4;
  spec.ip.dst = r->peer_ipv4;
  spec.udp = wire::UdpSpec{r->src_udp_port, r->peer_udp_port, true};
  const size_t hr = wire::udp_frame_headroom(spec);
  // The LTP bytes stay where they are; the new headers replace the old in front of them.
  const size_t have = rte_pktmbuf_data_len(m);
  if (have > off + len) rte_pktmbuf_trim(m, static_cast<uint16_t>(have - off - len));
  const bool moved = off >= hr ? rte_pktmbuf_adj(m, static_cast<uint16_t>(off - hr)) != nullptr
                               : rte_pktmbuf_prepend(m, static_cast<uint16_t>(hr - off)) != nullptr;
  if (!moved || !wire::finish_udp_frame(std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*), hr + len), spec, len)) {
    ltp_.relay_refused.add();
    io.counters().drop(Drop::kLtpRefused);
    rte_pktmbuf_free(m);
    return;
  }
  ltp_.relay_forwarded.add();
  ltp_.relay_forwarded_bytes.add(d->payload.size());
  io.tx_st(r->port_index, m);
}

unsigned GatewayHandler::on_poll_st(EngineIo& io, uint64_t now_tsc) {
  unsigned work = 0;
  if (tx_ring_) {
    void* objs[32];
    const unsigned n = rte_ring_sc_dequeue_burst(tx_ring_, objs, 32, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      if (m->hash.usr < ports_.size()) {
        io.tx_st(static_cast<uint16_t>(m->hash.usr), m);
      } else {
        rte_pktmbuf_free(m);  // cannot happen: LtpTx writes a valid port index
      }
    }
    work += n;
  }
  if (job_) {
    if (handoff_) {
      void* objs[32];
      const unsigned n = rte_ring_dequeue_burst(handoff_, objs, 32, nullptr);
      for (unsigned i = 0; i < n; ++i) {
        auto* m = static_cast<rte_mbuf*>(objs[i]);
        const uint16_t pi = static_cast<uint16_t>(m->hash.usr < ports_.size() ? m->hash.usr : 0);
        handle_one_st(io, pi, m, now_tsc);
      }
      work += n;
    }
    if (ctl_out_) {
      void* objs[32];
      const unsigned n = rte_ring_dequeue_burst(ctl_out_, objs, 32, nullptr);
      for (unsigned i = 0; i < n; ++i) {
        auto* m = static_cast<rte_mbuf*>(objs[i]);
        io.tx_st(static_cast<uint16_t>(m->hash.usr), m);
      }
      work += n;
    }
    ltp_tx_->bind_st(&io);
    work += job_->poll_st(now_ns(now_tsc));
  }
  if (arp_owner_) work += resolve_st(io, now_tsc);
  if (push_interval_tsc_) work += push_st(io, now_tsc);
  return work;
}

unsigned GatewayHandler::resolve_st(EngineIo& io, uint64_t now_tsc) {
  if (now_tsc < next_arp_tsc_) return 0;
  next_arp_tsc_ = now_tsc + tsc_hz_ / 2;  // ask twice a second until answered
  unsigned sent = 0;
  for (int s = 0; s < static_cast<int>(nbrs_.size()); ++s) {
    rte_ether_addr mac;
    const bool valid = nbrs_.lookup(s, mac);
    if (valid && (nbrs_.is_static(s) || now_tsc - nbrs_.learned_tsc(s) < 30 * tsc_hz_)) continue;
    const Port& port = ports_[nbrs_.port_index(s)];
    rte_mbuf* m = rte_pktmbuf_alloc(io.pool());
    if (!m) {
      ltp_.no_mbuf.add();
      return sent;
    }
    uint8_t* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 60));
    std::memset(p, 0, 60);
    std::span<uint8_t> frame(p, 60);
    wire::EthSpec es{kBroadcast, to_wire(port.mac), wire::kEtherTypeArp, {}};
    if (port.vlan) es.vlan_tci = port.vlan;
    auto eh = wire::build_ethernet(frame, es);
    wire::ArpInfo req{wire::kArpRequest, to_wire(port.mac), port.ipv4, {}, nbrs_.ipv4(s)};
    if (!eh || !wire::build_arp(frame.subspan(*eh), req)) {
      rte_pktmbuf_free(m);
      continue;
    }
    ltp_.arp_requests_sent.add();
    io.tx_st(nbrs_.port_index(s), m);
    ++sent;
  }
  return sent;
}

unsigned GatewayHandler::push_st(EngineIo& io, uint64_t now_tsc) {
  if (routes_.empty() || now_tsc < next_push_tsc_) return 0;
  // Never catch up with a burst after a stall longer than a millisecond.
  if (now_tsc - next_push_tsc_ > tsc_hz_ / 1000) next_push_tsc_ = now_tsc;
  unsigned sent = 0;
  rte_ether_addr unused;
  size_t skipped = 0;
  while (next_push_tsc_ <= now_tsc && sent < 32 && skipped < routes_.size()) {
    const PeerRoute& r = routes_[next_route_];
    next_route_ = (next_route_ + 1) % routes_.size();
    if (r.via) {  // the synthetic push does not know the relay encoding: direct paths only
      ++skipped;
      continue;
    }
    // Peers whose next hop is not resolved yet are skipped until ARP answers.
    if (!nbrs_.lookup(r.nh_slot, unused)) {
      ++skipped;
      continue;
    }
    skipped = 0;
    if (send_data_st(io, r, now_tsc)) ++sent;
    next_push_tsc_ += push_interval_tsc_;
  }
  if (skipped) next_push_tsc_ = now_tsc + push_interval_tsc_;
  return sent;
}

bool GatewayHandler::send_data_st(EngineIo& io, const PeerRoute& r, uint64_t now_tsc) {
  rte_ether_addr nh;
  if (!nbrs_.lookup(r.nh_slot, nh)) {
    io.counters().drop(Drop::kNoRoute);
    return false;
  }
  const Port& port = ports_[r.port_index];
  rte_mbuf* m = rte_pktmbuf_alloc(io.pool());
  if (!m) {
    ltp_.no_mbuf.add();
    return false;
  }
  wire::UdpFrameSpec spec;
  spec.eth = wire::EthSpec{to_wire(nh), to_wire(port.mac), wire::kEtherTypeIpv4, {}};
  if (port.vlan) spec.eth.vlan_tci = port.vlan;
  spec.ip.src = port.ipv4;
  spec.ip.dst = r.peer_ipv4;
  spec.ip.id = static_cast<uint16_t>(chunk_);
  spec.udp = wire::UdpSpec{r.src_udp_port, r.peer_udp_port, true};
  const size_t head = wire::udp_frame_headroom(spec);
  const uint16_t payload = static_cast<uint16_t>(push_.chunk_bytes);
  const size_t msg_len = wire::data_msg_len(payload, false);
  const size_t total = head + msg_len;
  uint8_t* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(total)));
  if (!p) {
    rte_pktmbuf_free(m);
    ltp_.no_mbuf.add();
    return false;
  }
  std::span<uint8_t> frame(p, total);
  wire::DataFields f;
  f.src_node = cfg_.site.id;
  f.job = 1;
  f.round = round_;
  f.shard = 0;
  f.path_id = r.path_id;
  f.chunk_index = chunk_;
  f.chunk_count = push_.chunks_per_round;
  f.contributors = 1;
  f.send_ts = now_tsc;
  // Synthetic gradient: a value per float that the receiver could recompute.
  float* vals = reinterpret_cast<float*>(p + head + sizeof(wire::DataHeader));
  const float v = static_cast<float>(cfg_.site.id) + static_cast<float>(chunk_) * 1e-6f;
  for (size_t k = 0; k < payload / sizeof(float); ++k) std::memcpy(vals + k, &v, sizeof v);
  if (!wire::build_data_header(frame.subspan(head, msg_len), f, payload) ||
      !wire::finish_udp_frame(frame, spec, msg_len)) {
    rte_pktmbuf_free(m);
    ltp_.no_mbuf.add();
    return false;
  }
  if (++chunk_ >= push_.chunks_per_round) {
    chunk_ = 0;
    ++round_;
  }
  ltp_.data_tx.add();
  ltp_.data_tx_bytes.add(payload);
  io.tx_st(r.port_index, m);
  return true;
}

}  // namespace sg::dp
