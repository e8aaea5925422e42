#include "ltp/receiver.h"

#include <algorithm>

namespace sg::ltp {

using wire::MsgType;
using wire::WireError;

namespace {
// Largest LTP message the receiver emits: a CLOSE with a full bitmap part.
constexpr size_t kTxBufLen = sizeof(wire::CloseHeader) + wire::kCloseMaxBitmapBytes;
static_assert(kTxBufLen >= sizeof(wire::AckHeader) && kTxBufLen >= sizeof(wire::RejectHeader));
// DATA up to a jumbo frame's: an ACK is 1-10% of its bytes, worth halving (ack_delay_max).
constexpr size_t kThinAckChunkBytes = 9216;
}  // namespace

Receiver::Receiver(const ReceiverConfig& cfg)
    : cfg_(cfg),
      early_(cfg.early_close),
      jobs_(std::max<uint32_t>(cfg.max_jobs, 1)),
      slots_(std::max<uint32_t>(cfg.max_transfers, 1)),
      bitmap_words_(slots_.size() * ChunkBitmap::words_for(std::max<uint32_t>(cfg.max_chunks, 1))),
      closed_(std::max<uint32_t>(cfg.closed_memory, 1)),
      tx_buf_(kTxBufLen) {
  cfg_.max_chunks = std::max<uint32_t>(cfg_.max_chunks, 1);
  cfg_.ack_every = std::max<uint32_t>(cfg_.ack_every, 1);
}

Receiver::Job* Receiver::find_job(uint32_t job) {
  if (jobs_[last_job_].used && jobs_[last_job_].job == job) return &jobs_[last_job_];
  for (uint32_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].used && jobs_[i].job == job) {
      last_job_ = i;
      return &jobs_[i];
    }
  }
  return nullptr;
}

uint32_t Receiver::policy_for(const Job& j, uint32_t round) const {
  return (j.switch_pending && round >= j.switch_round) ? j.switch_policy : j.policy;
}

bool Receiver::schedule_policy(uint32_t job, uint32_t from_round, uint32_t policy_version) {
  Job* j = find_job(job);
  if (!j) return false;
  j->switch_pending = true;
  j->switch_round = from_round;
  j->switch_policy = policy_version;
  return true;
}

bool Receiver::begin_round(uint32_t job, uint32_t round, uint32_t policy_version, Nanos now,
                           ReceiverSink& sink, PacketSink& tx) {
  Job* j = find_job(job);
  if (!j) {
    for (auto& cand : jobs_)
      if (!cand.used) {
        j = &cand;
        *j = Job{};
        j->used = true;
        j->job = job;
        break;
      }
    if (!j) return false;
  }
  j->round = round;
  j->policy = policy_version;
  if (j->switch_pending && round >= j->switch_round) j->switch_pending = false;
  for (auto& t : slots_) {
    if (!t.used || t.key.job != job) continue;
    if (t.key.round < round) {
      close(t, CloseReason::kSuperseded, now, sink, tx);
    } else if (t.policy != policy_for(*j, t.key.round)) {
      close(t, CloseReason::kStale, now, sink, tx);
    }
  }
  return true;
}

Receiver::Transfer* Receiver::find_transfer(const TransferKey& k) {
  if (slots_[last_hit_].used && slots_[last_hit_].key == k) return &slots_[last_hit_];
  if (open_ == 0) return nullptr;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].used && slots_[i].key == k) {
      last_hit_ = i;
      return &slots_[i];
    }
  }
  return nullptr;
}

const Receiver::Closed* Receiver::find_closed(const TransferKey& k) const {
  for (const auto& c : closed_)
    if (c.count != 0 && c.key == k) return &c;
  return nullptr;
}

Receiver::Transfer* Receiver::open_transfer(const TransferKey& k, const wire::DataFields& f, Nanos now) {
  const size_t words = ChunkBitmap::words_for(cfg_.max_chunks);
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    Transfer& t = slots_[i];
    if (t.used) continue;
    t = Transfer{};
    t.used = true;
    t.key = k;
    t.policy = f.policy_version;
    t.count = f.chunk_count;
    t.opened = now;
    t.last_progress = now;
    t.last_arrival = now;
    t.bits = ChunkBitmap(bitmap_words_.data() + i * words, f.chunk_count);
    t.bits.clear();
    ++open_;
    ++stats_.transfers_opened;
    last_hit_ = i;
    return &t;
  }
  return nullptr;
}

void Receiver::note_rtt(Nanos sample) {
  if (sample <= 0) return;
  srtt_ = srtt_ == 0 ? sample : srtt_ + (sample - srtt_) / 8;
}

void Receiver::on_packet(std::span<const uint8_t> msg, Nanos now, ReceiverSink& sink, PacketSink& tx) {
  ++stats_.packets;
  // Fast path: a well-formed DATA of our version validates in one pass.
  auto data = wire::parse_data(msg);
  if (data) {
    on_data(*data, msg.size(), now, sink, tx);
    return;
  }
  auto common = wire::parse_common(msg);
  if (!common) {
    ++stats_.malformed;
    return;
  }
  if (!wire::ltp_version_supported(common->version)) {
    // Answer so the peer learns what we speak; REJECTs are never answered (no ping-pong).
    if (common->raw_type == static_cast<uint8_t>(MsgType::kReject)) {
      ++stats_.malformed;
      return;
    }
    ++stats_.bad_version;
    wire::RejectFields r;
    r.src_node = cfg_.local_node;
    r.job = common->job;
    r.reason = wire::RejectReason::kVersion;
    r.offending_version = common->version;
    auto n = wire::build_reject(tx_buf_, r);
    if (n) {
      tx.send({common->src_node, 0, MsgType::kReject}, std::span<const uint8_t>(tx_buf_).first(*n), {});
      ++stats_.rejects_sent;
    }
    return;
  }
  if (common->type != MsgType::kData) {
    ++stats_.wrong_type;
    return;
  }
  ++stats_.malformed;  // DATA of our version that failed validation
}

void Receiver::on_data(const wire::DataMsg& m, size_t msg_len, Nanos now, ReceiverSink& sink, PacketSink& tx) {
  ++stats_.data;
  const auto& f = m.f;
  const TransferKey key{f.job, f.round, f.shard, f.src_node};
  Job* j = find_job(f.job);
  if (!j) {
    ++stats_.unknown_job;
    return;
  }
  if (f.round < j->round) {
    ++stats_.stale_round;
    send_close_header(key, f.policy_version, f.chunk_count, 0, CloseReason::kStale, f.path_id, tx);
    return;
  }
  if (f.round - j->round > cfg_.rounds_ahead) {
    ++stats_.future_round;
    return;
  }
  const uint32_t want_policy = policy_for(*j, f.round);
  if (f.policy_version < want_policy) {
    ++stats_.stale_policy;
    send_close_header(key, f.policy_version, f.chunk_count, 0, CloseReason::kStale, f.path_id, tx);
    return;
  }
  if (f.policy_version > want_policy) {
    ++stats_.future_policy;
    return;
  }

  Transfer* t = find_transfer(key);
  if (!t) {
    if (const Closed* c = find_closed(key)) {
      ++stats_.late_after_close;
      send_close_header(key, c->policy, c->count, c->kept, c->reason, f.path_id, tx);
      return;
    }
    if (f.chunk_count > cfg_.max_chunks) {
      ++stats_.refused_too_large;
      send_close_header(key, f.policy_version, f.chunk_count, 0, CloseReason::kRefused, f.path_id, tx);
      return;
    }
    t = open_transfer(key, f, now);
    if (!t) {
      // Full: drop without answering, the sender retries and a slot frees up.
      ++stats_.refused_table_full;
      return;
    }
    t->whole = !sink.early_close_allowed(key);
    stats_.opened_whole += t->whole;
  }
  if (f.chunk_count != t->count) {
    ++stats_.count_mismatch;
    return;
  }

  // Receiver-side RTT: the sender echoes our latest ack_ts.
  const Nanos rtt = rtt_from_echo(f.echo_ts, now);
  if (rtt >= 0) note_rtt(rtt);
  const bool retx = (f.flags & wire::kFlagRetransmit) != 0;
  sink.on_sample({f.src_node, f.path_id, static_cast<uint32_t>(msg_len), now, rtt, retx, owd_from_stamp(f.send_ts, now),
                  (f.flags & wire::kFlagAppLimited) != 0});
  t->last_arrival = now;
  // Once any DATA says the sender has released everything, it stays so (reordering may bring
  // an older partial one later).
  t->sender_partial = t->sender_partial && (f.flags & wire::kFlagPartial) != 0;
  t->last_path = f.path_id;
  t->last_send_ts = f.send_ts;

  const uint32_t idx = f.chunk_index;
  if (t->bits.test(idx)) {
    ++stats_.duplicates;
    send_ack(*t, idx, now, tx);  // the sender evidently missed our ACK
    return;
  }
  t->bits.set(idx);
  ++t->received;
  ++stats_.delivered;
  if (retx) ++t->first_via_retx;
  const Nanos since = now - t->last_progress;
  t->gap = t->gap == 0 ? since : t->gap + (since - t->gap) / 8;
  t->last_progress = now;
  t->contributors = f.contributors;
  t->codec = f.codec;
  const bool in_order = idx == t->cum;
  if (in_order) t->cum = t->bits.next_clear(t->cum);

  ChunkRef ref{key, f.policy_version, idx, f.chunk_count, f.contributors, f.codec, f.path_id, f.holes};
  sink.on_chunk(ref, m.payload);

  if (t->received == t->count) {
    send_ack(*t, idx, now, tx);
    close(*t, CloseReason::kComplete, now, sink, tx);
    return;
  }
  // ACK at once when something is unusual (a gap or a retransmission), else every Nth.
  t->ack_chunk = idx;
  if (++t->unacked >= cfg_.ack_every || !in_order || retx || t->cum < t->received) {
    if (cfg_.ack_batch) {
      t->ack_due = now;  // the poll after this burst
    } else {
      send_ack(*t, idx, now, tx);
    }
  } else if (t->ack_due == kNever) {
    // Past ack_delay, wait for the next chunk only where it is due within ack_delay_max (a
    // sparser flow would only get every ACK later), and only for packet-sized chunks: next to
    // a chunk of tens of KB (the simulator's) an ACK's bytes are nothing to save.
    const Nanos hold = 2 * t->gap;
    const bool thin = msg_len <= kThinAckChunkBytes && hold > cfg_.ack_delay && hold <= cfg_.ack_delay_max;
    t->ack_due = now + (thin ? hold : cfg_.ack_delay);
  }
}

bool Receiver::ack_ahead(std::span<const uint8_t> msg, Nanos now, PacketSink& tx) {
  auto d = wire::parse_data(msg);
  if (!d) return false;
  const auto& f = d->f;
  const Job* j = find_job(f.job);
  if (!j || f.round != j->round + 1 || f.policy_version != policy_for(*j, f.round)) return false;
  wire::AckFields a;
  a.src_node = cfg_.local_node;
  a.job = f.job;
  a.round = f.round;
  a.policy_version = f.policy_version;
  a.shard = f.shard;
  a.path_id = f.path_id;
  a.ack_ts = static_cast<uint64_t>(now);
  a.echo_ts = f.send_ts;
  a.sack_base = f.chunk_index & ~7u;
  const uint8_t bit[1] = {static_cast<uint8_t>(1u << (f.chunk_index & 7))};
  auto n = wire::build_ack(tx_buf_, a, bit);
  if (!n) return false;
  tx.send({f.src_node, f.path_id, MsgType::kAck}, std::span<const uint8_t>(tx_buf_).first(*n), {});
  ++stats_.acks_sent;
  ++stats_.acks_ahead;
  return true;
}

void Receiver::send_ack(Transfer& t, uint32_t chunk, Nanos now, PacketSink& tx) {
  // The SACK window ends a little past the newest chunk and starts no earlier than the
  // cumulative point: it re-acknowledges recent arrivals, so a lost ACK is repaired by the next.
  constexpr uint32_t kAhead = 64;
  uint32_t base = chunk + kAhead >= wire::kAckSackBits ? chunk + kAhead - wire::kAckSackBits : 0;
  base = std::max(base, t.cum) & ~7u;
  wire::AckFields a;
  a.src_node = cfg_.local_node;
  a.job = t.key.job;
  a.round = t.key.round;
  a.policy_version = t.policy;
  a.shard = t.key.shard;
  a.path_id = t.last_path;
  a.cum_ack = t.cum;
  a.received = t.received;
  a.ack_ts = static_cast<uint64_t>(now);
  a.echo_ts = t.last_send_ts;
  a.sack_base = base;
  a.held = replaying_;
  auto n = wire::build_ack(tx_buf_, a, t.bits.bytes(base / 8, wire::kAckSackBits / 8));
  t.unacked = 0;
  t.ack_due = kNever;
  if (!n) return;
  tx.send({t.key.src_node, t.last_path, MsgType::kAck}, std::span<const uint8_t>(tx_buf_).first(*n), {});
  ++stats_.acks_sent;
}

void Receiver::send_close_header(const TransferKey& k, uint32_t policy, uint32_t count, uint32_t kept,
                                 CloseReason reason, uint16_t path, PacketSink& tx) {
  wire::CloseFields c;
  c.src_node = cfg_.local_node;
  c.job = k.job;
  c.round = k.round;
  c.policy_version = policy;
  c.shard = k.shard;
  c.reason = reason;
  c.fill_rule = static_cast<uint8_t>(cfg_.fill_rule);
  c.chunk_count = count;
  c.kept_count = std::min(kept, count);
  auto n = wire::build_close(tx_buf_, c, {});
  if (!n) return;
  tx.send({k.src_node, path, MsgType::kClose}, std::span<const uint8_t>(tx_buf_).first(*n), {});
  ++stats_.closes_sent;
}

void Receiver::close(Transfer& t, CloseReason reason, Nanos now, ReceiverSink& sink, PacketSink& tx) {
  // Bubbles first, so the sink holds a complete message when on_transfer_end arrives.
  ChunkRef ref{t.key, t.policy, 0, t.count, 0, t.codec, t.last_path};
  uint32_t filled = 0;
  for (uint32_t i = t.bits.next_clear(0); i < t.count; i = t.bits.next_clear(i + 1)) {
    ref.chunk_index = i;
    sink.on_bubble(ref, cfg_.fill_rule);
    ++filled;
  }
  stats_.bubbles += filled;

  TransferSummary s;
  s.key = t.key;
  s.policy_version = t.policy;
  s.chunk_count = t.count;
  s.received = t.received;
  s.filled = filled;
  s.reason = reason;
  s.fell_back = t.reliable;
  s.threshold = early_.threshold();
  s.opened = t.opened;
  s.closed = now;
  sink.on_transfer_end(s);

  switch (reason) {
    case CloseReason::kComplete: ++stats_.closed_complete; break;
    case CloseReason::kEarlyClose: ++stats_.closed_early; break;
    case CloseReason::kSuperseded: ++stats_.closed_superseded; break;
    case CloseReason::kAbandoned: ++stats_.closed_abandoned; break;
    default: ++stats_.closed_stale; break;
  }
  // Only transfers that ran their course teach the loss estimate.
  if (reason == CloseReason::kComplete || reason == CloseReason::kEarlyClose) {
    early_.on_transfer_loss(static_cast<double>(t.first_via_retx + filled) / t.count);
  }

  // CLOSE with the kept bitmap, in parts of kCloseMaxBitmapBytes.
  const size_t total = (static_cast<size_t>(t.count) + 7) / 8;
  wire::CloseFields c;
  c.src_node = cfg_.local_node;
  c.job = t.key.job;
  c.round = t.key.round;
  c.policy_version = t.policy;
  c.shard = t.key.shard;
  c.reason = reason;
  c.fill_rule = static_cast<uint8_t>(cfg_.fill_rule);
  c.chunk_count = t.count;
  c.kept_count = t.received;
  for (size_t off = 0; off < total; off += wire::kCloseMaxBitmapBytes) {
    auto part = t.bits.bytes(off, wire::kCloseMaxBitmapBytes);
    c.bitmap_base = static_cast<uint32_t>(off * 8);
    c.more = off + part.size() < total;
    auto n = wire::build_close(tx_buf_, c, part);
    if (!n) break;
    tx.send({t.key.src_node, t.last_path, MsgType::kClose}, std::span<const uint8_t>(tx_buf_).first(*n), {});
    ++stats_.closes_sent;
  }

  closed_[closed_next_] = Closed{t.key, t.policy, t.count, t.received, reason};
  closed_next_ = (closed_next_ + 1) % closed_.size();
  t.used = false;
  --open_;
}

bool Receiver::abandon(const TransferKey& key, Nanos now, ReceiverSink& sink, PacketSink& tx) {
  Transfer* t = find_transfer(key);
  if (!t) return false;
  close(*t, CloseReason::kAbandoned, now, sink, tx);
  return true;
}

Nanos Receiver::poll(Nanos now, ReceiverSink& sink, PacketSink& tx) {
  Nanos next = kNever;
  if (open_ == 0) return next;
  const double theta = early_.threshold();
  const auto& ec = early_.config();
  for (auto& t : slots_) {
    if (!t.used) continue;
    if (t.ack_due <= now) send_ack(t, cfg_.ack_batch ? t.ack_chunk : (t.cum > 0 ? t.cum - 1 : 0), now, tx);
    if (now - t.last_arrival >= cfg_.abandon_after) {
      close(t, CloseReason::kAbandoned, now, sink, tx);
      continue;
    }
    Nanos due = std::min(t.ack_due, t.last_arrival + cfg_.abandon_after);
    // A streaming sender still waiting for its own inputs is not stalled: Early Close and the
    // fall-back test start once it has released every chunk.
    if (ec.enabled && !t.reliable && !t.whole && !t.sender_partial) {
      const Nanos quiet = early_.quiet(srtt_, t.gap);
      if (now - t.last_progress < quiet) {
        due = std::min(due, t.last_progress + quiet);
      } else {
        const double got = static_cast<double>(t.received) / t.count;
        if (got >= theta) {
          close(t, CloseReason::kEarlyClose, now, sink, tx);
          continue;
        }
        if (1.0 - got > ec.max_loss_fraction) {
          t.reliable = true;  // past the hard bound: no more lossy shortcuts for this transfer
          ++stats_.fallbacks;
        } else {
          // Between threshold and bound: keep waiting for retransmissions, look again later.
          due = std::min(due, now + quiet);
        }
      }
    }
    next = std::min(next, due);
  }
  return next;
}

}  // namespace sg::ltp
