// LTP's own rate controller: paces at the measured delivery rate (BBR-like) and does NOT
// back off on loss, because on lossy WAN paths most loss is not congestion and gradients
// tolerate it (LTP retransmits until the receiver closes the transfer).
//
//   btlbw     = max delivery-rate sample over the last kBwRounds round trips
//   min_rtt   = min RTT sample over the last min_rtt_window
//   startup:  pacing gain 2.885 until btlbw stops growing 25% for 3 rounds; then drain
//             (gain 1/2.885) until inflight <= BDP; then probe_bw cycles gains
//             {1.25, 0.75, 1 x6}, one min_rtt each.
//   pacing    = gain * btlbw;   cwnd = max(cwnd_gain * btlbw * min_rtt, 4 MSS)
// Random loss never slows it down. Two things do: a retransmission timeout (everything in
// flight vanished) halves btlbw, and a round trip losing more than congestion_loss of its
// packets -- far above any loss Early Close would accept, so it is overload (e.g. many
// senders into one shallow buffer), not noise -- trims btlbw by 15%, and ends startup once
// the rate has stopped growing or in the second such round trip in a row (an early one while
// the rate still doubles can be a loss burst on a lossy path). Both
// are a ceiling on btlbw that any later sample above it lifts, not a change to the filter.
//
// The filter ages only by round trips that measured the path (some sample not app-limited):
// a streaming sender waiting for upstream chunks keeps its estimate for when they come.
//
// The path model outlives the transfer. Sender::start resets the controller per transfer,
// and a gateway's sender to a peer runs one transfer per round: startup every round wasted
// seconds on long RTTs (it overshoots into shallow queues). reset() keeps the filter's rate
// (without the ceiling: the tail timeouts that end many transfers say nothing about the next
// one) and min_rtt; the next transfer starts in `resume`:
//   resume:  pace at the kept rate (gain 1; startup_gain if startup had not ended, the rate
//            then being only a lower bound; 1.25 after a transfer too short to be judged,
//            whose ACK rate only ever raises the kept rate), cwnd = cwnd_gain x kept BDP,
//            and measure the ACK rate from the first ACK on, over non-app-limited ACKs. After half a min_rtt
//            of them it decides: at least resume_confirm x the kept rate -> the path still
//            carries it: it enters the filter and the controller goes on to probe_bw at its
//            1.25 phase, so every transfer probes once (or startup, for a lower bound); less, while the sender offered the kept rate
//            (the send times of the chunks those ACKs cover) -> the path shrank (or is shared
//            now): btlbw is what was measured, and probe_bw begins with its 0.75 phase to drain the
//            queue the kept rate built. A window in which the sender offered less than the
//            kept rate and all of it was delivered gives no verdict: it starts over. So a
//            known path is full from the first packet, and a wrong model costs about 1.5
//            round trips at the old rate.
// A path idle (no ACK) for longer than keep_path_for is forgotten: startup again.
#pragma once

#include <array>
#include <cstddef>

#include "ltp/rate_controller.h"

namespace sg::ltp {

struct DeliveryRateConfig {
  double startup_gain = 2.885;
  double cwnd_gain = 2.0;
  Nanos initial_rtt = 1 * kMilli;   // for pacing before the first sample
  double initial_rate = 0;          // bytes/s paced before the first sample; 0: from initial_rtt
  Nanos min_rtt_window = 10 * kSecond;
  Nanos min_rto = 1 * kMilli;
  Nanos peer_ack_delay = 0;         // the receivers' longest deliberate ACK delay (LossDetection::max_ack_delay)
  uint32_t dup_threshold = 8;       // tolerates multipath reordering
  double max_rate = 0;              // bytes/s cap (e.g. the NIC line rate); 0 = none
  double congestion_loss = 0.2;     // per-round loss fraction treated as overload
  uint32_t congestion_min_packets = 20;  // ... once a round has at least this many packets
  uint32_t startup_overload_rounds = 2;  // overloaded round trips in a row that end a growing startup
  Nanos keep_path_for = 10 * kSecond;   // path model kept over idle gaps this long; 0 = never
  double resume_confirm = 0.85;         // ACK rate / kept rate that confirms the kept model
  // Pacing gain of a transfer that resumes after one the resume check never judged (see
  // reset()): it probes above the kept rate, as probe_bw's 1.25 phase would have.
  double unjudged_resume_gain = 1.25;
  // The model's time scale: the window covers at least this much time at the bottleneck
  // rate, and a filter round and a probe_bw phase last at least this long. On a LAN the round
  // trip is a few microseconds, but a receiver (or this sender's engine) that sleeps when
  // idle answers ~55 us later (Linux timer slack): a window of 2 x rate x min_rtt then stalls
  // every few packets, a probe phase is shorter than one packet, and the delivery rate learnt
  // is the stalled one, for good. No effect on paths whose round trip is longer.
  Nanos rtt_floor = 200 * kMicro;
};

class DeliveryRateController final : public RateController {
 public:
  explicit DeliveryRateController(const DeliveryRateConfig& cfg = {}) : cfg_(cfg) {}
  const char* name() const override { return "ltp-delivery-rate"; }
  void reset(Nanos now, uint32_t mss) override;
  void on_ack(const AckEvent& ev) override;
  void on_loss(const LossEvent& ev) override;
  uint64_t cwnd_bytes() const override;
  double pacing_rate() const override;
  LossDetection loss_detection() const override;

  double btlbw() const { return btlbw_; }
  Nanos min_rtt() const { return min_rtt_; }
  int mode() const { return static_cast<int>(mode_); }
  bool resuming() const { return mode_ == Mode::kResume; }
  double path_bw() const { return path_bw_; }  // what the next transfer resumes from
  uint64_t resumes_confirmed() const { return resumes_confirmed_; }
  uint64_t resumes_shrunk() const { return resumes_shrunk_; }
  // Resume windows in which the sender offered less than the kept rate and the path carried
  // all of it: no verdict, the window started over.
  uint64_t resumes_unjudged() const { return resumes_unjudged_; }

 private:
  enum class Mode { kStartup, kDrain, kProbeBw, kResume };
  static constexpr size_t kBwRounds = 10;
  static constexpr double kStartupGrowth = 1.25;  // per round trip: startup still finding the rate
  static constexpr std::array<double, 8> kCycle{1.25, 0.75, 1, 1, 1, 1, 1, 1};

  double gain() const;
  uint64_t bdp() const;

  DeliveryRateConfig cfg_;
  uint32_t mss_ = 1400;
  Mode mode_ = Mode::kStartup;
  std::array<double, kBwRounds> bw_rounds_{};
  size_t bw_slot_ = 0;
  double btlbw_ = 0;          // max of bw_rounds_, at most ceiling_
  double ceiling_ = 0;        // after a timeout or overload (0: none)
  bool dark_ = false;         // timed out, nothing acknowledged since
  double full_bw_ = 0;
  int full_bw_count_ = 0;
  uint64_t next_round_delivered_ = 0;
  Nanos round_stamp_ = 0;     // when the current filter round began
  Nanos min_rtt_ = 0;
  Nanos min_rtt_stamp_ = 0;
  size_t cycle_ = 0;
  Nanos cycle_start_ = 0;
  uint64_t inflight_ = 0;
  uint64_t round_lost_ = 0, round_acked_ = 0, round_lost_pkts_ = 0, round_acked_pkts_ = 0;
  uint64_t overloads_ = 0;
  // The overload episode in progress (round trips trimmed in a row), kept so that it can be
  // undone when its losses prove false: the ceiling before its first trim, and its bytes.
  bool episode_ = false;
  double undo_ceiling_ = 0;
  uint64_t episode_lost_ = 0, episode_acked_ = 0, episode_spurious_ = 0;
  uint64_t undos_ = 0;
  uint32_t overloaded_rounds_ = 0;  // in a row, up to the last round trip
  double round_start_bw_ = 0;       // btlbw when the last round trip began
  bool app_limited_round_ = false;  // the sample opening this round was app-limited: no startup exit
  // Kept between transfers: the filter's rate, whether startup had ended (else a lower
  // bound), and the last ACK (idle since).
  double path_bw_ = 0;
  bool path_full_ = false;
  bool unjudged_ = false;  // the last transfer ended before the resume check
  Nanos path_stamp_ = 0;
  // kResume: the kept rate under test and the ACK-rate window (first non-app-limited ACK).
  double resume_bw_ = 0;
  bool resume_full_ = false;
  Nanos resume_t0_ = -1;
  uint64_t resume_d0_ = 0;
  Nanos resume_s0_ = 0;  // send time of the newest chunk acknowledged at the window's start
  // The transfer's ACKs in kResume: the first and the last (time, delivered).
  Nanos train_t0_ = -1, train_last_t_ = -1;
  uint64_t train_d0_ = 0, train_last_d_ = 0;
  uint64_t resumes_confirmed_ = 0, resumes_shrunk_ = 0, resumes_unjudged_ = 0;

  void resume_check(const AckEvent& ev);
  void update_btlbw();
  void undo_if_false(uint64_t spurious);

 public:
  uint64_t overloads() const { return overloads_; }
  uint64_t undos() const { return undos_; }
};

}  // namespace sg::ltp
