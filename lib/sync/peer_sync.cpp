#include "sync/peer_sync.h"

#include <algorithm>

#include "compress/accumulate.h"

namespace sg::sync {

struct PeerSync::Out {
  ltp::DeliveryRateController rc;
  std::unique_ptr<ltp::Sender> sender;
  bool started = false;  // a transfer of the running round
  uint64_t seen_retx = 0, seen_bytes = 0;
  explicit Out(const ltp::DeliveryRateConfig& c) : rc(c) {}
};

namespace {

class NullSink final : public ltp::PacketSink {
 public:
  void send(const ltp::TxMeta&, std::span<const uint8_t>, std::span<const uint8_t>) override {}
};

}  // namespace

PeerSync::PeerSync(const PeerSyncConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  for (size_t i = 0; i < cfg_.site_nodes.size(); ++i)
    if (cfg_.site_nodes[i] == cfg_.self_node) self_ = static_cast<int>(i);
  const uint64_t chunks = cfg_.chunk_bytes ? (cfg_.model_floats * 4 + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes : 0;
  if (self_ < 0 || cfg_.site_nodes.size() > kMaxPeerSites) error_ = PeerSyncError::kSelf;
  else if (cfg_.chunk_bytes == 0 || cfg_.chunk_bytes % 4 || cfg_.chunk_bytes > 9000) error_ = PeerSyncError::kChunkBytes;
  else if (cfg_.model_floats == 0 || chunks > (1u << 24)) error_ = PeerSyncError::kModel;
  else if (cfg_.staleness > kMaxStaleness) error_ = PeerSyncError::kStaleness;
  if (!ok()) return;
  chunks_ = static_cast<uint32_t>(chunks);
  const size_t n = cfg_.site_nodes.size();
  const uint32_t window = 2 * cfg_.staleness + 2;
  ltp::ReceiverConfig rc = cfg_.receiver;
  rc.local_node = cfg_.self_node;
  rc.max_chunks = chunks_;
  rc.rounds_ahead = window - 1;
  rc.max_transfers = std::max<uint32_t>(rc.max_transfers, static_cast<uint32_t>(n * window + 4));
  rc.max_jobs = std::max<uint32_t>(rc.max_jobs, 1);
  receiver_ = std::make_unique<ltp::Receiver>(rc);
  slots_.resize(window);
  for (auto& s : slots_) s.acc = std::make_unique<agg::Accumulator>(cfg_.model_floats, cfg_.chunk_bytes / 4);
  slot_from_.assign(window * n, 0);
  outs_.resize(n);
  ended_.assign(n, 0);
  stale_round_.assign(n, 0);
  mixed_from_.assign(n, 0);
  result_.assign(cfg_.model_floats, 0.0f);
  counts_.assign(chunks_, 0);
  NullSink null_tx;
  receiver_->begin_round(cfg_.job, 0, 0, 0, *this, null_tx);
}

PeerSync::~PeerSync() = default;

int PeerSync::index_of(uint16_t node) const {
  for (size_t i = 0; i < cfg_.site_nodes.size(); ++i)
    if (cfg_.site_nodes[i] == node) return static_cast<int>(i);
  return -1;
}

double PeerSync::measured_rate(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(outs_.size()) || !outs_[peer]) return 0;
  return outs_[peer]->rc.btlbw();
}

Nanos PeerSync::measured_rtt(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(outs_.size()) || !outs_[peer]) return 0;
  return outs_[peer]->sender->min_rtt();
}

bool PeerSync::set_selection(const topo::Selection& receivers) {
  const size_t n = cfg_.site_nodes.size();
  if (!ok() || running_ || receivers.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint8_t> seen(n, 0);
    for (int r : receivers[i]) {
      if (r < 0 || static_cast<size_t>(r) >= n || static_cast<size_t>(r) == i || seen[r]) return false;
      seen[r] = 1;
    }
  }
  sel_ = receivers;
  senders_.clear();
  for (size_t i = 0; i < n; ++i)
    if (std::find(sel_[i].begin(), sel_[i].end(), self_) != sel_[i].end())
      senders_.push_back(static_cast<int>(i));
  for (int r : sel_[self_])
    if (!outs_[r]) {
      outs_[r] = std::make_unique<Out>(cfg_.rate);
      new_sender(r);
    }
  return true;
}

// Moves the oldest round still usable to `floor`: the receiver closes older transfers, and
// what older slots hold was never mixed in time.
void PeerSync::raise_floor(uint32_t floor, Nanos now, ltp::PacketSink& tx) {
  if (floor <= floor_) return;
  floor_ = floor;
  receiver_->begin_round(cfg_.job, floor, 0, now, *this, tx);
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& s = slots_[k];
    if (!s.used || s.round >= floor) continue;
    for (uint32_t c = 0; c < chunks_; ++c) stats_.stale_chunks += s.acc->contributors(c);
    clear_slot(k);
  }
}

// A fresh sender to site r (its rate model, in Out, is kept).
void PeerSync::new_sender(int r) {
  ltp::SenderConfig sc = cfg_.sender;
  sc.local_node = cfg_.self_node;
  sc.peer_node = cfg_.site_nodes[r];
  sc.max_chunks = chunks_;
  outs_[r]->sender = std::make_unique<ltp::Sender>(sc, outs_[r]->rc, rng_);
  outs_[r]->seen_retx = outs_[r]->seen_bytes = 0;
}

// What a sender did since it was last counted.
void PeerSync::count_sends(Out& o) {
  const auto& ss = o.sender->stats();
  stats_.retransmits += ss.retransmits - o.seen_retx;
  stats_.bytes_sent += ss.bytes_sent - o.seen_bytes;
  o.seen_retx = ss.retransmits;
  o.seen_bytes = ss.bytes_sent;
}

void PeerSync::clear_slot(size_t k) {
  slots_[k].acc->reset();
  slots_[k].used = false;
  const size_t n = cfg_.site_nodes.size();
  std::fill(slot_from_.begin() + static_cast<std::ptrdiff_t>(k * n), slot_from_.begin() + static_cast<std::ptrdiff_t>((k + 1) * n), 0);
}

bool PeerSync::begin_round(uint32_t round, std::span<const float> update, Nanos now, ltp::PacketSink& tx) {
  if (!ok() || running_ || sel_.empty() || update.size() != cfg_.model_floats || round <= round_) return false;
  round_ = round;
  update_ = update;
  running_ = true;
  done_ = false;
  started_ = now;
  // A round skipped ahead: whatever is older than the bound for it is stale already.
  raise_floor(round > cfg_.staleness ? round - cfg_.staleness : 0, now, tx);
  for (auto& o : outs_)
    if (o) o->started = false;
  for (int r : sel_[self_]) start_send(r, now, tx);
  check_done(now, tx);
  return true;
}

void PeerSync::start_send(int r, Nanos now, ltp::PacketSink& tx) {
  Out& o = *outs_[r];
  ltp::TransferSpec spec;
  spec.job = cfg_.job;
  spec.round = round_;
  spec.chunk_size = cfg_.chunk_bytes;
  spec.data = {reinterpret_cast<const uint8_t*>(update_.data()), update_.size() * sizeof(float)};
  o.started = o.sender->start(spec, now);
  if (o.started) {
    ++stats_.updates_sent;
    o.sender->poll(now, tx);
  }
}

// Site p came back as a new process while this round runs. Its old process's update that has
// not arrived never will (its transfer here is given up, the rest filled as bubbles), and our
// update to it died with it: our sender would resend only what the old process had not
// acknowledged, so the new one would hold part of it and wait for the rest until its round
// timeout. It is sent again, whole, to the new process (which drops it as stale if it rejoins
// at a later round).
void PeerSync::peer_restarted(int p, Nanos now, ltp::PacketSink& tx) {
  if (!running_ || p < 0 || p == self_ || static_cast<size_t>(p) >= cfg_.site_nodes.size()) return;
  ++stats_.peer_restarts;
  const ltp::TransferKey key{cfg_.job, round_, 0, cfg_.site_nodes[static_cast<size_t>(p)]};
  if (!receiver_->abandon(key, now, *this, tx) && std::find(senders_.begin(), senders_.end(), p) != senders_.end())
    ended_[static_cast<size_t>(p)] = std::max(ended_[static_cast<size_t>(p)], round_ + 1);  // nothing of it came
  if (outs_[static_cast<size_t>(p)] && outs_[static_cast<size_t>(p)]->started) {
    count_sends(*outs_[static_cast<size_t>(p)]);
    new_sender(p);
    start_send(p, now, tx);
  }
  check_done(now, tx);
}

PeerSync::Slot* PeerSync::slot_for(uint32_t round, size_t& k) {
  if (round < floor_ || round >= floor_ + slots_.size()) return nullptr;
  k = round % slots_.size();
  Slot& s = slots_[k];
  if (s.used && s.round != round) return nullptr;  // cannot happen inside the window
  s.used = true;
  s.round = round;
  return &s;
}

void PeerSync::on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) {
  const int src = index_of(c.key.src_node);
  if (src < 0 || src == self_ || c.key.job != cfg_.job || c.key.shard != 0 || c.chunk_count != chunks_) {
    ++stats_.bad_chunks;
    return;
  }
  if (c.holes & 1) return;  // the sender had nothing there
  if (c.key.round < floor_) {
    ++stats_.stale_chunks;
    return;
  }
  size_t k = 0;
  Slot* s = slot_for(c.key.round, k);
  if (!s || compress::add_encoded(*s->acc, c.chunk_index, c.codec, payload, 1) != compress::CodecError::kOk) {
    ++stats_.bad_chunks;
    return;
  }
  slot_from_[k * cfg_.site_nodes.size() + static_cast<size_t>(src)] = 1;
}

void PeerSync::on_bubble(const ltp::ChunkRef& c, ltp::FillRule) {
  if (c.key.job == cfg_.job && c.key.round >= floor_) ++stats_.bubbles;
}

void PeerSync::on_transfer_end(const ltp::TransferSummary& s) {
  const int src = index_of(s.key.src_node);
  if (src < 0 || src == self_ || s.key.job != cfg_.job || s.key.round < floor_) return;
  if (s.reason == ltp::CloseReason::kEarlyClose) ++stats_.early_closes;
  ended_[src] = std::max(ended_[src], s.key.round + 1);
}

// Every site sending here delivered an update recent enough for the bound.
bool PeerSync::inputs_ready() const {
  const uint32_t need = round_ > cfg_.staleness ? round_ - cfg_.staleness : 0;
  for (int j : senders_)
    if (ended_[j] < need + 1) return false;
  return true;
}

bool PeerSync::sends_done() const {
  for (const auto& o : outs_)
    if (o && o->started && !o->sender->done()) return false;
  return true;
}

void PeerSync::check_done(Nanos now, ltp::PacketSink& tx) {
  if (!running_) return;
  if (sends_done() && inputs_ready()) {
    finish(now, tx);
  } else if (now - started_ >= cfg_.round_timeout) {
    ++stats_.timeouts;
    abandon_sends();
    finish(now, tx);
  }
}

// Sends still running at a timeout (a receiver that never answered) get fresh senders: the
// old ones would read the update after the round gave it back. Allocates, on failure only.
void PeerSync::abandon_sends() {
  for (size_t r = 0; r < outs_.size(); ++r) {
    if (!outs_[r]) continue;
    Out& o = *outs_[r];
    if (!o.started || o.sender->done()) continue;
    ++stats_.sends_abandoned;
    count_sends(o);
    new_sender(static_cast<int>(r));
    o.started = false;
  }
}

// The round's mix: own update plus every received chunk of a round <= this one, each chunk
// divided by its own count.
void PeerSync::finish(Nanos now, ltp::PacketSink& tx) {
  const size_t n = cfg_.site_nodes.size();
  const size_t cf = cfg_.chunk_bytes / 4;
  std::copy(update_.begin(), update_.end(), result_.begin());
  std::fill(counts_.begin(), counts_.end(), 1u);
  std::fill(mixed_from_.begin(), mixed_from_.end(), 0);
  for (size_t k = 0; k < slots_.size(); ++k) {
    Slot& s = slots_[k];
    if (!s.used || s.round > round_) continue;
    for (uint32_t c = 0; c < chunks_; ++c) {
      const uint32_t got = s.acc->contributors(c);
      if (got == 0) continue;
      const auto v = s.acc->chunk_values(c);
      float* out = result_.data() + c * cf;
      for (size_t e = 0; e < v.size(); ++e) out[e] += v[e];
      counts_[c] += got;
      stats_.chunks_mixed += got;
    }
    for (size_t j = 0; j < n; ++j) mixed_from_[j] |= slot_from_[k * n + j];
    clear_slot(k);
  }
  for (uint32_t c = 0; c < chunks_; ++c) {
    if (counts_[c] == 1) continue;
    const float inv = 1.0f / static_cast<float>(counts_[c]);
    float* out = result_.data() + c * cf;
    const size_t len = std::min(cf, result_.size() - c * cf);
    for (size_t e = 0; e < len; ++e) out[e] *= inv;
  }
  last_mixed_ = 0;
  for (uint8_t m : mixed_from_) last_mixed_ += m;
  stats_.updates_mixed += last_mixed_;
  for (auto& o : outs_)
    if (o) count_sends(*o);
  ++stats_.rounds;
  running_ = false;
  done_ = true;
  finished_ = now;
  raise_floor(round_ + 1 > cfg_.staleness ? round_ + 1 - cfg_.staleness : 0, now, tx);
}

void PeerSync::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  if (!ok()) return;
  auto common = wire::parse_common(msg);
  if (!common) return;
  if (common->type == wire::MsgType::kData) {
    const uint64_t stale = receiver_->stats().stale_round;
    receiver_->on_packet(msg, now, *this, tx);
    // Refused as stale: an update older than the bound. Counted once per sender and round,
    // unless that update already ended here (a late retransmission, not a late update).
    if (receiver_->stats().stale_round != stale)
      if (auto d = wire::parse_data(msg)) {
        const int src = index_of(d->f.src_node);
        if (src >= 0 && src != self_ && ended_[src] <= d->f.round && stale_round_[src] != d->f.round + 1) {
          stale_round_[src] = d->f.round + 1;
          ++stats_.stale_updates;
        }
      }
  } else {
    const int p = index_of(common->src_node);
    if (p >= 0 && p != self_ && outs_[p]) {
      outs_[p]->sender->on_packet(msg, now);
      outs_[p]->sender->poll(now, tx);
    }
  }
  check_done(now, tx);
}

Nanos PeerSync::poll(Nanos now, ltp::PacketSink& tx) {
  if (!ok()) return ltp::kNever;
  Nanos next = receiver_->poll(now, *this, tx);
  for (auto& o : outs_)
    if (o && o->started && !o->sender->done()) next = std::min(next, o->sender->poll(now, tx));
  check_done(now, tx);
  if (running_) next = std::min(next, started_ + cfg_.round_timeout);
  return next;
}

}  // namespace sg::sync
