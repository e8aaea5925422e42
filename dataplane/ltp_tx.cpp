#include "dataplane/ltp_tx.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "crypto/peer_sessions.h"
#include "dataplane/frame_build.h"
#include "wire/path_id.h"
#include "sync/local_group.h"
#include "wire/checksum.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace sg::dp {

LtpTx::LtpTx(const std::vector<Port>& ports, const Neighbours& nbrs, const std::vector<PeerRoute>& routes,
             LtpCounters& c)
    : ports_(ports), nbrs_(nbrs), routes_(routes), c_(c) {
  for (size_t i = 0; i < routes_.size(); ++i)
    if (routes_[i].peer_id < sync::kWorkerNodeBase) spray_.add_path(routes_[i].peer_id, static_cast<int>(i), routes_[i].via);
}

const PeerRoute* LtpTx::direct_route(uint16_t peer, uint16_t path_id) const {
  // The path the sender named if it is a direct one we have, else the first direct route.
  const PeerRoute* r = nullptr;
  for (const auto& x : routes_) {
    if (x.peer_id != peer || x.via) continue;
    if (x.path_id == path_id) return &x;
    if (!r) r = &x;
  }
  return r;
}

void LtpTx::on_ack_st(std::span<const uint8_t> msg, Nanos now) {
  auto a = wire::parse_ack(msg);
  if (!a) return;  // the transport counts malformed ACKs
  spray_.on_ack_st(a->f.src_node, a->f.path_id, static_cast<Nanos>(a->f.echo_ts), now);
}

void LtpTx::hand_out_st(uint16_t port_index, rte_mbuf* m) {
  const size_t nq = rings_.size();
  if (nq > 1) {
    const uint32_t q = next_queue_++ % nq;
    c_.data_tx_queue[q < c_.data_tx_queue.size() ? q : c_.data_tx_queue.size() - 1].add();
    if (rings_[q]) {
      m->hash.usr = port_index;
      if (rte_ring_sp_enqueue(rings_[q], m) == 0) return;  // engine q owns it now
      c_.txq_full.add();
    }
  } else {
    c_.data_tx_queue[0].add();
  }
  io_->tx_st(port_index, m);
}

void LtpTx::learn_worker_st(uint16_t node, const WorkerAddr& a) {
  const uint32_t w = static_cast<uint32_t>(node) - sync::kWorkerNodeBase;
  if (node < sync::kWorkerNodeBase || w >= workers_.size()) return;
  workers_[w] = a;
}

void LtpTx::send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
  PeerRoute worker_route;
  rte_ether_addr worker_mac{};
  const PeerRoute* r = nullptr;
  if (meta.peer_node >= sync::kWorkerNodeBase) {
    // A local worker: on-link, at the address its pushes came from.
    const uint32_t w = meta.peer_node - sync::kWorkerNodeBase;
    if (w >= workers_.size() || !workers_[w].valid) {
      io_->counters().drop(Drop::kNoRoute);
      return;
    }
    const WorkerAddr& a = workers_[w];
    worker_route.peer_id = meta.peer_node;
    worker_route.peer_ipv4 = a.ipv4;
    worker_route.peer_udp_port = a.udp_port;
    worker_route.port_index = a.port_index;
    worker_route.src_udp_port = 0;
    worker_mac = a.mac;
    r = &worker_route;
  }
  // DATA to a site is sprayed over the peer's paths; everything else goes direct.
  const bool data = meta.type == wire::MsgType::kData && head.size() >= sizeof(wire::DataHeader);
  int slot = -1;
  Nanos send_ts = 0;
  if (!r && data) {
    send_ts = static_cast<Nanos>(reinterpret_cast<const wire::DataHeader*>(head.data())->send_ts.load());
    slot = spray_.pick_st(meta.peer_node, static_cast<uint32_t>(head.size() + payload.size()), send_ts);
    if (slot >= 0) r = &routes_[static_cast<size_t>(spray_.route(meta.peer_node, static_cast<unsigned>(slot)))];
  }
  if (!r) r = direct_route(meta.peer_node, meta.path_id);
  rte_ether_addr nh = worker_mac;
  if (!r || (r != &worker_route && !nbrs_.lookup(r->nh_slot, nh))) {
    io_->counters().drop(Drop::kNoRoute);  // LTP retransmits once ARP has answered
    return;
  }
  // Workers talk to the gateway's LTP port; answers come from it.
  const uint16_t sport = r == &worker_route ? ltp_port_ : r->src_udp_port;
  crypto::Sealer* const sealer = r == &worker_route ? worker_sealer_ : sealer_;
  const bool seal = sealer != nullptr;
  wire::UdpFrameSpec spec = udp_spec(ports_[r->port_index], nh, r->peer_ipv4, sport, r->peer_udp_port);
  if (seal) drop_sealed_udp_checksum(spec);
  if (meta.payload_sum && !payload.empty() && spec.udp.checksum == wire::L4Checksum::kSoftware) {
    // A payload several workers get (their result): summed for the first, reused for the rest.
    if (!(*meta.payload_sum & ltp::kPayloadSumValid))
      *meta.payload_sum = ltp::kPayloadSumValid | wire::csum_fold(wire::csum_add(payload));
    spec.udp.tail_len = static_cast<uint16_t>(payload.size());
    spec.udp.tail_sum = static_cast<uint16_t>(*meta.payload_sum);
  }
  const size_t hr = wire::udp_frame_headroom(spec);
  size_t msg = head.size() + payload.size();
  const size_t room = msg + (seal ? wire::kAuthTrailerLen : 0);
  rte_mbuf* m = rte_pktmbuf_alloc(io_->pool());
  if (!m) {
    c_.no_mbuf.add();
    return;
  }
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + room)));
  if (!p) {
    rte_pktmbuf_free(m);
    c_.no_mbuf.add();
    return;
  }
  std::memcpy(p + hr, head.data(), head.size());
  if (!payload.empty()) std::memcpy(p + hr + head.size(), payload.data(), payload.size());
  if (slot >= 0) {
    // The slot (and for a relay the destination) rides in path_id, before the UDP checksum.
    const uint16_t pid = r->via ? wire::pathid::relayed(static_cast<unsigned>(slot), meta.peer_node)
                                : wire::pathid::direct(static_cast<unsigned>(slot));
    reinterpret_cast<wire::DataHeader*>(p + hr)->path_id.store(pid);
  }
  if (seal) {
    // Sealed for the next hop: a relayed copy is opened (and sealed again) by the relay.
    const uint16_t hop = r->via ? r->via : meta.peer_node;
    p[hr + offsetof(wire::LtpCommon, flags)] |= wire::kFlagSealed;
    msg = sealer->seal(hop, std::span<uint8_t>(p + hr, room), msg, wire::ltp_header_len(meta.type));
    if (msg == 0) {
      rte_pktmbuf_free(m);
      c_.seal_failed.add();
      return;
    }
    c_.sealed.add();
  }
  if (!wire::finish_udp_frame(std::span<uint8_t>(p, hr + msg), spec, msg)) {
    rte_pktmbuf_free(m);
    c_.no_mbuf.add();
    return;
  }
  set_tx_offloads(m, spec);
  if (!data) {
    io_->tx_st(r->port_index, m);
    return;
  }
  if (slot >= 0) {
    spray_.on_sent_st(meta.peer_node, static_cast<unsigned>(slot), static_cast<uint32_t>(msg), send_ts);
    if (r->via) c_.relayed_tx.add();
  }
  c_.data_tx.add();
  c_.data_tx_bytes.add(payload.size());
  hand_out_st(r->port_index, m);
}

}  // namespace sg::dp
