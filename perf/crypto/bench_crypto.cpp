// Component figures (keys end in _component: lib/crypto alone, not yet the gateway's path).
// Per-core throughput of lib/crypto's sessions on LTP DATA-sized messages (56-byte header as
// associated data, 1400-byte payload, 24-byte trailer): seal, and open including the replay
// check, for each suite and protection. perf/run/crypto passes `openssl speed`'s figure for
// the same cipher and size, measured just before on the same machine, as the reference.
//
//   bench_crypto [--quick] [--openssl-aes GBPS] [--openssl-chacha GBPS] [--dataplane "K=V ..."]
// --dataplane: the product-path figures perf/dataplane/bench_seal measured (perf/run/crypto
// runs it first), carried into this JSON line as they are.
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "crypto/aead.h"
#include "crypto/session.h"

using namespace sg;
using namespace sg::crypto;

namespace {

constexpr size_t kHead = 56, kPayload = 1400, kMsg = kHead + kPayload;
constexpr int kBatch = 256;  // distinct buffers, so the working set is a NIC ring's worth

struct Rate {
  double seal_gbps = 0, open_gbps = 0;
};

Rate measure(Suite suite, Protection prot, double seconds, int reps) {
  SessionConfig c;
  c.suite = suite;
  c.protection = prot;
  c.from = 1;
  c.to = 2;
  c.rekey_after = kAesGcmPacketLimit;  // an epoch switch now and then, as deployed
  const std::vector<uint8_t> secret(32, 0x5a);
  std::vector<double> seal, open;
  for (int r = 0; r < reps; ++r) {
    TxSession tx(secret, c);
    RxSession rx(secret, c);
    std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(kMsg + kTrailerLen));
    for (auto& b : bufs)
      for (size_t i = 0; i < kMsg; ++i) b[i] = static_cast<uint8_t>(i * 7);
    // Seal rounds of kBatch, then open exactly what was sealed (every open verifies).
    double t_seal = 0, t_open = 0;
    uint64_t packets = 0;
    const double t_end = bench::now_seconds() + seconds;
    while (bench::now_seconds() < t_end) {
      double t0 = bench::now_seconds();
      for (auto& b : bufs)
        if (tx.seal(b, kMsg, kHead) == 0) std::abort();
      double t1 = bench::now_seconds();
      size_t len = 0;
      for (auto& b : bufs)
        if (rx.open(b, kHead, &len) != OpenVerdict::kOk) std::abort();
      double t2 = bench::now_seconds();
      t_seal += t1 - t0;
      t_open += t2 - t1;
      packets += kBatch;
    }
    const double bits = static_cast<double>(packets) * kMsg * 8;
    seal.push_back(bits / t_seal / 1e9);
    open.push_back(bits / t_open / 1e9);
  }
  return {bench::median(seal), bench::median(open)};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  double ossl_aes = 0, ossl_chacha = 0;
  std::string dataplane;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--openssl-aes" && i + 1 < argc) ossl_aes = std::atof(argv[++i]);
    else if (a == "--openssl-chacha" && i + 1 < argc) ossl_chacha = std::atof(argv[++i]);
    else if (a == "--dataplane" && i + 1 < argc) dataplane = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_crypto [--quick] [--openssl-aes GBPS] [--openssl-chacha GBPS] [--dataplane \"K=V ...\"]\n");
      return 2;
    }
  }
  const double secs = quick ? 0.05 : 0.3;
  const int reps = quick ? 3 : 7;
  std::printf("lib/crypto sessions on %zu-byte LTP messages (%zu-byte header authenticated, trailer %zu B), one core,\n"
              "median of %d; Gbit/s of message bytes\n\n", kMsg, kHead, kTrailerLen, reps);
  bench::Table t({"suite", "protection", "seal Gb/s", "open Gb/s", "Mpps (seal)", "openssl speed Gb/s", "seal / openssl"});
  bench::JsonLine line("crypto");
  struct Case {
    Suite s;
    Protection p;
    const char* key;
  };
  const Case cases[] = {{Suite::kAes128Gcm, Protection::kEncrypt, "aes128gcm"},
                        {Suite::kAes128Gcm, Protection::kAuthOnly, "aes128gmac"},
                        {Suite::kChaCha20Poly1305, Protection::kEncrypt, "chacha20poly1305"},
                        {Suite::kChaCha20Poly1305, Protection::kAuthOnly, "poly1305_only"}};
  double enc[2] = {0, 0}, auth[2] = {0, 0};
  for (const Case& c : cases) {
    const Rate r = measure(c.s, c.p, secs, reps);
    const double ref = c.s == Suite::kAes128Gcm ? ossl_aes : ossl_chacha;
    const bool is_enc = c.p == Protection::kEncrypt;
    const int si = c.s == Suite::kAes128Gcm ? 0 : 1;
    (is_enc ? enc : auth)[si] = r.seal_gbps;
    t.row({suite_name(c.s), is_enc ? "encrypt" : "auth only", bench::fmt(r.seal_gbps, "%.2f"),
           bench::fmt(r.open_gbps, "%.2f"), bench::fmt(r.seal_gbps * 1e3 / (kMsg * 8), "%.3f"),
           is_enc && ref > 0 ? bench::fmt(ref, "%.2f") : "-",
           is_enc && ref > 0 ? bench::fmt(r.seal_gbps / ref, "%.2f") : "-"});
    line.num(std::string(c.key) + "_seal_gbps_component", r.seal_gbps);
    line.num(std::string(c.key) + "_open_gbps_component", r.open_gbps);
    if (is_enc && ref > 0) line.num(std::string(c.key) + "_vs_openssl_speed_component", r.seal_gbps / ref);
  }
  t.print();
  line.num("auth_only_vs_encrypt_aes_component", auth[0] / enc[0]);
  line.num("auth_only_vs_encrypt_chacha_component", auth[1] / enc[1]);
  line.num("chacha_vs_aes_encrypt_component", enc[1] / enc[0]);
  std::printf("\nauthentication only vs encryption: %.2fx (AES-GCM), %.2fx (ChaCha20-Poly1305); ChaCha20 vs AES-GCM %.2fx\n",
              auth[0] / enc[0], auth[1] / enc[1], enc[1] / enc[0]);
  std::printf("AES-128-GCM runs on %s here\n", Aead(Suite::kAes128Gcm, std::vector<uint8_t>(16, 1)).engine());
  // The gateway's own figures: bench_seal's ratios (product path, both ends in one run).
  std::istringstream kv(dataplane);
  std::string item;
  while (kv >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (v == "true" || v == "false") line.boolean(k, v == "true");
    else line.num(k, std::atof(v.c_str()));
  }
  line.str("aes_engine", Aead(Suite::kAes128Gcm, std::vector<uint8_t>(16, 1)).engine());
  line.print();
  return 0;
}
