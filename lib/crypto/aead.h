// Per-packet authenticated encryption for traffic between gateways: AES-128-GCM through Intel's
// ipsec-mb library (the code under DPDK's aesni_gcm crypto PMD, called directly, without the
// cryptodev queues) when the build has it -- it measured 1.8x OpenSSL 3's EVP on this
// machine's AVX2/VAES cores (perf/bench crypto) -- else through OpenSSL 3's EVP;
// ChaCha20-Poly1305 through EVP. Both give the standard's bytes: either end may use either.
//
// Two protections with the same tag: kEncrypt (the header is associated data, the payload is
// encrypted) and kAuthOnly (everything is associated data: GMAC / Poly1305 without the
// stream cipher, for links where confidentiality of gradients is not needed).
//
// Owner: one thread (an EVP context is not shareable). Construction allocates the contexts and
// expands the key once; seal/open only set the nonce and run the cipher: no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

struct evp_cipher_ctx_st;
struct gcm_key_data;

namespace sg::crypto {

enum class Suite : uint8_t { kAes128Gcm = 0, kChaCha20Poly1305 = 1 };
enum class Protection : uint8_t { kEncrypt = 0, kAuthOnly = 1 };

inline constexpr size_t kTagLen = 16;
inline constexpr size_t kNonceLen = 12;
using Nonce = std::array<uint8_t, kNonceLen>;

size_t key_len(Suite s);  // 16 (AES-128) or 32 (ChaCha20)
const char* suite_name(Suite s);
std::optional<Suite> parse_suite(std::string_view name);  // "aes-128-gcm", "chacha20-poly1305"

// The 96-bit nonce of packet `seq` (unique per key: keys are per directed site pair and
// epoch, see keys.h): four zero bytes then seq big-endian, as TLS 1.3 and QUIC build theirs.
Nonce make_nonce(uint64_t seq);

class Aead {
 public:
  // key: key_len(suite) bytes. ok() is false if OpenSSL refused the key or the cipher.
  Aead(Suite suite, std::span<const uint8_t> key);
  ~Aead();
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  bool ok() const { return enc_ != nullptr && dec_ != nullptr; }
  Suite suite() const { return suite_; }
  // Which library runs this suite here ("ipsec-mb" or "openssl").
  const char* engine() const { return gcm_ ? "ipsec-mb" : "openssl"; }

  // Seals in place: `aad` is authenticated; `text` is encrypted (kEncrypt) or only
  // authenticated after aad (kAuthOnly). Writes the tag. False only on an OpenSSL failure.
  bool seal(const Nonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> text, Protection p,
            std::span<uint8_t, kTagLen> tag);
  // Opens in place; false if the tag does not verify (then `text` may hold garbage: drop it).
  bool open(const Nonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> text, Protection p,
            std::span<const uint8_t, kTagLen> tag);

 private:
  Suite suite_;
  evp_cipher_ctx_st* enc_ = nullptr;
  evp_cipher_ctx_st* dec_ = nullptr;
  gcm_key_data* gcm_ = nullptr;  // ipsec-mb's expanded AES-GCM key (null: EVP does AES-GCM)
};

}  // namespace sg::crypto
