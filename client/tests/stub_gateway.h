// A test-only gateway without DPDK: one site's LocalGroup + SiteSync (a one-site plan) on a
// kernel UDP socket. Workers on 127.0.0.1 get real results through the real protocol; the
// system tests, the Python tests and the single-host demo use it in place of the dataplane.
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/udp_batch.h"
#include "sync/local_group.h"
#include "sync/site_sync.h"

namespace sg::client {

struct StubOptions {
  std::string bind_host = "127.0.0.1";
  uint16_t port = 0;  // 0: any (see port())
  uint16_t site_id = 1;
  uint32_t job = 1;
  uint32_t workers = 1;
  uint64_t model_floats = 0;
  uint32_t chunk_bytes = 1344;
  Nanos push_timeout = 10 * kSecond;
};

// What the workers pushed in one codec: each (worker, round, chunk) counted once, so these are
// the pushes' own sizes whatever was lost or retransmitted on the way.
struct PushedCount {
  uint64_t chunks = 0;
  uint64_t payload_bytes = 0;
};

class StubGateway {
 public:
  explicit StubGateway(const StubOptions& o);
  bool open(std::string& err);
  uint16_t port() const { return sock_.local_port(); }
  // Serves until `stop` is set or `rounds` rounds were delivered (0: no limit).
  void run(const std::atomic<bool>& stop, uint64_t rounds = 0);
  const sync::LocalGroup& group() const { return *group_; }
  uint64_t rounds_delivered() const { return delivered_; }
  // Indexed by CodecId.
  const std::array<PushedCount, kCodecCount>& pushed() const { return pushed_; }

 private:
  static bool route(void* self, uint16_t node, sockaddr_in& out);
  void receive_all();
  void count_push(int worker, std::span<const uint8_t> msg);

  StubOptions o_;
  UdpBatch sock_;
  UdpSink tx_;
  std::unique_ptr<sync::LocalGroup> group_;
  std::unique_ptr<sync::SiteSync> site_;
  std::vector<sockaddr_in> worker_addr_;  // learnt from each worker's DATA
  std::vector<uint8_t> known_;
  std::array<PushedCount, kCodecCount> pushed_{};
  std::vector<uint32_t> seen_round_;          // per worker: the round seen_ is for
  std::vector<std::vector<uint8_t>> seen_;    // per worker: chunks of that round counted
  uint64_t delivered_ = 0;
};

}  // namespace sg::client
