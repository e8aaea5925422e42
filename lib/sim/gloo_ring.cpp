#include "sim/gloo_ring.h"

#include <algorithm>
#include <cstring>

#include "wire/ltp_codec.h"

namespace sg::sim {

GlooRingParticipant::GlooRingParticipant(const GlooRingConfig& cfg)
    : cfg_(cfg.ring), max_segment_bytes_(cfg.max_segment_bytes), rng_(cfg.ring.seed), rc_(cfg.ring.cc) {
  n_ = cfg_.order.size();
  if (n_ < 2 || cfg_.chunk_bytes < sizeof(float)) return;  // nothing to run (begin_round refuses)
  const size_t pos = static_cast<size_t>(std::find(cfg_.order.begin(), cfg_.order.end(), cfg_.self) - cfg_.order.begin());
  // gloo sends to rank - 1 and receives from rank + 1; this ring sends to the next position.
  q_ = (n_ - pos) % n_;
  self_node_ = static_cast<uint16_t>(cfg_.self + 1);
  next_node_ = static_cast<uint16_t>(cfg_.order[(pos + 1) % n_] + 1);
  prev_node_ = static_cast<uint16_t>(cfg_.order[(pos + n_ - 1) % n_] + 1);
  // gloo's segmentation: enough segments of at most max_segment_bytes, at least two per rank,
  // a multiple of the ring size.
  const uint64_t bytes = cfg_.floats * sizeof(float);
  const uint64_t max_seg = std::max<uint64_t>(sizeof(float), max_segment_bytes_ / sizeof(float) * sizeof(float));
  const size_t want = std::max<size_t>((bytes + max_seg - 1) / max_seg, 2 * n_);
  segs_ = (want + n_ - 1) / n_ * n_;
  per_rank_ = segs_ / n_;
  seg_len_ = std::max<size_t>(1, (cfg_.floats + segs_ - 1) / segs_);
  iters_ = segs_ - per_rank_;
  const size_t chunk_floats = cfg_.chunk_bytes / sizeof(float);
  seg_chunks_ = static_cast<uint32_t>((seg_len_ + chunk_floats - 1) / chunk_floats);
  work_.assign(cfg_.floats, 0.0f);
  send_buf_.assign(iters_ * seg_chunks_ * cfg_.chunk_bytes, 0);
  recv_count_.assign(2 * iters_, 0);
  const uint32_t max_chunks = static_cast<uint32_t>(iters_ * seg_chunks_);
  sender_ = std::make_unique<ltp::Sender>(reliable_sender_config(self_node_, next_node_, max_chunks, cfg_.timeouts), rc_, rng_);
  receiver_ = std::make_unique<ltp::Receiver>(reliable_receiver_config(self_node_, max_chunks, cfg_.timeouts));
}

// gloo's offsets: reduce-scatter sends segment (q+1)*k + i and receives (q+2)*k + i (k segments
// per rank), all-gather sends q*k + i and receives (q+1)*k + i.
size_t GlooRingParticipant::send_seg(int phase, size_t i) const {
  return ((phase == 0 ? q_ + 1 : q_) * per_rank_ + i) % segs_;
}
size_t GlooRingParticipant::recv_seg(int phase, size_t i) const {
  return ((phase == 0 ? q_ + 2 : q_ + 1) * per_rank_ + i) % segs_;
}
size_t GlooRingParticipant::seg_floats(size_t seg) const {
  const size_t first = seg * seg_len_;
  return first >= cfg_.floats ? 0 : std::min(seg_len_, cfg_.floats - first);
}

bool GlooRingParticipant::begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) {
  if (running_ || local.size() != work_.size() || n_ < 2 || !sender_) return false;
  std::copy(local.begin(), local.end(), work_.begin());
  std::fill(recv_count_.begin(), recv_count_.end(), 0);
  round_ = round;
  running_ = true;
  done_ = false;
  receiver_->begin_round(1, round, 1, now, *this, tx);
  start_phase(0, now);
  advance(now, tx);
  return true;
}

void GlooRingParticipant::start_phase(int phase, Nanos now) {
  phase_ = phase;
  issued_ = released_ = 0;
  if (phase == 1) {  // reduce-scatter done: this rank's segments hold the sum; the mean goes round
    const float inv = 1.0f / static_cast<float>(n_);
    for (size_t k = 0; k < per_rank_; ++k) {
      const size_t seg = q_ * per_rank_ + k;
      for (size_t f = seg * seg_len_, e = f + seg_floats(seg); f < e; ++f) work_[f] *= inv;
    }
  }
  std::fill(send_buf_.begin(), send_buf_.end(), 0);
  ltp::TransferSpec spec;
  spec.job = 1;
  spec.round = round_;
  spec.policy_version = 1;
  spec.shard = static_cast<uint16_t>(phase);
  spec.contributors = 1;
  spec.chunk_size = cfg_.chunk_bytes;
  spec.data = send_buf_;
  spec.streaming = true;
  sender_->start(spec, now);
}

void GlooRingParticipant::advance(Nanos now, ltp::PacketSink& tx) {
  while (running_) {
    const size_t base = static_cast<size_t>(phase_) * iters_;
    // Post receives: two iterations in flight, each waiting on the one two before it.
    while (issued_ < iters_ &&
           (issued_ < 2 || (recv_count_[base + issued_ - 2] == seg_chunks_ && released_ > issued_ - 2)))
      ++issued_;
    // Send: once the receiver has completed iteration i-2 (and so posted its receive of i).
    bool sent = false;
    while (released_ < issued_ &&
           (released_ < 2 || sender_->acked_below() >= (released_ - 1) * seg_chunks_)) {
      const size_t seg = send_seg(phase_, released_);
      std::memcpy(send_buf_.data() + released_ * seg_chunks_ * cfg_.chunk_bytes, work_.data() + seg * seg_len_,
                  seg_floats(seg) * sizeof(float));
      for (uint32_t c = 0; c < seg_chunks_; ++c) sender_->release(static_cast<uint32_t>(released_ * seg_chunks_ + c), now);
      ++released_;
      sent = true;
    }
    if (sent) sender_->poll(now, tx);
    bool received = true;
    for (size_t i = 0; i < iters_ && received; ++i) received = recv_count_[base + i] == seg_chunks_;
    if (!received || released_ < iters_ || !sender_->done()) return;
    stats_.retransmits = sender_->stats().retransmits;  // the sender's count runs across rounds
    if (phase_ == 1) {
      phase_ = 2;
      running_ = false;
      done_ = true;
      finished_ = now;
      return;
    }
    start_phase(1, now);
  }
}

void GlooRingParticipant::on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) {
  if (!running_ || c.key.round != round_ || c.key.src_node != prev_node_ || c.key.shard > 1) return;
  if (c.codec != CodecId::kF32 || payload.size() % sizeof(float) || seg_chunks_ == 0) return;
  const size_t it = c.chunk_index / seg_chunks_;
  if (it >= iters_) return;
  const int phase = c.key.shard;
  // The receive side of iteration `it` in that phase (the peer may start the all-gather
  // while this site still sends its last reduce-scatter segments: those were copied out).
  const size_t seg = recv_seg(phase, it);
  const size_t at = (c.chunk_index % seg_chunks_) * (cfg_.chunk_bytes / sizeof(float));
  const size_t have = seg_floats(seg);
  const size_t len = at < have ? std::min(payload.size() / sizeof(float), have - at) : 0;
  float* dst = work_.data() + seg * seg_len_ + at;
  if (phase == 0) {
    add_.add(dst, payload.data(), len);
  } else {
    std::memcpy(dst, payload.data(), len * sizeof(float));
  }
  ++recv_count_[static_cast<size_t>(phase) * iters_ + it];
}

void GlooRingParticipant::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  if (!sender_) return;
  auto common = wire::parse_common(msg);
  if (!common) return;
  if (common->type == wire::MsgType::kData) {
    receiver_->on_packet(msg, now, *this, tx);
  } else if (common->src_node == next_node_ && running_) {
    sender_->on_packet(msg, now);
    sender_->poll(now, tx);
  }
  advance(now, tx);
}

Nanos GlooRingParticipant::poll(Nanos now, ltp::PacketSink& tx) {
  if (!sender_) return ltp::kNever;
  Nanos next = receiver_->poll(now, *this, tx);
  if (running_ && !sender_->done()) next = std::min(next, sender_->poll(now, tx));
  advance(now, tx);
  if (running_ && !sender_->done()) next = std::min(next, sender_->poll(now, tx));
  return next;
}

}  // namespace sg::sim
