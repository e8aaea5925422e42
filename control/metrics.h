// A Prometheus text endpoint (exposition format 0.0.4) for fleet monitoring: GET /metrics on
// telemetry.prometheus_port answers with the gateway's counters -- packets, drops by reason,
// per-link measured rate, RTT and loss, rounds, Early Closes, bubbles, policy switches, probe
// and measurement-row counters. Served from the control thread: a non-blocking listening
// socket polled every control tick (no thread of its own, nothing on the packet path); a
// request is read and answered within the tick, bounded in size and count.
#pragma once

#include <cstdint>
#include <string>

namespace sg::ctl {

class Gateway;

class MetricsServer {
 public:
  MetricsServer() = default;
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on 0.0.0.0:port (the kernel's stack: the management network, not a DPDK port).
  // False with a message.
  bool open(uint16_t port, std::string& error);
  // Accepts and answers what is waiting (at most a few requests per call).
  void poll(const Gateway& gw);
  uint64_t served() const { return served_; }

 private:
  int fd_ = -1;
  uint64_t served_ = 0;
};

// The exposition text (also for tests).
std::string metrics_text(const Gateway& gw);

}  // namespace sg::ctl
