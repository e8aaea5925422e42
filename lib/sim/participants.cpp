#include "sim/participants.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "config/config.h"
#include "wire/ltp_codec.h"

namespace sg::sim {

sync::SyncConfig make_sync_config(int n, int self, uint32_t chunk_bytes, bool reliable, uint64_t seed,
                                  const SimTimeouts& t, TcpCc cc) {
  sync::SyncConfig c;
  c.self_node = static_cast<uint16_t>(self + 1);
  for (int k = 0; k < n; ++k) c.site_nodes.push_back(static_cast<uint16_t>(k + 1));
  c.chunk_bytes = chunk_bytes;
  c.reliable_baseline = reliable;
  c.reliable_cc = cc;
  c.round_timeout = t.round_timeout;
  c.sender.give_up_after = t.give_up_after;
  c.receiver.abandon_after = t.abandon_after;
  c.seed = site_seed(seed, self);
  // As a gateway with the default transport.link_share (one job: a controller per transfer;
  // the baselines never share).
  c.share_links = !reliable && config::links_shared(config::GatewayConfig{});
  return c;
}

ParticipantStats SyncParticipant::stats() const {
  const auto& s = sync_.stats();
  ParticipantStats p;
  p.bubbles = s.up_bubbles + s.down_bubbles;
  p.retransmits = s.retransmits;
  p.early_closes = s.early_closes;
  p.fallbacks = s.fallbacks;
  p.timeouts = s.timeouts;
  p.bytes_sent = s.bytes_sent;
  return p;
}

RingParticipant::RingParticipant(const RingConfig& cfg) : cfg_(cfg), rng_(cfg.seed), rc_(cfg.cc) {
  n_ = static_cast<int>(cfg_.order.size());
  steps_ = 2 * (n_ - 1);
  pos_ = static_cast<int>(std::find(cfg_.order.begin(), cfg_.order.end(), cfg_.self) - cfg_.order.begin());
  self_node_ = static_cast<uint16_t>(cfg_.self + 1);
  next_node_ = static_cast<uint16_t>(cfg_.order[(pos_ + 1) % n_] + 1);
  prev_node_ = static_cast<uint16_t>(cfg_.order[(pos_ + n_ - 1) % n_] + 1);
  for (int s = 0; s <= n_; ++s) seg_first_.push_back(cfg_.floats * s / n_);
  work_.assign(cfg_.floats, 0.0f);
  recv_done_.assign(steps_, 0);
  size_t max_seg = 1;
  for (int s = 0; s < n_; ++s) max_seg = std::max(max_seg, seg_first_[s + 1] - seg_first_[s]);
  const uint32_t max_chunks = static_cast<uint32_t>((max_seg * 4 + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes);
  sender_ = std::make_unique<ltp::Sender>(reliable_sender_config(self_node_, next_node_, max_chunks, cfg_.timeouts), rc_, rng_);
  receiver_ = std::make_unique<ltp::Receiver>(reliable_receiver_config(self_node_, max_chunks, cfg_.timeouts));
}

ltp::SenderConfig reliable_sender_config(uint16_t self, uint16_t peer, uint32_t max_chunks, const SimTimeouts& t) {
  ltp::SenderConfig sc;
  sc.local_node = self;
  sc.peer_node = peer;
  sc.max_chunks = max_chunks;
  sc.give_up_after = t.give_up_after;
  return sc;
}

ltp::ReceiverConfig reliable_receiver_config(uint16_t self, uint32_t max_chunks, const SimTimeouts& t) {
  ltp::ReceiverConfig rc;
  rc.local_node = self;
  rc.max_chunks = max_chunks;
  rc.max_transfers = 8;
  rc.rounds_ahead = 0;
  rc.abandon_after = t.abandon_after;
  rc.early_close.enabled = false;  // reliable: every chunk, like TCP
  rc.early_close.max_loss_fraction = 0;
  return rc;
}

// Reduce-scatter step k (k < n-1): send segment (pos-k), receive (pos-k-1) and add it.
// All-gather step k (j = k-(n-1)): send segment (pos+1-j), receive (pos-j) and keep it.
int RingParticipant::send_seg(int k) const {
  const int j = k < n_ - 1 ? k : k - (n_ - 1) - 1;
  return ((pos_ - j) % n_ + n_) % n_;
}
int RingParticipant::recv_seg(int k) const {
  const int j = k < n_ - 1 ? k + 1 : k - (n_ - 1);
  return ((pos_ - j) % n_ + n_) % n_;
}

bool RingParticipant::begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) {
  if (running_ || local.size() != work_.size() || n_ < 2) return false;
  std::copy(local.begin(), local.end(), work_.begin());
  std::fill(recv_done_.begin(), recv_done_.end(), 0);
  round_ = round;
  running_ = true;
  done_ = false;
  next_step_ = 0;
  sending_ = false;
  receiver_->begin_round(1, round, 1, now, *this, tx);
  try_send(now, tx);
  return true;
}

void RingParticipant::try_send(Nanos now, ltp::PacketSink& tx) {
  if (!running_) return;
  if (sending_ && sender_->done()) {
    sending_ = false;
    stats_.retransmits += 0;  // counted at the end of the round
  }
  if (sending_ || next_step_ >= steps_) return;
  const int k = next_step_;
  if (k > 0 && !recv_done_[k - 1]) return;
  const int seg = send_seg(k);
  if (k == n_ - 1) {
    // Reduce-scatter done: this site holds the full sum of `seg`; the mean goes round.
    const float inv = 1.0f / static_cast<float>(n_);
    for (size_t i = seg_first_[seg]; i < seg_first_[seg + 1]; ++i) work_[i] *= inv;
  }
  ltp::TransferSpec spec;
  spec.job = 1;
  spec.round = round_;
  spec.policy_version = 1;
  spec.shard = static_cast<uint16_t>(k);
  spec.contributors = 1;
  spec.chunk_size = cfg_.chunk_bytes;
  spec.data = {reinterpret_cast<const uint8_t*>(work_.data() + seg_first_[seg]),
               (seg_first_[seg + 1] - seg_first_[seg]) * sizeof(float)};
  if (spec.data.empty() || !sender_->start(spec, now)) {
    // An empty segment (model smaller than the ring) has nothing to send.
    ++next_step_;
    return try_send(now, tx);
  }
  stats_.retransmits -= 0;
  sending_ = true;
  ++next_step_;
  sender_->poll(now, tx);
}

void RingParticipant::on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) {
  if (!running_ || c.key.round != round_ || c.key.src_node != prev_node_ || c.key.shard >= steps_) return;
  const int k = c.key.shard;
  const int seg = recv_seg(k);
  const size_t cf = cfg_.chunk_bytes / 4;
  const size_t off = seg_first_[seg] + static_cast<size_t>(c.chunk_index) * cf;
  const size_t len = payload.size() / 4;
  if (c.codec != CodecId::kF32 || payload.size() % 4 || off + len > seg_first_[seg + 1]) return;
  if (k < n_ - 1) {
    add_.add(work_.data() + off, payload.data(), len);
  } else {
    std::memcpy(work_.data() + off, payload.data(), payload.size());
  }
}

void RingParticipant::on_transfer_end(const ltp::TransferSummary& s) {
  if (!running_ || s.key.round != round_ || s.key.src_node != prev_node_ || s.key.shard >= steps_) return;
  recv_done_[s.key.shard] = 1;
}

void RingParticipant::check_done(Nanos now) {
  if (!running_ || next_step_ < steps_ || (sending_ && !sender_->done())) return;
  for (uint8_t d : recv_done_)
    if (!d) return;
  running_ = false;
  done_ = true;
  finished_ = now;
}

void RingParticipant::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  auto common = wire::parse_common(msg);
  if (!common) return;
  if (common->type == wire::MsgType::kData) {
    receiver_->on_packet(msg, now, *this, tx);
  } else if (common->src_node == next_node_ && sending_) {
    const uint64_t before = sender_->stats().retransmits;
    sender_->on_packet(msg, now);
    sender_->poll(now, tx);
    stats_.retransmits += sender_->stats().retransmits - before;
  }
  try_send(now, tx);
  check_done(now);
}

Nanos RingParticipant::poll(Nanos now, ltp::PacketSink& tx) {
  Nanos next = receiver_->poll(now, *this, tx);
  if (sending_ && !sender_->done()) {
    const uint64_t before = sender_->stats().retransmits;
    next = std::min(next, sender_->poll(now, tx));
    stats_.retransmits += sender_->stats().retransmits - before;
  }
  try_send(now, tx);
  if (sending_ && !sender_->done()) next = std::min(next, sender_->poll(now, tx));
  check_done(now);
  return next;
}

namespace {

double ring_score(const std::vector<int>& order, int n, const std::vector<double>& bw,
                  const std::vector<double>& rtt, double* delay) {
  double slow = 1e300;
  double d = 0;
  for (int i = 0; i < n; ++i) {
    const int a = order[i], b = order[(i + 1) % n];
    slow = std::min(slow, bw[static_cast<size_t>(a) * n + b]);
    d += rtt[static_cast<size_t>(a) * n + b];
  }
  *delay = d;
  return slow;
}

bool better(double slow, double delay, double best_slow, double best_delay) {
  if (slow > best_slow * (1 + 1e-9)) return true;
  return slow >= best_slow * (1 - 1e-9) && delay < best_delay;
}

}  // namespace

std::vector<int> best_ring(int n, const std::vector<double>& bw, const std::vector<double>& rtt) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (n <= 3) return order;
  std::vector<int> best = order;
  double best_delay = 0;
  double best_slow = ring_score(order, n, bw, rtt, &best_delay);
  if (n <= 8) {
    // Site 0 first: rotations are the same ring.
    while (std::next_permutation(order.begin() + 1, order.end())) {
      double d = 0;
      const double s = ring_score(order, n, bw, rtt, &d);
      if (better(s, d, best_slow, best_delay)) {
        best = order;
        best_slow = s;
        best_delay = d;
      }
    }
    return best;
  }
  for (int start = 0; start < n; ++start) {
    std::vector<int> o{start};
    std::vector<uint8_t> used(n, 0);
    used[start] = 1;
    for (int k = 1; k < n; ++k) {
      const int a = o.back();
      int pick = -1;
      for (int b = 0; b < n; ++b)
        if (!used[b] && (pick < 0 || bw[static_cast<size_t>(a) * n + b] > bw[static_cast<size_t>(a) * n + pick])) pick = b;
      used[pick] = 1;
      o.push_back(pick);
    }
    // 2-opt on the slowest link, then the delay.
    for (bool improved = true; improved;) {
      improved = false;
      double d0 = 0;
      const double s0 = ring_score(o, n, bw, rtt, &d0);
      for (int i = 1; i < n - 1 && !improved; ++i)
        for (int j = i + 1; j < n && !improved; ++j) {
          std::reverse(o.begin() + i, o.begin() + j + 1);
          double d = 0;
          const double s = ring_score(o, n, bw, rtt, &d);
          if (better(s, d, s0, d0)) improved = true;
          else std::reverse(o.begin() + i, o.begin() + j + 1);
        }
    }
    double d = 0;
    const double s = ring_score(o, n, bw, rtt, &d);
    if (better(s, d, best_slow, best_delay)) {
      best = o;
      best_slow = s;
      best_delay = d;
    }
  }
  return best;
}

}  // namespace sg::sim
