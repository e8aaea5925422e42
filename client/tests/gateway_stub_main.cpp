// sg_gateway_stub: a one-site gateway on a kernel UDP socket (LocalGroup + SiteSync), for
// tests and single-host demos without DPDK. Prints "listening on HOST:PORT" once ready.
//   sg_gateway_stub --workers N --model-bytes B [--port P] [--bind HOST] [--site-id S]
//                   [--job J] [--chunk-bytes C] [--push-timeout-ms T] [--rounds R] [--duration S]
//                   [--announced 1] [--job-dtype D] [--job-weight W] [--pending-joins N]
//                   [--ignore-joins 1] [--token-file PATH]
// --announced 1: no job until a worker's JOB kJoin (StubOptions::announced); with it
// --model-bytes may be 0 (the first join defines the job).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "stub_gateway.h"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "sg_gateway_stub: %s\nusage: sg_gateway_stub --workers N --model-bytes B [--port P] "
               "[--bind HOST] [--site-id S] [--job J] [--chunk-bytes C] [--push-timeout-ms T] [--rounds R] "
               "[--duration S] [--announced 1] [--job-dtype D] [--job-weight W] [--pending-joins N] [--ignore-joins 1] "
               "[--token-file PATH]\n", why);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  sg::client::StubOptions o;
  uint64_t rounds = 0;
  double duration = 0;
  uint64_t model_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    const bool num = end && *end == '\0';
    if (a == "--bind") o.bind_host = v;
    else if (a == "--token-file") o.token_file = v;
    else if (a == "--duration") duration = std::atof(v);
    else if (!num) usage(("not a number: " + a + " " + v).c_str());
    else if (a == "--port") o.port = static_cast<uint16_t>(n);
    else if (a == "--workers") o.workers = static_cast<uint32_t>(n);
    else if (a == "--model-bytes") model_bytes = n;
    else if (a == "--site-id") o.site_id = static_cast<uint16_t>(n);
    else if (a == "--job") o.job = static_cast<uint32_t>(n);
    else if (a == "--chunk-bytes") o.chunk_bytes = static_cast<uint32_t>(n);
    else if (a == "--push-timeout-ms") o.push_timeout = static_cast<sg::Nanos>(n) * sg::kMilli;
    else if (a == "--rounds") rounds = n;
    else if (a == "--announced") o.announced = n != 0;
    else if (a == "--job-dtype") o.job_dtype = static_cast<uint8_t>(n);
    else if (a == "--job-weight") o.job_weight = static_cast<uint8_t>(n);
    else if (a == "--pending-joins") o.pending_joins = static_cast<uint32_t>(n);
    else if (a == "--ignore-joins") o.ignore_joins = n != 0;
    else usage(("unknown option " + a).c_str());
  }
  if ((model_bytes == 0 && !o.announced) || model_bytes % 4) usage("--model-bytes must be a positive multiple of 4");
  o.model_floats = model_bytes / 4;
  sg::client::StubGateway gw(o);
  std::string err;
  if (!gw.open(err)) {
    std::fprintf(stderr, "sg_gateway_stub: %s\n", err.c_str());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("listening on %s:%u\n", o.bind_host.c_str(), gw.port());
  std::fflush(stdout);
  std::thread timer;
  if (duration > 0) {
    timer = std::thread([duration] {
      const auto end = sg::client::monotonic_now() + static_cast<sg::Nanos>(duration * sg::kSecond);
      while (!g_stop.load() && sg::client::monotonic_now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      g_stop.store(true);
    });
  }
  gw.run(g_stop, rounds);
  g_stop.store(true);
  if (timer.joinable()) timer.join();
  if (gw.has_job()) {
    const auto& st = gw.group().stats();
    std::printf("rounds %llu push_timeouts %llu missing_workers %llu bad_chunks %llu stray %llu\n",
                static_cast<unsigned long long>(gw.rounds_delivered()), static_cast<unsigned long long>(st.push_timeouts),
                static_cast<unsigned long long>(st.missing_workers), static_cast<unsigned long long>(st.bad_chunks),
                static_cast<unsigned long long>(st.stray_packets));
  } else {
    std::printf("rounds 0 (no job was announced)\n");
  }
  std::printf("joins %llu leaves %llu job_refused %llu refused %llu\n", static_cast<unsigned long long>(gw.joins()),
              static_cast<unsigned long long>(gw.leaves()), static_cast<unsigned long long>(gw.job_refused()),
              static_cast<unsigned long long>(gw.refused()));
  // What the workers pushed per codec (each chunk once): tests check half pushes really are half.
  for (uint8_t c = 0; c < sg::kCodecCount; ++c)
    std::printf("pushed %s chunks %llu bytes %llu\n", std::string(sg::codec_name(static_cast<sg::CodecId>(c))).c_str(),
                static_cast<unsigned long long>(gw.pushed()[c].chunks),
                static_cast<unsigned long long>(gw.pushed()[c].payload_bytes));
  std::fflush(stdout);
  return 0;
}
