// GlooRingParticipant: ring all-reduce as gloo runs it (gloo/allreduce.cc, the algorithm
// PyTorch's ProcessGroupGloo uses for dense CPU tensors), for the simulator's check against
// real gloo on the testbed. Unlike RingParticipant (one transfer per ring step), gloo
//   - cuts the gradient into segments of at most 1 MiB (a multiple of the ring size, at least
//     two per site) and runs reduce-scatter, then all-gather, one segment per iteration;
//   - keeps two iterations in flight: iteration i is issued once the receive and the send of
//     iteration i-2 have completed;
//   - sends a segment only once the receiver has posted its receive (tcp::Pair waits for the
//     peer's NOTIFY_RECV_READY), i.e. once the receiver has completed iteration i-2.
// So at most two segments are outstanding on any link, and a slow link holds the whole ring
// back segment by segment. Here each phase is one streaming LTP transfer to the next site on
// the pair's persistent TCP-like controller; a segment's chunks are released when both gates
// above are open, the receiver's readiness read from the cumulative ACK of segment i-2 (its
// receive of it complete). A send completes when released (gloo's send completes once the
// socket took the bytes).
#pragma once

#include <memory>
#include <vector>

#include "sim/participants.h"

namespace sg::sim {

struct GlooRingConfig {
  RingConfig ring;                       // the ring, this site, chunk and model size, connection
  uint64_t max_segment_bytes = 1 << 20;  // gloo's AllreduceOptionsImpl::kMaxSegmentSize
};

class GlooRingParticipant final : public Participant, private ltp::ReceiverSink {
 public:
  explicit GlooRingParticipant(const GlooRingConfig& cfg);
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override;
  Nanos poll(Nanos now, ltp::PacketSink& tx) override;
  bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) override;
  bool round_done() const override { return done_; }
  Nanos round_finished() const override { return finished_; }
  std::span<const float> result() const override { return {work_.data(), work_.size()}; }
  ParticipantStats stats() const override { return stats_; }
  size_t segments() const { return segs_; }

 private:
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override;
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override { ++stats_.bubbles; }
  void on_transfer_end(const ltp::TransferSummary&) override {}
  // Segment index (into the gradient) sent / received at iteration i of a phase.
  size_t send_seg(int phase, size_t i) const;
  size_t recv_seg(int phase, size_t i) const;
  size_t seg_floats(size_t seg) const;  // 0 past the end of the gradient
  void start_phase(int phase, Nanos now);
  void advance(Nanos now, ltp::PacketSink& tx);

  RingConfig cfg_;
  uint64_t max_segment_bytes_;
  size_t n_ = 0, q_ = 0;            // ring size; this site's rank in gloo's numbering
  size_t segs_ = 0, per_rank_ = 0;  // segments, segments per rank
  size_t seg_len_ = 0;              // floats per segment (the last ones may be shorter or empty)
  size_t iters_ = 0;                // iterations per phase
  uint32_t seg_chunks_ = 0;         // chunks per segment in a phase's transfer (padded)
  uint16_t self_node_ = 0, next_node_ = 0, prev_node_ = 0;
  std::vector<float> work_;
  std::vector<uint8_t> send_buf_;     // a phase's transfer: segment i at i * seg_chunks_ chunks
  std::vector<uint32_t> recv_count_;  // chunks of iteration i received this phase
  const agg::AddKernels& add_ = agg::add_kernels(agg::best_isa());  // the gateways' SIMD add
  Rng rng_;
  PersistentTcp rc_;
  std::unique_ptr<ltp::Sender> sender_;
  std::unique_ptr<ltp::Receiver> receiver_;
  int phase_ = 0;            // 0 reduce-scatter, 1 all-gather, 2 finished
  size_t issued_ = 0;        // iterations issued (receive posted) this phase
  size_t released_ = 0;      // iterations whose send went out (chunks released)
  uint32_t round_ = 0;
  bool running_ = false, done_ = false;
  Nanos finished_ = 0;
  ParticipantStats stats_;
};

}  // namespace sg::sim
