// One site's control plane, the same in the gateway and the simulator: the controller
// (controller.h), the policy consistency protocol (lib/policy) over reliable CONTROL
// channels to every peer, this site's link measurements (lib/measure) sent to the
// coordinator as rows, and active probes (probes.h).
//
// Drivers: control/policy_agent (the gateway's control thread; CONTROL and PROBE frames come
// from engine 0 and leave through it) and lib/sim's gateway sites (messages cross the
// simulated links). Each feeds on_message() with the CONTROL and PROBE messages addressed to
// this site, calls tick() often with the rounds completed and the bytes sent so far, and
// asks begin_round() before a round: a round runs under exactly one policy, agreed by all.
//
// Channels: 1 carries lib/policy messages (a message longer than one CONTROL payload travels
// in fragments: 1 byte "more follows" + a part), 2 measurement rows (lib/wire/measure_row).
// Owner: one thread. Time is passed in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "controller/controller.h"
#include "controller/probes.h"
#include "ltp/control_channel.h"
#include "measure/link_estimator.h"
#include "policy/gateway.h"
#include "topology/plan.h"

namespace sg::controller {

struct ControlPlaneConfig {
  ControllerConfig controller;      // sites, self, coordinator, planner, ...
  std::vector<uint16_t> nodes;      // LTP node id of every site, in plan order
  uint32_t job = 1;
  uint32_t switch_rounds_ahead = 2;
  uint32_t row_every_rounds = 2;    // a measurement row to the coordinator this often
  Nanos row_interval = 1 * kSecond; // ... and at least this often while no round completes
                                    // (probes measure links before a job's first round)
  bool probes = false;
  ProbeSettings probe;
  measure::EstimatorConfig estimator;  // `sites` is set from the controller's
  Nanos retry_interval = 50 * kMilli;  // policy protocol retransmissions
  // 0: a site of a cluster that starts together (synced at once on the initial plan).
  // Otherwise this run's incarnation, larger after every restart (the gateway's start time):
  // the site starts unsynced, learns the cluster's policy state from its peers (lib/policy's
  // restart protocol) and begins no round before; its CONTROL channels carry it as their
  // session, so peers start their channels to it over.
  uint64_t incarnation = 0;
};

// The settings a gateway's config gives (topology.probes, probe_rate_kbit, chunk_bytes,
// control.switch_rounds_ahead, and the controller's: controller_config).
ControlPlaneConfig control_plane_config(const config::GatewayConfig& cfg);

struct ControlPlaneStats {
  uint64_t proposals = 0, switches = 0;
  uint64_t rows_sent = 0, rows_received = 0, rows_bad = 0;
  uint64_t control_in = 0, control_bad = 0;
  uint64_t policy_deferred = 0;  // policy messages dropped while an earlier one was still going out
  uint64_t probe_trains_sent = 0, probe_packets_in = 0, probe_results = 0, probes_bad = 0;
};

class ControlPlane {
 public:
  ControlPlane(ControlPlaneConfig cfg, const topo::Plan& initial);
  ~ControlPlane();

  // A CONTROL or PROBE message addressed to this site (other types are ignored). A PROBE's
  // arrival time is its rx_ts if the receiver stamped one, else `now`.
  void on_message(std::span<const uint8_t> msg, Nanos now);
  // Rows, planning (coordinator), the protocol's timers, probes; sends through `tx`.
  // `completed_round`: the last round this site finished; `sent_to[j]`: cumulative job
  // bytes sent to site j; `sent_total`: all of them. Returns when to call again at the latest.
  Nanos tick(Nanos now, uint32_t completed_round, std::span<const uint64_t> sent_to, uint64_t sent_total,
             ltp::PacketSink& tx);

  // The policy round r runs under. Marks r begun (no switch at or before it is promised
  // any more). nullopt: not yet (unsynced or a switch undecided): ask again later.
  struct Approval {
    uint64_t version = 0;        // lib/policy's version (0: the initial plan)
    const topo::Plan* plan = nullptr;
    bool changed = false;        // a different version than the round before
  };
  std::optional<Approval> begin_round(uint32_t r);
  // This site's load as its rows report it: how long its workers take from a round's result
  // to the next update (< 0: not measured). SelMCast's receivers weigh it (receivers.h).
  // `overlap`: the share of it a round's transfer can run behind (wire::MeasureRow::overlap;
  // < 0: not measured), which adaptive compression weighs.
  void set_update_lag(double seconds, double overlap = -1) {
    update_lag_s_ = seconds;
    overlap_ = overlap;
  }

  measure::LinkEstimator& estimator() { return est_; }
  const measure::LinkEstimator& estimator() const { return est_; }
  const Controller& controller() const { return ctl_; }
  Controller& controller() { return ctl_; }
  bool coordinator() const { return ctl_.coordinator(); }
  uint64_t active_version() const { return gw_->active_version(); }
  bool synced() const { return gw_->synced(); }
  // What a site that (re)started learnt: the highest round anyone is known to have begun
  // (approved) and the first round a known policy covers (0 for none, or while unsynced).
  uint32_t cluster_round() const { return clamp_round(gw_->cluster_round()); }
  uint32_t first_round() const { return clamp_round(gw_->first_round()); }
  const topo::Plan& current_plan() const { return current_; }  // of the last approved round
  const ControlPlaneStats& stats() const { return stats_; }
  const ControlPlaneConfig& config() const { return cfg_; }
  // Plan site `site`'s restarts seen on its policy channel (a new session: a new process).
  uint64_t peer_restarts(int site) const {
    return site >= 0 && static_cast<size_t>(site) < peer_restarts_.size() ? peer_restarts_[static_cast<size_t>(site)] : 0;
  }
  uint64_t policy_bad() const { return gw_->bad_messages(); }  // policy messages that did not decode
  // Coordinator: refused switch attempts, and those whose retry was pushed out (policy::Gateway).
  uint64_t switch_aborts() const { return gw_->aborts(); }
  uint64_t switch_aborts_later() const { return gw_->aborts_later(); }
  const ProbeScheduler& prober() const { return prober_; }
  const ProbeReceiver& probe_receiver() const { return probe_rx_; }

 private:
  void on_control(int from, std::span<const uint8_t> msg, Nanos now);
  void on_probe(int from, std::span<const uint8_t> msg, Nanos now);
  void take_probe(const ProbeResult& r);  // a timed train, or a lower bound (probes.h)
  void on_policy_bytes(int from, std::span<const uint8_t> part, Nanos now);
  void send_policy(const policy::Message& m, Nanos now);
  void flush_policy(int to, Nanos now);
  void send_row(Nanos now, uint32_t completed);
  void send_probes(Nanos now, std::span<const uint64_t> sent_to, ltp::PacketSink& tx);
  int index_of(uint16_t node) const;
  static uint32_t clamp_round(policy::Round r) {
    return r > 0 ? static_cast<uint32_t>(std::min<policy::Round>(r, UINT32_MAX)) : 0;
  }

  ControlPlaneConfig cfg_;
  int n_, self_;
  Controller ctl_;
  measure::LinkEstimator est_;
  EgressMeter egress_;
  double update_lag_s_ = -1;
  double overlap_ = -1;
  ProbeScheduler prober_;
  ProbeReceiver probe_rx_;
  std::unique_ptr<policy::Gateway> gw_;
  std::vector<std::unique_ptr<ltp::ControlChannel>> policy_ch_, measure_ch_;
  std::vector<std::vector<uint8_t>> reassembly_;  // per peer: policy message fragments so far
  std::vector<std::vector<uint8_t>> policy_out_;  // per peer: the policy message going out (empty: none)
  std::vector<size_t> policy_out_off_;            // ... its bytes already in the channel
  std::vector<uint8_t> policy_part_;              // one fragment being built
  std::vector<uint64_t> peer_restarts_;           // per peer: restarts its policy channel saw
  topo::Plan current_;
  uint64_t current_version_ = 0;
  // The plan before the last switch and the switch's round: which plan a completed round ran
  // (Controller::on_round_done), and when this site last completed one.
  topo::Plan before_switch_;
  uint32_t switch_round_ = 0;
  Nanos last_done_at_ = -1;
  std::optional<topo::Plan> proposed_;  // coordinator: the last plan it proposed
  uint32_t last_completed_ = 0, last_row_round_ = 0;
  Nanos last_row_at_ = -1;
  uint32_t probe_train_ = 0;
  std::vector<uint8_t> probe_buf_, probe_pad_;
  ControlPlaneStats stats_;
};

}  // namespace sg::controller
