#include "control/security.h"

#include <ctime>

#include "crypto/keys.h"

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

bool GatewaySecurity::build(unsigned engines, std::string& err) {
  if (params.secret.empty()) return true;  // plain
  control = std::make_unique<crypto::Sealer>(params, kControlLane);
  bool ok = control->ok();
  for (unsigned q = 0; q < engines; ++q) {
    engine_sealers.push_back(std::make_unique<crypto::Sealer>(params, engine_lane(q)));
    engine_openers.push_back(std::make_unique<crypto::Opener>(params));
    ok = ok && engine_sealers.back()->ok();
  }
  if (!ok) err = std::string("OpenSSL refused the ") + crypto::suite_name(params.suite) + " keys";
  return ok;
}

}  // namespace sg::ctl
