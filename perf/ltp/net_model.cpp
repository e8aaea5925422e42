#include "net_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <queue>
#include <vector>

#include "common/rng.h"
#include "ltp/aimd_controller.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"

namespace sg::perfmodel {
namespace {

using ltp::kNever;

struct Packet {
  std::vector<uint8_t> bytes;  // the LTP message
  uint32_t sender = 0;         // which sender it comes from / goes to
};

// A serialising link with a FIFO (optionally bounded, drop-tail).
struct Link {
  double bps = 1e9;
  uint64_t buffer = 0;  // 0 = unbounded
  uint64_t queued = 0;
  uint32_t overhead = 0;
  std::deque<uint32_t> q;  // packet ids
  bool busy = false;
  Nanos tx_time(const Packet& p) const {
    return static_cast<Nanos>((p.bytes.size() + overhead) * 8.0 * 1e9 / bps);
  }
};

enum class Ev : uint8_t { kNicDone, kSwitchArrive, kSwitchDone, kRxNicDone, kSenderArrive, kWakeSender, kWakeReceiver };

struct Event {
  Nanos at;
  uint64_t seq;
  Ev type;
  uint32_t a;  // sender index or packet id
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

class Model;

class SenderPort final : public ltp::PacketSink {
 public:
  SenderPort(Model& m, uint32_t i) : m_(m), i_(i) {}
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;

 private:
  Model& m_;
  uint32_t i_;
};

class ReceiverPort final : public ltp::PacketSink {
 public:
  explicit ReceiverPort(Model& m) : m_(m) {}
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;

 private:
  Model& m_;
};

class CountingSink final : public ltp::ReceiverSink {
 public:
  void on_chunk(const ltp::ChunkRef&, std::span<const uint8_t>) override { ++chunks; }
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override { ++bubbles; }
  void on_transfer_end(const ltp::TransferSummary& s) override {
    ++ended;
    last_end = std::max(last_end, s.closed);
    received += s.received;
    total += s.chunk_count;
    early += s.reason == ltp::CloseReason::kEarlyClose;
  }
  uint64_t chunks = 0, bubbles = 0, ended = 0, received = 0, total = 0, early = 0;
  Nanos last_end = 0;
};

class Model {
 public:
  explicit Model(const ModelParams& p) : p_(p), rng_(p.seed), rx_port_(*this) {
    const uint64_t chunks = (p.bytes_per_sender + p.chunk - 1) / p.chunk;
    ltp::ReceiverConfig rc;
    rc.local_node = 0;
    rc.max_transfers = p.senders + 4;
    rc.max_chunks = static_cast<uint32_t>(chunks);
    rc.early_close.enabled = p.ltp;  // the baseline is reliable: it waits for every byte
    rc.abandon_after = p.time_limit;
    rx_ = std::make_unique<ltp::Receiver>(rc);
    rx_nic_.bps = p.link_bps;
    rx_nic_.overhead = p.wire_overhead;
    port_.bps = p.link_bps;
    port_.buffer = p.switch_buffer;
    port_.overhead = p.wire_overhead;
    data_.resize(p.bytes_per_sender);
    for (size_t i = 0; i < data_.size(); i += 64) data_[i] = static_cast<uint8_t>(i >> 6);
    for (uint32_t i = 0; i < p.senders; ++i) {
      auto& s = senders_.emplace_back(std::make_unique<SenderState>(*this, i));
      ltp::SenderConfig sc;
      sc.local_node = static_cast<uint16_t>(i + 1);
      sc.peer_node = 0;
      sc.max_chunks = static_cast<uint32_t>(chunks);
      sc.give_up_after = p.time_limit;
      sc.paths[0] = {0, 1};
      ltp::DeliveryRateConfig dc;
      // Pace in LTP bytes so that, with framing, the NIC is exactly full.
      dc.max_rate = p.link_bps / 8.0 * (p.chunk + 56.0) / (p.chunk + 56.0 + p.wire_overhead);
      s->ltp_rc = std::make_unique<ltp::DeliveryRateController>(dc);
      s->aimd_rc = std::make_unique<ltp::AimdController>();
      ltp::RateController& rc_ref = p.ltp ? static_cast<ltp::RateController&>(*s->ltp_rc) : *s->aimd_rc;
      s->rng = std::make_unique<Rng>(p.seed * 131 + i);
      s->sender = std::make_unique<ltp::Sender>(sc, rc_ref, *s->rng);
      s->nic.bps = p.link_bps;
      s->nic.overhead = p.wire_overhead;
    }
  }

  ModelResult run() {
    rx_->begin_round(1, 1, 1, 0, sink_, rx_port_);
    for (uint32_t i = 0; i < p_.senders; ++i) {
      ltp::TransferSpec t;
      t.job = 1;
      t.round = 1;
      t.policy_version = 1;
      t.shard = 0;
      t.chunk_size = p_.chunk;
      t.data = data_;
      senders_[i]->sender->start(t, 0);
      poll_sender(i);
    }
    ModelResult r;
    while (!events_.empty() && sink_.ended < p_.senders) {
      Event e = events_.top();
      events_.pop();
      if (e.at > p_.time_limit) break;
      now_ = e.at;
      ++r.events;
      handle(e);
    }
    r.finished = sink_.ended == p_.senders;
    r.completion = sink_.last_end;
    r.delivered_fraction = sink_.total ? static_cast<double>(sink_.received) / sink_.total : 0;
    for (auto& s : senders_) {
      r.data_packets += s->sender->stats().data_sent;
      r.retransmits += s->sender->stats().retransmits;
      r.timeouts += s->sender->stats().timeouts;
    }
    r.buffer_drops = buffer_drops_;
    r.random_drops = random_drops_;
    r.early_closes = sink_.early;
    return r;
  }

  void from_sender(uint32_t i, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
    const uint32_t id = alloc(i, head, payload);
    enqueue_nic(senders_[i]->nic, id, Ev::kNicDone, i);
  }
  void from_receiver(uint16_t peer, std::span<const uint8_t> head) {
    if (peer == 0 || peer > p_.senders) return;
    const uint32_t id = alloc(peer - 1u, head, {});
    enqueue_nic(rx_nic_, id, Ev::kRxNicDone, 0);
  }

 private:
  struct SenderState {
    SenderState(Model& m, uint32_t i) : port(m, i) {}
    SenderPort port;
    Link nic;
    std::unique_ptr<ltp::DeliveryRateController> ltp_rc;
    std::unique_ptr<ltp::AimdController> aimd_rc;
    std::unique_ptr<Rng> rng;
    std::unique_ptr<ltp::Sender> sender;
    Nanos wake = kNever;
  };

  uint32_t alloc(uint32_t sender, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
    uint32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<uint32_t>(pkts_.size());
      pkts_.emplace_back();
    }
    Packet& p = pkts_[id];
    p.sender = sender;
    p.bytes.resize(head.size() + payload.size());
    std::memcpy(p.bytes.data(), head.data(), head.size());
    if (!payload.empty()) std::memcpy(p.bytes.data() + head.size(), payload.data(), payload.size());
    return id;
  }
  void release(uint32_t id) { free_.push_back(id); }

  void push(Nanos at, Ev type, uint32_t a) { events_.push({at, seq_++, type, a}); }

  // NICs: unbounded FIFO (the sender's own window bounds it). `tag` is passed to the done event.
  void enqueue_nic(Link& l, uint32_t id, Ev done, uint32_t tag) {
    l.q.push_back(id);
    if (!l.busy) {
      l.busy = true;
      push(now_ + l.tx_time(pkts_[id]), done, tag);
    }
  }
  uint32_t finish_tx(Link& l, Ev done, uint32_t tag) {
    const uint32_t id = l.q.front();
    l.q.pop_front();
    if (!l.q.empty()) {
      push(now_ + l.tx_time(pkts_[l.q.front()]), done, tag);
    } else {
      l.busy = false;
    }
    return id;
  }

  void handle(const Event& e) {
    switch (e.type) {
      case Ev::kNicDone: {
        const uint32_t id = finish_tx(senders_[e.a]->nic, Ev::kNicDone, e.a);
        if (rng_.chance(p_.loss)) {
          ++random_drops_;
          release(id);
        } else {
          push(now_ + p_.rtt / 2, Ev::kSwitchArrive, id);
        }
        break;
      }
      case Ev::kSwitchArrive: {
        const uint64_t len = pkts_[e.a].bytes.size() + p_.wire_overhead;
        if (port_.buffer && port_.queued + len > port_.buffer) {
          ++buffer_drops_;
          release(e.a);
          break;
        }
        port_.queued += len;
        port_.q.push_back(e.a);
        if (!port_.busy) {
          port_.busy = true;
          push(now_ + port_.tx_time(pkts_[e.a]), Ev::kSwitchDone, 0);
        }
        break;
      }
      case Ev::kSwitchDone: {
        const uint32_t id = finish_tx(port_, Ev::kSwitchDone, 0);
        port_.queued -= pkts_[id].bytes.size() + p_.wire_overhead;
        rx_->on_packet(pkts_[id].bytes, now_, sink_, rx_port_);
        release(id);
        poll_receiver();
        break;
      }
      case Ev::kRxNicDone: {
        const uint32_t id = finish_tx(rx_nic_, Ev::kRxNicDone, 0);
        if (rng_.chance(p_.loss)) {
          ++random_drops_;
          release(id);
        } else {
          push(now_ + p_.rtt / 2, Ev::kSenderArrive, id);
        }
        break;
      }
      case Ev::kSenderArrive: {
        const uint32_t i = pkts_[e.a].sender;
        senders_[i]->sender->on_packet(pkts_[e.a].bytes, now_);
        release(e.a);
        poll_sender(i);
        break;
      }
      case Ev::kWakeSender:
        if (senders_[e.a]->wake == now_) {
          senders_[e.a]->wake = kNever;
          poll_sender(e.a);
        }
        break;
      case Ev::kWakeReceiver:
        if (rx_wake_ == now_) {
          rx_wake_ = kNever;
          poll_receiver();
        }
        break;
    }
  }

  void poll_sender(uint32_t i) {
    auto& s = *senders_[i];
    const Nanos next = s.sender->poll(now_, s.port);
    if (next != kNever && next != s.wake) {
      s.wake = std::max(next, now_ + 1);
      push(s.wake, Ev::kWakeSender, i);
    }
  }
  void poll_receiver() {
    const Nanos next = rx_->poll(now_, sink_, rx_port_);
    if (next != kNever && next != rx_wake_) {
      rx_wake_ = std::max(next, now_ + 1);
      push(rx_wake_, Ev::kWakeReceiver, 0);
    }
  }

  ModelParams p_;
  Rng rng_;
  Nanos now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::vector<Packet> pkts_;
  std::vector<uint32_t> free_;
  std::vector<uint8_t> data_;
  std::vector<std::unique_ptr<SenderState>> senders_;
  std::unique_ptr<ltp::Receiver> rx_;
  ReceiverPort rx_port_;
  CountingSink sink_;
  Link rx_nic_, port_;
  Nanos rx_wake_ = kNever;
  uint64_t buffer_drops_ = 0, random_drops_ = 0;
};

void SenderPort::send(const ltp::TxMeta&, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
  m_.from_sender(i_, head, payload);
}
void ReceiverPort::send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t>) {
  m_.from_receiver(meta.peer_node, head);
}

}  // namespace

ModelResult run_model(const ModelParams& p) {
  Model m(p);
  return m.run();
}

std::string describe(const ModelParams& p) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%u sender(s) x %.1f MB -> 1 receiver; every NIC and the switch port %.1f Gbit/s; base RTT %.1f ms; "
                "switch port buffer %lu KB drop-tail; random loss on each WAN segment (data and ACK directions); "
                "%u B chunks + 56 B LTP header + %u B framing per packet",
                p.senders, p.bytes_per_sender / 1e6, p.link_bps / 1e9, p.rtt / 1e6,
                static_cast<unsigned long>(p.switch_buffer / 1024), p.chunk, p.wire_overhead);
  return buf;
}

}  // namespace sg::perfmodel
