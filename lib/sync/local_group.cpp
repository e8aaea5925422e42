#include "sync/local_group.h"

#include <algorithm>
#include <cstring>

#include "compress/accumulate.h"
#include "ltp/window_controller.h"
#include "wire/ltp_codec.h"

namespace sg::sync {

struct LocalGroup::Out {
  explicit Out(const ltp::WindowConfig& c) : rc(c) {}
  ltp::WindowController rc;  // the LAN's: a window, no rate model (window_controller.h)
  std::unique_ptr<ltp::Sender> sender;
  bool started = false;
  bool counted = false;  // its end was looked at (result_timeouts)
  uint32_t round = 0;    // the round its result transfer carries
};

namespace {

// For Receiver::begin_round before any transfer can be open: nothing is ever sent to it.
class NullSink final : public ltp::PacketSink {
 public:
  void send(const ltp::TxMeta&, std::span<const uint8_t>, std::span<const uint8_t>) override {}
};

}  // namespace

LocalGroup::LocalGroup(const LocalGroupConfig& cfg) : cfg_(cfg), rng_(cfg.seed), round_(cfg.first_round) {
  if (cfg_.workers == 0 || cfg_.workers > kMaxLocalWorkers) {
    error_ = LocalGroupError::kWorkers;
    return;
  }
  if (cfg_.chunk_bytes == 0 || cfg_.chunk_bytes % 4 || cfg_.chunk_bytes > 9000) {
    error_ = LocalGroupError::kChunkBytes;
    return;
  }
  const uint64_t bytes = cfg_.model_floats * 4;
  const uint64_t chunks = (bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes;
  if (cfg_.model_floats == 0 || chunks > (1u << 24)) {
    error_ = LocalGroupError::kModel;
    return;
  }
  chunks_ = static_cast<uint32_t>(chunks);

  ltp::ReceiverConfig rc = cfg_.receiver;
  rc.local_node = cfg_.gateway_node;
  rc.max_chunks = chunks_;
  rc.max_transfers = std::max(rc.max_transfers, cfg_.workers + 4);
  rc.max_jobs = std::max<uint32_t>(rc.max_jobs, 1);
  // The accumulator holds exactly one round: DATA of a later round is dropped and retried
  // by the worker (only on_packet's jump-ahead moves the group forward).
  rc.rounds_ahead = 0;
  receiver_ = std::make_unique<ltp::Receiver>(rc);
  acc_ = std::make_unique<agg::Accumulator>(cfg_.model_floats, cfg_.chunk_bytes / 4);
  push_.assign(cfg_.workers, Push::kNone);
  absent_.assign(cfg_.workers, 0);
  expected_ = cfg_.workers;
  got_.assign(cfg_.workers, 0);
  pending_.assign(chunks_, static_cast<uint16_t>(cfg_.workers));
  final_.assign(chunks_, 0);
  ready_list_.reserve(chunks_);
  result_.assign(cfg_.model_floats, 0.0f);
  res_missing_.assign(chunks_, 0);
  res_sums_.assign(chunks_, 0);
  for (uint32_t w = 0; w < cfg_.workers; ++w) {
    outs_.push_back(std::make_unique<Out>(cfg_.results));
    ltp::SenderConfig sc = cfg_.sender;
    sc.local_node = cfg_.gateway_node;
    sc.peer_node = static_cast<uint16_t>(kWorkerNodeBase + w);
    sc.max_chunks = chunks_;
    outs_.back()->sender = std::make_unique<ltp::Sender>(sc, outs_.back()->rc, rng_);
  }
  NullSink null_tx;
  receiver_->begin_round(cfg_.job, round_, 0, 0, *this, null_tx);
}

LocalGroup::~LocalGroup() = default;

int LocalGroup::worker_of(uint16_t node) const {
  if (node < kWorkerNodeBase || static_cast<uint32_t>(node - kWorkerNodeBase) >= cfg_.workers) return -1;
  return node - kWorkerNodeBase;
}

std::span<const float> LocalGroup::contribution() const {
  if (!ok() || !ready_) return {};
  return acc_->values();
}

std::span<const float> LocalGroup::contribution_buffer() const {
  if (!ok()) return {};
  return acc_->storage();  // read chunk by chunk once final (resolve: finalise_chunk zeroes an empty one)
}

std::span<const uint32_t> LocalGroup::take_ready_chunks() {
  const auto out = std::span<const uint32_t>(ready_list_).subspan(ready_taken_);
  ready_taken_ = ready_list_.size();
  return out;
}

void LocalGroup::resolve(uint32_t chunk) {
  if (chunk >= chunks_ || final_[chunk] || pending_[chunk] == 0) return;
  if (--pending_[chunk] > 0) return;
  acc_->finalise_chunk(chunk, agg::Finalise::kMean);
  final_[chunk] = 1;
  if (ready_list_.empty()) first_final_ = now_;
  ready_list_.push_back(chunk);
}


void LocalGroup::start_round(uint32_t round, Nanos now, ltp::PacketSink& tx) {
  // Who sent nothing in the round that just ended is not waited for in this one (never all:
  // then the last round says nothing about anybody).
  uint32_t absent = 0;
  for (uint32_t w = 0; w < cfg_.workers; ++w) {
    absent_[w] = ready_ && push_[w] == Push::kNone;
    absent += absent_[w];
  }
  if (absent == cfg_.workers) {
    std::fill(absent_.begin(), absent_.end(), 0);
    absent = 0;
  }
  expected_ = cfg_.workers - absent;
  // round_ first: callbacks for transfers the receiver closes now are for an older round
  // and are ignored.
  round_ = round;
  ready_ = false;
  any_push_ = false;
  first_final_ = -1;
  ended_ = present_ = 0;
  std::fill(push_.begin(), push_.end(), Push::kNone);
  std::fill(got_.begin(), got_.end(), 0u);
  std::fill(pending_.begin(), pending_.end(), static_cast<uint16_t>(expected_));
  std::fill(final_.begin(), final_.end(), 0);
  ready_list_.clear();
  ready_taken_ = 0;
  results_open_ = false;
  acc_->reset();
  receiver_->begin_round(cfg_.job, round, 0, now, *this, tx);
}

void LocalGroup::on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) {
  const int w = worker_of(c.key.src_node);
  if (w < 0 || c.key.job != cfg_.job || c.key.round != round_ || c.key.shard != 0 || c.chunk_count != chunks_ ||
      push_[w] == Push::kBad) {
    ++stats_.bad_chunks;
    return;
  }
  if (c.holes & 1) {  // a hole: the worker has nothing there, like a bubble
    on_bubble(c, ltp::FillRule::kZero);
    return;
  }
  if (absent_[w] && !ready_) rejoin(static_cast<uint32_t>(w));
  if (ready_ || final_[c.chunk_index]) {
    // The push timeout made the chunk final without this copy. A worker that shows up
    // only now still gets the round's result, so that it stays in step.
    ++stats_.late_chunks;
    if (push_[w] == Push::kNone) {
      push_[w] = Push::kLate;
      if (results_open_) start_result(static_cast<uint32_t>(w), now_);
    }
    return;
  }
  // One contribution per worker per chunk, whatever the header claims. A copy that does not
  // decode counts as given up.
  if (compress::add_encoded(*acc_, c.chunk_index, c.codec, payload, 1) != compress::CodecError::kOk) {
    ++stats_.bad_chunks;
    resolve(c.chunk_index);
    return;
  }
  ++got_[w];
  if (push_[w] == Push::kNone) {
    push_[w] = Push::kOpen;
    if (results_open_) start_result(static_cast<uint32_t>(w), now_);
  }
  if (!any_push_) {
    any_push_ = true;
    first_push_ = now_;
  }
  resolve(c.chunk_index);
}

void LocalGroup::on_bubble(const ltp::ChunkRef& c, ltp::FillRule) {
  // Nothing to add: the chunk's contributor count stays lower and its mean unbiased.
  const int w = worker_of(c.key.src_node);
  if (w < 0 || c.key.round != round_ || c.key.job != cfg_.job || c.key.shard != 0 || c.chunk_count != chunks_ || ready_)
    return;
  if (absent_[w]) rejoin(static_cast<uint32_t>(w));
  ++stats_.push_bubbles;
  resolve(c.chunk_index);
}

// An absent worker's push arrived: it is waited for again, on every chunk not yet final.
void LocalGroup::rejoin(uint32_t w) {
  absent_[w] = 0;
  ++expected_;
  for (uint32_t c = 0; c < chunks_; ++c)
    if (!final_[c]) ++pending_[c];
}

void LocalGroup::on_transfer_end(const ltp::TransferSummary& s) {
  const int w = worker_of(s.key.src_node);
  if (w < 0 || s.key.round != round_ || s.key.job != cfg_.job || ready_) return;
  if (push_[w] == Push::kDone || push_[w] == Push::kBad) return;
  if (absent_[w]) rejoin(static_cast<uint32_t>(w));
  // A push of the right shape resolved each of its chunks (arrived or bubble) before it
  // ended; one of another shape resolved none.
  if (s.chunk_count != chunks_)
    for (uint32_t c = 0; c < chunks_; ++c) resolve(c);
  push_[w] = got_[w] > 0 ? Push::kDone : Push::kBad;
  ++ended_;
  if (got_[w] > 0) ++present_;
  if (ended_ == expected_) make_ready();
}

void LocalGroup::make_ready() {
  present_ = 0;
  for (uint32_t g : got_) present_ += g > 0;
  // Chunks still waiting for somebody are final with what they have.
  for (uint32_t c = 0; c < chunks_; ++c)
    if (!final_[c]) {
      pending_[c] = 1;
      resolve(c);
    }
  ready_ = true;
  ++stats_.rounds;
  stats_.missing_workers += cfg_.workers - present_;
}

void LocalGroup::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  if (!ok()) return;
  now_ = now;
  auto common = wire::parse_common(msg);
  if (!common) {
    ++stats_.stray_packets;
    return;
  }
  const int w = worker_of(common->src_node);
  if (common->type == wire::MsgType::kData) {
    if (w >= 0 && common->job == cfg_.job && !any_push_ && !ready_) {
      // Nothing of the current round yet: a later round's push of the right shape moves the
      // group there -- any distance while no round was delivered yet (workers that resume
      // from a checkpoint), at most max_round_jump afterwards, so that one corrupt round
      // field cannot strand the workers behind the group.
      auto d = wire::parse_data(msg);
      if (d && d->f.round > round_ && d->f.shard == 0 && d->f.chunk_count == chunks_ && d->f.policy_version == 0) {
        if (stats_.delivered == 0 || d->f.round - round_ <= cfg_.max_round_jump) {
          stats_.skipped_rounds += d->f.round - round_;
          start_round(d->f.round, now, tx);
        } else {
          ++stats_.refused_jumps;
        }
      }
    }
    receiver_->on_packet(msg, now, *this, tx);
    return;
  }
  if (w < 0 || !outs_[w]->started || (common->type != wire::MsgType::kAck && common->type != wire::MsgType::kClose &&
                                      common->type != wire::MsgType::kReject)) {
    ++stats_.stray_packets;
    return;
  }
  Out& o = *outs_[w];
  const uint64_t ignored = o.sender->stats().acks_ignored;
  o.sender->on_packet(msg, now);
  if (o.sender->stats().acks_ignored != ignored) ++stats_.stray_packets;
  o.sender->poll(now, tx);
}

Nanos LocalGroup::poll(Nanos now, ltp::PacketSink& tx) {
  if (!ok()) return ltp::kNever;
  now_ = now;
  Nanos next = receiver_->poll(now, *this, tx);
  for (auto& o : outs_) {
    if (!o->started) continue;
    if (!o->sender->done()) next = std::min(next, o->sender->poll(now, tx));
    if (o->sender->done() && !o->counted) {
      o->counted = true;
      if (o->sender->state() == ltp::SenderState::kTimedOut) ++stats_.result_timeouts;
    }
  }
  if (any_push_ && !ready_) {
    if (now - first_push_ >= cfg_.push_timeout) {
      ++stats_.push_timeouts;
      make_ready();
    } else {
      next = std::min(next, first_push_ + cfg_.push_timeout);
    }
  }
  return next;
}

// A result transfer still running (a worker that stopped answering) gets a fresh sender.
void LocalGroup::abandon_result(uint32_t w) {
  Out& o = *outs_[w];
  if (o.started && !o.sender->done()) {
    ++stats_.result_abandoned;
    ltp::SenderConfig sc = cfg_.sender;
    sc.local_node = cfg_.gateway_node;
    sc.peer_node = static_cast<uint16_t>(kWorkerNodeBase + w);
    sc.max_chunks = chunks_;
    o.sender = std::make_unique<ltp::Sender>(sc, o.rc, rng_);
  }
  o.started = false;
}

// Result transfer to worker w for the round being collected, carrying result_ and releasing
// the chunks already complete.
void LocalGroup::start_result(uint32_t w, Nanos now) {
  Out& o = *outs_[w];
  abandon_result(w);
  ltp::TransferSpec spec;
  spec.job = cfg_.job;
  spec.round = round_;
  spec.policy_version = 0;
  spec.shard = 0;
  spec.contributors = static_cast<uint16_t>(std::min<uint32_t>(std::max<uint32_t>(cfg_.workers, 1), 0xffff));
  spec.codec = CodecId::kF32;
  spec.chunk_size = cfg_.chunk_bytes;
  spec.data = {reinterpret_cast<const uint8_t*>(result_.data()), result_.size() * sizeof(float)};
  spec.streaming = true;
  spec.payload_sums = res_sums_;  // one checksum pass per chunk for all the workers
  if (!o.sender->start(spec, now)) return;
  o.started = true;
  o.counted = false;
  o.round = round_;
  for (uint32_t c = 0; c < chunks_; ++c)
    if (res_missing_[c] == 0) o.sender->release(c, now);
}

void LocalGroup::release_result_chunk(uint32_t chunk) {
  for (uint32_t w = 0; w < cfg_.workers; ++w) {
    Out& o = *outs_[w];
    if (o.started && o.round == round_) o.sender->release(chunk, now_);
  }
}

bool LocalGroup::result_ready(uint32_t round, size_t first, std::span<const float> values, Nanos now,
                              ltp::PacketSink& tx) {
  (void)tx;  // result DATA leaves on the next poll()
  if (!ok() || round != round_ || first > result_.size() || values.size() > result_.size() - first) return false;
  now_ = now;
  if (!results_open_) {
    // The round's first result: every result transfer of earlier rounds that still runs
    // reads result_ and is abandoned before it is overwritten.
    results_open_ = true;
    for (uint32_t c = 0; c < chunks_; ++c) res_missing_[c] = static_cast<uint32_t>(acc_->chunk_elems(c));
    results_left_ = chunks_;
    for (uint32_t w = 0; w < cfg_.workers; ++w) {
      abandon_result(w);
      if (push_[w] == Push::kOpen || push_[w] == Push::kDone || push_[w] == Push::kLate) start_result(w, now);
    }
  }
  std::copy(values.begin(), values.end(), result_.begin() + static_cast<std::ptrdiff_t>(first));
  const size_t cf = cfg_.chunk_bytes / 4;
  const size_t end = first + values.size();
  for (size_t c = first / cf; c < chunks_ && c * cf < end; ++c) {
    res_sums_[c] = 0;  // its bytes changed
    const size_t lo = std::max(first, c * cf), hi = std::min(end, c * cf + acc_->chunk_elems(static_cast<uint32_t>(c)));
    if (hi <= lo || res_missing_[c] == 0) continue;
    const auto got = static_cast<uint32_t>(hi - lo);
    res_missing_[c] = got >= res_missing_[c] ? 0 : res_missing_[c] - got;
    if (res_missing_[c] == 0) {
      --results_left_;
      release_result_chunk(static_cast<uint32_t>(c));
    }
  }
  return true;
}

bool LocalGroup::finish(uint32_t round, Nanos now, ltp::PacketSink& tx) {
  if (!ok() || round != round_) return false;
  now_ = now;
  if (!ready_) make_ready();
  // Result chunks nobody gave (the WAN round gave up on them) carry this site's own mean,
  // so that every worker still gets a whole result.
  const auto mine = acc_->values();
  if (!results_open_) result_ready(round, 0, {}, now, tx);
  for (uint32_t c = 0; c < chunks_; ++c) {
    if (res_missing_[c] == 0) continue;
    ++stats_.result_filled;
    const size_t off = static_cast<size_t>(c) * (cfg_.chunk_bytes / 4);
    result_ready(round, off, mine.subspan(off, acc_->chunk_elems(c)), now, tx);
  }
  delivered_present_ = present_;
  ++stats_.delivered;
  start_round(round + 1, now, tx);
  return true;
}

bool LocalGroup::deliver(uint32_t round, std::span<const float> result, Nanos now, ltp::PacketSink& tx) {
  if (!ok() || !contribution_ready(round) || result.size() != result_.size()) return false;
  result_ready(round, 0, result, now, tx);
  finish(round, now, tx);
  // Send the first burst now, as before streaming.
  for (auto& o : outs_)
    if (o->started && !o->sender->done()) o->sender->poll(now, tx);
  return true;
}

bool LocalGroup::round_delivered() const {
  for (const auto& o : outs_)
    if (o->started && !o->sender->done()) return false;
  return true;
}

}  // namespace sg::sync
