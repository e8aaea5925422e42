// The control thread's side of NetStorm: measurements and policies between gateways.
//
//  * Every gateway measures the links into it (lib/measure, fed by engine 0's samples) and
//    sends that row to the coordinator (the lowest site id) every few rounds.
//  * The coordinator keeps the throughput matrix, plans with FAPT on it, and when the plan
//    in force would be slower than the new one by more than topology.recompute_change (by
//    the round-time model) and topology.min_interval_ms has passed, proposes it.
//  * It also decides each tree link's codec (control/link_codecs: compression.mode) and
//    proposes a plan whose codecs changed even when its trees did not.
//  * lib/policy runs the consistency protocol (two-phase switch at a round barrier); its
//    messages and the measurement rows travel on reliable LTP CONTROL channels (lib/ltp
//    ControlChannel), one per peer, through engine 0's queues (two mbuf rings: frames in,
//    frames out).
//  * Round gating: engine 0 begins round r only once approved_through() >= r. The agent
//    approves rounds as lib/policy lets them begin and publishes a new plan (PolicySlot,
//    RCU) for the round a switch takes effect, so no round runs under two policies.
//
// Owner: the control thread (main lcore). Nothing here runs on the packet path.
#pragma once

#include <rte_mempool.h>
#include <rte_ring.h>

#include <atomic>
#include <memory>
#include <vector>

#include "config/config.h"
#include "control/link_codecs.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/policy_slot.h"
#include "ltp/control_channel.h"
#include "measure/link_estimator.h"
#include "policy/gateway.h"
#include "topology/plan.h"

namespace sg::ctl {

struct AgentStats {
  std::atomic<uint64_t> proposals{0}, switches{0}, rows_sent{0}, rows_received{0}, control_in{0}, control_bad{0};
  std::atomic<uint64_t> replans_considered{0}, codec_proposals{0};
  std::atomic<double> last_gain{0};
};

class PolicyAgent {
 public:
  PolicyAgent(const config::GatewayConfig& cfg, const std::vector<uint16_t>& sites, const topo::Plan& initial,
              rte_mempool* pool, const std::vector<dp::Port>& ports, const dp::Neighbours& nbrs,
              const std::vector<dp::PeerRoute>& routes, rte_ring* frames_in, rte_ring* frames_out,
              dp::PolicySlot& slot);
  ~PolicyAgent();

  // One control tick: CONTROL frames in, protocol timers, round approvals, measurement rows,
  // (coordinator) replanning, CONTROL frames out. `completed_round` is the last round engine
  // 0 finished; `est` the local estimator (links into this site).
  void tick(Nanos now, uint32_t completed_round, const measure::LinkEstimator& est);

  // The highest round engine 0 may begin (engine reads it; relaxed is enough: a stale value
  // only delays a round).
  const std::atomic<uint32_t>& approved_through() const { return approved_; }
  bool coordinator() const { return self_ == 0; }
  uint64_t active_version() const { return gw_->active_version(); }
  const AgentStats& stats() const { return stats_; }
  // The plan in force at the highest approved round (for telemetry); changes only on switches.
  const topo::Plan& current_plan() const { return current_; }

 private:
  class FrameIo;
  void receive_frames(Nanos now);
  void on_control(uint16_t from_index, std::span<const uint8_t> msg, Nanos now);
  void send_policy_messages(Nanos now);
  void approve_rounds(uint32_t completed_round);
  void exchange_measurements(Nanos now, uint32_t completed_round, const measure::LinkEstimator& est);
  void maybe_replan(Nanos now);

  const config::GatewayConfig& cfg_;
  std::vector<uint16_t> sites_;
  int self_ = 0;
  rte_ring* in_;
  std::unique_ptr<FrameIo> io_;
  std::unique_ptr<dp::LtpTx> tx_;
  dp::LtpCounters tx_counters_;
  dp::PolicySlot& slot_;
  std::unique_ptr<policy::Gateway> gw_;
  // Per peer index: channel 1 carries lib/policy messages, channel 2 measurement rows.
  std::vector<std::unique_ptr<ltp::ControlChannel>> policy_ch_, measure_ch_;
  std::atomic<uint32_t> approved_{0};
  uint64_t published_version_ = 0;
  topo::Plan current_;
  // Coordinator: measured bytes/s of link i->j at [i*n+j] (0: unknown), when it last changed.
  std::vector<double> matrix_;
  LinkCodecs codecs_;
  uint32_t last_row_round_ = 0;
  Nanos last_switch_ = 0;
  AgentStats stats_;
};

}  // namespace sg::ctl
