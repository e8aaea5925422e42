// The AEAD wrapper: a published test vector, round trips for both suites and protections,
// and every tampering refused.
#include "crypto/aead.h"

#include <gtest/gtest.h>

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
