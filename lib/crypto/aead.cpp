#include "crypto/aead.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <climits>
#include <cstring>
#include <new>

#if SG_HAVE_IPSEC_MB
#include <intel-ipsec-mb.h>
#endif

#include "common/endian.h"

namespace sg::crypto {
namespace {

const EVP_CIPHER* cipher_of(Suite s) {
  return s == Suite::kAes128Gcm ? EVP_aes_128_gcm() : EVP_chacha20_poly1305();
}

// EVP takes int lengths; packets are far below INT_MAX, but a caller's span is not checked
// anywhere else.
bool fits(size_t n) { return n <= static_cast<size_t>(INT_MAX); }

#if SG_HAVE_IPSEC_MB
// One manager for the process: the direct GCM calls only read its function table (picked for
// this CPU once), so every thread may share it. Null if ipsec-mb cannot run here.
IMB_MGR* mb() {
  static IMB_MGR* m = [] {
    IMB_MGR* x = alloc_mb_mgr(0);
    if (x && (init_mb_mgr_auto(x, nullptr), imb_get_errno(x) != 0)) {
      free_mb_mgr(x);
      x = nullptr;
    }
    return x;
  }();
  return m;
}
#endif

}  // namespace

size_t key_len(Suite s) { return s == Suite::kAes128Gcm ? 16 : 32; }

const char* suite_name(Suite s) { return s == Suite::kAes128Gcm ? "aes-128-gcm" : "chacha20-poly1305"; }

std::optional<Suite> parse_suite(std::string_view name) {
  if (name == "aes-128-gcm") return Suite::kAes128Gcm;
  if (name == "chacha20-poly1305") return Suite::kChaCha20Poly1305;
  return std::nullopt;
}

Nonce make_nonce(uint64_t seq) {
  Nonce n{};
  const be64 s(seq);
  std::memcpy(n.data() + 4, &s, sizeof s);
  return n;
}

Aead::Aead(Suite suite, std::span<const uint8_t> key) : suite_(suite) {
  if (key.size() != key_len(suite)) return;
  EVP_CIPHER_CTX* e = EVP_CIPHER_CTX_new();
  EVP_CIPHER_CTX* d = EVP_CIPHER_CTX_new();
  // The key schedule runs once here; per packet only the nonce is set (cipher and key null).
  const Nonce zero{};
  if (e && d && EVP_EncryptInit_ex(e, cipher_of(suite), nullptr, key.data(), zero.data()) == 1 &&
      EVP_DecryptInit_ex(d, cipher_of(suite), nullptr, key.data(), zero.data()) == 1) {
    enc_ = e;
    dec_ = d;
#if SG_HAVE_IPSEC_MB
    if (suite == Suite::kAes128Gcm && mb()) {
      gcm_ = new (std::align_val_t(64)) gcm_key_data;
      IMB_AES128_GCM_PRE(mb(), key.data(), gcm_);
    }
#endif
    return;
  }
  EVP_CIPHER_CTX_free(e);
  EVP_CIPHER_CTX_free(d);
}

Aead::~Aead() {
  EVP_CIPHER_CTX_free(enc_);
  EVP_CIPHER_CTX_free(dec_);
#if SG_HAVE_IPSEC_MB
  if (gcm_) {
    OPENSSL_cleanse(gcm_, sizeof *gcm_);
    ::operator delete(gcm_, std::align_val_t(64));
  }
#endif
}

namespace {

// One packet through a context keyed for either direction (EVP_Cipher* follow the context's
// direction): nonce, associated data, then the text encrypted/decrypted in place or, for
// authentication only, added to the associated data.
bool run(EVP_CIPHER_CTX* ctx, const Nonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> text,
         Protection p) {
  int n = 0;
  if (EVP_CipherInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data(), -1) != 1) return false;
  if (!aad.empty() && EVP_CipherUpdate(ctx, nullptr, &n, aad.data(), static_cast<int>(aad.size())) != 1) return false;
  if (text.empty()) return true;
  uint8_t* out = p == Protection::kAuthOnly ? nullptr : text.data();
  return EVP_CipherUpdate(ctx, out, &n, text.data(), static_cast<int>(text.size())) == 1;
}

}  // namespace

#if SG_HAVE_IPSEC_MB
namespace {

// GCM through ipsec-mb in one call. Authentication only: header and text are one span of
// associated data (they are contiguous in every caller; otherwise EVP does it).
bool mb_gcm(bool enc, gcm_key_data* k, const Nonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> text,
            Protection p, uint8_t* tag) {
  gcm_context_data ctx;
  const uint8_t* a = aad.data();
  uint64_t alen = aad.size(), tlen = text.size();
  if (p == Protection::kAuthOnly) {
    if (!text.empty() && aad.data() + aad.size() != text.data()) return false;
    alen += tlen;
    tlen = 0;
    if (!a) a = text.data();
  }
  uint8_t* t = text.data();
  if (enc) IMB_AES128_GCM_ENC(mb(), k, &ctx, t, t, tlen, nonce.data(), a, alen, tag, kTagLen);
  else IMB_AES128_GCM_DEC(mb(), k, &ctx, t, t, tlen, nonce.data(), a, alen, tag, kTagLen);
  return true;
}

bool usable(std::span<const uint8_t> aad, std::span<uint8_t> text, Protection p) {
  return p == Protection::kEncrypt || text.empty() || aad.data() + aad.size() == text.data();
}

}  // namespace
#endif

bool Aead::seal(const Nonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> text, Protection p,
                std::span<uint8_t, kTagLen> tag) {
#if SG_HAVE_IPSEC_MB
  if (gcm_ && usable(aad, text, p)) return mb_gcm(true, gcm_, nonce, aad, text, p, tag.data());
#endif
  if (!ok() || !fits(aad.size()) || !fits(text.size()) || !run(enc_, nonce, aad, text, p)) return false;
  uint8_t end[16];
  int n = 0;
  if (EVP_CipherFinal_ex(enc_, end, &n) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(enc_, EVP_CTRL_AEAD_GET_TAG, kTagLen, tag.data()) == 1;
}

bool Aead::open(const Nonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> text, Protection p,
                std::span<const uint8_t, kTagLen> tag) {
#if SG_HAVE_IPSEC_MB
  if (gcm_ && usable(aad, text, p)) {
    uint8_t want[kTagLen];
    return mb_gcm(false, gcm_, nonce, aad, text, p, want) && CRYPTO_memcmp(want, tag.data(), kTagLen) == 0;
  }
#endif
  if (!ok() || !fits(aad.size()) || !fits(text.size()) || !run(dec_, nonce, aad, text, p)) return false;
  // The expected tag may be set any time before Final; the const_cast is for OpenSSL's
  // non-const ctrl signature (it copies the bytes).
  if (EVP_CIPHER_CTX_ctrl(dec_, EVP_CTRL_AEAD_SET_TAG, kTagLen, const_cast<uint8_t*>(tag.data())) != 1) return false;
  uint8_t end[16];
  int n = 0;
  return EVP_CipherFinal_ex(dec_, end, &n) == 1;
}

}  // namespace sg::crypto
