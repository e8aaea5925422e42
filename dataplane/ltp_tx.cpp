#include "dataplane/ltp_tx.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "sync/local_group.h"
#include "wire/frame.h"

namespace sg::dp {

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
  // The path the sender chose if we have it, else the first direct route to that peer.
  for (const auto& x : routes_) {
    if (r == &worker_route) break;
    if (x.peer_id != meta.peer_node) continue;
    if (!r || x.path_id == meta.path_id) r = &x;
    if (x.path_id == meta.path_id) break;
  }
  rte_ether_addr nh = worker_mac;
  if (!r || (r != &worker_route && !nbrs_.lookup(r->nh_slot, nh))) {
    io_->counters().drop(Drop::kNoRoute);  // LTP retransmits once ARP has answered
    return;
  }
  const Port& port = ports_[r->port_index];
  wire::UdpFrameSpec spec;
  std::copy(nh.addr_bytes, nh.addr_bytes + 6, spec.eth.dst.begin());
  std::copy(port.mac.addr_bytes, port.mac.addr_bytes + 6, spec.eth.src.begin());
  if (port.vlan) spec.eth.vlan_tci = port.vlan;
  spec.ip.src = port.ipv4;
  spec.ip.dst = r->peer_ipv4;
  // Workers talk to the gateway's LTP port; answers come from it.
  const uint16_t sport = r == &worker_route ? ltp_port_ : r->src_udp_port;
  spec.udp = wire::UdpSpec{sport, r->peer_udp_port, true};
  const size_t hr = wire::udp_frame_headroom(spec);
  const size_t msg = head.size() + payload.size() + meta.trailer_len;
  rte_mbuf* m = rte_pktmbuf_alloc(io_->pool());
  if (!m) {
    c_.no_mbuf.add();
    return;
  }
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + msg)));
  if (!p) {
    rte_pktmbuf_free(m);
    c_.no_mbuf.add();
    return;
  }
  std::memcpy(p + hr, head.data(), head.size());
  if (!payload.empty()) std::memcpy(p + hr + head.size(), payload.data(), payload.size());
  if (meta.trailer_len) std::memset(p + hr + head.size() + payload.size(), 0, meta.trailer_len);
  if (!wire::finish_udp_frame(std::span<uint8_t>(p, hr + msg), spec, msg)) {
    rte_pktmbuf_free(m);
    c_.no_mbuf.add();
    return;
  }
  if (meta.type == wire::MsgType::kData) {
    c_.data_tx.add();
    c_.data_tx_bytes.add(payload.size());
  }
  io_->tx_st(r->port_index, m);
}

}  // namespace sg::dp
