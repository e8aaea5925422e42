// seal: what sealing costs the dataplane. Two gateways in one process run the real job over a
// bare net_ring lane while one thread polls both (gateway_pair.h), so the dataplane itself is
// the bottleneck: every DATA is sealed by one gateway's LtpTx and opened by the other's
// GatewayHandler, every ACK the same way back. Chunks of 1392 B make the sealed DATA packets
// exactly 1500 B at the IP layer. Modes alternate (plain, AES-128-GCM, AES-GMAC-style
// auth-only, ChaCha20-Poly1305, then again) and medians are reported; the last line gives the
// ratios to plain as key=value pairs for perf/run/crypto.
//   bench_seal [EAL args] -- [--quick] [--model-mb MB] [--rounds N] [--repeats N]
#include <rte_eal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dataplane/ports.h"
#include "gateway_pair.h"

namespace {

using namespace sg;

struct Mode {
  const char* name;
  bool sealed;
  crypto::Suite suite;
  crypto::Protection protection;
};
constexpr Mode kModes[] = {
    {"plain", false, crypto::Suite::kAes128Gcm, crypto::Protection::kEncrypt},
    {"aes128gcm", true, crypto::Suite::kAes128Gcm, crypto::Protection::kEncrypt},
    {"aes128gmac", true, crypto::Suite::kAes128Gcm, crypto::Protection::kAuthOnly},
    {"chacha20poly1305", true, crypto::Suite::kChaCha20Poly1305, crypto::Protection::kEncrypt},
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const int used = rte_eal_init(argc, argv);
  if (used < 0) return 1;
  bool quick = false;
  for (int i = used + 1; i < argc; ++i) quick |= std::strcmp(argv[i], "--quick") == 0;
  uint64_t model = quick ? (4u << 20) : (16u << 20);
  uint32_t rounds = quick ? 3 : 4;
  int repeats = quick ? 2 : 5;
  for (int i = used + 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--model-mb") == 0) model = static_cast<uint64_t>(std::atof(argv[i + 1]) * (1 << 20)) & ~uint64_t{3};
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = static_cast<uint32_t>(std::max(2, std::atoi(argv[i + 1])));
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
  }
  rte_mempool* pool = dp::create_pool("seal_pool", 32767, 256, RTE_MBUF_DEFAULT_BUF_SIZE);
  if (!pool) return 1;
  std::map<std::string, std::vector<double>> pps, gbps;
  bool all_ok = true;
  for (int rep = 0; rep < repeats; ++rep) {
    for (const Mode& m : kModes) {
      dp::PairOptions o;
      o.chunk_bytes = 1392;
      if (m.sealed) {
        crypto::PeerSecurity sec;
        sec.secret.assign(32, 0x42);
        sec.suite = m.suite;
        sec.protection = m.protection;
        sec.lanes = 2;
        o.security = sec;
      }
      const dp::PairResult r = dp::run_gateway_pair(pool, o, model, rounds);
      // Frames both gateways received per second of the whole run (DATA and ACKs), one core.
      const bool ok = r.ok && r.pool_full && r.inexact == 0 && r.auth_refused == 0 && (r.opened > 0) == m.sealed;
      const double secs_all = r.secs * rounds / (rounds - 1);  // the warm-up round's share, approximately
      const double p = secs_all > 0 ? static_cast<double>(r.packets) / secs_all : 0;
      std::printf("run %d %-17s %.3f Gbit/s goodput  %.0f frames/s  opened %llu  refused %llu  retx %llu  %s\n", rep + 1,
                  m.name, r.gbps, p, static_cast<unsigned long long>(r.opened),
                  static_cast<unsigned long long>(r.auth_refused), static_cast<unsigned long long>(r.retransmits),
                  ok ? "ok" : "NOT OK (timeout, inexact, refused or pool not full)");
      std::fflush(stdout);
      all_ok &= ok;
      pps[m.name].push_back(p);
      gbps[m.name].push_back(r.gbps);
    }
  }
  const double base = median(gbps["plain"]);
  std::printf("\n%-18s %14s %14s %10s\n", "mode", "goodput Gb/s", "frames/s", "vs plain");
  for (const Mode& m : kModes)
    std::printf("%-18s %14.3f %14.0f %10.3f\n", m.name, median(gbps[m.name]), median(pps[m.name]),
                base > 0 ? median(gbps[m.name]) / base : 0);
  // The ratio of goodputs: the same rounds move the same packets in every mode (retransmissions
  // aside), so it is the ratio of the dataplane's packet rates.
  auto ratio = [&](const char* k) { return base > 0 ? median(gbps[k]) / base : 0; };
  std::printf("\nratios: auth_vs_plain_1500=%.3f auth_only_vs_plain_1500=%.3f chacha_vs_plain_1500=%.3f "
              "plain_goodput_gbps=%.3f sealed_goodput_gbps=%.3f all_ok=%s\n",
              ratio("aes128gcm"), ratio("aes128gmac"), ratio("chacha20poly1305"), base, median(gbps["aes128gcm"]),
              all_ok ? "true" : "false");
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return all_ok ? 0 : 1;
}
