// A Prometheus text endpoint (exposition format 0.0.4) for fleet monitoring: GET /metrics on
// telemetry.prometheus_port answers with the gateway's counters -- packets, drops by reason,
// per-link measured rate, RTT and loss, rounds, Early Closes, bubbles, policy switches, probe
// and measurement-row counters. Served from the control thread: a non-blocking listening
// socket polled every control tick (no thread of its own, nothing on the packet path); a
// request is read and answered within the tick, bounded in size, count and time
// (control/http_text_server.h).
#pragma once

#include <cstdint>
#include <string>

#include "control/http_text_server.h"

namespace sg::ctl {

class Gateway;

class MetricsServer {
 public:
  // Listens on 0.0.0.0:port (the kernel's stack: the management network, not a DPDK port).
  // False with a message.
  bool open(uint16_t port, std::string& error);
  // Accepts and answers what is waiting (a few requests, within 100 ms whatever clients do).
  void poll(const Gateway& gw);
  uint64_t served() const { return server_.served(); }

 private:
  HttpTextServer server_;
};

// The exposition text (also for tests).
std::string metrics_text(const Gateway& gw);

}  // namespace sg::ctl
