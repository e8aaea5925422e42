// Keys between gateways: one pre-shared secret per deployment, kept in a key file that the
// YAML names by path (never inline), and from it one key per directed site pair and epoch by
// HKDF-SHA256 (RFC 5869). Directed keys mean two sites never seal with the same key, so a
// packet number needs to be unique only per sender, per peer, per epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "crypto/aead.h"

namespace sg::crypto {

inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 64;

struct SecretFile {
  std::vector<uint8_t> secret;  // empty on error
  std::string error;            // names the file and what is wrong with it
};

// Reads a key file: one line of 32..128 hex digits (16..64 bytes), '#' comments and blank
// lines allowed. Refused unless it is a regular file that neither group nor others can read
// or write (like ssh's private keys): a secret in a world-readable file is not a secret.
SecretFile load_secret(const std::string& path);

// Writes a new random 32-byte secret to `path` in load_secret's format, mode 0600; refuses to
// overwrite an existing file. Returns an empty string, or what went wrong.
std::string write_new_secret(const std::string& path);
// The same, with the given secret (a job token derived with derive_job_token) and a comment line.
std::string write_secret(const std::string& path, std::span<const uint8_t> secret, const std::string& comment);

// Job `job`'s worker token, derived from the gateways' admission secret (admission.token_file):
// 32 bytes under a label of its own. A gateway derives any job's token on demand, so announced
// jobs need no per-job file at the gateways, and one job's token says nothing about another's.
std::vector<uint8_t> derive_job_token(std::span<const uint8_t> admission_secret, uint32_t job);

// The key `from` seals with toward `to` in `epoch` (key_len(suite) bytes). Empty if OpenSSL
// fails. Allocates inside OpenSSL: call it when a session is built or an epoch is prepared.
std::vector<uint8_t> derive_key(std::span<const uint8_t> secret, Suite suite, uint16_t from, uint16_t to,
                                uint32_t epoch);

// A short public fingerprint of the secret (16 hex digits, derived by HKDF under a label of its
// own, so it reveals nothing usable about the keys). Gateways compare fingerprints to say
// "the key files differ" instead of dropping every packet as forged.
std::string fingerprint(std::span<const uint8_t> secret);

}  // namespace sg::crypto
