// The worker client: what a training host links (or loads from Python) to synchronise its
// gradient through the site's stormgate gateway. No DPDK: one kernel UDP socket.
//
//   Worker w(opts);                    // opens the socket, "connects" it to the gateway
//   w.allreduce(grad, n, round, 30s);  // pushes grad, returns with grad = the global mean
//
// allreduce pushes the buffer as one LTP transfer (sg::ltp::Sender over sendmmsg, paced by
// LTP's rate controller) and receives the result transfer (sg::ltp::Receiver over recvmmsg),
// waiting in ppoll() between timer deadlines. A chunk of the result that never arrives
// (Early Close on a lossy LAN) keeps this worker's own gradient, so training still steps.
//
// Not thread-safe: one Worker per training process (or thread). Memory for a model size is
// allocated at the first allreduce of that size, then reused.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"

namespace sg::client {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // bad options or buffer
  kSocket = 2,           // could not open / bind / resolve
  kTimeout = 3,          // no (complete) result in time: the gateway is unreachable or slow
  kStale = 5,            // the gateway is already past this round
  kRejected = 6,         // the gateway refused the transfer (size, version) or the announced job
  kProtocol = 7,         // the result did not match the push (size)
};
const char* error_name(ErrorCode c);

struct Status {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  bool ok() const { return code == ErrorCode::kOk; }
};

// Element type of a gradient buffer. Half-precision buffers go out as they are (codec kF16 /
// kBf16: half the bytes, no float32 copy); the gateway sums in float32 and the float32 result
// is rounded to the buffer's type (nearest even, as torch's .to()) while it is written back.
// The gateway's job.model_bytes and chunk_bytes stay those of the float32 gradient (4 x n):
// a half push has the same chunks, each chunk_bytes / 2 long.
enum class Dtype : uint8_t { kF32, kF16, kBf16 };
size_t dtype_size(Dtype d);

struct WorkerOptions {
  std::string gateway_host = "127.0.0.1";
  uint16_t gateway_port = 7400;   // the gateway's transport.udp_port
  uint16_t gateway_node = 1;      // the gateway's site.id
  uint32_t worker_index = 0;      // 0..workers-1 of this site; LTP node 0x8000 + index
  uint32_t job = 1;               // the gateway's job.id
  uint32_t chunk_bytes = 1344;    // the gateway's transport.chunk_bytes
  std::string bind_host = "0.0.0.0";
  uint16_t bind_port = 0;         // 0: any
  // The job's token file (the gateway's job.token_file): with it, everything to and from the
  // gateway is sealed with keys derived from it (lib/crypto); without it, plain LTP. It must
  // match the gateway: a gateway with a token drops a worker's plain or wrongly sealed pushes.
  // "{job}" in the path stands for the job id (announced jobs each have their own token,
  // derived from the gateways' admission.token_file: one directory can hold a worker's tokens).
  std::string token_file;
  // Announcing the job (the gateway then needs no job in its YAML). 0: do not announce, the
  // gateway's config holds the job. N > 0: this worker announces it, N being the workers per
  // site (job.workers): before its first round of a size, allreduce sends the job's definition
  // (job, 4 x n model bytes, chunk_bytes, N, the call's dtype, weight) to the gateway as a JOB
  // kJoin every 200 ms until the gateway answers running (go on), refused (kRejected, with the
  // gateway's reason) or the call's timeout passes (kTimeout). While training, a call re-sends
  // kJoin at most once a second without waiting (a restarted gateway re-learns the job), and
  // the Worker's destructor or leave() sends kLeave. At most 4096 (the gateway's limit).
  uint16_t announce_workers = 0;
  uint8_t weight = 1;  // the job's share of the WAN against other jobs, 1..16 (announced jobs)
  // An announced job whose every round is exactly the mean of every worker's push: the
  // gateways code nothing and close nothing early, nor does this worker's result receiver; a
  // missing contribution means no result (a timeout), never a bubble. For collectives that must
  // be bit-exact (a process group's broadcast, all-gather, barrier).
  bool exact = false;
  // The push to the gateway, across the data-center LAN: at most this many KiB in flight,
  // unpaced (a window, as the gateway's results to its workers: transport.lan_window_kb),
  // halved on a loss episode. 0: paced by a delivery-rate model (BBR-like) instead, which on a
  // LAN of microseconds learns the rate of whatever stalled it (a busy gateway or host) and
  // keeps it: 16 MB pushes took 1.7x as long on the testbed. 64 KiB is 10 Gbit/s per worker at
  // a 50 us round trip, and keeps a gateway engine that also paces the WAN from taking its
  // workers' pushes in bursts that delay its WAN ACKs (256 KiB: rounds 12% slower on `lossy`
  // with int8). 0..1048576 (1 GiB).
  uint32_t push_window_kb = 64;
};

struct WorkerStats {
  uint64_t rounds = 0;
  uint64_t push_retransmits = 0;
  uint64_t result_bubbles = 0;    // result chunks filled with the own gradient
  uint64_t result_malformed = 0;  // of those: chunks that came with another size or codec
  uint64_t push_bytes = 0;        // DATA bytes of the pushes (headers and retransmits included)
  uint64_t datagrams_sent = 0;
  uint64_t datagrams_received = 0;
  uint64_t send_dropped = 0;     // datagrams the socket did not take, or that could not be sealed
  uint64_t refused = 0;           // messages that did not authenticate with the token
  uint64_t job_joins_sent = 0;    // JOB kJoin sent (announce_workers > 0)
  uint64_t job_replies = 0;       // JOB kReply for this job received
  uint64_t job_replies_bad = 0;   // JOB messages dropped: malformed, or not a reply for this job
  double last_register_seconds = 0;  // first kJoin of a definition -> the gateway said running
  double last_round_seconds = 0;
};

class Worker {
 public:
  // Opens the socket; check status() before use.
  explicit Worker(const WorkerOptions& opts);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const Status& status() const { return open_status_; }

  // Pushes data[0..n) for `round` and replaces it with the round's result (the mean over
  // every worker of every site). Blocks until the result arrives, an error, or `timeout`.
  // On error, data is unchanged. `round` must grow from call to call (training step).
  Status allreduce(float* data, size_t n, uint32_t round, Nanos timeout);
  // Same, keeping `in` and writing the result to `out` (may alias `in`).
  Status allreduce(const float* in, float* out, size_t n, uint32_t round, Nanos timeout);
  // Any Dtype: in and out hold n elements of it.
  Status allreduce(const void* in, void* out, size_t n, Dtype dtype, uint32_t round, Nanos timeout);

  // Overlapping the push with the computation that produces it (a DDP hook, bucket by
  // bucket): like allreduce, but only in[0, ready) is sent, where `ready` is what another
  // thread last passed to make_ready(), up to n. The gateway takes a push chunk by chunk and
  // the chunks are marked streaming (its receiver neither Early-Closes nor gives up while the
  // rest is coming), so the WAN round begins on the first chunks while the rest is computed.
  // Values below `ready` must not change any more; the ones above may still be written. The
  // timeout counts from the call. `ready` starts at 0 and is 0 again when the call returns;
  // a make_ready() or cancel() that comes after that (a waiter that raced the round's end)
  // would count for the next call: begin_streaming() before each call forgets it.
  Status allreduce_streaming(const float* in, float* out, size_t n, uint32_t round, Nanos timeout);
  Status allreduce_streaming(const void* in, void* out, size_t n, Dtype dtype, uint32_t round, Nanos timeout);
  // Thread-safe (the one call allowed while another thread is in allreduce_streaming): makes
  // in[0, elements) sendable and wakes the transfer. Never lowers what was made ready.
  void make_ready(size_t elements);
  // Before starting the thread that makes the next allreduce_streaming call (no call running):
  // `ready` back to 0 and no cancel pending. Without it a make_ready(n) that reached a round
  // which had already ended released the whole next push at once, values not yet written.
  void begin_streaming();
  // Thread-safe: ends a running allreduce_streaming at once with kInvalidArgument ("cancelled")
  // without pushing the rest; the gateway goes on without this worker's missing chunks.
  void cancel();

  // Announcing workers (announce_workers > 0): sends one JOB kLeave for the job (best effort,
  // no wait) if a kJoin went out since the last leave; the gateway ends the job once every
  // worker of the site has left. A later allreduce registers the job again. The destructor
  // calls it. Nothing to do for a worker that does not announce.
  void leave();

  // Between rounds (no call running): the push's window from the next round on, as
  // WorkerOptions::push_window_kb (0: the rate model). kInvalidArgument beyond 1 GiB, nothing
  // changed. For callers that set options after opening (the C ABI's options have no room).
  Status set_push_window_kb(uint32_t kb);

  const WorkerStats& stats() const;
  const WorkerOptions& options() const { return opts_; }
  std::string gateway_address() const;
  uint16_t local_port() const;

 private:
  struct Impl;
  Status run(const void* in, void* out, size_t n, Dtype dtype, uint32_t round, Nanos timeout, bool streaming);
  Status ensure_job(size_t n, Dtype dtype, Nanos deadline, Nanos timeout, bool streaming);
  WorkerOptions opts_;
  Status open_status_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sg::client
