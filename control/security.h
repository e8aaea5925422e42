// The gateway's side of lib/crypto: the config's security section turned into the keys and
// sessions every thread uses. Lanes: the control thread seals as lane 0, engine q as lane q + 1,
// and every gateway opens up to kGatewayLanes lanes per peer (the most any config can have).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "crypto/peer_sessions.h"

namespace sg::ctl {

inline constexpr uint8_t kControlLane = 0;
inline constexpr unsigned kGatewayLanes = 1 + 64;  // the control thread + ports' rx_queues at most

inline uint8_t engine_lane(unsigned engine) { return static_cast<uint8_t>(engine + 1); }

// Reads the key file and fills `out` (peers, suite, epoch from the wall clock). False with
// `err` naming the file and the problem. Plain mode: true and out.secret empty.
bool load_peer_security(const config::GatewayConfig& cfg, crypto::PeerSecurity& out, std::string& err);

// The job's token (job.token_file) turned into sessions with the site's workers: keys per
// directed (gateway site, worker node) pair from the token, like between gateways. Workers
// seal as lane 0; the gateway's engines seal toward them as their own lanes. No token: true
// and out.secret empty.
bool load_worker_security(const config::GatewayConfig& cfg, crypto::PeerSecurity& out, std::string& err);

// Sessions with one job's workers from its token (`secret`): as load_worker_security, for
// the cfg.job.workers workers of cfg.job.
crypto::PeerSecurity worker_security(const config::GatewayConfig& cfg, std::vector<uint8_t> secret);

// One announced job's sessions with its workers (admission.token_file): a sealer and an
// opener per engine, from the job's token (crypto::derive_job_token).
struct JobWorkerKeys {
  crypto::PeerSecurity params;
  std::vector<std::unique_ptr<crypto::Sealer>> sealers;
  std::vector<std::unique_ptr<crypto::Opener>> openers;
};
// Null with err if OpenSSL refused a key.
std::unique_ptr<JobWorkerKeys> job_worker_keys(const config::GatewayConfig& job_cfg,
                                               std::span<const uint8_t> admission_secret, unsigned engines,
                                               std::string& err);

// admission.token_file read (empty: none set). False with err naming the file.
bool load_admission_secret(const config::GatewayConfig& cfg, std::vector<uint8_t>& out, std::string& err);

// What one gateway process holds: a sealer per sending thread, an opener per engine; and,
// with a job token, a sealer and an opener per engine for the workers.
struct GatewaySecurity {
  crypto::PeerSecurity params;
  std::unique_ptr<crypto::Sealer> control;
  std::vector<std::unique_ptr<crypto::Sealer>> engine_sealers;
  std::vector<std::unique_ptr<crypto::Opener>> engine_openers;
  crypto::PeerSecurity worker_params;
  std::vector<std::unique_ptr<crypto::Sealer>> worker_sealers;
  std::vector<std::unique_ptr<crypto::Opener>> worker_openers;
  std::vector<uint8_t> admission_secret;  // admission.token_file: announced jobs' tokens derive from it
  bool on() const { return control != nullptr; }
  bool workers_sealed() const { return !worker_sealers.empty(); }  // job.token_file
  bool job_tokens() const { return !admission_secret.empty(); }     // admission.token_file
  bool any_sealing() const { return on() || workers_sealed() || job_tokens(); }
  // Builds the sessions for `engines` engines; false with err if OpenSSL refused a key.
  bool build(unsigned engines, std::string& err);
};

}  // namespace sg::ctl
