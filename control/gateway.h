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
#include "control/job_desk.h"
#include "control/security.h"
#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "control/metrics.h"
#include "control/policy_agent.h"
#include "dataplane/policy_slot.h"
#include "ltp/link_share.h"
#include "measure/link_estimator.h"
#include "topology/plan.h"
#include "dataplane/neighbours.h"
#include "dataplane/ports.h"

namespace sg::ctl {

struct Totals {
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0, tx_dropped = 0, drops = 0, idle_sleeps = 0,
           polls = 0;
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

// One job's parts in the gateway: a runner and an LTP sink per engine (each runs its own
// shards; the lead, engine 0's, also the site's workers and the round's start and end), the
// rings between its engines, and its control plane (policy agent, policy slot, the engines'
// arrival samples, CONTROL rings). Jobs share the ports, engines and mbuf pool.
struct JobStack {
  config::GatewayConfig cfg;  // the gateway's, with `job` = this job
  topo::Plan plan;
  uint32_t policy_version = 0;
  bool share_group = false;  // its group is open on the links' boards (Gateway::boards_)
  std::vector<std::unique_ptr<dp::LtpTx>> txs;
  std::vector<std::unique_ptr<dp::JobRunner>> runners;
  dp::JobRunner* lead = nullptr;
  std::vector<std::unique_ptr<dp::EngineLink>> links;
  std::unique_ptr<dp::PolicySlot> slot;
  std::vector<rte_ring*> samples;  // per engine
  rte_ring* ctl_in = nullptr;
  rte_ring* ctl_out = nullptr;
  std::unique_ptr<PolicyAgent> agent;
  std::vector<LinkView> link_views;  // guarded by Gateway::view_mu_
  uint64_t rounds_seen = 0;          // the lead's rounds at the last look (idle detection)
  Nanos stop_wanted_at = -1;         // ended while its round was under way: when
  std::unique_ptr<JobWorkerKeys> worker_keys;  // an announced job's own token (admission.token_file)
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
  // The first job (the only one unless `jobs` lists several); null: no job.
  const dp::JobRunner* job() const { return stacks_.empty() ? nullptr : stacks_.front()->lead; }
  // For readers on other threads (telemetry): the job list cannot change while held.
  std::unique_lock<std::mutex> hold_jobs() const { return std::unique_lock(jobs_mu_); }
  const JobDesk* desk() const { return desk_.get(); }
  // Every job's lead runner and its config, in config order (then announced ones).
  size_t job_count() const { return stacks_.size(); }
  const dp::JobRunner* job_at(size_t k) const { return stacks_[k]->lead; }
  const config::JobConfig& job_config(size_t k) const { return stacks_[k]->cfg.job; }
  // The plan in force and its version (copies: the control thread may switch them); the
  // first job's unless k names another.
  topo::Plan plan(size_t k = 0) const {
    std::lock_guard lk(view_mu_);
    return k < stacks_.size() ? stacks_[k]->plan : topo::Plan{};
  }
  uint32_t policy_version(size_t k = 0) const {
    std::lock_guard lk(view_mu_);
    return k < stacks_.size() ? stacks_[k]->policy_version : 0;
  }
  const PolicyAgent* agent(size_t k = 0) const { return k < stacks_.size() ? stacks_[k]->agent.get() : nullptr; }
  std::vector<LinkView> link_views(size_t k = 0) const {
    std::lock_guard lk(view_mu_);
    return k < stacks_.size() ? stacks_[k]->link_views : std::vector<LinkView>{};
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
  // [engine][plan site index]: the links several jobs share by weight (null: self, or one
  // job). Declared before stacks_: the jobs' senders hold flows of these shares.
  // Per plan site (null: self): what every engine's share of that link has in common.
  std::vector<std::unique_ptr<ltp::LinkBoard>> boards_;
  std::vector<std::vector<std::unique_ptr<ltp::LinkShare>>> shares_;
  std::vector<std::unique_ptr<JobStack>> stacks_;  // one per job, in config order
  std::vector<rte_ring*> handoff_rings_;  // per engine: job frames for its shards (MP/SC)
  GatewaySecurity security_;
  // A job's parts on `engines` engines from `jcfg` (the gateway's config as the job sees
  // it); null with the reason in err. attach_job hands them to the engines: directly before
  // they run (live false), else through their command rings. free_job frees what a stack
  // holds (detached first, if it was attached).
  std::unique_ptr<JobStack> build_job(const config::GatewayConfig& jcfg, unsigned engines, std::string& err);
  // admission.token_file: the job's own worker keys (its token derived from the secret).
  bool give_job_token(JobStack& js, std::string& err);
  bool attach_job(JobStack& js, bool live, std::string& err);
  void detach_job(JobStack& js);
  void free_job(JobStack& js);
  // Posts one command per engine (cmds[q] to engine q) and waits until each applied it (5 s
  // at most: false, and the commands are left to the engines).
  bool run_commands(std::vector<std::unique_ptr<dp::GatewayHandler::JobCommand>>& cmds);
  // Jobs announced by workers (admission.enabled): the desk, its rings, the engines' command
  // rings; sync_jobs (control loop) builds the jobs the registry agreed and frees the ended.
  bool start_admission(unsigned engines);
  void sync_jobs(Nanos now);
  std::unique_ptr<JobDesk> desk_;
  std::vector<rte_ring*> command_rings_;
  rte_ring* registry_in_ = nullptr;
  rte_ring* registry_out_ = nullptr;
  uint64_t job_serial_ = 0;
  bool all_jobs_finished() const;
  void print_job_summary(const JobStack& js) const;
  // Control thread state.
  void drain_samples();
  void drain_samples(JobStack& js, Nanos now);
  // A job's bytes sent to each site so far (plan order; DATA over every path), and their sum.
  std::vector<uint64_t> bytes_sent_to(const JobStack& js, uint64_t& total) const;
  MetricsServer metrics_;
  mutable std::mutex view_mu_;  // control thread writes, telemetry thread reads
  // stacks_ grows and shrinks while the gateway runs (announced jobs): the control thread
  // changes it under this lock, the telemetry thread reads it under it (hold_jobs()).
  mutable std::mutex jobs_mu_;
  std::vector<std::unique_ptr<dp::Engine>> engines_;
  std::vector<dp::Engine::LaunchArgs> launch_;
  std::atomic<bool> engines_stop_{false};
  bool running_ = false;
};

}  // namespace sg::ctl
