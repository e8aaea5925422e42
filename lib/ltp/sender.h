// LTP sender: a pure state machine for one transfer at a time (one shard of one round to
// one peer). It sends chunks out of the caller's message buffer, spread over weighted paths
// and paced by a RateController; it detects loss from SACKs (packet and time thresholds, and
// RACK's reorder timer for the chunks no later ACK can judge),
// retransmission timeouts and tail-loss probes, and retransmits until the receiver CLOSEs the
// transfer, every chunk is acknowledged, or nothing has progressed for give_up_after.
//
// Owner: one engine (lcore). Not thread-safe. Nothing allocates after construction.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/rng.h"
#include "ltp/rate_controller.h"
#include "ltp/types.h"
#include "wire/ltp_codec.h"

namespace sg::ltp {

inline constexpr size_t kMaxPaths = 8;

struct PathSpec {
  uint16_t path_id = 0;
  uint32_t weight = 1;  // share of chunks (smooth weighted round robin); 0 = unused
};

struct SenderConfig {
  uint16_t local_node = 0;
  uint16_t peer_node = 0;
  uint32_t max_chunks = 1u << 16;
  std::array<PathSpec, kMaxPaths> paths{};
  uint32_t path_count = 1;
  Nanos give_up_after = 10 * kSecond;  // no ACK progress for this long -> kTimedOut
  uint32_t max_burst = 64;             // chunks per poll() call at most
  bool shuffle = false;                // first transmissions in a random order (else by index)
};

// What to send. `data` stays owned by the caller and must outlive the transfer; chunk i is
// data[i * chunk_size, ...), the last one may be short.
struct TransferSpec {
  uint32_t job = 0;
  uint32_t round = 0;
  uint32_t policy_version = 0;
  uint16_t shard = 0;
  uint16_t contributors = 1;
  CodecId codec = CodecId::kF32;
  uint32_t chunk_size = 1400;
  std::span<const uint8_t> data;
  // Streaming (chunk-pipelined forwarding): chunk i may be sent only after release(i), so a
  // gateway forwards each chunk as soon as its own inputs for it are complete. The data
  // span must be sized for the whole transfer; a chunk's bytes must be final when released.
  bool streaming = false;
  // Optional, one per chunk: TxMeta::payload_sum slots for the chunks' payloads (see there).
  std::span<uint32_t> payload_sums;
};

enum class SenderState : uint8_t {
  kIdle,
  kRunning,
  kClosed,    // the receiver sent CLOSE (see close_reason())
  kAcked,     // every chunk acknowledged
  kRejected,  // the peer does not speak our version
  kTimedOut,  // no progress for give_up_after
};

struct SenderStats {
  uint64_t data_sent = 0;
  uint64_t retransmits = 0;
  uint64_t bytes_sent = 0;
  uint64_t acks = 0;
  uint64_t acks_ignored = 0;  // malformed, for another transfer, or from another node
  uint64_t losses = 0;        // chunks declared lost (SACK threshold)
  uint64_t timeouts = 0;
  uint64_t probes = 0;        // tail-loss probes
  uint64_t spurious = 0;      // acknowledged after being declared lost
  uint64_t fifo_full = 0;     // sends deferred because the send-order record was full
};

class Sender {
 public:
  // `rng` (send order, if shuffled) must outlive the sender.
  Sender(const SenderConfig& cfg, RateController& rc, Rng& rng);

  // Begins a transfer. False (nothing changes) if one is running, the spec is empty or it
  // has more than max_chunks chunks.
  bool start(const TransferSpec& spec, Nanos now);

  // Streaming transfers: makes chunk i (or every chunk) sendable. Repeats are ignored.
  // Counts as progress: waiting for upstream data is not the peer's silence.
  // holes: parts of chunk i the sender has nothing for (DataHeader::holes; bit 0 alone for
  // an unpacked chunk): sent so that the receiver counts them delivered and adds nothing.
  void release(uint32_t i, Nanos now, uint8_t holes = 0);
  void release_all(Nanos now);
  uint32_t released() const { return released_; }

  // ACK, CLOSE or REJECT from the peer. Anything else is counted and ignored.
  void on_packet(std::span<const uint8_t> msg, Nanos now);

  // Sends what the window and pacing allow (through tx), runs the timers. Returns when it
  // wants to run next (kNever once done); call it again after every on_packet as well.
  Nanos poll(Nanos now, PacketSink& tx);

  // Starts the RTT estimate from what an earlier sender to the same peer measured (a new plan
  // re-creates senders; without this the first loss after a switch waits the initial RTO).
  // Ignored once this sender has its own samples.
  void seed_rtt(Nanos srtt, Nanos /*min_rtt*/) {
    if (srtt > 0 && rto_hint_ == 0) rto_hint_ = 3 * srtt;  // srtt + 4 x (srtt / 2)
  }
  Nanos min_rtt() const { return min_rtt_; }
  // What the next transfer's first timeout starts from (0: initial_rto).
  Nanos rto_hint() const { return rto_hint_; }
  bool done() const { return state_ != SenderState::kRunning; }
  SenderState state() const { return state_; }
  CloseReason close_reason() const { return close_reason_; }
  uint32_t close_kept() const { return close_kept_; }
  uint32_t chunk_count() const { return count_; }
  uint32_t acked_chunks() const { return acked_; }
  // Every chunk below this index is acknowledged (the cumulative point, as TCP's snd_una).
  uint32_t acked_below() const { return cum_; }
  uint64_t inflight_bytes() const { return inflight_; }
  Nanos srtt() const { return srtt_; }
  Nanos finished_at() const { return finished_at_; }
  const SenderStats& stats() const { return stats_; }

 private:
  enum : uint8_t { kUnsent, kInflight, kLost, kAcked };
  struct Chunk {
    Nanos sent = 0;
    uint64_t tx_seq = 0;
    uint64_t delivered_at_send = 0;
    Nanos delivered_time_at_send = 0;
    Nanos first_tx_at_send = 0;  // first_tx_ when it left: the start of its sample's send phase
    uint8_t state = kUnsent;
    bool retransmitted = false;
    bool released = false;
    uint8_t holes = 0;         // DataHeader::holes it is sent with
    bool app_limited = false;  // sent in an app-limited bubble: its rate sample understates the path
  };
  struct Flight {
    uint32_t chunk;
    uint64_t tx_seq;
  };

  uint32_t chunk_bytes(uint32_t i) const;  // header + payload
  std::span<const uint8_t> payload(uint32_t i) const;
  uint16_t pick_path();
  Nanos rto() const;
  void send_chunk(uint32_t i, bool retx, Nanos now, PacketSink& tx);
  void on_ack(const wire::AckMsg& m, Nanos now);
  void ack_chunk(uint32_t i, uint64_t echo_ts);
  void detect_losses(Nanos now);
  void mark_lost(uint32_t i, Nanos now, bool timeout);
  void finish(SenderState s, Nanos now);

  SenderConfig cfg_;
  RateController& rc_;
  Rng& rng_;
  LossDetection ld_;
  std::vector<uint32_t> order_;  // order of first transmissions
  TransferSpec spec_{};
  SenderState state_ = SenderState::kIdle;
  CloseReason close_reason_ = CloseReason::kComplete;
  uint32_t close_kept_ = 0;
  uint32_t count_ = 0;
  uint32_t next_unsent_ = 0;
  uint32_t released_ = 0;  // order_[0, released_) may be sent; all of them unless streaming
  uint32_t acked_ = 0;
  uint32_t cum_ = 0;  // every chunk below is acked
  std::vector<Chunk> chunks_;
  std::vector<Flight> fifo_;  // transmissions in send order (ring)
  size_t fifo_head_ = 0, fifo_len_ = 0;
  std::vector<uint32_t> retx_;  // chunks declared lost, oldest first (ring)
  size_t retx_head_ = 0, retx_len_ = 0;
  std::array<int64_t, kMaxPaths> path_current_{};
  uint64_t tx_seq_ = 0;
  uint64_t inflight_ = 0;
  uint64_t delivered_ = 0;
  Nanos delivered_time_ = 0;
  Nanos first_tx_ = 0;  // send time of the newest chunk acknowledged so far (fresh flight: its start)
  // Sends are app-limited until delivered_ passes this mark (0: not): set when the sender ran
  // out of chunks with room in the window, to what was then delivered and in flight, so every
  // chunk sent before that bubble has drained gives a rate sample of the application, not of
  // the path (Linux's tcp_rate_check_app_limited).
  uint64_t app_limited_until_ = 0;
  uint64_t largest_acked_seq_ = 0;
  Nanos rack_xmit_ = 0;  // send time of the most recently sent chunk known delivered
  Nanos rack_rtt_ = 0;   // that chunk's round trip (RFC 8985's RACK.rtt)
  // RACK's reorder timer: a chunk sent before rack_xmit_ but inside the reorder window is lost
  // once it is a window later than its newer neighbour's round trip (kNever: none waiting).
  Nanos reo_timer_at_ = kNever;
  Nanos srtt_ = 0, rttvar_ = 0, min_rtt_ = 0;
  Nanos rto_hint_ = 0;  // from the previous transfer to this peer
  uint32_t backoff_ = 0;
  uint32_t reorder_steps_ = 0;  // grows the time threshold each time reordering fooled us
  bool reordering_seen_ = false;  // then the packet threshold is off (time only, like RACK)
  uint64_t spurious_now_ = 0;     // bytes of false losses the ACK being taken acknowledged
  Nanos rto_deadline_ = kNever;
  Nanos last_progress_ = 0;
  bool probe_sent_ = false;
  Nanos next_send_ = 0;
  uint64_t echo_ = 0;  // latest ack_ts from the peer
  Nanos finished_at_ = 0;
  SenderStats stats_;
  std::array<uint8_t, sizeof(wire::DataHeader)> hdr_{};
};

}  // namespace sg::ltp
