// LTP receiver: a pure state machine. Feed it LTP messages (UDP payloads) and `now`; it
// hands chunks to a ReceiverSink, and ACK / CLOSE / REJECT packets to a PacketSink.
//
// Owner: one engine (lcore). Not thread-safe; no call blocks or allocates after construction.
// All memory (transfer slots, chunk bitmaps, closed-transfer memory, job table) is sized in
// the constructor from ReceiverConfig; anything that does not fit is refused and counted.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ltp/chunk_bitmap.h"
#include "ltp/early_close.h"
#include "ltp/receiver_sink.h"
#include "ltp/types.h"
#include "wire/ltp_codec.h"

namespace sg::ltp {

struct ReceiverConfig {
  uint16_t local_node = 0;
  uint32_t max_transfers = 64;        // concurrent open transfers
  uint32_t max_chunks = 1u << 16;     // per transfer; larger transfers are refused
  uint32_t max_jobs = 8;
  uint32_t rounds_ahead = 1;          // accept DATA up to this many rounds past the current one
  uint32_t closed_memory = 512;       // recently closed transfers remembered (late DATA -> CLOSE)
  FillRule fill_rule = FillRule::kZero;
  EarlyCloseConfig early_close;
  uint32_t ack_every = 2;             // in-order arrivals per ACK; anything unusual ACKs at once
  Nanos ack_delay = 200 * kMicro;     // longest an ACK is held back ...
  // ... unless a transfer's chunks (of a frame's size) come further apart, but within this
  // of each other: then twice their mean gap (0: ack_delay always). Without it a flow of a few
  // thousand packets a second (a WAN link's share) gets an ACK per chunk: about a tenth of the
  // reverse path's bytes.
  Nanos ack_delay_max = 0;
  // ACKs that would go out during on_packet wait for the next poll() instead. A caller that
  // polls after each burst of packets (the gateway's engines) so answers a burst's arrivals
  // of one transfer with one ACK, microseconds later, instead of one per ack_every.
  bool ack_batch = false;
  Nanos abandon_after = 5 * kSecond;  // no arrival for this long -> close (bubbles filled)
};

struct ReceiverStats {
  uint64_t packets = 0;
  uint64_t data = 0;
  uint64_t delivered = 0;         // distinct chunks handed to the sink
  uint64_t duplicates = 0;
  uint64_t malformed = 0;         // failed parse (any WireError)
  uint64_t bad_version = 0;       // answered with REJECT
  uint64_t wrong_type = 0;        // not DATA (ACK/CLOSE/CONTROL belong elsewhere)
  uint64_t unknown_job = 0;
  uint64_t stale_round = 0;       // round < current: answered with CLOSE(kStale)
  uint64_t future_round = 0;      // round > current + rounds_ahead: dropped, sender retries
  uint64_t stale_policy = 0;      // policy older than the round's: CLOSE(kStale)
  uint64_t future_policy = 0;     // policy newer than the round's: dropped
  uint64_t count_mismatch = 0;    // chunk_count differs from the transfer's
  uint64_t late_after_close = 0;  // DATA for a transfer already closed: CLOSE repeated
  uint64_t refused_table_full = 0;
  uint64_t refused_too_large = 0;
  uint64_t acks_sent = 0;
  uint64_t acks_ahead = 0;        // ... of them for DATA the caller held for the next round
  uint64_t closes_sent = 0;
  uint64_t rejects_sent = 0;
  uint64_t transfers_opened = 0;
  uint64_t opened_whole = 0;      // ... of them the sink wants whole (no Early Close)
  uint64_t closed_complete = 0;
  uint64_t closed_early = 0;
  uint64_t closed_superseded = 0;
  uint64_t closed_abandoned = 0;
  uint64_t closed_stale = 0;
  uint64_t fallbacks = 0;         // transfers that crossed the loss bound
  uint64_t bubbles = 0;
};

class Receiver {
 public:
  explicit Receiver(const ReceiverConfig& cfg);

  // Sets job's current round and its policy version. Open transfers of older rounds close
  // (kSuperseded, bubbles filled); transfers opened ahead for this round under a different
  // policy close as kStale (the sink must discard them). Returns false if the job table is full.
  bool begin_round(uint32_t job, uint32_t round, uint32_t policy_version, Nanos now, ReceiverSink& sink, PacketSink& tx);
  // Rounds >= from_round use `policy_version` (a scheduled switch); lets DATA of a coming
  // round be accepted before begin_round is called for it.
  bool schedule_policy(uint32_t job, uint32_t from_round, uint32_t policy_version);

  // One LTP message (the UDP payload). The buffer stays the caller's; payload spans given
  // to the sink point into it and are valid only during this call.
  void on_packet(std::span<const uint8_t> msg, Nanos now, ReceiverSink& sink, PacketSink& tx);

  // The sender of `key` will send nothing more (it moved on to a later round): an open
  // transfer closes now as kAbandoned, the rest filled as bubbles. False if none was open
  // (nothing of it ever arrived, or it already ended).
  bool abandon(const TransferKey& key, Nanos now, ReceiverSink& sink, PacketSink& tx);

  // DATA that the caller holds for the round after the job's current one (which it has not
  // begun): acknowledged now, as it arrives, so that its sender neither times out nor resends
  // it while it waits; the hold can outlast a retransmission timeout many times over (on a
  // 0.1 ms path the timeout is 1 ms, and sites begin rounds tens of ms apart). The caller
  // must replay it once the round begins. False (nothing sent) unless the DATA is valid and
  // of that next round under the policy that round will use.
  bool ack_ahead(std::span<const uint8_t> msg, Nanos now, PacketSink& tx);

  // Timers: held ACKs, Early Close, fall-back, abandonment. Returns the next time it needs
  // to run (kNever if nothing is open).
  Nanos poll(Nanos now, ReceiverSink& sink, PacketSink& tx);

  // While on, the DATA given is what the caller held for a round it had not begun, now
  // replayed in a burst: the ACKs sent meanwhile say so (kFlagHeld), so the sender does not
  // read a rate into their spacing.
  void set_replaying(bool on) { replaying_ = on; }

  const ReceiverStats& stats() const { return stats_; }
  uint32_t open_transfers() const { return open_; }
  double threshold() const { return early_.threshold(); }
  double loss_estimate() const { return early_.loss_estimate(); }
  Nanos srtt() const { return srtt_; }
  const ReceiverConfig& config() const { return cfg_; }

 private:
  struct Job {
    bool used = false;
    uint32_t job = 0;
    uint32_t round = 0;
    uint32_t policy = 0;
    bool switch_pending = false;
    uint32_t switch_round = 0;
    uint32_t switch_policy = 0;
  };
  struct Transfer {
    bool used = false;
    TransferKey key;
    uint32_t policy = 0;
    uint32_t count = 0;
    uint32_t received = 0;
    uint32_t cum = 0;            // every index < cum has arrived
    uint32_t first_via_retx = 0; // chunks whose first arrival was a retransmission
    uint32_t unacked = 0;        // arrivals since the last ACK
    uint16_t last_path = 0;
    uint16_t contributors = 1;
    CodecId codec = CodecId::kF32;
    bool reliable = false;       // fell back: close only when complete
    bool whole = false;          // the sink wants it whole (early_close_allowed): no Early Close
    bool sender_partial = true;  // every DATA so far had kFlagPartial: no Early Close yet
    uint64_t last_send_ts = 0;   // of the newest DATA, echoed in ACKs
    Nanos opened = 0;
    Nanos last_arrival = 0;
    Nanos last_progress = 0;
    Nanos gap = 0;               // EWMA of time between new chunks
    Nanos ack_due = kNever;
    uint32_t ack_chunk = 0;      // the newest arrival: the SACK window of a held ACK ends past it
    ChunkBitmap bits;
  };
  struct Closed {
    TransferKey key;
    uint32_t policy = 0;
    uint32_t count = 0;
    uint32_t kept = 0;
    CloseReason reason = CloseReason::kComplete;
  };

  Job* find_job(uint32_t job);
  uint32_t policy_for(const Job& j, uint32_t round) const;
  Transfer* find_transfer(const TransferKey& k);
  Transfer* open_transfer(const TransferKey& k, const wire::DataFields& f, Nanos now);
  const Closed* find_closed(const TransferKey& k) const;
  void on_data(const wire::DataMsg& m, size_t msg_len, Nanos now, ReceiverSink& sink, PacketSink& tx);
  void send_ack(Transfer& t, uint32_t chunk, Nanos now, PacketSink& tx);
  void send_close_header(const TransferKey& k, uint32_t policy, uint32_t count, uint32_t kept,
                         CloseReason reason, uint16_t path, PacketSink& tx);
  void close(Transfer& t, CloseReason reason, Nanos now, ReceiverSink& sink, PacketSink& tx);
  void note_rtt(Nanos sample);

  ReceiverConfig cfg_;
  EarlyClose early_;
  ReceiverStats stats_;
  std::vector<Job> jobs_;
  std::vector<Transfer> slots_;
  std::vector<uint64_t> bitmap_words_;  // max_transfers * words_for(max_chunks), carved per slot
  std::vector<Closed> closed_;           // ring of recently closed transfers
  size_t closed_next_ = 0;
  uint32_t open_ = 0;
  uint32_t last_hit_ = 0;
  uint32_t last_job_ = 0;
  Nanos srtt_ = 0;
  bool replaying_ = false;
  std::vector<uint8_t> tx_buf_;          // one outgoing message at a time
};

}  // namespace sg::ltp
