#include "sim/gateway_site.h"

#include <algorithm>

#include "sync/hop_sample.h"
#include "wire/ltp_codec.h"

namespace sg::sim {

GatewaySite::GatewaySite(GatewaySiteConfig cfg, const topo::Plan& initial)
    : cfg_(std::move(cfg)), sync_(cfg_.sync), plane_(cfg_.control, initial), out_(*this) {
  sent_to_.assign(cfg_.sync.site_nodes.size(), 0);
  sync_.set_sample_sink(this);
  sync_.set_plan(initial, version_);
}

int GatewaySite::index_of(uint16_t node) const {
  const auto& nodes = cfg_.sync.site_nodes;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == node) return static_cast<int>(i);
  return -1;
}

void GatewaySite::CountingSink::send(const ltp::TxMeta& meta, std::span<const uint8_t> head,
                                     std::span<const uint8_t> payload) {
  if (meta.type == wire::MsgType::kData) {
    const int j = s_.index_of(meta.peer_node);
    if (j >= 0) {
      s_.sent_to_[j] += head.size() + payload.size();
      s_.sent_total_ += head.size() + payload.size();
    }
  }
  inner_->send(meta, head, payload);
}

void GatewaySite::on_sample(const ltp::ArrivalSample& s) {
  const bool relayed = (s.path_id & wire::kPathRelayed) != 0;
  const int hop = index_of(relayed ? relay_hop_ : s.src_node);
  if (hop < 0) return;
  plane_.estimator().on_arrival(sync::arrival_hop_sample(
      s, static_cast<uint16_t>(hop), static_cast<uint16_t>(cfg_.control.controller.self), relayed));
}

void GatewaySite::on_relay(std::span<const uint8_t> msg, Nanos now) {
  // As the gateway's relay.cpp: the first hop (origin -> us) carried it.
  const auto d = wire::parse_data(msg);
  if (!d) return;
  const int from = index_of(d->f.src_node);
  if (from < 0) return;
  plane_.estimator().on_arrival(sync::relay_hop_sample(static_cast<uint16_t>(from),
                                                       static_cast<uint16_t>(cfg_.control.controller.self),
                                                       static_cast<uint32_t>(msg.size()), d->f.send_ts, now,
                                                       (d->f.flags & wire::kFlagAppLimited) != 0));
}

void GatewaySite::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  out_.bind(&tx);
  auto common = wire::parse_common(msg);
  if (common && (common->type == wire::MsgType::kControl || common->type == wire::MsgType::kProbe)) {
    plane_.on_message(msg, now);
  } else {
    sync_.on_packet(msg, now, out_);
  }
}

void GatewaySite::try_begin(Nanos now, ltp::PacketSink& tx) {
  if (!pending_) return;
  const auto a = plane_.begin_round(round_);
  if (!a) {
    ++gate_waits_;
    return;
  }
  if (a->changed) {
    version_ = static_cast<uint32_t>(a->version + 1);
    sync_.set_plan(*a->plan, version_);
    if (cfg_.on_switch) cfg_.on_switch(*a->plan);
  }
  pending_ = false;
  started_ = sync_.begin_round(round_, local_, now, tx);
}

bool GatewaySite::begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) {
  out_.bind(&tx);
  if (started_ && sync_.round_done()) completed_ = std::max(completed_, round_);
  round_ = round;
  local_ = local;
  pending_ = true;
  started_ = false;
  try_begin(now, out_);
  return true;
}

Nanos GatewaySite::poll(Nanos now, ltp::PacketSink& tx) {
  out_.bind(&tx);
  try_begin(now, out_);
  Nanos next = ltp::kNever;
  if (started_) {
    next = sync_.poll(now, out_);
    if (sync_.round_done()) completed_ = std::max(completed_, round_);
  }
  if (now >= next_tick_) {
    const Nanos plane_next = plane_.tick(now, completed_, sent_to_, sent_total_, tx);
    next_tick_ = std::min(now + cfg_.control_interval, std::max(plane_next, now + 1));
  }
  // While waiting for approval, come back at the next tick (the answer arrives as a packet).
  return std::min(next, next_tick_);
}

ParticipantStats GatewaySite::stats() const {
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

}  // namespace sg::sim
