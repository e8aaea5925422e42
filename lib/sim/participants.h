// What a simulated site runs for one synchronisation round. Every participant is an
// Endpoint of the Wan built on the real lib/ state machines:
//   SyncParticipant — sync::SiteSync unchanged (stormgate's trees, and the PS / blind-tree
//                     baselines as plans; reliable_baseline for the TCP-like transport);
//   RingParticipant — ring all-reduce (reduce-scatter then all-gather), one transfer per
//                     ring step as Horovod's ring moves large messages, on one ltp::Sender
//                     to the next site and one ltp::Receiver, in the reliable setting
//                     SiteSync uses for its baseline (AIMD, no Early Close). The ring's
//                     window persists across its 2(n-1) steps and across rounds, like a
//                     long-lived TCP connection (no slow start per step). gloo's own ring,
//                     segmented with two segments in flight, is sim/gloo_ring.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "aggregate/add_kernels.h"
#include "common/rng.h"
#include "ltp/tcp_cc.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "sim/wan.h"
#include "sync/site_sync.h"

namespace sg::sim {

using TcpCc = ltp::TcpCc;  // the TCP-like baselines' congestion control

struct ParticipantStats {
  uint64_t bubbles = 0;
  uint64_t retransmits = 0;
  uint64_t early_closes = 0;
  uint64_t fallbacks = 0;
  uint64_t timeouts = 0;
  uint64_t bytes_sent = 0;
};

class Participant : public Endpoint {
 public:
  virtual bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) = 0;
  virtual bool round_done() const = 0;
  virtual Nanos round_finished() const = 0;
  virtual std::span<const float> result() const = 0;
  virtual ParticipantStats stats() const = 0;
};

// Timeouts that suit WAN rounds of many seconds (the gateway defaults suit sub-second ones).
struct SimTimeouts {
  Nanos round_timeout = 3600 * kSecond;
  Nanos give_up_after = 600 * kSecond;
  Nanos abandon_after = 600 * kSecond;
};

// Site `self`'s random seed in a run seeded with `seed` (its own stream per site).
inline uint64_t site_seed(uint64_t seed, int self) { return seed * 7919 + static_cast<uint64_t>(self); }

// Site `self` of `n` (LTP node ids 1..n).
sync::SyncConfig make_sync_config(int n, int self, uint32_t chunk_bytes, bool reliable, uint64_t seed,
                                  const SimTimeouts& t = {}, TcpCc cc = TcpCc::kNewReno);

class SyncParticipant final : public Participant, private sync::SampleSink {
 public:
  explicit SyncParticipant(const sync::SyncConfig& cfg) : sync_(cfg) { sync_.set_sample_sink(this); }
  sync::SiteSync& sync() { return sync_; }
  const sync::SiteSync& sync() const { return sync_; }

  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override { sync_.on_packet(msg, now, tx); }
  Nanos poll(Nanos now, ltp::PacketSink& tx) override { return sync_.poll(now, tx); }
  bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) override {
    return sync_.begin_round(round, local, now, tx);
  }
  bool round_done() const override { return sync_.round_done(); }
  Nanos round_finished() const override { return sync_.round_finished(); }
  std::span<const float> result() const override { return sync_.result(); }
  ParticipantStats stats() const override;
  // RTT samples seen by this site's receiver (latest per source node), for the policy.
  Nanos last_rtt_from(uint16_t node) const { return node < rtt_.size() ? rtt_[node] : -1; }

 private:
  void on_sample(const ltp::ArrivalSample& s) override {
    if (s.rtt > 0 && s.src_node < rtt_.size()) rtt_[s.src_node] = s.rtt;
  }
  sync::SiteSync sync_;
  std::vector<Nanos> rtt_ = std::vector<Nanos>(1024, -1);
};

// A TCP-like controller whose window survives Sender::start (a persistent connection): only
// the first reset initialises it.
class PersistentTcp final : public ltp::RateController {
 public:
  explicit PersistentTcp(TcpCc cc) : inner_(ltp::make_tcp_controller(cc)) {}
  const char* name() const override { return inner_->name(); }
  void reset(Nanos now, uint32_t mss) override {
    if (!started_) inner_->reset(now, mss);
    started_ = true;
  }
  void on_ack(const ltp::AckEvent& ev) override { inner_->on_ack(ev); }
  void on_loss(const ltp::LossEvent& ev) override { inner_->on_loss(ev); }
  uint64_t cwnd_bytes() const override { return inner_->cwnd_bytes(); }
  double pacing_rate() const override { return inner_->pacing_rate(); }
  ltp::LossDetection loss_detection() const override { return inner_->loss_detection(); }

 private:
  std::unique_ptr<ltp::RateController> inner_;
  bool started_ = false;
};

// A ring's connection to its next site, reliable as TCP (no Early Close; every chunk).
ltp::SenderConfig reliable_sender_config(uint16_t self, uint16_t peer, uint32_t max_chunks, const SimTimeouts& t);
ltp::ReceiverConfig reliable_receiver_config(uint16_t self, uint32_t max_chunks, const SimTimeouts& t);

struct RingConfig {
  std::vector<int> order;       // the ring: sim site indices; node id = index + 1
  int self = 0;                 // sim site index
  uint32_t chunk_bytes = 8000;  // multiple of 4
  size_t floats = 0;            // model size
  uint64_t seed = 1;
  SimTimeouts timeouts;
  TcpCc cc = TcpCc::kNewReno;
};

class RingParticipant final : public Participant, private ltp::ReceiverSink {
 public:
  explicit RingParticipant(const RingConfig& cfg);
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override;
  Nanos poll(Nanos now, ltp::PacketSink& tx) override;
  bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) override;
  bool round_done() const override { return done_; }
  Nanos round_finished() const override { return finished_; }
  std::span<const float> result() const override { return {work_.data(), work_.size()}; }
  ParticipantStats stats() const override { return stats_; }

 private:
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override;
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override { ++stats_.bubbles; }
  void on_transfer_end(const ltp::TransferSummary& s) override;
  int send_seg(int step) const;
  int recv_seg(int step) const;
  void try_send(Nanos now, ltp::PacketSink& tx);
  void check_done(Nanos now);

  RingConfig cfg_;
  int n_ = 0, pos_ = 0, steps_ = 0;
  uint16_t self_node_ = 0, next_node_ = 0, prev_node_ = 0;
  std::vector<size_t> seg_first_;  // n+1 boundaries in floats
  std::vector<float> work_;
  std::vector<uint8_t> recv_done_;
  const agg::AddKernels& add_ = agg::add_kernels(agg::best_isa());  // the gateways' SIMD add
  Rng rng_;
  PersistentTcp rc_;
  std::unique_ptr<ltp::Sender> sender_;
  std::unique_ptr<ltp::Receiver> receiver_;
  int next_step_ = 0;  // next step to send
  bool sending_ = false;
  uint32_t round_ = 0;
  bool running_ = false, done_ = false;
  Nanos finished_ = 0;
  ParticipantStats stats_;
};

// The best ring order for a bandwidth matrix (bytes/s, [i*n+j]): highest slowest link, then
// lowest total delay. Exhaustive for n <= 8, greedy widest-next-hop plus 2-opt otherwise.
std::vector<int> best_ring(int n, const std::vector<double>& bw, const std::vector<double>& rtt);

}  // namespace sg::sim
