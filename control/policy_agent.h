// The gateway's adapter to its control plane (lib/controller/control_plane.h, the same class
// the simulator drives): every decision about the network is made there.
//
//   in    CONTROL and PROBE frames engine 0 received (a ring of mbufs; PROBE frames carry
//         engine 0's arrival time), the engines' DATA arrival samples (fed to estimator()),
//         the rounds completed, the job bytes sent to each peer
//   out   CONTROL and PROBE frames, built here into mbufs and sent by engine 0 (a ring);
//         round approvals (approved_through: engine 0 begins round r only once r <= it) and
//         each new policy, published through the RCU slot for the round it takes effect,
//         so no round runs under two policies.
//
// Owner: the control thread (main lcore). Nothing here runs on the packet path. Stats are
// relaxed atomics for the telemetry thread.
#pragma once

#include <rte_mempool.h>
#include <rte_ring.h>

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "config/config.h"
#include "controller/control_plane.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/peer_restarts.h"
#include "dataplane/policy_slot.h"
#include "topology/plan.h"

namespace sg::ctl {

struct AgentStats {
  std::atomic<uint64_t> proposals{0}, switches{0}, rows_sent{0}, rows_received{0}, control_in{0}, control_bad{0};
  std::atomic<uint64_t> replans_considered{0}, codec_proposals{0};
  std::atomic<uint64_t> regrets{0};  // new trees that measured slower: the plan before came back
  // Switch attempts a member refused (each retried), and those that pushed the retry's switch
  // round out because a member was already past it (lib/policy).
  std::atomic<uint64_t> switch_aborts{0}, switch_aborts_later{0};
  std::atomic<uint64_t> probe_trains_sent{0}, probe_results{0};
  std::atomic<uint64_t> probe_bounds{0};  // trains too quick to time: lower bounds (probes.h)
  std::atomic<double> last_gain{0};
};

class PolicyAgent {
 public:
  PolicyAgent(const config::GatewayConfig& cfg, const topo::Plan& initial, rte_mempool* pool,
              const std::vector<dp::Port>& ports, const dp::Neighbours& nbrs, const std::vector<dp::PeerRoute>& routes,
              rte_ring* frames_in, rte_ring* frames_out, dp::PolicySlot& slot, uint64_t incarnation = 0);
  ~PolicyAgent();

  // One control tick: frames in, the control plane's tick, round approvals, frames out.
  // `completed_round`: the last round engine 0 finished; `sent_to[j]`: job bytes sent to
  // site j (plan order) so far, `sent_total` their sum; `wanted_round`: the round engine 0
  // waits to begin (its workers moved there; 0: none).
  void tick(Nanos now, uint32_t completed_round, std::span<const uint64_t> sent_to, uint64_t sent_total,
            uint32_t wanted_round = 0);

  // Where the engines' DATA arrival samples go (links into this site).
  measure::LinkEstimator& estimator() { return plane_.estimator(); }
  const measure::LinkEstimator& estimator() const { return plane_.estimator(); }
  // The highest round engine 0 may begin (relaxed is enough: a stale value only delays).
  const std::atomic<uint32_t>& approved_through() const { return approved_; }
  // A restarted gateway's first round (the cluster's, once learnt; 0 before and on a fresh
  // start): a job without workers begins there instead of at round 1.
  const std::atomic<uint32_t>& rejoin_round() const { return rejoin_; }
  // Peers that came back as new processes, for the engines (dataplane/peer_restarts.h).
  const dp::PeerRestarts& peer_restarts() const { return restarts_; }
  bool synced() const { return plane_.synced(); }
  bool coordinator() const { return plane_.coordinator(); }
  uint64_t active_version() const { return plane_.active_version(); }
  const AgentStats& stats() const { return stats_; }
  // The plan in force at the highest approved round; changes only on switches.
  const topo::Plan& current_plan() const { return plane_.current_plan(); }
  const controller::ControlPlane& plane() const { return plane_; }
  // A config reload (control thread): topology.recompute_change and min_interval_ms.
  void retune(double recompute_change, Nanos min_interval) { plane_.controller().retune(recompute_change, min_interval); }
  // CONTROL and PROBE leave sealed by `s` (the control thread's lane); null: plain.
  void set_sealer(crypto::Sealer* s) { tx_->set_sealer(s); }
  // This site's load for its rows (seconds; < 0: not measured): see ControlPlane.
  void set_update_lag(double seconds, double overlap) { plane_.set_update_lag(seconds, overlap); }

 private:
  uint32_t job_ = 0;  // for the log lines: a gateway may run several jobs
  void receive_frames(Nanos now);
  void approve_rounds(uint32_t completed_round, uint32_t wanted_round);
  void publish_stats();
  void publish_restarts();

  rte_ring* in_;
  std::unique_ptr<dp::EngineIo> io_;
  std::unique_ptr<dp::LtpTx> tx_;
  dp::LtpCounters tx_counters_;
  dp::PolicySlot& slot_;
  controller::ControlPlane plane_;
  std::atomic<uint32_t> approved_{0};
  std::atomic<uint32_t> rejoin_{0};
  dp::PeerRestarts restarts_;
  uint64_t frames_bad_ = 0;
  Nanos started_ = -1;        // the first tick
  Nanos unsynced_said_ = -1;  // the last "waiting for the peers" warning
  AgentStats stats_;
};

}  // namespace sg::ctl
