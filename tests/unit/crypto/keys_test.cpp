// Key files (format and permissions, every refusal named) and key derivation.
#include "crypto/keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace sg::crypto {
namespace {

class KeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-keys-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string write(const std::string& body, mode_t mode = 0600) {
    const std::string p = dir_ + "/k" + std::to_string(n_++);
    std::ofstream(p) << body;
    chmod(p.c_str(), mode);
    return p;
  }
  std::string dir_;
  int n_ = 0;
};

const std::string kHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

TEST_F(KeyFile, ReadsOneHexLineWithComments) {
  const SecretFile f = load_secret(write("# stormgate pre-shared secret\n\n  " + kHex + "  # site pair keys derive from it\n"));
  ASSERT_TRUE(f.error.empty()) << f.error;
  ASSERT_EQ(f.secret.size(), 32u);
  EXPECT_EQ(f.secret[1], 0x11);
  EXPECT_EQ(f.secret[31], 0xff);
}

TEST_F(KeyFile, RefusesEachBadFileByName) {
  auto err = [&](const SecretFile& f) { return f.secret.empty() ? f.error : std::string("accepted"); };
  EXPECT_NE(err(load_secret(write(kHex, 0644))).find("mode 0644 lets group or others"), std::string::npos);
  EXPECT_NE(err(load_secret(write(kHex, 0620))).find("chmod 600"), std::string::npos);
  EXPECT_NE(err(load_secret(dir_ + "/absent")).find("cannot be read"), std::string::npos);
  EXPECT_NE(err(load_secret(dir_)).find("not a regular file"), std::string::npos);
  EXPECT_NE(err(load_secret(write("# nothing\n"))).find("holds no key"), std::string::npos);
  EXPECT_NE(err(load_secret(write(kHex + "0"))).find("odd number"), std::string::npos);
  EXPECT_NE(err(load_secret(write("0011223344"))).find("5 bytes"), std::string::npos);
  EXPECT_NE(err(load_secret(write(kHex.substr(0, 30) + "zz"))).find("not a hex digit at column 31"), std::string::npos);
  EXPECT_NE(err(load_secret(write(kHex + "\n" + kHex + "\n"))).find("a second key"), std::string::npos);
  EXPECT_NE(err(load_secret(write(std::string(5000, 'a')))).find("larger than 4096"), std::string::npos);
  EXPECT_EQ(load_secret(write(kHex, 0400)).error, "") << "read-only for the owner is fine";
}

TEST(DeriveKey, OneKeyPerDirectionEpochAndSuite) {
  const std::vector<uint8_t> s(32, 7);
  const auto k = derive_key(s, Suite::kAes128Gcm, 1, 2, 0);
  ASSERT_EQ(k.size(), 16u);
  EXPECT_EQ(k, derive_key(s, Suite::kAes128Gcm, 1, 2, 0)) << "deterministic: both ends derive it";
  EXPECT_NE(k, derive_key(s, Suite::kAes128Gcm, 2, 1, 0));
  EXPECT_NE(k, derive_key(s, Suite::kAes128Gcm, 1, 2, 1));
  const auto c = derive_key(s, Suite::kChaCha20Poly1305, 1, 2, 0);
  ASSERT_EQ(c.size(), 32u);
  EXPECT_NE(std::vector<uint8_t>(c.begin(), c.begin() + 16), k);
  EXPECT_NE(k, derive_key(std::vector<uint8_t>(32, 8), Suite::kAes128Gcm, 1, 2, 0));
  EXPECT_TRUE(derive_key({}, Suite::kAes128Gcm, 1, 2, 0).empty());
}

// A job's token: the same at every gateway holding the admission secret, one per job and per
// secret, not the secret itself, and written to a file load_secret takes back unchanged.
TEST_F(KeyFile, JobTokensArePerJobPerSecretAndRoundTripThroughAFile) {
  const std::vector<uint8_t> a(32, 1), b(32, 2);
  const auto t7 = derive_job_token(a, 7);
  ASSERT_EQ(t7.size(), 32u);
  EXPECT_EQ(t7, derive_job_token(a, 7));
  EXPECT_NE(t7, derive_job_token(a, 8));
  EXPECT_NE(t7, derive_job_token(a, 7u | (1u << 24)));  // every byte of the id counts
  EXPECT_NE(t7, derive_job_token(b, 7));
  EXPECT_NE(t7, a);
  EXPECT_TRUE(derive_job_token({}, 7).empty());
  const std::string p = dir_ + "/job7.token";
  ASSERT_EQ(write_secret(p, t7, "job 7"), "");
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(load_secret(p).secret, t7);
  EXPECT_NE(write_secret(p, t7, "again"), "") << "an existing file is never overwritten";
}

TEST(Fingerprint, StableShortAndSecretSpecific) {
  const std::vector<uint8_t> a(32, 1), b(32, 2);
  EXPECT_EQ(fingerprint(a).size(), 16u);
  EXPECT_EQ(fingerprint(a), fingerprint(a));
  EXPECT_NE(fingerprint(a), fingerprint(b));
}

}  // namespace
}  // namespace sg::crypto
