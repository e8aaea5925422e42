// Runs the configured job's rounds on an engine: one lib/sync SiteSync fed with the LTP
// messages of the job straight from the mbufs (chunks are added into the accumulators from
// the packet payload, no copy), sending through LtpTx. With job.workers == 0 each round's
// local gradient is synthetic and known, so every result is checked against the exact mean.
//
// Shards over engines (ShardRole): with E engines, engine q's SiteSync runs the shards
// s % E == q, so aggregation, LTP state and transmission of a round spread over E lcores.
// Engine 0 leads (engine_link.h): it holds the site's workers, decides when a round begins
// (policy approval, first push) and tells the followers; a follower reports its results and
// its end of the round back; the round ends when every engine is done. The counters of the
// lead include its followers' (they arrive with kDone / kCheck).
//
// Threads: everything _st runs on the owning engine; counters() is read by control and
// telemetry; result_view()/local_view() are read by the other engines of the job only as the
// messages of engine_link.h allow.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "config/config.h"
#include "controller/controller.h"
#include "dataplane/counters.h"
#include "dataplane/engine_link.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/peer_restarts.h"
#include "sync/gateway_settings.h"
#include "dataplane/policy_slot.h"
#include "measure/link_estimator.h"
#include "sync/local_group.h"
#include "sync/peer_sync.h"
#include "sync/site_sync.h"
#include "topology/plan.h"

namespace sg::dp {

struct RoundCounters {
  Counter rounds, early_closes, up_bubbles, down_bubbles, timeouts, retransmits, stray;
  Counter peers_moved_on;  // a peer ran a later round: what it had not sent was given up
  Counter rto_expiries;   // our transfers' retransmission timeouts
  Counter early_data;      // peer DATA of a round this site had not begun
  Counter early_held;      // ... of it held and replayed when the round began (the rest dropped, resent)
  Counter early_acked;     // ... of that acknowledged on arrival, so its senders need not resend it
  Counter values_checked, values_exact;  // synthetic job: result values equal to the exact mean
  Counter round_ns_total;
  Counter policy_switches, samples_dropped;
  Counter worker_rounds;
  Counter worker_timeouts;   // rounds whose site contribution went on after job.worker_timeout_ms
  Counter workers_missing;   // workers absent from the site's contributions, summed over rounds
  Counter worker_bubbles;    // chunks of a worker's push the site's mean went on without
  Counter worker_early;      // worker DATA of the next round before this one ended: dropped, resent
  Counter gate_waits;  // passes where a round was ready but not yet approved
  Counter link_stray;  // engine messages for a round not running (engine_link.h)
  Counter updates_mixed;  // sync.mode selmcast: other sites' updates mixed into this site's results
  Counter stale_updates;  // selmcast: updates too old for sync.staleness, refused
  std::atomic<uint64_t> last_round{0}, last_round_ns{0}, policy_version{0}, switch_round{0};
  std::atomic<uint32_t> wanted_round{0};  // the round the lead waits to begin (gate closed)
  // The lead's round is under way (begun, not yet ended at every engine): its transfers to
  // the peers may still run, so the gateway does not tear the job down under it.
  std::atomic<bool> round_open{false};
  // The site's load, smoothed: from a round's result leaving for the workers to their next
  // update complete (-1: not measured yet, or no workers). The control plane's rows carry it:
  // SelMCast's receiver choice and adaptive compression's compute time.
  std::atomic<int64_t> update_lag_ns{-1};
  // Of that, smoothed the same way: from the update's first chunk complete (free to leave for
  // the WAN) to its last. Near the whole lag where workers hand buckets over during backward,
  // near zero where they hand everything over at once (-1: not measured).
  std::atomic<int64_t> overlap_ns{-1};
};

// Synthetic gradient of site index i in round r (jobs without workers): a per-site offset plus
// a pattern shared by all sites, so the exact mean is known at every site without talking.
inline float synthetic(int i, uint32_t r, size_t k) {
  return 0.5f * static_cast<float>(i + 1) + static_cast<float>((k * 7 + r) % 1000) * 1e-3f;
}

using controller::job_sites;
using controller::site_uplinks;
using controller::spread_shards;

// The first policy: every gateway computes it from the same inputs (the site list, a
// bandwidth-blind network, the configured planner: lib/controller), so all start with the
// same plan and version 1 without talking. False with a message if the planner cannot serve.
bool initial_plan(const config::GatewayConfig& cfg, topo::Plan& plan, std::string& error);

using sync::wan_rate;
using sync::wan_receiver;
// Whether every sender of the gateway's jobs toward a peer draws on one shared link state
// (ltp::LinkShare, by the jobs' weights): transport.link_share (auto: with several jobs or
// announced ones), on LTP's own controller.
bool jobs_share_links(const config::GatewayConfig& cfg);

struct ShardRole {
  uint32_t engine = 0;   // this engine's index
  uint32_t engines = 1;  // engines sharing the job's shards
};

class JobRunner final : private sync::SampleSink, private sync::ResultSink {
 public:
  // `link_shares` (plan site index -> this engine's shared link state, or null): see
  // sync::SyncConfig::link_shares; empty: the job's senders have their own controllers.
  JobRunner(const config::GatewayConfig& cfg, const topo::Plan& plan, uint32_t policy_version, LtpTx& tx,
            ShardRole role = {}, std::vector<ltp::LinkShare*> link_shares = {});

  // Lead (engine 0) of a job split over engines: links[i] and runners[i] are engine i + 1's.
  void attach_followers(std::vector<EngineLink*> links, std::vector<const JobRunner*> runners);
  // Follower: its link to the lead, and the lead (whose contribution buffer it reads).
  void attach_lead(EngineLink* link, const JobRunner* lead);
  const ShardRole& role() const { return role_; }
  uint32_t id() const { return cfg_.job.id; }
  // This engine's SiteSync result buffer (its own shards' floats are valid once it reported
  // them) and, on the lead, the site's contribution buffer while workers push.
  std::span<const float> result_view() const { return sync_ ? sync_->result() : peer_->result(); }
  std::span<const float> local_view() const;

  // New policies come through `slot` (picked up at round boundaries); DATA arrival samples
  // leave through `samples` (an rte_ring of measure::ArrivalSample, single producer) for the
  // control thread's estimator. Both optional.
  void attach_control(PolicySlot* slot, rte_ring* samples) {
    slot_ = slot;
    samples_ = samples;
  }
  // Rounds begin only up to *approved (the control thread's policy agent); null: no gating.
  // `rejoin` (optional): a job without workers begins no round before it -- a restarted
  // gateway joins the cluster's round. The agent sets it before it approves anything.
  void set_gate(const std::atomic<uint32_t>* approved, const std::atomic<uint32_t>* rejoin = nullptr) {
    approved_ = approved;
    rejoin_ = rejoin;
  }
  // Peers that restarted (the job's policy agent; null: not watched): the running round
  // gives up what the old process owed it. Call before the first poll.
  void set_peer_restarts(const PeerRestarts* r);
  void on_stop_st();
  // The job leaves the engine for good (GatewayHandler::JobCommand::kDetach): its transfers'
  // state goes now, on the engine, since its senders leave links the engine shares with other
  // jobs. Nothing of the runner may run afterwards; its counters stay readable.
  void release_st();
  uint32_t round() const { return round_; }

  // `relay_hop`: for DATA that came through a relay site, that site's id (0: direct).
  void on_packet_st(std::span<const uint8_t> msg, Nanos now, uint16_t relay_hop = 0);
  // DATA of this job this site relays on for another (relay.cpp): a sample of origin -> us.
  void on_relay_st(uint16_t origin, uint32_t bytes, uint64_t send_ts, Nanos now, bool app_limited);
  // Begins rounds, runs timers, exchanges engine messages. Returns work done.
  unsigned poll_st(Nanos now);
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  const RoundCounters& counters() const { return c_; }
  // A config reload (control thread): job.rounds and job.round_timeout_ms. Each engine takes
  // them when it begins its next round (the lead also ends the job by the new count).
  void set_live(uint32_t rounds, uint32_t round_timeout_ms) {
    live_rounds_.store(rounds, std::memory_order_relaxed);
    live_timeout_ms_.store(round_timeout_ms, std::memory_order_relaxed);
  }

 private:
  void fill_local(uint32_t round);
  int site_index(uint16_t node) const;  // in the job's sites; -1: none
  void push_sample(measure::ArrivalSample m);  // by value: the ring's API takes a non-const pointer
  void check_result(uint64_t& checked, uint64_t& exact) const;
  bool owns(size_t first, size_t count, uint32_t engine) const;
  void on_sample(const ltp::ArrivalSample& s) override;
  void on_result(size_t first, size_t count) override;
  void feed_local_st(Nanos now);
  void maybe_switch_policy_st(uint32_t next_round);
  // sync.mode selmcast (job_runner_peer.cpp): PeerSync instead of SiteSync, one engine.
  void make_peer(const topo::Plan& plan);
  unsigned peer_poll_st(Nanos now);
  void peer_count_st(Nanos now);
  bool peer_switch_st(uint32_t next_round);
  unsigned lead_messages_st(Nanos now);
  unsigned follow_st(Nanos now);
  void begin_followers_st(uint32_t round, bool streaming);
  bool followers_done(uint32_t round) const;
  bool end_round_st(Nanos now);
  void deliver_if_complete_st(Nanos now);
  bool deliver_st(Nanos now);
  void count_round_st(Nanos now);
  void count_group_st();
  uint32_t next_synthetic_round() const;

  const config::GatewayConfig& cfg_;
  LtpTx& tx_;
  std::vector<uint16_t> sites_;
  int self_ = 0;
  std::unique_ptr<sync::SiteSync> sync_;   // all-reduce mode
  std::unique_ptr<sync::PeerSync> peer_;   // selmcast mode (then sync_ is null)
  sync::PeerSyncStats peer_last_{};
  bool peer_counted_ = true;
  Nanos delivered_at_ = -1;     // the last round's result handed back (update lag's start)
  uint32_t lag_round_ = 0;      // the round whose update lag is taken
  uint32_t lag_samples_ = 0;    // update lags seen (the first is not counted)
  void note_update_lag_st(uint32_t next, Nanos now);
  std::unique_ptr<sync::LocalGroup> group_;  // job.workers > 0: the site's workers
  bool delivered_ = true;  // the last WAN round's result went to the workers (finish)
  Nanos now_ = 0;          // time of the call in progress (for SiteSync's result callbacks)
  std::vector<float> local_;
  uint32_t round_ = 0;
  bool checked_ = true;
  Nanos next_wake_ = 0;
  sync::SyncStats last_{};
  RoundCounters c_;
  std::atomic<bool> finished_{false};
  std::atomic<uint32_t> live_rounds_{0}, live_timeout_ms_{0};
  uint32_t timeout_ms_ = 0;  // the round timeout this engine's SiteSync has
  uint64_t group_timeouts_seen_ = 0, group_missing_seen_ = 0, group_bubbles_seen_ = 0, group_early_seen_ = 0;  // LocalGroup stats already counted
  void take_live_st(uint32_t round);
  uint32_t rounds_limit() const { return live_rounds_.load(std::memory_order_relaxed); }
  PolicySlot* slot_ = nullptr;
  rte_ring* samples_ = nullptr;
  uint16_t relay_hop_ = 0;  // the packet on_packet_st is handling came through this site
  bool online_ = false;
  const std::atomic<uint32_t>* approved_ = nullptr;
  const std::atomic<uint32_t>* rejoin_ = nullptr;
  const PeerRestarts* restarts_ = nullptr;
  uint32_t restarts_generation_ = 0;
  std::vector<uint32_t> restarts_seen_;  // per plan site
  void check_restarts_st(Nanos now);
  bool may_begin(uint32_t r) const { return !approved_ || r <= approved_->load(std::memory_order_acquire); }
  uint32_t policy_ = 0;
  ShardRole role_;
  // Lead: the followers' links and runners, the round each reported done, the last report.
  std::vector<EngineLink*> links_;
  std::vector<const JobRunner*> followers_;
  std::vector<uint32_t> done_round_;
  Nanos last_done_at_ = 0;
  uint32_t followers_peer_began_ = 0;  // the newest next round a follower saw a peer begin
  // Follower.
  uint32_t peer_began_told_ = 0;       // the round whose early DATA went to the lead
  EngineLink* lead_link_ = nullptr;
  const JobRunner* lead_ = nullptr;
  bool reported_ = true;      // this round's end went to the lead
  bool streaming_ = false;    // the round's local part comes from the lead's workers
};

}  // namespace sg::dp
