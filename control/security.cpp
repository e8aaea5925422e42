#include "control/security.h"

#include <ctime>

#include "crypto/keys.h"
#include "sync/local_group.h"

namespace sg::ctl {

bool load_peer_security(const config::GatewayConfig& cfg, crypto::PeerSecurity& out, std::string& err) {
  const auto& s = cfg.security;
  out = crypto::PeerSecurity{};
  // No peers: no traffic between gateways, nothing to seal (workers on the LAN are plain).
  if (s.mode == config::SecurityMode::kPlain || cfg.peers.empty()) return true;
  if (s.key_file.empty()) {
    err = cfg.source + ": security.key_file is not set (or set security.mode: plain, for experiments only)";
    return false;
  }
  crypto::SecretFile f = crypto::load_secret(s.key_file);
  if (f.secret.empty()) {
    err = cfg.source + ": security.key_file: " + f.error + " (make one with: stormgate --keygen " + s.key_file + ")";
    return false;
  }
  out.secret = std::move(f.secret);
  out.suite = s.suite == config::SecuritySuite::kChaCha20Poly1305 ? crypto::Suite::kChaCha20Poly1305
                                                                   : crypto::Suite::kAes128Gcm;
  out.protection = s.protection == config::SecurityProtection::kAuthOnly ? crypto::Protection::kAuthOnly
                                                                          : crypto::Protection::kEncrypt;
  out.replay_window = s.replay_window;
  out.rekey_after = s.rekey_after_packets;
  out.first_epoch = crypto::boot_epoch(static_cast<uint64_t>(std::time(nullptr)));
  out.self = cfg.site.id;
  for (const auto& p : cfg.peers) out.peers.push_back(p.id);
  out.lanes = kGatewayLanes;
  return true;
}

crypto::PeerSecurity worker_security(const config::GatewayConfig& cfg, std::vector<uint8_t> secret) {
  crypto::PeerSecurity out;
  out.secret = std::move(secret);
  // Fixed, so that a worker needs only the token: AES-128-GCM, encrypted (gradients and
  // results stay private on the LAN too).
  out.suite = crypto::Suite::kAes128Gcm;
  out.protection = crypto::Protection::kEncrypt;
  out.replay_window = cfg.security.replay_window;
  out.rekey_after = cfg.security.rekey_after_packets;
  out.first_epoch = crypto::boot_epoch(static_cast<uint64_t>(std::time(nullptr)));
  out.self = cfg.site.id;
  for (uint32_t w = 0; w < cfg.job.workers; ++w) out.peers.push_back(static_cast<uint16_t>(sync::kWorkerNodeBase + w));
  out.lanes = 1;  // a worker is one thread
  return out;
}

bool load_worker_security(const config::GatewayConfig& cfg, crypto::PeerSecurity& out, std::string& err) {
  out = crypto::PeerSecurity{};
  if (cfg.job.token_file.empty()) return true;
  crypto::SecretFile f = crypto::load_secret(cfg.job.token_file);
  if (f.secret.empty()) {
    err = cfg.source + ": job.token_file: " + f.error + " (make one with: stormgate --keygen " + cfg.job.token_file + ")";
    return false;
  }
  out = worker_security(cfg, std::move(f.secret));
  return true;
}

bool load_admission_secret(const config::GatewayConfig& cfg, std::vector<uint8_t>& out, std::string& err) {
  out.clear();
  if (cfg.admission.token_file.empty()) return true;
  crypto::SecretFile f = crypto::load_secret(cfg.admission.token_file);
  if (f.secret.empty()) {
    err = cfg.source + ": admission.token_file: " + f.error + " (make one with: stormgate --keygen " +
          cfg.admission.token_file + ")";
    return false;
  }
  out = std::move(f.secret);
  return true;
}

std::unique_ptr<JobWorkerKeys> job_worker_keys(const config::GatewayConfig& job_cfg,
                                               std::span<const uint8_t> admission_secret, unsigned engines,
                                               std::string& err) {
  auto k = std::make_unique<JobWorkerKeys>();
  k->params = worker_security(job_cfg, crypto::derive_job_token(admission_secret, job_cfg.job.id));
  bool ok = !k->params.secret.empty();
  for (unsigned q = 0; ok && q < engines; ++q) {
    k->sealers.push_back(std::make_unique<crypto::Sealer>(k->params, engine_lane(q)));
    k->openers.push_back(std::make_unique<crypto::Opener>(k->params));
    ok = k->sealers.back()->ok();
  }
  if (!ok) {
    err = "OpenSSL refused job " + std::to_string(job_cfg.job.id) + "'s worker keys";
    return nullptr;
  }
  return k;
}

bool GatewaySecurity::build(unsigned engines, std::string& err) {
  bool ok = true;
  if (!worker_params.secret.empty()) {
    for (unsigned q = 0; q < engines; ++q) {
      worker_sealers.push_back(std::make_unique<crypto::Sealer>(worker_params, engine_lane(q)));
      worker_openers.push_back(std::make_unique<crypto::Opener>(worker_params));
      ok = ok && worker_sealers.back()->ok();
    }
    if (!ok) {
      err = std::string("OpenSSL refused the job token's ") + crypto::suite_name(worker_params.suite) + " keys";
      return false;
    }
  }
  if (params.secret.empty()) return true;  // plain
  control = std::make_unique<crypto::Sealer>(params, kControlLane);
  ok = control->ok();
  for (unsigned q = 0; q < engines; ++q) {
    engine_sealers.push_back(std::make_unique<crypto::Sealer>(params, engine_lane(q)));
    engine_openers.push_back(std::make_unique<crypto::Opener>(params));
    ok = ok && engine_sealers.back()->ok();
  }
  if (!ok) err = std::string("OpenSSL refused the ") + crypto::suite_name(params.suite) + " keys";
  return ok;
}

}  // namespace sg::ctl
