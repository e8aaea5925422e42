// The gateway process's assembly: pool, ports, one engine per worker lcore, the control loop
// on the main lcore. main.cpp parses arguments and drives start() / run_control() / stop().
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/auth_watch.h"
#include "control/security.h"
#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "control/metrics.h"
#include "control/policy_agent.h"
#include "dataplane/policy_slot.h"
#include "measure/link_estimator.h"
#include "topology/plan.h"
#include "dataplane/neighbours.h"
#include "dataplane/ports.h"

namespace sg::ctl {

struct Totals {
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0, tx_dropped = 0, drops = 0, idle_sleeps = 0;
  uint64_t data_rx = 0, data_rx_bytes = 0, data_tx = 0, data_tx_bytes = 0, arp_answered = 0, arp_learned = 0;
  uint64_t no_mbuf = 0, bad_version = 0;
  // Multipath (dataplane/MULTIPATH.md).
  uint64_t relayed_tx = 0, relayed_rx = 0, relay_forwarded = 0, relay_forwarded_bytes = 0, relay_no_route = 0,
           relay_refused = 0, txq_full = 0;
  uint64_t drop_by_reason[static_cast<size_t>(dp::Drop::kCount)] = {};
  // Sealing (lib/crypto): messages opened and sealed, and refusals by reason.
  uint64_t opened = 0, sealed = 0, seal_failed = 0;
  uint64_t auth_drops[static_cast<size_t>(dp::AuthDrop::kCount)] = {};
};

// What the control thread measured on one incoming link (peer -> us), for telemetry.
struct LinkView {
  uint16_t peer_id = 0;
  double mbit_s = 0;
  double rtt_ms = -1;
  double loss = 0;
  uint32_t windows = 0, changes = 0;
};

class Gateway {
 public:
  explicit Gateway(config::GatewayConfig cfg) : cfg_(std::move(cfg)) {}
  ~Gateway();

  // Creates the pool and ports and launches the engines. Prints the reason on failure.
  bool start();
  // Runs on the main lcore until `stop` is set or `duration_s` (0: forever) passes; prints a
  // counter line every telemetry.stats_interval_ms.
  // `reload` (optional): set by SIGHUP; the control thread then reloads the config file.
  void run_control(const std::atomic<bool>& stop, double duration_s, std::atomic<bool>* reload = nullptr);
  // The text of the config file in force (what a reload compares the file with).
  void set_config_text(std::string text) { config_text_ = std::move(text); }
  // Loads cfg_.source again and applies it if every changed key is live, else says why not
  // and goes on with the running config (config/reload.h). True if applied. Control thread.
  bool reload();
  // Stops the engines, returns every mbuf, prints the final counters, closes the ports.
  // Returns false if the pool did not come back full (an mbuf leak).
  bool stop();

  Totals totals() const;
  const config::GatewayConfig& config() const { return cfg_; }
  const std::vector<dp::Port>& ports() const { return ports_; }
  const dp::Neighbours& neighbours() const { return nbrs_; }
  const std::vector<dp::PeerRoute>& routes() const { return routes_; }
  uint64_t data_rx_from_peer(size_t peer_index) const;
  AuthSnapshot auth_snapshot() const;  // refusals by source (auth_watch.h)
  const dp::JobRunner* job() const { return job_; }
  // The plan in force and its version (copies: the control thread may switch them).
  topo::Plan plan() const {
    std::lock_guard lk(view_mu_);
    return plan_;
  }
  uint32_t policy_version() const {
    std::lock_guard lk(view_mu_);
    return policy_version_;
  }
  const PolicyAgent* agent() const { return agent_.get(); }
  std::vector<LinkView> link_views() const {
    std::lock_guard lk(view_mu_);
    return link_views_;
  }
  unsigned workers() const { return static_cast<unsigned>(engines_.size()); }

 private:
  std::string config_text_;
  uint32_t stats_interval_ms_ = 0;  // telemetry.stats_interval_ms, changed by a reload
  void print_line(const Totals& now, const Totals& before, double seconds) const;

  config::GatewayConfig cfg_;
  rte_mempool* pool_ = nullptr;
  std::vector<dp::Port> ports_;
  dp::Neighbours nbrs_;
  std::vector<dp::PeerRoute> routes_;
  std::vector<std::unique_ptr<dp::GatewayHandler>> handlers_;
  topo::Plan plan_;
  uint32_t policy_version_ = 0;
  // The job: one runner and one LTP sink per engine (each runs its own shards); job_ is
  // engine 0's, which leads the rounds and counts for all.
  std::vector<std::unique_ptr<dp::LtpTx>> ltp_txs_;
  std::vector<std::unique_ptr<dp::JobRunner>> jobs_;
  dp::JobRunner* job_ = nullptr;
  std::vector<std::unique_ptr<dp::EngineLink>> links_;
  std::vector<rte_ring*> handoff_rings_;  // per engine: job frames for its shards (MP/SC)
  GatewaySecurity security_;
  // Control thread state.
  void drain_samples();
  // Job bytes sent to each site so far (plan order; DATA over every path), and their sum.
  std::vector<uint64_t> bytes_sent_to(uint64_t& total) const;
  std::unique_ptr<dp::PolicySlot> policy_slot_;
  std::unique_ptr<PolicyAgent> agent_;
  MetricsServer metrics_;
  rte_ring* ctl_in_ = nullptr;
  rte_ring* ctl_out_ = nullptr;
  std::vector<rte_ring*> samples_;  // per engine
  mutable std::mutex view_mu_;  // control thread writes, telemetry thread reads
  std::vector<LinkView> link_views_;
  std::vector<std::unique_ptr<dp::Engine>> engines_;
  std::vector<dp::Engine::LaunchArgs> launch_;
  std::atomic<bool> engines_stop_{false};
  bool running_ = false;
};

}  // namespace sg::ctl
