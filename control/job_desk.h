// The gateway's front desk for jobs announced by their workers (config: admission): JOB
// messages in and out (wire/job_msg.h), the rules in jobs::Registry (lib/jobs/registry.h).
//
//   in    JOB frames engine 0 received (a ring of mbufs): workers' joins and leaves, the
//         peers' announcements
//   out   replies to workers (to the address their join came from) and this gateway's
//         announcements to every peer, built here and sent by engine 0 (a ring), sealed like
//         CONTROL when the deployment seals
//
// The gateway asks registry() what to build and tear down (Gateway::sync_jobs). Owner: the
// control thread; nothing here runs on the packet path.
#pragma once

#include <rte_mempool.h>
#include <rte_ring.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "config/config.h"
#include "crypto/peer_sessions.h"
#include "dataplane/ltp_tx.h"
#include "jobs/registry.h"
#include "wire/ltp_codec.h"

namespace sg::ctl {

// An announced job's config: the gateway's, with `job` from the definition (other job keys
// from the YAML's `job` section when it names no model, else their defaults). An exact job
// (JobSpec::exact) has compression and Early Close off and rounds that wait up to
// kExactRoundTimeoutMs.
inline constexpr uint32_t kExactRoundTimeoutMs = 30 * 60 * 1000;
config::GatewayConfig announced_job_config(const config::GatewayConfig& base, const wire::JobSpec& spec);

// What a job of this definition holds at this gateway (`engines` engines), or why the
// definition is not valid here (the key and the limit). Memory: dp::job_memory_estimate.
bool announced_job_cost(const config::GatewayConfig& base, unsigned engines, const wire::JobSpec& spec, jobs::Cost& cost,
                        std::string& error);
// The mbufs a job's rings can hold at once (its CONTROL rings), reserved per job.
inline constexpr uint32_t kJobControlRing = 1024;
inline constexpr uint64_t kJobMbufs = 2 * kJobControlRing;

struct DeskStats {
  std::atomic<uint64_t> joins{0}, leaves{0}, announcements_in{0}, announcements_out{0}, replies{0}, bad{0};
  std::atomic<uint64_t> token_refused{0};  // workers' JOB messages that did not open with their job's token
};

class JobDesk {
 public:
  JobDesk(const config::GatewayConfig& cfg, unsigned engines, jobs::Budget budget, rte_mempool* pool,
          const std::vector<dp::Port>& ports, const dp::Neighbours& nbrs, const std::vector<dp::PeerRoute>& routes,
          rte_ring* frames_in, rte_ring* frames_out);
  ~JobDesk();

  // Frames in (joins answered at once), timers, announcements out.
  void tick(Nanos now);
  jobs::Registry& registry() { return registry_; }
  const jobs::Registry& registry() const { return registry_; }
  const DeskStats& stats() const { return stats_; }
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  // Every job the registry holds, as of the last tick: for other threads (telemetry).
  std::vector<jobs::JobView> views() const {
    std::lock_guard lk(views_mu_);
    return views_;
  }
  // Announcements leave sealed by `s` (the control thread's lane); null: plain.
  void set_sealer(crypto::Sealer* s) { tx_->set_sealer(s); }
  // admission.token_file: a worker's JOB messages come sealed with its job's token, derived
  // from `admission_secret` (crypto::derive_job_token); the desk opens them and seals its
  // replies with the same token. Messages that do not open are dropped and counted (bad).
  void set_job_tokens(std::vector<uint8_t> admission_secret) { admission_secret_ = std::move(admission_secret); }

 private:
  // Sessions with one worker of one job (its token's keys), made at its first message.
  struct WorkerSession {
    std::unique_ptr<crypto::Opener> opener;
    std::unique_ptr<crypto::Sealer> sealer;
    bool proven = false;  // a message opened with it: a real worker of that job
  };
  WorkerSession* worker_session(uint32_t job, uint16_t node);
  // Opens a worker's sealed JOB message in place; its plain length, or 0 (refused).
  size_t open_worker(const wire::CommonInfo& c, std::span<uint8_t> msg);
  std::vector<uint8_t> admission_secret_;
  std::map<std::pair<uint32_t, uint16_t>, WorkerSession> sessions_;
  // Bounded, and cheap to attack: a full table drops the sessions that never opened a
  // message (never a proven one, whose sealer's packet numbers the worker remembers), and at
  // most kMaxNewSessionsPerSecond are made (each derives keys), so junk sealed under made-up
  // job ids costs the control thread little and the real workers nothing.
  static constexpr size_t kMaxSessions = 4096;
  static constexpr uint32_t kMaxNewSessionsPerSecond = 256;
  Nanos now_ = 0, window_start_ = 0;
  uint32_t made_in_window_ = 0;
  void receive(Nanos now);
  void send(uint16_t node, wire::JobOp op, wire::JobStatus status, const wire::JobSpec& spec, const std::string& text);

  const config::GatewayConfig& cfg_;
  jobs::Registry registry_;
  rte_ring* in_;
  std::unique_ptr<dp::EngineIo> io_;
  dp::LtpCounters tx_counters_;
  std::unique_ptr<dp::LtpTx> tx_;
  std::vector<uint16_t> peers_;
  // Workers told "pending", by job: told again the moment the job runs (or is refused), so a
  // worker does not wait for its next join to learn it.
  std::map<uint32_t, std::vector<uint16_t>> waiting_;
  void tell_waiting();
  size_t nports_ = 0;
  DeskStats stats_;
  mutable std::mutex views_mu_;
  std::vector<jobs::JobView> views_;
  Nanos views_at_ = -1;
  std::atomic<uint64_t> refusals_{0};
};

}  // namespace sg::ctl
