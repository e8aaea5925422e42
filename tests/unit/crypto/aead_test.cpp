// The AEAD wrapper: a published test vector, round trips for both suites and protections,
// and every tampering refused.
#include "crypto/aead.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <random>
#include <string>
#include <vector>

namespace sg::crypto {
namespace {

std::vector<uint8_t> unhex(const std::string& h) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < h.size(); i += 2) v.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return v;
}

TEST(Aead, MatchesTheGcmSpecificationTestCase2) {
  // McGrew & Viega, "The Galois/Counter Mode of Operation", test case 2: zero key, zero IV,
  // one zero block.
  const std::vector<uint8_t> key(16, 0);
  Aead a(Suite::kAes128Gcm, key);
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> text(16, 0);
  std::array<uint8_t, kTagLen> tag{};
  ASSERT_TRUE(a.seal(Nonce{}, {}, text, Protection::kEncrypt, tag));
  EXPECT_EQ(text, unhex("0388dace60b6a392f328c2b971b2fe78"));
  EXPECT_EQ(std::vector<uint8_t>(tag.begin(), tag.end()), unhex("ab6e47d42cec13bdf53a67b21257bddf"));
}

// OpenSSL's EVP AES-128-GCM on the same input, as a peer built without ipsec-mb computes it.
void evp_gcm(const std::vector<uint8_t>& key, const Nonce& n, const std::vector<uint8_t>& aad,
             std::vector<uint8_t>& text, std::array<uint8_t, kTagLen>& tag) {
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  int len = 0;
  ASSERT_EQ(EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, key.data(), n.data()), 1);
  if (!aad.empty()) ASSERT_EQ(EVP_EncryptUpdate(c, nullptr, &len, aad.data(), static_cast<int>(aad.size())), 1);
  if (!text.empty()) ASSERT_EQ(EVP_EncryptUpdate(c, text.data(), &len, text.data(), static_cast<int>(text.size())), 1);
  ASSERT_EQ(EVP_EncryptFinal_ex(c, tag.data(), &len), 1);
  ASSERT_EQ(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, kTagLen, tag.data()), 1);
  EVP_CIPHER_CTX_free(c);
}

TEST(Aead, AesGcmGivesOpenSslsBytesWhicheverLibraryRunsIt) {
  std::mt19937 rng(3);
  const std::vector<uint8_t> key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  Aead a(Suite::kAes128Gcm, key);
  ASSERT_TRUE(a.ok());
  std::printf("AES-128-GCM runs on %s\n", a.engine());
  for (size_t len : {0u, 1u, 15u, 16u, 17u, 100u, 1392u, 1400u}) {
    for (Protection p : {Protection::kEncrypt, Protection::kAuthOnly}) {
      std::vector<uint8_t> msg(56 + len);
      for (auto& b : msg) b = static_cast<uint8_t>(rng());
      const Nonce n = make_nonce(rng());
      std::vector<uint8_t> ours = msg;
      std::array<uint8_t, kTagLen> tag{}, want_tag{};
      ASSERT_TRUE(a.seal(n, std::span<const uint8_t>(ours).first(56), std::span<uint8_t>(ours).subspan(56), p, tag));
      std::vector<uint8_t> ref_aad(msg.begin(), msg.begin() + (p == Protection::kAuthOnly ? msg.size() : 56));
      std::vector<uint8_t> ref_text(msg.begin() + static_cast<long>(ref_aad.size()), msg.end());
      evp_gcm(key, n, ref_aad, ref_text, want_tag);
      std::vector<uint8_t> want = ref_aad;
      want.insert(want.end(), ref_text.begin(), ref_text.end());
      EXPECT_EQ(ours, want) << "length " << len;
      EXPECT_EQ(tag, want_tag) << "length " << len;
      ASSERT_TRUE(a.open(n, std::span<const uint8_t>(ours).first(56), std::span<uint8_t>(ours).subspan(56), p, tag));
      EXPECT_EQ(ours, msg);
    }
  }
}

TEST(Aead, RefusesAKeyOfTheWrongLength) {
  EXPECT_FALSE(Aead(Suite::kAes128Gcm, std::vector<uint8_t>(32, 1)).ok());
  EXPECT_FALSE(Aead(Suite::kChaCha20Poly1305, std::vector<uint8_t>(16, 1)).ok());
}

class AeadSuites : public ::testing::TestWithParam<std::tuple<Suite, Protection>> {};

TEST_P(AeadSuites, RoundTripsAndRefusesEveryTampering) {
  const auto [suite, prot] = GetParam();
  std::vector<uint8_t> key(key_len(suite));
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
  Aead a(suite, key);
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> aad(56), plain(1400);
  for (size_t i = 0; i < aad.size(); ++i) aad[i] = static_cast<uint8_t>(i);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 13);
  const Nonce nonce = make_nonce(42);
  std::vector<uint8_t> text = plain;
  std::array<uint8_t, kTagLen> tag{};
  ASSERT_TRUE(a.seal(nonce, aad, text, prot, tag));
  if (prot == Protection::kEncrypt) {
    EXPECT_NE(text, plain);
  } else {
    EXPECT_EQ(text, plain) << "authentication only leaves the payload readable";
  }

  auto opens = [&](std::vector<uint8_t> t, std::vector<uint8_t> ad, std::array<uint8_t, kTagLen> tg, Nonce n) {
    const bool ok = a.open(n, ad, t, prot, tg);
    return ok && t == plain;
  };
  EXPECT_TRUE(opens(text, aad, tag, nonce));
  auto bad_text = text;
  bad_text[700] ^= 1;
  EXPECT_FALSE(opens(bad_text, aad, tag, nonce));
  auto bad_aad = aad;
  bad_aad[3] ^= 0x80;
  EXPECT_FALSE(opens(text, bad_aad, tag, nonce));
  auto bad_tag = tag;
  bad_tag[15] ^= 1;
  EXPECT_FALSE(opens(text, aad, bad_tag, nonce));
  EXPECT_FALSE(opens(text, aad, tag, make_nonce(43)));
  text.pop_back();
  EXPECT_FALSE(opens(text, aad, tag, nonce)) << "truncated";
  // The context is reusable after a failure.
  text = plain;
  ASSERT_TRUE(a.seal(nonce, aad, text, prot, tag));
  EXPECT_TRUE(opens(text, aad, tag, nonce));
}

INSTANTIATE_TEST_SUITE_P(All, AeadSuites,
                         ::testing::Combine(::testing::Values(Suite::kAes128Gcm, Suite::kChaCha20Poly1305),
                                            ::testing::Values(Protection::kEncrypt, Protection::kAuthOnly)));

TEST(Aead, NamesRoundTrip) {
  for (Suite s : {Suite::kAes128Gcm, Suite::kChaCha20Poly1305}) EXPECT_EQ(parse_suite(suite_name(s)), s);
  EXPECT_FALSE(parse_suite("aes-256-cbc"));
}

TEST(Aead, NonceIsTheSequenceNumberBigEndianAfterFourZeroBytes) {
  const Nonce n = make_nonce(0x0102030405060708ull);
  const Nonce want{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(n, want);
}

}  // namespace
}  // namespace sg::crypto
