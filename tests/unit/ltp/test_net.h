// In-memory network for LTP tests: every LTP message is framed as Ethernet/IPv4/UDP (so
// corruption is caught by the real UDP checksum, as on a wire), then dropped, corrupted,
// duplicated or delayed (reordered) with a seeded Rng, on a fake clock.
#pragma once

#include <cstdint>
#include <cstring>
#include <queue>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"
#include "ltp/types.h"
#include "wire/frame.h"

namespace sg::ltp::testing {

struct Impairment {
  double loss = 0;
  double dup = 0;
  double corrupt = 0;
  double reorder = 0;         // chance a packet gets extra delay in [0, reorder_spread)
  Nanos delay = 1 * kMilli;   // one way
  Nanos reorder_spread = 2 * kMilli;
  bool blackhole = false;     // drop everything (switched on/off by a test)
};

struct Wire {
  std::vector<uint8_t> frame;
  Nanos at = 0;
  uint64_t order = 0;
  int to = 0;  // 0 = receiver side, 1 = sender side
  bool operator>(const Wire& o) const { return at != o.at ? at > o.at : order > o.order; }
};

class Net {
 public:
  Net(uint64_t seed, const FakeClock& clock) : rng_(seed), clock_(clock) {}

  Impairment fwd, back;  // fwd: sender -> receiver; back: receiver -> sender
  uint64_t sent = 0, dropped = 0, corrupted = 0, duplicated = 0;

  void push(int to, const TxMeta& /*meta*/, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
    ++sent;
    Impairment& im = to == 0 ? fwd : back;
    if (im.blackhole || rng_.chance(im.loss)) {
      ++dropped;
      return;
    }
    wire::UdpFrameSpec s;
    s.ip.src = 0x0a000001 + static_cast<uint32_t>(to);
    s.ip.dst = 0x0a000002 - static_cast<uint32_t>(to);
    s.udp.src_port = 5000;
    s.udp.dst_port = 5000;
    const size_t h = wire::udp_frame_headroom(s);
    Wire w;
    w.to = to;
    w.frame.resize(h + head.size() + payload.size());
    std::memcpy(w.frame.data() + h, head.data(), head.size());
    if (!payload.empty()) std::memcpy(w.frame.data() + h + head.size(), payload.data(), payload.size());
    (void)wire::finish_udp_frame(w.frame, s, w.frame.size() - h);
    if (rng_.chance(im.corrupt)) {
      ++corrupted;
      w.frame[rng_.below(w.frame.size())] ^= static_cast<uint8_t>(1 + rng_.below(255));
    }
    w.at = clock_.now() + im.delay + (rng_.chance(im.reorder) ? static_cast<Nanos>(rng_.below(im.reorder_spread)) : 0);
    w.order = order_++;
    if (rng_.chance(im.dup)) {
      ++duplicated;
      Wire d = w;
      d.order = order_++;
      d.at += static_cast<Nanos>(rng_.below(im.reorder_spread + 1));
      q_.push(std::move(d));
    }
    q_.push(std::move(w));
  }

  bool empty() const { return q_.empty(); }
  Nanos next_at() const { return q_.empty() ? kNever : q_.top().at; }
  Wire pop() {
    Wire w = q_.top();
    q_.pop();
    return w;
  }

 private:
  Rng rng_;
  const FakeClock& clock_;
  uint64_t order_ = 0;
  std::priority_queue<Wire, std::vector<Wire>, std::greater<>> q_;
};

// PacketSink that puts packets onto one direction of a Net.
class NetPort final : public PacketSink {
 public:
  NetPort(Net& net, int to) : net_(net), to_(to) {}
  void send(const TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    net_.push(to_, meta, head, payload);
  }

 private:
  Net& net_;
  int to_;
};

// Unwraps a frame from the Net the way the dataplane would; empty span if it fails checks.
inline std::span<const uint8_t> ltp_payload(const std::vector<uint8_t>& frame) {
  auto f = wire::parse_udp_frame(frame);
  if (!f) return {};
  return std::span<const uint8_t>(frame).subspan(f->payload_offset, f->payload_len);
}

// Captures packets for handler-level tests.
class CaptureTx final : public PacketSink {
 public:
  struct Pkt {
    TxMeta meta;
    std::vector<uint8_t> bytes;
  };
  void send(const TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    Pkt p{meta, {head.begin(), head.end()}};
    p.bytes.insert(p.bytes.end(), payload.begin(), payload.end());
    pkts.push_back(std::move(p));
  }
  size_t count(wire::MsgType t) const {
    size_t n = 0;
    for (const auto& p : pkts) n += p.meta.type == t;
    return n;
  }
  const Pkt* last(wire::MsgType t) const {
    for (auto it = pkts.rbegin(); it != pkts.rend(); ++it)
      if (it->meta.type == t) return &*it;
    return nullptr;
  }
  std::vector<Pkt> pkts;
};

}  // namespace sg::ltp::testing
