// faults: what hostile traffic costs the job. Two sealed gateways in one process run the real
// job over a bare net_ring lane while one thread polls both (gateway_pair.h); in the flood
// runs the first gateway also receives one junk frame for every real frame it gets (random
// bytes, unsealed DATA, DATA with forged tags under the peer's real epoch -- a full tag check
// each --, and frames from unknown sources, in turn: tests/support/junk_flood.h), injected on
// the same thread, so the flood's whole cost lands on the job. Runs alternate (clean, flood,
// clean, ...); slowdown_flood = median flood time / median clean time for the same rounds.
//   bench_faults [EAL args] -- [--quick] [--model-mb MB] [--rounds N] [--repeats N] [--flood R]
#include <rte_eal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dataplane/ports.h"
#include "gateway_pair.h"

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sg;
  const int used = rte_eal_init(argc, argv);
  if (used < 0) return 1;
  bool quick = false;
  for (int i = used + 1; i < argc; ++i) quick |= std::strcmp(argv[i], "--quick") == 0;
  uint64_t model = quick ? (8u << 20) : (32u << 20);
  uint32_t rounds = quick ? 3 : 4;
  int repeats = quick ? 3 : 7;
  double ratio = 1.0;
  for (int i = used + 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--model-mb") == 0) model = static_cast<uint64_t>(std::atof(argv[i + 1]) * (1 << 20)) & ~uint64_t{3};
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = static_cast<uint32_t>(std::max(2, std::atoi(argv[i + 1])));
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--flood") == 0) ratio = std::max(0.0, std::atof(argv[i + 1]));
  }
  rte_mempool* pool = dp::create_pool("faults_pool", 32767, 256, RTE_MBUF_DEFAULT_BUF_SIZE);
  if (!pool) return 1;
  std::vector<double> clean, flooded;
  bool all_ok = true;
  uint64_t wrong = 0, junk = 0, undropped = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int f = 0; f < 2; ++f) {
      dp::PairOptions o;
      o.chunk_bytes = 1392;
      crypto::PeerSecurity sec;
      sec.secret.assign(32, 0x42);
      sec.lanes = 2;
      sec.first_epoch = 4242;
      o.security = sec;
      o.flood_per_frame = f ? ratio : 0;
      const dp::PairResult r = dp::run_gateway_pair(pool, o, model, rounds);
      const bool ok = r.ok && r.pool_full && r.gbps > 0;
      std::printf("run %d %-6s %.3f Gbit/s goodput  %.3f s  junk %llu (frames dropped %llu, forged tags checked %llu)  inexact %llu  %s\n",
                  rep + 1, f ? "flood" : "clean", r.gbps, r.secs, static_cast<unsigned long long>(r.junk),
                  static_cast<unsigned long long>(r.junk_dropped), static_cast<unsigned long long>(r.bad_tags),
                  static_cast<unsigned long long>(r.inexact), ok ? "ok" : "NOT OK (timeout or pool not full)");
      std::fflush(stdout);
      all_ok &= ok;
      wrong += r.inexact;
      if (f) {
        junk += r.junk;
        undropped += r.junk > r.junk_dropped ? r.junk - r.junk_dropped : 0;
      }
      (f ? flooded : clean).push_back(r.secs);
    }
  }
  const double slow = median(clean) > 0 ? median(flooded) / median(clean) : 0;
  std::printf("\nclean %.3f s, flood %.3f s per run (median of %d): slowdown %.3f at %.2f junk frames per real one\n",
              median(clean), median(flooded), repeats, slow, ratio);
  std::printf("{\"bench\": \"faults\", \"slowdown_flood\": %.3f, \"flood_junk_per_frame\": %.2f, \"wrong_results\": %llu, "
              "\"junk_frames\": %llu, \"junk_not_dropped\": %llu, \"all_ok\": %s, \"repeats\": %d}\n",
              slow, ratio, static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(junk),
              static_cast<unsigned long long>(undropped), all_ok ? "true" : "false", repeats);
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return all_ok && wrong == 0 && undropped == 0 ? 0 : 1;
}
