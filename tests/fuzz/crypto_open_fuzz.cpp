// Fuzz the receiving side of lib/crypto: any bytes (with any header length) through
// RxSession::open. Invariants (trap on violation): no read outside the input (ASan), nothing
// opens unless it was sealed with the secret, and a message sealed here always opens once.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "crypto/session.h"

using namespace sg::crypto;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::vector<uint8_t> secret(32, 0x42);
  SessionConfig c;
  c.suite = data[0] & 1 ? Suite::kChaCha20Poly1305 : Suite::kAes128Gcm;
  c.protection = data[0] & 2 ? Protection::kAuthOnly : Protection::kEncrypt;
  c.replay_window = 128;
  c.trial_interval_ms = 0;  // every unknown epoch is tried: the forgery's trial must not hide the real one
  const size_t aad = (data[0] >> 2) % 64;
  RxSession rx(secret, c);
  std::vector<uint8_t> msg(data + 1, data + size);
  size_t len = 0;
  // Random bytes: a forgery unless the fuzzer found a tag, which it cannot.
  const OpenVerdict v = rx.open(msg, aad, &len);
  check(v != OpenVerdict::kOk);
  // The same bytes sealed for real open exactly once, then count as replayed.
  if (msg.size() >= aad) {
    TxSession tx(secret, c);
    std::vector<uint8_t> sealed(msg.size() + kTrailerLen);
    std::copy(msg.begin(), msg.end(), sealed.begin());
    const size_t n = tx.seal(sealed, msg.size(), aad);
    check(n == sealed.size());
    auto copy = sealed;
    check(rx.open(sealed, aad, &len) == OpenVerdict::kOk && len == msg.size());
    check(std::equal(msg.begin(), msg.end(), sealed.begin()));
    check(rx.open(copy, aad, &len) == OpenVerdict::kDuplicate);
  }
  return 0;
}
