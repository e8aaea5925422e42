// One sender and one receiver across a drop-tail bottleneck (rate, queue in bytes, one-way
// delay; ACKs come back after the delay alone), on a fake clock. Several transfers run one
// after another on the same Sender and controller, as a gateway's sender to one peer runs
// one per round. For tests of what the rate controller does with a real ACK clock.
#pragma once

#include <cstdint>
#include <cstring>
#include <queue>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"
#include "ltp/bubble_fill.h"
#include "ltp/rate_controller.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"

namespace sg::ltp::testing {

struct TransferTrace {
  Nanos start = 0, end = 0;
  bool ok = false;
  uint64_t drops = 0;        // at the bottleneck queue
  uint64_t retransmits = 0;
  std::vector<std::pair<Nanos, uint32_t>> served;  // (time the bottleneck finished a packet, bytes)
  std::vector<std::pair<Nanos, double>> pacing;    // (time, the controller's pacing rate)

  // Bytes the bottleneck carried in [from, to) after the start, over what it could carry.
  double utilisation(Nanos from, Nanos to, double rate) const {
    uint64_t b = 0;
    for (const auto& [t, n] : served)
      if (t - start >= from && t - start < to) b += n;
    return static_cast<double>(b) / (rate * static_cast<double>(to - from) / 1e9);
  }
  // The pacing rate in force at `at` after the start.
  double pacing_at(Nanos at) const {
    double r = 0;
    for (const auto& [t, v] : pacing) {
      if (t - start > at) break;
      r = v;
    }
    return r;
  }
};

class BottleneckPath {
 public:
  BottleneckPath(RateController& rc, double rate_Bps, Nanos one_way, Nanos queue_time, uint32_t max_chunks)
      : rate_(rate_Bps), delay_(one_way), queue_bytes_(static_cast<uint64_t>(rate_Bps * queue_time / 1e9)), rc_(rc),
        rx_(rx_config(max_chunks)), tx_(tx_config(max_chunks), rc, rng_), sink_(max_chunks * 1024ull, 1024, max_chunks),
        to_rx_(*this, 0), to_tx_(*this, 1) {}

  void set_rate(double rate_Bps) { rate_ = rate_Bps; }
  Nanos now() const { return now_; }
  void idle(Nanos d) { now_ += d; }
  const Sender& sender() const { return tx_; }

  // `chunks` chunks of 1024 payload bytes.
  TransferTrace transfer(uint32_t chunks) {
    data_.assign(static_cast<size_t>(chunks) * 1024, 0x5a);
    sink_.reset();
    rx_.begin_round(1, ++round_, 1, now_, sink_, to_tx_);
    TransferSpec s;
    s.job = 1;
    s.round = round_;
    s.policy_version = 1;
    s.chunk_size = 1024;
    s.data = data_;
    trace_ = TransferTrace{};
    trace_.start = now_;
    if (!tx_.start(s, now_)) return trace_;
    Nanos tw = now_, rw = kNever;
    for (int step = 0; step < 10000000 && !tx_.done(); ++step) {
      const Nanos next = std::min({tw, rw, q_.empty() ? kNever : q_.top().at});
      if (next == kNever) break;
      now_ = std::max(now_, next);
      while (!q_.empty() && q_.top().at <= now_) {
        Pkt p = q_.top();
        q_.pop();
        if (p.to == 0) rx_.on_packet(p.bytes, now_, sink_, to_tx_);
        else tx_.on_packet(p.bytes, now_);
      }
      tw = tx_.poll(now_, to_rx_);
      rw = rx_.poll(now_, sink_, to_tx_);
      if (trace_.pacing.empty() || trace_.pacing.back().second != rc_.pacing_rate())
        trace_.pacing.push_back({now_, rc_.pacing_rate()});
    }
    trace_.end = now_;
    trace_.ok = tx_.state() == SenderState::kAcked || tx_.state() == SenderState::kClosed;
    trace_.retransmits = tx_.stats().retransmits;
    // Let the last ACKs and held packets go: the next transfer starts on an empty path.
    while (!q_.empty()) q_.pop();
    link_free_ = now_;
    return trace_;
  }

 private:
  struct Pkt {
    Nanos at = 0;
    uint64_t order = 0;
    int to = 0;
    std::vector<uint8_t> bytes;
    bool operator>(const Pkt& o) const { return at != o.at ? at > o.at : order > o.order; }
  };
  class Port final : public PacketSink {
   public:
    Port(BottleneckPath& p, int to) : p_(p), to_(to) {}
    void send(const TxMeta& /*meta*/, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
      Pkt k;
      k.to = to_;
      k.bytes.assign(head.begin(), head.end());
      k.bytes.insert(k.bytes.end(), payload.begin(), payload.end());
      p_.push(std::move(k));
    }

   private:
    BottleneckPath& p_;
    int to_;
  };

  static ReceiverConfig rx_config(uint32_t max_chunks) {
    ReceiverConfig c;
    c.local_node = 2;
    c.max_chunks = max_chunks;
    c.early_close.enabled = false;  // everything is delivered: only the rate control differs
    c.early_close.max_loss_fraction = 0;
    return c;
  }
  static SenderConfig tx_config(uint32_t max_chunks) {
    SenderConfig c;
    c.local_node = 1;
    c.peer_node = 2;
    c.max_chunks = max_chunks;
    return c;
  }

  void push(Pkt p) {
    p.order = order_++;
    if (p.to == 1) {
      p.at = now_ + delay_;
      q_.push(std::move(p));
      return;
    }
    // Drop-tail: the bytes still waiting ahead of this packet are the backlog of the server.
    const double size = static_cast<double>(p.bytes.size());
    const Nanos begin = std::max(now_, link_free_);
    const double waiting = static_cast<double>(begin - now_) * rate_ / 1e9;
    if (waiting > static_cast<double>(queue_bytes_)) {
      ++trace_.drops;
      return;
    }
    link_free_ = begin + static_cast<Nanos>(size * 1e9 / rate_);
    trace_.served.push_back({link_free_, static_cast<uint32_t>(p.bytes.size())});
    p.at = link_free_ + delay_;
    q_.push(std::move(p));
  }

  double rate_;
  Nanos delay_;
  uint64_t queue_bytes_;
  RateController& rc_;
  Rng rng_{1};
  Receiver rx_;
  Sender tx_;
  MessageSink sink_;
  Port to_rx_, to_tx_;
  std::vector<uint8_t> data_;
  uint32_t round_ = 0;
  Nanos now_ = 1 * kSecond;
  Nanos link_free_ = 0;
  uint64_t order_ = 0;
  TransferTrace trace_;
  std::priority_queue<Pkt, std::vector<Pkt>, std::greater<>> q_;
};

}  // namespace sg::ltp::testing
