// An LTP message that reached our UDP port. In order:
//   admit_st    may it touch any state here? (a version we speak, our job, a source we
//               admit: auth.cpp)
//   steer_st    the engine owning its shard takes it (sync::shard_engine; workers, CONTROL
//               and REJECT belong to engine 0, the job's lead)
//   authenticate_st  the owner opens the seal and checks the sender (auth.cpp); relayed DATA
//               for another site leaves through relay.cpp before any job state is looked at
//   count_rx    per-type counters, by the engine that handles it (never twice)
//   deliver_st  CONTROL to the control thread; everything else to the job's state machines,
//               read in place from the mbuf (chunks are added straight from the payload)
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <algorithm>

#include "dataplane/gateway_handler.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "wire/path_id.h"
#include "sync/local_group.h"
#include "sync/shard_engine.h"

namespace sg::dp {

void GatewayHandler::handle_ltp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t off, size_t len,
                                   const Src& src, uint64_t now_tsc) {
  LtpIn in;
  in.msg = std::span<const uint8_t>(rte_pktmbuf_mtod(m, const uint8_t*) + off, len);
  in.off = off;
  in.src = src;
  in.now_tsc = now_tsc;
  if (admit_st(io, m, in) == Verdict::kTaken) return;
  if (steer_st(port_index, m, in) == Verdict::kTaken) return;
  if (authenticate_st(io, m, in) == Verdict::kTaken) return;
  count_rx(in, io);
  if (in.common.type == wire::MsgType::kJob) {
    // The job registry's, on the control thread: the frame moves there whole.
    if (!registry_in_) {
      ltp_.other_job.add();
      io.counters().drop(Drop::kLtpRefused);
      rte_pktmbuf_free(m);
    } else if (m->hash.usr = port_index; rte_ring_enqueue(registry_in_, m) != 0) {
      ltp_.control_full.add();
      rte_pktmbuf_free(m);
    }
    return;
  }
  const bool to_control = in.common.type == wire::MsgType::kControl || in.common.type == wire::MsgType::kProbe;
  JobSlot* js = in.job;
  if (js && js->ctl_in && to_control) {
    // Control-plane messages belong to the control thread: the frame moves there whole. A
    // probe's arrival time is what it measures: stamped here, in the frame the control thread
    // reads (it may read it many microseconds later). The stamp is the receive burst's time,
    // the same for every packet read with it, so the receiver can tell packets that waited
    // to be read together (their spacing is lost) from ones read as they came (probes.h).
    if (in.common.type == wire::MsgType::kProbe)
      wire::stamp_probe_arrival(std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*) + in.off, in.msg.size()),
                                static_cast<uint64_t>(now_ns(in.now_tsc)));
    if (rte_ring_enqueue(js->ctl_in, m) != 0) {
      ltp_.control_full.add();
      rte_pktmbuf_free(m);
    }
    return;
  }
  if (cfg_.impairment.rx_data_loss > 0 && in.common.type == wire::MsgType::kData &&
      in.common.src_node < sync::kWorkerNodeBase && impair_rng_.chance(cfg_.impairment.rx_data_loss)) {
    io.counters().drop(Drop::kImpairment);  // the WAN's loss, played by the receiver
    rte_pktmbuf_free(m);
    return;
  }
  deliver_st(io, port_index, in, now_tsc);
  rte_pktmbuf_free(m);
}

GatewayHandler::Verdict GatewayHandler::admit_st(EngineIo& io, rte_mbuf* m, LtpIn& in) {
  auto refuse = [&](Drop why) {
    io.counters().drop(why);
    rte_pktmbuf_free(m);
    return Verdict::kTaken;
  };
  auto common = wire::parse_common(in.msg);
  if (!common) return refuse(Drop::kBadLtp);
  in.common = *common;
  if (!wire::ltp_version_supported(in.common.version)) {
    ltp_.bad_version.add();
    return refuse(Drop::kBadLtp);
  }
  if (in.common.type == wire::MsgType::kJob) {
    // Not yet any job's: it may announce one (engine 0 hands it to the registry).
  } else if (njobs_) {
    in.job = job_of(in.common.job);
    if (!in.job) {
      ltp_.other_job.add();
      return refuse(Drop::kLtpRefused);
    }
  } else if (handoff_ && in.common.job != cfg_.job.id) {
    ltp_.other_job.add();
    return refuse(Drop::kLtpRefused);
  }
  return admit_source_st(io, m, in);
}

GatewayHandler::Verdict GatewayHandler::steer_st(uint16_t port_index, rte_mbuf* m, const LtpIn& in) {
  rte_ring* to = nullptr;
  if (!owner_rings_.empty()) {
    const unsigned owner = owner_of(in.common, in.msg);
    if (owner != self_) to = owner_rings_[owner];
  } else if (!njobs_ && handoff_) {
    to = handoff_;  // not the job's engine: engine 0 takes it
  }
  if (!to) return Verdict::kDeliver;
  // The whole frame moves (the owner validates it again).
  if (hand_over_st(to, port_index, m)) ltp_.handed_over.add();
  return Verdict::kTaken;
}

bool GatewayHandler::hand_over_st(rte_ring* ring, uint16_t port_index, rte_mbuf* m) {
  // The port it came in on rides in the hash field (the RSS hash is no longer needed).
  m->hash.usr = port_index;
  if (rte_ring_enqueue(ring, m) == 0) return true;
  ltp_.handoff_full.add();
  rte_pktmbuf_free(m);
  return false;
}

void GatewayHandler::count_rx(const LtpIn& in, EngineIo& io) {
  if (in.relayed_to_us) ltp_.relayed_rx.add();
  switch (in.common.type) {
    case wire::MsgType::kData: {
      ltp_.data_rx.add();
      ltp_.data_rx_bytes.add(in.msg.size() > sizeof(wire::DataHeader) ? in.msg.size() - sizeof(wire::DataHeader) : 0);
      const int pi = peer_index_of_node(in.common.src_node);
      if (pi >= 0 && static_cast<size_t>(pi) < ltp_.data_rx_from_site.size()) ltp_.data_rx_from_site[pi].add();
      break;
    }
    case wire::MsgType::kAck: ltp_.ack_rx.add(); break;
    case wire::MsgType::kClose: ltp_.close_rx.add(); break;
    case wire::MsgType::kControl: ltp_.control_rx.add(); break;
    case wire::MsgType::kReject: ltp_.reject_rx.add(); break;
    case wire::MsgType::kProbe: ltp_.probe_rx.add(); break;
    case wire::MsgType::kJob: ltp_.job_rx.add(); break;
    default: io.counters().drop(Drop::kBadLtp); break;
  }
}

void GatewayHandler::deliver_st(EngineIo& io, uint16_t port_index, const LtpIn& in, uint64_t now_tsc) {
  JobSlot* js = in.job;  // admit_st: attached if any is
  if (!js) {
    if (in.common.type == wire::MsgType::kData && !wire::parse_data(in.msg)) io.counters().drop(Drop::kBadLtp);
    return;
  }
  if (in.common.src_node >= sync::kWorkerNodeBase) {
    // A local worker: remember where it is, so results go back the way pushes came.
    WorkerAddr a;
    a.valid = true;
    a.ipv4 = in.src.ip;
    a.udp_port = in.src.udp_port;
    a.port_index = port_index;
    std::copy(in.src.mac.begin(), in.src.mac.end(), a.mac.addr_bytes);
    js->tx->learn_worker_st(in.common.src_node, a);
  }
  js->tx->bind_st(&io);
  const Nanos now = now_ns(now_tsc);
  if (in.common.type == wire::MsgType::kAck) js->tx->on_ack_st(in.msg, now);
  const uint16_t relay_hop = in.relayed_to_us ? cfg_.peers[static_cast<size_t>(in.prev_hop)].id : 0;
  js->runner->on_packet_st(in.msg, now, relay_hop);
}

unsigned GatewayHandler::owner_of(const wire::CommonInfo& common, std::span<const uint8_t> msg) const {
  if (common.src_node >= sync::kWorkerNodeBase) return 0;  // the site's workers: the lead
  const auto shard = wire::peek_shard(msg);                 // DATA, ACK, CLOSE
  if (!shard) return 0;                                     // CONTROL, REJECT, malformed
  return sync::shard_engine(*shard, static_cast<uint32_t>(owner_rings_.size()));
}

int GatewayHandler::peer_index_of_node(uint16_t node) const {
  for (size_t i = 0; i < cfg_.peers.size(); ++i)
    if (cfg_.peers[i].id == node) return static_cast<int>(i);
  return -1;
}

}  // namespace sg::dp
