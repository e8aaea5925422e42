// Congestion/rate control behind one small interface, so LTP's loss-tolerant controller and
// a TCP-like reliable baseline drive the same Sender (and are compared on equal terms).
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace sg::ltp {

struct AckEvent {
  Nanos now = 0;
  uint64_t acked_bytes = 0;        // newly acknowledged by this ACK
  uint64_t inflight_bytes = 0;     // after this ACK
  uint64_t delivered = 0;          // total bytes acknowledged so far
  uint64_t prior_delivered = 0;    // `delivered` when the newest acked chunk was sent
  double delivery_rate = 0;        // bytes/s over that chunk's flight; 0 = no sample
  Nanos rtt = -1;                  // this ACK's sample; -1 = none
  Nanos srtt = 0;
  Nanos min_rtt = 0;
  Nanos newest_acked_send = 0;     // send time of the newest chunk this ACK covers
  bool app_limited = false;        // that chunk left while the sender had nothing more to send
  bool held = false;               // the receiver held the DATA (wire::kFlagHeld): no rate in its timing
  // Newly acknowledged bytes the sender had declared lost (by its reordering rules or a
  // timeout): those losses were false.
  uint64_t spurious_bytes = 0;
};

struct LossEvent {
  Nanos now = 0;
  uint64_t lost_bytes = 0;
  Nanos lost_send = 0;             // send time of the (newest) lost chunk
  uint64_t inflight_bytes = 0;     // before removing the lost bytes
  bool timeout = false;            // retransmission timer fired
};

// How the sender decides a chunk is lost (set by the controller: a TCP baseline must behave
// like TCP, LTP tolerates multipath reordering).
struct LossDetection {
  uint32_t dup_threshold = 3;      // lost once this many later-sent chunks are acked
  double reorder_window = 0.25;    // ... or once a chunk sent srtt * this later is acked
  Nanos min_rto = 200 * kMilli;
  Nanos rto_var_floor = 0;         // Linux: rto = srtt + max(4 * rttvar, rto_min)
  // The longest the peer holds an ACK back on purpose, added to the timeout as QUIC adds its
  // max_ack_delay (RFC 9002, 6.2.1): RTT samples do not show it, since a delayed ACK echoes
  // the newest arrival, but it holds the oldest unacknowledged chunk's answer back.
  Nanos max_ack_delay = 0;
  Nanos initial_rto = 1 * kSecond;
  Nanos max_rto = 60 * kSecond;
  bool tail_loss_probe = true;     // probe after ~2 srtt of silence (Linux TLP)
};

// LTP's own loss detection (its delivery-rate and LAN-window controllers): tolerant of
// multipath reordering, millisecond timers, and a path back from an outage found within
// max_rto (between gateways an outage is an event to recover from, not congestion).
inline LossDetection ltp_loss_detection(uint32_t dup_threshold, Nanos min_rto, Nanos initial_rto,
                                        Nanos max_ack_delay = 0) {
  LossDetection d;
  d.max_ack_delay = max_ack_delay;
  d.dup_threshold = dup_threshold;
  d.reorder_window = 0.25;
  d.min_rto = min_rto;
  d.rto_var_floor = 0;
  d.initial_rto = initial_rto;
  d.max_rto = 500 * kMilli;
  d.tail_loss_probe = true;
  return d;
}

// What a sender has to send, told to its controller on every poll and when a transfer ends.
enum class Demand : uint8_t {
  kBacklogged,  // chunks to send (first transmissions or retransmissions)
  kIdle,        // nothing to send now (waiting for ACKs or, streaming, for released chunks)
  kDone,        // the transfer ended
};

class RateController {
 public:
  virtual ~RateController() = default;
  virtual const char* name() const = 0;
  virtual void reset(Nanos now, uint32_t mss) = 0;
  virtual void on_ack(const AckEvent& ev) = 0;
  virtual void on_loss(const LossEvent& ev) = 0;
  virtual uint64_t cwnd_bytes() const = 0;          // inflight cap
  virtual double pacing_rate() const = 0;           // bytes/s; 0 = unpaced (window only)
  virtual LossDetection loss_detection() const = 0;
  // A controller of its own ignores this; one shared by several senders (LinkShare) gives
  // an idle or finished sender's share of the link to the others.
  virtual void on_demand(Nanos /*now*/, Demand /*d*/) {}
};

}  // namespace sg::ltp
