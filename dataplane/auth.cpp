// Who may speak to this gateway, checked before any job or transfer state is touched:
//
//   admit_source_st  (any engine, before steering) a site's message must come from a
//                    configured peer's address and carry the seal (or not, in plain mode);
//                    a worker's from one of our subnets and from no peer.
//   authenticate_st  (the engine owning the message) the seal is opened with the key of
//                    the site it came from (the previous hop); the sender it names must be
//                    that site, or -- for a relayed copy -- a configured peer, relayed by
//                    the site it names along a path our config knows. Copies for another
//                    site are re-sealed toward it and sent on (relay.cpp).
//
// Opening happens at the owner because the replay window is per opening engine: steering
// depends only on header fields the tag covers, so every copy of one packet -- replays
// included -- reaches the same engine and the same window.
#include <rte_mbuf.h>

#include "crypto/peer_sessions.h"
#include "dataplane/gateway_handler.h"
#include "wire/path_id.h"
#include "sync/local_group.h"
#include "wire/frame.h"

namespace sg::dp {

static_assert(wire::kAuthTrailerLen == crypto::kTrailerLen);

GatewayHandler::Verdict GatewayHandler::refuse_auth_st(EngineIo& io, rte_mbuf* m, const LtpIn& in, AuthDrop why) {
  ltp_.auth_drop(why, in.prev_hop, in.src.ip);
  io.counters().drop(Drop::kUnauthenticated);
  rte_pktmbuf_free(m);
  return Verdict::kTaken;
}

int GatewayHandler::peer_index_of_addr(uint32_t ipv4) const {
  for (size_t i = 0; i < cfg_.peers.size(); ++i)
    if (cfg_.peers[i].address.host_order == ipv4) return static_cast<int>(i);
  return -1;
}

bool GatewayHandler::on_our_subnets(uint32_t ipv4) const {
  for (const auto& p : ports_) {
    const uint32_t mask = p.prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - p.prefix_len);
    if ((ipv4 & mask) == (p.ipv4 & mask)) return true;
  }
  return false;
}

GatewayHandler::Verdict GatewayHandler::admit_source_st(EngineIo& io, rte_mbuf* m, LtpIn& in) {
  in.prev_hop = peer_index_of_addr(in.src.ip);
  const bool sealed = (in.common.flags & wire::kFlagSealed) != 0;
  if (in.common.src_node >= sync::kWorkerNodeBase) {
    // Workers: from our subnets only, never from a peer site; sealed with their job's token
    // if it has one (JOB messages: with admission tokens), else plain.
    if (in.prev_hop >= 0 || !on_our_subnets(in.src.ip)) return refuse_auth_st(io, m, in, AuthDrop::kWorkerRefused);
    const bool need = in.common.type == wire::MsgType::kJob ? job_tokens_ : worker_opener_of(in) != nullptr;
    if (sealed != need) return refuse_auth_st(io, m, in, AuthDrop::kUnsealed);
    return Verdict::kDeliver;
  }
  if (in.prev_hop < 0) return refuse_auth_st(io, m, in, AuthDrop::kUnknownSource);
  if (sealed != (opener_ != nullptr)) return refuse_auth_st(io, m, in, AuthDrop::kUnsealed);
  return Verdict::kDeliver;
}

// Opens m's message in place with `opener` (sealed by `from`); false: refused and freed.
bool GatewayHandler::open_st(EngineIo& io, rte_mbuf* m, LtpIn& in, crypto::Opener& opener, uint16_t from) {
  uint8_t* msg = rte_pktmbuf_mtod(m, uint8_t*) + in.off;
  size_t len = 0;
  AuthDrop why;
  switch (opener.open(from, std::span<uint8_t>(msg, in.msg.size()), wire::ltp_header_len(in.common.type), &len)) {
    case crypto::OpenVerdict::kOk:
      ltp_.opened.add();
      in.msg = std::span<const uint8_t>(msg, len);
      return true;
    case crypto::OpenVerdict::kTruncated: why = AuthDrop::kTruncated; break;
    case crypto::OpenVerdict::kUnknownEpoch: why = AuthDrop::kUnknownEpoch; break;
    case crypto::OpenVerdict::kDuplicate: why = AuthDrop::kReplayed; break;
    case crypto::OpenVerdict::kTooOld: why = AuthDrop::kTooOld; break;
    default: why = AuthDrop::kBadTag; break;
  }
  refuse_auth_st(io, m, in, why);
  return false;
}

GatewayHandler::Verdict GatewayHandler::authenticate_st(EngineIo& io, rte_mbuf* m, LtpIn& in) {
  if (in.common.src_node >= sync::kWorkerNodeBase) {
    // Admitted by subnet; with a job token also by its seal (a node id beyond the job's
    // workers has no key: refused as kUnknownEpoch, like an unknown peer). A JOB message under
    // admission tokens names a job that may not exist yet: the desk derives its key and opens it.
    if (in.common.type == wire::MsgType::kJob && job_tokens_) return Verdict::kDeliver;
    crypto::Opener* wo = worker_opener_of(in);
    if (wo && !open_st(io, m, in, *wo, in.common.src_node)) return Verdict::kTaken;
    return Verdict::kDeliver;
  }
  const uint16_t hop = cfg_.peers[static_cast<size_t>(in.prev_hop)].id;
  if (opener_ && !open_st(io, m, in, *opener_, hop)) return Verdict::kTaken;
  // Identity: the header names its sender; the seal proved which site sent the packet.
  uint16_t relay_dst = 0;
  if (in.common.type == wire::MsgType::kData && in.msg.size() >= sizeof(wire::DataHeader)) {
    const uint16_t pid = reinterpret_cast<const wire::DataHeader*>(in.msg.data())->path_id.load();
    if (wire::pathid::is_relayed(pid)) relay_dst = wire::pathid::destination(pid);
  }
  if (relay_dst == 0) {
    if (in.common.src_node != hop) return refuse_auth_st(io, m, in, AuthDrop::kSpoofed);
  } else if (relay_dst == cfg_.site.id) {
    // Ours via a relay: the origin must be a peer other than the relay that sealed it.
    if (in.common.src_node == hop || peer_index_of_node(in.common.src_node) < 0)
      return refuse_auth_st(io, m, in, AuthDrop::kRelayRefused);
    in.relayed_to_us = true;
  } else {
    // For another site: the origin sends its relayed copies to us directly.
    if (in.common.src_node != hop) return refuse_auth_st(io, m, in, AuthDrop::kSpoofed);
    if (peer_index_of_node(relay_dst) < 0) return refuse_auth_st(io, m, in, AuthDrop::kRelayRefused);
    relay_st(io, m, in.off, in.msg.size(), relay_dst, in.job ? in.job->runner : nullptr, in.now_tsc);
    return Verdict::kTaken;
  }
  const bool to_control = in.common.type == wire::MsgType::kControl || in.common.type == wire::MsgType::kProbe ||
                          in.common.type == wire::MsgType::kJob;
  if (opener_ && to_control) {
    // The control thread reads the whole frame: it must end where the message does now.
    std::span<uint8_t> frame(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m));
    auto f = wire::parse_udp_frame(frame, wire::FrameChecks{false, false});
    if (!f || !wire::shrink_udp_payload(frame, *f, in.msg.size())) return refuse_auth_st(io, m, in, AuthDrop::kTruncated);
    const size_t end = f->payload_offset + in.msg.size();
    if (rte_pktmbuf_data_len(m) > end) rte_pktmbuf_trim(m, static_cast<uint16_t>(rte_pktmbuf_data_len(m) - end));
  }
  return Verdict::kDeliver;
}

}  // namespace sg::dp
