#include "crypto/keys.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sg::crypto {
namespace {

constexpr char kSalt[] = "stormgate ltp v1";

bool hkdf(std::span<const uint8_t> secret, std::span<const uint8_t> info, std::span<uint8_t> out) {
  EVP_PKEY_CTX* c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  size_t len = out.size();
  const bool ok = c && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) == 1 &&
                  EVP_PKEY_CTX_set1_hkdf_salt(c, reinterpret_cast<const unsigned char*>(kSalt), sizeof kSalt - 1) == 1 &&
                  EVP_PKEY_CTX_set1_hkdf_key(c, secret.data(), static_cast<int>(secret.size())) == 1 &&
                  EVP_PKEY_CTX_add1_hkdf_info(c, info.data(), static_cast<int>(info.size())) == 1 &&
                  EVP_PKEY_derive(c, out.data(), &len) == 1 && len == out.size();
  EVP_PKEY_CTX_free(c);
  return ok;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

SecretFile load_secret(const std::string& path) {
  SecretFile r;
  auto fail = [&](const std::string& what) {
    r.secret.clear();
    r.error = "key file " + path + ": " + what;
    return r;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail("cannot be read (does it exist?)");
  if (!S_ISREG(st.st_mode)) return fail("is not a regular file");
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return fail(std::string("mode ") + mode + " lets group or others at the secret; chmod 600 it");
  }
  if (st.st_size > 4096) return fail("is larger than 4096 bytes; it should hold one line of hex digits");
  std::ifstream in(path);
  if (!in) return fail("cannot be opened");
  std::string line, hex;
  int lineno = 0, key_line = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::string t;
    for (char c : line) {
      if (c == '#') break;
      if (!std::isspace(static_cast<unsigned char>(c))) t += c;
    }
    if (t.empty()) continue;
    if (key_line) return fail("line " + std::to_string(lineno) + ": a second key (line " + std::to_string(key_line) +
                              " holds one already)");
    key_line = lineno;
    hex = t;
  }
  if (hex.empty()) return fail("holds no key (one line of 32 to 128 hex digits expected)");
  if (hex.size() % 2) return fail("line " + std::to_string(key_line) + ": an odd number of hex digits");
  if (hex.size() < 2 * kMinSecretBytes || hex.size() > 2 * kMaxSecretBytes)
    return fail("line " + std::to_string(key_line) + ": " + std::to_string(hex.size() / 2) +
                " bytes; a secret has 16 to 64 (32 to 128 hex digits)");
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return fail("line " + std::to_string(key_line) + ": not a hex digit at column " +
                                      std::to_string(i + 1 + (hi < 0 ? 0 : 1)));
    r.secret.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return r;
}

std::vector<uint8_t> derive_key(std::span<const uint8_t> secret, Suite suite, uint16_t from, uint16_t to,
                                uint32_t epoch) {
  // info = label | suite | from | to | epoch: a key is bound to its direction, cipher and epoch.
  const char label[] = "pair key";
  uint8_t info[sizeof label - 1 + 1 + 2 + 2 + 4];
  size_t k = 0;
  for (size_t i = 0; i + 1 < sizeof label; ++i) info[k++] = static_cast<uint8_t>(label[i]);
  info[k++] = static_cast<uint8_t>(suite);
  info[k++] = static_cast<uint8_t>(from >> 8);
  info[k++] = static_cast<uint8_t>(from);
  info[k++] = static_cast<uint8_t>(to >> 8);
  info[k++] = static_cast<uint8_t>(to);
  for (int s = 24; s >= 0; s -= 8) info[k++] = static_cast<uint8_t>(epoch >> s);
  std::vector<uint8_t> key(key_len(suite));
  if (secret.empty() || !hkdf(secret, info, key)) key.clear();
  return key;
}

std::string fingerprint(std::span<const uint8_t> secret) {
  const char label[] = "fingerprint";
  uint8_t out[8];
  if (secret.empty() ||
      !hkdf(secret, std::span(reinterpret_cast<const uint8_t*>(label), sizeof label - 1), out))
    return "";
  std::string s;
  char b[3];
  for (uint8_t v : out) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}

std::string write_secret(const std::string& path, std::span<const uint8_t> secret, const std::string& comment) {
  if (secret.size() < 16 || secret.size() > 64) return "a secret must be 16..64 bytes";
  static const char* kHex = "0123456789abcdef";
  std::string text = "# " + comment + "\n";
  for (uint8_t b : secret) {
    text += kHex[b >> 4];
    text += kHex[b & 15];
  }
  text += '\n';
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  const std::string why = ok ? "" : path + ": " + std::strerror(errno);
  ok = ok && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = fd < 0 || ::close(fd) == 0;
  OPENSSL_cleanse(text.data(), text.size());
  if (fd < 0) return why;
  if (!ok || !closed) return path + ": write failed";
  return {};
}

std::string write_new_secret(const std::string& path) {
  std::array<uint8_t, 32> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) return "OpenSSL has no randomness to give";
  std::string err = write_secret(path, key, "stormgate pre-shared secret: the same file on every gateway of the deployment");
  OPENSSL_cleanse(key.data(), key.size());
  return err;
}

std::vector<uint8_t> derive_job_token(std::span<const uint8_t> admission_secret, uint32_t job) {
  uint8_t info[20] = {'j', 'o', 'b', ' ', 't', 'o', 'k', 'e', 'n', ' ', 'v', '1', ' ', ' ', ' ', ' '};
  info[16] = static_cast<uint8_t>(job >> 24);
  info[17] = static_cast<uint8_t>(job >> 16);
  info[18] = static_cast<uint8_t>(job >> 8);
  info[19] = static_cast<uint8_t>(job);
  std::vector<uint8_t> token(32);
  if (admission_secret.empty() || !hkdf(admission_secret, info, token)) token.clear();
  return token;
}

}  // namespace sg::crypto
