// Relayed DATA for another site (NetStorm multipath): the LTP bytes stay where they are in
// the mbuf (opened by auth.cpp, re-sealed here toward the destination: seals are per hop),
// new Ethernet/IPv4/UDP headers replace the old ones in front of them, and the frame leaves
// on our direct route to the destination. No job state is touched but the estimator's sample
// of the hop it came over (sync/hop_sample.h). Only whole, valid DATA of our job from another job site is relayed, and only once (a
// relay sends on a direct route, so a frame crosses at most one relay).
#include <rte_mbuf.h>

#include "crypto/peer_sessions.h"
#include "dataplane/frame_build.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/job_runner.h"

namespace sg::dp {

void GatewayHandler::relay_st(EngineIo& io, rte_mbuf* m, size_t off, size_t len, uint16_t dst, JobRunner* sampler,
                              uint64_t now_tsc) {
  std::span<const uint8_t> msg(rte_pktmbuf_mtod(m, const uint8_t*) + off, len);
  auto refuse = [&](Counter& why, Drop drop) {
    why.add();
    io.counters().drop(drop);
    rte_pktmbuf_free(m);
  };
  auto d = wire::parse_data(msg);
  if (!d || !our_job(d->f.job) || d->f.src_node == dst || d->f.src_node == cfg_.site.id ||
      peer_index_of_node(d->f.src_node) < 0)
    return refuse(ltp_.relay_refused, Drop::kLtpRefused);
  // The first hop (origin -> us) carried it: the job's estimator counts it on that link.
  if (sampler) sampler->on_relay_st(d->f.src_node, static_cast<uint32_t>(len), d->f.send_ts, now_ns(now_tsc),
                                    (d->f.flags & wire::kFlagAppLimited) != 0);
  const PeerRoute* r = first_direct_route(routes_, dst);
  rte_ether_addr nh;
  if (!r || !nbrs_.lookup(r->nh_slot, nh)) return refuse(ltp_.relay_no_route, Drop::kNoRoute);
  wire::UdpFrameSpec spec = udp_spec(ports_[r->port_index], nh, r->peer_ipv4, r->src_udp_port, r->peer_udp_port);
  if (sealer_) drop_sealed_udp_checksum(spec);
  const size_t hr = wire::udp_frame_headroom(spec);
  const size_t have = rte_pktmbuf_data_len(m);
  if (sealer_) {
    // The old trailer's bytes after the message are the room for the new one.
    const size_t n = sealer_->seal(dst, std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*) + off, have - off), len,
                                   sizeof(wire::DataHeader));
    if (n == 0) return refuse(ltp_.seal_failed, Drop::kUnauthenticated);
    ltp_.sealed.add();
    len = n;
  }
  if (have > off + len) rte_pktmbuf_trim(m, static_cast<uint16_t>(have - off - len));
  const bool moved = off >= hr ? rte_pktmbuf_adj(m, static_cast<uint16_t>(off - hr)) != nullptr
                               : rte_pktmbuf_prepend(m, static_cast<uint16_t>(hr - off)) != nullptr;
  if (!moved || !wire::finish_udp_frame(std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*), hr + len), spec, len))
    return refuse(ltp_.relay_refused, Drop::kLtpRefused);
  // The received mbuf may carry RX offload flags: only what this frame needs goes out.
  m->ol_flags = 0;
  set_tx_offloads(m, spec);
  ltp_.relay_forwarded.add();
  ltp_.relay_forwarded_bytes.add(d->payload.size());
  io.tx_st(r->port_index, m);
}

}  // namespace sg::dp
