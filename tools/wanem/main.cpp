// wanem: the testbed's WAN. Runs in the WAN namespace on one interface per site and forwards
// every frame between them through that site pair's delay, jitter, loss, burst loss,
// reordering, duplication, rate limit with a drop-tail queue and blackhole windows, as the
// profile (YAML, profile.h) says and its schedule changes them.
//   wanem --profile FILE --port SITE=IFNAME [--port ...] [--stats FILE] [--duration S] [--seed N]
//         [--rt-priority P]
//   wanem --check FILE      validate a profile and exit (0 good, 1 with one line per problem)
// SIGINT/SIGTERM stop it; SIGUSR1 writes the counters to --stats at once (they are also
// written every second and at exit).
// Scheduling: by default the emulator asks for SCHED_FIFO priority 10 (--rt-priority 0: the
// normal scheduler). A WAN's delays must not depend on what else the host runs: on the
// 2-core testbed, beside one busy process, two runs under the normal scheduler missed the
// 1 ms RTT bound (1.06, 1.40 ms), though most such runs stay at 0.3-0.45 ms as real-time
// ones do (perf/README, wanem). It sleeps when idle, and the kernel's real-time throttling
// keeps a flood from starving the host.
#include <sched.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "forwarder.h"
#include "profile.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_dump{false};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: wanem --profile FILE --port SITE=IFNAME [--port ...] [--stats FILE] [--duration S] [--seed N]\n"
               "             [--rt-priority P (1-99 SCHED_FIFO, 0 normal; default 10)]\n"
               "       wanem --check FILE\n");
}

bool report(const sg::wanem::ProfileResult& r, const std::string& file) {
  for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
  if (r.errors.empty()) std::printf("%s: ok (%d sites, %zu phases)\n", file.c_str(), r.profile.sites, r.profile.phases.size());
  return r.errors.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::string profile_path, stats_path;
  std::vector<sg::wanem::PortSpec> ports;
  double duration = 0;
  uint64_t seed = 1;
  int rt_priority = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--check" && v) {
      return report(sg::wanem::load_profile(argv[i + 1]), argv[i + 1]) ? 0 : 1;
    } else if (a == "--profile" && v) {
      profile_path = argv[++i];
    } else if (a == "--stats" && v) {
      stats_path = argv[++i];
    } else if (a == "--duration" && v) {
      duration = std::atof(argv[++i]);
    } else if (a == "--seed" && v) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--rt-priority" && v) {
      char* end = nullptr;
      const long p = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || p < 0 || p > 99) {
        std::fprintf(stderr, "wanem: --rt-priority %s: expected 0 (normal scheduling) to 99\n", argv[i]);
        return 2;
      }
      rt_priority = static_cast<int>(p);
    } else if (a == "--port" && v) {
      const std::string s = argv[++i];
      const auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "wanem: --port %s: expected SITE=IFNAME\n", s.c_str());
        return 2;
      }
      ports.push_back({std::atoi(s.substr(0, eq).c_str()), s.substr(eq + 1)});
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "wanem: unexpected argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (profile_path.empty() || ports.size() < 2) {
    usage(stderr);
    return 2;
  }
  const sg::wanem::ProfileResult loaded = sg::wanem::load_profile(profile_path);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    return 2;
  }
  sg::wanem::Forwarder fw(loaded.profile, ports, seed);
  std::string err;
  if (!fw.open(err)) {
    std::fprintf(stderr, "wanem: %s\n", err.c_str());
    return 1;
  }
  if (rt_priority > 0) {
    const sched_param sp{.sched_priority = rt_priority};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
      std::fprintf(stderr, "wanem: SCHED_FIFO %d refused (%s): normal scheduling, delays may run late under load\n",
                   rt_priority, std::strerror(errno));
  }
  std::signal(SIGINT, [](int) { g_stop.store(true); });
  std::signal(SIGTERM, [](int) { g_stop.store(true); });
  std::signal(SIGUSR1, [](int) { g_dump.store(true); });
  std::printf("wanem: %zu ports, profile %s\n", ports.size(), profile_path.c_str());
  std::fflush(stdout);
  fw.run(g_stop, static_cast<sg::Nanos>(duration * 1e9), stats_path, &g_dump);
  return 0;
}
