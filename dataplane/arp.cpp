// ARP: answer requests for our addresses in place, learn senders (engine 0 owns the
// neighbour table; ARP another engine receives goes there), and resolve the next hops of the
// routes by asking twice a second until answered and again before an entry ages out.
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/frame_build.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/log.h"
#include "wire/arp.h"

namespace sg::dp {
namespace {

constexpr uint64_t kResolveEveryDiv = 2;   // ask this many times a second (tsc_hz / 2)
constexpr uint64_t kRefreshAfterS = 30;    // learned entries are asked again after this

}  // namespace

void GatewayHandler::handle_arp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t l3, uint64_t now_tsc) {
  const Port& port = ports_[port_index];
  auto drop = [&](Drop why) {
    io.counters().drop(why);
    rte_pktmbuf_free(m);
  };
  uint8_t* base = rte_pktmbuf_mtod(m, uint8_t*);
  std::span<uint8_t> frame(base, rte_pktmbuf_data_len(m));
  auto arp = wire::parse_arp(frame.subspan(l3));
  if (!arp) return drop(Drop::kBadArp);
  if (arp->tpa != port.ipv4) return drop(Drop::kNotForUs);
  if (!arp_owner_) {
    // The neighbour table has one writer, engine 0: ARP that a NIC's hash put on our queue
    // goes there (replies would otherwise never be learned).
    rte_ring* to_owner = owner_rings_.empty() ? handoff_ : owner_rings_[0];
    if (to_owner) {
      hand_over_st(to_owner, port_index, m);
      return;
    }
  }
  if (arp_owner_ && nbrs_.learn_st(arp->spa, port_index, to_rte(arp->sha), now_tsc)) {
    ltp_.arp_learned.add();
    // Rare (a neighbour per refresh interval): worth a line at debug level.
    SG_LOG(DEBUG, dataplane, "ARP: %u.%u.%u.%u is at %02x:%02x:%02x:%02x:%02x:%02x (port '%s')\n", arp->spa >> 24,
           (arp->spa >> 16) & 0xff, (arp->spa >> 8) & 0xff, arp->spa & 0xff, arp->sha[0], arp->sha[1], arp->sha[2],
           arp->sha[3], arp->sha[4], arp->sha[5], port.name.c_str());
  }
  if (arp->op != wire::kArpRequest) {
    rte_pktmbuf_free(m);
    return;
  }
  // Answer in place: the request's mbuf becomes the reply.
  const wire::ArpInfo reply{wire::kArpReply, to_wire(port.mac), port.ipv4, arp->sha, arp->spa};
  auto eh = wire::build_ethernet(frame, eth_spec(port, arp->sha, wire::kEtherTypeArp));
  if (!eh || !wire::build_arp(frame.subspan(*eh), reply)) return drop(Drop::kBadArp);
  const size_t len = std::max<size_t>(*eh + sizeof(wire::ArpPacket), kMinEthFrame);
  if (len > rte_pktmbuf_data_len(m)) {
    if (!rte_pktmbuf_append(m, static_cast<uint16_t>(len - rte_pktmbuf_data_len(m)))) return drop(Drop::kBadArp);
  } else {
    rte_pktmbuf_trim(m, static_cast<uint16_t>(rte_pktmbuf_data_len(m) - len));
  }
  ltp_.arp_requests_answered.add();
  io.tx_st(port_index, m);
}

unsigned GatewayHandler::resolve_st(EngineIo& io, uint64_t now_tsc) {
  if (now_tsc < next_arp_tsc_) return 0;
  next_arp_tsc_ = now_tsc + tsc_hz_ / kResolveEveryDiv;
  unsigned sent = 0;
  for (int s = 0; s < static_cast<int>(nbrs_.size()); ++s) {
    rte_ether_addr mac;
    const bool valid = nbrs_.lookup(s, mac);
    if (valid && (nbrs_.is_static(s) || now_tsc - nbrs_.learned_tsc(s) < kRefreshAfterS * tsc_hz_)) continue;
    const Port& port = ports_[nbrs_.port_index(s)];
    rte_mbuf* m = rte_pktmbuf_alloc(io.pool());
    if (!m) {
      ltp_.no_mbuf.add();
      return sent;
    }
    // Tagged or not, a request fits the minimum frame (the rest is padding).
    constexpr size_t kLen = kArpFrameLen;
    static_assert(sizeof(wire::EthHeader) + sizeof(wire::VlanTag) + sizeof(wire::ArpPacket) <= kLen);
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kLen));
    if (!p) {
      rte_pktmbuf_free(m);
      ltp_.no_mbuf.add();
      return sent;
    }
    std::memset(p, 0, kLen);
    std::span<uint8_t> frame(p, kLen);
    auto eh = wire::build_ethernet(frame, eth_spec(port, kBroadcastMac, wire::kEtherTypeArp));
    const wire::ArpInfo req{wire::kArpRequest, to_wire(port.mac), port.ipv4, {}, nbrs_.ipv4(s)};
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

}  // namespace sg::dp
