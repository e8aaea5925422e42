#include "ltp/sender.h"

#include <algorithm>

namespace sg::ltp {

using wire::MsgType;

Sender::Sender(const SenderConfig& cfg, RateController& rc, Rng& rng)
    : cfg_(cfg),
      rc_(rc),
      rng_(rng),
      order_(std::max<uint32_t>(cfg.max_chunks, 1)),
      chunks_(std::max<uint32_t>(cfg.max_chunks, 1)),
      fifo_(2 * static_cast<size_t>(std::max<uint32_t>(cfg.max_chunks, 1)) + 64),
      retx_(std::max<uint32_t>(cfg.max_chunks, 1)) {
  cfg_.path_count = std::clamp<uint32_t>(cfg_.path_count, 1, kMaxPaths);
  cfg_.max_burst = std::max<uint32_t>(cfg_.max_burst, 1);
  bool any = false;
  for (uint32_t p = 0; p < cfg_.path_count; ++p) any |= cfg_.paths[p].weight > 0;
  if (!any) cfg_.paths[0].weight = 1;
}

bool Sender::start(const TransferSpec& spec, Nanos now) {
  if (state_ == SenderState::kRunning || spec.chunk_size == 0 || spec.data.empty() || spec.contributors == 0) return false;
  const uint64_t count = (spec.data.size() + spec.chunk_size - 1) / spec.chunk_size;
  if (count > cfg_.max_chunks || spec.chunk_size > 0xffff) return false;
  spec_ = spec;
  count_ = static_cast<uint32_t>(count);
  std::fill(chunks_.begin(), chunks_.begin() + count_, Chunk{});
  if (spec.streaming) {
    released_ = 0;  // release() appends to order_ in release order
  } else {
    for (uint32_t i = 0; i < count_; ++i) {
      order_[i] = i;
      chunks_[i].released = true;
    }
    if (cfg_.shuffle) {
      for (uint32_t i = count_ - 1; i > 0; --i) std::swap(order_[i], order_[rng_.below(i + 1)]);
    }
    released_ = count_;
  }
  fifo_head_ = fifo_len_ = 0;
  retx_head_ = retx_len_ = 0;
  path_current_.fill(0);
  next_unsent_ = acked_ = cum_ = 0;
  inflight_ = delivered_ = 0;
  app_limited_until_ = 0;
  delivered_time_ = now;
  first_tx_ = now;
  largest_acked_seq_ = 0;
  rack_xmit_ = rack_rtt_ = 0;
  reo_timer_at_ = kNever;
  // The previous transfer's RTT to this peer only seeds the first retransmission timeout
  // (Linux caches it per destination the same way): starting from initial_rto made the first
  // loss of every round wait a full second. The estimate itself restarts, so loss detection
  // (RACK's reorder window) learns this transfer's queueing afresh; carrying it over caused
  // spurious retransmissions on large transfers (the simulator's 8-site rounds: 12.5 -> 21 s).
  // Doubled, because a new transfer's first burst meets queues the old one's tail did not.
  if (srtt_ > 0) rto_hint_ = 2 * (srtt_ + 4 * rttvar_);
  srtt_ = rttvar_ = min_rtt_ = 0;
  backoff_ = 0;
  reorder_steps_ = 0;
  reordering_seen_ = false;
  rto_deadline_ = kNever;
  last_progress_ = now;
  probe_sent_ = false;
  next_send_ = now;
  echo_ = 0;
  close_kept_ = 0;
  close_reason_ = CloseReason::kComplete;
  stats_ = {};
  rc_.reset(now, std::min<uint32_t>(spec.chunk_size, static_cast<uint32_t>(spec.data.size())) +
                     static_cast<uint32_t>(sizeof(wire::DataHeader)));
  ld_ = rc_.loss_detection();
  state_ = SenderState::kRunning;
  return true;
}

void Sender::release(uint32_t i, Nanos now, uint8_t holes) {
  if (state_ != SenderState::kRunning || i >= count_ || chunks_[i].released) return;
  chunks_[i].released = true;
  chunks_[i].holes = holes;
  order_[released_++] = i;
  if (inflight_ == 0) last_progress_ = std::max(last_progress_, now);
}

void Sender::release_all(Nanos now) {
  for (uint32_t i = 0; i < count_ && released_ < count_; ++i) release(i, now);
}

uint32_t Sender::chunk_bytes(uint32_t i) const { return static_cast<uint32_t>(payload(i).size() + sizeof(wire::DataHeader)); }

std::span<const uint8_t> Sender::payload(uint32_t i) const {
  const size_t off = static_cast<size_t>(i) * spec_.chunk_size;
  return spec_.data.subspan(off, std::min<size_t>(spec_.chunk_size, spec_.data.size() - off));
}

uint16_t Sender::pick_path() {
  // Smooth weighted round robin: spreads chunks in proportion without bursts per path.
  int64_t total = 0;
  uint32_t best = 0;
  for (uint32_t p = 0; p < cfg_.path_count; ++p) {
    path_current_[p] += cfg_.paths[p].weight;
    total += cfg_.paths[p].weight;
    if (path_current_[p] > path_current_[best]) best = p;
  }
  path_current_[best] -= total;
  return cfg_.paths[best].path_id;
}

Nanos Sender::rto() const {
  Nanos base;
  if (srtt_ == 0) {
    base = rto_hint_ > 0 ? std::max(rto_hint_ + ld_.max_ack_delay, ld_.min_rto) : ld_.initial_rto;
  } else {
    base = srtt_ + std::max<Nanos>(4 * rttvar_, ld_.rto_var_floor) + ld_.max_ack_delay;
    base = std::max(base, ld_.min_rto);
  }
  // Backed off up to max_rto, but never capped below twice the path's own RTO (long paths).
  const Nanos cap = std::max(ld_.max_rto, 2 * base);
  for (uint32_t i = 0; i < backoff_ && base < cap; ++i) base *= 2;
  return std::min(base, cap);
}

void Sender::send_chunk(uint32_t i, bool retx, Nanos now, PacketSink& tx) {
  Chunk& c = chunks_[i];
  auto pl = payload(i);
  wire::DataFields f;
  f.src_node = cfg_.local_node;
  f.job = spec_.job;
  f.round = spec_.round;
  f.policy_version = spec_.policy_version;
  f.shard = spec_.shard;
  f.path_id = pick_path();
  f.chunk_index = i;
  f.chunk_count = count_;
  f.contributors = spec_.contributors;
  f.codec = spec_.codec;
  // Linux's rule (tcp_rate_check_app_limited): in a bubble the sender ran dry in, or this
  // is the last chunk it has.
  const bool app_limited = app_limited_until_ > 0 || (next_unsent_ >= released_ && retx_len_ == 0);
  f.flags = static_cast<uint8_t>((retx ? wire::kFlagRetransmit : 0) | (released_ < count_ ? wire::kFlagPartial : 0) |
                                 (app_limited ? wire::kFlagAppLimited : 0));
  f.holes = c.holes;
  f.send_ts = static_cast<uint64_t>(now);
  f.echo_ts = echo_;
  if (!wire::build_data_header(hdr_, f, static_cast<uint16_t>(pl.size()))) return;
  tx.send({cfg_.peer_node, f.path_id, MsgType::kData, i < spec_.payload_sums.size() ? &spec_.payload_sums[i] : nullptr},
          hdr_, pl);

  if (inflight_ == 0) delivered_time_ = first_tx_ = now;  // a fresh flight: rate samples start here
  if (c.state != kInflight) inflight_ += chunk_bytes(i);
  c.state = kInflight;
  c.retransmitted |= retx;
  c.sent = now;
  c.tx_seq = ++tx_seq_;
  c.delivered_at_send = delivered_;
  c.delivered_time_at_send = delivered_time_;
  c.first_tx_at_send = first_tx_;
  c.app_limited = app_limited;
  fifo_[(fifo_head_ + fifo_len_) % fifo_.size()] = Flight{i, c.tx_seq};
  ++fifo_len_;
  ++stats_.data_sent;
  stats_.bytes_sent += chunk_bytes(i);
  if (retx) ++stats_.retransmits;
  if (rto_deadline_ == kNever) rto_deadline_ = now + rto();
}

void Sender::finish(SenderState s, Nanos now) {
  state_ = s;
  finished_at_ = now;
  rc_.on_demand(now, Demand::kDone);
}

void Sender::on_packet(std::span<const uint8_t> msg, Nanos now) {
  if (state_ != SenderState::kRunning) return;
  auto common = wire::parse_common(msg);
  if (!common || common->src_node != cfg_.peer_node) {
    ++stats_.acks_ignored;
    return;
  }
  switch (common->type) {
    case MsgType::kAck: {
      auto m = wire::parse_ack(msg);
      if (!m || m->f.job != spec_.job || m->f.round != spec_.round || m->f.shard != spec_.shard ||
          m->f.policy_version != spec_.policy_version) {
        ++stats_.acks_ignored;
        return;
      }
      on_ack(*m, now);
      return;
    }
    case MsgType::kClose: {
      auto m = wire::parse_close(msg);
      if (!m || m->f.job != spec_.job || m->f.round != spec_.round || m->f.shard != spec_.shard) {
        ++stats_.acks_ignored;
        return;
      }
      close_reason_ = m->f.reason;
      close_kept_ = m->f.kept_count;
      finish(SenderState::kClosed, now);
      return;
    }
    case MsgType::kReject: {
      auto m = wire::parse_reject(msg);
      if (!m || m->job != spec_.job) {
        ++stats_.acks_ignored;
        return;
      }
      finish(SenderState::kRejected, now);
      return;
    }
    default:
      ++stats_.acks_ignored;
      return;
  }
}

void Sender::ack_chunk(uint32_t i, uint64_t echo_ts) {
  Chunk& c = chunks_[i];
  if (c.state == kAcked || c.state == kUnsent) return;  // unsent: a lying ACK, ignore it
  if (c.state == kInflight) inflight_ -= chunk_bytes(i);
  // Declared lost, yet acknowledged before (or by an ACK older than) its retransmission:
  // the original was only late. Reordering, not loss: widen the time threshold. (Also after
  // a timeout's presumption, though no reordering rule was fooled then: keeping the packet
  // threshold on was tried, and the simulator's 8 sites at 1% loss took 4.0 s a round
  // instead of 1.3.) The loss is also taken back from the controller, a timeout's included.
  if (c.state == kLost || (c.retransmitted && echo_ts != 0 && echo_ts <= static_cast<uint64_t>(INT64_MAX) &&
                             static_cast<Nanos>(echo_ts) < c.sent)) {
    ++stats_.spurious;
    spurious_now_ += chunk_bytes(i);
    reordering_seen_ = true;
    reorder_steps_ = std::min<uint32_t>(reorder_steps_ + 1, 16);
  }
  c.state = kAcked;
  ++acked_;
  delivered_ += chunk_bytes(i);
}

void Sender::on_ack(const wire::AckMsg& m, Nanos now) {
  ++stats_.acks;
  echo_ = std::max(echo_, m.f.ack_ts);
  const Nanos rtt = rtt_from_echo(m.f.echo_ts, now);
  if (rtt >= 0) {
    if (srtt_ == 0) {
      srtt_ = rtt;
      rttvar_ = rtt / 2;
    } else {
      const Nanos err = rtt > srtt_ ? rtt - srtt_ : srtt_ - rtt;
      rttvar_ += (err - rttvar_) / 4;
      srtt_ += (rtt - srtt_) / 8;
    }
    min_rtt_ = min_rtt_ == 0 ? rtt : std::min(min_rtt_, rtt);
  }

  const uint32_t before = acked_;
  const uint64_t delivered_before = delivered_;
  spurious_now_ = 0;
  uint64_t newest_seq = 0, rack_seq = 0;
  uint32_t newest = 0, rack_newest = 0;
  const Nanos echo = static_cast<Nanos>(std::min<uint64_t>(m.f.echo_ts, static_cast<uint64_t>(INT64_MAX)));
  auto consider = [&](uint32_t i) {
    const Chunk& c = chunks_[i];
    if (c.state == kAcked || c.state == kUnsent) return;
    if (c.tx_seq > newest_seq) {
      newest_seq = c.tx_seq;
      newest = i;
    }
    // RACK's clock moves only on chunks this ACK surely answers (RFC 8985 6.2, step 2): not a
    // resent chunk whose ACK echoes an earlier copy, or came back sooner than any round trip.
    // Taken from such a chunk, its resend time made everything sent a reorder window before
    // it look lost: on the simulator's lossy profile, half of all resends were needless.
    const bool ambiguous = c.retransmitted && (echo < c.sent || now - c.sent < min_rtt_);
    if (!ambiguous && c.tx_seq > rack_seq) {
      rack_seq = c.tx_seq;
      rack_newest = i;
    }
  };
  const uint32_t cum = std::min(m.f.cum_ack, count_);
  for (uint32_t i = cum_; i < cum; ++i) {
    consider(i);
    ack_chunk(i, m.f.echo_ts);
  }
  cum_ = std::max(cum_, cum);
  for (uint32_t b = 0; b < wire::kAckSackBits; b += 8) {
    const uint8_t byte = m.sack[b / 8];
    if (!byte) continue;
    for (uint32_t k = 0; k < 8; ++k) {
      const uint64_t i = static_cast<uint64_t>(m.f.sack_base) + b + k;
      if (i >= count_) break;
      if ((byte >> k) & 1) {
        consider(static_cast<uint32_t>(i));
        ack_chunk(static_cast<uint32_t>(i), m.f.echo_ts);
      }
    }
  }
  while (cum_ < count_ && chunks_[cum_].state == kAcked) ++cum_;
  if (app_limited_until_ > 0 && delivered_ > app_limited_until_) app_limited_until_ = 0;

  const uint32_t newly = acked_ - before;
  AckEvent ev;
  ev.now = now;
  ev.rtt = rtt;
  ev.srtt = srtt_;
  ev.min_rtt = min_rtt_;
  ev.held = m.f.held;
  if (newly > 0) {
    const Chunk& n = chunks_[newest];
    if (rack_seq > 0) {
      const Chunk& r = chunks_[rack_newest];
      if (r.tx_seq > largest_acked_seq_) largest_acked_seq_ = r.tx_seq;
      if (r.sent >= rack_xmit_) {
        rack_xmit_ = r.sent;
        rack_rtt_ = now - r.sent;
      }
    }
    ev.prior_delivered = n.delivered_at_send;
    ev.newest_acked_send = n.sent;
    ev.app_limited = n.app_limited;
    // The sample's interval is the longer of its send phase and its ACK phase, as in Linux's
    // rate sampler (tcp_rate_gen): ACKs that queued behind data on the reverse link come out
    // in a burst, and over the ACK phase alone they measured 1.5-2x the link (the simulator,
    // 200 Mbit/s links carrying both directions); the send phase, paced, cannot be
    // compressed that way. An interval shorter than the minimum RTT means the chunk was resent
    // after its original had already arrived (a spurious timeout): the originals' ACKs land
    // within a few ms of the resend, and a rate over that (GB/s, measured) would sit in the
    // controller's max filter for ten round trips. Linux drops those samples too.
    const Nanos elapsed = std::max(now - n.delivered_time_at_send, n.sent - n.first_tx_at_send);
    if (elapsed > 0 && (min_rtt_ == 0 || elapsed >= min_rtt_))
      ev.delivery_rate = static_cast<double>(delivered_ - n.delivered_at_send) * 1e9 / static_cast<double>(elapsed);
    delivered_time_ = now;
    first_tx_ = n.sent;
    last_progress_ = now;
    backoff_ = 0;
    probe_sent_ = false;
    rto_deadline_ = inflight_ > 0 ? now + rto() : kNever;
  }
  detect_losses(now);
  ev.acked_bytes = delivered_ - delivered_before;
  ev.spurious_bytes = spurious_now_;
  ev.delivered = delivered_;
  ev.inflight_bytes = inflight_;
  rc_.on_ack(ev);
  if (acked_ == count_) finish(SenderState::kAcked, now);
}

void Sender::mark_lost(uint32_t i, Nanos now, bool timeout) {
  Chunk& c = chunks_[i];
  const uint64_t before = inflight_;
  inflight_ -= chunk_bytes(i);
  c.state = kLost;
  retx_[(retx_head_ + retx_len_) % retx_.size()] = i;
  ++retx_len_;
  if (!timeout) {
    ++stats_.losses;
    rc_.on_loss({now, chunk_bytes(i), c.sent, before, false});
  }
}

void Sender::detect_losses(Nanos now) {
  // RACK-style: reorder window = srtt * reorder_window, stretched by every spurious
  // retransmission seen, never beyond one srtt.
  const double frac = std::min(1.0, ld_.reorder_window * (1 + reorder_steps_));
  const Nanos reo = static_cast<Nanos>(frac * static_cast<double>(srtt_));
  reo_timer_at_ = kNever;
  while (fifo_len_ > 0) {
    const Flight e = fifo_[fifo_head_];
    const Chunk& c = chunks_[e.chunk];
    if (c.state != kInflight || c.tx_seq != e.tx_seq) {  // acked or sent again since
      fifo_head_ = (fifo_head_ + 1) % fifo_.size();
      --fifo_len_;
      continue;
    }
    const bool by_count = !reordering_seen_ && e.tx_seq + ld_.dup_threshold <= largest_acked_seq_;
    const bool older = e.tx_seq < largest_acked_seq_;
    // At an ACK, a chunk sent reo before the newest delivered one is lost; later, by the reorder
    // timer, one whose round trip has run reo past the newest's (RFC 8985, 6.2). Without the
    // timer the last chunks of a transfer, with no later ACK to judge them, waited for the
    // tail-loss probe: two smoothed RTTs after the last send, plus a round trip.
    const bool by_time = older && (c.sent + reo < rack_xmit_ || c.sent + rack_rtt_ + reo <= now);
    if (!by_count && !by_time) {
      if (older) reo_timer_at_ = c.sent + rack_rtt_ + reo;
      break;
    }
    fifo_head_ = (fifo_head_ + 1) % fifo_.size();
    --fifo_len_;
    mark_lost(e.chunk, now, false);
  }
}

Nanos Sender::poll(Nanos now, PacketSink& tx) {
  if (state_ != SenderState::kRunning) return kNever;
  if (now - last_progress_ >= cfg_.give_up_after) {
    finish(SenderState::kTimedOut, now);
    return kNever;
  }
  // Retransmission timeout: everything in flight is presumed lost.
  if (inflight_ > 0 && now >= rto_deadline_) {
    ++stats_.timeouts;
    const uint64_t before = inflight_;
    Nanos newest = 0;
    while (fifo_len_ > 0) {
      const Flight e = fifo_[fifo_head_];
      fifo_head_ = (fifo_head_ + 1) % fifo_.size();
      --fifo_len_;
      if (chunks_[e.chunk].state == kInflight && chunks_[e.chunk].tx_seq == e.tx_seq) {
        newest = std::max(newest, chunks_[e.chunk].sent);
        mark_lost(e.chunk, now, true);
      }
    }
    rc_.on_loss({now, before, newest, before, true});
    ++backoff_;
    probe_sent_ = false;
    rto_deadline_ = kNever;
    reo_timer_at_ = kNever;
  }
  if (now >= reo_timer_at_) detect_losses(now);
  // Tail-loss probe: silence for ~2 RTTs with data in flight: resend the newest chunk so a
  // SACK (not the RTO) reveals a lost tail.
  Nanos pto_at = kNever;
  if (ld_.tail_loss_probe && inflight_ > 0 && !probe_sent_ && srtt_ > 0 && fifo_len_ > 0) {
    const Nanos pto = std::max<Nanos>(2 * srtt_, 10 * kMilli);
    const Flight e = fifo_[(fifo_head_ + fifo_len_ - 1) % fifo_.size()];
    const Chunk& c = chunks_[e.chunk];
    if (c.state == kInflight && c.tx_seq == e.tx_seq) {
      pto_at = c.sent + pto;
      if (now >= pto_at && pto_at < rto_deadline_ && fifo_len_ < fifo_.size()) {
        ++stats_.probes;
        probe_sent_ = true;
        pto_at = kNever;
        send_chunk(e.chunk, true, now, tx);
      }
    }
    if (probe_sent_) pto_at = kNever;
  }

  // Stale retransmissions (acknowledged since) are dropped here rather than in the loop below,
  // so the controller hears whether there is anything to send before it is asked for the rate.
  while (retx_len_ > 0 && chunks_[retx_[retx_head_]].state != kLost) {
    retx_head_ = (retx_head_ + 1) % retx_.size();
    --retx_len_;
  }
  rc_.on_demand(now, retx_len_ > 0 || next_unsent_ < released_ ? Demand::kBacklogged : Demand::kIdle);
  const uint64_t cwnd = rc_.cwnd_bytes();
  const double rate = rc_.pacing_rate();
  Nanos want = kNever;
  for (uint32_t n = 0; n < cfg_.max_burst; ++n) {
    while (retx_len_ > 0 && chunks_[retx_[retx_head_]].state != kLost) {
      retx_head_ = (retx_head_ + 1) % retx_.size();
      --retx_len_;
    }
    const bool have_retx = retx_len_ > 0;
    if (!have_retx && next_unsent_ >= released_) {
      app_limited_until_ = std::max<uint64_t>(delivered_ + inflight_, 1);
      break;
    }
    const uint32_t i = have_retx ? retx_[retx_head_] : order_[next_unsent_];
    if (inflight_ > 0 && inflight_ + chunk_bytes(i) > cwnd) break;  // an ACK will wake us
    if (rate > 0 && next_send_ > now) {
      want = next_send_;
      break;
    }
    if (fifo_len_ >= fifo_.size()) {
      ++stats_.fifo_full;
      break;
    }
    if (have_retx) {
      retx_head_ = (retx_head_ + 1) % retx_.size();
      --retx_len_;
    } else {
      ++next_unsent_;
    }
    send_chunk(i, have_retx, now, tx);
    if (rate > 0) {
      // Late polls may catch up by at most one chunk's worth, never a burst.
      const Nanos dt = static_cast<Nanos>(chunk_bytes(i) * 1e9 / rate);
      next_send_ = std::max(next_send_, now - dt) + dt;
    }
    if (n + 1 == cfg_.max_burst) want = now;
  }
  Nanos next = std::min({want, inflight_ > 0 ? rto_deadline_ : kNever, pto_at, reo_timer_at_,
                         last_progress_ + cfg_.give_up_after});
  return next;
}

}  // namespace sg::ltp
