// The gateway's LAN side of a round: collects the gradients the site's training workers push
// (one LTP transfer each), averages them into the site's contribution for the WAN round
// (SiteSync), and sends the round's result back to every worker that pushed.
//
// Protocol (fixed; the worker client in client/ speaks it over kernel UDP):
//   push    worker w (LTP node id kWorkerNodeBase + w) sends its whole float32 gradient as
//           ONE transfer: job, round R, shard 0, policy_version 0, chunk size chunk_bytes.
//   result  the gateway (node id gateway_node = its site id) sends the result as one
//           transfer to each worker, same job, round R, shard 0.
//
// Means. contribution() is the per-chunk MEAN over the workers whose chunk arrived, so a
// chunk missing from one worker (a bubble, or a worker that timed out) is averaged over the
// others, never counted as zeros. SiteSync then averages sites: the global result is the
// mean of site means, which is the exact global mean when every site has as many workers.
//
// Streaming (what the gateway does, so that neither the WAN round waits for whole pushes
// nor the workers for the whole result):
//   contribution  chunk c is final -- the mean over the workers whose copy of c arrived --
//                 once every worker's copy arrived or was given up (a bubble, the worker's
//                 push ended, the push timeout); take_ready_chunks() hands out the chunks
//                 that became final since the last call, contribution_buffer() holds them.
//   result        result_ready() copies a range of the round's result; each chunk complete
//                 in it leaves at once for every worker, on result transfers that start with
//                 the round's first result range (streaming LTP transfers: workers neither
//                 Early-Close nor give up on them while more is coming). finish() ends the
//                 round once the whole result was given.
// deliver() is the store-and-forward form: the whole result, then finish().
//
// Rounds. The group collects one round at a time, starting at cfg.first_round. finish(R)
// (and deliver(R)) move it to R+1 at once (workers may push R+1 while results of R are still
// in flight). While nothing of the current round has arrived, a push for a later round moves the group
// there (workers that restarted, or a gateway that started late; once a round was delivered,
// by at most max_round_jump); a push for an earlier round is answered with CLOSE(kStale),
// which the worker reports as an error. A ready contribution waits for finish(): pushes of
// later rounds are dropped meanwhile and retried by the workers.
//
// Missing workers. Once the first push of a round has arrived, the round's contribution is
// ready when every worker's transfer has ended, or push_timeout later with the workers (and
// chunks) that made it. Counted in stats().push_timeouts / missing_workers. A worker that
// sent nothing at all in the last round (dead, or stopped) is not waited for in the next:
// a dead worker costs its site one push_timeout, not one per round. It is waited for again
// from its first chunk on; if the others' pushes all ended before that chunk came, it is late
// for the round (it still gets the result) and counts again from the next.
//
// Time is passed in; packets come in as LTP messages and leave through an ltp::PacketSink
// (TxMeta::peer_node says which worker; the caller maps node ids to the address the worker's
// DATA came from). Owner: one engine; nothing allocates after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "aggregate/accumulator.h"
#include "wire/ltp_header.h"
#include "common/rng.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "ltp/window_controller.h"

namespace sg::sync {

inline constexpr uint16_t kWorkerNodeBase = wire::kWorkerNodeBase;  // worker w is node kWorkerNodeBase + w
inline constexpr uint32_t kMaxLocalWorkers = 4096;

inline ltp::ReceiverConfig reliable_receiver() {
  ltp::ReceiverConfig rc;
  rc.early_close.enabled = false;
  return rc;
}

struct LocalGroupConfig {
  uint32_t job = 1;
  uint16_t gateway_node = 1;         // this gateway's site id
  uint32_t workers = 1;              // N: worker w has node id kWorkerNodeBase + w
  uint64_t model_floats = 0;         // gradient length (float32 values)
  uint32_t chunk_bytes = 1344;       // multiple of 4
  uint32_t first_round = 1;
  Nanos push_timeout = 10 * kSecond; // after the first push of a round
  uint32_t max_round_jump = 64;      // once a round was delivered (see Rounds above)
  // local_node, max_chunks, rounds_ahead set by LocalGroup. No Early Close by default: pushes
  // cross the LAN next to the gateway, where a lost chunk comes back within microseconds, so
  // they are delivered whole (a dead worker still costs only push_timeout); closing early
  // there would turn an overloaded gateway's drops into silently inexact site means.
  ltp::ReceiverConfig receiver = reliable_receiver();
  ltp::SenderConfig sender;          // nodes and max_chunks set per worker
  ltp::WindowConfig results;         // each worker's result transfer: a window, unpaced
  uint64_t seed = 1;
};

// Why the constructor's config is unusable (ok() is false then and every call is a no-op).
enum class LocalGroupError : uint8_t {
  kOk = 0,
  kWorkers,     // 0 or more than kMaxLocalWorkers
  kChunkBytes,  // 0, not a multiple of 4, or > 9000
  kModel,       // 0 floats, or more than 2^24 chunks
};

struct LocalGroupStats {
  uint64_t rounds = 0;            // contributions made ready
  uint64_t delivered = 0;         // rounds finished (deliver / finish) and answered to the workers
  uint64_t push_timeouts = 0;     // rounds made ready by push_timeout
  uint64_t missing_workers = 0;   // workers absent from a round's contribution (timed out, or not waited for)
  uint64_t push_bubbles = 0;      // chunks a worker's push closed without
  uint64_t bad_chunks = 0;        // wrong shard/size/round, or not a worker: ignored
  uint64_t late_chunks = 0;       // arrived after the push timeout made the round ready
  uint64_t stray_packets = 0;     // ACK/CLOSE/REJECT for no running result transfer, non-LTP
  uint64_t skipped_rounds = 0;    // rounds jumped over because workers pushed a later one
  uint64_t refused_jumps = 0;     // pushes more than max_round_jump ahead (not followed)
  uint64_t result_timeouts = 0;   // result transfers that gave up (worker gone)
  uint64_t result_abandoned = 0;  // result transfers still running when the next round's results began
  uint64_t result_filled = 0;     // result chunks finish() had not been given: the site's own mean sent
};

class LocalGroup final : private ltp::ReceiverSink {
 public:
  explicit LocalGroup(const LocalGroupConfig& cfg);
  ~LocalGroup() override;

  LocalGroupError error() const { return error_; }
  bool ok() const { return error_ == LocalGroupError::kOk; }

  // Any LTP message from a worker (the UDP payload, owned by the caller): DATA to the push
  // receiver, ACK / CLOSE / REJECT to that worker's result sender.
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx);

  // Timers (ACKs, Early Close, push timeout, result retransmissions). Returns the next time
  // it wants to run (ltp::kNever when idle); call it again after on_packet as well.
  Nanos poll(Nanos now, ltp::PacketSink& tx);

  // Round being collected (the one contribution_ready / deliver refer to).
  uint32_t round() const { return round_; }
  bool contribution_ready(uint32_t round) const { return ready_ && round == round_; }
  // The site's contribution (model_floats values), valid once contribution_ready and until
  // deliver() for that round.
  std::span<const float> contribution() const;
  // Workers whose push counted for the ready round (before it is ready: for the round
  // delivered last).
  uint32_t contributors() const { return ready_ ? present_ : delivered_present_; }

  // Streaming contribution: chunks that became final since the last call (indices of
  // chunk_bytes / 4 floats in contribution_buffer()), for the round being collected. The
  // span is valid until the next call into the group.
  std::span<const uint32_t> take_ready_chunks();
  // The round's contribution as it fills: a chunk's values are final once take_ready_chunks
  // named it, and stay so until finish(). Stable address for the group's lifetime.
  std::span<const float> contribution_buffer() const;
  // Workers whose copy of a final chunk counted (0: nothing of it arrived: the site has no
  // contribution there).
  uint32_t chunk_contributors(uint32_t chunk) const { return chunk < chunks_ ? acc_->contributors(chunk) : 0; }
  // Some push of the round being collected has arrived (a WAN round can begin).
  bool round_started() const { return any_push_ || ready_; }
  // When the round being collected had its first chunk final (every expected worker's copy
  // in, so it could leave for the WAN); -1: none yet. From then to contribution_ready, the
  // round's transfer can run behind the workers' compute.
  Nanos first_final() const { return first_final_; }

  // Streaming result: floats [first, first + values.size()) of `round`'s result (copied).
  // The first call of a round starts the result transfers to every worker that pushed (a
  // worker whose push shows up later gets its transfer then); every chunk completed by the
  // call is sent to each of them. False (nothing changes) unless `round` is the round being
  // collected and the range fits.
  bool result_ready(uint32_t round, size_t first, std::span<const float> values, Nanos now, ltp::PacketSink& tx);
  // Ends `round`: the contribution is made final (push timeout rules aside), result chunks
  // never given are sent as this site's own mean (counted), and collecting round + 1 begins.
  // False (nothing changes) unless `round` is the round being collected.
  bool finish(uint32_t round, Nanos now, ltp::PacketSink& tx);
  // Every float of the round being collected has been given by result_ready: finish() has
  // nothing left to fill, and the workers may already have their whole result.
  bool results_complete() const { return results_open_ && results_left_ == 0; }

  // Store and forward: sends `result` (model_floats values; copied) to every worker that
  // pushed for `round` (also those whose push arrived only after the push timeout) and starts
  // collecting round + 1. Result transfers still running from the round before are abandoned
  // (counted; this re-creates their sender, the only allocation after construction, and
  // only for a worker that stopped answering). False (nothing changes) unless
  // contribution_ready(round) and the size matches.
  bool deliver(uint32_t round, std::span<const float> result, Nanos now, ltp::PacketSink& tx);
  // Every result transfer of the last round's results has ended (acked, closed or given up).
  bool round_delivered() const;

  // A live change (config reload): applies from the wait that is under way.
  void set_push_timeout(Nanos t) { cfg_.push_timeout = t; }
  Nanos push_timeout() const { return cfg_.push_timeout; }

  const LocalGroupStats& stats() const { return stats_; }
  const ltp::Receiver& receiver() const { return *receiver_; }
  uint32_t chunk_count() const { return chunks_; }

 private:
  struct Out;  // one worker's result sender
  enum class Push : uint8_t { kNone, kOpen, kDone, kBad, kLate };

  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override;
  void on_bubble(const ltp::ChunkRef& c, ltp::FillRule rule) override;
  void on_transfer_end(const ltp::TransferSummary& s) override;
  int worker_of(uint16_t node) const;
  void start_round(uint32_t round, Nanos now, ltp::PacketSink& tx);
  void make_ready();
  void rejoin(uint32_t w);
  void resolve(uint32_t chunk);            // one more worker's copy of chunk arrived or was given up
  void start_result(uint32_t w, Nanos now);
  void abandon_result(uint32_t w);
  void release_result_chunk(uint32_t chunk);

  LocalGroupConfig cfg_;
  LocalGroupError error_ = LocalGroupError::kOk;
  uint32_t chunks_ = 0;
  std::unique_ptr<ltp::Receiver> receiver_;
  std::unique_ptr<agg::Accumulator> acc_;
  std::vector<Push> push_;
  std::vector<uint32_t> got_;  // chunks counted per worker this round
  std::vector<uint16_t> pending_;      // per chunk: workers whose copy is still awaited
  std::vector<uint8_t> final_;         // per chunk: the contribution's mean is final
  std::vector<uint32_t> ready_list_;   // chunks made final this round, in order
  size_t ready_taken_ = 0;             // of them, handed out by take_ready_chunks
  std::vector<std::unique_ptr<Out>> outs_;
  std::vector<float> result_;
  std::vector<uint32_t> res_missing_;  // per chunk: result floats not yet given this round
  // Per chunk: the result payload's checksum sum, kept by the packet sink for every worker's
  // transfer (ltp::TxMeta::payload_sum); cleared wherever result_'s bytes change.
  std::vector<uint32_t> res_sums_;
  bool results_open_ = false;          // result transfers of round_ have started
  uint32_t results_left_ = 0;          // chunks whose res_missing_ is not yet 0
  Rng rng_;
  LocalGroupStats stats_;
  uint32_t round_ = 0;
  uint32_t delivered_present_ = 0;
  bool ready_ = false;
  bool any_push_ = false;
  uint32_t ended_ = 0;    // workers whose push ended this round
  std::vector<uint8_t> absent_;  // per worker: nothing from it last round, not waited for
  uint32_t expected_ = 0;        // workers waited for this round (not absent)
  uint32_t present_ = 0;  // of them, with at least one chunk
  Nanos first_push_ = 0;
  Nanos first_final_ = -1;
  Nanos now_ = 0;  // time of the call in progress (for receiver callbacks)
};

}  // namespace sg::sync
