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
#include "crypto/peer_sessions.h"
#include "sync/local_group.h"
#include "sync/site_sync.h"
#include "wire/job_msg.h"

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
  // Announced job: the stub holds no job (drops every push) until a worker's JOB kJoin. A
  // join matching the expected definition (job, model_floats * 4, chunk_bytes, workers,
  // job_dtype, job_weight; model_floats 0: whatever the first join says) is answered running
  // and starts the job; another one is refused with the field that differs. Once every
  // worker sent kLeave the job has ended (a later join restarts it).
  bool announced = false;
  uint8_t job_dtype = 0;
  uint8_t job_weight = 1;
  uint32_t pending_joins = 0;  // answer the first N matching joins pending ("waiting for site 9")
  bool ignore_joins = false;   // never answer a join (a gateway that does not know JOB messages)
  // The job's token file: everything from workers must be sealed with it (the rest is dropped
  // and counted in refused()) and everything to them is sealed.
  std::string token_file;
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
  ~StubGateway();
  bool open(std::string& err);
  uint16_t port() const { return sock_.local_port(); }
  // Serves until `stop` is set or `rounds` rounds were delivered (0: no limit).
  void run(const std::atomic<bool>& stop, uint64_t rounds = 0);
  bool has_job() const { return group_ != nullptr; }  // announced: once a join started the job
  const sync::LocalGroup& group() const { return *group_; }  // has_job() only
  uint64_t rounds_delivered() const { return delivered_; }
  // Indexed by CodecId.
  const std::array<PushedCount, kCodecCount>& pushed() const { return pushed_; }
  // Announced jobs; safe to read while run() goes on in another thread.
  uint64_t joins() const { return joins_.load(); }        // kJoin received (well-formed, opened)
  uint64_t leaves() const { return leaves_.load(); }      // kLeave received
  uint64_t job_refused() const { return job_refused_.load(); }  // joins answered refused
  uint64_t refused() const { return refused_.load(); }    // messages that did not open with the token
  bool job_running() const { return running_.load(); }
  bool job_ended() const { return ended_.load(); }

 private:
  class Sealing;
  static bool route(void* self, uint16_t node, sockaddr_in& out);
  bool make_job(uint64_t model_floats, uint32_t workers, uint32_t chunk_bytes, std::string& err);
  void receive_all();
  void count_push(int worker, std::span<const uint8_t> msg);
  void on_job(std::span<const uint8_t> msg);
  void reply(uint16_t worker_node, wire::JobStatus st, std::string_view text, uint32_t job = 0);  // 0: the stub's

  StubOptions o_;
  UdpBatch sock_;
  UdpSink udp_;
  std::unique_ptr<crypto::Sealer> sealer_;  // with a token
  std::unique_ptr<crypto::Opener> opener_;
  std::unique_ptr<Sealing> sealing_;
  ltp::PacketSink* tx_ = &udp_;
  std::unique_ptr<sync::LocalGroup> group_;
  std::unique_ptr<sync::SiteSync> site_;
  std::vector<sockaddr_in> worker_addr_;  // learnt from each worker's DATA
  std::vector<uint8_t> known_;
  std::array<PushedCount, kCodecCount> pushed_{};
  std::vector<uint32_t> seen_round_;          // per worker: the round seen_ is for
  std::vector<std::vector<uint8_t>> seen_;    // per worker: chunks of that round counted
  uint64_t delivered_ = 0;
  wire::JobSpec job_;            // the announced job's definition, once one is held
  bool held_ = false;
  uint32_t pending_left_ = 0;
  std::vector<uint8_t> left_;    // per worker: sent kLeave
  std::atomic<uint64_t> joins_{0}, leaves_{0}, job_refused_{0}, refused_{0};
  std::atomic<bool> running_{false}, ended_{false};
};

}  // namespace sg::client
