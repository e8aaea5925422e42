// Reliable, ordered delivery of small opaque messages (policy proposals, topology updates)
// over LTP CONTROL packets: CONTROL is never lossy. Selective-repeat with a fixed window:
// every message is retransmitted with exponential back-off until cumulatively acknowledged;
// the peer delivers in order exactly once, buffering out-of-order arrivals inside the window.
//
// Restarts. Every packet carries the sender's session (its incarnation: larger after each
// restart). A packet from a newer peer session means the peer restarted and lost every
// sequence number: the channel starts over in both directions (messages still unacked are
// dropped; their owners resend what matters, as lib/policy does). Packets of an older
// session are stale leftovers of the previous run and are dropped, counted.
//
// One ControlChannel per (peer, channel id). Owner: one thread (the control thread or an
// engine). All buffers sized in the constructor; send() refuses (counted) when the window is full.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ltp/types.h"
#include "wire/ltp_codec.h"

namespace sg::ltp {

struct ControlConfig {
  uint16_t local_node = 0;
  uint16_t peer_node = 0;
  uint32_t job = 0;
  uint16_t channel = 0;
  uint32_t session = 1;                       // this side's incarnation (see Restarts)
  uint32_t window = 32;                       // messages in flight / buffered out of order
  uint16_t max_payload = wire::kControlMaxPayload;
  Nanos initial_rto = 50 * kMilli;
  Nanos min_rto = 5 * kMilli;
  Nanos max_rto = 5 * kSecond;
  uint32_t max_retries = 30;                  // then the channel reports failure
  Nanos ack_delay = 1 * kMilli;               // a pure ack waits this long for a reply to ride on
};

struct ControlStats {
  uint64_t sent = 0;           // first transmissions
  uint64_t retransmits = 0;
  uint64_t delivered = 0;      // in-order deliveries to the callback
  uint64_t duplicates = 0;
  uint64_t out_of_window = 0;
  uint64_t refused_full = 0;   // send() with the window full
  uint64_t refused_size = 0;   // payload larger than max_payload
  uint64_t malformed = 0;
  uint64_t acks_sent = 0;
  uint64_t peer_restarts = 0;  // a newer peer session: the channel started over
  uint64_t stale_session = 0;  // packets of an older peer session, dropped
};

// Called once per message, in order. The span is valid only during the call.
using ControlDeliver = std::function<void(std::span<const uint8_t> payload)>;

class ControlChannel {
 public:
  explicit ControlChannel(const ControlConfig& cfg);

  // Queues a message (copied into the window). False if full or too large (counted).
  bool send(std::span<const uint8_t> payload, Nanos now);
  // A CONTROL message from the peer for this channel.
  void on_packet(std::span<const uint8_t> msg, Nanos now, const ControlDeliver& deliver);
  // Transmits new messages, due retransmissions and acks. Returns the next time to run.
  Nanos poll(Nanos now, PacketSink& tx);

  bool idle() const { return unacked() == 0 && !ack_pending_; }
  uint32_t unacked() const { return next_seq_ - send_base_; }
  bool failed() const { return failed_; }  // a message exceeded max_retries
  const ControlStats& stats() const { return stats_; }

 private:
  struct Slot {
    uint16_t len = 0;
    bool sent = false;
    bool present = false;  // receive side: buffered out of order
    uint32_t tries = 0;
    Nanos due = 0;
    Nanos sent_at = 0;  // last transmission
  };
  std::span<uint8_t> tx_data(uint32_t seq) { return {tx_bytes_.data() + (seq % cfg_.window) * cfg_.max_payload, cfg_.max_payload}; }
  std::span<uint8_t> rx_data(uint32_t seq) { return {rx_bytes_.data() + (seq % cfg_.window) * cfg_.max_payload, cfg_.max_payload}; }
  Nanos rto(uint32_t tries) const;
  void transmit(uint32_t seq, Nanos now, PacketSink& tx);
  void start_over();

  ControlConfig cfg_;
  std::vector<Slot> tx_slots_, rx_slots_;
  std::vector<uint8_t> tx_bytes_, rx_bytes_;
  std::vector<uint8_t> pkt_;
  uint32_t send_base_ = 1;  // oldest unacked seq
  uint32_t next_seq_ = 1;
  uint32_t recv_next_ = 1;  // next seq to deliver
  bool ack_pending_ = false;
  Nanos ack_due_ = kNever;
  Nanos srtt_ = 0;
  bool failed_ = false;
  uint32_t peer_session_ = 0;  // 0: not heard from yet
  ControlStats stats_;
};

}  // namespace sg::ltp
