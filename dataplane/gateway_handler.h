// The gateway's packet path on one engine: ARP (answer for our addresses, resolve next hops),
// IPv4/UDP validation with every drop counted by reason, LTP message dispatch, and — until
// training rounds drive it — a synthetic gradient push to every peer at a configured rate so
// the demo and the tests have real LTP DATA crossing the links.
//
// Ownership: on_rx_st frees every mbuf it does not send (ARP replies reuse the request's mbuf
// and are handed to tx_st). Packets it builds come from the engine's pool and go to tx_st.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <rte_ring.h>

#include "common/clock.h"
#include "common/rng.h"
#include "config/config.h"
#include "dataplane/counters.h"
#include "dataplane/engine.h"
#include "dataplane/neighbours.h"
#include "wire/ethernet.h"
#include "wire/ltp_codec.h"

namespace sg::dp {

struct LtpCounters {
  Counter data_rx, data_rx_bytes, ack_rx, close_rx, control_rx, reject_rx;
  Counter bad_version;   // LTP version we do not speak (answered with REJECT)
  Counter arp_requests_answered, arp_requests_sent, arp_learned;
  Counter data_tx, data_tx_bytes;
  Counter no_mbuf;       // pool empty when building a packet
  Counter handoff_full;  // job packet for another engine dropped: that engine's ring was full
  Counter handed_over;   // job packets passed to the engine owning their shard
  Counter other_job;     // LTP for a job this gateway does not run
  Counter control_full;  // CONTROL frame dropped: the control thread's ring was full
  std::array<Counter, 64> data_rx_from_site{};  // by peer index (first 64 peers), relayed included
  // Multipath (path_id.h, spray.h).
  Counter relayed_tx;        // DATA we sent through a relay site
  Counter relayed_rx;        // DATA for us that came through a relay
  Counter relay_forwarded, relay_forwarded_bytes;  // DATA we relayed for others, not aggregated
  Counter relay_no_route;    // relayed DATA for a site we have no direct route to (or unresolved)
  Counter relay_refused;     // relayed DATA that failed validation or came from no job site
  Counter txq_full;          // DATA meant for another engine's TX queue sent on our own
  std::array<Counter, 8> data_tx_queue{};  // DATA by TX queue it was dealt to
};

// One route to a peer: a path out of a port towards a next hop. A relayed route (via != 0)
// addresses the relay site's gateway (peer_ipv4, peer_udp_port are the relay's); the final
// destination travels in the DATA path_id (path_id.h).
struct PeerRoute {
  uint16_t peer_id = 0;
  uint32_t peer_ipv4 = 0;
  uint16_t peer_udp_port = 0;
  uint16_t port_index = 0;
  int nh_slot = -1;
  uint16_t src_udp_port = 0;
  uint8_t path_id = 0;   // config path id
  uint16_t via = 0;      // relay site id; 0: direct
};

// Builds the routes (direct and relayed paths; a path via a site that is not a configured
// peer, or to a destination id a path_id cannot name, is left out) and the next-hop slots.
// Shared by every engine; built once at start-up.
std::vector<PeerRoute> build_routes(const config::GatewayConfig& cfg, const std::vector<Port>& ports,
                                    Neighbours& nbrs);

struct PushParams {
  double rate_mbit = 0;      // synthetic gradient push per engine, all peers together; 0: off
  uint32_t chunk_bytes = 1400;
  uint32_t chunks_per_round = 4096;
};

class JobRunner;
class LtpTx;

class GatewayHandler final : public PacketHandler {
 public:
  GatewayHandler(const config::GatewayConfig& cfg, const std::vector<Port>& ports, Neighbours& nbrs,
                 const std::vector<PeerRoute>& routes, bool arp_owner, PushParams push);

  // Engine 0 runs the job: LTP messages of the job go to `job` (sending through `tx`).
  void attach_job(JobRunner* job, LtpTx* tx) { job_ = job; ltp_tx_ = tx; }
  // Other engines hand the job's packets to engine 0 through `ring` (multi-producer,
  // single-consumer; the mbuf's ownership moves with it). Engine 0 drains the same ring.
  void attach_handoff(rte_ring* ring) { handoff_ = ring; }
  // Shards split over engines (every engine has a job): a job packet is handled by the engine
  // owning its shard (shard % engines; the site's workers, CONTROL and REJECT: engine 0);
  // others reach it through rings[owner] (multi-producer, single-consumer; the mbuf moves
  // with it). This engine is `self` and drains rings[self].
  void attach_shard_engines(std::vector<rte_ring*> rings, unsigned self) {
    owner_rings_ = std::move(rings);
    self_ = self;
    handoff_ = owner_rings_.empty() ? nullptr : owner_rings_[self];
  }
  // Engine 0 and the control thread: LTP CONTROL frames go to `to_control` (the mbuf with
  // them); frames the control thread built come back on `from_control` for TX.
  void attach_control(rte_ring* to_control, rte_ring* from_control) {
    ctl_in_ = to_control;
    ctl_out_ = from_control;
  }
  // Engines other than 0: drain DATA engine 0 dealt to this engine's TX queue (LtpTx's
  // SP/SC ring; each mbuf's hash.usr names its port) and send it on our own queue.
  void attach_tx_ring(rte_ring* ring) { tx_ring_ = ring; }
  void on_stop_st(EngineIo& io) override;

  void on_rx_st(EngineIo& io, uint16_t port_index, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) override;
  unsigned on_poll_st(EngineIo& io, uint64_t now_tsc) override;

  const LtpCounters& ltp() const { return ltp_; }
  // Nanoseconds since this handler started, from the TSC: the time base of lib/ state machines.
  Nanos now_ns(uint64_t tsc) const;

 private:
  void handle_one_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, uint64_t now_tsc);
  void handle_arp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t l3, uint64_t now_tsc);
  struct Src {
    uint32_t ip;
    uint16_t udp_port;
    wire::MacAddr mac;
  };
  void handle_ltp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t off, size_t len, const Src& src,
                     uint64_t now_tsc);
  // Relayed DATA for another site: new headers around the same LTP bytes, out on the direct
  // route to that site (any engine; no job state involved). Takes the mbuf.
  void relay_st(EngineIo& io, rte_mbuf* m, size_t off, size_t len, uint16_t dst);
  unsigned resolve_st(EngineIo& io, uint64_t now_tsc);
  unsigned push_st(EngineIo& io, uint64_t now_tsc);
  bool send_data_st(EngineIo& io, const PeerRoute& r, uint64_t now_tsc);
  int peer_index_of_node(uint16_t node) const;
  unsigned owner_of(const wire::CommonInfo& common, std::span<const uint8_t> msg) const;

  const config::GatewayConfig& cfg_;
  const std::vector<Port>& ports_;
  Neighbours& nbrs_;
  const std::vector<PeerRoute>& routes_;
  bool arp_owner_;
  PushParams push_;
  LtpCounters ltp_;
  uint64_t tsc_hz_;
  uint64_t next_arp_tsc_ = 0;
  uint64_t next_push_tsc_ = 0;
  uint64_t push_interval_tsc_ = 0;
  size_t next_route_ = 0;
  uint32_t round_ = 1;
  uint32_t chunk_ = 0;
  JobRunner* job_ = nullptr;
  LtpTx* ltp_tx_ = nullptr;
  rte_ring* handoff_ = nullptr;
  std::vector<rte_ring*> owner_rings_;
  unsigned self_ = 0;
  rte_ring* tx_ring_ = nullptr;
  rte_ring* ctl_in_ = nullptr;
  rte_ring* ctl_out_ = nullptr;
  uint64_t tsc0_ = 0;
  Rng impair_rng_;
};

}  // namespace sg::dp
