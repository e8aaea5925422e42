#include "ltp/control_channel.h"

#include <algorithm>
#include <cstring>

namespace sg::ltp {

ControlChannel::ControlChannel(const ControlConfig& cfg) : cfg_(cfg) {
  cfg_.window = std::max<uint32_t>(cfg_.window, 1);
  cfg_.max_payload = std::min<uint16_t>(std::max<uint16_t>(cfg_.max_payload, 1), wire::kControlMaxPayload);
  tx_slots_.resize(cfg_.window);
  rx_slots_.resize(cfg_.window);
  tx_bytes_.resize(static_cast<size_t>(cfg_.window) * cfg_.max_payload);
  rx_bytes_.resize(static_cast<size_t>(cfg_.window) * cfg_.max_payload);
  pkt_.resize(sizeof(wire::ControlHeader) + cfg_.max_payload);
}

bool ControlChannel::send(std::span<const uint8_t> payload, Nanos now) {
  if (payload.size() > cfg_.max_payload) {
    ++stats_.refused_size;
    return false;
  }
  if (unacked() >= cfg_.window) {
    ++stats_.refused_full;
    return false;
  }
  const uint32_t seq = next_seq_++;
  Slot& s = tx_slots_[seq % cfg_.window];
  s = Slot{};
  s.len = static_cast<uint16_t>(payload.size());
  s.due = now;
  if (!payload.empty()) std::memcpy(tx_data(seq).data(), payload.data(), payload.size());
  return true;
}

Nanos ControlChannel::rto(uint32_t tries) const {
  Nanos base = srtt_ > 0 ? std::max<Nanos>(2 * srtt_, cfg_.min_rto) : cfg_.initial_rto;
  for (uint32_t i = 1; i < tries && base < cfg_.max_rto; ++i) base *= 2;
  return std::min(base, cfg_.max_rto);
}

void ControlChannel::transmit(uint32_t seq, Nanos now, PacketSink& tx) {
  wire::ControlFields f;
  f.src_node = cfg_.local_node;
  f.job = cfg_.job;
  f.channel = cfg_.channel;
  f.seq = seq;
  f.ack = recv_next_;
  f.session = cfg_.session;
  f.send_ts = static_cast<uint64_t>(now);
  std::span<const uint8_t> body;
  if (seq != 0) body = tx_data(seq).first(tx_slots_[seq % cfg_.window].len);
  auto n = wire::build_control(pkt_, f, body);
  if (!n) return;
  tx.send({cfg_.peer_node, 0, wire::MsgType::kControl}, std::span<const uint8_t>(pkt_).first(*n), {});
  ack_pending_ = false;  // every CONTROL packet carries our cumulative ack
  ack_due_ = kNever;
}

void ControlChannel::on_packet(std::span<const uint8_t> msg, Nanos now, const ControlDeliver& deliver) {
  auto m = wire::parse_control(msg);
  if (!m || m->f.src_node != cfg_.peer_node || m->f.channel != cfg_.channel || m->f.job != cfg_.job) {
    ++stats_.malformed;
    return;
  }
  if (m->f.session != peer_session_) {
    if (m->f.session < peer_session_) {
      ++stats_.stale_session;
      return;
    }
    if (peer_session_ != 0) {
      ++stats_.peer_restarts;
      start_over();
    }
    peer_session_ = m->f.session;
  }
  // Their cumulative ack releases our window.
  const uint32_t ack = m->f.ack;
  if (ack > send_base_ && ack <= next_seq_) {
    // RTT from the newest released message that was sent exactly once (Karn).
    const Slot& newest = tx_slots_[(ack - 1) % cfg_.window];
    if (newest.sent && newest.tries == 1) {
      const Nanos sample = now - newest.sent_at;
      if (sample > 0) srtt_ = srtt_ == 0 ? sample : srtt_ + (sample - srtt_) / 8;
    }
    send_base_ = ack;
  }
  const uint32_t seq = m->f.seq;
  if (seq == 0) return;  // pure ack
  if (seq < recv_next_) {
    ++stats_.duplicates;
    ack_pending_ = true;  // our ack was lost: repeat it soon
    ack_due_ = std::min(ack_due_, now);
    return;
  }
  if (seq - recv_next_ >= cfg_.window) {
    ++stats_.out_of_window;
    return;
  }
  Slot& s = rx_slots_[seq % cfg_.window];
  if (s.present) {
    ++stats_.duplicates;
  } else {
    s.present = true;
    s.len = static_cast<uint16_t>(m->payload.size());
    if (!m->payload.empty()) std::memcpy(rx_data(seq).data(), m->payload.data(), m->payload.size());
  }
  while (rx_slots_[recv_next_ % cfg_.window].present) {
    Slot& d = rx_slots_[recv_next_ % cfg_.window];
    d.present = false;
    deliver(rx_data(recv_next_).first(d.len));
    ++stats_.delivered;
    ++recv_next_;
  }
  ack_pending_ = true;
  ack_due_ = std::min(ack_due_, now + cfg_.ack_delay);
}

void ControlChannel::start_over() {
  for (auto& s : tx_slots_) s = Slot{};
  for (auto& s : rx_slots_) s = Slot{};
  send_base_ = next_seq_ = recv_next_ = 1;
  ack_pending_ = false;
  ack_due_ = kNever;
  srtt_ = 0;
  failed_ = false;
}

Nanos ControlChannel::poll(Nanos now, PacketSink& tx) {
  Nanos next = kNever;
  for (uint32_t seq = send_base_; seq != next_seq_; ++seq) {
    Slot& s = tx_slots_[seq % cfg_.window];
    if (s.due <= now) {
      if (s.tries >= cfg_.max_retries) {
        failed_ = true;
        continue;
      }
      if (s.sent) ++stats_.retransmits; else ++stats_.sent;
      s.sent = true;
      s.sent_at = now;
      ++s.tries;
      transmit(seq, now, tx);
      s.due = now + rto(s.tries);
    }
    next = std::min(next, s.due);
  }
  if (ack_pending_ && ack_due_ <= now) {
    transmit(0, now, tx);
    ++stats_.acks_sent;
  }
  if (ack_pending_) next = std::min(next, ack_due_);
  return next;
}

}  // namespace sg::ltp
