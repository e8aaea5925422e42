// The dataplane's ltp::PacketSink: an LTP message from a lib/ state machine becomes one mbuf
// (Ethernet/IPv4/UDP built around it) on the route to its peer, handed to the engine's TX.
// One copy: from the sender's message buffer straight into the mbuf.
//
// DATA to a site is sprayed (lib/spray/sprayer.h): each chunk takes one of the peer's path slots, direct
// or through a relay, chosen by the plan's split and each slot's in-flight data; the slot is
// written into the DATA's path_id (lib/wire/path_id.h), which the receiver echoes in its ACKs (on_ack_st).
// ACK, CLOSE and CONTROL always take the first direct route.
//
// TX queues: with set_tx_rings, DATA is also dealt round robin over every TX queue of the
// ports. Queue q belongs to engine q, so the mbuf for another queue goes to that engine over a
// single-producer/single-consumer rte_ring (its ownership moves with it; hash.usr carries the
// port index) and that engine sends it on its own queue (GatewayHandler::attach_tx_ring). A
// full ring sends on the caller's own queue instead (counted in txq_full): nothing is lost.
//
// Sealing: with a Sealer (lib/crypto, this thread's lane) every message to a site is sealed
// for the next hop -- the relay for a relayed copy -- once its header is final (path_id is
// written first: it is authenticated). Workers on the LAN get plain LTP, or with a job token
// LTP sealed toward the worker (set_worker_sealer).
#pragma once

#include <vector>

#include <rte_ether.h>
#include <rte_ring.h>

#include "dataplane/engine.h"
#include "dataplane/counters.h"
#include "dataplane/ltp_counters.h"
#include "dataplane/neighbours.h"
#include "dataplane/routes.h"
#include "spray/sprayer.h"
#include "ltp/types.h"

namespace sg::crypto {
class Sealer;
}  // namespace sg::crypto

namespace sg::dp {

// A local training worker, learned from its own packets (engine 0 only writes and reads it).
struct WorkerAddr {
  bool valid = false;
  uint32_t ipv4 = 0;
  uint16_t udp_port = 0;
  uint16_t port_index = 0;
  rte_ether_addr mac{};
};

class LtpTx final : public ltp::PacketSink {
 public:
  // Every route becomes a spray slot of its peer (in route order, at most 8 per peer).
  LtpTx(const std::vector<Port>& ports, const Neighbours& nbrs, const std::vector<PeerRoute>& routes, LtpCounters& c);
  void bind_st(EngineIo* io) { io_ = io; }
  // Worker node ids are kWorkerNodeBase + index; results go back where pushes came from.
  void set_workers(uint32_t n, uint16_t ltp_port) {
    workers_.assign(n, WorkerAddr{});
    ltp_port_ = ltp_port;
  }
  void learn_worker_st(uint16_t node, const WorkerAddr& a);
  // rings[q]: SP/SC ring drained by the engine owning TX queue q (null for the caller's own
  // queue). Empty (the default): every packet leaves on the bound engine's queue.
  void set_tx_rings(std::vector<rte_ring*> rings) { rings_ = std::move(rings); }
  void set_sealer(crypto::Sealer* s) { sealer_ = s; }
  // With a job token: what goes to the site's workers is sealed toward the worker's node.
  void set_worker_sealer(crypto::Sealer* s) { worker_sealer_ = s; }
  spray::Sprayer& sprayer() { return spray_; }
  const spray::Sprayer& sprayer() const { return spray_; }

  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;
  // An ACK addressed to us (engine 0, before the transport sees it): in-flight accounting.
  void on_ack_st(std::span<const uint8_t> msg, Nanos now);

 private:
  const PeerRoute* direct_route(uint16_t peer, uint16_t path_id) const;
  void hand_out_st(uint16_t port_index, rte_mbuf* m);

  const std::vector<Port>& ports_;
  const Neighbours& nbrs_;
  const std::vector<PeerRoute>& routes_;
  LtpCounters& c_;
  EngineIo* io_ = nullptr;
  std::vector<WorkerAddr> workers_;
  uint16_t ltp_port_ = 7400;
  spray::Sprayer spray_;
  std::vector<rte_ring*> rings_;
  uint32_t next_queue_ = 0;
  crypto::Sealer* sealer_ = nullptr;
  crypto::Sealer* worker_sealer_ = nullptr;
};

}  // namespace sg::dp
