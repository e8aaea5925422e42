// stormgate: the gateway process.
//   stormgate [EAL args] -- --config FILE [--duration SECONDS]
//   stormgate --check-config FILE [FILE...]
//   stormgate --keygen FILE
//   stormgate --job-token ADMISSION_SECRET JOB FILE
#include <rte_pdump.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config/load.h"
#include "crypto/keys.h"
#include "control/gateway.h"
#include "dataplane/eal.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};

void on_signal(int) { g_stop.store(true); }
void on_hangup(int) { g_reload.store(true); }

void usage(FILE* out) {
  std::fprintf(out,
               "usage: stormgate [EAL args] -- --config FILE [--duration SECONDS]\n"
               "       stormgate --check-config FILE [FILE...]\n"
               "       stormgate --max-chunk-bytes MTU   the largest chunk_bytes a port of this MTU carries\n"
               "       stormgate --keygen FILE           write a new pre-shared secret (mode 0600) for security.key_file\n"
               "       stormgate --job-token SECRET JOB FILE  write job JOB's worker token, derived from admission.token_file\n"
               "  --config FILE      gateway config (YAML; keys in config/README.md)\n"
               "  --duration S       stop by itself after S seconds (default: run until SIGINT/SIGTERM)\n"
               "  SIGHUP             reload the config file: applied if every changed key can change live\n"
               "                     (job.rounds, job.round_timeout_ms, topology.recompute_change,\n"
               "                     topology.min_interval_ms, telemetry.stats_interval_ms), else refused\n"
               "                     with the reason while the running config goes on\n"
               "  --check-config     validate config files and exit: 0 if all are valid, 1 otherwise,\n"
               "                     with one line per problem: FILE:LINE:COL: KEY: expected X, found Y\n");
}

int check_configs(int argc, char** argv, int first) {
  if (first >= argc) {
    usage(stderr);
    return 2;
  }
  int bad = 0;
  for (int i = first; i < argc; ++i) {
    auto r = sg::config::load_config_file(argv[i]);
    for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    if (r.config) {
      std::printf("%s: ok (site %u '%s', %zu ports, %zu peers)\n", argv[i], r.config->site.id,
                  r.config->site.name.c_str(), r.config->ports.size(), r.config->peers.size());
      // The secret files are read only at start; a config may well be checked before they are
      // deployed, so what is wrong with them is a warning here, not an invalid config.
      const sg::config::GatewayConfig& c = *r.config;
      std::vector<std::pair<std::string, std::string>> secrets;  // key, path
      if (c.security.mode == sg::config::SecurityMode::kAead && !c.peers.empty())
        secrets.emplace_back("security.key_file", c.security.key_file);
      for (size_t j = 0; j < c.jobs.size(); ++j)
        if (!c.jobs[j].token_file.empty())
          secrets.emplace_back(c.jobs_listed ? "jobs[" + std::to_string(j) + "].token_file" : "job.token_file",
                               c.jobs[j].token_file);
      if (!c.admission.token_file.empty()) secrets.emplace_back("admission.token_file", c.admission.token_file);
      for (const auto& [key, path] : secrets) {
        const sg::crypto::SecretFile f = sg::crypto::load_secret(path);
        if (f.secret.empty())
          std::fprintf(stderr, "%s: warning: %s: %s (the gateway will not start without it)\n", argv[i], key.c_str(),
                       f.error.c_str());
      }
    } else {
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

bool parse_number(const char* s, double& out) {
  char* end = nullptr;
  out = std::strtod(s, &end);
  return end && *end == '\0' && end != s && out >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Config checking needs no EAL, no devices and no privileges.
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check-config")) return check_configs(argc, argv, i + 1);
    if (!std::strcmp(argv[i], "--keygen")) {
      if (i + 1 >= argc) {
        usage(stderr);
        return 2;
      }
      const std::string err = sg::crypto::write_new_secret(argv[i + 1]);
      if (!err.empty()) {
        std::fprintf(stderr, "stormgate: --keygen: %s\n", err.c_str());
        return 1;
      }
      std::printf("%s: new secret written (copy it to every gateway of the deployment over a secure channel)\n",
                  argv[i + 1]);
      return 0;
    }
    if (!std::strcmp(argv[i], "--job-token")) {
      // --job-token ADMISSION_SECRET JOB FILE: the worker token of an announced job.
      char* end = nullptr;
      const unsigned long long job = i + 2 < argc ? std::strtoull(argv[i + 2], &end, 10) : 0;
      if (i + 3 >= argc) {
        std::fprintf(stderr, "stormgate: --job-token needs ADMISSION_SECRET JOB FILE\n");
        return 2;
      }
      if (!end || *end || job == 0 || job > 0xffffffffULL) {
        std::fprintf(stderr, "stormgate: --job-token: JOB must be a job id 1..4294967295, got '%s'\n", argv[i + 2]);
        return 2;
      }
      const sg::crypto::SecretFile f = sg::crypto::load_secret(argv[i + 1]);
      if (f.secret.empty()) {
        std::fprintf(stderr, "stormgate: --job-token: %s\n", f.error.c_str());
        return 1;
      }
      const auto token = sg::crypto::derive_job_token(f.secret, static_cast<uint32_t>(job));
      const std::string err =
          token.empty() ? "OpenSSL could not derive the token"
                        : sg::crypto::write_secret(argv[i + 3], token,
                                                   "stormgate worker token of job " + std::to_string(job) +
                                                       " (STORMGATE_TOKEN_FILE for its workers)");
      if (!err.empty()) {
        std::fprintf(stderr, "stormgate: --job-token: %s\n", err.c_str());
        return 1;
      }
      std::printf("%s: the worker token of job %llu (give it to that job's workers only)\n", argv[i + 3], job);
      return 0;
    }
    if (!std::strcmp(argv[i], "--max-chunk-bytes")) {
      // For scripts that size chunks for a link (scripts/testbed): derived from the wire structs.
      char* end = nullptr;
      const long mtu = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : 0;
      if (!end || *end || mtu < 576 || mtu > 9600) {
        std::fprintf(stderr, "stormgate: --max-chunk-bytes MTU: MTU must be an integer in [576, 9600]\n");
        return 2;
      }
      std::printf("%u\n", sg::config::max_chunk_bytes(static_cast<uint32_t>(mtu)));
      return 0;
    }
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  }

  std::vector<char*> args;
  if (!sg::dp::eal_init(argc, argv, args)) return 1;

  std::string config_path;
  double duration = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--config" && has_value) {
      config_path = args[++i];
    } else if (a == "--duration" && has_value && parse_number(args[i + 1], duration)) {
      ++i;
    } else {
      std::fprintf(stderr, "stormgate: unexpected argument '%s'\n", a.c_str());
      usage(stderr);
      sg::dp::eal_cleanup();
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "stormgate: --config FILE is required (after the EAL arguments and '--')\n");
    usage(stderr);
    sg::dp::eal_cleanup();
    return 2;
  }
  auto loaded = sg::config::load_config_file(config_path);
  if (!loaded.config) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    sg::dp::eal_cleanup();
    return 2;
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGHUP, on_hangup);
  if (loaded.config->telemetry.pdump) rte_pdump_init();  // dpdk-dumpcap attaches as a secondary process

  int rc = 0;
  {
    sg::ctl::Gateway gw(std::move(*loaded.config));
    gw.set_config_text(std::move(loaded.text));
    if (!gw.start()) {
      rc = 1;
    } else {
      std::printf("[%s] running: %u engine(s), %zu port(s), %zu peer(s)%s\n", gw.config().site.name.c_str(),
                  gw.workers(), gw.ports().size(), gw.config().peers.size(),
                  duration > 0 ? "" : "; Ctrl-C stops");
      std::fflush(stdout);
      gw.run_control(g_stop, duration, &g_reload);
    }
    if (!gw.stop()) rc = 3;  // an mbuf leak is a failure
  }
  if (loaded.config && loaded.config->telemetry.pdump) rte_pdump_uninit();
  sg::dp::eal_cleanup();
  return rc;
}
