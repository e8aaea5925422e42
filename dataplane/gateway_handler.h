// The gateway's packet path on one engine. One concern per file, as a reader looks for them:
//
//   gateway_handler.cpp  the engine's entry points: receive bursts, poll (rings from other
//                        lcores, the job's timers), stop (free what is held)
//   rx_classify.cpp      Ethernet / ARP / IPv4 / UDP validation, every drop counted by reason
//   ltp_dispatch.cpp     an LTP message: admitted (version, job), steered to the engine
//                        owning its shard, to the control thread (CONTROL) or to the job
//   auth.cpp             who may speak: sources (peers by address, workers by subnet), the
//                        seal opened and the sender's identity checked before any state
//   relay.cpp            relayed DATA for another site: new headers, out on the direct route
//   arp.cpp              answer ARP for our addresses, resolve next hops (engine 0 only)
//   frame_build.h        the Ethernet/IPv4/UDP spec of a frame out of a port, written once
//
// Ownership: on_rx_st frees every mbuf it does not send or hand on (ARP replies reuse the
// request's mbuf; frames for another engine or the control thread move with the ring).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include <rte_ring.h>

#include "common/clock.h"
#include "common/rng.h"
#include "config/config.h"
#include "dataplane/counters.h"
#include "dataplane/engine.h"
#include "dataplane/ltp_counters.h"
#include "dataplane/neighbours.h"
#include "dataplane/routes.h"
#include "wire/ethernet.h"
#include "wire/ltp_codec.h"

namespace sg::crypto {
class Opener;
class Sealer;
}  // namespace sg::crypto

namespace sg::dp {

class JobRunner;
class LtpTx;

class GatewayHandler final : public PacketHandler {
 public:
  GatewayHandler(const config::GatewayConfig& cfg, const std::vector<Port>& ports, Neighbours& nbrs,
                 const std::vector<PeerRoute>& routes, bool arp_owner);

  // Up to kMaxJobs jobs per engine, each with its own state: an LTP message goes to the job
  // its header names (sending through that job's `tx`); other jobs' messages are refused.
  static constexpr unsigned kMaxJobs = 16;
  // False if this engine holds kMaxJobs jobs already or one with the same id. `worker_opener`:
  // the job's own worker token (an announced job under admission.token_file): its workers'
  // messages must be sealed with it; null: the gateway-wide rule (attach_worker_security).
  bool attach_job(JobRunner* job, LtpTx* tx, crypto::Opener* worker_opener = nullptr);
  // Other engines hand the job's packets to engine 0 through `ring` (multi-producer,
  // single-consumer; the mbuf's ownership moves with it). Engine 0 drains the same ring.
  void attach_handoff(rte_ring* ring) { handoff_ = ring; }
  // Shards split over engines (every engine has a job): a job packet is handled by the engine
  // owning its shard (sync::shard_engine; the site's workers, CONTROL and REJECT: engine 0);
  // others reach it through rings[owner] (multi-producer, single-consumer; the mbuf moves
  // with it). This engine is `self` and drains rings[self].
  void attach_shard_engines(std::vector<rte_ring*> rings, unsigned self) {
    owner_rings_ = std::move(rings);
    self_ = self;
    handoff_ = owner_rings_.empty() ? nullptr : owner_rings_[self];
  }
  // Jobs that come and go while the engines run (announced by workers): the control thread
  // posts a command on this engine's ring (single producer, single consumer); the engine
  // applies it at its next poll and then sets `done` (release). A detached job's sync state is
  // released on the engine (JobRunner::release_st: its senders leave the shared links, which
  // only this engine touches); the control thread frees the rest once `done` is set.
  struct JobCommand {
    enum class Kind : uint8_t { kAttach, kDetach } kind = Kind::kAttach;
    uint32_t job = 0;
    JobRunner* runner = nullptr;  // kAttach
    LtpTx* tx = nullptr;
    rte_ring* ctl_in = nullptr;   // engine 0 only (null elsewhere)
    rte_ring* ctl_out = nullptr;
    crypto::Opener* worker_opener = nullptr;  // this engine's, for the job's workers (or null)
    bool ok = false;              // kAttach: attached (false: kMaxJobs, or the id is taken)
    std::atomic<bool> done{false};
  };
  void attach_command_ring(rte_ring* r) { commands_ = r; }
  // Engine 0: JOB messages (wire/job_msg.h: workers' joins and leaves, peers' announcements)
  // go to the control thread's job registry through `to_control` (the whole frame, sealed
  // ones opened); frames it built come back on `from_control` for TX.
  void attach_registry(rte_ring* to_control, rte_ring* from_control) {
    registry_in_ = to_control;
    registry_out_ = from_control;
  }
  // Engine 0 and the control thread of job `job` (attached before): its LTP CONTROL and PROBE
  // frames go to `to_control` (the mbuf with them); frames its control thread built come
  // back on `from_control` for TX. False if no such job is attached.
  bool attach_control(uint32_t job, rte_ring* to_control, rte_ring* from_control);
  // Engines other than 0: drain DATA engine 0 dealt to this engine's TX queue (LtpTx's
  // SP/SC ring; each mbuf's hash.usr names its port) and send it on our own queue.
  void attach_tx_ring(rte_ring* ring) { tx_ring_ = ring; }
  // Sealed traffic between gateways (lib/crypto): `opener` checks what this engine handles,
  // `sealer` (this engine's lane, shared with its LtpTx) re-seals what it relays. Without
  // them the gateway is in plain mode and refuses sealed traffic it cannot check.
  void attach_security(crypto::Opener* opener, crypto::Sealer* sealer) {
    opener_ = opener;
    sealer_ = sealer;
  }
  // The job's token (job.token_file): workers' messages must be sealed with its keys, and
  // `opener` checks them. Without it workers are admitted by subnet only.
  void attach_worker_security(crypto::Opener* opener) { worker_opener_ = opener; }
  // admission.token_file: workers' JOB messages must be sealed (with their job's token, which
  // the control thread's desk derives and opens with); they go there sealed.
  void require_job_tokens() { job_tokens_ = true; }
  void on_stop_st(EngineIo& io) override;

  void on_rx_st(EngineIo& io, uint16_t port_index, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) override;
  unsigned on_poll_st(EngineIo& io, uint64_t now_tsc) override;

  const LtpCounters& ltp() const { return ltp_; }
  // Nanoseconds since this handler started, from the TSC: the time base of lib/ state machines.
  Nanos now_ns(uint64_t tsc) const;

 private:
  // The source of a received frame, as its headers say.
  struct Src {
    uint32_t ip;
    uint16_t udp_port;
    wire::MacAddr mac;
  };
  // One job's state on this engine.
  struct JobSlot {
    uint32_t id = 0;
    JobRunner* runner = nullptr;
    LtpTx* tx = nullptr;
    rte_ring* ctl_in = nullptr;   // to its control thread
    rte_ring* ctl_out = nullptr;  // from it
    crypto::Opener* worker_opener = nullptr;  // the job's own worker token, if it has one
  };
  // An LTP message inside a received frame (the mbuf still owns the bytes).
  struct LtpIn {
    std::span<const uint8_t> msg;
    wire::CommonInfo common;
    size_t off = 0;  // of msg in the frame
    Src src;
    int prev_hop = -1;           // peer index of the source address (-1: none)
    bool relayed_to_us = false;  // came through a relay site
    JobSlot* job = nullptr;  // the attached job it names (admit_st looks it up once)
    uint64_t now_tsc = 0;    // the burst's receive time
  };
  enum class Verdict { kDeliver, kTaken };

  // The control thread's job commands (attach / detach).
  unsigned apply_commands_st();
  // rx_classify.cpp: one frame from the wire (or from another engine's hand-over). Takes m.
  void handle_one_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, uint64_t now_tsc);
  // arp.cpp
  void handle_arp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t l3, uint64_t now_tsc);
  unsigned resolve_st(EngineIo& io, uint64_t now_tsc);
  // ltp_dispatch.cpp. handle_ltp_st takes m. admit_st decides whether a message may touch
  // any state here (kTaken: it was dropped, relayed or handed on, and m is gone);
  // steer_st moves it to the engine owning its shard if that is not this one.
  void handle_ltp_st(EngineIo& io, uint16_t port_index, rte_mbuf* m, size_t off, size_t len, const Src& src,
                     uint64_t now_tsc);
  Verdict admit_st(EngineIo& io, rte_mbuf* m, LtpIn& in);
  Verdict steer_st(uint16_t port_index, rte_mbuf* m, const LtpIn& in);
  // auth.cpp. admit_source_st: cheap checks before steering (who sent it, sealed or not);
  // authenticate_st at the owning engine: the seal opened (in.msg then excludes the trailer),
  // the claimed sender checked, relayed copies for other sites sent on (kTaken).
  Verdict admit_source_st(EngineIo& io, rte_mbuf* m, LtpIn& in);
  Verdict authenticate_st(EngineIo& io, rte_mbuf* m, LtpIn& in);
  Verdict refuse_auth_st(EngineIo& io, rte_mbuf* m, const LtpIn& in, AuthDrop why);
  bool open_st(EngineIo& io, rte_mbuf* m, LtpIn& in, crypto::Opener& opener, uint16_t from);
  int peer_index_of_addr(uint32_t ipv4) const;
  // Who checks a worker's message: its job's own token, else the gateway-wide one (or none).
  crypto::Opener* worker_opener_of(const LtpIn& in) const {
    return in.job && in.job->worker_opener ? in.job->worker_opener : worker_opener_;
  }
  bool on_our_subnets(uint32_t ipv4) const;
  void count_rx(const LtpIn& in, EngineIo& io);
  void deliver_st(EngineIo& io, uint16_t port_index, const LtpIn& in, uint64_t now_tsc);
  unsigned owner_of(const wire::CommonInfo& common, std::span<const uint8_t> msg) const;
  // The attached job with this id, or null. A linear look-up: a handful of jobs.
  JobSlot* job_of(uint32_t id) {
    for (unsigned i = 0; i < njobs_; ++i)
      if (jobs_[i].id == id) return &jobs_[i];
    return nullptr;
  }
  // DATA of this job may be relayed or handed on here (an engine without jobs: the config's).
  bool our_job(uint32_t id) { return njobs_ ? job_of(id) != nullptr : id == cfg_.job.id; }
  int peer_index_of_node(uint16_t node) const;
  // Passes m to `ring` (its hash.usr = port_index); counts and frees it if the ring is full.
  bool hand_over_st(rte_ring* ring, uint16_t port_index, rte_mbuf* m);
  // relay.cpp: relayed DATA for another site. Takes the mbuf. `sampler`: the job's runner on
  // this engine, which samples the hop it came over (null: none attached).
  void relay_st(EngineIo& io, rte_mbuf* m, size_t off, size_t len, uint16_t dst, JobRunner* sampler,
                uint64_t now_tsc);

  const config::GatewayConfig& cfg_;
  const std::vector<Port>& ports_;
  Neighbours& nbrs_;
  const std::vector<PeerRoute>& routes_;
  bool arp_owner_;
  LtpCounters ltp_;
  uint64_t tsc_hz_;
  uint64_t next_arp_tsc_ = 0;
  std::array<JobSlot, kMaxJobs> jobs_{};
  unsigned njobs_ = 0;
  rte_ring* handoff_ = nullptr;
  rte_ring* commands_ = nullptr;
  rte_ring* registry_in_ = nullptr;
  rte_ring* registry_out_ = nullptr;
  std::vector<rte_ring*> owner_rings_;
  unsigned self_ = 0;
  rte_ring* tx_ring_ = nullptr;
  uint64_t tsc0_ = 0;
  Rng impair_rng_;
  crypto::Opener* opener_ = nullptr;
  crypto::Sealer* sealer_ = nullptr;
  crypto::Opener* worker_opener_ = nullptr;
  bool job_tokens_ = false;
};

}  // namespace sg::dp
